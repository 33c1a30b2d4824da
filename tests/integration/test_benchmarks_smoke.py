"""The benchmarks in CI-sized form: they run end to end on both backends and print their figures."""

from __future__ import annotations

import pytest

from benchmarks import graph_store, ingest_ontology
from tests.conftest import require_neo4j

pytestmark = pytest.mark.neo4j


def test_graph_store_benchmark_small(capsys: pytest.CaptureFixture[str]) -> None:
    require_neo4j()
    assert graph_store.main(["--entities", "2000", "--relations", "6000", "--queries", "50"]) == 0
    out = capsys.readouterr().out
    assert "ladybug:" in out and "neo4j:" in out and "ratio ladybug/neo4j" in out


def test_ingest_benchmark_subset(capsys: pytest.CaptureFixture[str]) -> None:
    require_neo4j()
    assert ingest_ontology.main(["--relations", "3000"]) == 0
    out = capsys.readouterr().out
    assert "read+parse HPO: 37,303 entities, 3,000 relations" in out
    assert "ladybug:" in out and "neo4j:" in out and "ratio ladybug/neo4j" in out
