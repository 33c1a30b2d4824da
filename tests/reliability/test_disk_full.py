"""The disk filling up during an index write: the index directory on a small tmpfs of its own (mounted by the
test, as root), a real `medkg serve` reading it over Neo4j, a real `medkg ingest pubmed` that runs out of space
while writing its passages. The ingest ends with one clear line (no traceback); the server goes on serving the
previous generation, unchanged; nothing is corrupted (the indexes reopen and rank as before); once there is
room, the same command finishes the job and the server sees the new passages without a restart. Each margin
of free space makes the write fail at another point."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from kg.graph.base import BaseGraphStore
from kg.settings import load_settings
from service.container import Container
from tests.conftest import require_neo4j, shared
from tests.support.live_server import MEDKG, medkg_server
from tests.support.qa_store import build_qa_store

pytestmark = [pytest.mark.reliability, pytest.mark.slow, pytest.mark.neo4j]

QUERIES = ("aortic root dilatation", "losartan marfan", "valproate seizures children", "asthma inhaled steroids")
NEW_DOC = "PMID:35196497"  # in ncbiutils' pubmed.xml, not in the QA store


class SmallDisk:
    """A tmpfs mounted on ``path`` (empty), whose free space the test sets (``leave``) while it is in use: the
    index files stay where they are, as on a disk that fills up and is then given room."""

    def __init__(self, path: Path) -> None:
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs (a disk that fills up) needs root")
        path.mkdir(parents=True)
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g", "tmpfs", str(path)], capture_output=True,
                               text=True)  # fmt: skip
        if mount.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
        self.path = path

    def leave(self, free_bytes: int) -> None:
        used = shutil.disk_usage(self.path).used
        size = (used + free_bytes + 4095) // 4096 * 4096
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=True)


def _rankings(url: str) -> dict[str, list[str]]:
    out = {}
    for q in QUERIES:
        r = httpx.get(f"{url}/v1/search", params={"q": q, "k": 10}, timeout=60)
        assert r.status_code == 200, r.text
        out[q] = [h["id"] for h in r.json()]
    return out


@pytest.mark.parametrize("free_kib", [16, 64])
def test_a_full_disk_during_an_index_write_loses_nothing(_neo4j_store, tmp_path: Path, free_kib: int) -> None:
    articles = shared("pubmed_xml", "ncbiutils", "pubmed.xml")
    neo4j = require_neo4j()
    data = tmp_path / "data"
    disk = SmallDisk(data / "indexes")
    try:
        _full_disk(_neo4j_store, data, disk, neo4j, articles, tmp_path, free_kib)
    finally:
        disk.unmount()
        _neo4j_store.clear()


def _full_disk(
    store: BaseGraphStore, data: Path, disk: SmallDisk, neo4j: dict[str, str], articles: Path, tmp_path: Path,
    free_kib: int,
) -> None:  # fmt: skip
    store.clear()
    with Container(load_settings(data_dir=data), graph=store) as c:
        build_qa_store(c)
        c.sessions.clear()
    env = {
        **os.environ, "MEDKG_DATA_DIR": str(data), "MEDKG_GRAPH_BACKEND": "neo4j", "MEDKG_NEO4J_URI": neo4j["uri"],
        "MEDKG_NEO4J_USER": neo4j["user"], "MEDKG_NEO4J_PASSWORD": neo4j["password"],
        "MEDKG_NEO4J_DATABASE": neo4j["database"], "MEDKG_RATE_LIMIT_PER_MINUTE": "0", "MEDKG_LLM_BASE_URL": "",
        "MEDKG_TORCH_THREADS": "1", "HF_HUB_OFFLINE": "1",
    }  # fmt: skip
    ingest = [MEDKG, "ingest", "pubmed", str(articles), "--no-progress"]
    with medkg_server(env, tmp_path / "serve.log") as served:
        before = _rankings(served.url)
        disk.leave(free_kib * 1024)
        full = subprocess.run(ingest, env=env, capture_output=True, text=True, timeout=600)
        assert full.returncode != 0, full.stdout[-2000:]
        said = " ".join(full.stderr.split())
        assert "Traceback" not in full.stderr, full.stderr[-3000:]
        assert "no space left on the device" in said and "run the command again" in said, said[-2000:]
        # the server goes on serving the previous generation, unchanged
        assert _rankings(served.url) == before
        assert httpx.get(f"{served.url}/readyz", timeout=30).status_code == 200
        # nothing corrupted: with room again (a server that starts writes its caches), the indexes reopen in a
        # new process and rank as before
        disk.leave(256 * 2**20)
        with medkg_server(env, tmp_path / "reopened.log") as reopened:
            assert _rankings(reopened.url) == before
        # the same command finishes the job; the running server sees it
        again = subprocess.run(ingest, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        hits = httpx.get(f"{served.url}/v1/search", params={"q": "SENP2 browning white adipose", "k": 3}, timeout=60)
        assert any(h["doc_id"] == NEW_DOC for h in hits.json()), hits.text[:500]
