"""The two adapters give identical answers on the same random graph (timestamps aside)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from tests.conftest import open_ladybug

pytestmark = pytest.mark.neo4j


def random_graph(seed: int = 7, n: int = 300, m: int = 1200) -> tuple[list[Entity], list[Relation]]:
    rng = random.Random(seed)
    cats = ["Disease", "Phenotype", "Gene", "Drug"]
    entities = [Entity(id=f"HP:{i:07d}", name=f"node {i}", category=cats[i % 4]) for i in range(n)]
    types = ["HAS_PHENOTYPE", "TREATS", "ASSOCIATED_WITH", "IS_A", "SAME_AS"]
    relations = []
    for _ in range(m):
        a, b = rng.sample(range(n), 2)
        relations.append(
            Relation(
                subject=f"HP:{a:07d}",
                type=rng.choice(types),
                object=f"HP:{b:07d}",
                source=rng.choice(["s1", "s2"]),
                negated=rng.random() < 0.05,
                evidence={"w": rng.randint(0, 9)},
            )
        )
    return entities, relations


def snapshot(store: BaseGraphStore, pairs: list[tuple[str, str]], centres: list[str]) -> dict:
    def rel(r: Relation) -> tuple:
        return (r.subject, r.type, r.object, r.source, r.negated, tuple(sorted(r.evidence.items())))

    return {
        "stats": store.stats().model_dump(exclude={"backend"}),
        "paths": [
            [(p.nodes, [rel(r) for r in p.relations]) for p in store.paths(a, b, max_hops=2, limit=5)] for a, b in pairs
        ],
        "typed_paths": [
            [p.nodes for p in store.paths(a, b, max_hops=3, rel_types=["IS_A"], limit=3)] for a, b in pairs
        ],
        "neighbours": [
            [(n.entity.id, n.direction, rel(n.relation)) for n in store.neighbours(c, limit=15)] for c in centres
        ],
        "out": [[n.entity.id for n in store.neighbours(c, direction="out", rel_types=["TREATS"])] for c in centres],
        "hood": [
            (lambda s: ([e.id for e in s.entities], [rel(r) for r in s.relations]))(
                store.neighbourhood(c, hops=2, limit=60)
            )
            for c in centres
        ],
        "history": [[rel(r) for r in store.relations(subject=c)] for c in centres],
    }


def test_ladybug_and_neo4j_answer_alike(tmp_path: Path, _neo4j_store: BaseGraphStore) -> None:
    entities, relations = random_graph()
    rng = random.Random(11)
    pairs = [tuple(f"HP:{x:07d}" for x in rng.sample(range(300), 2)) for _ in range(25)]
    centres = [f"HP:{x:07d}" for x in rng.sample(range(300), 15)]
    snapshots = []
    lady = open_ladybug(tmp_path)
    neo = _neo4j_store
    neo.clear()
    try:
        for store in (lady, neo):
            store.upsert_entities(entities)
            store.upsert_relations(relations)
            store.invalidate(relations[0].subject, relations[0].type, relations[0].object)
            snapshots.append(snapshot(store, pairs, centres))  # type: ignore[arg-type]
    finally:
        lady.close()
        neo.clear()
    lady_snap, neo_snap = snapshots
    assert lady_snap["stats"]["relations"] > 1000
    assert any(lady_snap["paths"]), "the sample should contain connected pairs"
    for key in lady_snap:
        assert lady_snap[key] == neo_snap[key], key
