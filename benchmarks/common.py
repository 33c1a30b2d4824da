"""Helpers shared by the benchmarks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kg.graph.base import BaseGraphStore
    from kg.settings import Settings


def write_results(path: Path | None, results: dict[str, Any]) -> None:
    """Write a benchmark's figures as JSON when ``--json`` named a file."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))


def neo4j_from_settings(settings: Settings) -> BaseGraphStore | None:
    """The Neo4j that ``settings`` name (MEDKG_NEO4J_*), cleared, or None with a printed reason when
    MEDKG_NEO4J_URI is not set."""
    if "neo4j_uri" not in settings.model_fields_set:  # the default URI is no Neo4j to benchmark
        print("neo4j: skipped (MEDKG_NEO4J_URI not set; `.ci/neo4j.sh start && . .neo4j/env`)")
        return None
    from kg.graph.neo4j_store import Neo4jGraphStore

    store = Neo4jGraphStore(
        settings.neo4j_uri,
        settings.neo4j_user,
        settings.neo4j_password.get_secret_value(),
        settings.neo4j_database,
    )
    store.clear()
    return store


def write_hpo_subset(src: Path, out: Path, lines: list[str], chosen: set[str], terms: set[str]) -> Path:
    """An HPO folder in ``out`` holding only the ``chosen`` diseases of ``src``: their phenotype.hpoa
    ``lines`` and genes_to_phenotype lines, and the hp.obo terms in ``terms`` (plus those the genes use)
    with their ancestors, so every term keeps its branch's category."""
    import re

    out.mkdir(parents=True, exist_ok=True)
    with (out / "phenotype.hpoa").open("w") as f:
        f.writelines(line for line in lines if line.startswith(("#", "database_id")) or line.split("\t")[0] in chosen)
    with (src / "genes_to_phenotype.txt").open() as fin, (out / "genes_to_phenotype.txt").open("w") as fout:
        fout.write(next(fin))
        for line in fin:
            cols = line.rstrip("\n").split("\t")
            if cols[-1] in chosen:
                fout.write(line)
                terms.add(cols[2])
    header, *stanzas = (src / "hp.obo").read_text().split("\n\n")
    ids = [re.search(r"^id: (\S+)", s, re.M) for s in stanzas]
    parents = {m[1]: re.findall(r"^is_a: (\S+)", s, re.M) for s, m in zip(stanzas, ids, strict=True) if m}
    todo = list(terms)
    while todo:
        for parent in parents.get(todo.pop(), []):
            if parent not in terms:
                terms.add(parent)
                todo.append(parent)
    kept = [
        s for s, m in zip(stanzas, ids, strict=True) if not s.lstrip().startswith("[Term]") or (m and m[1] in terms)
    ]
    (out / "hp.obo").write_text("\n\n".join([header, *kept]))
    return out
