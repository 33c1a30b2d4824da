"""Which studies may stand as priors for one another: the same kind of imaging of the same region. DICOM
states both loosely (CR vs DX is the detector, not the study; sites spell body parts their own way),
so both are reduced to one canonical value before they are compared; an unknown value rules nothing out.
"""

from __future__ import annotations

import re

__all__ = ["canonical_modality", "canonical_region", "comparable"]

# modalities that are one kind of study for the reader
_MODALITY = {"CR": "XR", "DX": "XR", "RG": "XR"}

# region synonyms -> the DICOM defined term (keys compared without spaces, hyphens or underscores)
_REGION = {
    "THORAX": "CHEST",
    "LUNG": "CHEST",
    "LUNGS": "CHEST",
    "TORAX": "CHEST",
    "ABD": "ABDOMEN",
    "BRAIN": "HEAD",
    "CERVICALSPINE": "CSPINE",
    "THORACICSPINE": "TSPINE",
    "LUMBARSPINE": "LSPINE",
    "SACRUM": "SSPINE",
    "ABDPELVIS": "ABDOMENPELVIS",
    "CHESTABDOMENPELVIS": "CHESTABDPELVIS",
    "CAP": "CHESTABDPELVIS",
}
_SEPARATORS = re.compile(r"[\s\-_/]+")


def canonical_modality(value: str | None) -> str | None:
    """``value`` in capitals, CR and DX (and RG) as one radiograph kind "XR"; None when unstated."""
    value = (value or "").strip().upper()
    return _MODALITY.get(value, value) or None


def canonical_region(value: str | None) -> str | None:
    """``value`` in capitals without separators, a known synonym as its DICOM defined term; None when
    unstated."""
    key = _SEPARATORS.sub("", (value or "").upper())
    return _REGION.get(key, key) or None


def comparable(
    modality: str | None, body_part: str | None, other_modality: str | None, other_body_part: str | None
) -> bool:
    """Whether a study of ``modality``/``body_part`` may stand as a prior for one of the others (the
    relation is symmetric): the same canonical modality and region where both sides state one."""

    def same(a: str | None, b: str | None) -> bool:
        return a is None or b is None or a == b

    return same(canonical_modality(modality), canonical_modality(other_modality)) and same(
        canonical_region(body_part), canonical_region(other_body_part)
    )
