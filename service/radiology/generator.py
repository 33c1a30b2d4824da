"""Radiology report drafts: the most similar prior studies and reports (by image and by text), plus
knowledge-graph facts about the indication, composed into technique / findings / impression with
citations; offline from what the priors agree on, or by an LLM whose citations are checked.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from ingest.radiology_reports import RadiologyReport, ReportStore
from kg.errors import NotConfigured
from kg.retrieval.evidence import EvidenceBundle, EvidenceItem, fill_budget
from kg.retrieval.facts import GraphEvidence
from kg.retrieval.retriever import Retriever
from kg.text_index import TextIndex
from kg.text_metrics import rouge_l
from multimodal.dicom import DicomImage
from multimodal.graph import MODALITY_NAMES
from multimodal.image_index import ImageIndex, ImageRecord
from service.qa.citations import check_citations
from service.qa.engine import Citation
from service.qa.extractive import ExtractiveComposer, split_sentences
from service.qa.llm import LLMAnswerer
from service.radiology.consensus import Candidate, consensus_sentences, consensus_text
from service.radiology.prompts import REPORT_SCHEMA, report_messages

__all__ = ["ReportGenerator", "GeneratedReport", "Prior", "UnknownImage", "technique_of"]


class UnknownImage(KeyError):
    """The ``image_id`` a draft was asked for is not in the image index (a KeyError, as before)."""


# The de-identification placeholder, also glued to a word ("comparisXXXX", "XXXXyo", "5XXXX"): three
# or more capital X match no English word.
_PLACEHOLDER = re.compile(r"X{3,}")


def usable_impression(text: str | None) -> bool:
    """An impression a draft may take from a prior: not empty, and no de-identification placeholder
    ("XXXX") in it."""
    return bool(text) and not _PLACEHOLDER.search(text or "")


_SPACE = re.compile(r"\s+")


def technique_of(image: DicomImage | None) -> str:
    if image is None:
        return "No image supplied; technique not stated."
    modality = MODALITY_NAMES.get(image.modality or "", image.modality or "Imaging")
    parts = [modality]
    if image.body_part:
        parts.append(f"of the {image.body_part.lower()}")
    text = " ".join(parts)
    if image.view_position:
        text += f", {image.view_position} view"
    if image.frames > 1:
        text += f", {image.frames} frames"
    if image.study_description:
        text += f" ({image.study_description})"
    return text + "."


@dataclass
class Prior:
    doc_id: str
    score: float  # similarity to the current study (image cosine or text cosine, the larger)
    via: list[str]  # "image", "text"
    report: RadiologyReport
    image_id: str | None = None
    passages: list[tuple[str, str]] = field(default_factory=list)  # (passage id, text)

    def cite(self, sentence: str) -> str:
        """The passage of this report holding ``sentence`` (else its first passage)."""
        key = _SPACE.sub(" ", sentence).strip().lower()
        for pid, text in self.passages:
            if key and key in _SPACE.sub(" ", text).lower():
                return pid
        return self.passages[0][0] if self.passages else self.doc_id


class PriorOut(BaseModel):
    doc_id: str
    score: float
    via: list[str]
    image_id: str | None
    indication: str | None
    impression: str | None


class StudyOut(BaseModel):
    """The study a draft is for, de-identified: its pseudonymous ids (``STUDY:2.25...``, a DICOM UID under it)."""

    image_id: str
    study_id: str
    series_id: str
    modality: str | None
    body_part: str | None
    study_description: str | None


class GeneratedReport(BaseModel):
    study: StudyOut | None = Field(default=None, description="The de-identified study (null for a text-only draft).")
    indication: str
    technique: str
    findings: str
    impression: str
    context: str = Field(description="Knowledge-graph facts about the indication, cited.")
    mode: str
    insufficient_evidence: bool
    confidence: float
    citations: list[Citation]
    dropped_citations: list[str]
    priors: list[PriorOut]
    timings_ms: dict[str, float]


class ReportGenerator:
    def __init__(
        self,
        text_index: TextIndex,
        reports: ReportStore,
        retriever: Retriever | None = None,
        image_index: ImageIndex | None = None,
        llm: LLMAnswerer | None = None,
        text_floor: float = 0.3,
        fact_floor: float = 0.45,
    ) -> None:
        self.text_index = text_index
        self.reports = reports
        self.retriever = retriever
        self.image_index = image_index
        self.llm = llm
        self.text_floor = text_floor
        self.composer = ExtractiveComposer(fact_floor=fact_floor, max_groups=2, facts_per_group=4)

    # ---- priors --------------------------------------------------------------------------------
    def priors(
        self,
        text: str,
        image: DicomImage | None = None,
        image_id: str | None = None,
        k: int = 5,
        exclude: Iterable[str] = (),
        vector: np.ndarray | None = None,
    ) -> list[Prior]:
        """The ``k`` most similar prior reports, by image and by text, never those in ``exclude``;
        ``vector``: the text's embedding, when the caller has it."""
        skip = set(exclude)
        own: set[str] = set()
        if self.image_index is not None and (image is not None or image_id):
            own = self.image_index.own_study(image_id, image)  # its report is no prior, by image or by text
            skip |= {r.report_id for r in self.image_index.get(own).values() if r.report_id}
        best: dict[str, tuple[float, list[str], str | None]] = {}

        def offer(doc_id: str, score: float, via: str, img: str | None = None) -> None:
            if doc_id in skip:
                return
            old = best.get(doc_id)
            if old is None:
                best[doc_id] = (score, [via], img)
            else:
                best[doc_id] = (max(old[0], score), sorted(set(old[1]) | {via}), old[2] or img)

        if self.image_index is not None and (image is not None or image_id):
            query: Any = image if image is not None else self.image_index.vectors.vector(image_id or "")
            if query is not None:
                kind = self.image_index.kind_of(image_id, image)  # priors of its modality and body part
                for hit in self.image_index.search(query, k=4 * k, exclude=own, comparable_to=kind):
                    if hit.report_id:
                        offer(hit.report_id, hit.score, "image", hit.image_id)
        if text.strip():
            for hit in self.text_index.search(text, k=max(60, 8 * k), floor=self.text_floor, vector=vector):
                if hit.dense is not None:
                    offer(hit.doc_id, hit.dense, "text")
        reports = self.reports.get_many(best)
        ranked = sorted((d for d in best if d in reports), key=lambda d: -best[d][0])[:k]
        priors = []
        for doc_id in ranked:
            score, via, img = best[doc_id]
            pids = self.text_index.document_passages(doc_id)
            records = self.text_index.get(pids)
            passages = [(p, records[p].text) for p in pids if p in records]
            priors.append(Prior(doc_id, round(score, 4), via, reports[doc_id], img, passages))
        return priors

    # ---- composition ---------------------------------------------------------------------------
    @staticmethod
    def _clean(sentences: Iterable[str]) -> list[str]:
        return [s for s in sentences if not _PLACEHOLDER.search(s)]

    def compose_findings(self, priors: Sequence[Prior], limit: int = 5) -> str:
        """The findings sentences several close priors agree on (``consensus_sentences``), each citing
        the prior passages it came from."""
        neighbours = [
            (p.score, [(s, p.cite(s)) for s in self._clean(split_sentences(p.report.findings or ""))]) for p in priors
        ]
        chosen = consensus_sentences(neighbours, limit=limit)
        return " ".join(f"{s.text} [{'; '.join(s.sources[:3])}]" for s in chosen)

    def compose_impression(self, priors: Sequence[Prior], findings: str | None = None) -> str:
        """The priors' weighted medoid impression. Each prior weighs by its similarity to the study, or,
        when the study's own ``findings`` are given, by how much its findings resemble them (ROUGE-L):
        an impression sums up its report's findings, so the priors whose findings read like these are
        the ones whose impression fits (retrieval mixes in the indication, which most reports share)."""

        def weight(p: Prior) -> float:
            return rouge_l(p.report.findings or "", findings) if findings and findings.strip() else p.score

        candidates = [
            Candidate(p.report.impression, weight(p), p.cite(p.report.impression))
            for p in priors
            if usable_impression(p.report.impression)
        ]
        chosen = consensus_text(candidates)
        return f"{chosen.text} [{chosen.source}]" if chosen else ""

    def _facts(self, indication: str, qvec: np.ndarray | None = None) -> list[EvidenceItem]:
        if self.retriever is None or not indication.strip():
            return []
        linked, groups, _ = self.retriever.link(indication)
        if not groups:
            return []
        if qvec is None:
            qvec = self.retriever.embedder.encode([indication])[0]
        found = self.retriever.graph_evidence.retrieve(indication, qvec, groups, max_hops=0)
        return [GraphEvidence.evidence(f, found.entities) for f in found.facts[:12]]

    def _prior_items(self, priors: Sequence[Prior]) -> tuple[list[EvidenceItem], list[EvidenceItem]]:
        """The priors as evidence: their report passages, and the similar images they came by."""
        passages = [
            EvidenceItem(
                id=pid,
                kind="passage",
                text=text,
                title=f"Prior report {p.doc_id} (similarity {p.score:.2f}, by {' and '.join(p.via)})",
                url=None,
                score=p.score,
                meta={"doc_id": p.doc_id},
            )
            for p in priors
            for pid, text in p.passages
        ]
        images = [
            EvidenceItem(
                id=p.image_id,
                kind="image",
                text=f"Similar prior study (image similarity {p.score:.2f}), reported in {p.doc_id}.",
                title=p.doc_id,
                url=None,
                score=p.score,
            )
            for p in priors
            if p.image_id
        ]
        return passages, images

    def _bundle(
        self, passages: list[EvidenceItem], images: list[EvidenceItem], facts: list[EvidenceItem], budget: int
    ) -> EvidenceBundle:
        """What fits ``budget`` tokens, in rounds of three passages, an image and a fact (the LLM's context)."""
        counts = (
            self.retriever.embedder.count_tokens([i.text for i in (*passages, *images, *facts)])
            if self.retriever
            else None
        )

        def sized(items: list[EvidenceItem], offset: int) -> list[EvidenceItem]:
            if counts is None:
                return [EvidenceItem(**{**i.__dict__, "tokens": len(i.text.split())}) for i in items]  # type: ignore[arg-type]
            return [EvidenceItem(**{**i.__dict__, "tokens": counts[offset + n]}) for n, i in enumerate(items)]  # type: ignore[arg-type]

        return fill_budget(
            [sized(passages, 0), sized(images, len(passages)), sized(facts, len(passages) + len(images))],
            budget,
            per_round=[3, 1, 1],
        )

    def _embed(self, text: str, indication: str) -> dict[str, np.ndarray]:
        """The prior search's text and the indication embedded in one call (often the same text),
        when the text index and the retriever share their embedder."""
        if self.retriever is None or self.retriever.embedder is not self.text_index.embedder:
            return {}
        texts = list(dict.fromkeys(x for x in (text, indication) if x.strip()))
        return dict(zip(texts, self.text_index.embedder.encode(texts), strict=True)) if texts else {}

    def generate(
        self,
        indication: str,
        image: DicomImage | None = None,
        image_id: str | None = None,
        findings: str | None = None,
        k: int = 5,
        mode: Literal["auto", "extractive", "llm"] = "auto",
        budget: int = 2000,
        exclude: Iterable[str] = (),
    ) -> GeneratedReport:
        """A draft report for the study (``image``, or an indexed ``image_id``: :class:`UnknownImage` when
        it is not indexed) and ``indication``; ``findings`` (the reader's own), when given, are the draft's
        findings as given (never read for citations), join the indication in the text search and weigh the
        priors' impressions by how much their findings resemble them: the impression is what is drafted."""
        if mode == "llm" and self.llm is None:
            raise NotConfigured("report mode 'llm' needs an LLM: set MEDKG_LLM_BASE_URL and MEDKG_LLM_MODEL")
        use_llm = self.llm is not None and mode != "extractive"
        timings: dict[str, float] = {}
        started = t = time.perf_counter()
        if image is None and image_id and self.image_index is not None:
            if image_id not in self.image_index:
                raise UnknownImage(image_id)
        text = " ".join(p for p in (indication, findings or "") if p)
        vectors = self._embed(text, indication)
        priors = self.priors(text, image, image_id, k, exclude, vector=vectors.get(text))
        timings["priors"] = time.perf_counter() - t
        t = time.perf_counter()
        facts = self._facts(indication, vectors.get(indication))
        timings["graph"] = time.perf_counter() - t
        t = time.perf_counter()
        passages, images = self._prior_items(priors)
        bundle = self._bundle(passages, images, facts, budget)
        study = image if image is not None else self._indexed(image_id)  # one lookup: the technique and `study`
        technique = technique_of(image) if image is not None else self._indexed_technique(study)
        context = " ".join(self.composer.fact_sentences([f for f in facts if f.score >= self.composer.fact_floor]))
        dropped: list[str] = []
        reader = (findings or "").strip()  # the reader's own findings: the report's, as given
        if use_llm:
            assert self.llm is not None
            data = self.llm.complete_json(
                report_messages(indication, technique, bundle.items, findings), "report", REPORT_SCHEMA
            )
            allowed = bundle.ids()
            parts = {}
            for key in ("findings", "impression"):
                checked = check_citations(str(data.get(key, "")), [], allowed)
                parts[key] = checked.text
                dropped += [d for d in checked.dropped if d not in dropped]
            listed = check_citations("", [str(c) for c in data.get("citations") or []], allowed)
            dropped += [d for d in listed.dropped if d not in dropped]
            findings_text, impression = parts["findings"], parts["impression"]
            technique = str(data.get("technique") or technique)
            insufficient = bool(data.get("insufficient_evidence")) or not priors
            try:
                confidence = min(1.0, max(0.0, float(data.get("confidence", 0.0))))
            except (TypeError, ValueError):
                confidence = 0.0
            used_mode = "llm"
        else:
            findings_text = "" if reader else self.compose_findings(priors)
            impression = self.compose_impression(priors, findings)
            # priors none of which has findings or an impression a draft may take draft nothing (with the
            # reader's findings, the impression is all there is to draft)
            insufficient = not (findings_text or impression)
            confidence = 0.0 if insufficient else round(sum(p.score for p in priors) / len(priors), 3)
            used_mode = "extractive"
        if insufficient and not use_llm:
            message = (
                "Insufficient evidence: no similar prior report was found."
                if not priors
                else "Insufficient evidence: no similar prior report has findings or an impression a draft may take."
            )
            if reader:
                impression = message
            else:
                findings_text = findings_text or message
        timings["compose"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - started
        # An LLM draft may cite what its budgeted context held; an extractive one is composed from the
        # priors and facts themselves, so it cites them whether or not the budget would have held them.
        sources = {i.id: i for i in (bundle if use_llm else (*passages, *images, *facts))}
        checked = [check_citations(part, [], set(sources)) for part in (findings_text, impression, context)]
        findings_text, impression, context = (c.text for c in checked)  # an id with no source is taken out
        if reader:  # the reader's words, never read for citations ("[2 views]" is no evidence id)
            findings_text = reader
        cited = list(dict.fromkeys(i for c in checked for i in c.cited))
        dropped += [d for c in checked for d in c.dropped if d not in dropped]
        return GeneratedReport(
            study=StudyOut.model_validate(study, from_attributes=True) if study is not None else None,
            indication=indication,
            technique=technique,
            findings=findings_text,
            impression=impression,
            context=context,
            mode=used_mode,
            insufficient_evidence=insufficient,
            confidence=round(confidence, 3),
            citations=[
                Citation(id=i.id, kind=i.kind, title=i.title, text=i.text, url=i.url, score=round(i.score, 4))
                for cid in cited
                if (i := sources.get(cid)) is not None
            ],
            dropped_citations=dropped,
            priors=[
                PriorOut(
                    doc_id=p.doc_id,
                    score=p.score,
                    via=p.via,
                    image_id=p.image_id,
                    indication=p.report.indication,
                    impression=p.report.impression,
                )
                for p in priors
            ],
            timings_ms={k2: round(v * 1000, 2) for k2, v in timings.items()},
        )

    def _indexed(self, image_id: str | None) -> ImageRecord | None:
        if not image_id or self.image_index is None:
            return None
        return self.image_index.get([image_id]).get(image_id)

    def _indexed_technique(self, rec: ImageRecord | None) -> str:
        if rec is None:
            return technique_of(None)
        modality = MODALITY_NAMES.get(rec.modality or "", rec.modality or "Imaging")
        text = modality + (f" of the {rec.body_part.lower()}" if rec.body_part else "")
        return text + (f", {rec.view_position} view" if rec.view_position else "") + "."
