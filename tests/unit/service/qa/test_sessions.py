"""SessionStore against a real SQLite file in tmp_path, with a fake clock; expand_query on its own."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from service.qa.sessions import (
    MemoryItem,
    Session,
    SessionError,
    SessionStore,
    Turn,
    conversation_context,
    expand_query,
    memory_labels,
)

T0 = 1_700_000_000.0
MARFAN = "OMIM:154700"
ARACHNODACTYLY = "HP:0001166"
LABELS = {MARFAN: "Marfan syndrome", ARACHNODACTYLY: "Arachnodactyly"}


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[SessionStore]:
    s = SessionStore(tmp_path / "sessions.sqlite", ttl_s=3600, max_turns=3, half_life_s=100.0, clock=clock)
    yield s
    s.close()


def _turn(question: str, entities: Sequence[str] = (), answer: str | None = None, at: float = T0) -> Turn:
    return Turn(
        question=question,
        expanded_query=question,
        answer=answer or f"Answer to {question}. More detail [PMID:1#s1].",
        cited=["PMID:1#s1"],
        entities=list(entities),
        at=at,
    )


def _weights(session: Session) -> dict[str, float]:
    return {m.key: m.weight for m in session.memory}


# ---- lifecycle -----------------------------------------------------------------------------------
def test_create_get_round_trip(store: SessionStore, clock: FakeClock) -> None:
    created = store.create()
    assert len(created.id) >= 16
    got = store.get(created.id)
    assert got == created
    assert got.created_at == got.updated_at == T0
    assert got.expires_at == T0 + 3600
    assert got.summary == "" and got.turns == [] and got.memory == []
    assert store.get("A" * 24) is None  # well-formed but unknown
    assert got.model_dump(mode="json")["id"] == created.id


def test_persists_after_close_and_reopen(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "sessions.sqlite"
    with SessionStore(path, half_life_s=100.0, clock=clock) as first:
        sid = first.create().id
        first.record_turn(sid, _turn("What causes Marfan syndrome?", [MARFAN]), LABELS)
        before = first.get(sid)
    reopened = SessionStore(path, half_life_s=100.0, clock=clock)
    try:
        after = reopened.get(sid)
        assert after == before
        assert after.turns[0].question == "What causes Marfan syndrome?"
        assert after.memory[0].label == "Marfan syndrome"
    finally:
        reopened.close()


def test_expiry_and_purge(store: SessionStore, clock: FakeClock) -> None:
    a, b, c = store.create(), store.create(), store.create()
    clock.advance(1800)
    store.record_turn(c.id, _turn("q"), {})  # pushes c's expiry to now + ttl
    clock.advance(1800)
    assert store.get(a.id) is None  # expired: gone (and deleted)
    assert store.purge_expired() == 1  # only b was left to purge
    assert store.get(b.id) is None
    assert store.get(c.id) is not None
    with pytest.raises(KeyError):
        store.record_turn(a.id, _turn("q"), {})
    with pytest.raises(KeyError):
        store.recall(b.id)
    clock.advance(3600)
    assert store.purge_expired() == 1
    assert store.purge_expired() == 0


def test_expired_sessions_are_deleted_without_being_asked_for(tmp_path: Path, clock: FakeClock) -> None:
    """A session nobody asks for again must not keep its questions and memory in the file forever."""
    path = tmp_path / "sessions.sqlite"

    def rows() -> int:
        with sqlite3.connect(path) as db:
            return sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "turns", "memory"))

    with SessionStore(path, ttl_s=3600, half_life_s=100.0, clock=clock) as sessions:
        old = sessions.create().id
        sessions.record_turn(old, _turn("What causes Marfan syndrome?", [MARFAN]), LABELS)
        clock.advance(7200)
        sessions.create()  # a new session clears out the expired ones
        assert rows() == 1
        old = sessions.create().id
        sessions.record_turn(old, _turn("q", [MARFAN]), LABELS)
    clock.advance(7200)
    SessionStore(path, ttl_s=3600, clock=clock).close()  # so does opening the store
    assert rows() == 0


@pytest.mark.parametrize("bad", ["", "short", "has space in it here!", "a/b" * 10, "x" * 65, "../../etc/passwd____"])
def test_malformed_id_raises(store: SessionStore, bad: str) -> None:
    with pytest.raises(SessionError):
        store.get(bad)
    with pytest.raises(SessionError):
        store.recall(bad)
    with pytest.raises(SessionError):
        store.record_turn(bad, _turn("q"), {})
    assert issubclass(SessionError, ValueError)


# ---- memory --------------------------------------------------------------------------------------
def test_weight_halves_after_one_half_life() -> None:
    item = MemoryItem(MARFAN, "Marfan syndrome", strength=2.0, last_seen=T0, recalls=0)
    assert item.weight(T0, 100.0) == pytest.approx(2.0)
    assert item.weight(T0 + 100, 100.0) == pytest.approx(1.0)
    assert item.weight(T0 + 200, 100.0) == pytest.approx(0.5)


def test_store_decays_weight(store: SessionStore, clock: FakeClock) -> None:
    sid = store.create().id
    store.record_turn(sid, _turn("Marfan?", [MARFAN]), LABELS)
    assert _weights(store.get(sid))[MARFAN] == pytest.approx(1.0)
    clock.advance(100)  # one half-life
    assert _weights(store.get(sid))[MARFAN] == pytest.approx(0.5)


def test_recall_reads_and_use_reinforces(store: SessionStore, clock: FakeClock) -> None:
    sid = store.create().id
    store.record_turn(sid, _turn("Marfan?", [MARFAN]), LABELS)
    clock.advance(10)
    assert store.recall(sid, limit=1)[0].recalls == 0  # reading the candidates strengthens nothing
    assert store.reinforce(sid, ["X:not-remembered"]) == []
    first = store.reinforce(sid, [MARFAN])
    assert [i.key for i in first] == [MARFAN]
    assert first[0].recalls == 1 and first[0].last_seen == clock.now
    assert first[0].strength == pytest.approx(0.5**0.1 + 1)
    clock.advance(10)
    store.record_turn(sid, _turn("Long fingers?", [ARACHNODACTYLY]), LABELS)  # newer, never recalled
    clock.advance(10)
    store.reinforce(sid, [MARFAN])
    items = store.recall(sid)
    # the older but recalled item outranks the slightly newer one
    assert [i.key for i in items] == [MARFAN, ARACHNODACTYLY]
    assert [i.recalls for i in items] == [2, 0]
    session = store.get(sid)
    assert [m.key for m in session.memory] == [MARFAN, ARACHNODACTYLY]
    assert session.memory[0].recalls == 2
    assert session.memory[0].weight > session.memory[1].weight


def test_recall_limit_and_order_by_weight(store: SessionStore, clock: FakeClock) -> None:
    sid = store.create().id
    store.record_turn(sid, _turn("a", ["X:1"]), {})
    clock.advance(50)
    store.record_turn(sid, _turn("b", ["X:2"]), {})
    clock.advance(50)
    store.record_turn(sid, _turn("c", ["X:3"]), {})
    assert [i.key for i in store.recall(sid, limit=2)] == ["X:3", "X:2"]
    assert store.get(sid).memory[-1].key == "X:1"
    assert store.get(sid).memory[-1].label == "X:1"  # no label given: the CURIE


def test_weak_items_are_forgotten(store: SessionStore, clock: FakeClock) -> None:
    sid = store.create().id
    store.record_turn(sid, _turn("Marfan?", [MARFAN]), LABELS)
    clock.advance(50)
    store.record_turn(sid, _turn("Long fingers?", [ARACHNODACTYLY]), LABELS)
    clock.advance(450)  # Marfan 0.5**5 ≈ 0.031, Arachnodactyly 0.5**4.5 ≈ 0.044: both below 0.05
    assert store.recall(sid) == []
    assert store.get(sid).memory == []

    sid2 = store.create().id
    store.record_turn(sid2, _turn("Marfan?", [MARFAN]), LABELS)
    clock.advance(300)
    store.record_turn(sid2, _turn("Long fingers?", [ARACHNODACTYLY]), LABELS)
    clock.advance(150)  # Marfan 0.5**4.5 ≈ 0.044 (forgotten), Arachnodactyly 0.5**1.5 ≈ 0.35
    assert [i.key for i in store.recall(sid2)] == [ARACHNODACTYLY]
    assert [m.key for m in store.get(sid2).memory] == [ARACHNODACTYLY]


def test_mentioning_again_reinforces_and_keeps_label(store: SessionStore, clock: FakeClock) -> None:
    sid = store.create().id
    store.record_turn(sid, _turn("Marfan?", [MARFAN]), LABELS)
    clock.advance(100)
    session = store.record_turn(sid, _turn("Its genetics?", [MARFAN]), {})  # no label this time
    (item,) = session.memory
    assert item.label == "Marfan syndrome"
    assert item.recalls == 1
    assert item.weight == pytest.approx(1.5)


# ---- turns and the running summary ---------------------------------------------------------------
def test_record_turn_keeps_window_and_folds_summary(store: SessionStore, clock: FakeClock) -> None:
    sid = store.create().id
    answer = (
        "Marfan syndrome is caused by FBN1 variants [PMID:111#s2][KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166]. "
        "It is autosomal dominant [PMID:222#s1]."
    )
    first = Turn(
        question="What causes Marfan syndrome?",
        expanded_query="What causes Marfan syndrome?",
        answer=answer,
        cited=["PMID:111#s2", "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166", "PMID:222#s1", "PMID:333#s9"],
        entities=[MARFAN],
        at=clock.now,
    )
    store.record_turn(sid, first, LABELS)
    for i in range(1, 5):
        clock.advance(5)
        session = store.record_turn(sid, _turn(f"question {i}", at=clock.now), {})
    assert [t.question for t in session.turns] == ["question 2", "question 3", "question 4"]
    assert session.expires_at == clock.now + 3600 and session.updated_at == clock.now
    lines = session.summary.split("\n")
    assert len(lines) == 2
    assert lines[0] == (
        "Q: What causes Marfan syndrome? → A: Marfan syndrome is caused by FBN1 variants. "
        "[PMID:111#s2, KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166, PMID:222#s1]"
    )
    assert "PMID:333#s9" not in session.summary
    assert lines[1].startswith("Q: question 1 → A: Answer to question 1.")
    assert store.get(sid) == session


def test_the_llm_is_told_of_every_turn(store: SessionStore, clock: FakeClock) -> None:
    """Summary (turns out of the window), then a line for each older turn in the window, then the last
    two in full: no turn between the summary and the last two is left out."""
    sid = store.create().id
    for i in range(1, 8):  # the window holds 3: turns 1-4 are in the summary, 5-7 in the window
        clock.advance(5)
        session = store.record_turn(sid, _turn(f"question {i}", at=clock.now), {})
    context = conversation_context(session)
    assert [n for n in range(1, 8) if f"question {n}" in context] == list(range(1, 8))
    assert context.index("question 4") < context.index("question 5") < context.index("question 6")
    assert "Q: question 7\nA: Answer to question 7. More detail [PMID:1#s1]." in context  # the last in full
    assert "Q: question 5 → A: Answer to question 5." in context  # an older one as a summary line
    assert conversation_context(store.create()) == ""


def test_summary_is_bounded(tmp_path: Path, clock: FakeClock) -> None:
    with SessionStore(tmp_path / "s.sqlite", max_turns=1, clock=clock) as store:
        sid = store.create().id
        long_answer = "word " * 100 + "end."
        for i in range(40):
            session = store.record_turn(sid, _turn(f"question number {i}", answer=long_answer), {})
        assert len(session.summary) <= 2000
        lines = session.summary.split("\n")
        assert all(line.startswith("Q: question number ") for line in lines)  # whole lines only
        assert lines[-1].startswith("Q: question number 38 ")
        assert all(len(line.split(" → A: ")[1].split(" [")[0]) <= 200 for line in lines)


def test_concurrent_record_turn_loses_nothing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite", max_turns=1000)
    try:
        sid = store.create().id
        threads_n, per_thread = 8, 10
        errors: list[BaseException] = []

        def work(t: int) -> None:
            try:
                for i in range(per_thread):
                    store.record_turn(sid, _turn(f"t{t}-q{i}", [MARFAN, f"X:{t}"]), LABELS)
                    store.recall(sid, limit=2)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        session = store.get(sid)
        assert len(session.turns) == threads_n * per_thread
        assert {t.question for t in session.turns} == {
            f"t{t}-q{i}" for t in range(threads_n) for i in range(per_thread)
        }
        assert {m.key for m in session.memory} == {MARFAN} | {f"X:{t}" for t in range(threads_n)}
    finally:
        store.close()


# ---- query expansion -----------------------------------------------------------------------------
MARFAN_ITEM = MemoryItem(MARFAN, "Marfan syndrome", 1.0, T0, 0)
FINGERS_ITEM = MemoryItem(ARACHNODACTYLY, "Arachnodactyly", 0.8, T0, 0)
LOEYS_ITEM = MemoryItem("OMIM:609192", "Loeys-Dietz syndrome", 0.5, T0, 0)


def test_expand_follow_up() -> None:
    expanded, used = expand_query("and what about its treatment?", [MARFAN_ITEM], set())
    assert expanded == "and what about its treatment? (Marfan syndrome)"
    assert used == [MARFAN_ITEM]


def test_expand_limits_and_orders() -> None:
    expanded, used = expand_query("How is it inherited?", [MARFAN_ITEM, FINGERS_ITEM, LOEYS_ITEM], set())
    assert expanded == "How is it inherited? (Marfan syndrome; Arachnodactyly)"
    assert used == [MARFAN_ITEM, FINGERS_ITEM]


def test_non_follow_up_with_own_entity_is_unchanged() -> None:
    question = "What are the symptoms of Loeys-Dietz syndrome?"
    assert expand_query(question, [MARFAN_ITEM], {"OMIM:609192"}) == (question, [])


def test_follow_up_cue_with_linked_entity_skips_linked_key() -> None:
    expanded, used = expand_query(
        "How does Loeys-Dietz syndrome compare with it?", [LOEYS_ITEM, MARFAN_ITEM], {"OMIM:609192"}
    )
    assert expanded == "How does Loeys-Dietz syndrome compare with it? (Marfan syndrome)"
    assert used == [MARFAN_ITEM]


def test_labels_already_in_question_are_not_added() -> None:
    question = "and what about the treatment of marfan syndrome?"
    assert expand_query(question, [MARFAN_ITEM], set()) == (question, [])
    expanded, used = expand_query(question, [MARFAN_ITEM, FINGERS_ITEM], set())
    assert expanded == f"{question} (Arachnodactyly)"
    assert used == [FINGERS_ITEM]


def test_no_memory_means_no_expansion() -> None:
    assert expand_query("and its treatment?", [], set()) == ("and its treatment?", [])


@pytest.mark.parametrize(
    "question",
    ["What about prognosis?", "And prognosis?", "Is THIS dominant?", "How do they present?", "Dosing of the drug?"],
)
def test_follow_up_cues(question: str) -> None:
    expanded, used = expand_query(question, [MARFAN_ITEM], {"HP:0000001"})
    assert expanded == f"{question} (Marfan syndrome)"
    assert used == [MARFAN_ITEM]


def test_cue_words_match_on_word_boundaries() -> None:
    # "itself"/"Italy"/"android" contain cue letters but no cue word; the question links its own entity
    question = "Is Marfan syndrome common in Italy among android users?"
    assert expand_query(question, [FINGERS_ITEM], {MARFAN}) == (question, [])


def test_a_phenotype_only_negated_is_remembered_as_absent() -> None:
    labels = memory_labels(
        [("HP:0001250", "Seizure", False), ("HP:0001252", "Hypotonia", True), ("HP:0000252", "Microcephaly", True)]
        + [("HP:0000252", "Microcephaly", False)]  # stated as well: stated wins
    )
    assert labels == {"HP:0001250": "Seizure", "HP:0001252": "no Hypotonia", "HP:0000252": "Microcephaly"}
    memory = [MemoryItem("HP:0001252", labels["HP:0001252"], 1.0, T0, 0)]
    assert expand_query("and what about it?", memory, set())[0] == "and what about it? (no Hypotonia)"
