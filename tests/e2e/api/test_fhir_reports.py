"""A drafted report as a FHIR R4 DiagnosticReport (`Accept: application/fhir+json` on POST /v1/reports):
validated by fhir.resources, conclusion, the de-identified study and the cited priors as references."""

from __future__ import annotations

import base64
import json

import pydicom
from fastapi.testclient import TestClient
from fhir.resources.R4B.diagnosticreport import DiagnosticReport

from service.container import Container
from tests.e2e.api.test_multimodal import _image_id, client, loaded  # noqa: F401 - the module's fixtures
from tests.support.studies import study_file

FHIR = "application/fhir+json"


def test_a_draft_as_a_diagnostic_report(client: TestClient, loaded: tuple[Container, object]) -> None:  # noqa: F811
    c, studies = loaded
    upload = {"file": ("RG1_J2KI.dcm", (studies / "RG1_J2KI.dcm").read_bytes(), "application/dicom")}
    form = {"indication": "Chest pain and shortness of breath.", "k": "3"}
    plain = client.post("/v1/reports", data=form, files=upload).json()
    r = client.post("/v1/reports", data=form, files=upload, headers={"Accept": FHIR})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(FHIR)
    resource = r.json()
    report = DiagnosticReport.model_validate(resource)  # the library's own validation
    assert report.status == "preliminary" and report.code.coding[0].code == "18748-4"
    assert report.category[0].coding[0].code == "RAD"
    assert report.conclusion == plain["impression"] and "[IUXR:" in report.conclusion
    text = base64.b64decode(resource["presentedForm"][0]["data"]).decode("utf-8")
    assert f"FINDINGS: {plain['findings']}" in text and f"IMPRESSION: {plain['impression']}" in text
    # the study by its pseudonymous Study Instance UID, never the original one
    original = str(pydicom.dcmread(study_file("RG1_J2KI.dcm"), stop_before_pixels=True).StudyInstanceUID)
    (study,) = resource["imagingStudy"]
    assert study["type"] == "ImagingStudy" and study["identifier"]["system"] == "urn:dicom:uid"
    assert study["identifier"]["value"] == "urn:oid:" + plain["study"]["study_id"].removeprefix("STUDY:")
    assert plain["study"]["study_id"] == "STUDY:" + c.pseudonymizer.uid(original)
    assert original not in r.text
    # each cited prior report, and only those, as supporting information
    cited = {cit["id"].split("#")[0] for cit in plain["citations"]}
    priors = [e["valueReference"] for e in resource["extension"]]
    assert all(
        e["url"] == "http://hl7.org/fhir/StructureDefinition/workflow-supportingInfo" for e in resource["extension"]
    )
    assert {p["identifier"]["value"] for p in priors} == cited & {p["doc_id"] for p in plain["priors"]} != set()
    assert all(p["type"] == "DiagnosticReport" for p in priors)


def test_an_indexed_study_and_the_plain_answer_by_default(client: TestClient, loaded) -> None:  # noqa: F811
    c, _ = loaded
    knee = _image_id(c, "RG3_J2KI.dcm")
    body = {"image_id": knee, "indication": "Leg pain after a fall."}
    plain = client.post("/v1/reports", json=body, headers={"Accept": "application/json"})
    assert plain.headers["content-type"] == "application/json" and plain.json()["study"]["image_id"] == knee
    fhir = client.post("/v1/reports", json=body, headers={"Accept": f"{FHIR}, application/json;q=0.5"})
    assert fhir.status_code == 200 and fhir.headers["content-type"].startswith(FHIR)
    assert (
        DiagnosticReport.model_validate(json.loads(fhir.text))
        .imagingStudy[0]
        .identifier.value.startswith("urn:oid:2.25.")
    )
    # errors stay the API's own JSON
    missing = client.post("/v1/reports", json={**body, "image_id": "IMG:2.25.1"}, headers={"Accept": FHIR})
    assert missing.status_code == 404 and missing.json()["error"]
