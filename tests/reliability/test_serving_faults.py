"""Faults while serving, with real processes on loopback: two `medkg serve` replicas over a Neo4j of the test's
own, under a steady stream of requests.

- One replica killed with SIGKILL: every request to the other succeeds, before and after, and a session
  begun on the killed one continues on the other (sessions live in Neo4j).
- Neo4j stopped cleanly and started again (same port, same store) while requests go on: the replica answers
  only 200 or 503 with ``Retry-After`` while it is down (a lexical search needs no graph and goes on
  answering), answers again once it is back without being restarted, and nothing is lost: the graph's
  counts, the session's turns, a new turn in it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kg.graph.neo4j_store import Neo4jGraphStore
from kg.settings import load_settings
from service.container import Container
from tests.support.live_server import medkg_server
from tests.support.neo4j_process import Neo4jProcess
from tests.support.qa_store import build_qa_store

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

REQUESTS = (
    ("POST", "/v1/qa", {"json": {"question": "Which drugs treat epilepsy?"}}),
    ("GET", "/v1/search", {"params": {"q": "aortic root dilatation", "k": 3}}),
    ("GET", "/v1/entities/OMIM:154700", {}),
    ("GET", "/v1/stats", {}),
    ("POST", "/v1/sessions", {}),
)


@dataclass(frozen=True)
class Outcome:
    at: float
    url: str
    path: str
    status: int | None  # None: no answer (connection refused or reset)
    retry_after: str | None
    body: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Traffic:
    """A client thread sending ``REQUESTS`` in turn to each of ``urls`` until stopped; every outcome kept."""

    def __init__(self, urls: list[str]) -> None:
        self.urls, self.outcomes, self._stop = urls, list[Outcome](), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def _run(self) -> None:
        i = 0
        with httpx.Client(timeout=60) as client:
            while not self._stop.is_set():
                url = self.urls[i % len(self.urls)]
                method, path, kwargs = REQUESTS[i // len(self.urls) % len(REQUESTS)]
                i += 1
                at = time.monotonic()
                try:
                    r = client.request(method, f"{url}{path}", **kwargs)
                    status, retry_after, body = r.status_code, r.headers.get("retry-after"), r.text[:2000]
                except httpx.HTTPError as exc:
                    status, retry_after, body = None, None, repr(exc)
                outcome = Outcome(at, url, path, status, retry_after, body, time.monotonic() - at)
                self.outcomes.append(outcome)

    def of(self, url: str, since: float = 0.0, until: float = float("inf")) -> list[Outcome]:
        return [o for o in self.outcomes if o.url == url and since <= o.at < until]


def _wait_for(predicate, timeout_s: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {timeout_s:.0f} s"
        time.sleep(0.3)


def _answers(url: str, path: str) -> bool:
    try:
        return httpx.get(f"{url}{path}", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_killed_replica_and_a_restarted_neo4j_cost_no_request_but_503s(tmp_path: Path) -> None:
    neo4j = Neo4jProcess(tmp_path / "neo4j")
    neo4j.start()
    try:
        _faults(neo4j, tmp_path)
    finally:
        neo4j.stop()


def _faults(neo4j: Neo4jProcess, tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Neo4jGraphStore(**neo4j.settings, batch_size=2000)
    with Container(load_settings(data_dir=data), graph=store) as c:
        build_qa_store(c)
    env = {
        **os.environ, "MEDKG_DATA_DIR": str(data), "MEDKG_GRAPH_BACKEND": "neo4j", "MEDKG_NEO4J_URI": neo4j.uri,
        "MEDKG_NEO4J_USER": "neo4j", "MEDKG_NEO4J_PASSWORD": neo4j.settings["password"],
        "MEDKG_NEO4J_DATABASE": "neo4j", "MEDKG_RATE_LIMIT_PER_MINUTE": "0", "MEDKG_LLM_BASE_URL": "",
        "MEDKG_TORCH_THREADS": "1", "HF_HUB_OFFLINE": "1",
    }  # fmt: skip
    with medkg_server(env, tmp_path / "a.log") as a, medkg_server(env, tmp_path / "b.log") as b:
        # ---- one replica killed under load ----------------------------------------------------------------
        with Traffic([a.url, b.url]) as traffic:
            session = httpx.post(f"{a.url}/v1/sessions", timeout=30).json()["id"]
            first = httpx.post(f"{a.url}/v1/qa", json={"question": "What is Marfan syndrome?", "session_id": session},
                               timeout=60)  # fmt: skip
            assert first.status_code == 200, first.text
            time.sleep(2)
            a.process.kill()  # SIGKILL
            a.process.wait()
            killed_at = time.monotonic()
            follow = httpx.post(
                f"{b.url}/v1/qa", json={"question": "And which drugs treat it?", "session_id": session}, timeout=60
            )
            assert follow.status_code == 200, follow.text  # fmt: skip
            _wait_for(lambda: len(traffic.of(b.url, since=killed_at)) >= 10, 120, "requests to B after the kill")
        to_b = traffic.of(b.url)
        assert to_b and all(o.ok for o in to_b), [o for o in to_b if not o.ok][:3]
        assert all(o.status is None for o in traffic.of(a.url, since=killed_at + 1))  # A is gone, not half-alive
        turns = httpx.get(f"{b.url}/v1/sessions/{session}", timeout=30).json()["turns"]
        assert [t["question"] for t in turns] == ["What is Marfan syndrome?", "And which drugs treat it?"]
        assert "Marfan" in turns[1]["expanded_query"]  # B read A's memory of the conversation

        # ---- Neo4j stopped and started again under load ---------------------------------------------------
        stats = httpx.get(f"{b.url}/v1/stats", timeout=30).json()
        with Traffic([b.url]) as traffic:
            time.sleep(2)
            stopping = time.monotonic()
            neo4j.stop()
            time.sleep(15)  # down long enough for several requests to give up (the driver retries for 10 s)
            neo4j.start()
            _wait_for(lambda: _answers(b.url, "/v1/stats"), 60, "B answering again once Neo4j is back")
            back_at = time.monotonic()
            _wait_for(lambda: len(traffic.of(b.url, since=back_at + 5)) >= 2 * len(REQUESTS), 120, "requests after")
        # answered before the stop began; any request in flight then counts with those while Neo4j was down
        up = [o for o in traffic.of(b.url) if o.at + o.seconds < stopping]
        assert up and all(o.ok for o in up), [o for o in up if not o.ok][:3]
        down = [o for o in traffic.of(b.url, until=back_at + 5) if o not in up]  # the pool reconnects in 5 s
        assert all(o.ok or (o.status == 503 and o.retry_after) for o in down), [
            o for o in down if not o.ok and not (o.status == 503 and o.retry_after)
        ][:3]
        refused = [o for o in down if o.status == 503]
        # the driver gives up in 10 s, but its transaction retries (10 s) and a connection's timeout (10 s) can
        # stack for a request in flight at the stop: one took 21.3 s in a clean-clone CI run on 2 busy cores
        assert len(refused) >= 3 and max(o.seconds for o in refused) < 30, refused
        assert any(o.ok and o.path == "/v1/search" for o in down)  # the lexical index needs no graph
        after = traffic.of(b.url, since=back_at + 5)
        assert after and all(o.ok for o in after), [o for o in after if not o.ok][:3]
        assert httpx.get(f"{b.url}/v1/stats", timeout=30).json() == stats
        created = [json.loads(o.body)["id"] for o in traffic.of(b.url) if o.path == "/v1/sessions" and o.ok]
        assert created and all(  # every session the server said it made, Neo4j down or not, is there
            httpx.get(f"{b.url}/v1/sessions/{s}", timeout=30).status_code == 200 for s in created
        )
        third = httpx.post(f"{b.url}/v1/qa", json={"question": "Is losartan one of them?", "session_id": session},
                           timeout=60)  # fmt: skip
        assert third.status_code == 200, third.text
        turns = httpx.get(f"{b.url}/v1/sessions/{session}", timeout=30).json()["turns"]
        assert len(turns) == 3 and turns[0]["question"] == "What is Marfan syndrome?"
    store.close()
