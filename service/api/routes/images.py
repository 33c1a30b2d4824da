"""Image previews: ``POST /v1/images/preview`` turns an uploaded DICOM into a PNG of its
de-identified pixels (nothing of the upload is kept); ``GET /v1/images/{image_id}/preview`` is the
thumbnail kept for an indexed study, shown when the study is cited."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from multimodal.preview import preview_png
from service.api.deps import form_fields, get_container, multipart_body
from service.api.uploads import read_upload
from service.container import Container

router = APIRouter(prefix="/v1", tags=["images"])
Deps = Annotated[Container, Depends(get_container)]


@router.post(
    "/images/preview",
    response_class=Response,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": multipart_body(None, "A DICOM", file_required=True),
            },
        }
    },
    responses={
        200: {"content": {"image/png": {}}, "description": "The de-identified pixels as PNG."},
        413: {"description": "Upload too large (MEDKG_MAX_UPLOAD_BYTES)."},
        415: {"description": "Not multipart, or the file is not DICOM."},
        422: {"description": "A DICOM without usable pixels."},
    },
)
async def preview(
    c: Deps,
    request: Request,
    max_side: Annotated[int, Query(ge=16, le=2048, description="Longest side of the PNG, in pixels.")] = 512,
) -> Response:
    """The uploaded study's displayed frame (windowed, MONOCHROME1 inverted, middle frame of a
    multi-frame object), scaled to fit ``max_side``; the DICOM header is not part of the PNG."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "multipart/form-data":
        raise HTTPException(415, f"send multipart/form-data with the DICOM as the part 'file', not {content_type!r}")
    form = await request.form()
    form_fields(None, {k: v for k, v in form.items() if isinstance(v, str)})  # 422 for a part other than 'file'
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise HTTPException(422, "attach the study as the multipart file part 'file'")
    image = await read_upload(c, upload)
    png = await run_in_threadpool(preview_png, image, max_side)
    return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})


@router.get(
    "/images/{image_id}/preview",
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}}, "description": "The thumbnail (at most 256 pixels a side)."},
        404: {"description": "Unknown image, or no thumbnail kept for it."},
    },
)
def indexed_preview(c: Deps, image_id: str) -> Response:
    """The thumbnail of an indexed study (``image_id`` with or without its ``IMG:`` prefix)."""
    image_id = image_id if image_id.startswith("IMG:") else f"IMG:{image_id}"
    png = c.image_index.thumbnail(image_id)
    if png is None:
        if image_id not in c.image_index:
            raise HTTPException(404, f"no indexed image {image_id!r}")
        if not c.image_index.thumbnails:
            why = "MEDKG_IMAGE_THUMBNAILS=false"
        elif c.image_index.get([image_id])[image_id].burned_in_annotation:
            why = "burned-in annotation declared"
        else:
            why = "indexed while thumbnails were off: load it again to make one"
        raise HTTPException(404, f"no thumbnail is kept for {image_id!r} ({why})")
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})
