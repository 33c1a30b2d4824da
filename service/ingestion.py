"""Loading use cases shared by the CLI, the demo and the benchmarks: a source into the graph, literature
and radiology reports into the passage indexes, DICOM studies into the image index, a relink. Nothing
here prints: each function returns what it did, and the caller shows it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.pubmed.load import PubmedLoader
from ingest.radiology_reports import ReportLoader, ReportLoadResult, read_iu_reports
from ingest.summary import IngestSummary
from ingest.writer import Item, ingest
from kg.entity_index import IndexUpdate
from multimodal.load import ImageLoadResult, file_key, load_images
from service.container import Container

if TYPE_CHECKING:
    from ingest.pubmed.distributed import RayLoad


@dataclass
class SourceLoad:
    """A source loaded into the graph: what was written, how many documents loaded before would link
    with its new entities (``medkg relink``), and the entity and phrase index updates when they ran."""

    summary: IngestSummary
    documents_to_relink: int = 0
    entity_index: IndexUpdate | None = None
    phrase_index: IndexUpdate | None = None


@dataclass
class LiteratureLoad:
    summary: IngestSummary
    documents: int
    passages: int
    entity_index: IndexUpdate | None = None


@dataclass
class Relink:
    summaries: list[IngestSummary]
    signature: str  # the document linker's


@dataclass
class ImagesLoad:
    result: ImageLoadResult
    in_index: int  # images in the image index after the load


@dataclass
class ReportsLoad:
    result: ReportLoadResult
    in_table: int  # reports in the report table after the load
    replace: bool


def load_source(c: Container, items: Iterable[Item], source: str, embed: bool, progress: bool) -> SourceLoad:
    """Ontology terms, annotations or an edge list into the graph (raises ``OlderRelease``)."""
    summary = ingest(c.graph, items, source, progress=progress)
    if summary.relations.updated or summary.entities.updated:  # changed in place (frequencies, a gene's
        c.forget_phenotype_cache()  # symbol, an obsolete flag): the counts the cache's stamp sees did not move
    new_entities = summary.entities.added or summary.entities.updated
    loaded = SourceLoad(summary, documents_to_relink=c.text_index.document_count() if new_entities else 0)
    if embed:
        loaded.entity_index = c.entity_index.update(c.graph, progress=progress)
        loaded.phrase_index = c.phrase_index.update(c.graph, progress=progress)
    return loaded


def load_literature(
    c: Container,
    records: Iterable,
    source: str,
    link: bool,
    extract: bool,
    progress: bool,
    on_commit: Callable[[], None] | None = None,
) -> LiteratureLoad:
    """Articles into the graph and the passage indexes (the shared path of pubmed, entrez and docs);
    ``on_commit`` is called after each of the loader's checkpoints."""
    loader = PubmedLoader(
        c.graph,
        c.text_index,
        c.nlp,
        c.document_linker if link else None,
        extract=c.triple_merger() if extract else None,
        max_words=c.settings.passage_max_words,
        progress=progress,
        checkpoint_every=c.settings.ingest_checkpoint_every,
        batch_size=min(256, c.settings.ingest_checkpoint_every),
    )
    summary = loader.load(records, source=source, on_commit=on_commit)
    update = c.entity_index.update(c.graph, progress=progress) if extract else None  # the LLM's new entities
    return LiteratureLoad(summary, c.text_index.document_count(), len(c.text_index), update)


def load_literature_ray(
    c: Container,
    files: list[Path],
    source: str,
    link: bool,
    progress: bool,
    *,
    address: str | None = None,
    workers: int | None = None,
    shard_dir: Path | None = None,
    keep_shards: bool = False,
    checkpoint_every: int | None = None,
) -> RayLoad:
    """Files of articles loaded through the Ray Data pipeline (:mod:`ingest.pubmed.distributed`): a
    local Ray of ``workers`` CPUs (default: this machine's cores), or the cluster at ``address``; shard
    files under ``shard_dir`` (default ``<data dir>/shards``: a cluster's workers need one they all
    reach, as they need the data dir's entity index when linking), then merged here."""
    from ingest.pubmed.distributed import (
        MANIFEST,
        PrepareResult,
        RayLoad,
        WorkerKit,
        merge_shards,
        plan_shards,
        prepare_shards,
        ray_session,
    )

    workers = workers or os.cpu_count() or 1
    checkpoint_every = checkpoint_every or c.settings.ingest_checkpoint_every
    linker = c.document_linker if link else None
    kit = WorkerKit.of(c.settings, c.settings.passage_max_words, linker)
    home = c.settings.data_dir / "shards"
    plan = plan_shards(files, kit, shard_dir or home, home / MANIFEST)
    before = len(plan.shards) - len(plan.to_merge)
    prepared = PrepareResult()
    if plan.to_prepare:  # Ray is started only when there is something to prepare
        with ray_session(address, workers) as resources:
            gpus = resources.get("GPU", 0) if c.settings.embedding_device.startswith("cuda") else 0
            prepared = prepare_shards(plan, kit, workers=workers, gpus=gpus, progress=progress)
    loader = PubmedLoader(
        c.graph, c.text_index, c.nlp, linker, max_words=c.settings.passage_max_words, progress=progress,
        checkpoint_every=checkpoint_every, batch_size=min(256, checkpoint_every),
    )  # fmt: skip
    started = time.perf_counter()
    summary, merged = merge_shards(loader, plan, source, keep=keep_shards)
    return RayLoad(
        shards=len(plan.shards), merged_before=before, prepared=prepared, merged=merged, summary=summary,
        merge_seconds=round(time.perf_counter() - started, 3), workers=workers, address=address,
        shard_dir=plan.stage,
    )  # fmt: skip


def relink(c: Container, force: bool = False, progress: bool = True) -> Relink:
    """Link the loaded abstracts and reports again with the current document linker: one summary for
    the abstracts, one for the reports."""
    linker = c.document_linker
    words = c.settings.passage_max_words  # as loaded: a relink must cut passages as the load did
    pubmed = PubmedLoader(c.graph, c.text_index, c.nlp, linker, progress=progress, max_words=words)
    reports = ReportLoader(c.graph, c.text_index, c.nlp, linker, progress=progress, reports=c.reports, max_words=words)
    summaries = [pubmed.relink(c.text_index.iter_document_ids("PMID:"), force=force), reports.relink(force=force)]
    return Relink(summaries, linker.signature)


def report_pairing(c: Container) -> dict[str, str]:
    """Image file name (without suffixes) -> the report document that lists it."""
    return {file_key(name): doc_id for doc_id, r in c.reports.iter() for name, _ in r.images}


def load_dicom(c: Container, paths: list[Path], progress: bool) -> ImagesLoad:
    """DICOM files or folders, de-identified into the image index and the graph, paired with reports."""
    pairing = report_pairing(c)
    result = load_images(c.graph, c.image_index, c.pseudonymizer, paths, pairing.get, progress=progress)
    return ImagesLoad(result, len(c.image_index))


def load_reports(
    c: Container, file: Path, projections: Path | None, progress: bool, replace: bool = False
) -> ReportsLoad:
    """Radiology reports (IU chest X-ray layout) into the graph and the passage indexes (raises
    ``ReportFormatError``)."""
    loader = ReportLoader(
        c.graph, c.text_index, c.nlp, c.document_linker, progress=progress, reports=c.reports,
        max_words=c.settings.passage_max_words,
    )  # fmt: skip
    result = loader.load(read_iu_reports(file, projections), replace=replace)
    return ReportsLoad(result, len(c.reports), replace)
