"""What an answer path returns, whichever path made it; and the answer to a question about something
medkg knows nothing about, which no path composes (no evidence may be read as about it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kg.retrieval.conditions import ConditionReading
    from kg.unknown_names import UnknownName

__all__ = ["Answer", "AnswerMode", "reading_note", "suggestion_note", "unknown_answer", "unknown_note"]

AnswerMode = Literal["extractive", "llm"]


@dataclass
class Answer:
    text: str  # inline citations in [brackets]
    cited: list[str]
    confidence: float
    insufficient_evidence: bool
    mode: AnswerMode
    dropped_citations: list[str] = field(default_factory=list)


def unknown_answer(unknown: list[UnknownName]) -> Answer:
    """ "medkg has no information about X", with the close names of the graph as questions, never as
    answers."""
    names = [u.text for u in unknown]
    named = _either(names)
    text = (
        f"medkg has no information about {named}: no entity of the knowledge graph and no indexed passage "
        f"has {'this name' if len(names) == 1 else 'these names'}, so nothing here can answer a question about "
        f"{'it' if len(names) == 1 else 'them'}."
    )
    for u in unknown:
        if u.suggestions:
            shown = _either([f"{name} ({i})" for i, name in u.suggestions])
            text += f" Did you mean {shown} for {u.text}?" if len(unknown) > 1 else f" Did you mean {shown}?"
    return Answer(text=text, cited=[], confidence=0.0, insufficient_evidence=True, mode="extractive")


def unrelated_answer(concepts: list[str], passages: int) -> Answer:
    """The abstention of a question about how two or more things relate when no passage names two of
    them and no fact of the graph answers: said as such, rather than as a missed support floor."""
    named = ", ".join(concepts[:-1]) + " and " + concepts[-1]
    text = (
        f"Insufficient evidence: no fact of the knowledge graph and no indexed passage relates {named} "
        f"({passages} passage{'s' if passages != 1 else ''} found name{'s' if passages == 1 else ''} only one of them)."
    )
    return Answer(text=text, cited=[], confidence=0.0, insufficient_evidence=True, mode="extractive")


def unknown_note(unknown: list[UnknownName]) -> str:
    """The note before an answer to a longer question (a vignette) that also names something unknown."""
    return f"medkg has no information about {_either([u.text for u in unknown])}; what follows does not use it."


def reading_note(readings: list[ConditionReading]) -> str:
    """How the answer read a finding the question named as the condition nearest to it, the whole
    question as the condition it describes, or its findings as the disease ranked first for them."""
    whole = next((r for r in readings if r.ranked_for or r.feature), None)  # a reading of the whole question
    if whole is not None:
        why = (
            f"the disease ranked first for the findings it names ({_and(list(whole.ranked_for))}), and one the "
            "knowledge graph holds such facts for"
            if whole.ranked_for
            else "of the conditions the knowledge graph holds such facts for, the nearest to its words, and one "
            f"with {whole.feature} among its features"
        )
        return f"Read the question as about {whole.name}: {why}."
    read = [f"{r.finding_name} as {r.name}" for r in readings]
    return f"Read {_and(read)}: the nearest condition the knowledge graph holds such facts for."


def suggestion_note(condition_id: str, name: str) -> str:
    """A condition the question may describe, offered as a question (never answered for)."""
    return (
        f"Did you mean {name} ({condition_id})? Of the conditions the knowledge graph holds such facts for, "
        "it is the nearest to the question's words."
    )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _either(items: list[str]) -> str:
    """ "a", "a or b", "a, b or c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
