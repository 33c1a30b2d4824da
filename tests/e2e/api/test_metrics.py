"""``GET /metrics`` scraped from a live `medkg serve`: Prometheus' own parser reads it; requests are counted by
route template and status (a refused one too), QA stages, evidence tokens and answers are observed, the stores'
sizes read at scrape time; no label holds a path's id, a question or anything else a request carried."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kg.settings import load_settings
from service.container import Container
from tests.support.live_server import medkg_serve
from tests.support.qa_store import build_qa_store

QUESTION = "Which drugs treat epilepsy?"


def _samples(url: str, headers: dict[str, str]) -> dict[str, list[tuple[dict[str, str], float]]]:
    r = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text[:300]
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == x for k, x in labels.items()))


def test_metrics_count_requests_by_route_and_observe_answers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Container(load_settings(data_dir=data, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2)) as c:
        build_qa_store(c)
    key = "metrics-test-key-0123456789abcdef"
    env = {**os.environ, "MEDKG_DATA_DIR": str(data), "MEDKG_LLM_BASE_URL": "", "HF_HUB_OFFLINE": "1",
           "MEDKG_API_KEYS": key, "MEDKG_LADYBUG_BUFFER_POOL_MB": "256",
           "MEDKG_LADYBUG_MAX_DB_SIZE_GB": "2"}  # fmt: skip
    auth = {"Authorization": f"Bearer {key}"}
    with medkg_serve(env, tmp_path / "serve.log") as url:
        assert httpx.get(f"{url}/metrics", timeout=30).status_code == 401  # behind the API key, as the API
        for _ in range(2):
            assert httpx.post(f"{url}/v1/qa", json={"question": QUESTION}, headers=auth, timeout=60).status_code == 200
        abstained = httpx.post(f"{url}/v1/qa", json={"question": "How do I bake sourdough bread?"}, headers=auth,
                               timeout=60).json()  # fmt: skip
        assert abstained["insufficient_evidence"]
        assert httpx.get(f"{url}/v1/entities/OMIM:154700", headers=auth, timeout=30).status_code == 200
        assert httpx.get(f"{url}/v1/entities/HP:9999999", headers=auth, timeout=30).status_code == 404
        samples = _samples(url, auth)

    qa_route = {"method": "POST", "route": "/v1/qa"}
    assert _value(samples, "medkg_http_requests_total", **qa_route, status="200") == 3
    entity = {"method": "GET", "route": "/v1/entities/{entity_id:path}"}
    assert _value(samples, "medkg_http_requests_total", **entity, status="200") == 1
    assert _value(samples, "medkg_http_requests_total", **entity, status="404") == 1
    assert _value(samples, "medkg_http_requests_total", method="GET", route="unmatched", status="401") == 1
    assert _value(samples, "medkg_http_request_duration_seconds_count", **qa_route) == 3
    assert _value(samples, "medkg_qa_answers_total", mode="extractive", abstained="false") == 2
    assert _value(samples, "medkg_qa_answers_total", mode="extractive", abstained="true") == 1
    assert _value(samples, "medkg_qa_stage_duration_seconds_count", stage="total") == 3
    assert _value(samples, "medkg_qa_evidence_tokens_count") == 3
    assert _value(samples, "medkg_qa_evidence_tokens_sum") > 0
    assert _value(samples, "medkg_graph_up") == 1 and _value(samples, "medkg_graph_entities") > 10
    assert _value(samples, "medkg_passages") > 0
    # no label carries what a request did: ids, questions
    labels = {v for rows in samples.values() for got, _ in rows for v in got.values()}
    assert not any("OMIM:154700" in v or "HP:9999999" in v or "epilepsy" in v or "bread" in v for v in labels)


def test_the_writer_jobs_progress_is_exported(tmp_path: Path) -> None:
    """A `medkg ingest` publishes its progress in the data dir; a server on the data dir exports it: the job
    (its command), its state, each step's counts; a job not heard of for long is stalled, not running."""
    import json

    from fastapi.testclient import TestClient

    from kg.progress import PROGRESS_FILE
    from service.api.app import create_app
    from tests.e2e.cli.test_ingest import BAD_OBO
    from tests.support.cli import run

    obo = tmp_path / "do.obo"
    obo.write_text(BAD_OBO)
    data = tmp_path / "data"
    env = {"MEDKG_DATA_DIR": str(data), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    assert run(["ingest", "obo", str(obo), "--prefix", "DOID", "--no-embed"], env, tmp_path).returncode == 0
    published = json.loads((data / PROGRESS_FILE).read_text())
    assert (published["job"], published["state"]) == ("medkg ingest obo", "finished")
    settings = load_settings(data_dir=data, ladybug_buffer_pool_mb=256, api_keys=None)
    with TestClient(create_app(settings)) as client:
        r = client.get("/metrics")
        assert r.status_code == 200, r.text
        samples = {}
        for family in text_string_to_metric_families(r.text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((sample.labels, sample.value))
        job = {"job": "medkg ingest obo"}
        assert _value(samples, "medkg_writer_state", **job, state="finished") == 1
        assert _value(samples, "medkg_writer_running", **job) == 0
        steps = {labels["step"]: value for labels, value in samples["medkg_writer_done"]}
        assert steps and all(v >= 0 for v in steps.values()) and max(steps.values()) >= 2, steps
        # killed outright: "running", but not heard of for long
        (data / PROGRESS_FILE).write_text(json.dumps({**published, "state": "running", "updated_at": 1.0}))
        stalled = {}
        for family in text_string_to_metric_families(client.get("/metrics").text):
            for sample in family.samples:
                stalled.setdefault(sample.name, []).append((sample.labels, sample.value))
        assert _value(stalled, "medkg_writer_state", **job, state="stalled") == 1
        assert _value(stalled, "medkg_writer_running", **job) == 0
