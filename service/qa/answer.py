"""What an answer path returns, whichever path made it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Answer", "AnswerMode"]

AnswerMode = Literal["extractive", "llm"]


@dataclass
class Answer:
    text: str  # inline citations in [brackets]
    cited: list[str]
    confidence: float
    insufficient_evidence: bool
    mode: AnswerMode
    dropped_citations: list[str] = field(default_factory=list)
