"""Cypher injection: entities whose ids, names, synonyms, descriptions, sources and evidence are
injection strings, loaded through the real loaders (a TSV edge list with a mapping) and the store
API, then read back through the store and the HTTP API (entity search and lookup, neighbours,
paths, QA) on the embedded store and on Neo4j (the ``store`` fixture runs both; Neo4j in CI).

The graph must stay intact (the same counts before and after every read, a canary untouched) and
every string must come back exactly as written. A static check keeps Cypher text free of values:
the adapters only ``format`` fixed fragment names into their statements.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from ingest.edges import edge_items, load_mapping
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container

pytestmark = pytest.mark.reliability

INJECTIONS = [
    "x'}) DETACH DELETE n //",
    'x"}) DETACH DELETE n //',
    '" OR 1=1 //',
    "' OR '1'='1",
    "`) MATCH (n) DETACH DELETE n //",
    "x` DETACH DELETE n //",
    "$param",
    "$ids } MATCH (n) DETACH DELETE n",
    "‘smart’ “quotes” ‹›«» x\u2019}) DETACH DELETE n //",
    "\\'; MATCH (n) DETACH DELETE n; //",
    "*/ MATCH (n) DETACH DELETE n /*",
    "{id: 'x'} ) CALL db.clear() //",
    "'); CALL apoc.cypher.runFile('/etc/passwd') //",
    "ünïcödé 名前 مرض \U0001f600",
]
CANARY = Entity(id="HP:0001250", name="Seizure", category="Phenotype", synonyms=["Epileptic seizure"])


def _in_id(text: str) -> str:
    """An injection string as the local part of a CURIE: no white space (ids have none), no ':' (it would
    start another prefix), no "/" (a path parameter cannot hold one), no "|" (the key's separator)."""
    return "".join("_" if c.isspace() else c for c in text).replace(":", "_").replace("/", "_").replace("|", "_")


def injected_entities() -> list[Entity]:
    return [
        Entity(
            id=f"INJ:{i}{_in_id(text)}",
            name=f"{text} name {i}",
            category="Disease",
            synonyms=[f"{text} synonym {i}", text],
            description=f"{text} description",
            sources=[f"{text} source"],
        )
        for i, text in enumerate(INJECTIONS)
    ]


def injected_relations(entities: list[Entity]) -> list[Relation]:
    chain = [
        Relation(subject=a.id, type="ASSOCIATED_WITH", object=b.id, source=f"src {a.name}", evidence={"note": a.name})
        for a, b in zip(entities, entities[1:], strict=False)
    ]
    return [*chain, Relation(subject=entities[0].id, type="HAS_PHENOTYPE", object=CANARY.id, source="inj")]


def write_tsv(tmp_path: Path, entities: list[Entity]) -> tuple[Path, Path]:
    """The same kind of entities through the TSV loader (quoted as csv quotes them)."""
    tsv = tmp_path / "injected.tsv"
    with tsv.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["id", "name", "synonym", "target"])
        for a, b in zip(entities, entities[1:], strict=False):
            writer.writerow([a.id.replace("INJ:", "TSV:"), a.name, a.synonyms[0], b.id.replace("INJ:", "TSV:")])
    mapping = tmp_path / "injected.yaml"
    mapping.write_text(
        'name: injected\nsource: injected:1\ndelimiter: "\\t"\n'
        "nodes:\n  - id: {column: id}\n    name: {column: name}\n    category: {value: Disease}\n"
        "    synonyms: {column: synonym}\n"
        "edges:\n  - subject: {column: id}\n    object: {column: target}\n    type: {value: ASSOCIATED_WITH}\n",
        encoding="utf-8",
    )
    return tsv, mapping


def canary_intact(store: BaseGraphStore) -> bool:
    got = store.get_entity(CANARY.id)
    return got is not None and got.model_copy(update={"created_at": None}) == CANARY


def counts(store: BaseGraphStore) -> tuple[int, int, int, dict[str, int]]:
    s = store.stats()
    return s.entities, s.relations, s.invalidated_relations, s.relation_types


@pytest.fixture()
def loaded(store: BaseGraphStore, tmp_path: Path) -> Iterator[tuple[BaseGraphStore, list[Entity]]]:
    entities = injected_entities()
    store.upsert_entities([CANARY, *entities])
    store.upsert_relations(injected_relations(entities))
    tsv, mapping = write_tsv(tmp_path, entities)
    report = ingest(store, edge_items(tsv, load_mapping(mapping)), "injected", progress=False)
    assert report.problem_count == 0, report.problems
    yield store, entities


def test_injection_strings_round_trip_through_the_store(loaded: tuple[BaseGraphStore, list[Entity]]) -> None:
    store, entities = loaded
    before = counts(store)
    assert before[0] == 2 * len(INJECTIONS)  # the canary, the injected entities, those of the TSV rows
    for e in entities:
        got = store.get_entity(e.id)
        assert got is not None, e.id
        assert (got.id, got.name, got.synonyms, got.description, got.sources) == (
            e.id, e.name, e.synonyms, e.description, e.sources
        )  # fmt: skip
        assert e.id in {f.id for f in store.find_entities(e.name)}
        assert e.id in {f.id for f in store.find_entities(e.synonyms[0])}
        tsv = store.get_entity(e.id.replace("INJ:", "TSV:"))
        if e is not entities[-1]:
            assert tsv is not None and tsv.name == e.name and tsv.synonyms == [e.synonyms[0]], e.id
        for n in store.neighbours(e.id, limit=50):
            assert n.entity.id in {x.id for x in entities} | {CANARY.id}
            if n.relation.type == "ASSOCIATED_WITH" and n.relation.subject == e.id:
                assert n.relation.evidence == {"note": e.name} and n.relation.source == f"src {e.name}"
        assert store.relations(subject=e.id, type="ASSOCIATED_WITH") or e is entities[-1]
    found = store.paths(entities[0].id, entities[3].id, max_hops=3)
    assert found and found[0].nodes == [e.id for e in entities[:4]]
    assert store.neighbours(entities[0].id, rel_types=[INJECTIONS[0], "ASSOCIATED_WITH"], limit=10)
    assert store.neighbours(entities[0].id, rel_types=INJECTIONS, limit=10) == []
    assert counts(store) == before and canary_intact(store)


def test_injection_strings_through_the_api(loaded: tuple[BaseGraphStore, list[Entity]], tmp_path: Path) -> None:
    store, entities = loaded
    before = counts(store)
    settings = load_settings(data_dir=tmp_path / "data", api_keys=None, rate_limit_per_minute=0, llm_base_url=None)
    container = Container(settings, graph=store)
    try:
        with TestClient(create_app(container=container)) as client:
            for e in entities:
                r = client.get("/v1/entities", params={"q": e.name})
                assert r.status_code == 200 and e.id in [x["id"] for x in r.json()], (e.id, r.text[:300])
                r = client.get(f"/v1/entities/{quote(e.id, safe='')}")
                assert r.status_code == 200, (e.id, r.text[:300])
                body = r.json()
                assert (body["id"], body["name"], body["synonyms"], body["description"]) == (
                    e.id, e.name, e.synonyms, e.description
                )  # fmt: skip
                r = client.get(f"/v1/entities/{quote(e.id, safe='')}/neighbours", params={"type": INJECTIONS[:3]})
                assert r.status_code == 200 and r.json() == [], r.text[:300]
            for text in INJECTIONS:  # as a relation type, a category, an id that does not exist
                assert client.get("/v1/entities", params={"q": text, "category": text}).status_code == 200
                missing = client.get(f"/v1/entities/{quote('INJ:zz' + _in_id(text), safe='')}")
                assert missing.status_code == 404, missing.text[:300]
            r = client.get("/v1/paths", params={"source": entities[0].id, "target": entities[2].id, "max_hops": 2})
            assert r.status_code == 200 and [n["name"] for n in r.json()[0]["nodes"]] == [e.name for e in entities[:3]]
            for text in INJECTIONS[:6]:
                r = client.post("/v1/qa", json={"question": f"What is {text} name 0 associated with?"})
                assert r.status_code == 200, r.text[:300]
            assert counts(store) == before and canary_intact(store)
    finally:
        container.close()


ALLOWED_FRAGMENTS = {
    "filters", "left", "right", "shortest", "longest", "type_filter", "rel_filter", "xrefs_filter", "category_filter",
}  # fmt: skip


def test_cypher_text_is_built_from_fixed_fragments_only() -> None:
    """Every ``str.format`` in the graph adapters fills a named slot with a fixed fragment of the
    adapter's Cypher module (or ``int(...)``): never a value. Values travel as parameters."""
    folder = Path(__file__).resolve().parents[2] / "kg" / "graph"
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
                where = f"{path.name}:{node.lineno}"
                for kw in node.keywords:
                    if kw.arg is None:  # **fragments: by_ids' own fixed fragments
                        assert path.name == "ladybug_cypher.py", where
                        continue
                    assert kw.arg in ALLOWED_FRAGMENTS, where
                    value = ast.unparse(kw.value)
                    assert value.startswith(("q.", "int(", "left", "right", "filters", "rel_filter", "type_filter",
                                             "' AND '.join(filters)")), (where, value)  # fmt: skip
