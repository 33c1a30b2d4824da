"""Helpers shared by the benchmarks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kg.graph.base import BaseGraphStore


def write_results(path: Path | None, results: dict[str, Any]) -> None:
    """Write a benchmark's figures as JSON when ``--json`` named a file."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))


def neo4j_from_env() -> BaseGraphStore | None:
    """The Neo4j named by MEDKG_NEO4J_* (cleared), or None with a printed reason when it is not set."""
    if not os.environ.get("MEDKG_NEO4J_URI"):
        print("neo4j: skipped (MEDKG_NEO4J_URI not set; `.ci/neo4j.sh start && . .neo4j/env`)")
        return None
    from kg.graph.neo4j_store import Neo4jGraphStore

    store = Neo4jGraphStore(
        os.environ["MEDKG_NEO4J_URI"],
        os.environ.get("MEDKG_NEO4J_USER", "neo4j"),
        os.environ.get("MEDKG_NEO4J_PASSWORD", "neo4j"),
        os.environ.get("MEDKG_NEO4J_DATABASE", "neo4j"),
    )
    store.clear()
    return store
