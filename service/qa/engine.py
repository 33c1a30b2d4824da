"""The QA engine: a question (and its session) in, a cited answer out, every stage timed: the session's
memory recalled (a follow-up expanded with it), retrieval into one evidence bundle, the answer (LLM or
extractive), and the turn recorded in the session.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from kg.errors import InvalidInput, NotConfigured
from kg.retrieval.evidence import EvidenceBundle, EvidenceItem
from kg.retrieval.retriever import Retrieval, Retriever, facts_lead
from service.qa.answer import Answer, reading_note, suggestion_note, unknown_answer, unknown_note, unrelated_answer
from service.qa.citations import reading_order
from service.qa.extractive import ExtractiveComposer
from service.qa.llm import LLMAnswerer, LLMError
from service.qa.sessions import SessionStore, Turn, conversation_context, expand_query, memory_labels
from service.schema_types import whole_number

if TYPE_CHECKING:
    from multimodal.dicom import DicomImage
    from service.qa.graph_sessions import GraphSessionStore

__all__ = ["QAEngine", "QAOptions", "QAResponse", "UnknownSession", "LLMError"]

log = logging.getLogger("medkg.qa")

RequestedMode = Literal["auto", "extractive", "llm"]


class UnknownSession(KeyError):
    pass


class QAOptions(BaseModel):
    k: whole_number(1, 50) = Field(default=8, description="Passages to retrieve at most.")  # type: ignore[valid-type]
    hops: whole_number(0, 4) = Field(  # type: ignore[valid-type]
        default=2, description="Longest path between linked entities (SAME_AS free)."
    )
    mode: RequestedMode = Field(default="auto", description="auto: the LLM when configured, else extractive.")
    budget: whole_number(100, 16000) | None = Field(  # type: ignore[valid-type]
        default=None, description="Tokens of evidence at most (default MEDKG_QA_BUDGET_TOKENS)."
    )


class Citation(BaseModel):
    id: str
    kind: str
    title: str | None
    text: str
    url: str | None
    score: float


class RetrievedOut(BaseModel):
    """One item of the evidence bundle the answer was composed from (cited or not)."""

    id: str
    kind: str
    title: str | None
    score: float
    cited: bool


class LinkedOut(BaseModel):
    id: str
    name: str
    category: str
    mention: str
    method: str
    score: float
    negated: bool = Field(default=False, description='The question says it is absent ("no hypotonia").')


class PathStep(BaseModel):
    type: str
    subject: str
    object: str
    citation: str | None  # the fact's citation id (SAME_AS hops are not facts)


class PathOut(BaseModel):
    nodes: list[dict[str, str]]  # {"id", "name"}
    steps: list[PathStep]


class DifferentialOut(BaseModel):
    rank: int = Field(description="The disease's own rank among all ranked.")
    entry: int = Field(description="The answer's entry it is listed in (1-based).")
    group: dict[str, str | None] | None = Field(
        default=None,
        description="{id, name} of what unites an entry of several diseases (the Disease Ontology class its "
        "subtypes map to, or the first of one disease's descriptions); null for an entry of one disease.",
    )
    disease: str
    name: str | None
    score: float
    matches: list[dict[str, Any]]  # observed, disease_term, similarity
    genes: list[str]


class EvidenceSummary(BaseModel):
    items: int
    tokens: int
    budget: int
    kg_facts: int
    passages: int
    images: int
    dropped_for_budget: int


class UnknownOut(BaseModel):
    """A name the question uses that medkg knows nothing about, with close names of the graph."""

    text: str
    suggestions: list[dict[str, str]] = Field(default_factory=list, description="{id, name} of close names.")


class QAResponse(BaseModel):
    question: str
    answer: str
    mode: str
    insufficient_evidence: bool
    confidence: float
    citations: list[Citation]
    dropped_citations: list[str]
    retrieved: list[RetrievedOut] = Field(
        default_factory=list, description="Every evidence item given to the answer, in bundle order, cited or not."
    )
    kg_paths: list[PathOut]
    expanded_query: str
    linked_entities: list[LinkedOut]
    differential: list[DifferentialOut] = Field(
        default_factory=list, description="When the question lists phenotypes and asks for a diagnosis."
    )
    unknown_names: list[UnknownOut] = Field(
        default_factory=list,
        description="Names the question uses that medkg knows nothing about. A question of at most 30 words "
        "then retrieves nothing and the answer says so (insufficient_evidence); a longer one is answered from "
        "what is known after a note naming them.",
    )
    session_id: str | None
    evidence: EvidenceSummary
    timings_ms: dict[str, float]


class QAEngine:
    def __init__(
        self,
        retriever: Retriever,
        composer: ExtractiveComposer | None = None,
        llm: LLMAnswerer | None = None,
        sessions: SessionStore | GraphSessionStore | None = None,
        default_budget: int = 1500,
        image_evidence: Callable[[DicomImage | None, str | None], list[EvidenceItem]] | None = None,
    ) -> None:
        """``image_evidence``: the similar studies (``IMG:`` items) for an attached image or image id."""
        self.image_evidence = image_evidence
        self.default_budget = default_budget
        self.retriever = retriever
        self.composer = composer or ExtractiveComposer()
        self.llm = llm
        self.sessions = sessions

    # ---- stages ------------------------------------------------------------------------------
    def _mode(self, requested: RequestedMode) -> Literal["extractive", "llm"]:
        if requested == "llm" and self.llm is None:
            raise NotConfigured("answer mode 'llm' needs an LLM: set MEDKG_LLM_BASE_URL and MEDKG_LLM_MODEL")
        if requested == "auto":
            return "llm" if self.llm is not None else "extractive"
        return requested

    def _prepare(
        self,
        question: str,
        session_id: str | None,
        options: QAOptions,
        image: DicomImage | None = None,
        image_id: str | None = None,
    ) -> tuple[Retrieval, str, dict[str, float]]:
        question = " ".join(question.split())
        if not question:
            raise InvalidInput("the question is empty")
        timings: dict[str, float] = {}
        query, context, conversation = question, [], ""
        links = None  # the question's links, when the session step had to find them
        if session_id is not None:
            if self.sessions is None:
                raise InvalidInput("sessions are not enabled")
            t = time.perf_counter()
            session = self.sessions.get(session_id)
            if session is None:
                raise UnknownSession(session_id)
            links = self.retriever.link(question)
            try:
                memory = self.sessions.recall(session_id, limit=3)
                query, used = expand_query(question, memory, {e.id for e in links[0]})
                if used:  # what expanded the question, not every candidate, is strengthened
                    self.sessions.reinforce(session_id, [m.key for m in used])
            except KeyError as exc:  # expired since it was read
                raise UnknownSession(session_id) from exc
            context = [m.key for m in used]
            conversation = conversation_context(session)
            timings["session"] = time.perf_counter() - t
        extra: list[EvidenceItem] = []
        if image is not None or image_id:
            if self.image_evidence is None:
                raise InvalidInput("image evidence is not enabled")
            t = time.perf_counter()
            extra = self.image_evidence(image, image_id)
            timings["images"] = time.perf_counter() - t
        retrieval = self.retriever.retrieve(
            query,
            k=options.k,
            hops=options.hops,
            budget=options.budget or self.default_budget,
            context=context,
            extra=extra,
            links=links if query == question else None,  # an expanded query is linked afresh
            stop_at_unknown=_about_one_thing(question),
            joint_passages=True,
        )
        timings.update(retrieval.timings)
        return retrieval, conversation, timings

    def _respond(
        self,
        question: str,
        session_id: str | None,
        retrieval: Retrieval,
        answer: Answer,
        timings: dict[str, float],
        started: float,
    ) -> QAResponse:
        bundle: EvidenceBundle = retrieval.bundle
        if session_id is not None and self.sessions is not None:
            t = time.perf_counter()
            turn = Turn(
                question=question,
                expanded_query=retrieval.query,
                answer=answer.text,
                cited=answer.cited,
                entities=list(dict.fromkeys(e.id for e in retrieval.linked)),
                at=time.time(),
            )
            labels = memory_labels((e.id, e.name, e.negated) for e in retrieval.linked)
            try:
                self.sessions.record_turn(session_id, turn, labels)
            except KeyError as exc:  # expired while answering
                raise UnknownSession(session_id) from exc
            timings["session"] = timings.get("session", 0.0) + time.perf_counter() - t
        timings["total"] = time.perf_counter() - started
        names = retrieval.entities
        cited = set(answer.cited)
        fact_ids = {  # a path crosses stated edges only: never cite the NOT fact of the same triple
            (i.meta["subject"], i.meta["type"], i.meta["object"]): i.id
            for i in bundle.of_kind("kg")
            if not i.meta.get("negated")
        }
        return QAResponse(
            question=question,
            answer=answer.text,
            mode=answer.mode,
            insufficient_evidence=answer.insufficient_evidence,
            confidence=answer.confidence,
            citations=[
                Citation(id=i.id, kind=i.kind, title=i.title, text=i.text, url=i.url, score=round(i.score, 4))
                for cid in answer.cited
                if (i := bundle.get(cid)) is not None
            ],
            dropped_citations=answer.dropped_citations,
            retrieved=[
                RetrievedOut(id=i.id, kind=i.kind, title=i.title, score=round(i.score, 4), cited=i.id in cited)
                for i in bundle
            ],
            kg_paths=[
                PathOut(
                    nodes=[{"id": n, "name": names[n].name if n in names else n} for n in p.nodes],
                    steps=[
                        PathStep(
                            type=r.type,
                            subject=r.subject,
                            object=r.object,
                            citation=fact_ids.get((r.subject, r.type, r.object)),
                        )
                        for r in p.relations
                    ],
                )
                for p in retrieval.paths
            ],
            expanded_query=retrieval.query,
            linked_entities=[LinkedOut(**e.__dict__) for e in retrieval.linked],
            differential=[
                DifferentialOut(
                    rank=rank,
                    entry=number,
                    group={"id": e.group, "name": names[e.group].name if e.group in names else None}
                    if e.group
                    else None,
                    disease=c.disease,
                    name=names[c.disease].name if c.disease in names else None,
                    score=round(c.score, 4),
                    matches=[{"observed": q, "disease_term": t, "similarity": round(s, 4)} for q, t, s in c.matches],
                    genes=c.genes[:10],
                )
                for number, e in enumerate(retrieval.differential, 1)
                for rank, c in e.members
            ],
            unknown_names=[
                UnknownOut(text=u.text, suggestions=[{"id": i, "name": n} for i, n in u.suggestions])
                for u in retrieval.unknown
            ],
            session_id=session_id,
            evidence=EvidenceSummary(
                items=len(bundle),
                tokens=bundle.tokens,
                budget=bundle.budget,
                kg_facts=len(bundle.of_kind("kg")),
                passages=len(bundle.of_kind("passage")),
                images=len(bundle.of_kind("image")),
                dropped_for_budget=bundle.dropped_for_budget,
            ),
            timings_ms={k: round(v * 1000, 2) for k, v in timings.items()},
        )

    def _offline_answer(self, retrieval: Retrieval) -> Answer:
        """The answer without an LLM, which also decides whether an LLM is asked at all (in either mode an
        LLM must not guess) and what the LLM reads first (``_llm_evidence``):
        "medkg has no information about X" when retrieval stopped at an unknown name, else the
        extractive composer's, an abstention when nothing reaches its support floors (with the condition
        nearest to a question that describes one, as a question: ``Retriever.suggested_condition``)."""
        if retrieval.stopped:
            return unknown_answer(retrieval.unknown)
        if retrieval.unrelated and not facts_lead(retrieval.bundle.of_kind("kg")):
            # what the graph says of one of them alone does not relate them either
            answer = unrelated_answer(retrieval.unrelated, retrieval.unjoined_passages)
        else:
            answer = self.composer.compose(retrieval.query, retrieval.bundle)
        if answer.insufficient_evidence and (
            near := retrieval.suggestion
            if retrieval.suggestion_tried
            else self.retriever.suggested_condition(retrieval.query, retrieval.linked)
        ):
            answer.text += f" {suggestion_note(near.id, near.name)}"
        return answer

    # ---- entry points ------------------------------------------------------------------------
    def ask(
        self,
        question: str,
        session_id: str | None = None,
        options: QAOptions | None = None,
        image: DicomImage | None = None,
        image_id: str | None = None,
    ) -> QAResponse:
        """Answer ``question``: the session's strongest memory items are recalled (which reinforces them),
        expand a follow-up and join the linked entities as seeds; the ``Retriever`` makes one evidence bundle
        within the token budget; the LLM answers when one is configured (or asked for), else the extractive
        composer; the turn's entities become memory items. ``image`` (an uploaded study, read and
        de-identified) or ``image_id`` (an indexed one) adds the most similar prior studies and their
        reports to the evidence."""
        options = options or QAOptions()
        started = time.perf_counter()
        mode = self._mode(options.mode)
        retrieval, conversation, timings = self._prepare(question, session_id, options, image, image_id)
        t = time.perf_counter()
        offline = self._offline_answer(retrieval)
        if mode == "llm" and not offline.insufficient_evidence:
            assert self.llm is not None
            evidence = _llm_evidence(retrieval, offline)
            answer = self.llm.answer(question, evidence, conversation, [u.text for u in retrieval.unknown])
        else:
            answer = offline
        if note := _notes(retrieval, answer):
            answer.text = f"{note} {answer.text}"
        timings["answer"] = time.perf_counter() - t
        return self._respond(" ".join(question.split()), session_id, retrieval, answer, timings, started)

    def ask_stream(
        self,
        question: str,
        session_id: str | None = None,
        options: QAOptions | None = None,
        image: DicomImage | None = None,
        image_id: str | None = None,
    ) -> Iterator[tuple[str, Any]]:
        """Events ``("retrieval", {...})``, ``("delta", "text")``... then ``("answer", QAResponse)``;
        any failure after streaming began (the LLM, the session expiring meanwhile, a fault) is
        ``("error", {"status", "detail"})``."""
        options = options or QAOptions()
        started = time.perf_counter()
        mode = self._mode(options.mode)
        retrieval, conversation, timings = self._prepare(question, session_id, options, image, image_id)
        yield (
            "retrieval",
            {
                "expanded_query": retrieval.query,
                "linked_entities": [e.__dict__ for e in retrieval.linked],
                "evidence_ids": [i.id for i in retrieval.bundle],
            },
        )
        # once the first event is out the HTTP status is sent: every failure from here on must be an
        # "error" event, or the client sees the stream stop with neither an answer nor a reason
        try:
            t = time.perf_counter()
            answer: Answer | None = None
            offline = self._offline_answer(retrieval)
            note = _notes(retrieval, offline)
            note += " " if note else ""
            if note:
                yield "delta", note
            if mode == "llm" and not offline.insufficient_evidence:
                assert self.llm is not None
                unknown = [u.text for u in retrieval.unknown]
                evidence = _llm_evidence(retrieval, offline)
                for piece in self.llm.stream(question, evidence, conversation, unknown):
                    if isinstance(piece, Answer):
                        answer = piece
                    else:
                        yield "delta", piece
            else:
                answer = offline
                for i, sentence in enumerate(_sentences(answer.text)):
                    yield "delta", ("" if i == 0 else " ") + sentence
            assert answer is not None
            answer.text = note + answer.text
            timings["answer"] = time.perf_counter() - t
            response = self._respond(" ".join(question.split()), session_id, retrieval, answer, timings, started)
        except LLMError as exc:
            yield "error", {"status": exc.status, "detail": str(exc)}
            return
        except UnknownSession:
            yield "error", {"status": 404, "detail": f"the session {session_id!r} expired while answering"}
            return
        except Exception:
            log.exception("streamed answer failed")
            yield "error", {"status": 500, "detail": "internal error"}
            return
        yield "answer", response


#: A question of at most this many words is about what it names: one naming something unknown gets no
#: evidence. A longer one (a clinical vignette: "a 45-year-old woman on mepolizumab presents with...")
#: is answered from what is known, after a note that names what is not.
ABOUT_ONE_THING_WORDS = 30


def _notes(retrieval: Retrieval, answer: Answer) -> str:
    """What the answer is preceded by: the names medkg does not know (when it answered the rest), and
    how it read a finding as a condition (when that answered)."""
    notes = [unknown_note(retrieval.unknown)] if retrieval.unknown and not retrieval.stopped else []
    if retrieval.readings and not answer.insufficient_evidence:
        notes.append(reading_note(retrieval.readings))
    return " ".join(notes)


def _llm_evidence(retrieval: Retrieval, offline: Answer) -> EvidenceBundle:
    """The evidence in the order the LLM reads it: what the offline answer cites first, each point's
    first fact before any point's second (a differential's bundle already comes so: each entry's best
    match in rank order, then each one's next)."""
    if retrieval.differential:
        return retrieval.bundle
    return retrieval.bundle.leading(reading_order(offline.text, offline.cited))


def _about_one_thing(question: str) -> bool:
    return len(question.split()) <= ABOUT_ONE_THING_WORDS


def _sentences(text: str) -> list[str]:
    """The composer's sentences (each ends with its citation bracket and a full stop)."""
    return [s for s in re.split(r"(?<=\]\.)\s+|(?<=\])\s+(?=[A-Z])", text) if s] or [text]
