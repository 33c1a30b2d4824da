"""Loading DICOM studies: read and de-identify every file, embed into the image index, write the Image /
ImagingStudy / modality / body-part nodes, and pair an image with its report where the caller knows it.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field, fields
from pathlib import Path

from kg.graph.base import BaseGraphStore, row_to_relation
from kg.model import Relation
from kg.progress import progress_bar
from multimodal.deid import Pseudonymizer
from multimodal.dicom import DicomError, DicomImage, dicom_files, iter_dicom
from multimodal.graph import (
    DEPICTS,
    HAS_IMAGE,
    HAS_MODALITY,
    HAS_REPORT,
    SOURCE_DICOM,
    SOURCE_REPORTS,
    image_entities,
    report_relation,
)
from multimodal.image_index import ImageIndex, ImageReindexResult

__all__ = ["FilesRead", "ImageLoadResult", "file_key", "load_images", "read_images", "reindex_images"]

log = logging.getLogger("medkg.images")


def file_key(name: str) -> str:
    """The name an image is paired by: the file name without ``.png`` / ``.dcm`` / ``.dicom`` suffixes."""
    base = os.path.basename(name)
    for suffix in (".png", ".jpg", ".dcm", ".dicom"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    return base


@dataclass
class FilesRead:
    files: int = 0
    images: int = 0
    duplicates: int = 0  # files holding an instance already read in this run (same SOP Instance UID)
    errors: list[str] = field(default_factory=list)  # "<file name>: <reason>"
    error_kinds: dict[str, int] = field(default_factory=dict)

    def failed(self, name: str, reason: str, kind: str) -> None:
        """One file that did not load: ``<name>: <reason>``, counted under ``kind``."""
        self.errors.append(f"{name}: {reason}")
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


@dataclass
class ImageLoadResult(FilesRead):
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    embedded: int = 0
    reports_linked: int = 0
    edges_ended: int = 0  # of images loaded again whose file says otherwise now
    seconds: float = 0.0

    def add(self, part: ImageLoadResult) -> None:
        """Count ``part`` (another load's result) in this one; its seconds are not added."""
        for f in fields(self):
            if f.name == "seconds":
                continue
            mine, theirs = getattr(self, f.name), getattr(part, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                for k, n in theirs.items():
                    mine[k] = mine.get(k, 0) + n
            else:
                setattr(self, f.name, mine + theirs)


def read_images(
    paths: Iterable[Path | str], pseudonymizer: Pseudonymizer, tally: FilesRead, progress: bool, desc: str
) -> Iterator[tuple[Path, DicomImage]]:
    """Every readable image in ``paths`` (files, folders, DICOMDIRs), de-identified, once, with the
    file it was read from (its name pairs it with a report): the first file of an instance wins.
    Unreadable files are counted in ``tally`` with their reason."""
    # a DICOMDIR in a folder is skipped: the walk reads its files under their own names
    files = list(dicom_files(paths, dicomdirs_in_folders=False))
    seen: set[str] = set()

    def failed(error: DicomError) -> None:
        tally.failed(Path(error.path or "").name, error.reason, error.kind)
        log.info("dicom skipped", extra={"kind": error.kind})

    bar = progress_bar(total=len(files), desc=desc, unit=" files", disable=not progress)
    with warnings.catch_warnings(), bar:
        # pydicom's value warnings ("Invalid value for VR AS") are noise here; errors are reported below.
        warnings.simplefilter("ignore", UserWarning)
        for entry in files:
            bar.update(1)
            tally.files += 1
            if isinstance(entry, DicomError):  # a DICOMDIR that cannot be read, a file it names missing
                failed(entry)
                continue
            for item in iter_dicom([entry], pseudonymizer):
                if isinstance(item, DicomError):
                    failed(item)
                    continue
                if item.image_id in seen:  # one instance in several encodings: the first file wins
                    tally.duplicates += 1
                    continue
                seen.add(item.image_id)
                tally.images += 1
                yield entry, item


def reindex_images(
    index: ImageIndex, pseudonymizer: Pseudonymizer, paths: Iterable[Path | str], progress: bool = True
) -> tuple[FilesRead, ImageReindexResult]:
    """Embed the indexed images again from their files where their vectors are missing or stale
    (:meth:`ImageIndex.reindex`); the graph, the metadata and the report links are left as they are."""
    tally = FilesRead()
    read = read_images(paths, pseudonymizer, tally, progress, "reindex dicom")
    with closing(read):  # reading may stop early: end the generator (and its warning filter) here
        return tally, index.reindex(img for _, img in read)


def _stale_edges(graph: BaseGraphStore, image_ids: list[str], now: set[str], paired: set[str]) -> list[Relation]:
    """The current edges of images loaded again that their file no longer states (a corrected body
    part or modality, another study): those of ``dicom`` not among ``now``, and the report link of an
    image this load pairs with another report (one loaded without a pairing keeps its own)."""
    known = graph.existing(image_ids)
    if not known:
        return []
    rows = [*graph.edge_rows(sorted(known), [HAS_MODALITY, DEPICTS, HAS_REPORT], "out"),
            *graph.edge_rows(sorted(known), [HAS_IMAGE], "in")]  # fmt: skip
    stale = []
    for image_id, row, _ in rows:
        rel = row_to_relation(row)
        if rel.key in now or rel.source not in (SOURCE_DICOM, SOURCE_REPORTS):
            continue
        if rel.type == HAS_REPORT and image_id not in paired:
            continue
        stale.append(rel)
    return stale


def load_images(
    graph: BaseGraphStore,
    index: ImageIndex,
    pseudonymizer: Pseudonymizer,
    paths: Iterable[Path | str],
    report_for: Callable[[str], str | None] | None = None,
    progress: bool = True,
    batch: int = 64,
) -> ImageLoadResult:
    """Load the images of ``paths``; ``report_for(file_key(name))`` names an image's report, if any (the IU
    collection names its images ``<uid>_IM-....dcm``). Idempotent: an unchanged file (same bytes, same
    encoder) embeds nothing and changes no count. One bad file is reported and the rest load. File paths
    are used for pairing only, never stored."""
    started = time.perf_counter()
    result = ImageLoadResult()
    pending: list[tuple[DicomImage, str | None]] = []

    def flush() -> None:
        if not pending:
            return
        added = index.add([img for img, _ in pending])
        result.added += added.added
        result.changed += added.changed
        result.unchanged += added.unchanged
        result.embedded += added.embedded
        entities, relations = [], []
        paired: set[str] = set()  # images whose report this load names
        for img, report_id in pending:
            ents, rels = image_entities(img)
            entities += ents
            relations += rels
            if report_id:
                if graph.get_entity(report_id) is not None:
                    index.link_report(img.image_id, report_id)
                    relations.append(report_relation(img.image_id, report_id))
                    result.reports_linked += 1
                    paired.add(img.image_id)
        stale = _stale_edges(graph, [img.image_id for img, _ in pending], {r.key for r in relations}, paired)
        graph.upsert_entities(entities, replacing={SOURCE_DICOM})
        graph.upsert_relations(relations)
        if stale:
            result.edges_ended += graph.invalidate_relations(stale)
        index.commit()
        pending.clear()

    for path, item in read_images(paths, pseudonymizer, result, progress, "ingest dicom"):
        pending.append((item, report_for(file_key(path.name)) if report_for else None))
        if len(pending) >= batch:
            flush()
    flush()
    result.seconds = round(time.perf_counter() - started, 2)
    return result
