"""Schemathesis hooks (``SCHEMATHESIS_HOOKS=tests.support.schemathesis_hooks``) for multipart uploads: what a
DICOM is, and which negative cases a form cannot express. Every binary part of the API is a study declared
``application/dicom``; schemathesis fills a binary part by its format, so the format's strategy given here makes
its schema-valid requests carry real DICOM studies (pydicom's own sample CT and MR), not random bytes that no DICOM
reader accepts.

(Not ``schemathesis.openapi.media_type("application/dicom", ...)``: with a strategy registered for a part's
media type, schemathesis 4.32's coverage phase sends the other required parts empty, whatever their schema.)"""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import strategies as st
from pydicom.data import get_testdata_file

SAMPLES = tuple(Path(str(get_testdata_file(name))).read_bytes() for name in ("CT_small.dcm", "MR_small.dcm"))

schemathesis.openapi.format("binary", st.sampled_from(SAMPLES))


@schemathesis.hook
def filter_case(ctx: schemathesis.HookContext, case: schemathesis.Case) -> bool:
    """Drop a negative multipart case whose violation is a text part sent as another JSON type: on the wire a
    part is text whatever its type (``-230`` and ``"-230"`` are the same bytes), so no server can refuse it.
    Schemathesis 4.32 already skips that mutation for urlencoded forms and query strings, not for multipart."""
    if case.media_type != "multipart/form-data" or not isinstance(case.body, dict):
        return True
    body = case.operation.get_body_for_media_type("multipart/form-data")
    properties = body.form_properties if body is not None else {}
    return not any(
        properties.get(name, {}).get("type") == "string" and properties[name].get("format") != "binary"
        and not isinstance(value, str)
        for name, value in case.body.items()
    )  # fmt: skip
