"""Sessions kept in Neo4j (``GraphSessionStore``, the store of API replicas over Neo4j): the SQLite
store's contract tests run against it, then what replicas need: a session created through one store is
continued through another, and two stores recording turns of one session at once lose nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from service.qa.graph_sessions import GraphSessionStore
from tests.unit.service.qa.test_sessions import (  # noqa: F401 - the contract, collected here again
    FakeClock,
    _turn,
    test_create_get_round_trip,
    test_expiry_and_purge,
    test_malformed_id_raises,
    test_mentioning_again_reinforces_and_keeps_label,
    test_recall_limit_and_order_by_weight,
    test_recall_reads_and_use_reinforces,
    test_record_turn_keeps_window_and_folds_summary,
    test_store_decays_weight,
    test_the_llm_is_told_of_every_turn,
    test_weak_items_are_forgotten,
)

pytestmark = pytest.mark.neo4j


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(_neo4j_store, clock: FakeClock) -> Iterator[GraphSessionStore]:
    sessions = GraphSessionStore(_neo4j_store, ttl_s=3600, max_turns=3, half_life_s=100.0, clock=clock)
    sessions.clear()
    yield sessions
    sessions.clear()


def test_a_session_continues_through_another_replica(_neo4j_store, store: GraphSessionStore) -> None:
    other = GraphSessionStore(_neo4j_store, ttl_s=3600, max_turns=3, half_life_s=100.0, clock=store.clock)
    session = store.create()
    store.record_turn(session.id, _turn("What is Marfan syndrome?", ["OMIM:154700"]), {"OMIM:154700": "Marfan"})
    seen = other.get(session.id)
    assert seen is not None and [t.question for t in seen.turns] == ["What is Marfan syndrome?"]
    assert [m.key for m in other.recall(session.id)] == ["OMIM:154700"]
    other.record_turn(session.id, _turn("And its treatment?", ["DRUGBANK:DB00678"]), {})
    assert [t.question for t in store.get(session.id).turns] == ["What is Marfan syndrome?", "And its treatment?"]
    assert _neo4j_store.stats().entities == 0  # sessions are not knowledge: no graph query counts them


def test_two_replicas_recording_at_once_lose_no_turn(_neo4j_store) -> None:
    stores = [GraphSessionStore(_neo4j_store, max_turns=1000) for _ in range(2)]
    stores[0].clear()
    session = stores[0].create()
    errors: list[BaseException] = []

    def record(store: GraphSessionStore, who: int) -> None:
        try:
            for i in range(15):
                store.record_turn(session.id, _turn(f"q{who}-{i}", [f"HP:{who:03d}{i:04d}"]), {})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    turns = stores[1].get(session.id).turns
    assert len(turns) == 30 and {t.question for t in turns} == {f"q{w}-{i}" for w in range(2) for i in range(15)}
    stores[0].clear()
