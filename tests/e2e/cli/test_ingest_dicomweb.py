"""``medkg ingest dicomweb`` against a real PACS: Debian's Orthanc with its DICOMweb plugin on loopback
(tests/support/orthanc.py, basic auth on), filled with the shared DICOM samples: studies searched (QIDO-RS)
and retrieved (WADO-RS), loaded de-identified as files are, one study alone, a re-run that retrieves
nothing, and clear one-line errors."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pydicom
import pytest
from pydicom.uid import generate_uid

from multimodal.deid import Pseudonymizer
from tests.conftest import shared
from tests.support.cli import run
from tests.support.live_server import free_port
from tests.support.orthanc import Orthanc

# four studies: a CT and an MR (uncompressed), a JPEG 2000 radiograph, a JPEG lossless bone scan
FILES = (
    "pydicom_wheel/CT_small.dcm",
    "pydicom_wheel/MR_small.dcm",
    "pydicom_data/RG3_J2KI.dcm",
    "pydicom_data/JPEG-LL.dcm",
)
USER, PASSWORD = "medkg", "pacs-secret"
PHI = ("Doe^Jane", "MRN-4242", "St Example Hospital")


@dataclass
class Pacs:
    orthanc: Orthanc
    studies: dict[str, set[str]]  # original Study Instance UID -> its SOP Instance UIDs
    secrets: list[str]  # what no output and no stored file may hold


def _encoded(ds: pydicom.Dataset) -> bytes:
    buf = io.BytesIO()
    ds.save_as(buf, enforce_file_format=True)
    return buf.getvalue()


@pytest.fixture(scope="module")
def pacs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pacs]:
    paths = [shared("dicom", *name.split("/")) for name in FILES]
    studies: dict[str, set[str]] = {}
    secrets = list(PHI)
    with Orthanc(tmp_path_factory.mktemp("orthanc"), users={USER: PASSWORD}) as orthanc:
        for path in paths:
            ds = pydicom.dcmread(path)
            ds.InstitutionName = PHI[2]
            datasets = [ds]
            if path.name == "CT_small.dcm":  # a second instance of that study, of another named patient
                again = pydicom.dcmread(path)
                again.PatientName, again.PatientID = PHI[0], PHI[1]
                again.SOPInstanceUID = again.file_meta.MediaStorageSOPInstanceUID = generate_uid()
                datasets.append(again)
            for item in datasets:
                assert orthanc.upload(_encoded(item))["Status"] == "Success"
                studies.setdefault(str(item.StudyInstanceUID), set()).add(str(item.SOPInstanceUID))
                secrets += [str(item.PatientName), str(item.StudyInstanceUID), str(item.SeriesInstanceUID)]
                secrets.append(str(item.SOPInstanceUID))
        yield Pacs(orthanc, studies, sorted({s for s in secrets if len(s) >= 8}))


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "MEDKG_DATA_DIR": str(tmp_path / "data"),
        "MEDKG_LADYBUG_BUFFER_POOL_MB": "256",
        "MEDKG_DICOMWEB_USER": USER,
        "MEDKG_DICOMWEB_PASSWORD": PASSWORD,
    }


def _indexed(data: Path) -> dict[str, str]:
    """image id -> study id, as the image index holds them."""
    with sqlite3.connect(f"file:{data / 'indexes' / 'images.sqlite'}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT image_id, study_id FROM images").fetchall())


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_studies_load_de_identified_one_study_alone_and_a_rerun_retrieves_nothing(pacs: Pacs, tmp_path: Path) -> None:
    env, url, data = _env(tmp_path), pacs.orthanc.dicomweb, tmp_path / "data"
    ct_study = next(uid for uid, sops in pacs.studies.items() if len(sops) == 2)
    outputs = []

    alone = run(["ingest", "dicomweb", url, "--study", ct_study, "--no-progress"], env, tmp_path)
    assert alone.returncode == 0, alone.stderr[-3000:]
    outputs.append(alone.stdout + alone.stderr)
    said = _one_line(alone.stderr)
    assert f"dicomweb: 1 study, 2 instances on {url}; 0 loaded before (not retrieved again), 2 to retrieve" in said
    assert "dicom: 2 files, 2 images (2 added," in said
    p = Pseudonymizer((data / "deid.key").read_bytes())
    assert _indexed(data) == {p.image_id(sop): p.study_id(ct_study) for sop in pacs.studies[ct_study]}

    everything = run(["ingest", "dicomweb", url, "--no-progress"], env, tmp_path)
    assert everything.returncode == 0, everything.stderr[-3000:]
    outputs.append(everything.stdout + everything.stderr)
    said = _one_line(everything.stderr)
    assert "dicomweb: 4 studies, 5 instances" in said and "2 loaded before (not retrieved again), 3 to retrieve" in said
    assert "dicom: 3 files, 3 images (3 added," in said and "5 in the image index" in said and "skipped" in said
    assert "file(s) skipped" not in said  # every instance loaded, the JPEG 2000 and JPEG lossless ones too
    expected = {p.image_id(sop): p.study_id(study) for study, sops in pacs.studies.items() for sop in sops}
    assert _indexed(data) == expected
    stats = json.loads(run(["stats", "--json"], env, tmp_path).stdout)
    assert stats["categories"]["Image"] == 5 and stats["categories"]["ImagingStudy"] == 4

    again = run(["ingest", "dicomweb", url, "--no-progress"], env, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    outputs.append(again.stdout + again.stderr)
    said = _one_line(again.stderr)
    assert "5 loaded before (not retrieved again), 0 to retrieve" in said and "nothing new to load" in said
    assert _indexed(data) == expected
    assert json.loads(run(["stats", "--json"], env, tmp_path).stdout) == stats

    limited = run(["ingest", "dicomweb", url, "--limit", "2", "--no-progress"], env, tmp_path)
    assert limited.returncode == 0 and "dicomweb: 2 studies," in _one_line(limited.stderr), limited.stderr[-3000:]
    outputs.append(limited.stdout + limited.stderr)

    # de-identified: no name, id, institution or original UID in what was printed or in any stored file
    stored = {f: f.read_bytes() for f in data.rglob("*") if f.is_file()}
    for secret in pacs.secrets:
        assert not any(secret in text for text in outputs), f"{secret!r} printed"
        for file, blob in stored.items():
            assert secret.encode() not in blob, f"{secret!r} in {file.relative_to(data)}"


def test_errors_are_one_clear_line(pacs: Pacs, tmp_path: Path) -> None:
    env, url = _env(tmp_path), pacs.orthanc.dicomweb
    unreachable = f"http://127.0.0.1:{free_port()}/dicom-web"
    cases = [
        (["--study", "1.2.3.4"], url, f"error: no study UID 1.2.3.4 on {url}"),
        ([], unreachable, f"error: cannot reach the DICOMweb server at {unreachable}: Connection refused"),
        (["--password", "wrong"], url, f"error: QIDO-RS search for studies: HTTP 401 Unauthorized from {url}/studies"),
        ([], f"{pacs.orthanc.url}/no-such-root", "HTTP 404 Not Found"),
        (["--study", "not a uid"], url, "error: not a DICOM UID: 'not a uid'"),
    ]
    for extra, where, message in cases:
        r = run(["ingest", "dicomweb", where, *extra, "--no-progress"], env, tmp_path)
        assert r.returncode == 2, (extra, where, r.stderr[-2000:])
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert (
            "Traceback" not in r.stderr
            and PASSWORD not in r.stderr
            and "wrong" not in r.stderr.replace("'not a uid'", "")
        )
    assert not (tmp_path / "data" / "indexes" / "images.sqlite").exists() or not _indexed(tmp_path / "data")


def test_an_instance_gone_since_the_search_is_an_error_and_the_rest_load(pacs: Pacs, tmp_path: Path) -> None:
    """In process: an instance deleted between the search and its retrieval is one error (named by its
    pseudonym, with the HTTP status), the others of the batch are handed to the loader, and the folder
    they waited in is gone afterwards."""
    from ingest.dicomweb import DicomWeb, plan, retrieve_and_load
    from multimodal.load import ImageLoadResult

    ds = pydicom.dcmread(shared("dicom", "pydicom_wheel", "MR_small.dcm"))
    study = ds.StudyInstanceUID = generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    stored = []
    for _ in range(2):
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
        stored.append((str(ds.SOPInstanceUID), pacs.orthanc.upload(_encoded(ds))))
    try:
        server = DicomWeb(pacs.orthanc.dicomweb, user=USER, password=PASSWORD)
        todo = plan(server, Pseudonymizer(b"k" * 32), lambda ids: set(), study=study, progress=False)
        assert (todo.studies, todo.instances, todo.already, len(todo.pending)) == (1, 2, 0, 2)
        gone = next(i for i in todo.pending if i.sop == stored[0][0])
        assert pacs.orthanc.http.delete(f"/instances/{stored[0][1]['ID']}").status_code == 200
        handed: list[tuple[Path, list[str]]] = []

        def load(folder: Path) -> ImageLoadResult:
            names = sorted(f.name for f in folder.iterdir())
            handed.append((folder, names))
            return ImageLoadResult(files=len(names), images=len(names), added=len(names))

        result = retrieve_and_load(server, todo.pending, load, progress=False)
        kept = next(i for i in todo.pending if i is not gone)
        assert [names for _, names in handed] == [[f"{kept.image_id.removeprefix('IMG:')}.dcm"]]
        assert not handed[0][0].exists()
        assert (result.files, result.images, result.added, result.error_kinds) == (2, 1, 1, {"retrieve": 1})
        (error,) = result.errors
        assert error.startswith(f"{gone.image_id.removeprefix('IMG:')}.dcm: WADO-RS retrieve of an instance: HTTP 404")
        assert stored[0][0] not in error and study not in error
    finally:
        pacs.orthanc.http.delete(f"/studies/{stored[0][1]['ParentStudy']}")
