"""Passages that relate what a question names. A question that names two or more things ("Is aspirin
effective for preventing colorectal cancer?") is answered by passages of an article that names at least
two of them; one about colorectal cancer alone answers nothing about aspirin, and quoted as the answer it
would read as if it did ("Does smoking increase the risk of bladder cancer?" was answered with a study of
smoking and nasopharyngeal carcinoma). The article, not the passage: its finding ("Risk increased with
smoking intensity") need not repeat what the abstract is about. A thing is named when all the (stemmed)
words of one of its names are in the article's title or text: the question's own words for it, or a
name or synonym of an entity they linked ("aspirin", "Acetylsalicylic acid")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Concept", "concepts_named", "question_concepts"]


#: links that rest on no name of the entity (the vector index's nearest entity to a phrase), or on none
#: of the question's words (a session's carried entity)
FUZZY_METHODS = frozenset({"vector", "session", "condition"})


class _Linked(Protocol):
    id: str
    name: str
    mention: str
    method: str


@dataclass(frozen=True)
class Concept:
    """One thing the question names: how it writes it, and the word sets of its names."""

    label: str
    names: tuple[frozenset[str], ...]


def question_concepts(
    linked: Sequence[_Linked],
    groups: Sequence[tuple[str, ...]],
    terms: Callable[[str], frozenset[str]],
    synonyms: Mapping[str, Sequence[str]] | None = None,
) -> list[Concept]:
    """One concept per group of linked entities that the question's words name: by a name or synonym
    (the lexicon, everyday words, an abbreviation), not the vector index's nearest entity to a phrase
    ("serum total bilirubin useful"), nor a session's carried entity; two groups of one phrase are one."""
    by_id: dict[str, list[_Linked]] = {}
    for entity in linked:
        by_id.setdefault(entity.id, []).append(entity)
    concepts: dict[str, Concept] = {}
    for group in groups:
        members = [e for i in group for e in by_id.get(i, ()) if e.method not in FUZZY_METHODS]
        mentions = [e.mention for e in members if e.mention.strip()]
        if not mentions:
            continue
        written = [*mentions, *(e.name for e in members)]
        written += [n for e in members for n in (synonyms or {}).get(e.id, ())]
        names = {terms(n) for n in written} - {frozenset()}
        label = mentions[0].strip()
        if names and label.casefold() not in concepts:
            concepts[label.casefold()] = Concept(label, tuple(sorted(names, key=sorted)))
    return list(concepts.values())


def concepts_named(words: frozenset[str], concepts: Sequence[Concept]) -> int:
    """How many of ``concepts`` a text of these (stemmed) ``words`` names."""
    return sum(any(name <= words for name in c.names) for c in concepts)
