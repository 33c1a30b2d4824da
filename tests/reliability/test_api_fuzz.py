"""Property-based fuzzing of the HTTP API from its own OpenAPI schema (schemathesis 4).

Every operation the schema lists gets generated requests, valid and invalid (schemathesis's positive
and negative modes, its coverage phase of boundary values, then random fuzzing), against the real
app on a small real graph (the QA fixture's entities, relations and abstracts, with the real
embedding model, FAISS and BM25). No request may get a 5xx, and every response must match the
schema the app publishes. The rate limit is off (``MEDKG_RATE_LIMIT_PER_MINUTE=0``) so a 429 never
hides what a request would have done.

Bounded for CI: ``MEDKG_FUZZ_EXAMPLES`` random examples per operation (default 25; the coverage
phase adds its boundary cases), derandomized so a run is reproducible, no deadline.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container
from tests.support.qa_store import build_qa_store

pytestmark = pytest.mark.reliability

EXAMPLES = int(os.environ.get("MEDKG_FUZZ_EXAMPLES", "25"))
CASES: Counter[str] = Counter()


class _LateApp:
    """An ASGI app forwarding to the app the fixture builds: the schema is read when this module is
    imported (so each operation is a test of its own), the data only exists once a fixture runs.

    The real app's lifespan runs once for the module (the fixture's TestClient), as under ``medkg
    serve``; schemathesis ends the lifespan it starts after every test, so it gets a no-op one here.
    """

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        assert self.app is not None, "the fuzzed_app fixture sets the app"
        await self.app(scope, receive, send)


def _settings(data_dir: Path) -> Any:
    return load_settings(
        data_dir=data_dir,
        api_keys=None,
        llm_base_url=None,
        rate_limit_per_minute=0,  # a 429 must not hide a request's real answer
        max_upload_bytes=2_000_000,
        ladybug_buffer_pool_mb=256,
        ladybug_max_db_size_gb=2,
    )


# The OpenAPI document does not depend on the data: build it from an app that never starts.
LATE = _LateApp()
schema = schemathesis.openapi.from_dict(create_app(_settings(Path("unused-data-dir"))).openapi())
schema.app = LATE


@pytest.fixture(scope="module", autouse=True)
def fuzzed_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    container = Container(_settings(tmp_path_factory.mktemp("fuzz")))
    build_qa_store(container)
    app = create_app(container=container)
    with TestClient(app) as client:
        deadline = time.monotonic() + 300  # loaded, as `medkg serve` warms up: /readyz 200, not 503 "loading"
        while (ready := client.get("/readyz")).status_code != 200:
            assert ready.json()["status"] == "loading" and time.monotonic() < deadline, ready.text
            time.sleep(0.1)
        LATE.app = app
        yield app
        LATE.app = None
    total = sum(CASES.values())
    print(f"\nAPI fuzz: {total} requests over {len(CASES)} operations: {dict(sorted(CASES.items()))}")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_error_and_responses_match_the_schema(case: schemathesis.Case) -> None:
    CASES[case.operation.label] += 1
    case.call_and_validate(
        checks=[
            schemathesis.checks.not_a_server_error,
            schemathesis.checks.response_schema_conformance,
        ]
    )


def test_every_operation_was_fuzzed() -> None:
    """Runs after the fuzz tests (file order): a generator that produced nothing must not pass silently."""
    operations = {f"{m.upper()} {p}" for p, item in schema.raw_schema["paths"].items() for m in item}
    assert operations == set(CASES), f"never called: {sorted(operations - set(CASES))}"
    assert all(n >= 5 for n in CASES.values()), CASES


def test_errors_are_documented_with_the_shape_they_have() -> None:
    """Regression (found by the schema check): every 422 declared FastAPI's ``{"detail": [...]}`` while
    the app answers ``{"error", "detail", "status"}`` with ``detail`` often a message."""
    spec = schema.raw_schema
    assert "HTTPValidationError" not in str(spec)
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    body = response["content"]["application/json"]["schema"]
                    assert body == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)


def test_the_app_answers_after_its_lifespan_restarts(fuzzed_app: FastAPI) -> None:
    """Regression (found by the fuzzer: schemathesis restarts an app's lifespan for each test): the
    lifespan closes the container, and components built before (linker, retriever, QA engine) kept the
    closed store, so the restarted app answered 500."""
    for _ in range(2):
        with TestClient(fuzzed_app) as client:
            r = client.post("/v1/qa", json={"question": "Which drugs treat epilepsy?"})
            assert r.status_code == 200, r.text
            assert client.get("/v1/link", params={"q": "Marfan syndrome"}).status_code == 200
