"""API replicas over one Neo4j: two real `medkg serve` processes on one data dir, while a real `medkg
ingest` runs beside them. No request fails, a session started on one replica continues on the other, the
passages the ingest adds become searchable on both without a restart, and a second writer is refused."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from kg.settings import load_settings
from service.container import Container
from service.data_lock import WriterLock
from tests.conftest import require_neo4j, shared
from tests.support.live_server import MEDKG, medkg_serve
from tests.support.qa_store import build_qa_store

pytestmark = pytest.mark.slow

NEW_TITLE = "SENP2 suppresses browning of white adipose tissues by de-conjugating SUMO from C/EBPβ"


def _env(data: Path) -> dict[str, str]:
    neo4j = require_neo4j()
    return {
        **os.environ,
        "MEDKG_DATA_DIR": str(data),
        "MEDKG_GRAPH_BACKEND": "neo4j",
        "MEDKG_NEO4J_URI": neo4j["uri"],
        "MEDKG_NEO4J_USER": neo4j["user"],
        "MEDKG_NEO4J_PASSWORD": neo4j["password"],
        "MEDKG_NEO4J_DATABASE": neo4j["database"],
        "MEDKG_RATE_LIMIT_PER_MINUTE": "0",
        "MEDKG_LLM_BASE_URL": "",
        "MEDKG_TORCH_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }


def _found(url: str, title: str) -> bool:
    hits = httpx.get(f"{url}/v1/search", params={"q": title, "k": 3}, timeout=30).json()
    return any(h["doc_id"] == "PMID:35196497" for h in hits)


@pytest.mark.neo4j
def test_two_replicas_share_sessions_and_see_an_ingest_without_restart(_neo4j_store, tmp_path: Path) -> None:
    articles = shared("pubmed_xml", "ncbiutils", "pubmed.xml")
    data = tmp_path / "data"
    env = _env(data)
    _neo4j_store.clear()
    with Container(load_settings(data_dir=data), graph=_neo4j_store) as c:
        build_qa_store(c)
        c.sessions.clear()
    failures: list[str] = []
    done = threading.Event()
    with medkg_serve(env, tmp_path / "a.log") as a, medkg_serve(env, tmp_path / "b.log") as b:
        assert not _found(a, NEW_TITLE) and not _found(b, NEW_TITLE)

        def load() -> None:  # questions to both replicas, all the while
            i = 0
            while not done.is_set():
                url = (a, b)[i % 2]
                i += 1
                try:
                    r = httpx.post(f"{url}/v1/qa", json={"question": "Which drugs treat epilepsy?"}, timeout=60)
                    if r.status_code != 200:
                        failures.append(f"{url} qa {r.status_code}: {r.text[:200]}")
                    r = httpx.get(f"{url}/v1/search", params={"q": "aortic root dilatation"}, timeout=60)
                    if r.status_code != 200:
                        failures.append(f"{url} search {r.status_code}: {r.text[:200]}")
                except httpx.HTTPError as exc:
                    failures.append(f"{url}: {exc!r}")

        client = threading.Thread(target=load)
        client.start()
        try:
            # a session begun on one replica continues on the other
            session = httpx.post(f"{a}/v1/sessions", timeout=30).json()["id"]
            first = httpx.post(f"{a}/v1/qa", json={"question": "What is Marfan syndrome?", "session_id": session},
                               timeout=60)  # fmt: skip
            assert first.status_code == 200, first.text
            follow = httpx.post(f"{b}/v1/qa", json={"question": "And which drugs treat it?", "session_id": session},
                                timeout=60)  # fmt: skip
            assert follow.status_code == 200, follow.text
            turns = httpx.get(f"{a}/v1/sessions/{session}", timeout=30).json()["turns"]
            assert [t["question"] for t in turns] == ["What is Marfan syndrome?", "And which drugs treat it?"]
            assert "Marfan" in turns[1]["expanded_query"]  # B read A's memory of the conversation

            # an ingest beside the replicas; a second writer at the same time is refused
            ingest = subprocess.run(
                [MEDKG, "ingest", "pubmed", str(articles), "--no-progress"], env=env, capture_output=True, text=True,
                timeout=600,
            )  # fmt: skip
            assert ingest.returncode == 0, ingest.stderr[-2000:]
            deadline = time.monotonic() + 30
            while not (_found(a, NEW_TITLE) and _found(b, NEW_TITLE)):
                assert time.monotonic() < deadline, "the new passages did not become searchable on both replicas"
                time.sleep(0.5)
        finally:
            done.set()
            client.join()
    assert not failures, failures[:5]
    _neo4j_store.clear()


def test_a_second_writer_is_refused_with_who_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    holder = WriterLock(data).acquire("medkg ingest pubmed")
    try:
        env = {**os.environ, "MEDKG_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
        second = subprocess.run(
            [MEDKG, "ingest", "pubmed", str(shared("pubmed_xml", "ncbiutils", "pubmed.xml"))], env=env,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert second.returncode != 0
        assert f"medkg ingest pubmed (pid {os.getpid()}) is writing to {data}" in " ".join(second.stderr.split())
    finally:
        holder.release()
