"""Name completion: entities whose name or synonym starts with what was typed, or has a word that
does ("seiz" finds "Seizure" and "Focal-onset seizure"). Built in memory from one scan of the graph
(entity names and synonyms, obsolete entities left out); the web page's autocomplete uses it through
``GET /v1/entities?q=...&match=prefix``.

Every word start of every term is one entry of a sorted array, so a query is a binary search plus a
bounded walk over the entries sharing the prefix; candidates are ranked: the whole term starts with
the query before a later word does, a name before a synonym, shorter terms first."""

from __future__ import annotations

import bisect
import re
import time
import unicodedata
from dataclasses import dataclass

from kg.graph.base import BaseGraphStore

__all__ = ["Completion", "NameIndex", "fold"]

_SPACES = re.compile(r"\s+")
_WORD_START = re.compile(r"(?:^|(?<=[\s\-/(,]))\w", re.UNICODE)
MAX_WALK = 20_000  # entries examined per query at most (a one-letter prefix matches many)


def fold(text: str) -> str:
    """Case, accents and runs of white space ignored."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return _SPACES.sub(" ", "".join(c for c in decomposed if not unicodedata.combining(c))).strip()


@dataclass(frozen=True)
class Completion:
    id: str
    name: str
    category: str
    matched: str  # the name or synonym that matched
    via: str  # "name" or "synonym"


class NameIndex:
    def __init__(self) -> None:
        self._keys: list[str] = []  # folded text from a word start of a term, sorted
        self._refs: list[tuple[int, int, bool]] = []  # (term, offset of the word start, is the name)
        self._terms: list[str] = []
        self._term_entity: list[int] = []
        self._entities: list[tuple[str, str, str]] = []  # (id, name, category)
        # category -> its own (keys, refs), made on first use, so that a walk meets only that category
        self._by_category: dict[str, tuple[list[str], list[tuple[int, int, bool]]]] = {}
        self.build_seconds = 0.0

    @classmethod
    def from_graph(cls, store: BaseGraphStore, page: int = 20_000) -> NameIndex:
        started = time.perf_counter()
        index = cls()
        entries: list[tuple[str, int, int, bool]] = []
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
                        entries.append((folded[m.start() :], t, m.start(), is_name))
        entries.sort(key=lambda x: x[0])
        index._keys = [x[0] for x in entries]
        index._refs = [(t, offset, is_name) for _, t, offset, is_name in entries]
        index.build_seconds = round(time.perf_counter() - started, 2)
        return index

    def _table(self, category: str | None) -> tuple[list[str], list[tuple[int, int, bool]]]:
        """The sorted entries of ``category``'s entities (all entries for None)."""
        if category is None:
            return self._keys, self._refs
        if category not in self._by_category:
            keep = [i for i, (t, _, _) in enumerate(self._refs) if self._entities[self._term_entity[t]][2] == category]
            self._by_category[category] = ([self._keys[i] for i in keep], [self._refs[i] for i in keep])
        return self._by_category[category]

    def __len__(self) -> int:
        return len(self._entities)

    def complete(self, typed: str, category: str | None = None, limit: int = 20) -> list[Completion]:
        """Up to ``limit`` entities (each once) whose name or a synonym has a word starting with
        ``typed``; ``category`` (e.g. ``Phenotype``) restricts them."""
        query = fold(typed)
        if not query or limit < 1:
            return []
        keys, refs = self._table(category)
        lo = bisect.bisect_left(keys, query)
        best: dict[int, tuple[tuple[int, int, int, str], int, bool]] = {}
        for i in range(lo, min(len(keys), lo + MAX_WALK)):
            if not keys[i].startswith(query):
                break
            t, offset, is_name = refs[i]
            e = self._term_entity[t]
            term = self._terms[t]
            rank = (0 if offset == 0 else 1, 0 if is_name else 1, len(term), term.casefold())
            if e not in best or rank < best[e][0]:
                best[e] = (rank, t, is_name)
        ordered = sorted(best.items(), key=lambda kv: kv[1][0])[:limit]
        out = []
        for e, (_, t, is_name) in ordered:
            entity_id, name, cat = self._entities[e]
            out.append(Completion(entity_id, name, cat, self._terms[t], "name" if is_name else "synonym"))
        return out
