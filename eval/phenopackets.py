"""Differential diagnosis on real published cases (``python -m eval.phenopackets [FILE]``).

Each line of the phenopacket file (../shared/data/phenopackets/dev.jsonl) is a case: observed and
excluded HPO terms and the diagnosed disease(s). The true disease's rank under medkg's score and
under plain Resnik best-match average (the baseline, computed in the same run on the same cases)
gives top-1, top-3, top-10 and MRR. A case whose disease is not in the graph (directly or through
``SAME_AS``) is counted and reported, never dropped silently.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kg.differential import PhenotypeIndex
from kg.graph.base import BaseGraphStore

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "top1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "top3": round(sum(1 for r in ranks if r and r <= 3) / n, 3),
        "top10": round(sum(1 for r in ranks if r and r <= 10) / n, 3),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 3),
    }


def evaluate(index: PhenotypeIndex, store: BaseGraphStore, path: Path, limit: int | None = None) -> dict:
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    cases = cases[:limit] if limit else cases
    ours: list[int | None] = []
    base: list[int | None] = []
    unmapped = 0
    latencies = []
    for case in cases:
        targets = set()
        for disease in case["diseases"]:
            if disease in index.disease_index:
                targets.add(disease)
            else:  # through SAME_AS (e.g. a MONDO or ORPHA id of an OMIM disease)
                targets |= {
                    n.entity.id
                    for n in store.neighbours(disease, rel_types=["SAME_AS"])
                    if n.entity.id in index.disease_index
                }
        if not targets:
            unmapped += 1
            continue
        t0 = time.perf_counter()
        index.rank(case["observed"], case.get("excluded", []), top_k=10)  # what the API does: timed
        latencies.append(time.perf_counter() - t0)
        # OMIM and Orphanet describe many diseases twice: rank within the namespace of the diagnosis
        namespaces = sorted({t.split(":")[0] for t in targets})
        score, baseline, _ = index.scores(case["observed"], case.get("excluded", []), prefixes=namespaces)
        ours.append(index.rank_of(score, targets))
        base.append(index.rank_of(baseline, targets))
    lat = sorted(latencies) or [0.0]
    return {
        "cases": len(cases),
        "evaluated": len(ours),
        "unmapped_disease": unmapped,
        "medkg": _metrics(ours),
        "baseline_resnik_bma": _metrics(base),
        "latency_ms_p50": round(1000 * statistics.median(lat), 1),
        "latency_ms_p95": round(1000 * lat[int(0.95 * (len(lat) - 1))], 1),
    }


def report(result: dict) -> None:
    print(
        f"{result['evaluated']} of {result['cases']} cases evaluated; {result['unmapped_disease']} with a disease "
        "not in the graph"
    )
    print(f"{'':<22} {'top-1':>6} {'top-3':>6} {'top-10':>7} {'MRR':>6}")
    for name in ("baseline_resnik_bma", "medkg"):
        m = result[name]
        print(f"{name:<22} {m['top1']:>6.3f} {m['top3']:>6.3f} {m['top10']:>7.3f} {m['mrr']:>6.3f}")
    print(f"ranking all diseases: p50 {result['latency_ms_p50']} ms, p95 {result['latency_ms_p95']} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, nargs="?", default=SHARED / "phenopackets" / "dev.jsonl")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.file.exists():
        print(f"{args.file} is absent (../shared/data/phenopackets)")
        return 2
    from ingest.hpo import hpo_items
    from ingest.writer import ingest
    from kg.graph.ladybug_store import LadybugGraphStore

    with tempfile.TemporaryDirectory(prefix="medkg-eval-pp-") as tmp:
        store = LadybugGraphStore(Path(tmp) / "graph.lbug", buffer_pool_mb=2048, max_db_size_gb=16)
        try:
            ingest(store, hpo_items(), "hpo", progress=False)
            t0 = time.perf_counter()
            index = PhenotypeIndex.from_graph(store)
            print(
                f"phenotype index: {len(index.diseases):,} diseases, {len(index.terms):,} terms "
                f"({time.perf_counter() - t0:.1f} s from the graph)"
            )
            result = evaluate(index, store, args.file, args.limit)
        finally:
            store.close()
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
