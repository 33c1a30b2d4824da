"""Name completion: entities whose name or synonym starts with what was typed, or has a word that does
("seiz" finds "Seizure" and "Focal-onset seizure"), for the web page's autocomplete
(``GET /v1/entities?q=...&match=prefix``). Built in memory from one scan of the graph.
"""

from __future__ import annotations

import bisect
import re
import time
import unicodedata
from dataclasses import dataclass

import numpy as np

from kg.graph.base import BaseGraphStore

__all__ = ["Completion", "NameIndex", "fold"]

_SPACES = re.compile(r"\s+")
_WORD_START = re.compile(r"(?:^|(?<=[\s\-/(,]))\w", re.UNICODE)
_LAST_CHAR = chr(0x10FFFF)


def fold(text: str) -> str:
    """Case, accents and runs of white space ignored."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return _SPACES.sub(" ", "".join(c for c in decomposed if not unicodedata.combining(c))).strip()


def _prefix_end(keys: list[str], prefix: str) -> int:
    """The index after the last key that starts with ``prefix`` (keys sorted)."""
    stem = prefix.rstrip(_LAST_CHAR)
    if not stem:
        return len(keys)
    return bisect.bisect_left(keys, stem[:-1] + chr(ord(stem[-1]) + 1))


@dataclass(frozen=True)
class Completion:
    id: str
    name: str
    category: str
    matched: str  # the name or synonym that matched
    via: str  # "name" or "synonym"


@dataclass(frozen=True)
class _Table:
    keys: list[str]  # folded text from a word start of a term, sorted
    term: np.ndarray  # the term of each entry
    rank: np.ndarray  # each entry's place in the ranking (smaller first), unique per (term, kind of match)


class NameIndex:
    """Every word start of every term (names and synonyms of current entities) is one entry of a sorted
    array, so the entries sharing a prefix are one range found by binary search. The ranking (the whole
    term starts with the query before a later word does, a name before a synonym, shorter terms first,
    then alphabetical) is one precomputed integer per entry, so a query takes the best of its whole range
    with a partial sort, even a one-letter prefix over a full ontology load."""

    def __init__(self) -> None:
        self._all = _Table([], np.zeros(0, np.int32), np.zeros(0, np.int64))
        self._terms: list[str] = []
        self._term_entity: list[int] = []
        self._entities: list[tuple[str, str, str]] = []  # (id, name, category)
        # category -> its own table, made on first use, so that a query meets only that category
        self._by_category: dict[str, _Table] = {}
        self.build_seconds = 0.0

    @classmethod
    def from_graph(cls, store: BaseGraphStore, page: int = 20_000) -> NameIndex:
        started = time.perf_counter()
        index = cls()
        # (key, term, kind): kind 0 a name from its start, 1 a synonym from its start, 2 and 3 from a later word
        entries: list[tuple[str, int, int]] = []
        after = ""
        while rows := store.scan_entities(after=after, limit=page):
            after = rows[-1].id
            for entity in rows:
                if entity.obsolete:
                    continue
                e = len(index._entities)
                index._entities.append((entity.id, entity.name, entity.category))
                seen: set[str] = set()
                for term, is_name in ((entity.name, True), *((s, False) for s in entity.synonyms)):
                    folded = fold(term)
                    if not folded or folded in seen:
                        continue
                    seen.add(folded)
                    t = len(index._terms)
                    index._terms.append(term)
                    index._term_entity.append(e)
                    for m in _WORD_START.finditer(folded):
                        entries.append((folded[m.start() :], t, (0 if m.start() == 0 else 2) + (0 if is_name else 1)))
        entries.sort(key=lambda x: x[0])
        terms = index._terms
        place = np.empty(len(terms), np.int64)  # a term's place among terms: shorter first, then alphabetical
        place[sorted(range(len(terms)), key=lambda t: (len(terms[t]), terms[t].casefold()))] = np.arange(len(terms))
        term = np.fromiter((x[1] for x in entries), np.int32, len(entries))
        kind = np.fromiter((x[2] for x in entries), np.int64, len(entries))
        index._all = _Table([x[0] for x in entries], term, kind * len(terms) + place[term])
        index.build_seconds = round(time.perf_counter() - started, 2)
        return index

    def _table(self, category: str | None) -> _Table:
        """The sorted entries of ``category``'s entities (all entries for None)."""
        if category is None:
            return self._all
        if category not in self._by_category:
            in_category = np.fromiter((c == category for _, _, c in self._entities), bool, len(self._entities))
            of_term = np.asarray(self._term_entity, np.int64)
            keep = np.flatnonzero(in_category[of_term[self._all.term]]) if len(of_term) else np.zeros(0, np.int64)
            keys = self._all.keys
            self._by_category[category] = _Table(
                [keys[i] for i in keep.tolist()], self._all.term[keep], self._all.rank[keep]
            )
        return self._by_category[category]

    def __len__(self) -> int:
        return len(self._entities)

    def complete(self, typed: str, category: str | None = None, limit: int = 20) -> list[Completion]:
        """Up to ``limit`` entities (each once) whose name or a synonym has a word starting with
        ``typed``; ``category`` (e.g. ``Phenotype``) restricts them. Each entity shows its best
        matching term, and entities come in the order of their best term."""
        query = fold(typed)
        if not query or limit < 1:
            return []
        table = self._table(category)
        lo = bisect.bisect_left(table.keys, query)
        hi = _prefix_end(table.keys, query)
        ranks = table.rank[lo:hi]
        terms = table.term[lo:hi]
        n = len(ranks)
        take = min(n, max(4 * limit, 64))  # the best entries looked at; more when entities repeat
        while True:
            best = np.argpartition(ranks, take - 1)[:take] if take < n else np.arange(n)
            best = best[np.argsort(ranks[best])]
            chosen: dict[int, int] = {}  # entity -> its best entry
            for i in best.tolist():
                e = self._term_entity[int(terms[i])]
                if e not in chosen:
                    chosen[e] = i
                    if len(chosen) == limit:
                        break
            # every entity left out has no entry among the ``take`` best, so ranks after those chosen
            if len(chosen) == limit or take == n:
                break
            take = min(n, 4 * take)
        out = []
        n_terms = len(self._terms)
        for e, i in chosen.items():
            entity_id, name, cat = self._entities[e]
            via = "name" if int(ranks[i]) // n_terms % 2 == 0 else "synonym"
            out.append(Completion(entity_id, name, cat, self._terms[int(terms[i])], via))
        return out
