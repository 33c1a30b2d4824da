"""Choosing what similar prior reports agree on: steadier than copying the nearest prior report, whose
idiosyncrasies would be copied with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from kg.negation import negated_in
from kg.text_metrics import rouge_l

__all__ = ["Candidate", "consensus_text", "consensus_sentences", "SupportedSentence"]

_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Candidate:
    text: str
    weight: float  # similarity of its report to the query
    source: str  # its citation id


@dataclass
class SupportedSentence:
    text: str
    support: float
    sources: list[str] = field(default_factory=list)


def consensus_text(candidates: Sequence[Candidate]) -> Candidate | None:
    """The candidate (say, one of the k most similar reports' impressions) most similar to the others, each
    weighted by its report's similarity to the query: a weighted medoid under ROUGE-L-style LCS overlap."""
    usable = [c for c in candidates if c.text.strip()]
    if not usable:
        return None
    if len(usable) == 1:
        return usable[0]
    best, best_score = usable[0], -1.0
    for c in usable:
        score = sum(o.weight * rouge_l(c.text, o.text) for o in usable if o is not c) + c.weight
        if score > best_score:
            best, best_score = c, score
    return best


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


@lru_cache(maxsize=4096)
def _negated_words(text: str) -> frozenset[str]:
    """The words of a sentence that a negation cue covers ("no left pleural effusion": left, pleural,
    effusion); empty for a sentence that negates nothing."""
    low = text.lower()
    return frozenset(m.group() for m in _WORD.finditer(low) if negated_in(low, m.start(), m.end()))


def _contradicts(
    words: frozenset[str], negated: frozenset[str], other: frozenset[str], other_negated: frozenset[str]
) -> bool:
    """Whether one sentence negates what the other (which negates nothing) states: a word they share
    is negated in one of them. Two sentences that both negate something ("no effusion or
    pneumothorax", "no pneumothorax or effusion is seen") may still be paraphrases, as may a
    statement and one that adds a negated clause about something else ("degenerative changes of
    the spine", "... without fracture")."""
    return bool(negated) != bool(other_negated) and bool((negated | other_negated) & words & other)


def consensus_sentences(
    neighbours: Sequence[tuple[float, list[tuple[str, str]]]], limit: int = 5, similar: float = 0.6
) -> list[SupportedSentence]:
    """``neighbours``: (weight, [(sentence, citation id), ...]) per similar report, nearest first. A
    sentence joins the first group whose first sentence shares at least ``similar`` of their words
    (Jaccard) and does not contradict it (one negating what the other states): "There is no left pleural
    effusion." never supports "There is a small left pleural effusion.". Sentences are ranked by the total
    weight of the neighbours that state them, kept when more than one supports them or the nearest does."""
    clusters: list[tuple[frozenset[str], frozenset[str], SupportedSentence, set[int]]] = []
    for n, (weight, sentences) in enumerate(neighbours):
        for sentence, source in sentences:
            words = _words(sentence)
            if not words:
                continue
            negated = _negated_words(sentence)
            for key, key_negated, supported, members in clusters:
                if len(words & key) / len(words | key) >= similar and not _contradicts(
                    words, negated, key, key_negated
                ):
                    if n not in members:
                        supported.support += weight
                        members.add(n)
                    if source not in supported.sources:
                        supported.sources.append(source)
                    break
            else:
                clusters.append((words, negated, SupportedSentence(sentence.strip(), weight, [source]), {n}))
    kept = [s for _, _, s, members in clusters if len(members) > 1 or 0 in members]
    kept.sort(key=lambda s: -s.support)
    return kept[:limit]
