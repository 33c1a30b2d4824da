"""Opening source files: plain or gzip (by magic bytes), as UTF-8 text (bad bytes replaced, never fatal) or bytes."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO

GZIP_MAGIC = b"\x1f\x8b"


def open_binary(path: str | Path) -> IO[bytes]:
    """The file's bytes, decompressed if it is gzip (whatever its name); for parsers that decode themselves (XML)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    with path.open("rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else path.open("rb")


def open_text(path: str | Path) -> IO[str]:
    return io.TextIOWrapper(open_binary(path), encoding="utf-8", errors="replace", newline="")
