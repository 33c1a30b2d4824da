"""A drafted report as a DICOM Structured Report (highdicom) in the study it was drafted from: written to a
file (`medkg report FILE --sr OUT`) and stored back on a real PACS (`--store`: STOW-RS to Debian's Orthanc
with its DICOMweb plugin), where a search of the study finds it beside the images."""

from __future__ import annotations

import json
from pathlib import Path

import pydicom
import pytest

from kg.settings import load_settings
from service.container import Container
from tests.support.cli import run
from tests.support.orthanc import Orthanc
from tests.support.studies import load_studies, study_file

USER, PASSWORD = "medkg", "pacs-secret"


def _texts(items: pydicom.Sequence) -> dict[str, str]:
    """Each text item's concept name and value, at any depth of the content tree."""
    found: dict[str, str] = {}
    for item in items:
        if "TextValue" in item:
            found[item.ConceptNameCodeSequence[0].CodeMeaning] = str(item.TextValue)
        if "ContentSequence" in item:
            found |= _texts(item.ContentSequence)
    return found


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sr")
    with Container(load_settings(data_dir=tmp / "data", ladybug_buffer_pool_mb=256)) as c:
        load_studies(c, tmp / "studies")
    return tmp / "data"


def test_a_draft_as_a_structured_report_in_its_study(data_dir: Path, tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(data_dir), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", "MEDKG_LLM_BASE_URL": ""}
    study = study_file("RG1_J2KI.dcm")
    original = pydicom.dcmread(study, stop_before_pixels=True)
    out = tmp_path / "draft-sr.dcm"
    r = run(["report", str(study), "--indication", "Chest pain.", "--sr", str(out), "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    draft = json.loads(r.stdout)
    sr = pydicom.dcmread(out)
    assert (sr.Modality, sr.CompletionFlag, sr.VerificationFlag) == ("SR", "PARTIAL", "UNVERIFIED")
    assert sr.StudyInstanceUID == original.StudyInstanceUID != draft["study"]["study_id"]  # the file's study
    assert sr.SeriesInstanceUID != original.SeriesInstanceUID and sr.Manufacturer == "medkg"
    assert sr.ConceptNameCodeSequence[0].CodeValue == "18748-4"
    texts = _texts(sr.ContentSequence)
    assert texts["Impression"] == draft["impression"] and "[IUXR:" in texts["Impression"]
    assert texts["History"] == "Chest pain." and texts["Finding"] == draft["findings"]
    assert texts["Comment"].startswith("Preliminary draft by medkg (extractive")
    evidence = sr.CurrentRequestedProcedureEvidenceSequence[0].ReferencedSeriesSequence[0]
    assert evidence.ReferencedSOPSequence[0].ReferencedSOPInstanceUID == original.SOPInstanceUID
    # only for a file: an indexed study is de-identified, it has no study of the user's to go into
    refused = run(["report", "--image-id", "IMG:2.25.1", "--sr", str(out)], env, tmp_path)
    assert refused.returncode == 2 and "give the file" in refused.stderr and "Traceback" not in refused.stderr


def test_a_structured_report_stored_back_on_the_pacs(data_dir: Path, tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(data_dir), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", "MEDKG_LLM_BASE_URL": "",
           "MEDKG_DICOMWEB_USER": USER, "MEDKG_DICOMWEB_PASSWORD": PASSWORD}  # fmt: skip
    study = study_file("RG1_J2KI.dcm")
    original = pydicom.dcmread(study, stop_before_pixels=True)
    with Orthanc(tmp_path / "orthanc", users={USER: PASSWORD}) as orthanc:
        orthanc.upload(study)
        r = run(["report", str(study), "--indication", "Chest pain.", "--store", orthanc.dicomweb, "--json"], env,
                tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        assert f"structured report stored on {orthanc.dicomweb}" in r.stderr.replace("\n", "")
        found = orthanc.http.get(
            "/dicom-web/instances", params={"StudyInstanceUID": original.StudyInstanceUID, "Modality": "SR"}
        ).json()
        (stored,) = found
        sop = stored["00080018"]["Value"][0]
        series = stored["0020000E"]["Value"][0]
        raw = orthanc.http.get(f"/dicom-web/studies/{original.StudyInstanceUID}/series/{series}/instances/{sop}",
                               headers={"Accept": 'multipart/related; type="application/dicom"'})  # fmt: skip
        assert raw.status_code == 200
        assert json.loads(r.stdout)["impression"].encode("utf-8")[:40] in raw.content
        wrong = run(["report", str(study), "--store", orthanc.dicomweb, "--password", "wrong"], env, tmp_path)
        assert wrong.returncode == 2 and "HTTP 401" in wrong.stderr and "--password" in wrong.stderr, wrong.stderr
        # a study on the PACS by its UID: retrieved, de-identified, drafted, and its SR stored back beside it
        other = pydicom.dcmread(study_file("RG3_J2KI.dcm"), stop_before_pixels=True)
        orthanc.upload(study_file("RG3_J2KI.dcm"))
        pacs = ["--pacs", orthanc.dicomweb, "--study", other.StudyInstanceUID]
        r = run(["report", *pacs, "--indication", "Leg pain.", "--store", orthanc.dicomweb, "--json"], env, tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        drafted = json.loads(r.stdout)
        with Container(load_settings(data_dir=data_dir, ladybug_buffer_pool_mb=64)) as c:
            assert drafted["study"]["study_id"] == "STUDY:" + c.pseudonymizer.uid(other.StudyInstanceUID)
        assert other.StudyInstanceUID not in r.stdout and drafted["technique"].startswith("Computed Radiography")
        srs = orthanc.http.get(
            "/dicom-web/instances", params={"StudyInstanceUID": other.StudyInstanceUID, "Modality": "SR"}
        ).json()
        assert len(srs) == 1
        missing = run(["report", "--pacs", orthanc.dicomweb, "--study", "1.2.3.4"], env, tmp_path)
        assert missing.returncode == 2 and f"no study UID 1.2.3.4 on {orthanc.dicomweb}" in missing.stderr
        alone = run(["report", "--pacs", orthanc.dicomweb], env, tmp_path)
        assert alone.returncode == 2 and "--pacs and --study go together" in alone.stderr
