"""Persistent FAISS vector indexes keyed by string ids (entities, passages, images): cosine search,
fingerprints to skip unchanged vectors, crash-safe saves, and a stamp of the model that made the vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import faiss
import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["VectorIndex", "VectorIndexError"]

FORMAT_VERSION = 1
STALE_TEMP_S = 600  # a temporary file of a save untouched this long was left by a killed process
MIN_POINTS_PER_CENTROID = 39  # FAISS k-means wants at least this many training points per list


class VectorIndexError(RuntimeError):
    """An index or id-map file that cannot be used (missing, corrupt, mismatched, wrong dimension)."""


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _fsync(path: Path) -> None:
    if os.name == "nt" and path.is_dir():  # directories cannot be opened for fsync on Windows
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class VectorIndex:
    """A FAISS index of normalised vectors keyed by string ids, persisted in ``directory`` as
    ``<name>.faiss`` and ``<name>.ids.json`` (the id map: string id -> int64 FAISS id from a counter, a
    replaced id keeping its own; fingerprints; the index file's SHA-256; the ``model``).

    Vectors are L2-normalised float32, so inner product is cosine. ``model`` names what produced the
    vectors: ``open`` refuses an index of another model (its vectors live in another space, even at the
    same dimension); an id map without one opens under any model and records the next save's."""

    def __init__(
        self,
        directory: Path | str,
        name: str,
        dim: int,
        *,
        flat_max: int = 1_000_000,
        nprobe: int = 16,
        model: str | None = None,
    ) -> None:
        if not name or Path(name).name != name:
            raise ValueError(f"index name must be a plain file name, got {name!r}")
        if dim <= 0 or flat_max <= 0 or nprobe <= 0:
            raise ValueError("dim, flat_max and nprobe must be positive")
        self.directory, self.name, self.dim = Path(directory), name, dim
        self.flat_max, self.nprobe = flat_max, nprobe
        self.model = model  # what produced the vectors (class docstring); None: not checked
        self.index_path = self.directory / f"{name}.faiss"
        self.ids_path = self.directory / f"{name}.ids.json"
        self.pending_ids_path = self.directory / f"{name}.ids.json.pending"  # see save()
        self._lock = threading.RLock()
        self._index: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self._kind = "flat"
        self._fids: dict[str, int] = {}
        self._sids: dict[int, str] = {}
        self._fps: dict[str, str | None] = {}
        self._next_id = 0

    @classmethod
    def open(
        cls,
        directory: Path | str,
        name: str,
        dim: int,
        *,
        flat_max: int = 1_000_000,
        nprobe: int = 16,
        model: str | None = None,
    ) -> VectorIndex:
        """Load ``<directory>/<name>.faiss`` and its id map if they exist, else return an empty index.
        ``VectorIndexError`` if they were built by a ``model`` other than the one given."""
        self = cls(directory, name, dim, flat_max=flat_max, nprobe=nprobe, model=model)
        self._sweep_temp_files()
        has_index, has_ids = self.index_path.exists(), self.ids_path.exists()
        # An index file without an id map but with a pending one: the first save was killed after its commit point.
        if has_index != has_ids and not (has_index and self.pending_ids_path.exists()):
            missing = self.ids_path if has_index else self.index_path
            raise VectorIndexError(f"{missing} is missing (its partner file exists)")
        if has_index:
            self._load()
        return self

    def _sweep_temp_files(self, older_than_s: float = STALE_TEMP_S) -> list[Path]:
        """Delete this index's temporary files that a save killed before its end left behind (a save
        writes, fsyncs and renames them within seconds; one untouched for ``older_than_s`` is no live
        save's). Returns what it deleted."""
        swept = []
        if self.directory.is_dir():
            for path in self.directory.glob(f".{self.name}.*.tmp"):
                try:
                    if time.time() - path.stat().st_mtime > older_than_s:
                        path.unlink()
                        swept.append(path)
                except FileNotFoundError:  # renamed or removed meanwhile
                    continue
        if swept:
            logger.warning("removed %d temporary file(s) of an interrupted save of %s", len(swept), self.index_path)
        return swept

    @classmethod
    def set_aside(cls, directory: Path | str, name: str) -> list[Path]:
        """Rename ``<name>.faiss`` and ``<name>.ids.json`` (and ``<name>.ids.json.pending``: those that exist)
        to ``...damaged-<time>``, so that a damaged index can be rebuilt without deleting what was there; returns
        the new paths."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        moved = []
        for suffix in (".faiss", ".ids.json", ".ids.json.pending"):
            path = Path(directory) / f"{name}{suffix}"
            if path.exists():
                target = path.with_name(f"{path.name}.damaged-{stamp}")
                os.replace(path, target)
                moved.append(target)
        return moved

    def fit_kind(self) -> bool:
        """Re-create the index if its kind no longer fits its size (exact up to ``flat_max``, IVF
        above: the design's "chosen by size"); True if it did."""
        if (self.kind == "flat") == (len(self) <= self.flat_max):
            return False
        self.rebuild()
        return True

    @staticmethod
    def _read_id_map(path: Path) -> dict[str, Any]:
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            return {
                "format": meta["format"],
                "dim": int(meta["dim"]),
                "index_kind": meta["index_kind"],
                "ids": [(str(s), int(f), None if fp is None else str(fp)) for s, f, fp in meta["ids"]],
                "next_id": int(meta["next_id"]),
                "sha256": str(meta["sha256"]),
                "model": None if meta.get("model") is None else str(meta["model"]),
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VectorIndexError(f"{path} is not a valid id map: {exc}") from exc

    def _load(self) -> None:
        digest = _sha256(self.index_path)
        ids_path, meta = self.ids_path, None
        if self.ids_path.exists():
            meta = self._read_id_map(self.ids_path)
        if (meta is None or meta["sha256"] != digest) and self.pending_ids_path.exists():
            # A save killed after its commit point (the index file's rename): the pending id map is the current one.
            try:
                pending = self._read_id_map(self.pending_ids_path)
            except VectorIndexError:
                pending = None
            if pending is not None and pending["sha256"] == digest:
                ids_path, meta = self.pending_ids_path, pending
        if meta is None:
            raise VectorIndexError(f"{self.ids_path} is missing (its partner file exists)")
        version, stored_dim, kind = meta["format"], meta["dim"], meta["index_kind"]
        entries, next_id, checksum = meta["ids"], meta["next_id"], meta["sha256"]
        if version != FORMAT_VERSION:
            raise VectorIndexError(f"{ids_path} has format {version}, expected {FORMAT_VERSION}")
        if stored_dim != self.dim:
            raise VectorIndexError(f"{self.index_path} has dimension {stored_dim}, but dimension {self.dim} was asked")
        if digest != checksum:
            raise VectorIndexError(f"{self.index_path} is corrupt: its SHA-256 does not match {ids_path}")
        if meta["model"] is not None and self.model is not None and meta["model"] != self.model:
            raise VectorIndexError(
                f"{self.index_path} holds vectors of model {meta['model']!r}, but this process embeds with "
                f"{self.model!r}: they cannot be compared"
            )
        if self.model is None:  # not checked: keep the model the file names
            self.model = meta["model"]
        try:
            index = faiss.read_index(str(self.index_path))
        except RuntimeError as exc:
            raise VectorIndexError(f"{self.index_path} cannot be read by FAISS: {exc}") from exc
        if not isinstance(index, faiss.IndexIDMap2 if kind == "flat" else faiss.IndexIVFFlat):
            raise VectorIndexError(f"{self.index_path} holds {type(index).__name__}, but {ids_path} says {kind}")
        if index.d != self.dim:
            raise VectorIndexError(f"{self.index_path} has dimension {index.d}, but dimension {self.dim} was asked")
        if index.ntotal != len(entries):
            raise VectorIndexError(f"{self.index_path} holds {index.ntotal} vectors but its id map {len(entries)}")
        self._fids = {s: f for s, f, _ in entries}
        self._sids = {f: s for s, f, _ in entries}
        if not len(self._fids) == len(self._sids) == len(entries):
            raise VectorIndexError(f"{ids_path} has duplicate ids")
        self._fps = {s: fp for s, _, fp in entries}
        self._index, self._kind, self._next_id = index, kind, next_id
        if kind == "ivf":
            index.nprobe = min(self.nprobe, index.nlist)

    def _prepare(self, vectors: np.ndarray, what: str) -> np.ndarray:
        array = np.array(vectors, dtype=np.float32, copy=True, order="C")
        if array.ndim != 2 or array.shape[1] != self.dim:
            raise ValueError(f"{what} must have shape (n, {self.dim}), got {array.shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"{what} contain NaN or infinite values")
        faiss.normalize_L2(array)
        return array

    def _remove_fids(self, fids: list[int]) -> None:
        if not fids:
            return
        arr = np.asarray(fids, dtype=np.int64)
        # An IVF index with a hashtable direct map only removes through an IDSelectorArray.
        selector = faiss.IDSelectorArray if self._kind == "ivf" else faiss.IDSelectorBatch
        self._index.remove_ids(selector(arr.size, faiss.swig_ptr(arr)))

    def upsert(self, ids: list[str], vectors: np.ndarray, fingerprints: list[str] | None = None) -> int:
        """Add or replace vectors; ids whose given fingerprint equals the stored one are skipped.

        Returns how many vectors were added or replaced. Duplicate ids in one call: the last one wins."""
        array = self._prepare(vectors, "vectors")
        if len(ids) != len(array) or (fingerprints is not None and len(fingerprints) != len(ids)):
            raise ValueError(f"got {len(ids)} ids, {len(array)} vectors and {len(fingerprints or ids)} fingerprints")
        if len(array) and (np.linalg.norm(array, axis=1) < 0.5).any():
            raise ValueError("vectors must be non-zero")
        with self._lock:
            last = {sid: i for i, sid in enumerate(ids)}
            fps = fingerprints or [None] * len(ids)
            rows = [i for sid, i in last.items() if fps[i] is None or self._fps.get(sid) != fps[i]]
            if not rows:
                return 0
            self._remove_fids([self._fids[ids[i]] for i in rows if ids[i] in self._fids])
            fids = []
            for i in rows:
                if ids[i] not in self._fids:
                    self._fids[ids[i]], self._sids[self._next_id] = self._next_id, ids[i]
                    self._next_id += 1
                self._fps[ids[i]] = fps[i]
                fids.append(self._fids[ids[i]])
            self._index.add_with_ids(array[rows], np.asarray(fids, dtype=np.int64))
            return len(rows)

    def needs_update(self, ids: list[str], fingerprints: list[str]) -> list[int]:
        """Indices of ``ids`` whose stored fingerprint is missing or differs from ``fingerprints``."""
        if len(ids) != len(fingerprints):
            raise ValueError(f"got {len(ids)} ids and {len(fingerprints)} fingerprints")
        with self._lock:
            return [
                i
                for i, (sid, fp) in enumerate(zip(ids, fingerprints, strict=True))
                if fp is None or self._fps.get(sid) != fp
            ]

    def remove(self, ids: Iterable[str]) -> int:
        """Remove the given ids (unknown ids are ignored); returns how many were removed."""
        with self._lock:
            present = list(dict.fromkeys(sid for sid in ids if sid in self._fids))
            self._remove_fids([self._fids[sid] for sid in present])
            for sid in present:
                del self._sids[self._fids.pop(sid)], self._fps[sid]
            return len(present)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` ids by cosine similarity for each query, best first. A 1-D query is one query."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        query = np.asarray(queries)
        array = self._prepare(query[None, :] if query.ndim == 1 else query, "queries")
        with self._lock:
            if self._index.ntotal == 0 or len(array) == 0:
                return [[] for _ in range(len(array))]
            scores, fids = self._index.search(array, min(k, self._index.ntotal))
            return [
                [(self._sids[int(f)], float(s)) for s, f in zip(row_s, row_f, strict=True) if f >= 0]
                for row_s, row_f in zip(scores, fids, strict=True)
            ]

    def vector(self, id: str) -> np.ndarray | None:
        """The stored (normalised) vector of ``id``, or None."""
        with self._lock:
            fid = self._fids.get(id)
            return None if fid is None else self._index.reconstruct(fid)

    def rebuild(self) -> None:
        """Re-create the index from its stored vectors: exact flat up to ``flat_max`` vectors, IVF above
        (nlist ~ 4*sqrt(n), a hashtable direct map so vectors stay retrievable and removable)."""
        with self._lock:
            fids = np.asarray(list(self._sids), dtype=np.int64)
            vectors = self._index.reconstruct_batch(fids) if len(fids) else np.zeros((0, self.dim), np.float32)
            n = len(fids)
            if n <= self.flat_max:
                index, kind = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim)), "flat"
            else:
                nlist = max(1, min(int(4 * math.sqrt(n)), n // MIN_POINTS_PER_CENTROID))
                index = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
                index.train(vectors)
                index.set_direct_map_type(faiss.DirectMap.Hashtable)
                index.nprobe, kind = min(self.nprobe, nlist), "ivf"
            if n:
                index.add_with_ids(vectors, fids)
            self._index, self._kind = index, kind

    def save(self) -> None:
        """Atomically write the index and its id map as a pair (temp files in the same directory, fsync,
        os.replace): the id map goes to ``<name>.ids.json.pending``, the index file to ``<name>.faiss`` (the
        commit point), then the pending id map to ``<name>.ids.json``. Killed between the last two renames,
        ``open`` finds the pending id map whose checksum matches the new index file; killed before the
        commit point, the old pair stands (a stale pending map does not match and is replaced next time).
        File names and id-map format are those of earlier versions, so their pairs open unchanged."""
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp_index, tmp_ids = self._tempfile(".faiss"), self._tempfile(".ids.json")
            committing = False
            try:
                faiss.write_index(self._index, str(tmp_index))
                _fsync(tmp_index)
                meta = {
                    "format": FORMAT_VERSION,
                    "dim": self.dim,
                    "index_kind": self._kind,
                    "ids": [[sid, fid, self._fps[sid]] for sid, fid in self._fids.items()],
                    "next_id": self._next_id,
                    "sha256": _sha256(tmp_index),
                    "model": self.model,
                }
                tmp_ids.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
                _fsync(tmp_ids)
                os.replace(tmp_ids, self.pending_ids_path)
                _fsync(self.directory)  # the pending id map is on disk before the index file it describes
                committing = True
                os.replace(tmp_index, self.index_path)
                os.replace(self.pending_ids_path, self.ids_path)
                _fsync(self.directory)
            finally:
                tmp_index.unlink(missing_ok=True)
                tmp_ids.unlink(missing_ok=True)
                if not committing:  # failed before the commit point: the old pair stands, its pending map goes
                    self.pending_ids_path.unlink(missing_ok=True)

    def _tempfile(self, suffix: str) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{self.name}.", suffix=f"{suffix}.tmp", dir=self.directory)
        os.close(fd)
        return Path(name)

    @property
    def kind(self) -> str:
        """``"flat"`` (exact) or ``"ivf"``."""
        return self._kind

    def __len__(self) -> int:
        with self._lock:
            return len(self._fids)

    def __contains__(self, id: object) -> bool:
        with self._lock:
            return id in self._fids

    def fingerprint(self, id: str) -> str | None:
        with self._lock:
            return self._fps.get(id)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._fids)
