"""Question answering over HTTP: ``POST /v1/qa`` answers with citations, as JSON or, with ``"stream": true``
(or ``Accept: text/event-stream``), as server-sent events; a DICOM study may be attached (multipart).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from multimodal.dicom import DicomImage
from service.api.deps import body_schema, form_fields, get_container, multipart_body
from service.api.uploads import read_upload
from service.container import Container
from service.qa.engine import QAOptions, QAResponse
from service.qa.sessions import SESSION_ID_RE

router = APIRouter(prefix="/v1", tags=["qa"])
Deps = Annotated[Container, Depends(get_container)]


class QARequest(BaseModel):
    question: str = Field(
        min_length=1,
        max_length=4000,
        # not white space only: said in the schema, checked by the engine ("the question is empty"); Python's
        # regex and the schema's agree on this class
        json_schema_extra={"pattern": r"[^\s\x1c-\x1f]"},
        examples=["Which phenotypes are characteristic of Marfan syndrome?"],
    )
    session_id: str | None = Field(
        default=None, max_length=64, pattern=SESSION_ID_RE.pattern, description="From POST /v1/sessions."
    )
    options: QAOptions = Field(default_factory=QAOptions)
    stream: bool = Field(default=False, description="Server-sent events: retrieval, delta (answer text), answer.")
    image_id: str | None = Field(default=None, max_length=200, description="An indexed study (IMG:...) to compare.")


def _sse(event: str, data: Any) -> str:
    payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _invalid(exc: ValidationError) -> HTTPException:
    return HTTPException(422, [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in exc.errors()])


async def _read_request(c: Container, request: Request) -> tuple[QARequest, DicomImage | None]:
    """A JSON ``QARequest``, or ``multipart/form-data`` with its fields (``options`` as JSON text) and the
    DICOM study in the file part ``file``, read and de-identified."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type == "multipart/form-data":
        form = await request.form()
        fields = form_fields(QARequest, {k: v for k, v in form.items() if isinstance(v, str)})
        try:
            body = QARequest.model_validate(fields, strict=True)
        except ValidationError as exc:
            raise _invalid(exc) from None
        upload = form.get("file")
        image = await read_upload(c, upload) if isinstance(upload, UploadFile) else None
        return body, image
    if content_type not in ("application/json", ""):
        raise HTTPException(415, f"send application/json or multipart/form-data, not {content_type!r}")
    raw = await request.body()
    try:
        return QARequest.model_validate_json(raw, strict=True), None  # 0 is not false: the schema says boolean
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise HTTPException(422, f"request body is not valid JSON: {exc.errors()[0]['msg']}") from None
        raise _invalid(exc) from None


@router.post(
    "/qa",
    response_model=QAResponse,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": body_schema(QARequest)},
                "multipart/form-data": multipart_body(QARequest, "A DICOM study", file_required=False),
            },
        }
    },
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "JSON, or events when streaming."},
        404: {"description": "Unknown or expired session, or unknown image id."},
        413: {"description": "Body or upload too large."},
        415: {"description": "Not JSON / multipart, or the file is not DICOM."},
        409: {"description": 'mode "llm" on a server without an LLM (MEDKG_LLM_BASE_URL, MEDKG_LLM_MODEL).'},
        502: {"description": "The LLM failed."},
        504: {"description": "The LLM timed out."},
    },
)
async def qa(c: Deps, request: Request) -> Any:
    """Answer a clinical question from knowledge-graph facts and paths plus literature passages (and
    similar prior studies when a DICOM is attached or ``image_id`` is given); every statement cites
    an evidence id (``KG:...``, ``PMID:...#s..``, ``IMG:...``)."""
    body, image = await _read_request(c, request)
    wants_events = body.stream or "text/event-stream" in request.headers.get("accept", "")
    args = (body.question, body.session_id, body.options, image, body.image_id)
    try:
        # c.qa is built on first use (linker, lexicon, indexes: seconds): in a worker, never on the loop
        if not wants_events:
            answer = await run_in_threadpool(lambda: c.qa.ask(*args))
            request.app.state.metrics.observe_answer(answer)
            return answer
        events = await run_in_threadpool(lambda: c.qa.ask_stream(*args))
        first = await run_in_threadpool(next, events)  # retrieval runs here: bad input still gets its status
    except KeyError as exc:
        if body.image_id and exc.args and exc.args[0] == body.image_id:
            raise HTTPException(404, f"no indexed image {body.image_id!r}") from None
        raise

    def stream() -> Iterator[str]:
        yield _sse(*first)
        for name, data in events:
            if name == "answer":
                request.app.state.metrics.observe_answer(data)
            yield _sse(name, {"text": data} if name == "delta" else data)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
