"""What an answerer returns (:class:`Outcome`), what it is (:class:`Answerer`), and the modes a benchmark
question can be answered in."""

from __future__ import annotations

import time
from typing import Protocol

from pydantic import BaseModel, Field

from eval.datasets import Question

__all__ = ["MODES", "Answerer", "EvalError", "Outcome", "elapsed_ms"]

MODES = ("offline", "closed-book", "rag", "kg-rag")


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


def elapsed_ms(timings: dict[str, float], started: float) -> dict[str, float]:
    """``timings`` (seconds) in milliseconds, with the ``total`` since ``started``."""
    return {
        **{k: round(v * 1000, 1) for k, v in timings.items()},
        "total": round((time.perf_counter() - started) * 1000, 1),
    }
