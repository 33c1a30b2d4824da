"""Conversation sessions kept in Neo4j, where every API replica sees them: one ``MedkgSession`` node per
session (its turns and memory as JSON properties), each operation one managed write transaction that
first locks the node, so two replicas recording turns of one session at once lose nothing. The same
behaviour as the SQLite :class:`service.qa.sessions.SessionStore` (one contract test suite), used when
the graph backend is Neo4j; the node label is not knowledge and no graph query reads it."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from service.qa.sessions import (
    MemoryItem,
    MemoryOut,
    Session,
    Turn,
    TurnOut,
    _check_id,
    _trim_summary,
    check_store_parameters,
    summary_line,
)

if TYPE_CHECKING:  # the neo4j driver (0.5 s to import) is imported where a store is opened
    from kg.graph.neo4j_store import Neo4jGraphStore

__all__ = ["GraphSessionStore"]

# The Cypher of this store (parameters only). The uniqueness constraint is also the index on id.
SCHEMA = "CREATE CONSTRAINT medkg_session_id IF NOT EXISTS FOR (s:MedkgSession) REQUIRE s.id IS UNIQUE"
CREATE = (
    "CREATE (s:MedkgSession {id: $id, created_at: $now, updated_at: $now, expires_at: $expires, summary: '', "
    "turns: '[]', memory: '{}', seq: 0})"
)
LOCK = "MATCH (s:MedkgSession {id: $id}) SET s.locked_at = $now RETURN properties(s)"  # SET: the node's write lock
SAVE = (
    "MATCH (s:MedkgSession {id: $id}) SET s.updated_at = $updated, s.expires_at = $expires, s.summary = $summary, "
    "s.turns = $turns, s.memory = $memory, s.seq = $seq"
)
DELETE = "MATCH (s:MedkgSession {id: $id}) DETACH DELETE s"
DELETE_SOME = "MATCH (s:MedkgSession) WITH s LIMIT 10000 DETACH DELETE s RETURN count(*)"
DELETE_EXPIRED = "MATCH (s:MedkgSession) WHERE s.expires_at <= $now WITH s LIMIT 10000 DETACH DELETE s RETURN count(*)"


@dataclass
class _State:
    """A session as stored: recent turns (with their sequence numbers) and memory by key."""

    id: str
    created_at: float
    updated_at: float
    expires_at: float
    summary: str
    seq: int
    turns: list[tuple[int, Turn]] = field(default_factory=list)
    memory: dict[str, MemoryItem] = field(default_factory=dict)

    @classmethod
    def of(cls, props: dict[str, Any]) -> _State:
        turns = [(n, Turn(**t)) for n, t in json.loads(props["turns"])]
        memory = {k: MemoryItem(**m) for k, m in json.loads(props["memory"]).items()}
        return cls(
            props["id"], props["created_at"], props["updated_at"], props["expires_at"], props["summary"],
            int(props.get("seq", 0)), turns, memory,
        )  # fmt: skip

    def params(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "updated": self.updated_at,
            "expires": self.expires_at,
            "summary": self.summary,
            "seq": self.seq,
            "turns": json.dumps([[n, asdict(t)] for n, t in self.turns]),
            "memory": json.dumps({k: asdict(m) for k, m in self.memory.items()}),
        }


class GraphSessionStore:
    """Sessions in the Neo4j of ``graph``, with the SQLite store's parameters and behaviour: expiry
    ``ttl_s`` after the last turn, the last ``max_turns`` turns verbatim and a summary of older ones,
    a memory whose items decay with ``half_life_s`` and are forgotten below ``forget_below``."""

    def __init__(
        self,
        graph: Neo4jGraphStore,
        ttl_s: float = 24 * 3600,
        max_turns: int = 6,
        half_life_s: float = 1800.0,
        forget_below: float = 0.05,
        clock: Callable[[], float] = time.time,
    ) -> None:
        check_store_parameters(ttl_s, max_turns, half_life_s, forget_below)
        self.graph = graph
        self.ttl_s = ttl_s
        self.max_turns = max_turns
        self.half_life_s = half_life_s
        self.forget_below = forget_below
        self.clock = clock
        self._ready = False

    def _schema(self) -> None:
        if not self._ready:  # at first use, so the app starts while Neo4j is down
            self.graph.transact(lambda tx: tx.run(SCHEMA).consume())
            self._ready = True

    # ---- one locked read-modify-write per operation ----------------------------------------------
    def _update(self, session_id: str, change: Callable[[_State, float], Any]) -> Any:
        """``change(state, now)`` on the live session, saved; KeyError when it is unknown or expired."""
        _check_id(session_id)
        self._schema()
        now = self.clock()

        def work(tx: Any) -> Any:
            row = tx.run(LOCK, id=session_id, now=now).single()
            if row is None:
                return KeyError(session_id)
            state = _State.of(row[0])
            if state.expires_at <= now:
                tx.run(DELETE, id=session_id).consume()
                return KeyError(session_id)
            result = change(state, now)
            tx.run(SAVE, **state.params()).consume()
            return result

        result = self.graph.transact(work)
        if isinstance(result, KeyError):
            raise result
        return result

    def _live_memory(self, state: _State, now: float) -> list[MemoryItem]:
        """All live items, strongest first; those below ``forget_below`` are forgotten."""
        for key in [k for k, i in state.memory.items() if i.weight(now, self.half_life_s) < self.forget_below]:
            del state.memory[key]
        live = list(state.memory.values())
        live.sort(key=lambda i: (-i.weight(now, self.half_life_s), -i.last_seen, i.key))
        return live

    def _reinforce(self, state: _State, item: MemoryItem, now: float) -> MemoryItem:
        new = MemoryItem(item.key, item.label, item.weight(now, self.half_life_s) + 1.0, now, item.recalls + 1)
        state.memory[item.key] = new
        return new

    def _session(self, state: _State, now: float) -> Session:
        turns = [TurnOut(**asdict(t)) for _, t in state.turns]
        memory = [
            MemoryOut(key=i.key, label=i.label, weight=i.weight(now, self.half_life_s), recalls=i.recalls)
            for i in self._live_memory(state, now)
        ]
        return Session(
            id=state.id, created_at=state.created_at, updated_at=state.updated_at, expires_at=state.expires_at,
            summary=state.summary, turns=turns, memory=memory,
        )  # fmt: skip

    # ---- public API (as SessionStore's) -------------------------------------------------------------
    def create(self) -> Session:
        self._schema()
        now = self.clock()
        session_id = secrets.token_urlsafe(18)

        def work(tx: Any) -> None:
            tx.run(DELETE_EXPIRED, now=now).consume()  # expired sessions go as new ones come
            tx.run(CREATE, id=session_id, now=now, expires=now + self.ttl_s).consume()

        self.graph.transact(work)
        return Session(
            id=session_id, created_at=now, updated_at=now, expires_at=now + self.ttl_s, summary="", turns=[], memory=[]
        )

    def get(self, session_id: str) -> Session | None:
        """The session, or None when it is unknown or expired (an expired one is deleted)."""
        try:
            return self._update(session_id, lambda state, now: self._session(state, now))
        except KeyError:
            return None

    def recall(self, session_id: str, limit: int = 3) -> list[MemoryItem]:
        """The ``limit`` strongest memory items (read only); KeyError when unknown or expired."""
        return self._update(session_id, lambda state, now: self._live_memory(state, now)[: max(0, limit)])

    def reinforce(self, session_id: str, keys: list[str]) -> list[MemoryItem]:
        """Reinforce the items ``keys`` in that order (those no longer remembered are skipped)."""

        def change(state: _State, now: float) -> list[MemoryItem]:
            items = {i.key: i for i in self._live_memory(state, now)}
            return [self._reinforce(state, items[k], now) for k in keys if k in items]

        return self._update(session_id, change)

    def record_turn(self, session_id: str, turn: Turn, labels: dict[str, str]) -> Session:
        """Append a turn, remember (or reinforce) its entities, fold old turns into the summary and push
        the expiry to ``now + ttl_s``; KeyError when the session is unknown or expired."""

        def change(state: _State, now: float) -> Session:
            state.seq += 1
            state.turns.append((state.seq, turn))
            known = {i.key: i for i in self._live_memory(state, now)}
            for key in dict.fromkeys(turn.entities):
                if key in known:
                    item = known[key]
                    label = labels.get(key) or item.label
                    self._reinforce(state, MemoryItem(key, label, item.strength, item.last_seen, item.recalls), now)
                else:
                    state.memory[key] = MemoryItem(key, labels.get(key) or key, 1.0, now, 0)
            if len(state.turns) > self.max_turns:
                old, state.turns = state.turns[: -self.max_turns], state.turns[-self.max_turns :]
                lines = [summary_line(t) for _, t in old]
                state.summary = _trim_summary("\n".join(([state.summary] if state.summary else []) + lines))
            state.updated_at, state.expires_at = now, now + self.ttl_s
            return self._session(state, now)

        return self._update(session_id, change)

    def purge_expired(self) -> int:
        """Delete every expired session; returns how many."""
        self._schema()
        now = self.clock()
        total = 0
        while n := self.graph.transact(lambda tx: tx.run(DELETE_EXPIRED, now=now).single()[0]):
            total += n
        return total

    def clear(self) -> None:
        """Delete every session (tests; the graph store's ``clear`` leaves sessions alone)."""
        while self.graph.transact(lambda tx: tx.run(DELETE_SOME).single()[0]):
            pass

    def close(self) -> None:
        """Nothing of its own to close: the graph store's driver is the container's."""

    def __enter__(self) -> GraphSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
