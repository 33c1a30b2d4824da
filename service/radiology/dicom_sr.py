"""A drafted radiology report as a DICOM Structured Report (Enhanced SR, built and checked by ``highdicom``), in
the study it was drafted from, so that a PACS files it with the images: ``medkg report FILE --sr OUT.dcm``
writes it, ``--store URL`` sends it to a DICOMweb server (STOW-RS).

Laid out as a Basic Diagnostic Imaging Report (TID 2000): History (the indication), Current Procedure
Descriptions (the technique), Findings, Impressions, each a text item keeping its citations, and a comment
naming medkg, its mode and the cited evidence. It is a draft: CompletionFlag PARTIAL, VerificationFlag
UNVERIFIED. The SR takes the patient and study of the source file (highdicom copies them from the evidence):
it goes back to where the file came from, and medkg keeps none of it (the image it read was de-identified).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import highdicom
from highdicom.sr import CodedConcept, ContainerContentItem, EnhancedSR, RelationshipTypeValues, TextContentItem

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

    from service.radiology.generator import GeneratedReport

__all__ = ["SR_SERIES_NUMBER", "as_structured_report"]

SR_SERIES_NUMBER = 9901  # a series number out of the way of the modality's own
REPORT = CodedConcept("18748-4", "LN", "Diagnostic Imaging Report")
# TID 2000 sections (DCM codes): the section's container, and the concept of its text items
SECTIONS = (
    ("indication", CodedConcept("121060", "DCM", "History"), CodedConcept("121060", "DCM", "History")),
    (
        "technique",
        CodedConcept("121064", "DCM", "Current Procedure Descriptions"),
        CodedConcept("121065", "DCM", "Procedure Description"),
    ),
    ("findings", CodedConcept("121070", "DCM", "Findings"), CodedConcept("121071", "DCM", "Finding")),
    ("impression", CodedConcept("121072", "DCM", "Impressions"), CodedConcept("121073", "DCM", "Impression")),
)
COMMENT = CodedConcept("121106", "DCM", "Comment")


def _comment(report: GeneratedReport) -> str:
    label = "insufficient evidence" if report.insufficient_evidence else f"confidence {report.confidence:.2f}"
    text = f"Preliminary draft by medkg ({report.mode}, {label}); for a radiologist to review."
    cited = "; ".join(f"[{c.id}] {c.title or c.text[:100]}" for c in report.citations)
    return text + (f" Cited: {cited}" if cited else "")


def as_structured_report(report: GeneratedReport, source: Dataset) -> EnhancedSR:
    """The draft as an Enhanced SR in the study of ``source`` (the original file's data set; its pixels need
    not be read), a new series of its own."""
    root = ContainerContentItem(name=REPORT, template_id="2000")
    children = []
    for field, section, concept in SECTIONS:
        text = getattr(report, field).strip()
        if not text:
            continue
        container = ContainerContentItem(name=section, relationship_type=RelationshipTypeValues.CONTAINS)
        container.ContentSequence = [TextContentItem(concept, text, RelationshipTypeValues.CONTAINS)]
        children.append(container)
    children.append(TextContentItem(COMMENT, _comment(report), RelationshipTypeValues.CONTAINS))
    root.ContentSequence = children
    return EnhancedSR(
        evidence=[source],
        content=root,
        series_instance_uid=highdicom.UID(),
        series_number=SR_SERIES_NUMBER,
        sop_instance_uid=highdicom.UID(),
        instance_number=1,
        manufacturer="medkg",
        is_complete=False,
        is_final=False,
        is_verified=False,
        series_description="medkg draft report",
    )
