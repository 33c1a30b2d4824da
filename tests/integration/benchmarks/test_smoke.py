"""The benchmarks in CI-sized form: they run end to end (on both backends where they compare them) and print
their figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import graph_store, images, ingest_ontology, ingest_pubmed, qa_latency
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
    assert ingest_ontology.main(["--entities", "5000", "--relations", "3000"]) == 0
    out = capsys.readouterr().out
    assert "read+parse HPO: 5,000 entities, 3,000 relations" in out
    assert "ladybug:" in out and "neo4j:" in out and "ratio ladybug/neo4j" in out


def test_gpu_embedding_benchmark_runs_its_path_on_the_cpu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The device benchmark (run where an accelerator is lent) on this machine's CPU: the same code."""
    from benchmarks import gpu_embedding

    contexts = [c for item in json.loads(shared("pubmedqa", "pqal_dev.json").read_text()).values()
                for c in item["CONTEXTS"]][:20]  # fmt: skip
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": c}) + "\n" for c in contexts))
    figures_path = tmp_path / "gpu.json"
    args = ["--device", "cpu", "--passages", "64", "--texts", str(texts), "--json", str(figures_path)]
    assert gpu_embedding.main(args) == 0
    assert "passages/s over 64; 100M passages in" in capsys.readouterr().out
    figures = json.loads(figures_path.read_text())
    assert figures["passages"] == 64 and figures["passages_per_s"] > 0 and figures["cosine_to_float32_min"] > 0.99


@pytest.mark.slow
def test_pubmed_ingest_benchmark_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = shared("pubmed_xml")
    figures_path = tmp_path / "figures.json"
    args = ["--records", "100", "--no-hpo", "--flat-records", "1000", "--source", str(source)]
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
    assert run["articles"] == 100 and run["abstracts"] > 75 and run["passages_embedded"] > 0
    assert run["rerun_passages_embedded"] == 0  # the re-run found everything unchanged
    assert figures["parse"]["plain"]["abstracts"] == figures["parse"]["gzip"]["abstracts"] > 0
    memory = figures["parse_memory"]
    assert memory["large"]["articles"] >= 1000 > memory["one copy"]["articles"]


@pytest.mark.slow
def test_qa_latency_benchmark_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = shared()
    for part in ("pubmed_xml", "pubmedqa/pqal_dev.json"):
        shared(*part.split("/"))
    figures_path = tmp_path / "figures.json"
    args = ["--records", "40", "--hpo-diseases", "40", "--data-dir", str(tmp_path / "data"), "--shared-data", str(data)]
    assert qa_latency.main([*args, "--questions", "12", "--json", str(figures_path)]) == 0
    out = capsys.readouterr().out
    assert "setup: HPO (40 diseases) loaded" in out and "per 1,000 abstracts" in out
    assert "questions: 12" in out and "cold start" in out and "wall (around ask)" in out
    assert "HTTP POST /v1/qa" in out and "baseline: text index alone" in out and "ratio QA/text index" in out
    assert "targets (2 cores, offline): p50 <= 100 ms, p95 <= 250 ms" in out

    figures = json.loads(figures_path.read_text())
    assert figures["setup"]["abstracts"] == figures["setup"]["documents"] == 40
    mix = figures["mix"]
    assert sum(mix.values()) == figures["questions"] == len(figures["question_list"]) == 12
    assert mix["pubmedqa"] == 5 and mix["off_topic"] == 1 and mix["drug_disease_pair"] == 1
    assert {"disease_phenotypes", "disease_genes", "phenotype_diseases"} <= mix.keys()
    local = figures["in_process"]
    for stage in ("link", "embed", "graph_facts", "graph_paths", "graph_rank", "text", "bundle", "answer", "total"):
        p = local["stages_ms"][stage]
        assert 0 <= p["p50"] <= p["p95"] <= p["max"], stage
    assert 0 < local["wall_ms"]["p50"] <= local["wall_ms"]["p95"]
    assert 0 < local["evidence_tokens"]["p50"] <= local["evidence_tokens"]["max"] <= 1500
    assert 0 < local["abstained_share"] < 1 and local["mean_citations"] > 0
    assert local["by_kind"]["off_topic"]["abstained_share"] == 1
    http = figures["http"]
    assert http["errors"] == {} and 0 < http["total_ms"]["p50"] <= http["total_ms"]["p95"]
    assert figures["http_overhead_p50_ms"] == pytest.approx(http["total_ms"]["p50"] - local["wall_ms"]["p50"], abs=0.02)
    assert 0 < figures["baseline_text_index"]["p50"] and figures["ratio_p50"] > 0
    assert figures["cold_start"]["warm_up_questions"] == 5 and figures["cold_start"]["differential_warmed"]
    assert set(figures["targets"]["in_process"].values()) <= {"PASS", "MISS"}

    # A rerun on the same data dir loads nothing and asks the same questions.
    assert qa_latency.main([*args, "--questions", "12", "--json", str(figures_path)]) == 0
    out = capsys.readouterr().out
    assert "HPO already loaded" in out and "40 documents already in the text index" in out
    assert "entity index: 0 embedded" in out
    again = json.loads(figures_path.read_text())
    asked = [(row["kind"], row["question"]) for row in figures["question_list"]]
    assert [(row["kind"], row["question"]) for row in again["question_list"]] == asked


@pytest.mark.slow
def test_images_benchmark_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = shared("dicom")
    figures_path = tmp_path / "figures.json"
    args = ["--vectors", "300", "--queries", "20", "--passes", "1", "--source", str(source)]
    assert images.main([*args, "--json", str(figures_path)]) == 0
    out = capsys.readouterr().out
    assert "decode (read_dicom" in out and "files/s" in out and "MB/s" in out and "uncompressed" in out
    assert "embed (descriptor, 151 dims, batches of 64)" in out and "embedding adds" in out
    assert "VectorIndex kind 'flat'" in out and "baseline: numpy brute force" in out
    assert "ratio ImageIndex.search(vector)/brute force" in out and "recall@10" in out
    assert "peak RSS of this process" in out

    figures = json.loads(figures_path.read_text())
    decode = figures["decode"]
    assert decode["files_per_s"] > 0 and decode["mb_per_s"] > 0 and decode["images"] > 0
    assert sum(g["files"] for g in decode["groups"].values()) == decode["files"]
    assert sum(decode["errors"].values()) == decode["files"] - decode["images"]
    assert figures["embed"]["descriptor"]["images_per_s"] > 0
    index = figures["index"]
    assert index["vectors"] == index["rows"] >= 300 and index["kind"] == "flat"
    assert index["real"] + index["synthetic"] == index["vectors"] and index["add_images_per_s"] > 0
    search = figures["search"]
    assert search["queries"] == 20 and search["k"] == 10
    for name in ("by_vector", "by_vector_1_thread", "by_image", "faiss", "brute_force"):
        p = search["ms"][name]
        assert 0 < p["p50"] <= p["p95"] <= p["max"], name
    assert search["ratio_p50"] > 0
    assert search["recall_at_10"] == 1.0  # a flat index is exact


@pytest.mark.slow
def test_scale_benchmark_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two sizes, the second past a lowered flat_max: the passage store switches to IVF-PQ, the figures
    of both print as JSON lines with their ratios, and recall is measured against exact search."""
    from benchmarks import scale

    shared("pubmedqa")
    args = ["--sizes", "2000,8000", "--flat-max", "4000", "--checkpoints", "1", "--no-serve", "--real", "400"]
    assert scale.main([*args, "--json", "--dir", str(tmp_path / "data")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["passages"] for r in rows] == [2000, 8000]
    assert [r["dense_kind"] for r in rows] == ["flat", "ivf"] and rows[1]["nprobe"] <= rows[1]["nlist"]
    for key in ("checkpoint_s", "checkpoint_ratio", "search_p50_ms", "search_p95_ms", "recall_at_10", "disk_mb"):
        assert all(isinstance(r[key], int | float) for r in rows), key
    assert rows[0]["recall_at_10"] == 1.0 and rows[1]["recall_at_10"] >= 0.9


@pytest.mark.slow
def test_embedding_benchmark_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The paths asked for run (or say why they cannot) on a few real texts, and the last line is the JSON
    summary the issue asks for: the path kept holds the quality bar and its speedup is measured against
    float32. (One graph of each kind of export: the other ORT levels are the same export at another level;
    AOTInductor's compile is tested in tests/unit/kg/test_embedder_backends.py.)"""
    from benchmarks import embedding

    shared("pubmedqa")
    args = ["--passages", "8", "--entities", "8", "--calibration", "8", "--repeats", "1", "--cache", str(tmp_path)]
    chosen = ["--paths", "onnx:O3,onnx:O2-int8,onnx:int8-static,openvino:float32"]
    assert embedding.main([*args, *chosen, "--json"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    for key in ("speedup", "mean_cosine", "min_cosine", "backend", "cpu"):
        assert key in summary, key
    assert summary["mean_cosine"] >= 0.99 and summary["min_cosine"] >= 0.97 and summary["speedup"] > 0
    paths = {row["path"]: row for row in summary["paths"]}
    assert paths["torch float32"]["speedup"] == 1.0
    onnx = ["onnx float32 (O3 graph)", "onnx int8 (O2-int8 graph)", "onnx int8 (int8-static graph)"]
    assert set(paths) - {"torch float32"} <= {*onnx, "openvino float32 (float32 graph)"} and set(onnx) <= set(paths)
    # OpenVINO is an extra (`pip install medkg[openvino]`): where it is not installed the path says so
    assert "openvino float32 (float32 graph)" in paths or "openvino float32 (float32 graph): cannot run here" in out
    assert paths["onnx float32 (O3 graph)"]["min_cosine"] > 0.9999


def test_embedding_benchmark_refuses_an_unknown_path(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import embedding

    with pytest.raises(SystemExit) as exit_:
        embedding.main(["--paths", "onnx:O9"])
    assert exit_.value.code == 2 and "no path onnx:O9 on this CPU; the paths: onnx:float32" in capsys.readouterr().err


@pytest.mark.parametrize("bf16", [False, True])
def test_every_embedding_path_has_a_name_of_its_own(bf16: bool) -> None:
    """On a bf16 CPU OpenVINO runs its float32 graph at two precisions: `--paths openvino:float32` is the
    float32 one there too (it picked bfloat16 once, and the smoke test failed on such a CPU)."""
    from benchmarks.embedding import _candidates, _spec

    paths = _candidates({"bf16": bf16})
    named = {_spec(p): p for p in paths}
    assert len(named) == len(paths)
    assert (named["openvino:float32"].dtype, named["onnx:O2-int8"].dtype) == ("float32", "int8")
    if bf16:
        assert named["openvino:float32@bfloat16"].dtype == named["torch@bfloat16"].dtype == "bfloat16"
