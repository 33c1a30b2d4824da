"""``medkg backup`` / ``medkg restore``: the data dir (embedded graph store, vector and BM25 indexes,
passage/report/image tables, sessions, the de-identification key) as one verified archive. The
archive holds ``deid.key`` and a pickled cache: keep it as private as the data, restore only your own.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kg.settings import GraphBackend, Settings
from service.data_lock import LOCK_NAME, DataDirBusy, DataDirLock

__all__ = ["BackupError", "BackupResult", "backup", "restore"]

FORMAT = 1
logger = logging.getLogger("medkg.backup")


class BackupError(RuntimeError):
    pass


@dataclass
class BackupResult:
    path: Path
    files: int
    bytes: int
    seconds: float
    graph_included: bool


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def _files(data: Path) -> list[tuple[str, Path]]:
    """Every file of the data dir as (relative path, path), links followed (an index folder moved to
    another disk and linked back is part of the data), sorted. A folder reached a second time (a link
    back up the tree, ``data/loop -> data``) is walked once only."""
    found = []
    start = data.stat()
    seen = {(start.st_dev, start.st_ino)}
    for root, dirs, names in os.walk(data, followlinks=True):
        dirs.sort()
        for name in list(dirs):
            try:
                st = (Path(root) / name).stat()
            except OSError:
                dirs.remove(name)  # a dangling link
                continue
            if (st.st_dev, st.st_ino) in seen:
                dirs.remove(name)
            else:
                seen.add((st.st_dev, st.st_ino))
        for name in names:
            path = Path(root) / name
            if path.is_file() and not (name == LOCK_NAME and Path(root) == data):
                found.append((path.relative_to(data).as_posix(), path))
    return sorted(found)


def _quiesce(settings: Settings, what: str, *, restore: bool = False) -> None:
    """Fold the embedded store's write-ahead log into its files; refused (BackupError) while another
    process (``medkg serve``, an ingest) holds the store. A store that cannot be opened for another
    reason (a damaged ``graph.lbug``) fails a backup, and a restore goes on: it replaces the store."""
    if settings.graph_backend is not GraphBackend.ladybug or not settings.ladybug_path.exists():
        return
    from kg.graph import build_graph_store
    from kg.graph.base import GraphStoreError, GraphStoreLocked

    try:
        store = build_graph_store(settings)
    except GraphStoreError as exc:
        if isinstance(exc, GraphStoreLocked):
            raise BackupError(
                f"the graph store is in use ({exc}): stop `medkg serve` and any ingest before {what}"
            ) from None
        if restore:
            logger.warning("the graph store of the data dir being replaced cannot be opened (%s); restoring", exc)
            return
        raise BackupError(f"the graph store cannot be opened: {exc}") from None
    try:
        store.checkpoint()
    finally:
        store.close()


def _in_use_refused(data: Path, what: str) -> DataDirLock:
    """The data dir's exclusive lock (:mod:`service.data_lock`): BackupError while a process uses it."""
    try:
        return DataDirLock(data, exclusive=True).acquire(what)
    except DataDirBusy as exc:
        raise BackupError(f"{exc}: stop `medkg serve` and any ingest first") from None


def backup(settings: Settings, dest: Path) -> BackupResult:
    """Archive the data dir into ``dest``; refused while another process uses the data dir.

    The embedded store's log is folded in first; every file is copied (links followed), SQLite files
    through SQLite's online backup API, and listed with its SHA-256 in ``manifest.json``; the archive is
    written private (0600). With Neo4j the graph is not included: back it up with ``neo4j-admin``."""
    data = settings.data_dir
    if not data.is_dir():
        raise BackupError(f"no data dir at {data}")
    with _in_use_refused(data, "a backup"):
        return _backup(settings, dest)


def _backup(settings: Settings, dest: Path) -> BackupResult:
    started = time.perf_counter()
    data = settings.data_dir
    graph_included = settings.graph_backend is GraphBackend.ladybug
    _quiesce(settings, "a backup")
    dest = dest.resolve()
    if dest.is_relative_to(data.resolve()):
        raise BackupError("write the archive outside the data dir")
    dest.parent.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, str] = {}
    total = 0
    with tempfile.TemporaryDirectory(prefix="medkg-backup-") as tmp:
        partial = dest.with_name(dest.name + ".partial")
        # private from the first byte: the archive holds deid.key and the sessions
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
                for rel, path in _files(data):
                    if rel.endswith(("-wal", "-shm", "-journal")):
                        continue  # folded into the copy by the backup API
                    source = path
                    if _is_sqlite(path):
                        source = Path(tmp) / f"copy-{len(manifest)}.sqlite"
                        try:
                            with sqlite3.connect(path) as src, sqlite3.connect(source) as dst:
                                src.backup(dst)
                        except sqlite3.Error as exc:
                            raise BackupError(f"{rel}: cannot be copied ({exc})") from None
                    manifest[rel] = _sha256(source)
                    total += source.stat().st_size
                    tar.add(source, arcname=f"data/{rel}", recursive=False)
                meta = {
                    "format": FORMAT,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "backend": settings.graph_backend.value,
                    "graph_included": graph_included,
                    "files": manifest,
                }
                blob = json.dumps(meta, indent=1).encode()
                info = tarfile.TarInfo("manifest.json")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
            os.replace(partial, dest)
        except BaseException:
            partial.unlink(missing_ok=True)  # part of an archive, maybe with deid.key: not left behind
            raise
    return BackupResult(dest, len(manifest), total, round(time.perf_counter() - started, 2), graph_included)


def _member_path(name: str) -> str:
    """``data/<relative path>`` → the relative path, or BackupError for anything that could escape."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or len(pure.parts) < 2 or pure.parts[0] != "data":
        raise BackupError(f"refusing archive member {name!r}: outside the data dir")
    return PurePosixPath(*pure.parts[1:]).as_posix()


def restore(settings: Settings, src: Path, force: bool = False) -> dict:
    """Unpack ``src`` into the data dir; a non-empty data dir needs ``force`` (it is kept aside as
    ``<data dir>.before-restore-<time>``). Refused while another process uses the data dir. Members that
    would land outside the data dir are refused and every checksum is checked; the archive is unpacked
    beside the data dir and only then swapped in. Like the data dir, an archive holds a pickled cache
    (the phenotype index), which is code to Python: restore only archives you made."""
    data = settings.data_dir
    if not data.exists():
        return _restore(settings, src, force)
    with _in_use_refused(data, "a restore"):
        return _restore(settings, src, force)


def _restore(settings: Settings, src: Path, force: bool) -> dict:
    data = settings.data_dir
    if data.exists() and any(p.name != LOCK_NAME for p in data.iterdir()) and not force:
        raise BackupError(f"{data} is not empty: pass --force to replace it (it is kept aside)")
    if os.path.ismount(data):
        raise BackupError(
            f"{data} is a mount point: restore swaps the data dir by rename, so mount the volume on its parent "
            "(as docker-compose.yml does)"
        )
    _quiesce(settings, "a restore", restore=True)  # a server on the old data dir would go on answering from it
    data.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=data.name + ".restore-", dir=data.parent))  # one file system
    try:
        try:
            with tarfile.open(src, "r:gz") as tar:
                meta = _unpack(tar, staging, src)
        except (OSError, EOFError, tarfile.TarError, zlib.error) as exc:
            raise BackupError(f"{src}: not a medkg backup, or truncated or damaged ({exc})") from None
        if meta.get("backend") != settings.graph_backend.value:
            # its indexes and sessions name entities of a graph that this deployment does not read
            raise BackupError(
                f"{src} was taken with the {meta.get('backend')!r} graph backend and this deployment uses "
                f"{settings.graph_backend.value!r}: set MEDKG_GRAPH_BACKEND={meta.get('backend')} to restore it"
            )
        kept = None
        if data.exists():
            kept = data.with_name(f"{data.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}")
            data.rename(kept)
        try:
            staging.rename(data)
        except OSError:
            if kept is not None:
                kept.rename(data)  # the old data dir back in place
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {
        "files": len(meta["files"]),
        "backend": meta["backend"],
        "graph_included": meta["graph_included"],
        "kept": kept,
    }


def _unpack(tar: tarfile.TarFile, staging: Path, src: Path) -> dict:
    """Every member of a backup into ``staging``, each checked against the manifest; the manifest."""
    try:
        meta = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
    except (KeyError, ValueError, TypeError):
        raise BackupError(f"{src}: no readable manifest.json") from None
    if not isinstance(meta, dict):
        raise BackupError(f"{src}: manifest.json is not an object (damaged, or not a medkg backup)")
    if meta.get("format") != FORMAT:
        raise BackupError(f"{src}: backup format {meta.get('format')!r}, this medkg reads {FORMAT}")
    expected = meta.get("files")
    if not isinstance(expected, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in expected.items()
    ):
        raise BackupError(f"{src}: manifest.json lists no files (damaged, or not a medkg backup)")
    if meta.get("backend") not in {b.value for b in GraphBackend}:
        raise BackupError(f"{src}: manifest.json names no known graph backend ({meta.get('backend')!r})")
    if not isinstance(meta.get("graph_included"), bool):
        raise BackupError(f"{src}: manifest.json does not say whether the graph is included")
    seen = set()
    for member in tar.getmembers():
        if member.name == "manifest.json":
            continue
        rel = _member_path(member.name)
        if not member.isfile():
            raise BackupError(f"refusing archive member {member.name!r}: not a regular file")
        if rel not in expected:
            raise BackupError(f"archive member {member.name!r} is not in the manifest")
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with tar.extractfile(member) as f, target.open("wb") as out:  # type: ignore[union-attr]
            shutil.copyfileobj(f, out)
        if _sha256(target) != expected[rel]:
            raise BackupError(f"{rel}: checksum mismatch (the archive is damaged)")
        seen.add(rel)
    missing = set(expected) - seen
    if missing:
        raise BackupError(f"{src}: {len(missing)} file(s) of the manifest are missing, e.g. {sorted(missing)[0]}")
    key = staging / "deid.key"
    if key.exists():
        key.chmod(0o600)
    return meta
