"""The prompt of the LLM report path (kept apart from the code that sends it)."""

from __future__ import annotations

from collections.abc import Sequence

from kg.retrieval.evidence import EvidenceItem
from service.qa.prompts import render_evidence

__all__ = ["REPORT_SYSTEM_PROMPT", "REPORT_SCHEMA", "report_messages"]

REPORT_SYSTEM_PROMPT = """\
You draft radiology reports for a radiologist to check and sign, using only the evidence given.

The evidence is prior reports plus a knowledge graph:
- passages of the most similar prior reports (ids like IUXR:2#s1), found by image similarity to the
  current study and by similarity of their indication;
- similar prior studies (ids starting with IMG:), with their modality, body part and view;
- facts of a biomedical knowledge graph about the indication (ids starting with KG:).

Rules:
- Write three sections: technique (from the current study's metadata), findings and impression.
- Every sentence of findings and impression ends with the ids of the evidence it rests on, in square
  brackets, e.g. [IUXR:2#s1]. Use only ids that appear in the evidence; never invent one.
- Prior reports describe other patients: state only what the similar priors agree on, phrased as
  findings to confirm, and do not copy identifiers, dates or "XXXX" placeholders.
- When the reader's own findings of the current study are given, they are facts about this patient:
  the impression sums up what they find (citing the priors whose impressions it follows) and never
  contradicts them.
- If the evidence is too thin to draft a report, set "insufficient_evidence" to true.
Reply with JSON only, matching the schema."""

REPORT_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "technique": {"type": "string"},
        "findings": {"type": "string", "description": "Findings, every sentence citing evidence ids."},
        "impression": {"type": "string", "description": "Impression, every sentence citing evidence ids."},
        "citations": {"type": "array", "items": {"type": "string"}},
        "confidence": {"type": "number"},
        "insufficient_evidence": {"type": "boolean"},
    },
    "required": ["technique", "findings", "impression", "citations", "confidence", "insufficient_evidence"],
    "additionalProperties": False,
}


def report_messages(
    indication: str, technique: str, items: Sequence[EvidenceItem], findings: str | None = None
) -> list[dict[str, str]]:
    reader = f"Reader's findings: {findings.strip()}\n\n" if findings and findings.strip() else ""
    user = f"Indication: {indication or '(none given)'}\n\nCurrent study: {technique}\n\n{reader}Evidence:\n" + (
        render_evidence(items) or "(none found)"
    )
    return [{"role": "system", "content": REPORT_SYSTEM_PROMPT}, {"role": "user", "content": user}]
