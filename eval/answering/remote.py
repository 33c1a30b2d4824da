"""``kg-rag`` answers from a running medkg server (``POST /v1/qa`` with the server's own LLM)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from eval.answering.choice import parse_choice
from eval.answering.outcome import EvalError, Outcome, elapsed_ms
from eval.datasets import Question
from eval.prompts import remote_question

if TYPE_CHECKING:
    import httpx

__all__ = ["RemoteAnswering"]


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
            return Outcome(decided_by="remote", error=f"HTTP error: {exc}", timings_ms=elapsed_ms({}, started))
        detail = _detail(r)
        if r.status_code in (401, 403, 404) or (r.status_code == 422 and "MEDKG_LLM" in detail):
            raise EvalError(f"the medkg server at {self.client.base_url} answered HTTP {r.status_code}: {detail}")
        if r.status_code != 200:
            return Outcome(
                decided_by="remote", error=f"HTTP {r.status_code}: {detail}", timings_ms=elapsed_ms({}, started)
            )
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
            timings_ms={**server, **elapsed_ms({}, started)},
        )


def _detail(r: httpx.Response) -> str:
    try:
        data = r.json()
    except ValueError:
        return r.text[:300]
    detail = data.get("detail", data) if isinstance(data, dict) else data
    return str(detail)[:300]
