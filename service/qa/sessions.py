"""Conversation memory for the clinician QA endpoint: the last turns verbatim, a running summary of
older ones, and a decaying memory of the entities the conversation touched, used to expand a
follow-up ("and what about its treatment?") before retrieval; kept in SQLite across restarts.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from kg.errors import InvalidInput

__all__ = [
    "MemoryItem",
    "MemoryOut",
    "Session",
    "SessionError",
    "SessionStore",
    "Turn",
    "TurnOut",
    "conversation_context",
    "expand_query",
]

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
SUMMARY_MAX_CHARS = 2000
SUMMARY_ANSWER_CHARS = 200
SUMMARY_QUESTION_CHARS = 200
SUMMARY_CITED = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    summary TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_expires ON sessions(expires_at);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    question TEXT NOT NULL,
    expanded_query TEXT NOT NULL,
    answer TEXT NOT NULL,
    cited TEXT NOT NULL,
    entities TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS memory (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    label TEXT NOT NULL,
    strength REAL NOT NULL,
    last_seen REAL NOT NULL,
    recalls INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, key)
);
"""


class SessionError(InvalidInput):
    """A malformed session id."""


@dataclass(frozen=True)
class Turn:
    question: str
    expanded_query: str
    answer: str
    cited: list[str]  # citation ids, e.g. "PMID:123#s4", "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"
    entities: list[str]  # CURIEs linked in this turn
    at: float  # epoch seconds


@dataclass(frozen=True)
class MemoryItem:
    key: str  # an entity CURIE, e.g. "OMIM:154700"
    label: str  # its name, e.g. "Marfan syndrome"
    strength: float  # weight at last_seen
    last_seen: float
    recalls: int

    def weight(self, now: float, half_life_s: float) -> float:
        """The strength decayed to ``now``: halves every ``half_life_s`` seconds."""
        return self.strength * 0.5 ** (max(0.0, now - self.last_seen) / half_life_s)


class TurnOut(BaseModel):
    question: str
    expanded_query: str
    answer: str
    cited: list[str]
    entities: list[str]
    at: float


class MemoryOut(BaseModel):
    key: str
    label: str
    weight: float  # decayed to the time of the request
    recalls: int


class Session(BaseModel):
    id: str
    created_at: float
    updated_at: float
    expires_at: float
    summary: str  # running summary of turns that fell out of the recent window
    turns: list[TurnOut]  # recent turns, oldest first
    memory: list[MemoryOut]  # ordered by weight, strongest first


def _check_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise SessionError(f"malformed session id: {session_id!r}")


# ---- running summary ---------------------------------------------------------------------------
_CITATION_BRACKET_RE = re.compile(r"\s*\[(?:[^\[\]]*:[^\[\]]*|\s*\d+(?:\s*[,;–-]\s*\d+)*\s*)\]")
_FIRST_SENTENCE_RE = re.compile(r"^(.+?[.!?])(?=\s+[A-Z0-9(\"']|\s*$)")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def first_sentence(answer: str, limit: int = SUMMARY_ANSWER_CHARS) -> str:
    """The answer's first sentence, citation brackets removed, at most ``limit`` characters."""
    text = _one_line(_CITATION_BRACKET_RE.sub("", answer))
    match = _FIRST_SENTENCE_RE.match(text)
    return _clip(match.group(1) if match else text, limit)


def summary_line(turn: Turn) -> str:
    """One line of the running summary for a turn that fell out of the recent window."""
    line = f"Q: {_clip(_one_line(turn.question), SUMMARY_QUESTION_CHARS)} → A: {first_sentence(turn.answer)}"
    cited = list(dict.fromkeys(turn.cited))[:SUMMARY_CITED]
    return f"{line} [{', '.join(cited)}]" if cited else line


def conversation_context(session: Session, recent: int = 2) -> str:
    """What the LLM is told of a session before a new question: the running summary (the turns that
    left the window), a summary line for each turn still in the window but older than the last
    ``recent``, and those in full. Every turn is there, in order, however long the window."""
    turns = session.turns
    older = [summary_line(t) for t in turns[: max(0, len(turns) - recent)]]
    full = [f"Q: {t.question}\nA: {t.answer}" for t in turns[max(0, len(turns) - recent) :]]
    return "\n".join(p for p in (session.summary, *older, *full) if p)


def _trim_summary(summary: str, limit: int = SUMMARY_MAX_CHARS) -> str:
    """Keep the last ``limit`` characters, dropping whole lines from the start."""
    lines = summary.split("\n")
    while len(lines) > 1 and len("\n".join(lines)) > limit:
        lines.pop(0)
    text = "\n".join(lines)
    return text[-limit:] if len(text) > limit else text


# ---- query expansion ---------------------------------------------------------------------------
_FOLLOW_UP_RE = re.compile(
    r"\b(?:it|its|they|them|their|this|that|these|those|he|she|his|her|the disease|the condition|the drug"
    r"|what about|how about|and the)\b|^\s*and\s",
    re.IGNORECASE,
)


def is_follow_up(question: str, linked: set[str]) -> bool:
    """A question leans on the conversation when it has an anaphor or ellipsis cue, or links no entity."""
    return not linked or bool(_FOLLOW_UP_RE.search(question))


def _mentions(question: str, label: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(label)}(?!\w)", question, re.IGNORECASE) is not None


def memory_labels(linked: Iterable[tuple[str, str, bool]]) -> dict[str, str]:
    """The label each linked entity ``(id, name, negated)`` is remembered by: its name, or "no <name>"
    when the question only negates it ("... but no hypotonia"), so that a follow-up expanded with it
    keeps it ruled out (the negation rule reads "(Microcephaly; no Hypotonia)") instead of stating it."""
    stated: dict[str, str] = {}
    negated: dict[str, str] = {}
    for key, name, is_negated in linked:
        (negated if is_negated else stated).setdefault(key, name)
    return {**{k: f"no {n}" for k, n in negated.items() if k not in stated}, **stated}


def expand_query(
    question: str, memory: list[MemoryItem], linked: set[str], limit: int = 2
) -> tuple[str, list[MemoryItem]]:
    """Expand a follow-up with the session's strongest entities.

    ``memory`` is expected strongest first (as :meth:`SessionStore.recall` returns it). Items already
    linked in the question, or whose label the question already names, are skipped. Returns the
    expanded query and the items used; a question that is not a follow-up, or that nothing can be
    added to, comes back unchanged with no items."""
    if limit <= 0 or not is_follow_up(question, linked):
        return question, []
    used: list[MemoryItem] = []
    labels: set[str] = set()
    for item in memory:
        if len(used) >= limit:
            break
        label = item.label.strip()
        if not label or item.key in linked or label.lower() in labels or _mentions(question, label):
            continue
        used.append(item)
        labels.add(label.lower())
    if not used:
        return question, []
    return f"{question.rstrip()} ({'; '.join(i.label.strip() for i in used)})", used


# ---- the store ---------------------------------------------------------------------------------
def check_store_parameters(ttl_s: float, max_turns: int, half_life_s: float, forget_below: float) -> None:
    """The parameters every session store takes (SQLite here, Neo4j in graph_sessions.py)."""
    if ttl_s <= 0 or half_life_s <= 0 or max_turns < 1 or forget_below < 0:
        raise ValueError("ttl_s and half_life_s must be positive, max_turns at least 1, forget_below >= 0")


class SessionStore:
    """Sessions in one SQLite file (WAL; one connection behind a lock, each operation one transaction),
    expiring ``ttl_s`` after their last turn. A session keeps its last ``max_turns`` turns verbatim and a
    one-line-per-turn summary of those that fell out of that window.

    Memory (as in spaced-repetition schedulers): an item's weight is ``strength`` decayed with a
    half-life from ``last_seen`` (``MemoryItem.weight``). Used to expand a question, or mentioned again,
    it is reinforced: ``strength = weight(now) + 1``, ``last_seen = now``; so an item used often outlasts
    one mentioned once, and the weight orders what is carried into the next turn. Items below
    ``forget_below`` are deleted."""

    def __init__(
        self,
        path: Path,
        ttl_s: float = 24 * 3600,
        max_turns: int = 6,
        half_life_s: float = 1800.0,
        forget_below: float = 0.05,
        clock: Callable[[], float] = time.time,
    ) -> None:
        check_store_parameters(ttl_s, max_turns, half_life_s, forget_below)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ttl_s = ttl_s
        self.max_turns = max_turns
        self.half_life_s = half_life_s
        self.forget_below = forget_below
        self.clock = clock
        self._lock = threading.Lock()
        # autocommit mode: transactions are opened explicitly (BEGIN IMMEDIATE) in _tx
        self._db: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=10.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self.purge_expired()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._db is None:
                raise RuntimeError("session store is closed")
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    # ---- helpers (called inside a transaction) ---------------------------------------------------
    def _live(self, db: sqlite3.Connection, session_id: str, now: float) -> tuple | None:
        row = db.execute(
            "SELECT id, created_at, updated_at, expires_at, summary FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        if row[3] <= now:
            self._delete(db, [session_id])
            return None
        return row

    @staticmethod
    def _delete(db: sqlite3.Connection, ids: list[str]) -> None:
        for table, column in (("turns", "session_id"), ("memory", "session_id"), ("sessions", "id")):
            db.executemany(f"DELETE FROM {table} WHERE {column} = ?", [(i,) for i in ids])

    def _memory(self, db: sqlite3.Connection, session_id: str, now: float) -> list[MemoryItem]:
        """All live items, strongest first; forgets (deletes) those below ``forget_below``."""
        items = [
            MemoryItem(*row)
            for row in db.execute(
                "SELECT key, label, strength, last_seen, recalls FROM memory WHERE session_id = ?", (session_id,)
            )
        ]
        weak = [i.key for i in items if i.weight(now, self.half_life_s) < self.forget_below]
        if weak:
            db.executemany("DELETE FROM memory WHERE session_id = ? AND key = ?", [(session_id, k) for k in weak])
        forgotten = set(weak)
        live = [i for i in items if i.key not in forgotten]
        live.sort(key=lambda i: (-i.weight(now, self.half_life_s), -i.last_seen, i.key))
        return live

    def _reinforce(self, db: sqlite3.Connection, session_id: str, item: MemoryItem, now: float) -> MemoryItem:
        new = MemoryItem(item.key, item.label, item.weight(now, self.half_life_s) + 1.0, now, item.recalls + 1)
        db.execute(
            "UPDATE memory SET label = ?, strength = ?, last_seen = ?, recalls = ? WHERE session_id = ? AND key = ?",
            (new.label, new.strength, new.last_seen, new.recalls, session_id, new.key),
        )
        return new

    def _session(self, db: sqlite3.Connection, row: tuple, now: float) -> Session:
        session_id = row[0]
        turns = [
            TurnOut(
                question=r[0],
                expanded_query=r[1],
                answer=r[2],
                cited=json.loads(r[3]),
                entities=json.loads(r[4]),
                at=r[5],
            )
            for r in db.execute(
                "SELECT question, expanded_query, answer, cited, entities, at FROM turns"
                " WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        ]
        memory = [
            MemoryOut(key=i.key, label=i.label, weight=i.weight(now, self.half_life_s), recalls=i.recalls)
            for i in self._memory(db, session_id, now)
        ]
        return Session(
            id=session_id,
            created_at=row[1],
            updated_at=row[2],
            expires_at=row[3],
            summary=row[4],
            turns=turns,
            memory=memory,
        )

    # ---- public API ------------------------------------------------------------------------------
    def create(self) -> Session:
        now = self.clock()
        session_id = secrets.token_urlsafe(18)
        with self._tx() as db:
            # expired sessions (their questions, answers and memory) go as new ones come, not only
            # when someone asks for them again
            self._delete_expired(db, now)
            db.execute(
                "INSERT INTO sessions (id, created_at, updated_at, expires_at, summary) VALUES (?, ?, ?, ?, '')",
                (session_id, now, now, now + self.ttl_s),
            )
        return Session(
            id=session_id, created_at=now, updated_at=now, expires_at=now + self.ttl_s, summary="", turns=[], memory=[]
        )

    def get(self, session_id: str) -> Session | None:
        """The session, or None when it is unknown or expired (an expired one is deleted)."""
        _check_id(session_id)
        now = self.clock()
        with self._tx() as db:
            row = self._live(db, session_id, now)
            return None if row is None else self._session(db, row, now)

    def recall(self, session_id: str, limit: int = 3) -> list[MemoryItem]:
        """The ``limit`` strongest memory items, strongest first (read only: an item is reinforced
        when a question is expanded with it, :meth:`reinforce`).

        Raises KeyError when the session is unknown or expired."""
        _check_id(session_id)
        now = self.clock()
        with self._tx() as db:
            if self._live(db, session_id, now) is None:
                raise KeyError(session_id)
            return self._memory(db, session_id, now)[: max(0, limit)]

    def reinforce(self, session_id: str, keys: list[str]) -> list[MemoryItem]:
        """Reinforce the memory items ``keys`` (those a question was expanded with), in that order;
        keys no longer remembered are skipped. Raises KeyError when the session is unknown or expired."""
        _check_id(session_id)
        now = self.clock()
        with self._tx() as db:
            if self._live(db, session_id, now) is None:
                raise KeyError(session_id)
            items = {item.key: item for item in self._memory(db, session_id, now)}
            return [self._reinforce(db, session_id, items[k], now) for k in keys if k in items]

    def record_turn(self, session_id: str, turn: Turn, labels: dict[str, str]) -> Session:
        """Append a turn, remember (or reinforce) its entities, fold old turns into the summary and push
        the expiry to ``now + ttl_s``. Raises KeyError when the session is unknown or expired."""
        _check_id(session_id)
        now = self.clock()
        with self._tx() as db:
            row = self._live(db, session_id, now)
            if row is None:
                raise KeyError(session_id)
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?", (session_id,))
            db.execute(
                "INSERT INTO turns (session_id, seq, question, expanded_query, answer, cited, entities, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    seq.fetchone()[0],
                    turn.question,
                    turn.expanded_query,
                    turn.answer,
                    json.dumps(list(turn.cited)),
                    json.dumps(list(turn.entities)),
                    turn.at,
                ),
            )
            known = {i.key: i for i in self._memory(db, session_id, now)}
            for key in dict.fromkeys(turn.entities):
                if key in known:
                    item = known[key]
                    label = labels.get(key) or item.label
                    self._reinforce(
                        db, session_id, MemoryItem(key, label, item.strength, item.last_seen, item.recalls), now
                    )
                else:
                    db.execute(
                        "INSERT INTO memory (session_id, key, label, strength, last_seen, recalls)"
                        " VALUES (?, ?, ?, 1.0, ?, 0)",
                        (session_id, key, labels.get(key) or key, now),
                    )
            summary = row[4]
            old = db.execute(
                "SELECT seq, question, expanded_query, answer, cited, entities, at FROM turns"
                " WHERE session_id = ? ORDER BY seq DESC LIMIT -1 OFFSET ?",
                (session_id, self.max_turns),
            ).fetchall()
            if old:
                old.reverse()  # oldest first
                lines = [summary_line(Turn(r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), r[6])) for r in old]
                summary = _trim_summary("\n".join(([summary] if summary else []) + lines))
                db.executemany("DELETE FROM turns WHERE session_id = ? AND seq = ?", [(session_id, r[0]) for r in old])
            db.execute(
                "UPDATE sessions SET updated_at = ?, expires_at = ?, summary = ? WHERE id = ?",
                (now, now + self.ttl_s, summary, session_id),
            )
            fresh = (session_id, row[1], now, now + self.ttl_s, summary)
            return self._session(db, fresh, now)

    def purge_expired(self) -> int:
        """Delete every expired session; returns how many. Also done at every ``create()`` and when
        the store opens."""
        with self._tx() as db:
            return self._delete_expired(db, self.clock())

    def _delete_expired(self, db: sqlite3.Connection, now: float) -> int:
        ids = [r[0] for r in db.execute("SELECT id FROM sessions WHERE expires_at <= ?", (now,))]
        self._delete(db, ids)
        return len(ids)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
