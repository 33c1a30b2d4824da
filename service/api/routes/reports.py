"""Radiology report drafts over HTTP: ``POST /v1/reports`` with a DICOM upload (multipart: ``file``,
``indication``, ``findings``, ``k``, ``mode``) or JSON ``{image_id, indication, findings, k, mode}`` for an
indexed study. ``findings``: the study's own findings when the reader has them (they choose the priors and
weigh their impressions: the draft's impression is then an impression for these findings)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from service.api.deps import body_schema, form_fields, get_container, multipart_body
from service.api.uploads import read_upload
from service.container import Container
from service.radiology.fhir import FHIR_JSON, as_diagnostic_report
from service.radiology.generator import GeneratedReport, UnknownImage
from service.schema_types import whole_number

router = APIRouter(prefix="/v1", tags=["reports"])
Deps = Annotated[Container, Depends(get_container)]


class ReportRequest(BaseModel):
    """The fields of a request; with an upload (multipart), the study is its file part."""

    indication: str = Field(default="", max_length=2000, examples=["Chest pain and shortness of breath."])
    findings: str = Field(
        default="",
        max_length=10_000,
        description="The study's own findings, when the reader has them: they choose the priors and the impression.",
        examples=["The heart is enlarged. Small left pleural effusion."],
    )
    k: whole_number(1, 20) = Field(default=5, description="Prior reports to draw on.")  # type: ignore[valid-type]
    mode: Literal["auto", "extractive", "llm"] = "auto"


class StudyReportRequest(ReportRequest):
    """The JSON body: the study is an indexed one, named by its id (an upload comes as multipart)."""

    image_id: str = Field(min_length=1, max_length=200, description="An indexed study (IMG:...).")


@router.post(
    "/reports",
    response_model=GeneratedReport,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": body_schema(StudyReportRequest)},
                "multipart/form-data": multipart_body(ReportRequest, "The study (DICOM)", file_required=True),
            },
        }
    },
    responses={
        200: {
            "description": "The draft; with Accept: application/fhir+json, as a FHIR R4 DiagnosticReport.",
            "content": {FHIR_JSON: {"schema": {"type": "object", "required": ["resourceType", "status", "code"]}}},
        },
        404: {"description": "Unknown image id."},
        413: {"description": "Upload too large (MEDKG_MAX_UPLOAD_BYTES)."},
        415: {"description": "Not JSON / multipart, or the file is not DICOM."},
        422: {"description": "Invalid fields, or a DICOM without usable pixels."},
        409: {"description": 'mode "llm" on a server without an LLM (MEDKG_LLM_BASE_URL, MEDKG_LLM_MODEL).'},
        502: {"description": "The LLM failed."},
        504: {"description": "The LLM timed out."},
    },
)
async def reports(c: Deps, request: Request) -> Any:
    """A draft report (technique, findings, impression, clinical context) from the most similar prior
    studies and reports and knowledge-graph facts about the indication; every sentence cited. With
    ``Accept: application/fhir+json``, a FHIR R4 DiagnosticReport (preliminary; the impression as its
    conclusion, the study and the cited prior reports as references)."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    image, image_id = None, None
    try:
        if content_type == "multipart/form-data":
            form = await request.form()
            upload = form.get("file")
            fields = form_fields(ReportRequest, {k: v for k, v in form.items() if isinstance(v, str)})
            body = ReportRequest.model_validate(fields, strict=True)
            if not isinstance(upload, UploadFile):
                raise HTTPException(422, "attach the study as the multipart file part 'file'")
            image = await read_upload(c, upload)
        elif content_type in ("application/json", ""):
            body = StudyReportRequest.model_validate_json(await request.body(), strict=True)
            image_id = body.image_id
        else:
            raise HTTPException(415, f"send application/json or multipart/form-data, not {content_type!r}")
    except ValidationError as exc:
        raise HTTPException(422, [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in exc.errors()]) from None
    try:
        report = await run_in_threadpool(  # the generator (image index, encoder) is built in the worker too
            lambda: c.report_generator.generate(
                body.indication, image, image_id, body.findings or None, body.k, body.mode
            )
        )
    except UnknownImage:  # only the image asked for: any other KeyError is a fault (500), not a 404
        raise HTTPException(404, f"no indexed image {image_id!r}") from None
    if FHIR_JSON in request.headers.get("accept", ""):
        resource = as_diagnostic_report(report)
        return Response(resource.model_dump_json(exclude_none=True), media_type=f"{FHIR_JSON}; fhirVersion=4.0")
    return report
