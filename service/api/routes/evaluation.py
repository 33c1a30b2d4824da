"""Evaluation results for the web page ``/eval``: the runs in ``MEDKG_EVAL_DIR`` with their charts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from service.api.deps import get_container
from service.container import Container
from service.web.eval_charts import accuracy_svg, collect_differential, collect_runs, differential_svg, latency_svg

router = APIRouter(prefix="/v1", tags=["evaluation"])
Deps = Annotated[Container, Depends(get_container)]


@router.get("/eval/runs")
def eval_runs(c: Deps) -> dict[str, Any]:
    """Every benchmark run written by ``medkg eval ... --out MEDKG_EVAL_DIR``: accuracy with its 95%
    interval, chance, latency percentiles; the differential diagnosis runs (``medkg eval phenopackets``:
    top-k and MRR of medkg and its baselines, the differences with their intervals, and what became of
    the file's lines: ``cases`` read, ``evaluated``, ``unmapped_disease``, ``no_known_observed_term``,
    ``malformed_lines`` with the first few named in ``malformed``); and the charts as SVG (accuracy by
    dataset and mode, latency distribution per run, the differential runs)."""
    runs = collect_runs(c.settings.eval_dir)
    differential = collect_differential(c.settings.eval_dir)
    return {
        "dir": str(c.settings.eval_dir),
        "runs": [{k: v for k, v in r.items() if k != "latencies"} | {"answered": len(r["latencies"])} for r in runs],
        "differential": differential,
        "charts": {
            "accuracy": accuracy_svg(runs),
            "latency": latency_svg(runs),
            "differential": differential_svg(differential),
        },
    }
