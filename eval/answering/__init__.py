"""How a benchmark question gets answered, one answerer per mode, each returning an :class:`Outcome`:
``closed-book``, ``rag`` and ``kg-rag`` through an LLM (:mod:`.llm`, or :mod:`.remote` through a medkg
server), ``offline`` from evidence support alone (:mod:`.offline`); :mod:`.choice` reads a reply."""

from eval.answering.choice import parse_choice
from eval.answering.llm import EvalLLM, LLMAnswering, LLMReply
from eval.answering.offline import MARGIN, TF_THRESHOLD, WEAK_SUPPORT, WEIGHTS, OfflineAnswering, cue_counts
from eval.answering.outcome import MODES, Answerer, EvalError, Outcome
from eval.answering.remote import RemoteAnswering

__all__ = [
    "MARGIN",
    "MODES",
    "TF_THRESHOLD",
    "WEAK_SUPPORT",
    "WEIGHTS",
    "Answerer",
    "EvalError",
    "EvalLLM",
    "LLMAnswering",
    "LLMReply",
    "OfflineAnswering",
    "Outcome",
    "RemoteAnswering",
    "cue_counts",
    "parse_choice",
]
