"""A drafted radiology report as a FHIR R4 DiagnosticReport (``Accept: application/fhir+json`` on
``POST /v1/reports``), built and validated with ``fhir.resources``.

The draft is ``preliminary`` (a radiologist signs the final one). Its impression is the ``conclusion``; the
whole draft (technique, findings, impression, context, each sentence with its citations) is the
``presentedForm``; the de-identified study is an ImagingStudy reference by its pseudonymous Study Instance UID
(``urn:dicom:uid``); each prior report the draft cites is a ``workflow-supportingInfo`` reference. Only
elements of R4 (4.0.1) are used; the models are fhir.resources' R4B (4.3.0), which has them all unchanged.
"""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime

from fhir.resources.R4B.diagnosticreport import DiagnosticReport

from service.radiology.generator import GeneratedReport

__all__ = ["FHIR_JSON", "as_diagnostic_report"]

FHIR_JSON = "application/fhir+json"
LOINC = "http://loinc.org"
DIAGNOSTIC_IMAGING_STUDY = "18748-4"  # LOINC: Diagnostic imaging study (a radiology report)
SERVICE_SECTIONS = "http://terminology.hl7.org/CodeSystem/v2-0074"  # RAD: radiology
SUPPORTING_INFO = "http://hl7.org/fhir/StructureDefinition/workflow-supportingInfo"
DICOM_UID = "urn:dicom:uid"
PRIOR_REPORTS = "urn:medkg:report"  # the ids of the prior reports medkg holds (its report store)


def _uid(pseudonym: str) -> str:
    """``STUDY:2.25.123`` -> ``urn:oid:2.25.123`` (the UID after the prefix)."""
    return "urn:oid:" + pseudonym.split(":", 1)[-1]


def _text(report: GeneratedReport) -> str:
    sections = [
        ("INDICATION", report.indication),
        ("TECHNIQUE", report.technique),
        ("FINDINGS", report.findings),
        ("IMPRESSION", report.impression),
        ("CONTEXT", report.context),
    ]
    body = "\n\n".join(f"{name}: {text}" for name, text in sections if text)
    cited = "\n".join(f"[{c.id}] {c.title or c.text[:120]}" for c in report.citations)
    return body + (f"\n\nCITED\n{cited}" if cited else "")


def as_diagnostic_report(report: GeneratedReport, issued: datetime | None = None) -> DiagnosticReport:
    """The draft as a DiagnosticReport, validated by fhir.resources (a ValidationError is a bug here)."""
    issued = issued or datetime.now(UTC)
    resource: dict = {
        "resourceType": "DiagnosticReport",
        "id": str(uuid.uuid4()),
        "status": "preliminary",
        "category": [{"coding": [{"system": SERVICE_SECTIONS, "code": "RAD", "display": "Radiology"}]}],
        "code": {
            "coding": [{"system": LOINC, "code": DIAGNOSTIC_IMAGING_STUDY, "display": "Diagnostic imaging study"}],
            "text": "Draft radiology report",
        },
        "issued": issued.isoformat(timespec="seconds"),
        "presentedForm": [
            {
                "contentType": "text/plain; charset=utf-8",
                "language": "en",
                "title": f"Draft radiology report ({report.mode}, confidence {report.confidence})",
                "data": base64.b64encode(_text(report).encode("utf-8")).decode("ascii"),
            }
        ],
    }
    if report.impression.strip():  # FHIR has no empty strings: a draft without an impression has no conclusion
        resource["conclusion"] = report.impression
    if report.study is not None:
        study = report.study
        what = ", ".join(x for x in (study.modality, study.body_part, study.study_description) if x)
        resource["imagingStudy"] = [
            {
                "type": "ImagingStudy",
                "identifier": {"system": DICOM_UID, "value": _uid(study.study_id)},
                "display": f"De-identified study{f' ({what})' if what else ''}",
            }
        ]
    if report.insufficient_evidence:
        resource["conclusionCode"] = [{"text": "Insufficient evidence"}]
    cited = {c.id.split("#", 1)[0] for c in report.citations}  # a prior's passages: <report id>#<section>
    priors = [
        {
            "url": SUPPORTING_INFO,
            "valueReference": {
                "type": "DiagnosticReport",
                "identifier": {"system": PRIOR_REPORTS, "value": prior.doc_id},
                "display": f"Prior report {prior.doc_id} (similarity {prior.score:.2f}, by {' and '.join(prior.via)})",
            },
        }
        for prior in report.priors
        if prior.doc_id in cited
    ]
    if priors:
        resource["extension"] = priors
    return DiagnosticReport.model_validate(resource)
