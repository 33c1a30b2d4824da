"""``medkg backup`` / ``medkg restore``: the data dir (embedded graph store, vector and BM25 indexes,
passage/report/image tables, sessions, the de-identification key) as one verified archive.

Backup folds the embedded store's write-ahead log into its files first (``CHECKPOINT``; the store
is opened by this process, so a running ``medkg serve`` on the same data dir must be stopped) and
copies every SQLite file through SQLite's online backup API, so each is consistent. A
``manifest.json`` lists every file with its SHA-256. Restore refuses an archive whose members
would land outside the data dir (absolute paths, ``..``, links), checks every checksum, unpacks
into a new folder beside the data dir and only then swaps it in; the data dir it replaces is kept
as ``<data dir>.before-restore-<time>``. With the Neo4j backend the graph lives in Neo4j: the
archive then holds the indexes and sessions, and the graph is backed up with ``neo4j-admin``.

The archive holds ``deid.key``, the key of the DICOM pseudonyms: keep it as private as the data.
Restore only archives you made: like the data dir itself they hold a pickled cache (the phenotype
index), which is code to Python.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kg.settings import GraphBackend, Settings

__all__ = ["BackupError", "BackupResult", "backup", "restore"]

FORMAT = 1


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


def backup(settings: Settings, dest: Path) -> BackupResult:
    started = time.perf_counter()
    data = settings.data_dir
    if not data.is_dir():
        raise BackupError(f"no data dir at {data}")
    graph_included = settings.graph_backend is GraphBackend.ladybug
    if graph_included and settings.ladybug_path.exists():
        from service.container import build_graph_store

        store = build_graph_store(settings)  # raises if another process holds the store
        try:
            store.checkpoint()
        finally:
            store.close()
    dest = dest.resolve()
    if dest.is_relative_to(data.resolve()):
        raise BackupError("write the archive outside the data dir")
    dest.parent.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, str] = {}
    total = 0
    with tempfile.TemporaryDirectory(prefix="medkg-backup-") as tmp:
        partial = dest.with_name(dest.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            for path in sorted(p for p in data.rglob("*") if p.is_file() and not p.is_symlink()):
                rel = path.relative_to(data).as_posix()
                if rel.endswith(("-wal", "-shm", "-journal")):
                    continue  # folded into the copy by the backup API
                source = path
                if _is_sqlite(path):
                    source = Path(tmp) / f"copy-{len(manifest)}.sqlite"
                    with sqlite3.connect(path) as src, sqlite3.connect(source) as dst:
                        src.backup(dst)
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
    return BackupResult(dest, len(manifest), total, round(time.perf_counter() - started, 2), graph_included)


def _member_path(name: str) -> str:
    """``data/<relative path>`` → the relative path, or BackupError for anything that could escape."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or len(pure.parts) < 2 or pure.parts[0] != "data":
        raise BackupError(f"refusing archive member {name!r}: outside the data dir")
    return PurePosixPath(*pure.parts[1:]).as_posix()


def restore(settings: Settings, src: Path, force: bool = False) -> dict:
    """Unpack ``src`` into the data dir; a non-empty data dir needs ``force`` (it is kept aside)."""
    data = settings.data_dir
    if data.exists() and any(data.iterdir()) and not force:
        raise BackupError(f"{data} is not empty: pass --force to replace it (it is kept aside)")
    try:
        tar = tarfile.open(src, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        raise BackupError(f"{src}: not a medkg backup ({exc})") from None
    with tar:
        try:
            meta = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        except (KeyError, ValueError, TypeError):
            raise BackupError(f"{src}: no readable manifest.json") from None
        if meta.get("format") != FORMAT:
            raise BackupError(f"{src}: backup format {meta.get('format')!r}, this medkg reads {FORMAT}")
        expected: dict[str, str] = meta["files"]
        staging = Path(
            tempfile.mkdtemp(prefix=data.name + ".restore-", dir=data.parent if data.parent.exists() else None)
        )
        try:
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
                raise BackupError(
                    f"{src}: {len(missing)} file(s) of the manifest are missing, e.g. {sorted(missing)[0]}"
                )
            key = staging / "deid.key"
            if key.exists():
                key.chmod(0o600)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    kept = None
    if data.exists():
        kept = data.with_name(f"{data.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}")
        data.rename(kept)
    data.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(data)
    return {"files": len(expected), "backend": meta["backend"], "graph_included": meta["graph_included"], "kept": kept}
