"""A display preview of a de-identified image: its pixels (already windowed to [0, 1] by
:func:`multimodal.dicom.read_dicom`) as a PNG no larger than ``max_side`` pixels a side. Only the
pixels travel: no DICOM header, so nothing of the de-identified metadata leaks through it."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from kg.errors import InvalidInput
from multimodal.dicom import DicomImage

__all__ = ["preview_png"]


def preview_png(image: DicomImage, max_side: int = 512) -> bytes:
    if max_side < 16:
        raise InvalidInput("max_side must be at least 16 pixels")
    pixels = np.nan_to_num(np.asarray(image.pixels, dtype=np.float32), nan=0.0)
    grey = np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
    picture = Image.fromarray(grey, mode="RGB" if grey.ndim == 3 else "L")
    picture.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=False)
    return out.getvalue()
