"""Helpers for the SQLite side tables (passages, documents, reports, images)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

__all__ = ["IN_CHUNK", "in_chunks"]

IN_CHUNK = 500  # ids per ``IN (...)``: well under SQLite's limit on bound parameters

Id = TypeVar("Id", str, bytes)


def in_chunks(ids: Sequence[Id], size: int = IN_CHUNK) -> Iterator[tuple[list[Id], str]]:
    """``ids`` in chunks small enough for one ``... IN ({marks})`` each: ``(chunk, marks)`` with
    ``marks`` the chunk's ``?`` placeholders."""
    for start in range(0, len(ids), size):
        chunk = list(ids[start : start + size])
        yield chunk, ",".join("?" * len(chunk))
