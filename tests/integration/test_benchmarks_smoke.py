"""The benchmarks in CI-sized form: they run end to end (on both backends where they compare them) and print
their figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import graph_store, ingest_ontology, ingest_pubmed
from tests.conftest import require_neo4j, shared


@pytest.mark.neo4j
def test_graph_store_benchmark_small(capsys: pytest.CaptureFixture[str]) -> None:
    require_neo4j()
    assert graph_store.main(["--entities", "2000", "--relations", "6000", "--queries", "50"]) == 0
    out = capsys.readouterr().out
    assert "ladybug:" in out and "neo4j:" in out and "ratio ladybug/neo4j" in out


@pytest.mark.neo4j
def test_ingest_benchmark_subset(capsys: pytest.CaptureFixture[str]) -> None:
    require_neo4j()
    assert ingest_ontology.main(["--relations", "3000"]) == 0
    out = capsys.readouterr().out
    assert "read+parse HPO: 37,303 entities, 3,000 relations" in out
    assert "ladybug:" in out and "neo4j:" in out and "ratio ladybug/neo4j" in out


@pytest.mark.slow
def test_pubmed_ingest_benchmark_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = shared("pubmed_xml")
    figures_path = tmp_path / "figures.json"
    args = ["--records", "200", "--no-hpo", "--flat-records", "1000", "--source", str(source)]
    assert ingest_pubmed.main([*args, "--json", str(figures_path)]) == 0
    out = capsys.readouterr().out
    assert "parse only (plain):" in out and "parse only ( gzip):" in out and "abstracts/s" in out
    assert "streaming parser memory" in out and "tracemalloc peak" in out
    assert "ladybug: end to end" in out
    for stage in ingest_pubmed.STAGES:
        assert f"    {stage} " in out, stage
    assert "re-run, everything unchanged" in out and "ratio end-to-end/bare embedder" in out
    assert "peak RSS of this process" in out

    figures = json.loads(figures_path.read_text())
    run = figures["end_to_end"][0]
    assert run["articles"] == 200 and run["abstracts"] > 150 and run["passages_embedded"] > 0
    assert run["rerun_passages_embedded"] == 0  # the re-run found everything unchanged
    assert figures["parse"]["plain"]["abstracts"] == figures["parse"]["gzip"]["abstracts"] > 0
    memory = figures["parse_memory"]
    assert memory["large"]["articles"] >= 1000 > memory["one copy"]["articles"]
