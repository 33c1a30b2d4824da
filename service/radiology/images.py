"""Image evidence for answers: the prior studies most similar to an attached image, with their reports."""

from __future__ import annotations

from ingest.radiology_reports import ReportStore
from kg.retrieval.evidence import EvidenceItem
from multimodal.dicom import DicomImage
from multimodal.graph import MODALITY_NAMES
from multimodal.image_index import ImageIndex

__all__ = ["similar_study_evidence"]


def similar_study_evidence(
    images: ImageIndex, reports: ReportStore, image: DicomImage | None, image_id: str | None, k: int = 3
) -> list[EvidenceItem]:
    """``IMG:`` evidence items for the ``k`` nearest indexed studies comparable with the query (its modality,
    its body part where both state one; the query's own study left out)."""
    if image is None and not image_id:
        return []
    if image is None:
        if image_id not in images:
            raise KeyError(image_id)
        query = images.vectors.vector(image_id or "")
        if query is None:
            return []
    else:
        query = image
    own = images.own_study(image_id, image)  # never the study itself, nor its report
    items = []
    # only studies a radiologist would compare with this one: same modality, same body part where both say
    for hit in images.search(query, k=k, exclude=own, comparable_to=images.kind_of(image_id, image)):
        report = reports.get(hit.report_id) if hit.report_id else None
        study = " ".join(
            p for p in (MODALITY_NAMES.get(hit.modality or "", hit.modality or ""), (hit.body_part or "").lower()) if p
        )
        view = f", {hit.view_position} view" if hit.view_position else ""
        text = f"Similar prior study: {study or 'image'}{view} (image similarity {hit.score:.2f})"
        if report is not None:
            text += f"; its report {hit.report_id}: findings: {report.findings or '-'}"
            text += f" impression: {report.impression or '-'}"
        else:
            text += "; no report linked"
        items.append(
            EvidenceItem(
                id=hit.image_id,
                kind="image",
                text=text + ".",
                title=f"{study or 'image'}{view}",
                url=None,
                score=float(hit.score),
                meta={
                    "study_id": hit.study_id,
                    "report_id": hit.report_id,
                    "impression": report.impression if report else None,
                    "modality": hit.modality,
                    "body_part": hit.body_part,
                },
            )
        )
    return items
