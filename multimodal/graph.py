"""Images in the knowledge graph: an image, its imaging study, its modality and body part as entities,
joined by relations (and an image to its report Document). Every id is a pseudonym (``IMG:2.25...``,
``STUDY:2.25...``) or a code (``DCM:CT``, ``BODYPART:CHEST``): nothing here identifies a patient.
"""

from __future__ import annotations

import re

from kg.model import DEPICTS, HAS_IMAGE, HAS_MODALITY, HAS_REPORT, IMAGE, IMAGING_STUDY, Entity, Relation
from multimodal.dicom import DicomImage

__all__ = [
    "IMAGE",
    "IMAGING_STUDY",
    "MODALITY",
    "ANATOMY",
    "HAS_IMAGE",
    "HAS_MODALITY",
    "DEPICTS",
    "HAS_REPORT",
    "MODALITY_NAMES",
    "image_entities",
    "report_relation",
]

MODALITY, ANATOMY = "Modality", "Anatomy"
SOURCE_DICOM, SOURCE_REPORTS = "dicom", "reports"

# DICOM PS3.3 C.7.3.1.1.1 Modality defined terms (the common ones).
MODALITY_NAMES: dict[str, str] = {
    "CR": "Computed Radiography",
    "DX": "Digital Radiography",
    "CT": "Computed Tomography",
    "MR": "Magnetic Resonance",
    "US": "Ultrasound",
    "NM": "Nuclear Medicine",
    "PT": "Positron Emission Tomography (PET)",
    "XA": "X-Ray Angiography",
    "RF": "Radio Fluoroscopy",
    "MG": "Mammography",
    "IO": "Intra-oral Radiography",
    "PX": "Panoramic X-Ray",
    "OP": "Ophthalmic Photography",
    "OPT": "Ophthalmic Tomography",
    "XC": "External-camera Photography",
    "ES": "Endoscopy",
    "SM": "Slide Microscopy",
    "IVUS": "Intravascular Ultrasound",
    "IVOCT": "Intravascular Optical Coherence Tomography",
    "BMD": "Bone Densitometry (X-Ray)",
    "SEG": "Segmentation",
    "RTIMAGE": "Radiotherapy Image",
    "RTDOSE": "Radiotherapy Dose",
    "SC": "Secondary Capture",
    "OT": "Other",
}

_CODE = re.compile(r"[^A-Z0-9]+")


def _code(text: str) -> str:
    return _CODE.sub("_", text.upper()).strip("_")


def _image_name(img: DicomImage) -> str:
    name = f"{img.modality or 'Unknown modality'}"
    if img.body_part:
        name += f" {img.body_part.lower()}"
    name += " image"
    if img.view_position:
        name += f" ({img.view_position})"
    return name


def image_entities(img: DicomImage) -> tuple[list[Entity], list[Relation]]:
    """The image, its study, its modality and (when known) its body part, and the relations
    Study HAS_IMAGE Image, Image HAS_MODALITY modality, Image DEPICTS body part."""
    modality = _code(img.modality) if img.modality else ""
    modality_name = MODALITY_NAMES.get(modality, modality or "Unknown modality")
    image = Entity(
        id=img.image_id,
        name=_image_name(img),
        category=IMAGE,
        description=img.series_description,
        sources=[SOURCE_DICOM],
    )
    study = Entity(
        id=img.study_id,
        name=img.study_description or f"{modality_name} study",
        category=IMAGING_STUDY,
        sources=[SOURCE_DICOM],
    )
    entities = [image, study]
    relations = [Relation(subject=study.id, type=HAS_IMAGE, object=image.id, source=SOURCE_DICOM)]
    if modality:
        entities.append(
            Entity(
                id=f"DCM:{modality}",
                name=modality_name,
                category=MODALITY,
                synonyms=[modality],
                sources=[SOURCE_DICOM],
            )
        )
        relations.append(Relation(subject=image.id, type=HAS_MODALITY, object=f"DCM:{modality}", source=SOURCE_DICOM))
    body_code = _code(img.body_part) if img.body_part else ""
    if body_code:
        part_id = f"BODYPART:{body_code}"
        entities.append(
            Entity(
                id=part_id,
                name=body_code.replace("_", " ").title(),
                category=ANATOMY,
                sources=[SOURCE_DICOM],
            )
        )
        relations.append(Relation(subject=image.id, type=DEPICTS, object=part_id, source=SOURCE_DICOM))
    return entities, relations


def report_relation(image_id: str, report_doc_id: str) -> Relation:
    """Image HAS_REPORT Document (the radiology report the image was paired with)."""
    return Relation(subject=image_id, type=HAS_REPORT, object=report_doc_id, source=SOURCE_REPORTS)
