"""The prompts of the benchmark runs (kept apart from the code that sends them): one system prompt per
answer kind (multiple choice, yes/no/maybe, true/false), the user message, and the JSON answer schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kg.retrieval.evidence import EvidenceItem
from service.qa.prompts import render_evidence

__all__ = ["SYSTEM_PROMPTS", "answer_schema", "question_messages", "remote_question"]

_JSON_RULE = 'Reply with a JSON object only: {"explanation": "<your reasoning, briefly>", "answer": "<the option>"}.'

SYSTEM_PROMPTS: dict[str, str] = {
    "mcq": (
        "You are a medical expert answering a multiple-choice exam question. Think step by step, then choose "
        "exactly one option. The answer is the option's letter.\n" + _JSON_RULE
    ),
    "yesno": (
        "You are a biomedical researcher answering a research question from the literature. Answer yes, no or "
        "maybe (maybe: the evidence is mixed or inconclusive). The answer is the word yes, no or maybe.\n" + _JSON_RULE
    ),
    "truefalse": (
        "You are a biomedical expert judging a statement about diseases, genes and drugs. Answer True if the "
        "statement is correct and False if it is not. The answer is the word True or False.\n" + _JSON_RULE
    ),
}

_EVIDENCE_NOTE = (
    "Evidence retrieved for this question (knowledge-graph facts have ids starting with KG:, literature "
    "passages ids like PMID:123#s4). Use it where it helps; it may be incomplete or irrelevant, and then "
    "your own knowledge decides."
)


def answer_schema(keys: Sequence[str]) -> dict[str, Any]:
    """``{"explanation": ..., "answer": <one of keys>}``: the explanation comes first so a model that writes
    in order reasons before it commits (MIRAGE's chain-of-thought setting)."""
    return {
        "type": "object",
        "properties": {
            "explanation": {"type": "string", "description": "Brief reasoning."},
            "answer": {"type": "string", "enum": list(keys), "description": "The chosen option."},
        },
        "required": ["explanation", "answer"],
        "additionalProperties": False,
    }


def _options_block(kind: str, options: dict[str, str]) -> str:
    if kind == "mcq":
        return "Options:\n" + "\n".join(f"{k}. {t}" for k, t in options.items())
    return "Answer with one of: " + ", ".join(options)


def question_messages(
    kind: str,
    question: str,
    options: dict[str, str],
    context: str | None = None,
    evidence: Sequence[EvidenceItem] | None = None,
) -> list[dict[str, str]]:
    """The chat messages for one item; ``evidence`` None: closed-book (no evidence block at all)."""
    parts = []
    if evidence is not None:
        parts.append(f"{_EVIDENCE_NOTE}\n{render_evidence(evidence) or '(none found)'}")
    if context:
        parts.append(f"Context (the abstract of the study, without its conclusion):\n{context}")
    label = "Statement" if kind == "truefalse" else "Question"
    parts.append(f"{label}: {question}")
    parts.append(_options_block(kind, options))
    return [{"role": "system", "content": SYSTEM_PROMPTS[kind]}, {"role": "user", "content": "\n\n".join(parts)}]


def remote_question(kind: str, question: str, options: dict[str, str], context: str | None = None) -> str:
    """The question text sent to a medkg server's ``/v1/qa`` (its own prompt and evidence apply):
    the options and the expected answer form are part of the question."""
    parts = []
    if context:
        parts.append(f"Context: {context}")
    parts.append(question)
    parts.append(_options_block(kind, options))
    if kind == "mcq":
        parts.append("Answer with the letter of the correct option, e.g. 'The answer is (B)'.")
    elif kind == "yesno":
        parts.append("Answer with yes, no or maybe, e.g. 'The answer is yes'.")
    else:
        parts.append("Answer True or False, e.g. 'The answer is True'.")
    return "\n".join(parts)
