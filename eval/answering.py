"""How a benchmark question gets answered, one class per mode; each returns an :class:`Outcome`.

Modes (the same questions through each):

- ``closed-book``: the LLM alone;
- ``rag``: the LLM with text evidence (the passages of the retriever's bundle);
- ``kg-rag``: the LLM with the full bundle (knowledge-graph facts, paths and passages);
- ``offline``: no LLM; the option best supported by retrieved evidence (:class:`OfflineAnswering`).

Answerers see a :class:`~eval.datasets.Question` (the item without its answer key).

LLM answers are JSON (``{"explanation", "answer"}``, the answer an enum of the option keys) through
the configured OpenAI-compatible server; :func:`parse_choice` drops ``<think>...</think>`` blocks and
reads a JSON object after a preamble or in a fenced block, and also reads free text ("The answer is
(C)", "C.", "**C**", an option's text verbatim when it is the only option named and is not negated)
for servers that ignore JSON schemas. An answer it cannot read is *unparsed* (counted, never guessed;
so is a negated key word: "Not true." is neither True nor False); an LLM failure is an *error* (counted).

The offline method
------------------
*Multiple choice.* The question stem is retrieved once (the retriever's bundle: linked entities, KG
facts and paths, passages). Each option is linked on its own (``Retriever.link``) and searched
twice in the passage index (hybrid BM25 + dense, the service's floor): "question + option" and the
option alone. Everything found (the question's bundle, the options' passages, the options' KG facts
below) is one evidence pool shared by all options. Each option then gets three support scores:

1. *dense*: max over pool items ``e`` of ``sqrt(cos(q, e)+ * cos(o, e)+)`` (embeddings of the
   question ``q``, the option ``o`` and the item; ``x+`` = max(x, 0)): evidence that is about the
   question *and* about the option. (The embedding of "question + option" is dominated by a long
   vignette, so the two relevances are taken apart.)
2. *lexical*: IDF-weighted coverage of the option's own words (stemmed, stop words out, and words
   that every option has removed) by a pool item, times that item's relevance ``cos(q, e)+``;
   max over items. IDF comes from the pool, so words found everywhere weigh little (BM25's IDF with
   saturation at one occurrence and no length normalisation).
3. *graph*: ``c / (c + 1)`` where ``c`` counts the question's linked entities joined to one of the
   option's linked entities (``SAME_AS`` free) by a current, non-negated fact, or lying at the ends
   of a retrieved path through an option entity (e.g. the option disease ``HAS_PHENOTYPE`` two of
   the question's findings: c = 2).

The option with the largest sum (weights 1, fixed a priori, never tuned on answers) is chosen. When
the best sum beats the runner-up by less than :data:`MARGIN` (no evidence at all is the extreme
case), the *prior* decides among the options within the margin: the option whose text is most
similar to the question (cosine of embeddings). Outcomes say which decided (``decided_by``:
``evidence`` or ``prior``), and the report counts the prior's decisions.

*Yes/no/maybe* (PubMedQA). Sentences of the item's context (the reasoning-required setting) or,
without one, of the retrieved passages; the 3 most similar to the question are read. Under
:data:`WEAK_SUPPORT` cosine for the best one: "maybe". Otherwise negation cues ("no significant",
"did not", "similar", ...) against finding cues ("significantly", "improved", "associated with", a
finding cue within three words after a negation counts as a negation): more negations: "no", else
"yes".

*True/false* (KG-RAG). A negation in the statement ("is not", "not associated") is noted and
removed; the positive statement is retrieved. Support: 1.0 for a direct fact between entities
linked from different mentions (a path of cost ``n``: ``1/n``); for a passage naming both mentions,
its cosine to the statement; a statement naming an identifier ("... is DOID:9169") is supported when
that id is one linked entity's id, ``SAME_AS`` equivalent or xref. Supported means support above
:data:`TF_THRESHOLD` (0.5, a documented constant: a direct fact or a co-mentioning passage closer
than 0.5, not a two-hop path); the answer is True when supported and not negated or unsupported and
negated.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel, Field

from eval.datasets import Question
from eval.prompts import answer_schema, question_messages, remote_question
from kg.model import SAME_AS
from kg.negation import negated_in
from kg.retrieval.evidence import EvidenceItem, fact_citation_id
from kg.retrieval.facts import render_fact
from kg.retrieval.retriever import Retrieval, passage_evidence
from service.qa.llm import LLMError, parse_json_object

if TYPE_CHECKING:
    import httpx

    from kg.embedders import TextEmbedder
    from kg.model import Relation
    from kg.retrieval.retriever import Retriever
    from service.qa.llm import LLMAnswerer

__all__ = [
    "MARGIN",
    "MODES",
    "TF_THRESHOLD",
    "WEAK_SUPPORT",
    "Answerer",
    "EvalError",
    "EvalLLM",
    "LLMAnswering",
    "OfflineAnswering",
    "Outcome",
    "RemoteAnswering",
    "parse_choice",
]

MODES = ("offline", "closed-book", "rag", "kg-rag")
MARGIN = 0.01  # offline MCQ: a lead smaller than this is a tie, and the prior decides
WEAK_SUPPORT = 0.3  # yes/no/maybe: best sentence cosine under this -> "maybe"
TF_THRESHOLD = 0.5  # true/false: support strictly above this -> the statement is supported
WEIGHTS = {"dense": 1.0, "lexical": 1.0, "graph": 1.0}


class EvalError(RuntimeError):
    """The run cannot go on (configuration, server refusing every request); a clear message."""


class Outcome(BaseModel):
    predicted: str | None = None  # an option key; None: unparsed or error
    parsed: bool = False
    error: str | None = None
    decided_by: str = ""  # evidence | prior | rule | llm | remote
    explanation: str | None = None
    raw: str | None = None  # the LLM's reply as it came
    evidence_ids: list[str] = Field(default_factory=list)
    cited: list[str] = Field(default_factory=list)
    linked: list[str] = Field(default_factory=list)
    option_scores: dict[str, dict[str, float]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_source: str | None = None  # usage (from the server) | estimated (embedder's tokenizer)
    evidence_tokens: int = 0
    timings_ms: dict[str, float] = Field(default_factory=dict)


class Answerer(Protocol):
    mode: str

    def answer(self, question: Question) -> Outcome: ...


# ---- reading an answer -------------------------------------------------------------------------
_DECOR = " \t\n*_`'\"()[]{}:.,;!"


def _norm_text(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def _normalize_value(value: Any, options: dict[str, str], kind: str) -> str | None:
    """An answer field's value (a key, "(C)", "C. text", an option's text) as an option key."""
    if isinstance(value, bool) and kind == "truefalse":
        return "True" if value else "False"
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    text = str(value).strip()
    bare = text.strip(_DECOR)
    if bare in options:
        return bare
    folded = {k.casefold(): k for k in options}
    if bare.casefold() in folded and (kind != "mcq" or len(bare) == 1):
        return folded[bare.casefold()]
    if kind == "mcq":
        m = re.match(r"^[\s*(\[]*([A-Z])(?:[.):\]]|\*\*)", text)
        if m and m.group(1) in options:
            return m.group(1)
    by_text = [k for k, t in options.items() if _norm_text(t) == _norm_text(text)]
    if len(by_text) == 1:
        return by_text[0]
    return None


def _key_words(options: dict[str, str]) -> str:
    return "|".join(re.escape(k) for k in sorted(options, key=len, reverse=True))


# A negation before a key word in its sentence ("not true", "isn't true", "cannot say yes").
_NEGATION_BEFORE = re.compile(r"(?i)\b(?:not|never|cannot|neither|nor)\b|n't\b")
# An option's text negated in its sentence: a cue before it ("not", "no", "unlikely", "rule out") or a
# clause that goes on to negate it ("... is unlikely", "... can be excluded").
_OPTION_CUE_BEFORE = re.compile(
    r"(?i)\b(?:not|no|never|cannot|unlikely|improbable|excludes?|excluded|excluding|against|"
    r"rule[sd]?\s+out|ruling\s+out|r/o|incorrect|wrong|rather than|instead of)\b|n't\b"
)
_OPTION_CUE_AFTER = re.compile(
    r"(?i)^[^.!?\n;]*?\b(?:not|unlikely|improbable|excluded|ruled\s+out|incorrect|wrong|less likely)\b|"
    r"^[^.!?\n;]*?n't\b"
)


def _sentence_before(text: str, pos: int) -> str:
    return re.split(r"[.!?\n;]", text[:pos])[-1]


def _negated_before(text: str, pos: int) -> bool:
    return bool(_NEGATION_BEFORE.search(_sentence_before(text, pos)))


def _option_negated(text: str, option: str) -> bool:
    """Whether an option's text, where it stands in ``text``, is negated in its sentence (any occurrence)."""
    words = _norm_text(option).split()
    pattern = re.compile(r"(?i)(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)")
    for m in pattern.finditer(text):
        if (
            negated_in(text, m.start(), m.end())
            or _OPTION_CUE_BEFORE.search(_sentence_before(text, m.start()))
            or _OPTION_CUE_AFTER.search(text[m.end() :])
        ):
            return True
    return False


def _free_text(text: str, options: dict[str, str], kind: str) -> str | None:
    keys = _key_words(options)
    if kind == "mcq":
        # "the answer is (C)", "Answer: C", "correct option is **C**": the first statement of the answer
        # (not "option B would be unlikely" or "answer A is a distractor", which discuss other options)
        said = re.findall(
            rf"(?i:answer|(?:correct|best|right)\s+(?:option|choice))\s*(?i:is|:|=|would be|should be|will be)"
            rf"\s*(?i:option\s*|choice\s*)?[\s*(\[]*({keys})(?![\w'-])",
            text,
        )
        if said:
            return said[0]
        m = re.match(rf"^[\s*(\[]*({keys})[\s*)\].:]*$", text)  # "C", "C.", "**C**", "(C)"
        if m:
            return m.group(1)
        m = re.match(rf"^[\s*(\[]*({keys})(?:[.):\]]|\*\*)", text)  # "C. Hypoglycemia because ..."
        if m:
            return m.group(1)
        bold = set(re.findall(rf"\*\*\(?({keys})\)?[.):]?\*\*", text))
        if len(bold) == 1:
            return bold.pop()
        # an option's text verbatim (and no other option's, unless inside the found one), not negated
        # where it stands ("not ethanol intoxication", "ethanol intoxication is unlikely")
        norm = f" {_norm_text(text)} "
        found = [k for k, t in options.items() if _norm_text(t) and f" {_norm_text(t)} " in norm]
        found = [
            k for k in found if not any(k != o and _norm_text(options[k]) in _norm_text(options[o]) for o in found)
        ]
        if len(found) != 1 or _option_negated(text, options[found[0]]):
            return None
        return found[0]
    # a key word negated in its sentence ("This statement is not true.", "Not true.", "It is not possible
    # to say yes") is no answer: neither it nor its opposite
    said = re.search(rf"(?i)answer\s*(?:is|:|=)\s*[\s*\"'(\[]*({keys})\b", text)
    if said:
        return None if _negated_before(text, said.start(1)) else _normalize_value(said.group(1), options, kind)
    # the first sentence opens or closes with the answer, and names no other ("Yes, ...", "The statement
    # is true."; not "Yes and no", nor "The study found no difference.")
    first = re.split(r"[.!?\n]", text, maxsplit=1)[0]
    named = {w.casefold() for w in re.findall(rf"(?i)\b({keys})\b", first)}
    m = re.match(rf"(?i)^[\s*\"'(\[]*({keys})\b", first) or re.search(rf"(?i)\b({keys})[\s*\"')\]]*$", first)
    if m and len(named) == 1 and not _negated_before(first, m.start(1)):
        return _normalize_value(m.group(1), options, kind)
    return None


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_ANSWER_FIELDS = ("answer", "answer_choice", "choice", "option")


def _json_object(text: str) -> dict[str, Any] | None:
    """The reply's JSON object: the whole reply, else its last fenced block, else its last balanced
    ``{...}`` that parses (preferring one with an answer field): a JSON answer after a preamble ("Here
    is the JSON: {...}") is read as JSON, not as free text."""
    try:
        return parse_json_object(text)
    except LLMError:
        pass
    for block in reversed(_FENCED.findall(text)):
        try:
            return parse_json_object(block)
        except LLMError:
            continue
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    with_answer = [d for d in found if any(f in d for f in _ANSWER_FIELDS)]
    return (with_answer or found or [None])[-1]


def parse_choice(text: str | None, options: dict[str, str], kind: str) -> tuple[str | None, str | None]:
    """(option key or None, explanation) of a reply: JSON ``{"answer": ...}`` first (after any
    ``<think>...</think>`` block; the whole reply, a fenced block or an object after a preamble), else
    free text."""
    if not text or not text.strip():
        return None, None
    text = _THINK.sub(" ", text)
    if "</think>" in text.casefold():  # a reasoning block whose opening tag was cut off
        text = text[text.casefold().rindex("</think>") + len("</think>") :]
    if not text.strip():
        return None, None
    data = _json_object(text)
    if data is not None:
        explanation = data.get("explanation")
        explanation = explanation if isinstance(explanation, str) else None
        for field in _ANSWER_FIELDS:
            if field in data:
                key = _normalize_value(data[field], options, kind)
                if key is None and isinstance(data[field], str):
                    key = _free_text(data[field], options, kind)
                return key, explanation
        return None, explanation
    return _free_text(text.strip(), options, kind), None


def _cited_in(text: str | None, ids: Sequence[str]) -> list[str]:
    if not text:
        return []
    return [i for i in ids if i in text]


# ---- the LLM -----------------------------------------------------------------------------------
@dataclass
class LLMReply:
    content: str
    prompt_tokens: int | None
    completion_tokens: int | None


class EvalLLM:
    """One chat completion per question through the service's :class:`LLMAnswerer` (its client,
    retries and error mapping to :class:`LLMError`), keeping the completion for its token usage.

    ``json_schema``: ask for the answer schema (``response_format``); False sends no
    ``response_format`` (servers without JSON-schema support; answers are then read as free text).
    A server that refuses the schema with HTTP 400 is asked again without it, and so is every later
    question (``fell_back`` says why)."""

    def __init__(self, answerer: LLMAnswerer, json_schema: bool = True) -> None:
        self.answerer = answerer
        self.json_schema = json_schema
        self.fell_back: str | None = None

    @property
    def model(self) -> str:
        return self.answerer.model

    def ask(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> LLMReply:
        try:
            reply = self.answerer.complete(messages, "benchmark_answer", schema if self.json_schema else None)
        except LLMError as exc:
            if not (self.json_schema and "HTTP 400" in str(exc)):
                raise
            reply = self.answerer.complete(messages)  # raises again when the schema was not the problem
            self.json_schema = False
            self.fell_back = f"the server refused the JSON schema ({exc}); answers are read as free text"
        return LLMReply(
            content=reply.content, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens
        )


def _retrieval_query(q: Question) -> str:
    """MedRAG's retrieval query: the question with its options' texts (options of yes/no kinds add nothing)."""
    if q.kind == "mcq":
        return q.question + " " + " ".join(q.options.values())
    return q.question


class LLMAnswering:
    """``closed-book``, ``rag`` (passages of the bundle) or ``kg-rag`` (the full bundle), in process."""

    def __init__(
        self,
        llm: EvalLLM,
        mode: str,
        retriever: Retriever | None = None,
        embedder: TextEmbedder | None = None,
        k: int = 8,
        hops: int = 2,
        budget: int = 1500,
    ) -> None:
        if mode not in ("closed-book", "rag", "kg-rag"):
            raise ValueError(f"not an LLM mode: {mode!r}")
        if mode != "closed-book" and retriever is None:
            raise ValueError(f"mode {mode!r} needs a retriever")
        self.llm, self.mode, self.retriever = llm, mode, retriever
        self.embedder = embedder or (retriever.embedder if retriever is not None else None)
        self.k, self.hops, self.budget = k, hops, budget

    def answer(self, q: Question) -> Outcome:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        out = Outcome(decided_by="llm")
        evidence: list[EvidenceItem] | None = None
        if self.mode != "closed-book":
            assert self.retriever is not None
            t = time.perf_counter()
            retrieval = self.retriever.retrieve(_retrieval_query(q), k=self.k, hops=self.hops, budget=self.budget)
            timings["retrieval"] = time.perf_counter() - t
            items = retrieval.bundle.items
            evidence = [i for i in items if i.kind == "passage"] if self.mode == "rag" else list(items)
            out.evidence_ids = [i.id for i in evidence]
            out.evidence_tokens = sum(i.tokens for i in evidence)
            out.linked = list(dict.fromkeys(e.id for e in retrieval.linked))
        messages = question_messages(q.kind, q.question, q.options, q.context, evidence)
        t = time.perf_counter()
        try:
            reply = self.llm.ask(messages, answer_schema(list(q.options)))
        except LLMError as exc:
            out.error = f"LLM error ({exc.status}): {exc}"
            timings["llm"] = time.perf_counter() - t
            out.timings_ms = _ms(timings, started)
            return out
        timings["llm"] = time.perf_counter() - t
        out.raw = reply.content
        out.predicted, out.explanation = parse_choice(reply.content, q.options, q.kind)
        out.parsed = out.predicted is not None
        out.cited = _cited_in(out.explanation or reply.content, out.evidence_ids)
        if reply.prompt_tokens is not None:
            out.prompt_tokens, out.completion_tokens, out.tokens_source = (
                reply.prompt_tokens,
                reply.completion_tokens,
                "usage",
            )
        elif self.embedder is not None:
            counts = self.embedder.count_tokens(["\n".join(m["content"] for m in messages), reply.content])
            out.prompt_tokens, out.completion_tokens, out.tokens_source = counts[0], counts[1], "estimated"
        out.timings_ms = _ms(timings, started)
        return out


def _ms(timings: dict[str, float], started: float) -> dict[str, float]:
    return {
        **{k: round(v * 1000, 1) for k, v in timings.items()},
        "total": round((time.perf_counter() - started) * 1000, 1),
    }


# ---- a running medkg server --------------------------------------------------------------------
class RemoteAnswering:
    """``kg-rag`` through a running medkg server: ``POST /v1/qa`` with ``options.mode = "llm"`` (the
    server's own LLM, prompt and evidence bundle); the options are part of the question text and the
    reply is read with :func:`parse_choice`. The response lists the evidence the answer cited (not
    the whole bundle), so ``evidence_ids`` are the cited ones."""

    mode = "kg-rag"

    def __init__(self, client: httpx.Client, k: int = 8, hops: int = 2, budget: int | None = None) -> None:
        self.client = client
        self.k, self.hops, self.budget = k, hops, budget
        self._answered = 0

    def answer(self, q: Question) -> Outcome:
        import httpx

        started = time.perf_counter()
        options: dict[str, Any] = {"mode": "llm", "k": self.k, "hops": self.hops}
        if self.budget:
            options["budget"] = self.budget
        body = {"question": remote_question(q.kind, q.question, q.options, q.context), "options": options}
        try:
            r = self.client.post("/v1/qa", json=body)
        except httpx.HTTPError as exc:
            if not self._answered:
                raise EvalError(f"cannot reach the medkg server at {self.client.base_url}: {exc}") from None
            return Outcome(decided_by="remote", error=f"HTTP error: {exc}", timings_ms=_ms({}, started))
        detail = _detail(r)
        if r.status_code in (401, 403, 404) or (r.status_code == 422 and "MEDKG_LLM" in detail):
            raise EvalError(f"the medkg server at {self.client.base_url} answered HTTP {r.status_code}: {detail}")
        if r.status_code != 200:
            return Outcome(decided_by="remote", error=f"HTTP {r.status_code}: {detail}", timings_ms=_ms({}, started))
        self._answered += 1
        data = r.json()
        predicted, explanation = parse_choice(data.get("answer"), q.options, q.kind)
        cited = [c["id"] for c in data.get("citations", [])]
        server = {f"server_{k}": float(v) for k, v in (data.get("timings_ms") or {}).items()}
        return Outcome(
            predicted=predicted,
            parsed=predicted is not None,
            decided_by="remote",
            raw=data.get("answer"),
            explanation=explanation,
            evidence_ids=cited,
            cited=cited,
            linked=[e["id"] for e in data.get("linked_entities", [])],
            evidence_tokens=int((data.get("evidence") or {}).get("tokens", 0)),
            timings_ms={**server, **_ms({}, started)},
        )


def _detail(r: httpx.Response) -> str:
    try:
        data = r.json()
    except ValueError:
        return r.text[:300]
    detail = data.get("detail", data) if isinstance(data, dict) else data
    return str(detail)[:300]


# ---- offline: evidence support, no LLM ---------------------------------------------------------
_NEGATION = re.compile(
    r"\b(?:no|not|none|neither|nor|without|never|fail(?:s|ed)? to|did not|does not|do not|was not|were not"
    r"|is not|are not|cannot|unable|lack(?:s|ed|ing)?|absence|non-?significant|insignificant|unchanged"
    r"|similar|comparable)\b",
    re.IGNORECASE,
)
_FINDING = re.compile(
    r"\b(?:significant(?:ly)?|associated with|improv\w*|increas\w*|reduc\w*|decreas\w*|effective|benefit\w*"
    r"|higher|lower|greater|predict\w*|correlat\w*|superior|better)\b",
    re.IGNORECASE,
)
_STATEMENT_NEGATION = re.compile(r"\b(?:is not|are not|does not|do not|isn't|aren't|doesn't|don't|not)\b\s*", re.I)
_CURIE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*:[A-Za-z0-9][A-Za-z0-9_.]*\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")


def cue_counts(sentence: str) -> tuple[int, int]:
    """(negations, findings) in a sentence; a finding within three words after a negation is negated."""
    negations = list(_NEGATION.finditer(sentence))
    findings = 0
    for m in _FINDING.finditer(sentence):
        before = sentence[: m.start()].split()[-3:]
        if not any(_NEGATION.fullmatch(w.strip(",;:()")) for w in before) and not any(
            n.end() <= m.start() and len(sentence[n.end() : m.start()].split()) < 3 for n in negations
        ):
            findings += 1
    return len(negations), findings


class OfflineAnswering:
    """The option best supported by retrieved evidence (the method in this module's docstring)."""

    mode = "offline"

    def __init__(self, retriever: Retriever, k: int = 8, hops: int = 2, budget: int = 1500, option_k: int = 4) -> None:
        import Stemmer

        self.retriever = retriever
        self.embedder = retriever.embedder
        self.graph = retriever.graph
        self.text_index = retriever.text_index
        self.k, self.hops, self.budget, self.option_k = k, hops, budget, option_k
        self._stemmer = Stemmer.Stemmer("english")

    def answer(self, q: Question) -> Outcome:
        started = time.perf_counter()
        if q.kind == "mcq":
            out = self._mcq(q)
        elif q.kind == "yesno":
            out = self._yes_no_maybe(q)
        else:
            out = self._true_false(q)
        out.parsed = out.predicted is not None
        out.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        return out

    # ---- helpers -------------------------------------------------------------------------------
    def _tokens(self, texts: list[str]) -> list[set[str]]:
        import bm25s

        if not texts:
            return []
        return [
            set(t)
            for t in bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False)
        ]

    def _vectors(self, items: list[EvidenceItem]) -> np.ndarray:
        """Unit vectors of pool items: a passage's stored vector, else the embedded text (a fact's short form)."""
        dim = None
        vectors: list[np.ndarray | None] = []
        for item in items:
            vec = self.text_index.vectors.vector(item.id) if item.kind == "passage" else None
            vectors.append(vec)
            dim = len(vec) if vec is not None else dim
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            encoded = self.embedder.encode(
                [items[i].title or items[i].text if items[i].kind == "kg" else items[i].text for i in missing]
            )
            for i, vec in zip(missing, encoded, strict=True):
                vectors[i] = vec
        if not vectors:
            return np.zeros((0, dim or 1), dtype=np.float32)
        return np.stack([np.asarray(v, dtype=np.float32) for v in vectors])

    def _count_tokens(self, items: list[EvidenceItem]) -> int:
        missing = [i.text for i in items if not i.tokens]
        return sum(i.tokens for i in items) + (sum(self.embedder.count_tokens(missing)) if missing else 0)

    def _graph_support(
        self, option_ids: Sequence[str], question_ids: set[str], retrieval: Retrieval
    ) -> tuple[set[str], list[EvidenceItem]]:
        """The question entities joined to the option's entities (``SAME_AS`` free), with the facts."""
        own = set(option_ids)
        queue, expanded = list(dict.fromkeys(option_ids))[:5], set()
        types = [*self.retriever.graph_evidence.fact_types(), SAME_AS]
        connected: set[str] = set()
        facts: dict[str, EvidenceItem] = {}
        names = {e.id: e.name for e in retrieval.entities.values()}
        while queue:
            eid = queue.pop(0)
            if eid in expanded:
                continue
            expanded.add(eid)
            for n in self.graph.neighbours(eid, rel_types=types, limit=1000):
                other, rel = n.entity.id, n.relation
                names.setdefault(other, n.entity.name)
                if rel.type == SAME_AS:
                    if other not in own and len(own) < len(option_ids) + 3:
                        own.add(other)
                        queue.append(other)
                    continue
                if other in question_ids and other not in own and not rel.negated:
                    connected.add(other)
                    facts.setdefault(_fact_id(rel), self._fact_item(rel, names))
        for path in retrieval.paths:  # a path between question entities running through an option entity
            if own & set(path.nodes[1:-1]):
                connected |= {path.nodes[0], path.nodes[-1]} - own
                for rel in path.relations:
                    if rel.type != SAME_AS:
                        facts.setdefault(_fact_id(rel), self._fact_item(rel, names))
        for item in retrieval.bundle.of_kind("kg"):
            ends = {item.meta.get("subject"), item.meta.get("object")}
            if own & ends and not item.meta.get("negated"):
                hit = (ends - own) & question_ids
                if hit:
                    connected |= hit
                    facts.setdefault(item.id, item)
        return connected, list(facts.values())

    @staticmethod
    def _fact_item(rel: Relation, names: dict[str, str]) -> EvidenceItem:
        return EvidenceItem(
            id=_fact_id(rel),
            kind="kg",
            text=render_fact(rel, names),
            title=render_fact(rel, names, with_evidence=False),
            url=None,
            score=0.0,
            meta={"subject": rel.subject, "type": rel.type, "object": rel.object, "negated": rel.negated},
        )

    # ---- multiple choice -----------------------------------------------------------------------
    def _mcq(self, q: Question) -> Outcome:
        timings: dict[str, float] = {}
        t = time.perf_counter()
        retrieval = self.retriever.retrieve(q.question, k=self.k, hops=self.hops, budget=self.budget)
        timings["retrieval"] = time.perf_counter() - t
        question_ids = {e.id for e in retrieval.linked}

        t = time.perf_counter()
        keys = list(q.options)
        texts = [q.options[k] for k in keys]
        n = len(keys)
        vecs = self.embedder.encode([q.question, *texts, *(f"{q.question} {o}" for o in texts)])
        qv, ov, qov = vecs[0], vecs[1 : 1 + n], vecs[1 + n :]
        pool: dict[str, EvidenceItem] = {i.id: i for i in retrieval.bundle}
        floor = self.retriever.search_floor
        for i, text in enumerate(texts):
            hits = self.text_index.search(f"{q.question} {text}", k=self.option_k, floor=floor, vector=qov[i])
            hits += self.text_index.search(text, k=self.option_k, floor=floor, vector=ov[i])
            for h in hits:
                if not h.retracted:
                    pool.setdefault(h.id, passage_evidence(h))
        option_linked: dict[str, list[str]] = {}
        graph_hits: dict[str, set[str]] = {}
        for key, text in zip(keys, texts, strict=True):
            linked, _ = self.retriever.link(text)
            option_linked[key] = list(dict.fromkeys(e.id for e in linked))
            graph_hits[key], facts = self._graph_support(option_linked[key], question_ids, retrieval)
            for f in facts:
                pool.setdefault(f.id, f)
        timings["options"] = time.perf_counter() - t

        t = time.perf_counter()
        items = list(pool.values())
        ev = self._vectors(items)
        rel_q = np.clip(ev @ qv, 0, None) if len(items) else np.zeros(0)
        rel_o = np.clip(ev @ ov.T, 0, None) if len(items) else np.zeros((0, n))  # items x options
        dense = np.sqrt(rel_q[:, None] * rel_o) if len(items) else np.zeros((0, n))

        option_tokens = self._tokens(texts)
        shared = set.intersection(*option_tokens) if option_tokens else set()
        option_tokens = [t_ - shared for t_ in option_tokens]
        docs = self._tokens(
            [f"{i.title or ''} {i.text}" if i.kind == "passage" else (i.title or i.text) for i in items]
        )
        big_n = len(docs)
        df: dict[str, int] = {}
        for d in docs:
            for tok in d:
                df[tok] = df.get(tok, 0) + 1

        def idf(tok: str) -> float:
            f = df.get(tok, 0)
            return math.log(1 + (big_n - f + 0.5) / (f + 0.5))

        scores: dict[str, dict[str, float]] = {}
        best_items: dict[str, list[str]] = {}
        for j, key in enumerate(keys):
            total_idf = sum(idf(tok) for tok in option_tokens[j])
            lexical = np.zeros(len(items))
            if total_idf > 0:
                for e, d in enumerate(docs):
                    lexical[e] = sum(idf(tok) for tok in option_tokens[j] & d) / total_idf * rel_q[e]
            c = len(graph_hits[key])
            parts = {
                "dense": float(dense[:, j].max()) if len(items) else 0.0,
                "lexical": float(lexical.max()) if len(items) else 0.0,
                "graph": c / (c + 1),
            }
            parts["total"] = sum(WEIGHTS[name] * parts[name] for name in WEIGHTS)
            parts["prior"] = float(ov[j] @ qv)
            scores[key] = {name: round(v, 4) for name, v in parts.items()}
            top = []
            if len(items):
                top.append(items[int(dense[:, j].argmax())].id)
                if parts["lexical"] > 0:
                    top.append(items[int(lexical.argmax())].id)
            best_items[key] = top
        ranked = sorted(keys, key=lambda k_: -scores[k_]["total"])
        best = scores[ranked[0]]["total"]
        close = [k_ for k_ in ranked if best - scores[k_]["total"] < MARGIN]
        if len(close) == 1:
            chosen, decided_by = close[0], "evidence"
        else:
            chosen, decided_by = max(close, key=lambda k_: scores[k_]["prior"]), "prior"
        timings["scoring"] = time.perf_counter() - t
        facts_of_choice = [
            i.id
            for i in items
            if i.kind == "kg"
            and {i.meta.get("subject"), i.meta.get("object")} & set(option_linked[chosen])
            and {i.meta.get("subject"), i.meta.get("object")} & graph_hits[chosen]
        ]
        return Outcome(
            predicted=chosen,
            decided_by=decided_by,
            evidence_ids=[i.id for i in items],
            cited=list(dict.fromkeys([*best_items[chosen], *facts_of_choice]))[:8] if decided_by == "evidence" else [],
            linked=sorted(question_ids | {i for ids in option_linked.values() for i in ids}),
            option_scores=scores,
            evidence_tokens=self._count_tokens(items),
            timings_ms={k_: round(v * 1000, 1) for k_, v in timings.items()},
        )

    # ---- yes / no / maybe ----------------------------------------------------------------------
    def _yes_no_maybe(self, q: Question) -> Outcome:
        timings: dict[str, float] = {}
        sentences: list[tuple[str | None, str]] = []  # (evidence id, sentence)
        evidence_ids: list[str] = []
        tokens = 0
        linked: list[str] = []
        if q.context:
            sentences = [(None, s) for line in q.context.splitlines() for s in _SENTENCE.split(line) if s.strip()]
        else:
            t = time.perf_counter()
            retrieval = self.retriever.retrieve(q.question, k=self.k, hops=self.hops, budget=self.budget)
            timings["retrieval"] = time.perf_counter() - t
            passages = retrieval.bundle.of_kind("passage")
            evidence_ids = [p.id for p in passages]
            tokens = sum(p.tokens for p in passages)
            linked = [e.id for e in retrieval.linked]
            sentences = [(p.id, s) for p in passages for s in _SENTENCE.split(p.text) if s.strip()]
        out = Outcome(decided_by="rule", evidence_ids=evidence_ids, evidence_tokens=tokens, linked=linked)
        has_maybe = "maybe" in q.options
        if not sentences:
            out.predicted = "maybe" if has_maybe else _first(q.options, "yes")
            out.decided_by = "prior"
            out.timings_ms = {k: round(v * 1000, 1) for k, v in timings.items()}
            return out
        t = time.perf_counter()
        vecs = self.embedder.encode([q.question, *(s for _, s in sentences)])
        rel = vecs[1:] @ vecs[0]
        top = [int(i) for i in np.argsort(-rel)[:3]]
        strength = float(rel[top[0]])
        negations = findings = 0
        for i in top:
            a, b = cue_counts(sentences[i][1])
            negations, findings = negations + a, findings + b
        if strength < WEAK_SUPPORT and has_maybe:
            out.predicted = "maybe"
        elif negations > findings:
            out.predicted = _first(q.options, "no")
        else:
            out.predicted = _first(q.options, "yes")
        out.option_scores = {"rule": {"strength": round(strength, 4), "negations": negations, "findings": findings}}
        out.cited = list(dict.fromkeys(sentences[i][0] for i in top if sentences[i][0]))
        timings["scoring"] = time.perf_counter() - t
        out.timings_ms = {k: round(v * 1000, 1) for k, v in timings.items()}
        return out

    # ---- true / false --------------------------------------------------------------------------
    def _true_false(self, q: Question) -> Outcome:
        timings: dict[str, float] = {}
        negated = _STATEMENT_NEGATION.search(q.question) is not None
        positive = " ".join(_STATEMENT_NEGATION.sub("", q.question).split())
        curies = _CURIE.findall(positive)
        query = " ".join(_CURIE.sub("", positive).split()) if curies else positive
        t = time.perf_counter()
        retrieval = self.retriever.retrieve(query, k=self.k, hops=self.hops, budget=self.budget)
        timings["retrieval"] = time.perf_counter() - t
        t = time.perf_counter()
        mention_of: dict[str, str] = {}
        for e in retrieval.linked:
            mention_of.setdefault(e.id, e.mention.casefold())
        support, how, cited = 0.0, "none", []
        if curies:
            ids = set(mention_of)
            names = self.graph.get_entities(ids)
            equivalents = set(ids) | {x for e in names.values() for x in e.xrefs}
            for eid in ids:
                equivalents |= {n.entity.id for n in self.graph.neighbours(eid, rel_types=[SAME_AS], limit=50)}
            if any(c in equivalents for c in curies):
                support, how = 1.0, "identifier"
        else:
            for path in retrieval.paths:
                a, b = path.nodes[0], path.nodes[-1]
                if mention_of.get(a) != mention_of.get(b) and path.cost > 0 and 1 / path.cost > support:
                    support, how = 1 / path.cost, f"path of {path.cost}"
                    cited = [fact_citation_id(r.subject, r.type, r.object) for r in path.relations if r.type != SAME_AS]
            for item in retrieval.bundle.of_kind("kg"):
                s, o = item.meta.get("subject"), item.meta.get("object")
                if (
                    s in mention_of
                    and o in mention_of
                    and mention_of[s] != mention_of[o]
                    and not item.meta.get("negated")
                ):
                    support, how, cited = 1.0, "fact", [item.id]
                    break
            mentions = {m for m in mention_of.values() if m}
            passages = retrieval.bundle.of_kind("passage")
            if support <= TF_THRESHOLD and len(mentions) >= 2 and passages:
                vecs = self._vectors(passages)
                sv = self.embedder.encode([positive])[0]
                for p, vec in zip(passages, vecs, strict=True):
                    text = p.text.casefold()
                    named = {m for m in mentions if m in text}
                    if len(named) >= 2 and float(vec @ sv) > support:
                        support, how, cited = float(vec @ sv), "passage", [p.id]
        supported = support > TF_THRESHOLD
        timings["scoring"] = time.perf_counter() - t
        return Outcome(
            predicted="True" if supported != negated else "False",
            decided_by="rule",
            evidence_ids=[i.id for i in retrieval.bundle],
            cited=cited if supported else [],
            linked=list(mention_of),
            option_scores={"rule": {"support": round(support, 4), "negated": float(negated)}},
            explanation=f"support {support:.2f} ({how}){'; the statement is negated' if negated else ''}",
            evidence_tokens=retrieval.bundle.tokens,
            timings_ms={k: round(v * 1000, 1) for k, v in timings.items()},
        )


def _fact_id(rel: Relation) -> str:
    return fact_citation_id(rel.subject, f"NOT_{rel.type}" if rel.negated else rel.type, rel.object)


def _first(options: dict[str, str], word: str) -> str | None:
    return word if word in options else next(iter(options), None)
