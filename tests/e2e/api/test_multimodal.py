"""Images over HTTP and the CLI: DICOM studies de-identified into the image index and the graph,
paired with their reports; report drafts (POST /v1/reports, `medkg report`) and QA with an attached
study (IMG: citations). Real store, real indexes, real model; DICOMs from the pydicom-data wheel."""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pydicom
import pytest
from fastapi.testclient import TestClient

from ingest.radiology_reports import ReportLoader
from kg.settings import load_settings
from multimodal.dicom import read_dicom
from multimodal.load import load_images
from service.api.app import create_app
from service.container import Container
from tests.support.cli import run
from tests.support.qa_store import build_qa_store
from tests.support.studies import EXTRA_REPORTS, STUDIES, study_file, study_reports


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Container, Path]]:
    tmp = tmp_path_factory.mktemp("mm")
    studies = tmp / "studies"
    studies.mkdir()
    for name in STUDIES:
        shutil.copy(study_file(name), studies / name)
    (studies / "notes.txt").write_text("not a DICOM file")
    ds = pydicom.dcmread(study_file("CT_small.dcm"))  # the same instance again, re-encoded: skipped as a duplicate
    ds.save_as(studies / "zz_CT_small_again.dcm", enforce_file_format=True)
    settings = load_settings(
        data_dir=tmp / "data", api_keys=None, llm_base_url=None, rate_limit_per_minute=0, max_upload_bytes=4_000_000
    )
    c = Container(settings)
    build_qa_store(c)
    ReportLoader(c.graph, c.text_index, c.nlp, c.linker, progress=False, reports=c.reports).load(study_reports())
    pairing = {f"{name.removesuffix('.dcm')}": f"IUXR:{i}" for i, name in enumerate(STUDIES, 1)}
    result = load_images(c.graph, c.image_index, c.pseudonymizer, [studies], pairing.get, progress=False)
    assert result.images == 5 and result.reports_linked == 5 and result.error_kinds == {"not_dicom": 1}
    assert result.duplicates == 1
    again = load_images(c.graph, c.image_index, c.pseudonymizer, [studies], pairing.get, progress=False)
    assert again.embedded == 0 and again.unchanged == 5 and again.changed == 0 and again.duplicates == 1
    yield c, studies
    c.close()


@pytest.fixture(scope="module")
def client(loaded: tuple[Container, Path]) -> Iterator[TestClient]:
    with TestClient(create_app(container=loaded[0])) as c:
        yield c


def _image_id(c: Container, name: str) -> str:
    return c.pseudonymizer.image_id(str(pydicom.dcmread(study_file(name), stop_before_pixels=True).SOPInstanceUID))


def test_images_are_in_the_graph_with_their_reports(loaded: tuple[Container, Path]) -> None:
    c, _ = loaded
    chest = _image_id(c, "RG1_J2KI.dcm")
    linked = {n.relation.type: n.entity.id for n in c.graph.neighbours(chest, limit=20)}
    assert linked["HAS_REPORT"] == "IUXR:1" and linked["HAS_MODALITY"] == "DCM:CR"
    assert linked["DEPICTS"] == "BODYPART:CHEST" and linked["HAS_IMAGE"].startswith("STUDY:2.25.")
    assert c.image_index.get([chest])[chest].report_id == "IUXR:1"


def test_report_from_an_uploaded_study(client: TestClient, loaded: tuple[Container, Path]) -> None:
    _, studies = loaded
    files = {"file": ("RG1_J2KI.dcm", (studies / "RG1_J2KI.dcm").read_bytes(), "application/dicom")}
    r = client.post("/v1/reports", data={"indication": "Chest pain and shortness of breath.", "k": "3"}, files=files)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["technique"].startswith("Computed Radiography of the chest")
    assert "IUXR:1" not in {p["doc_id"] for p in out["priors"] if p["via"] == ["image"]}  # never its own report
    # nor, by image, a study of another modality or body part (the other radiograph is of a leg)
    assert not any("image" in p["via"] for p in out["priors"])
    assert out["impression"] and "[IUXR:" in out["impression"] and "[IUXR:" in out["findings"]
    cited = {c["id"] for c in out["citations"]}
    assert cited and all(i.startswith("IUXR:") for i in cited if "#" in i)
    assert not out["insufficient_evidence"] and out["mode"] == "extractive"


def test_a_report_embeds_its_indication_once(
    client: TestClient, loaded: tuple[Container, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prior search and the KG facts share the indication's embedding (one model call); with
    findings, the two texts go to the model together."""
    c, _ = loaded
    embedder = c.text_embedder
    calls: list[list[str]] = []
    real = embedder.encode

    def counted(texts, *args, **kwargs):  # the real model, counted
        calls.append(list(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embedder, "encode", counted)
    knee = _image_id(c, "RG3_J2KI.dcm")
    indication = "Leg pain after a fall."
    r = client.post("/v1/reports", json={"image_id": knee, "indication": indication})
    assert r.status_code == 200, r.text
    assert calls.count([indication]) == 1  # (the entity linker's own lookups aside)
    calls.clear()
    r = client.post("/v1/reports", json={"image_id": knee, "indication": indication, "findings": "No fracture."})
    assert r.status_code == 200, r.text
    assert calls.count([f"{indication} No fracture.", indication]) == 1 and [indication] not in calls


def test_report_for_an_indexed_study_and_errors(client: TestClient, loaded: tuple[Container, Path]) -> None:
    c, studies = loaded
    knee = _image_id(c, "RG3_J2KI.dcm")
    r = client.post("/v1/reports", json={"image_id": knee, "indication": "Leg pain after a fall."})
    assert r.status_code == 200 and r.json()["technique"].startswith("Computed Radiography of the extremity")
    assert client.post("/v1/reports", json={"image_id": "IMG:2.25.1", "indication": "x"}).status_code == 404
    assert client.post("/v1/reports", json={"indication": "x"}).status_code == 422
    assert client.post("/v1/reports", content=b"x", headers={"content-type": "text/plain"}).status_code == 415
    text = {"file": ("notes.txt", b"not a DICOM file at all", "text/plain")}
    assert client.post("/v1/reports", files=text).status_code == 415
    fake = {"file": ("x.dcm", b"\0" * 128 + b"DICM" + b"\0" * 64, "application/dicom")}
    bad = client.post("/v1/reports", files=fake)
    assert bad.status_code == 422 and "unusable DICOM" in bad.json()["detail"]
    big = {"file": ("big.dcm", b"\0" * 5_000_000, "application/dicom")}
    assert client.post("/v1/reports", files=big).status_code == 413


def test_qa_with_an_attached_study_cites_similar_studies(client: TestClient, loaded: tuple[Container, Path]) -> None:
    """An attached study is compared with prior studies of its modality and body part only: a new
    radiograph of a leg cites the leg radiograph, never the chest film, CT, MR or ultrasound."""
    c, studies = loaded
    ds = pydicom.dcmread(studies / "RG3_J2KI.dcm")  # CR, EXTREMITY: another patient's study of the same kind
    ds.PatientName, ds.PatientID = "Doe^Jane", "MRN-4242"
    ds.StudyInstanceUID, ds.SeriesInstanceUID = pydicom.uid.generate_uid(), pydicom.uid.generate_uid()
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
    buf = io.BytesIO()
    ds.save_as(buf)
    files = {"file": ("study.dcm", buf.getvalue(), "application/dicom")}
    r = client.post("/v1/qa", data={"question": "What does this study show?", "k": "3"}, files=files)
    assert r.status_code == 200, r.text
    # a form is flat and typed by the schema: an option is a part of its own, an unknown part is named
    for bad, named in (({"k": "3.5"}, "'k' must be an integer"), ({"options": "{}"}, "unknown parts ['options']")):
        refused = client.post("/v1/qa", data={"question": "What does this study show?", **bad}, files=files)
        assert refused.status_code == 422 and named in refused.text, refused.text
    out = r.json()
    assert "Doe" not in r.text and "MRN-4242" not in r.text
    images = [c["id"] for c in out["citations"] if c["kind"] == "image"]
    assert images == [_image_id(c, "RG3_J2KI.dcm")]
    assert "was reported as" in out["answer"] and "images" in out["timings_ms"]
    # the chest radiograph has no comparable prior here (the other radiograph is of a leg): no image evidence
    chest = client.post(
        "/v1/qa", json={"question": "What does this study show?", "image_id": _image_id(c, "RG1_J2KI.dcm")}
    )
    assert chest.status_code == 200 and not any(c["kind"] == "image" for c in chest.json()["citations"])
    indexed = client.post("/v1/qa", json={"question": "What does this study show?", "image_id": images[0]})
    assert indexed.status_code == 200
    missing = client.post("/v1/qa", json={"question": "What does it show?", "image_id": "IMG:2.25.1"})
    assert missing.status_code == 404


def test_cli_ingest_and_report(tmp_path: Path) -> None:
    csv = tmp_path / "reports.csv"
    rows = ["uid,MeSH,Problems,image,indication,comparison,findings,impression"]
    for uid, (indication, findings, impression) in enumerate([*STUDIES.values(), *EXTRA_REPORTS], 1):
        rows.append(f'{uid},normal,normal,"Chest, 2 views",{indication},None.,"{findings}","{impression}"')
    rows.append("99,normal,normal,x,Pain.,None.,,")  # neither findings nor impression: a problem, the rest load
    csv.write_text("\n".join(rows) + "\n")
    studies = tmp_path / "studies"
    studies.mkdir()
    shutil.copy(study_file("RG1_J2KI.dcm"), studies / "RG1_J2KI.dcm")
    shutil.copy(study_file("CT_small.dcm"), studies / "CT_small.dcm")
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    r = run(["ingest", "reports", str(csv), "--no-progress"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "8 added" in r.stderr and "problem" in r.stderr
    r = run(["ingest", "dicom", str(studies), "--no-progress"], env, tmp_path)
    assert r.returncode == 0 and "2 images" in r.stderr, r.stderr[-2000:]
    r = run(["report", str(studies / "RG1_J2KI.dcm"), "--indication", "Chest pain.", "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["technique"].startswith("Computed Radiography of the chest") and "[IUXR:" in out["impression"]
    # the reader's own findings choose the impression: that of the prior whose findings read like them
    findings = ["--findings", "Right lower lobe airspace opacity."]
    r = run(
        ["report", str(studies / "RG1_J2KI.dcm"), "--indication", "Chest pain.", *findings, "--json"], env, tmp_path
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["impression"].startswith("Right lower lobe pneumonia. [IUXR:8#")
    fhir = run(["report", str(studies / "RG1_J2KI.dcm"), "--indication", "Chest pain.", "--fhir"], env, tmp_path)
    assert fhir.returncode == 0, fhir.stderr[-2000:]
    resource = json.loads(fhir.stdout)  # validated by fhir.resources as it was built
    assert (resource["resourceType"], resource["status"]) == ("DiagnosticReport", "preliminary")
    assert resource["conclusion"] == out["impression"] and resource["imagingStudy"][0]["type"] == "ImagingStudy"
    r = run(["report", str(csv), "--indication", "x"], env, tmp_path)
    assert r.returncode == 2 and "reports.csv" in r.stderr and "Traceback" not in r.stderr
    r = run(["report", "--image-id", "IMG:2.25.1", "--indication", "x"], env, tmp_path)
    assert r.returncode == 2 and "no indexed image 'IMG:2.25.1'" in r.stderr.replace("\n", "")
    # MEDKG_PASSAGE_MAX_WORDS cuts reports as it cuts abstracts
    passages = json.loads(run(["stats", "--json"], env, tmp_path).stdout)["categories"]["Passage"]
    short = {**env, "MEDKG_DATA_DIR": str(tmp_path / "short"), "MEDKG_PASSAGE_MAX_WORDS": "10"}
    assert run(["ingest", "reports", str(csv), "--no-progress"], short, tmp_path).returncode == 0
    assert json.loads(run(["stats", "--json"], short, tmp_path).stdout)["categories"]["Passage"] > passages


def test_llm_report_citations_are_checked(loaded: tuple[Container, Path]) -> None:
    from tests.support.llm_server import FakeLLMServer, Reply

    c, studies = loaded
    with FakeLLMServer() as llm:
        settings = c.settings.model_copy(update={"llm_base_url": llm.base_url, "llm_model": "fake-model"})
        with_llm = Container(settings, graph=c.graph)
        for shared in ("text_embedder", "entity_index", "text_index", "nlp", "linker", "reports", "image_index"):
            with_llm.__dict__[shared] = getattr(c, shared)

        prompts: list[str] = []

        def draft(body: dict) -> dict:
            prompt = body["messages"][-1]["content"]
            prompts.append(prompt)
            cited = prompt.split("[", 1)[1].split("]", 1)[0]  # the first evidence id offered
            assert "prior reports plus a knowledge graph" in body["messages"][0]["content"]
            return {
                "technique": "PA chest radiograph.",
                "findings": f"The lungs are clear [{cited}]. A nodule is present [IUXR:999#s1].",
                "impression": f"No acute disease [{cited}].",
                "citations": [cited, "IUXR:999#s1"],
                "confidence": 0.7,
                "insufficient_evidence": False,
            }

        llm.handler = draft
        image = read_dicom(studies / "RG1_J2KI.dcm", c.pseudonymizer)
        r = with_llm.report_generator.generate("Chest pain.", image=image)
        assert r.mode == "llm" and r.dropped_citations == ["IUXR:999#s1"]
        assert "999" not in r.findings and r.citations and r.impression.startswith("No acute disease [")
        assert "Reader's findings" not in prompts[-1]
        read = with_llm.report_generator.generate("Chest pain.", image=image, findings="Small left pleural effusion.")
        assert read.findings == "Small left pleural effusion." and read.impression.startswith("No acute disease [")
        assert "Reader's findings: Small left pleural effusion.\n" in prompts[-1]  # the reader's, for the impression
        llm.enqueue(Reply.error(500), Reply.error(500), Reply.error(500))
        from service.qa.llm import LLMError

        with pytest.raises(LLMError) as failed:
            with_llm.report_generator.generate("Chest pain.", image=image)
        assert failed.value.status == 502


def test_image_records_are_not_knowledge(client: TestClient, loaded: tuple[Container, Path]) -> None:
    """An indexed image is one patient's record: "computed tomography" in a question is not answered
    with the modality edges of the CT images loaded, nor linked to an image or a study."""
    c, _ = loaded
    ct = _image_id(c, "CT_small.dcm")
    assert {n.relation.type for n in c.graph.neighbours(ct, limit=20)} >= {"HAS_MODALITY", "HAS_IMAGE"}
    out = client.post("/v1/qa", json={"question": "When is computed tomography used in Marfan syndrome?"}).json()
    assert not [r["id"] for r in out["retrieved"] if r["kind"] == "kg" and ("IMG:" in r["id"] or "STUDY:" in r["id"])]
    assert not [e["id"] for e in out["linked_entities"] if e["id"].startswith(("IMG:", "STUDY:"))]
    c.entity_index.update(c.graph, progress=False)
    assert not [i for i in c.entity_index.index.ids() if i.startswith(("IMG:", "STUDY:"))]
    study = next(n.entity for n in c.graph.neighbours(ct, limit=20) if n.relation.type == "HAS_IMAGE")
    assert not c.linker.link_query(study.name) or all(
        not i.startswith(("IMG:", "STUDY:")) for m in c.linker.link_query(study.name) for i in m.ids
    )


def test_every_id_a_draft_cites_has_its_citation(loaded: tuple[Container, Path]) -> None:
    """An extractive draft is composed from its priors and facts, not from the budgeted context: a
    small budget must not leave ids in the text that no citation explains."""
    c, _ = loaded
    chest = _image_id(c, "RG1_J2KI.dcm")
    for budget in (40, 2000):
        r = c.report_generator.generate("Chest pain and shortness of breath.", image_id=chest, k=5, budget=budget,
                                        mode="extractive")  # fmt: skip
        inline = {i.strip() for part in (r.findings, r.impression, r.context)
                  for group in re.findall(r"\[([^\]]+)\]", part) for i in group.split(";")}  # fmt: skip
        assert inline and inline <= {cit.id for cit in r.citations}, (budget, inline)
        assert "IUXR:1" not in {p.doc_id for p in r.priors}  # its own report: no prior, not even by text


def test_only_the_image_asked_for_being_unknown_is_a_404(
    client: TestClient, loaded: tuple[Container, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    c, studies = loaded
    knee = _image_id(c, "RG3_J2KI.dcm")

    def broken(*_args: object, **_kwargs: object) -> list:
        raise KeyError("HP:0000001")  # a fault inside the draft, not an unknown image

    monkeypatch.setattr(c.report_generator, "_facts", broken)
    faulty = TestClient(client.app, raise_server_exceptions=False)
    files = {"file": ("study.dcm", (studies / "RG1_J2KI.dcm").read_bytes(), "application/dicom")}
    upload = faulty.post("/v1/reports", data={"indication": "Chest pain."}, files=files)
    assert upload.status_code == 500 and "no indexed image" not in upload.text
    indexed = faulty.post("/v1/reports", json={"image_id": knee, "indication": "Leg pain."})
    assert indexed.status_code == 500 and "no indexed image" not in indexed.text
    unknown = faulty.post("/v1/reports", json={"image_id": "IMG:2.25.1", "indication": "x"})
    assert unknown.status_code == 404 and unknown.json()["detail"] == "no indexed image 'IMG:2.25.1'"
