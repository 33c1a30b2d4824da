"""A graph built on the embedded store, written as neo4j-admin import files, imported by the real
`neo4j-admin database import full` into an empty Neo4j: read back through the Neo4j adapter it is the
graph it came from (entities, every edge with its history, counts, paths)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from ingest.obo import obo_items
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from kg.graph.neo4j_import import ImportFilesError, write_import_files
from kg.graph.neo4j_store import Neo4jGraphStore
from kg.graph.rows import row_to_entity, row_to_relation
from kg.model import Entity, Relation
from tests.conftest import open_ladybug
from tests.support.cli import run
from tests.support.neo4j_process import Neo4jProcess
from tests.support.ontology_data import DO_RARE, need

pytestmark = pytest.mark.neo4j

AWKWARD = [
    Entity(
        id="TEST:1",
        name='Quote "and" comma, semicolon; pipe |',
        category="Disease",
        synonyms=["line\nbreak", "tab\there", "ünïcödé ≥ 5"],
        description='multi\nline "description", with ""doubled"" quotes',
        xrefs=["MESH:D000001"],
        sources=["test"],
    ),
    Entity(id="TEST:2", name="no description, no synonyms", category="Entity"),
    Entity(id="TEST:3", name="obsolete", category="Phenotype", obsolete=True, description=""),
]


def _graph(store: BaseGraphStore) -> None:
    ingest(store, obo_items(DO_RARE, source="doid"), "doid", progress=False)
    store.upsert_entities(AWKWARD)
    first = Relation(
        subject="TEST:1", type="ASSOCIATED_WITH", object="TEST:2", source="test",
        evidence={"quote": 'said "so", twice\nover two lines', "n": [1, 2]}, confidence=0.25,
    )  # fmt: skip
    store.upsert_relations([first])
    store.invalidate_relations([first])  # history: an ended edge, then its successor
    store.upsert_relations([first.model_copy(update={"confidence": 0.75}), Relation(
        subject="TEST:2", type="HAS_PHENOTYPE", object="TEST:3", negated=True, source="test",
    )])  # fmt: skip


def _counts(store: BaseGraphStore) -> dict:
    return store.stats().model_dump(exclude={"backend"})


def _everything(store: BaseGraphStore) -> tuple[list[Entity], list[Relation]]:
    entities, relations = [], []
    for rows, edges in store.dump(page=700):
        entities += [row_to_entity(r) for r in rows]
        relations += [row_to_relation(e) for e in edges]
    return entities, sorted(relations, key=lambda r: (r.key, str(r.valid_from), str(r.valid_to)))


def test_an_imported_graph_reads_back_as_the_graph_it_came_from(tmp_path: Path) -> None:
    need(DO_RARE)
    source = open_ladybug(tmp_path)
    _graph(source)
    source.close()
    # `medkg export` on that data dir, as a user runs it; then the command it prints
    done = run(["export", str(tmp_path / "import")], {"MEDKG_DATA_DIR": str(tmp_path)}, tmp_path)
    assert done.returncode == 0, done.stderr
    command = shlex.split(done.stdout.strip().splitlines()[-1])
    assert command[:4] == ["neo4j-admin", "database", "import", "full"]
    assert "--multiline-fields=true" in command  # the awkward values span lines
    server = Neo4jProcess(tmp_path / "neo4j-home")
    imported = server.admin(*command[1:])
    assert imported.returncode == 0, imported.stdout[-3000:] + imported.stderr[-3000:]
    server.start()
    source = open_ladybug(tmp_path)
    try:
        target = Neo4jGraphStore(**server.settings)
        try:
            assert source.entity_count() == target.entity_count() > 300
            assert _counts(target) == _counts(source)
            assert _everything(target) == _everything(source)
            assert target.get_entity("TEST:1") == source.get_entity("TEST:1")
            assert target.find_entities("ünïcödé ≥ 5") == source.find_entities("ünïcödé ≥ 5")
            ids = [e.id for e in source.scan_entities(limit=6)]
            for a, b in zip(ids, ids[1:], strict=False):
                assert target.paths(a, b, max_hops=3) == source.paths(a, b, max_hops=3)
            # the imported graph is written to as any other (the adapter's schema made on open)
            target.upsert_entities([Entity(id="TEST:4", name="after the import")])
            assert target.get_entity("TEST:4") is not None
        finally:
            target.close()
    finally:
        server.stop()
        source.close()


def test_a_value_holding_the_array_delimiter_is_refused_by_name(tmp_path: Path) -> None:
    store = open_ladybug(tmp_path)
    try:
        store.upsert_entities([Entity(id="TEST:9", name="x", synonyms=["a\x1fb"])])
        with pytest.raises(ImportFilesError, match="TEST:9"):
            write_import_files(store, tmp_path / "import", progress=False)
        assert not list((tmp_path / "import").iterdir())  # no file that looks whole
    finally:
        store.close()
