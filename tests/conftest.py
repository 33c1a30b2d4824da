"""Shared fixtures: real stores only. The Neo4j adapter runs against the server named by
``MEDKG_NEO4J_URI`` (started by ``.ci/neo4j.sh start``); in CI (``CI=true``) its absence fails the
run instead of skipping, so the contract is always proven on both backends there."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kg.graph.base import BaseGraphStore
from kg.graph.ladybug_store import LadybugGraphStore

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _own_neo4j_per_worker() -> None:
    """Under pytest-xdist, worker gwN (N >= 1) uses the Neo4j that .ci/test.sh started for it
    (.neo4j-gwN/env): the Neo4j tests clear the one user database, so two workers cannot share one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker == "gw0" or not os.environ.get("MEDKG_NEO4J_URI"):
        return
    env = Path(__file__).resolve().parents[1] / f".neo4j-{worker}" / "env"
    if not env.is_file():
        raise pytest.UsageError(f"worker {worker} has no Neo4j of its own ({env}): run the tests with .ci/test.sh")
    for line in env.read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        os.environ[name] = value


_own_neo4j_per_worker()


def neo4j_settings() -> dict[str, str] | None:
    uri = os.environ.get("MEDKG_NEO4J_URI")
    if not uri:
        return None
    return {
        "uri": uri,
        "user": os.environ.get("MEDKG_NEO4J_USER", "neo4j"),
        "password": os.environ.get("MEDKG_NEO4J_PASSWORD", "neo4j"),
        "database": os.environ.get("MEDKG_NEO4J_DATABASE", "neo4j"),
    }


def require_neo4j() -> dict[str, str]:
    settings = neo4j_settings()
    if settings is None:
        message = "MEDKG_NEO4J_URI is not set: start Neo4j with `.ci/neo4j.sh start && . .neo4j/env`"
        if IN_CI:
            pytest.fail("CI must run the Neo4j tests, but " + message)
        pytest.skip(message)
    return settings


@pytest.fixture(scope="session")
def _neo4j_store() -> Iterator[BaseGraphStore]:
    from kg.graph.neo4j_store import Neo4jGraphStore

    store = Neo4jGraphStore(**require_neo4j(), batch_size=2000)
    yield store
    store.clear()
    store.close()


def open_ladybug(path: Path) -> LadybugGraphStore:
    # Small, explicit limits: many test databases are open during one run.
    return LadybugGraphStore(path / "graph.lbug", buffer_pool_mb=512, max_db_size_gb=4, batch_size=2000)


@pytest.fixture(params=["ladybug", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseGraphStore]:
    """An empty graph store of each backend."""
    if request.param == "ladybug":
        s = open_ladybug(tmp_path)
        yield s
        s.close()
    else:
        s = request.getfixturevalue("_neo4j_store")
        s.clear()
        yield s
        s.clear()


@pytest.fixture(scope="session")
def text_embedder():  # noqa: ANN201 - kg.embedders.TextEmbedder
    """The real offline embedding model, loaded once per test session, on the path this CPU gets (or the one
    MEDKG_EMBEDDING_BACKEND / MEDKG_EMBEDDING_DTYPE ask for: the suite runs on each path that way)."""
    from kg.embedders import TextEmbedder
    from kg.settings import DEFAULT_EMBEDDING_MODEL, Settings

    return TextEmbedder(
        DEFAULT_EMBEDDING_MODEL,
        dtype=os.environ.get("MEDKG_EMBEDDING_DTYPE", "auto"),
        backend=os.environ.get("MEDKG_EMBEDDING_BACKEND", "auto"),
        memo_mb=Settings.model_fields["vector_memo_mb"].default,  # graph texts shared across tests, as installs do
    )


def shared(*parts: str) -> Path:
    """A path under ../shared/data, or a skip saying it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (real data from ../shared/data; present in CI)")
    return path


# The files that take longest (minutes each in CI, `--durations`), run first: with `--dist loadfile
# --no-loadscope-reorder` (.ci/test.sh) pytest-xdist hands files to the workers in collection order, so a
# long file collected last would keep one worker busy while the other had nothing left. (Without that flag
# xdist hands out the files with the most tests first, whatever this order: until 2026-12-06 the demo's file
# started 12 min into a run of 3 workers, schemathesis 25 min into it.) The two Ray
# files are far apart in the list, so that they rarely run at once (a local Ray start timed out once beside
# another heavy test: ingest/pubmed/distributed.py retries it).
LONGEST_FIRST = (
    "tests/e2e/cli/test_ingest.py",
    "tests/integration/ingest/pubmed/test_distributed.py",
    "tests/integration/benchmarks/test_smoke.py",
    "tests/integration/ingest/test_ontologies.py",
    "tests/reliability/test_api_contract.py",
    "tests/integration/eval/test_smoke.py",
    "tests/e2e/cli/test_pubmed.py",
    "tests/reliability/test_sigkill_ray.py",
    "tests/reliability/test_disk_full.py",
    "tests/integration/ingest/test_hpo_update.py",
    "tests/reliability/test_serving_faults.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (:data:`LONGEST_FIRST`), the rest in collection order. And schemathesis
    (4.x, with pytest 9) gives each operation's fuzz test the function's bare node id; pytest-xdist
    schedules by node id, so those would collapse into one test: the operation is added."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: files stay whole
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and not item.nodeid.endswith("]"):
            try:  # pytest 9 keeps the node id as a NodeId in ``_id``, pytest 8 as a string in ``_nodeid``
                from _pytest.nodeid import coerce_node_id

                item._id = coerce_node_id(f"{item.nodeid}[{label}]")
            except ImportError:
                item._nodeid = f"{item.nodeid}[{label}]"


SUITE_GOAL_S = 25 * 60  # `make test` on 2 cores (docs/architecture.md, Tests)
_started = time.monotonic()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The whole run's wall time against the suite's goal, just above pytest's closing line."""
    took = time.monotonic() - _started
    verdict = "within" if took <= SUITE_GOAL_S else "OVER"
    terminalreporter.write_line(
        f"suite time: {took / 60:.1f} min, {verdict} the goal of {SUITE_GOAL_S // 60} min on 2 cores"
    )
