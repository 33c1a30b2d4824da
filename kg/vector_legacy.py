"""Reading the single-file vector indexes of medkg before 0.9 (``<name>.faiss`` and ``<name>.ids.json``), so
that `VectorIndex.open` can move them into its segment store once; nothing writes this format any more."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

LEGACY_FORMAT = 1
LEGACY_SUFFIXES = (".faiss", ".ids.json", ".ids.json.pending")


class LegacyIndexError(RuntimeError):
    """A legacy pair that cannot be read (missing partner, corrupt, wrong dimension)."""


@dataclass
class LegacyIndex:
    ids: list[str]
    fingerprints: list[str | None]
    vectors: np.ndarray  # float32, normalised, in the order of ``ids``
    model: str | None


def legacy_paths(directory: Path, name: str) -> list[Path]:
    return [directory / f"{name}{suffix}" for suffix in LEGACY_SUFFIXES]


def has_legacy(directory: Path, name: str) -> bool:
    return any(p.exists() for p in legacy_paths(directory, name)[:2])


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _read_id_map(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        return {
            "format": meta["format"],
            "dim": int(meta["dim"]),
            "ids": [(str(s), int(f), None if fp is None else str(fp)) for s, f, fp in meta["ids"]],
            "sha256": str(meta["sha256"]),
            "model": None if meta.get("model") is None else str(meta["model"]),
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LegacyIndexError(f"{path} is not a valid id map: {exc}") from exc


def read_legacy(directory: Path, name: str, dim: int) -> LegacyIndex:
    """The vectors of a legacy pair, checked as the old format was checked (the index file's SHA-256
    against its id map, a pending id map of a save killed after its commit point, the dimension)."""
    index_path, ids_path, pending_path = legacy_paths(directory, name)
    if not index_path.exists() or not (ids_path.exists() or pending_path.exists()):
        missing = ids_path if index_path.exists() else index_path
        raise LegacyIndexError(f"{missing} is missing (its partner file exists)")
    digest = _sha256(index_path)
    meta, where = (_read_id_map(ids_path), ids_path) if ids_path.exists() else (None, ids_path)
    if (meta is None or meta["sha256"] != digest) and pending_path.exists():
        try:
            pending = _read_id_map(pending_path)
        except LegacyIndexError:
            pending = None
        if pending is not None and pending["sha256"] == digest:
            meta, where = pending, pending_path
    if meta is None:
        raise LegacyIndexError(f"{ids_path} is missing (its partner file exists)")
    if meta["format"] != LEGACY_FORMAT:
        raise LegacyIndexError(f"{where} has format {meta['format']}, expected {LEGACY_FORMAT}")
    if meta["dim"] != dim:
        raise LegacyIndexError(f"{index_path} has dimension {meta['dim']}, but dimension {dim} was asked")
    if meta["sha256"] != digest:
        raise LegacyIndexError(f"{index_path} is corrupt: its SHA-256 does not match {where}")
    try:
        index = faiss.read_index(str(index_path))
    except RuntimeError as exc:
        raise LegacyIndexError(f"{index_path} cannot be read by FAISS: {exc}") from exc
    entries = meta["ids"]
    if index.ntotal != len(entries):
        raise LegacyIndexError(f"{index_path} holds {index.ntotal} vectors but its id map {len(entries)}")
    if isinstance(index, faiss.IndexIVF) and index.direct_map.type == faiss.DirectMap.NoMap:
        index.set_direct_map_type(faiss.DirectMap.Hashtable)
    fids = np.asarray([f for _, f, _ in entries], dtype=np.int64)
    vectors = index.reconstruct_batch(fids) if len(fids) else np.zeros((0, dim), np.float32)
    return LegacyIndex([s for s, _, _ in entries], [fp for _, _, fp in entries], vectors, meta["model"])
