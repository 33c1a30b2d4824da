"""pydicom's sample studies (from the pydicom-data wheel and pydicom itself) with a radiology report
written for each, plus three reports without images: the image tests' small corpus."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.radiology_reports import RadiologyReport, ReportLoader
from kg.model import Entity

if TYPE_CHECKING:
    from service.container import Container

DATA = Path(importlib.util.find_spec("data_store").submodule_search_locations[0]) / "data"  # type: ignore[union-attr,index]


STUDIES = {  # file -> (indication, findings, impression)
    "RG1_J2KI.dcm": (
        "Chest pain.",
        "The heart is normal in size. The lungs are clear. No pleural effusion or pneumothorax.",
        "No acute cardiopulmonary abnormality.",
    ),
    "RG3_J2KI.dcm": (
        "Leg pain after a fall.",
        "Well-defined lucent lesion of the distal tibia with a sclerotic rim. No fracture.",
        "Non-ossifying fibroma of the distal tibia.",
    ),
    "CT_small.dcm": (
        "Headache.",
        "No intracranial hemorrhage. The ventricles are normal.",
        "No acute intracranial process.",
    ),
    "MR_small.dcm": ("Seizure.", "No mass lesion. No abnormal enhancement.", "Normal MRI of the brain."),
    "US1_UNCR.dcm": (
        "Abdominal pain.",
        "The liver is normal in echotexture. No gallstones.",
        "Normal abdominal ultrasound.",
    ),
}


EXTRA_REPORTS = [
    ("Shortness of breath.", "Mild cardiomegaly. The lungs are clear. No pleural effusion.", "Mild cardiomegaly."),
    ("Chest pain and cough.", "The heart is normal in size. The lungs are clear.", "No acute cardiopulmonary disease."),
    ("Fever and cough.", "Right lower lobe airspace opacity. No pneumothorax.", "Right lower lobe pneumonia."),
]


def study_file(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        import pydicom.data

        path = Path(pydicom.data.get_testdata_file(name))  # CT_small / MR_small ship with pydicom itself
    return path


def study_reports() -> list[RadiologyReport]:
    out = []
    for uid, (name, (indication, findings, impression)) in enumerate(STUDIES.items(), 1):
        out.append(
            RadiologyReport(
                uid=str(uid), indication=indication, findings=findings, impression=impression,
                mesh=["normal"], images=[(f"{name}.png", "Frontal")],
            )
        )  # fmt: skip
    for uid, (indication, findings, impression) in enumerate(EXTRA_REPORTS, 100):
        out.append(RadiologyReport(uid=str(uid), indication=indication, findings=findings, impression=impression))
    return out


RADIOLOGY_ONTOLOGY = [
    Entity(id="HP:0001640", name="Cardiomegaly", category="Phenotype", synonyms=["Enlarged heart"]),
    Entity(id="HP:0002202", name="Pleural effusion", category="Phenotype"),
    Entity(id="HP:0002107", name="Pneumothorax", category="Phenotype"),
    Entity(id="HP:0100750", name="Atelectasis", category="Phenotype", synonyms=["Pulmonary atelectasis"]),
    Entity(id="UBERON:0000947", name="aorta", category="Anatomy"),
    Entity(id="UBERON:0001515", name="thoracic aorta", category="Anatomy"),
]


def load_studies(container: Container, folder: Path) -> None:
    """The studies copied into ``folder`` and loaded with their reports (reports first: each study is paired
    with its own, IUXR:1...), as the report drafting tests need them."""
    from multimodal.load import load_images

    folder.mkdir(parents=True, exist_ok=True)
    for name in STUDIES:
        shutil.copy(study_file(name), folder / name)
    c = container
    ReportLoader(c.graph, c.text_index, c.nlp, c.linker, progress=False, reports=c.reports).load(study_reports())
    pairing = {name.removesuffix(".dcm"): f"IUXR:{i}" for i, name in enumerate(STUDIES, 1)}
    loaded = load_images(c.graph, c.image_index, c.pseudonymizer, [folder], pairing.get, progress=False)
    assert loaded.images == len(STUDIES), loaded
