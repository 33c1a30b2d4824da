"""Graph-store benchmark: bulk upsert, 2-hop neighbourhoods and bounded path queries on both backends
(the embedded Ladybug store and Neo4j, its database cleared first) over one seeded random graph, with
throughput, p50/p95 and the Ladybug/Neo4j ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import neo4j_from_settings, write_results
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from kg.settings import load_settings

CATEGORIES = ["Disease", "Phenotype", "Gene", "Drug"]
TYPES = ["HAS_PHENOTYPE", "ASSOCIATED_WITH", "TREATS", "IS_A", "INTERACTS_WITH"]


def build_graph(n_entities: int, n_relations: int, seed: int) -> tuple[list[Entity], list[Relation]]:
    """A seeded random graph: entities of four categories, typed relations, ~5% of them SAME_AS."""
    rng = random.Random(seed)
    entities = [
        Entity(id=f"HP:{i:07d}", name=f"entity {i}", category=CATEGORIES[i % 4], synonyms=[f"syn {i}"])
        for i in range(n_entities)
    ]
    seen: set[tuple[int, int, str]] = set()
    relations: list[Relation] = []
    while len(relations) < n_relations:
        a, b = rng.randrange(n_entities), rng.randrange(n_entities)
        t = "SAME_AS" if rng.random() < 0.05 else rng.choice(TYPES)
        if a == b or (a, b, t) in seen:
            continue
        seen.add((a, b, t))
        relations.append(
            Relation(
                subject=f"HP:{a:07d}", type=t, object=f"HP:{b:07d}", source="bench", evidence={"n": len(relations)}
            )
        )
    return entities, relations


def connected_pairs(relations: list[Relation], count: int, seed: int) -> list[tuple[str, str]]:
    """Half the pairs lie at the ends of a 2-3 step walk (so a path exists), half are random nodes."""
    rng = random.Random(seed)
    adjacency: dict[str, list[str]] = {}
    for r in relations:
        adjacency.setdefault(r.subject, []).append(r.object)
        adjacency.setdefault(r.object, []).append(r.subject)
    nodes = sorted(adjacency)
    pairs = []
    while len(pairs) < count:
        start = rng.choice(nodes)
        if len(pairs) % 2:
            end = rng.choice(nodes)
        else:
            end = start
            for _ in range(rng.choice([2, 3])):
                end = rng.choice(adjacency[end])
        if end != start:
            pairs.append((start, end))
    return pairs


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def latencies(fn: Callable[[object], object], args: list) -> dict[str, float]:
    times = []
    hits = 0
    for a in args:
        t0 = time.perf_counter()
        result = fn(a)
        times.append((time.perf_counter() - t0) * 1000)
        hits += bool(result)
    times.sort()
    return {
        "p50_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * (len(times) - 1))],
        "qps": len(times) / (sum(times) / 1000),
        "non_empty": hits,
    }


def run_backend(store: BaseGraphStore, entities: list[Entity], relations: list[Relation], queries: int) -> dict:
    result: dict[str, object] = {"backend": store.backend}
    t, _ = timed(lambda: store.upsert_entities(entities))
    result["entities_per_s"] = len(entities) / t
    t, summary = timed(lambda: store.upsert_relations(relations))
    result["relations_per_s"] = len(relations) / t
    result["relations_load_s"] = t
    t, again = timed(lambda: store.upsert_relations(relations))
    assert again.unchanged == len(relations), again  # type: ignore[union-attr]
    result["relations_reupsert_s"] = t
    st = store.stats()
    assert (st.entities, st.relations) == (len(entities), len(relations)), st
    rng = random.Random(3)
    centres = [f"HP:{rng.randrange(len(entities)):07d}" for _ in range(queries)]
    result["neighbourhood_2hop"] = latencies(lambda c: store.neighbourhood(c, hops=2, limit=500).relations, centres)
    pairs = connected_pairs(relations, queries, seed=5)
    result["paths_3hop"] = latencies(lambda p: store.paths(p[0], p[1], max_hops=3, free_same_as=1, limit=10), pairs)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=50_000)
    ap.add_argument("--relations", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--backends", default="ladybug,neo4j")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)

    t, (entities, relations) = timed(lambda: build_graph(args.entities, args.relations, args.seed))
    print(f"graph: {len(entities):,} entities, {len(relations):,} relations (built in {t:.1f} s)", flush=True)
    results = []
    for backend in args.backends.split(","):
        if backend == "ladybug":
            from kg.graph.ladybug_store import LadybugGraphStore

            with tempfile.TemporaryDirectory() as tmp:
                store = LadybugGraphStore(Path(tmp) / "graph.lbug", buffer_pool_mb=1024, max_db_size_gb=16)
                try:
                    results.append(run_backend(store, entities, relations, args.queries))
                finally:
                    store.close()
        elif backend == "neo4j":
            store = neo4j_from_settings(load_settings())  # type: ignore[assignment]
            if store is None:
                continue
            try:
                results.append(run_backend(store, entities, relations, args.queries))
                store.clear()
            finally:
                store.close()
        else:
            print(f"unknown backend {backend!r}", file=sys.stderr)
            return 2
        r = results[-1]
        print(
            f"{r['backend']:>8}: entities {r['entities_per_s']:,.0f}/s  relations {r['relations_per_s']:,.0f}/s "
            f"(load {r['relations_load_s']:.1f} s, idempotent re-upsert {r['relations_reupsert_s']:.1f} s)",
            flush=True,
        )
        for name in ("neighbourhood_2hop", "paths_3hop"):
            q = r[name]
            print(
                f"{'':>8}  {name:<18} p50 {q['p50_ms']:7.2f} ms  p95 {q['p95_ms']:7.2f} ms  "
                f"{q['qps']:8.1f} q/s  ({q['non_empty']} of {args.queries} non-empty)",
                flush=True,
            )
    if len(results) == 2:
        lady, neo = results
        print("ratio ladybug/neo4j (throughput: >1 means Ladybug is faster; latency: <1 means Ladybug is faster)")
        print(f"  relations/s {lady['relations_per_s'] / neo['relations_per_s']:.2f}x")
        print(f"  entities/s  {lady['entities_per_s'] / neo['entities_per_s']:.2f}x")
        for name in ("neighbourhood_2hop", "paths_3hop"):
            print(
                f"  {name} p50 {lady[name]['p50_ms'] / neo[name]['p50_ms']:.2f}x, "
                f"p95 {lady[name]['p95_ms'] / neo[name]['p95_ms']:.2f}x"
            )
    write_results(args.json_out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
