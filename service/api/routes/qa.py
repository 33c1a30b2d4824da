"""Question answering over HTTP: ``POST /v1/qa`` answers with citations, as JSON or, with
``"stream": true`` (or ``Accept: text/event-stream``), as server-sent events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from service.api.deps import get_container
from service.container import Container
from service.qa.engine import QAOptions, QAResponse

router = APIRouter(prefix="/v1", tags=["qa"])
Deps = Annotated[Container, Depends(get_container)]


class QARequest(BaseModel):
    question: str = Field(
        min_length=1, max_length=4000, examples=["Which phenotypes are characteristic of Marfan syndrome?"]
    )
    session_id: str | None = Field(default=None, max_length=64, description="From POST /v1/sessions.")
    options: QAOptions = Field(default_factory=QAOptions)
    stream: bool = Field(default=False, description="Server-sent events: retrieval, delta (answer text), answer.")


def _sse(event: str, data: Any) -> str:
    payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


@router.post(
    "/qa",
    response_model=QAResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "JSON, or events when streaming."},
        404: {"description": "Unknown or expired session."},
        502: {"description": "The LLM failed."},
        504: {"description": "The LLM timed out."},
    },
)
def qa(c: Deps, body: QARequest, request: Request) -> Any:
    """Answer a clinical question from knowledge-graph facts and paths plus literature passages;
    every statement cites an evidence id (``KG:...``, ``PMID:...#s..``)."""
    wants_events = body.stream or "text/event-stream" in request.headers.get("accept", "")
    if not wants_events:
        return c.qa.ask(body.question, body.session_id, body.options)
    events = c.qa.ask_stream(body.question, body.session_id, body.options)
    first = next(events)  # retrieval runs here, so bad input still gets its status code

    def stream() -> Iterator[str]:
        yield _sse(*first)
        for name, data in events:
            yield _sse(name, {"text": data} if name == "delta" else data)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
