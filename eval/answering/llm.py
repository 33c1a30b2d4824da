"""Answering with an LLM in process: ``closed-book`` (the model alone), ``rag`` (with the passages of the
retriever's bundle) or ``kg-rag`` (with the whole bundle: graph facts, paths and passages)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eval.answering.choice import parse_choice
from eval.answering.outcome import Outcome, elapsed_ms
from eval.datasets import Question
from eval.prompts import answer_schema, question_messages
from kg.llm import LLMError
from kg.retrieval.evidence import EvidenceItem

if TYPE_CHECKING:
    from kg.embedders import TextEmbedder
    from kg.retrieval.retriever import Retriever
    from service.qa.llm import LLMAnswerer

__all__ = ["EvalLLM", "LLMAnswering", "LLMReply"]


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
            out.timings_ms = elapsed_ms(timings, started)
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
        out.timings_ms = elapsed_ms(timings, started)
        return out


def _cited_in(text: str | None, ids: Sequence[str]) -> list[str]:
    if not text:
        return []
    return [i for i in ids if i in text]
