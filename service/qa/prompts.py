"""The prompts of the LLM answer path (kept apart from the code that sends them)."""

from __future__ import annotations

from collections.abc import Sequence

from kg.retrieval.evidence import EvidenceItem

__all__ = ["ANSWER_SYSTEM_PROMPT", "ANSWER_SCHEMA", "answer_messages", "render_evidence"]

ANSWER_SYSTEM_PROMPT = """\
You answer clinical questions for clinicians and researchers, using only the evidence given.

The evidence is a knowledge graph plus literature:
- facts of a biomedical knowledge graph (ids starting with KG:), taken from curated ontologies and
  annotation sources (Human Phenotype Ontology disease annotations, Disease Ontology,
  PharmacotherapyDB indications, gene associations) and from relations found in the literature;
  a fact reads "subject relation object", with its source and PMIDs in brackets;
- passages of PubMed abstracts (ids like PMID:31675180#s4), with the article title;
- when an image is attached, the most similar imaging studies with their reports (ids starting with IMG:).

The evidence comes most relevant first: what answers the question (the facts of the relation it asks
for; for a diagnosis, the diseases of the ranked differential in their rank order) before what only
informs it.

Rules:
- Every sentence of the answer ends with the ids of the evidence it rests on, in square brackets,
  e.g. [KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166] or [PMID:31675180#s4; PMID:29768149#s2].
- Use only ids that appear in the evidence. Never invent an id, a study or a number.
- Prefer knowledge-graph facts for what is established and passages for findings of studies;
  say when sources disagree.
- If the evidence does not answer the question, set "insufficient_evidence" to true and say in one
  sentence what is missing; do not answer from general knowledge.
- "citations" lists every id the answer cites; "confidence" (0 to 1) is how well the cited
  evidence supports the answer.
Reply with JSON only, matching the schema."""

ANSWER_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The answer, every sentence citing evidence ids in [brackets]."},
        "citations": {"type": "array", "items": {"type": "string"}, "description": "Every evidence id cited."},
        "confidence": {"type": "number", "description": "0 to 1: how well the cited evidence supports the answer."},
        "insufficient_evidence": {"type": "boolean"},
    },
    "required": ["answer", "citations", "confidence", "insufficient_evidence"],
    "additionalProperties": False,
}


def render_evidence(items: Sequence[EvidenceItem]) -> str:
    lines = []
    for item in items:
        if item.kind == "passage" and item.title:
            lines.append(f"[{item.id}] {item.title} — {item.text}")
        else:
            lines.append(f"[{item.id}] {item.text}")
    return "\n".join(lines)


def answer_messages(
    question: str, items: Sequence[EvidenceItem], conversation: str = "", unknown: Sequence[str] = ()
) -> list[dict[str, str]]:
    """``unknown``: names in the question that medkg knows nothing about (kg/unknown_names.py)."""
    parts = []
    if conversation:
        parts.append(f"Conversation so far (for context; cite only the evidence below):\n{conversation}")
    parts.append(f"Question: {question}")
    if unknown:
        named = ", ".join(unknown)
        parts.append(
            f"Unknown to this knowledge base: {named}. No evidence below is about {named}: answer only what the "
            f"evidence supports about the rest of the question, never present evidence about another drug, "
            f"disease or gene as if it were about {named}, and say nothing about {named} itself."
        )
    parts.append("Evidence:\n" + (render_evidence(items) or "(none found)"))
    return [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
