"""The served demo's build behind the real app (``create_app(build=...)``): while it embeds, /readyz is
200 "building" with the running part's progress and ETA and /v1/qa answers from what is indexed so far;
once it ends the new passages are cited. A server stopped mid-build stops the build at its next progress
update, keeps what was checkpointed, and the same job run again finishes it."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ingest.hpo import hpo_items
from ingest.pubmed.load import PubmedLoader
from kg.entity_index import EntityIndex
from kg.model import NOT_VOCABULARY, Entity
from kg.progress import progress_bar
from kg.settings import load_settings
from service.api.app import create_app
from service.build import BackgroundBuild, Part
from service.container import Container
from tests.support.qa_store import ARTICLES, ENTITIES, RELATIONS

MARFAN = "Which phenotypes are characteristic of Marfan syndrome?"


def _container(tmp: Path, **settings: object) -> Container:
    return Container(load_settings(data_dir=tmp / "data", llm_base_url=None, rate_limit_per_minute=0, **settings))


def _until(check, timeout_s: float = 120.0):  # noqa: ANN001, ANN202 - a predicate, its first truthy value
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def _gate(opened: threading.Event, entered: threading.Event) -> Iterator[str]:
    """A part that has counted 2 of 4 (its rate timed from the first) and waits for the test (so the
    build is seen mid-way)."""
    with progress_bar(total=4, desc="wait for the test", unit=" steps", disable=True) as bar:
        bar.update(1)
        bar.update(1)
        entered.set()
        assert opened.wait(120)
        bar.update(2)
    yield "gate opened"


def _articles(c: Container) -> Iterator[object]:
    yield PubmedLoader(c.graph, c.text_index, c.nlp, c.document_linker, progress=False).load(ARTICLES)


def test_the_app_answers_while_the_build_runs_and_cites_its_passages_after(tmp_path: Path) -> None:
    c = _container(tmp_path)
    c.graph.upsert_entities(ENTITIES)
    c.graph.upsert_relations(RELATIONS)
    opened, entered = threading.Event(), threading.Event()
    events: list[object] = []
    build = BackgroundBuild(
        [
            Part("first part", lambda: _gate(opened, entered)),
            Part("entity index", lambda: iter([c.entity_index.update(c.graph, progress=False)])),
            Part("abstracts", lambda: _articles(c)),
        ],
        on_event=events.append,
    )
    with TestClient(create_app(container=c, warm=True, build=build), base_url="http://127.0.0.1") as client:
        assert entered.wait(60)
        # ready (models loaded) and building: answers from the graph alone meanwhile
        report = _until(
            lambda: (r := client.get("/readyz").json())["status"] == "building" and r["build"]["eta_s"] and r
        )
        assert client.get("/readyz").status_code == 200
        parts = report["build"]["parts"]
        assert [p["state"] for p in parts] == ["running", "waiting", "waiting"]
        progress = parts[0]["progress"]
        assert (progress["done"], progress["total"], progress["percent"], progress["unit"]) == (2, 4, 50.0, "steps")
        assert progress["eta_s"] == report["build"]["eta_s"] > 0 and progress["rate_per_s"] > 0
        answer = client.post("/v1/qa", json={"question": MARFAN}).json()
        assert "KG:OMIM:154700-HAS_PHENOTYPE-HP:" in answer["answer"]
        assert not any(cit["id"].startswith("PMID:") for cit in answer["citations"])  # no passage yet

        opened.set()
        _until(lambda: client.get("/readyz").json()["build"]["state"] == "done")
        report = client.get("/readyz").json()
        assert report["status"] == "ready" and report["build"]["eta_s"] is None
        assert [p["state"] for p in report["build"]["parts"]] == ["done"] * 3
        answer = client.post("/v1/qa", json={"question": MARFAN}).json()
        assert any(cit["id"].startswith("PMID:20591885") for cit in answer["citations"]), answer["citations"]
    assert events[0] == "gate opened" and events[-1].source == "pubmed" and events[-1].read, events[-1]
    assert "graph" not in c.__dict__  # the app closed the container after the build


def _hpo_terms(n: int) -> list[Entity]:
    return list(itertools.islice((i for i in hpo_items(genes=False) if isinstance(i, Entity)), n))


def test_a_server_stopped_mid_build_keeps_what_was_embedded_and_a_rerun_finishes(tmp_path: Path) -> None:
    terms = _hpo_terms(600)
    c = _container(tmp_path, vector_memo_mb=0)  # embedded here, not read from earlier tests' vectors: it takes time
    c.graph.upsert_entities(terms)

    def entities() -> Iterator[object]:
        yield c.entity_index.update(c.graph, progress=False, page=100, batch=16)

    build = BackgroundBuild([Part("entity index", entities), Part("after it", lambda: iter(["never run"]))])
    with TestClient(create_app(container=c, build=build), base_url="http://127.0.0.1") as client:

        def mid_way() -> bool:
            parts = client.get("/readyz").json()["build"]["parts"]
            return parts[0].get("progress", {}).get("done", 0) >= 150  # a page saved, the next one begun

        _until(mid_way)
    # leaving the client stopped the server: the build stopped at its next batch, the rest was skipped
    assert not build.running
    assert [p["state"] for p in build.report()["parts"]] == ["stopped", "stopped"]
    assert build.report()["state"] == "stopped"

    with _container(tmp_path) as again:
        kept = EntityIndex(again.settings.data_dir / "indexes", again.text_embedder)
        saved = len(kept.index)
        indexed = sorted(t.id for t in terms if t.category not in NOT_VOCABULARY and not t.obsolete)
        assert 90 <= saved < len(indexed) - 100  # whole pages were checkpointed, not the page it stopped in
        finished = again.entity_index.update(again.graph, progress=False, page=100, batch=16)
        assert (finished.unchanged, finished.embedded) == (saved, len(indexed) - saved)
        assert sorted(again.entity_index.index.ids()) == indexed


@pytest.mark.parametrize("failing", ["first", "middle"])
def test_a_failed_part_is_reported_and_the_parts_after_it_still_run(failing: str) -> None:
    def broken() -> Iterator[object]:
        raise OSError("disk full")
        yield  # pragma: no cover

    def fine() -> Iterator[object]:
        yield "ok"

    parts = [Part("a", fine), Part("b", fine)]
    parts.insert(0 if failing == "first" else 1, Part("broken", broken))
    events: list[object] = []
    build = BackgroundBuild(parts, on_event=events.append)
    assert build.report()["state"] == "running"  # not started yet: everything waits
    build.start()
    assert build.wait(30)
    report = build.report()
    assert report["state"] == "failed" and events == ["ok", "ok"]
    broken_part = next(p for p in report["parts"] if p["title"] == "broken")
    assert broken_part["state"] == "failed" and broken_part["error"] == "OSError: disk full"
