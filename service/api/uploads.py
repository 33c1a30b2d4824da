"""Reading an uploaded study: a multipart file part that must be DICOM, read and de-identified in
memory (nothing of it is stored; only its pseudonymised metadata and pixels reach the answer)."""

from __future__ import annotations

import warnings

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from multimodal.dicom import DicomError, DicomImage, read_dicom
from service.container import Container

__all__ = ["read_upload"]

DICOM_TYPES = {"application/dicom", "application/octet-stream", ""}


async def read_upload(c: Container, upload: UploadFile) -> DicomImage:
    """415 for a part that is not DICOM, 422 for a DICOM that cannot be used (the reason named)."""
    content_type = (upload.content_type or "").split(";", 1)[0].strip().lower()
    if content_type not in DICOM_TYPES:
        raise HTTPException(415, f"the file must be DICOM (application/dicom), not {content_type!r}")
    data = await upload.read()
    try:  # parsing, de-identifying and decoding (JPEG 2000, many frames) in a worker: the loop stays free
        return await run_in_threadpool(_read, c, data)
    except DicomError as exc:
        if exc.kind in ("not_dicom", "empty"):
            raise HTTPException(415, f"the file is not DICOM: {exc.reason}") from None
        raise HTTPException(422, f"unusable DICOM ({exc.kind}): {exc.reason}") from None


def _read(c: Container, data: bytes) -> DicomImage:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pydicom's value warnings: noise in a server log
        return read_dicom(data, c.pseudonymizer)
