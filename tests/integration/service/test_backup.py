"""`medkg backup` / `medkg restore` round-trip a real data dir: embedded graph, FAISS and BM25
indexes, report/passage tables, sessions and the de-identification key."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kg.settings import load_settings
from service.backup import BackupError, backup, restore
from service.container import Container
from tests.support import REPO
from tests.support.cli import run
from tests.support.qa_store import build_qa_store

pytestmark = pytest.mark.reliability
HOLD_STORE = """
import sys, time
from kg.settings import load_settings
from service.container import build_graph_store
store = build_graph_store(load_settings(data_dir=sys.argv[1], ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2))
print("held", flush=True)
time.sleep(60)
"""


def _settings(data: Path):  # noqa: ANN202
    return load_settings(data_dir=data, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2)


def test_backup_and_restore_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    with Container(_settings(src)) as c:
        build_qa_store(c)
        session = c.sessions.create().id
        before = c.qa.ask("Which phenotypes are characteristic of Marfan syndrome?", session)
        stats = c.graph.stats()
        pseudonym = c.pseudonymizer.uid("1.2.3")
    archive = tmp_path / "b.tar.gz"
    result = backup(_settings(src), archive)
    assert result.graph_included and result.files >= 8 and archive.exists()

    dst = tmp_path / "dst"
    restored = restore(_settings(dst), archive)
    assert restored["files"] == result.files and restored["kept"] is None
    with Container(_settings(dst)) as c:
        assert c.graph.stats() == stats
        after = c.qa.ask("Which phenotypes are characteristic of Marfan syndrome?")
        assert [x.id for x in after.citations] == [x.id for x in before.citations]
        assert c.sessions.get(session) is not None and c.pseudonymizer.uid("1.2.3") == pseudonym

    with pytest.raises(BackupError, match="not empty"):
        restore(_settings(dst), archive)
    again = restore(_settings(dst), archive, force=True)
    assert again["kept"] is not None and Path(again["kept"]).is_dir()


def _archive(path: Path, members: dict[str, bytes], manifest: bytes) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in {**members, "manifest.json": manifest}.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


def test_restore_refuses_hostile_or_damaged_archives(tmp_path: Path) -> None:
    import hashlib
    import json

    digest = hashlib.sha256(b"x").hexdigest()
    evil = tmp_path / "evil.tar.gz"
    hostile = {"format": 1, "backend": "ladybug", "graph_included": True, "files": {"../escaped": digest}}
    _archive(evil, {"data/../../escaped": b"x"}, json.dumps(hostile).encode())
    with pytest.raises(BackupError, match="outside the data dir"):
        restore(_settings(tmp_path / "d1"), evil)
    assert not (tmp_path / "escaped").exists()
    damaged = tmp_path / "damaged.tar.gz"
    _archive(
        damaged,
        {"data/a.txt": b"y"},
        json.dumps({"format": 1, "backend": "ladybug", "graph_included": True, "files": {"a.txt": digest}}).encode(),
    )
    with pytest.raises(BackupError, match="checksum"):
        restore(_settings(tmp_path / "d2"), damaged)
    assert not (tmp_path / "d2").exists()
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(BackupError, match="not a medkg backup"):
        restore(_settings(tmp_path / "d3"), tmp_path / "junk.tar.gz")
    # an archive of a Neo4j deployment holds no graph: restored into the embedded default, its
    # indexes and sessions would name entities of an empty graph
    other = tmp_path / "neo4j.tar.gz"
    manifest = {"format": 1, "backend": "neo4j", "graph_included": False, "files": {"a.txt": digest}}
    _archive(other, {"data/a.txt": b"x"}, json.dumps(manifest).encode())
    with pytest.raises(BackupError, match="MEDKG_GRAPH_BACKEND=neo4j"):
        restore(_settings(tmp_path / "d4"), other)
    assert not (tmp_path / "d4").exists()


def test_cli_backup_restore(tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    assert run(["stats"], env, tmp_path).returncode == 0  # creates the embedded store
    r = run(["backup", str(tmp_path / "b.tar.gz")], env, tmp_path)
    assert r.returncode == 0 and "with the graph" in r.stdout, r.stderr
    r = run(["restore", str(tmp_path / "b.tar.gz")], env, tmp_path)
    assert r.returncode == 2 and "--force" in r.stderr
    r = run(["restore", str(tmp_path / "b.tar.gz"), "--force"], env, tmp_path)
    assert r.returncode == 0 and "restored" in r.stdout, r.stderr


def test_backup_follows_links_is_private_and_restore_waits_for_the_store(tmp_path: Path) -> None:
    import shutil
    import stat

    src = tmp_path / "src"
    with Container(_settings(src)) as c:
        build_qa_store(c)
        held = c.graph.stats()
    moved = tmp_path / "other-disk" / "indexes"  # the indexes moved to another disk and linked back
    moved.parent.mkdir()
    shutil.move(src / "indexes", moved)
    (src / "indexes").symlink_to(moved, target_is_directory=True)
    archive = tmp_path / "b.tar.gz"
    result = backup(_settings(src), archive)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600  # it holds deid.key and the sessions
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert any(n.startswith("data/indexes/") for n in names) and result.files == len(names) - 1

    dst = tmp_path / "dst"
    restore(_settings(dst), archive)
    holder = subprocess.Popen(  # a server holding the restored store: it would answer from the old dir
        [sys.executable, "-c", HOLD_STORE, str(dst)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(BackupError, match="in use"):
            restore(_settings(dst), archive, force=True)
    finally:
        holder.kill()
        holder.wait()
    assert not list(tmp_path.glob("dst.restore-*")) and not list(tmp_path.glob("dst.before-restore-*"))
    with Container(_settings(dst)) as c:
        assert c.graph.stats() == held

    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(BackupError, match="truncated or damaged"):
        restore(_settings(tmp_path / "d4"), truncated)
    assert not list(tmp_path.glob("d4.restore-*"))


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ([1], "not an object"),
        ({"format": 1, "backend": "ladybug", "graph_included": True}, "lists no files"),
        ({"format": 1, "backend": "ladybug", "graph_included": True, "files": ["a.txt"]}, "lists no files"),
        ({"format": 1, "graph_included": True, "files": {}}, "no known graph backend"),
        ({"format": 1, "backend": "ladybug", "files": {}}, "whether the graph is included"),
    ],
)
def test_restore_refuses_a_malformed_manifest(tmp_path: Path, manifest: object, message: str) -> None:
    import json

    archive = tmp_path / "m.tar.gz"
    _archive(archive, {}, json.dumps(manifest).encode())
    with pytest.raises(BackupError, match=message):
        restore(_settings(tmp_path / "data"), archive)
    assert not (tmp_path / "data").exists() and not list(tmp_path.glob("data.restore-*"))


def _small_data_dir(data: Path) -> None:
    from service.container import build_graph_store

    build_graph_store(_settings(data)).close()  # creates graph.lbug
    (data / "indexes").mkdir()
    (data / "indexes" / "x.bin").write_bytes(b"x" * 1000)


def test_restore_replaces_a_damaged_graph_store_and_backup_names_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    _small_data_dir(data)
    archive = tmp_path / "b.tar.gz"
    backup(_settings(data), archive)
    _settings(data).ladybug_path.write_bytes(b"garbage" * 100)  # the store damaged: what restore is for
    with pytest.raises(BackupError, match="cannot be opened") as failed:
        backup(_settings(data), tmp_path / "b2.tar.gz")
    assert "in use" not in str(failed.value)
    with caplog.at_level("WARNING", logger="medkg.backup"):
        restored = restore(_settings(data), archive, force=True)
    assert restored["kept"] is not None and "cannot be opened" in caplog.text
    assert (data / "indexes" / "x.bin").read_bytes() == b"x" * 1000
    backup(_settings(data), tmp_path / "b3.tar.gz")  # the restored store opens again


def test_a_failed_backup_leaves_no_partial_archive(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "deid.key").write_bytes(b"k" * 32)
    # a damaged SQLite file (a valid header, a junk body) after the key: the archive is half written
    (data / "sessions.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"\xa5" * 5000)
    with pytest.raises(BackupError, match="cannot be copied"):
        backup(_settings(data), tmp_path / "b.tar.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_backup_walks_a_linked_loop_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _small_data_dir(data)
    (data / "loop").symlink_to(data, target_is_directory=True)  # data/loop -> data
    result = backup(_settings(data), tmp_path / "b.tar.gz")
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        names = tar.getnames()
    assert not any(n.startswith("data/loop/") for n in names), names
    assert sorted(names) == ["data/graph.lbug", "data/indexes/x.bin", "manifest.json"] and result.files == 2


HOLD_INDEXES = """
import sys, time
from kg.settings import load_settings
from service.container import Container
c = Container(load_settings(data_dir=sys.argv[1]))
c.text_index  # the passage index open, the graph store not: the store's own lock is not what refuses
print("held", flush=True)
time.sleep(60)
"""


def test_backup_and_restore_wait_for_no_process_using_the_data_dir(tmp_path: Path) -> None:
    """Any process using the data dir (not only one holding the embedded store: with Neo4j there is
    none) refuses backup and restore; a process cannot open the data dir while a backup holds it; the
    lock file is no data (never archived, and a data dir holding only it is empty to restore)."""
    from service.data_lock import LOCK_NAME, DataDirBusy, DataDirLock

    src = tmp_path / "src"
    with Container(_settings(src)) as c:
        build_qa_store(c)
    assert (src / LOCK_NAME).exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_INDEXES, str(src)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(BackupError, match="a backup is refused while a process uses it"):
            backup(_settings(src), tmp_path / "refused.tar.gz")
        with pytest.raises(BackupError, match="a restore is refused while a process uses it"):
            restore(_settings(src), tmp_path / "any.tar.gz", force=True)
    finally:
        holder.kill()
        holder.wait()
    assert not (tmp_path / "refused.tar.gz").exists()
    archive = tmp_path / "b.tar.gz"
    backup(_settings(src), archive)  # the holder gone, its lock went with it
    with tarfile.open(archive) as tar:
        assert f"data/{LOCK_NAME}" not in tar.getnames()

    with DataDirLock(src, exclusive=True).acquire("a backup"):  # a backup running
        with Container(_settings(src)) as c, pytest.raises(DataDirBusy, match="refused while a backup or restore"):
            _ = c.text_index
    dst = tmp_path / "dst"
    with Container(_settings(dst)) as c:  # a data dir created, and left with its lock file only
        _ = c.sessions
    (dst / "sessions.sqlite").unlink()
    assert [p.name for p in dst.iterdir()] == [LOCK_NAME]
    assert restore(_settings(dst), archive)["files"] > 0  # no --force needed
