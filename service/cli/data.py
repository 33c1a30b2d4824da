"""Looking after the data dir: vectors embedded again, documents linked again, backup and restore, the
graph exported for neo4j-admin."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kg.graph.base import GraphStoreError
from kg.settings import SettingsError, load_settings
from kg.vector_index import VectorIndex, VectorIndexError
from service.cli.common import container, fail, out

if TYPE_CHECKING:
    from service.container import Container


def reindex(
    only: Annotated[
        str | None,
        typer.Option(
            "--only", help="passages, entities or images (default: passages and entities).", show_default=False
        ),
    ] = None,
    sources: Annotated[
        list[Path] | None,
        typer.Option(
            "--from",
            help="Images: the DICOM files or folders the studies were loaded from (needed for --only images).",
            show_default=False,
        ),
    ] = None,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact",
            help="Also write the vector indexes again without the rows of removed or replaced vectors, with a "
            "quantizer trained anew for their size (after large deletions, or a corpus grown 10x since).",
        ),
    ] = False,
) -> None:
    """Embed the passages (from the passage table), the entities (from the graph) and, with --from, the
    images (from their DICOM files) again where their vectors are missing, stale or damaged: a damaged
    FAISS index is set aside (renamed) and rebuilt, an interrupted load or an embedder change is caught
    up, BM25 is rebuilt. Metadata, report links and thumbnails of images are kept. Resumable: vectors
    are saved as it goes and a re-run embeds only what is left. Stop `medkg serve` on the same data dir
    first."""
    if only not in (None, "passages", "entities", "images"):
        raise fail(f"--only must be passages, entities or images, not {only!r}")
    if only == "images" and not sources:
        raise fail("image vectors are computed from the pixels: give the DICOM files or folders with --from")
    missing = [str(p) for p in sources or () if not p.exists()]
    if missing:
        raise fail(f"no such file or folder: {', '.join(missing)}")
    with container(embeds=True, writes="medkg reindex") as c:
        if only in (None, "passages"):
            r = c.text_index.reindex(progress=True)
            aside = f"; set aside: {', '.join(map(str, r.set_aside))}" if r.set_aside else ""
            out.print(
                f"passages: {r.passages:,} stored, {r.embedded:,} embedded, {r.removed:,} stale vectors dropped "
                f"({r.seconds:.1f} s){aside}",
                highlight=False,
            )
        if only in (None, "entities"):
            for index in (c.entity_index, c.phrase_index):
                update, moved = index.reindex(c.graph, progress=True)
                aside = f"; set aside: {', '.join(map(str, moved))}" if moved else ""
                out.print(
                    f"{index.name}: {update.total:,} indexed, {update.embedded:,} embedded, {update.removed:,} stale "
                    f"vectors dropped ({update.seconds:.1f} s){aside}",
                    highlight=False,
                )
        if only in (None, "images") and sources:
            _reindex_images(c, sources)
        if compact:
            _compact(c, only)


def _compact(c: Container, only: str | None) -> None:
    import time

    indexes = {"passages": lambda: c.text_index.vectors, "entities": lambda: c.entity_index.index}
    indexes["images"] = lambda: c.image_index.vectors
    for what in [only] if only else ["passages", "entities", "images"]:
        started = time.perf_counter()
        if what == "passages":
            before, after = c.text_index.compact().values()
        else:
            index = indexes[what]()
            before = index.stats()
            index.rebuild()
            after = index.stats()
        out.print(
            f"{what}: compacted {before['rows']:,} rows in {before['segments']:,} segments to {after['rows']:,} rows "
            f"in {after['segments']:,} ({after['kind']}, {time.perf_counter() - started:.1f} s)",
            highlight=False,
        )


def relink(
    force: Annotated[
        bool, typer.Option("--force", help="Link every document again, also those the current linker linked.")
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
) -> None:
    """Link the loaded abstracts and reports again with the entities of the graph as it is now: run it
    after loading an ontology into a store that already holds literature (a load links only with what
    the graph held then), or after an upgrade that changed the linking rules. Mentions no longer found
    end (kept in the history), new ones are added, co-mention evidence follows; nothing is embedded
    again. Documents already linked by the current linker are skipped, so an interrupted run resumes
    and a second run changes nothing. Stop `medkg serve` on the same data dir first."""
    from service.cli.ingest import run_relink

    with container(writes="medkg relink") as c:
        run_relink(c, force=force, progress=progress)


def backup(
    dest: Annotated[Path, typer.Argument(help="The archive to write, e.g. medkg-backup.tar.gz.", dir_okay=False)],
) -> None:
    """The data dir (embedded store, indexes, sessions, de-identification key) as one verified archive.
    Stop `medkg serve` on the same data dir first."""
    from service.backup import BackupError
    from service.backup import backup as run_backup

    try:
        settings = load_settings()
        r = run_backup(settings, dest)
    except (BackupError, SettingsError, GraphStoreError, OSError) as exc:
        raise fail(str(exc)) from None
    graph = "with the graph" if r.graph_included else "without the graph (Neo4j: use neo4j-admin)"
    out.print(f"{r.path}: {r.files} files, {r.bytes / 1e6:.1f} MB, {graph} ({r.seconds:.1f} s)", highlight=False)


def restore(
    src: Annotated[Path, typer.Argument(help="An archive from `medkg backup`.", exists=True, dir_okay=False)],
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty data dir (kept aside).")] = False,
) -> None:
    """Unpack a backup into the data dir after checking every file's checksum."""
    from service.backup import BackupError
    from service.backup import restore as run_restore

    try:
        r = run_restore(load_settings(), src, force=force)
    except (BackupError, SettingsError, OSError) as exc:
        raise fail(str(exc)) from None
    kept = f"; the previous data dir is at {r['kept']}" if r["kept"] else ""
    out.print(f"restored {r['files']} files ({r['backend']} backup){kept}", highlight=False)


def export(
    dest: Annotated[Path, typer.Argument(help="The folder the import files are written to.", file_okay=False)],
    database: Annotated[str, typer.Option(help="The Neo4j database the printed command imports into.")] = "neo4j",
) -> None:
    """The configured graph (e.g. the embedded store after `medkg ingest` runs) as the CSV files of
    `neo4j-admin database import full`, and the command that imports them into an empty or stopped Neo4j
    database: much faster than `medkg ingest` into Neo4j for a first load. The data dir's indexes then
    serve over Neo4j as they are (MEDKG_GRAPH_BACKEND=neo4j)."""
    from kg.graph.neo4j_import import ImportFilesError, write_import_files

    with container() as c:
        try:
            files = write_import_files(c.graph, dest)
        except (ImportFilesError, OSError) as exc:
            raise fail(str(exc)) from None
    out.print(
        f"{files.entities:,} entities, {files.relations:,} relations in {dest} ({files.seconds:.1f} s). Import them "
        f"with the database {database!r} stopped (its current content is replaced):",
        highlight=False,
    )
    out.print(shlex.join(files.command(database)), highlight=False, soft_wrap=True)


def _reindex_images(c: Container, sources: list[Path]) -> None:
    from multimodal.load import reindex_images

    moved: list[Path] = []
    try:
        index = c.image_index
    except VectorIndexError:  # a damaged FAISS or id-map file: set aside, then an empty one
        moved = VectorIndex.set_aside(c.settings.data_dir / "indexes", "images")
        index = c.image_index
    read, r = reindex_images(index, c.pseudonymizer, sources, progress=True)
    aside = f"; set aside: {', '.join(map(str, moved))}" if moved else ""
    out.print(
        f"images: {r.indexed:,} indexed, {r.embedded:,} embedded, {r.removed:,} stale vectors dropped; "
        f"{read.files:,} files read ({r.seconds:.1f} s){aside}",
        highlight=False,
    )
    if r.not_indexed or r.changed:
        out.print(
            f"[yellow]{r.not_indexed:,} image(s) not in the index and {r.changed:,} whose file changed were left "
            "alone: `medkg ingest dicom` adds or updates them[/]"
        )
    if read.errors:
        out.print(f"[yellow]{len(read.errors):,} file(s) could not be read[/]")
    if r.missing:
        out.print(
            f"[bold red]{r.missing:,} indexed image(s) still have no vector:[/] their files were not among those "
            "given; run again with the folders they were loaded from"
        )
        raise typer.Exit(1)


COMMANDS = [reindex, relink, backup, restore, export]
