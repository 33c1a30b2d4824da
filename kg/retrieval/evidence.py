"""The evidence bundle: what an answer may cite, each item with a stable citation id that names what it
points at, so a reader can check it (``PMID:31675180#s4``, ``KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166``,
``IMG:<pseudonymised uid>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["EvidenceItem", "EvidenceBundle", "EvidenceKind", "fact_citation_id", "fill_budget"]

EvidenceKind = Literal["kg", "passage", "image"]


def fact_citation_id(subject: str, rel_type: str, object: str) -> str:
    return f"KG:{subject}-{rel_type}-{object}"


_FACT_ID = re.compile(r"^KG:(.+?)-((?:NOT_)?[A-Z][A-Z_]*)-(.+)$")


def fact_of_citation(citation_id: str) -> tuple[str, str, str] | None:
    """``(subject, relation type, object)`` of a graph fact's citation id; None for any other id."""
    return m.groups() if (m := _FACT_ID.match(citation_id)) else None  # type: ignore[return-value]


@dataclass(frozen=True)
class EvidenceItem:
    id: str  # the citation id: a passage id, KG:<subject>-<type>-<object>, or IMG:<pseudonymised uid>
    kind: EvidenceKind
    text: str  # what the answer may state or quote (a rendered fact, a passage)
    title: str | None  # document title, or the fact in short
    url: str | None  # where a reader checks it (PubMed page, ontology page)
    score: float  # relevance to the question (cosine), comparable within a kind
    tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvidenceBundle:
    """Items in the order they were chosen (most useful first), within ``budget`` tokens."""

    items: list[EvidenceItem]
    budget: int
    dropped_for_budget: int = 0

    @property
    def tokens(self) -> int:
        return sum(i.tokens for i in self.items)

    def ids(self) -> set[str]:
        return {i.id for i in self.items}

    def get(self, citation_id: str) -> EvidenceItem | None:
        return next((i for i in self.items if i.id == citation_id), None)

    def of_kind(self, kind: EvidenceKind) -> list[EvidenceItem]:
        return [i for i in self.items if i.kind == kind]

    def leading(self, ids: Sequence[str]) -> EvidenceBundle:
        """The same items with those of ``ids`` first, in that order (what answers the question before
        what only informs it)."""
        order = {cid: n for n, cid in enumerate(dict.fromkeys(ids))}
        items = sorted(self.items, key=lambda i: order.get(i.id, len(order)))  # stable: the rest keep theirs
        return EvidenceBundle(items=items, budget=self.budget, dropped_for_budget=self.dropped_for_budget)

    def __iter__(self) -> Iterator[EvidenceItem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def fill_budget(
    ranked_lists: Sequence[list[EvidenceItem]], budget: int, per_round: Sequence[int] | None = None
) -> EvidenceBundle:
    """Take items from ``ranked_lists`` (each best first) in rounds, ``per_round[j]`` items of list
    ``j`` per round (1 each by default; the first list leads each round), while they fit in
    ``budget`` tokens; an item that does not fit is skipped, not cut."""
    lists = [list(items) for items in ranked_lists]
    take = list(per_round) if per_round is not None else [1] * len(lists)
    if len(take) != len(lists) or any(n < 1 for n in take):
        raise ValueError("per_round needs one positive count per list")
    chosen: list[EvidenceItem] = []
    seen: set[str] = set()
    used = dropped = 0
    cursors = [0] * len(lists)
    while any(c < len(items) for c, items in zip(cursors, lists, strict=True)):
        for j, items in enumerate(lists):
            for item in items[cursors[j] : cursors[j] + take[j]]:
                if item.id in seen:
                    continue
                if used + item.tokens > budget:
                    dropped += 1
                    continue
                chosen.append(item)
                seen.add(item.id)
                used += item.tokens
            cursors[j] += take[j]
    return EvidenceBundle(items=chosen, budget=budget, dropped_for_budget=dropped)
