"""``medkg``: the command-line interface."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kg.curie import CurieError
from kg.embedders import EmbedderError
from kg.graph.base import GraphStoreError
from kg.settings import Settings, SettingsError, load_settings
from kg.vector_index import VectorIndex, VectorIndexError
from service.container import Container

app = typer.Typer(
    name="medkg",
    help="medkg: biomedical knowledge-graph RAG (graph store, retrieval, cited answers).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def container() -> Iterator[Container]:
    """A container whose configuration and store errors end the command with a one-line message."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from None
    c = Container(settings)
    try:
        yield c
    except (GraphStoreError, CurieError, ValueError, OSError, VectorIndexError, EmbedderError) as exc:
        raise fail(str(exc)) from None
    finally:
        try:
            c.close()
        except GraphStoreError:
            pass


def emit(data: Any, as_json: bool, render: Callable[[Any], None] | None = None) -> None:
    if as_json or render is None:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        render(data)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command()
def similar(
    text: str,
    k: Annotated[int, typer.Option(help="How many entities.")] = 10,
) -> None:
    """Entities nearest in meaning to TEXT (the entity vector index)."""
    with container() as c:
        hits = c.entity_index.search(text, k=k)
        names = c.graph.get_entities(i for i, _ in hits)
    emit([{"id": i, "name": names[i].name if i in names else None, "score": round(s, 4)} for i, s in hits], True)


@app.command()
def search(
    query: str,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="How many passages.")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid (BM25 + dense, RRF), bm25 or dense.")] = "hybrid",
    as_json: JsonOpt = False,
) -> None:
    """Passages for QUERY from the ingested abstracts, with their PMIDs."""
    if mode not in ("hybrid", "bm25", "dense"):
        raise fail(f"--mode must be hybrid, bm25 or dense (got {mode!r})")
    with container() as c:
        hits = c.text_index.search(query, k=k, mode=mode, floor=c.settings.search_floor)  # type: ignore[arg-type]
        data = [hit.__dict__ for hit in hits]

    def render(rows: list[dict[str, Any]]) -> None:
        if not rows:
            out.print("no passage matches (is anything ingested? `medkg ingest pubmed PATH`)")
            return
        for i, row in enumerate(rows, 1):
            flag = " [red]RETRACTED[/]" if row["retracted"] else ""
            title = row["title"] or ""
            out.print(f"[bold]{i}. {row['id']}[/] {title} ({row['year'] or 'n.d.'}){flag}", highlight=False)
            out.print(f"   score {row['score']}  cosine {row['dense']}  bm25 {row['bm25']}", highlight=False)
            out.print(f"   {row['text']}", highlight=False, soft_wrap=True)

    emit(data, as_json, render)


@app.command()
def differential(
    terms: Annotated[
        list[str] | None, typer.Argument(help="Observed HPO terms, e.g. HP:0001250 HP:0000252.", show_default=False)
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="An HPO term the patient does not have.")
    ] = None,
    text: Annotated[
        str | None,
        typer.Option(
            "--text",
            help='The patient described in words, linked to HPO terms; what it negates ("no hypotonia") is excluded.',
        ),
    ] = None,
    top_k: Annotated[int, typer.Option("--top", min=1, max=500, help="How many diseases.")] = 10,
    namespace: Annotated[list[str] | None, typer.Option(help="Rank only OMIM, ORPHA or DECIPHER diseases.")] = None,
    gene: Annotated[
        list[str] | None,
        typer.Option("--gene", help="A candidate gene (HGNC symbol): rank only the diseases associated with it."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Diseases (OMIM/ORPHA) ranked for a patient's HPO terms (or a description, --text), with matched
    phenotypes, genes and PMIDs."""
    from kg.curie import normalize_curie
    from kg.differential import disease_namespaces, terms_in_text, terms_mentioned
    from kg.errors import InvalidInput

    if not terms and not text:
        raise fail("give observed HPO terms (HP:...) or --text")
    try:
        namespaces = disease_namespaces(namespace or [])  # omim, MIM, Orphanet... as OMIM, ORPHA
    except InvalidInput as exc:
        raise fail(str(exc)) from None
    with container() as c:
        from_text, excluded_from_text = terms_in_text(c.linker, text) if text else ([], [])
        observed = list(dict.fromkeys([*(normalize_curie(t) for t in terms or []), *from_text]))
        given_excluded = list(dict.fromkeys([*(normalize_curie(t) for t in exclude or []), *excluded_from_text]))
        index = c.phenotype_index
        case = index.read_case(observed, given_excluded)
        known, excluded = case.observed, case.excluded
        if not known and case.ignored:
            why = "; ".join(f"{t}: {w}" for t, w in case.ignored.items())
            raise fail(f"no observed term is a phenotypic abnormality ({why})")
        if not known:
            given = ", ".join(observed) or "none linked from the text"
            raise fail(f"none of the terms is an HPO term in the graph: {given} (run `medkg ingest hpo`)")
        genes, unknown_genes = index.known_genes(gene or [])
        if unknown_genes and not genes:
            raise fail(f"no disease in the graph is associated with {', '.join(unknown_genes)}")
        ranked = index.rank(known, excluded, top_k=top_k, prefixes=namespaces, genes=genes)
        mentioned = terms_mentioned(ranked, known, excluded)
        names = c.graph.get_entities([r.disease for r in ranked] + mentioned)
    data = {
        "observed": known,
        "from_text": from_text,
        "excluded_from_text": excluded_from_text,
        "unknown_terms": case.unknown,
        "ignored_terms": case.ignored,
        "replaced_terms": {**index.replacements(observed), **index.replacements(given_excluded, broaden=False)},
        "excluded": excluded,
        "genes": genes,
        "unknown_genes": unknown_genes,
        "views": index.views(),
        "diseases": [{**r.__dict__, "name": names[r.disease].name if r.disease in names else None} for r in ranked],
        "term_names": {t: names[t].name for t in mentioned if t in names and names[t].name},
    }

    def render(d: dict[str, Any]) -> None:
        named = d["term_names"]
        for label, key in (("from the text", "from_text"), ("negated in the text, excluded", "excluded_from_text")):
            if d[key]:
                err.print(f"{label}: {', '.join(f'{named.get(t, t)} ({t})' for t in d[key])}", highlight=False)
        if d["unknown_terms"]:
            err.print(f"not in the graph, ignored: {', '.join(d['unknown_terms'])}")
        for term, why in d["ignored_terms"].items():
            err.print(f"{named.get(term, term)} ({term}) not counted: {why}", highlight=False)
        for term, now in d["replaced_terms"].items():
            err.print(f"{term} is obsolete, counted as {', '.join(now)}")
        if d["unknown_genes"]:
            err.print(f"no disease in the graph is associated with {', '.join(d['unknown_genes'])}: ignored")
        if d["genes"]:
            err.print(f"only the diseases associated with {', '.join(d['genes'])}")
        if not d["diseases"]:  # only a namespace or the genes leave nothing (or a graph without annotations)
            where = f" in {', '.join(namespaces)}" if namespaces else ""
            where += f" among the diseases of {', '.join(d['genes'])}" if d["genes"] else ""
            out.print(f"no disease ranked{where or ': the graph has no phenotype annotations'}", highlight=False)
        for i, row in enumerate(d["diseases"], 1):
            genes = ", ".join(row["genes"][:5]) or "-"
            out.print(f"[bold]{i}. {row['name']}[/] ({row['disease']})  score {row['score']}  genes: {genes}")
            for q, t, s in row["matches"]:
                observed_name, annotated = d["term_names"].get(q, q), d["term_names"].get(t, t)
                out.print(f"   {observed_name} ({q}) ~ {annotated} ({t})  [{s}]", highlight=False)
            matched = {q for q, _, _ in row["matches"]}
            for q, t, s in row.get("semantic_matches", []):  # close in meaning, no ancestor shared below the roots
                if q not in matched:
                    observed_name, annotated = d["term_names"].get(q, q), d["term_names"].get(t, t)
                    line = f"   {observed_name} ({q}) ≈ {annotated} ({t})  (cosine {s})"
                    out.print(line, highlight=False, markup=False)
            for reason in row["contradictions"][:3]:
                out.print(f"   [yellow]{reason}[/]", highlight=False)
            if row["pmids"]:
                out.print(f"   PMIDs: {', '.join(row['pmids'][:6])}", highlight=False)

    emit(data, as_json, render)


@app.command()
def stats(as_json: JsonOpt = False) -> None:
    """Entity and relation counts of the configured graph store."""
    with container() as c:
        s = c.graph.stats()

    def render(data: dict[str, Any]) -> None:
        out.print(
            f"backend: [bold]{data['backend']}[/]  entities: {data['entities']:,}  "
            f"relations: {data['relations']:,} current, {data['invalidated_relations']:,} invalidated"
        )
        for title, counts in (("category", data["categories"]), ("relation type", data["relation_types"])):
            if counts:
                table = Table(title_justify="left")
                table.add_column(title)
                table.add_column("count", justify="right")
                for name, n in counts.items():
                    table.add_row(name, f"{n:,}")
                out.print(table)

    emit(s.model_dump(), as_json, render)


@app.command()
def config() -> None:
    """The effective configuration (secrets masked)."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from None
    data = json.loads(settings.model_dump_json())
    for name in Settings.model_fields:
        data[f"MEDKG_{name.upper()}"] = data.pop(name)
    emit(data, True)


@app.command()
def entity(
    entity_id: str,
    limit: Annotated[int, typer.Option(help="At most this many relations shown.")] = 200,
    as_json: JsonOpt = False,
) -> None:
    """One entity by CURIE (any source spelling: MIM:154700, Gene::4313, ...) with its current relations."""
    with container() as c:
        found = c.graph.get_entity(entity_id)
        if found is None:
            raise fail(f"no entity {entity_id!r}", code=1)
        nbrs = c.graph.neighbours(found.id, limit=limit)
    data = {**found.model_dump(mode="json"), "relations": [n.model_dump(mode="json") for n in nbrs]}

    def render(d: dict[str, Any]) -> None:
        out.print(f"[bold]{d['id']}[/]  {d['name']}  ({d['category']}{', obsolete' if d['obsolete'] else ''})")
        if d["description"]:
            out.print(d["description"], highlight=False)
        for label in ("synonyms", "xrefs", "sources"):
            if d[label]:
                out.print(f"{label}: " + ", ".join(d[label]), highlight=False)
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for n in d["relations"]:
            groups.setdefault((n["relation"]["type"], n["direction"]), []).append(n)
        for (rel_type, direction), items in sorted(groups.items()):
            arrow = f"-[{rel_type}]->" if direction == "out" else f"<-[{rel_type}]-"
            out.print(f"\n[bold]{arrow}[/] ({len(items)})")
            for n in items:
                rel, other = n["relation"], n["entity"]
                pmids = rel["evidence"].get("pmids") or []
                cited = f"  [{', '.join(pmids[:6])}{' ...' if len(pmids) > 6 else ''}]" if pmids else ""
                neg = "NOT " if rel["negated"] else ""
                out.print(f"  {neg}{other['name']} ({other['id']}){cited}", highlight=False)
        if len(d["relations"]) >= limit:
            out.print(f"(first {limit} relations; --limit for more)")

    emit(data, as_json, render)


@app.command()
def find(
    name: str,
    category: Annotated[str | None, typer.Option(help="Only this category, e.g. Disease.")] = None,
    limit: int = 20,
) -> None:
    """Entities whose name or synonym is NAME (case-insensitive)."""
    with container() as c:
        found = c.graph.find_entities(name, category=category, limit=limit)
    emit([e.model_dump(mode="json") for e in found], True)


@app.command()
def neighbours(
    entity_id: str,
    rel_type: Annotated[list[str] | None, typer.Option("--type", help="Relation type(s) to follow.")] = None,
    direction: Annotated[str, typer.Option(help="out, in or both.")] = "both",
    include_invalid: Annotated[bool, typer.Option(help="Also show invalidated (historic) edges.")] = False,
    limit: int = 50,
) -> None:
    """Neighbours of an entity with the relations that join them."""
    with container() as c:
        found = c.graph.neighbours(
            entity_id,
            rel_types=rel_type,
            direction=direction,  # type: ignore[arg-type]
            include_invalid=include_invalid,
            limit=limit,
        )
    emit([n.model_dump(mode="json") for n in found], True)


@app.command()
def paths(
    source: str,
    target: str,
    max_hops: Annotated[int, typer.Option(help="Hops that are not SAME_AS.")] = 3,
    free_same_as: Annotated[int, typer.Option(help="SAME_AS hops allowed on top, free of charge.")] = 2,
    rel_type: Annotated[list[str] | None, typer.Option("--type", help="Relation type(s) allowed.")] = None,
    limit: int = 10,
    as_json: JsonOpt = False,
) -> None:
    """Bounded paths between two entities (SAME_AS hops free)."""
    with container() as c:
        found = c.graph.paths(
            source, target, max_hops=max_hops, rel_types=rel_type, limit=limit, free_same_as=free_same_as
        )
        names = c.graph.get_entities({n for p in found for n in p.nodes})

    def render(data: list[dict[str, Any]]) -> None:
        if not data:
            out.print("no path")
        for p in data:
            parts = [f"{p['nodes'][0]} ({names[p['nodes'][0]].name})"]
            for rel, node in zip(p["relations"], p["nodes"][1:], strict=True):
                arrow = f"-[{rel['type']}]->" if rel["object"] == node else f"<-[{rel['type']}]-"
                parts.append(f"{arrow} {node} ({names[node].name})")
            out.print(f"cost {p['cost']}: " + " ".join(parts), highlight=False)

    emit([{**p.model_dump(mode="json"), "cost": p.cost} for p in found], as_json, render)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="A clinical question.")],
    session: Annotated[
        str | None, typer.Option("--session", help="A session id to continue, or 'new' to start one.")
    ] = None,
    k: Annotated[int, typer.Option(min=1, max=50, help="Passages at most.")] = 8,
    hops: Annotated[int, typer.Option(min=0, max=4, help="Longest path between linked entities.")] = 2,
    mode: Annotated[str, typer.Option(help="auto (LLM when configured), extractive or llm.")] = "auto",
    budget: Annotated[int | None, typer.Option(min=100, max=16000, help="Tokens of evidence at most.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question from the knowledge graph and the literature, every statement cited."""
    from service.qa.engine import QAOptions, UnknownSession
    from service.qa.llm import LLMError
    from service.qa.render import print_answer

    if mode not in ("auto", "extractive", "llm"):
        raise fail(f"--mode must be auto, extractive or llm, not {mode!r}")
    with container() as c:
        session_id = c.sessions.create().id if session == "new" else session
        try:
            r = c.qa.ask(question, session_id, QAOptions(k=k, hops=hops, mode=mode, budget=budget))  # type: ignore[arg-type]
        except UnknownSession:
            raise fail(f"no session {session_id!r} (unknown or expired): start one with --session new") from None
        except LLMError as exc:
            raise fail(f"the LLM failed ({exc.status}): {exc}", code=3) from None

    def render(_: Any) -> None:
        print_answer(out, r)
        if session_id:
            err.print(f"session: {session_id}")

    emit(r.model_dump(mode="json"), as_json, render)


@app.command()
def report(
    file: Annotated[Path | None, typer.Argument(help="The study: a DICOM file.", dir_okay=False)] = None,
    indication: Annotated[str, typer.Option(help="Why the study was done, e.g. 'chest pain, dyspnea'.")] = "",
    image_id: Annotated[str | None, typer.Option(help="An indexed study (IMG:...) instead of a file.")] = None,
    findings: Annotated[
        str, typer.Option(help="The study's own findings, if you have them: they choose the priors and the impression.")
    ] = "",
    k: Annotated[int, typer.Option(min=1, max=20, help="Prior reports to draw on.")] = 5,
    mode: Annotated[str, typer.Option(help="auto (LLM when configured), extractive or llm.")] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Draft a radiology report (technique, findings, impression) from the most similar prior studies
    and reports and knowledge-graph facts about the indication, every sentence cited."""
    from multimodal.dicom import DicomError, read_dicom
    from service.qa.llm import LLMError
    from service.radiology.generator import UnknownImage

    if file is None and not image_id:
        raise fail("give a DICOM file or --image-id")
    if mode not in ("auto", "extractive", "llm"):
        raise fail(f"--mode must be auto, extractive or llm, not {mode!r}")
    with container() as c:
        image = None
        if file is not None:
            if not file.exists():
                raise fail(f"no such file: {file}")
            try:
                image = read_dicom(file, c.pseudonymizer)
            except DicomError as exc:
                raise fail(f"{file.name}: {exc.reason}") from None
        try:
            r = c.report_generator.generate(
                indication,
                image=image,
                image_id=image_id,
                findings=findings or None,
                k=k,
                mode=mode,  # type: ignore[arg-type]
            )
        except UnknownImage:
            raise fail(f"no indexed image {image_id!r} (run `medkg ingest dicom` first)") from None
        except LLMError as exc:
            raise fail(f"the LLM failed ({exc.status}): {exc}", code=3) from None

    def render(d: dict[str, Any]) -> None:
        out.print(f"[bold]INDICATION:[/] {d['indication'] or '-'}", highlight=False, soft_wrap=True)
        out.print(f"[bold]TECHNIQUE:[/] {d['technique']}", highlight=False, soft_wrap=True)
        out.print(f"[bold]FINDINGS:[/] {d['findings'] or '-'}", highlight=False, soft_wrap=True)
        out.print(f"[bold]IMPRESSION:[/] {d['impression'] or '-'}", highlight=False, soft_wrap=True)
        if d["context"]:
            out.print(f"[bold]CLINICAL CONTEXT:[/] {d['context']}", highlight=False, soft_wrap=True)
        label = "insufficient evidence" if d["insufficient_evidence"] else f"confidence {d['confidence']:.2f}"
        out.print(f"[dim]({d['mode']}, {label}; {len(d['priors'])} prior reports)[/]")
        for p in d["priors"]:
            out.print(f"  prior {p['doc_id']} ({p['score']:.2f}, by {' and '.join(p['via'])})", highlight=False)

    emit(r.model_dump(mode="json"), as_json, render)


@app.command()
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


@app.command()
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
    with container() as c:
        if only in (None, "passages"):
            r = c.text_index.reindex(progress=True)
            aside = f"; set aside: {', '.join(map(str, r.set_aside))}" if r.set_aside else ""
            out.print(
                f"passages: {r.passages:,} stored, {r.embedded:,} embedded, {r.removed:,} stale vectors dropped "
                f"({r.seconds:.1f} s){aside}",
                highlight=False,
            )
        if only in (None, "entities"):
            update, moved = c.entity_index.reindex(c.graph, progress=True)
            aside = f"; set aside: {', '.join(map(str, moved))}" if moved else ""
            out.print(
                f"entities: {update.total:,} indexed, {update.embedded:,} embedded, {update.removed:,} stale vectors "
                f"dropped ({update.seconds:.1f} s){aside}",
                highlight=False,
            )
        if only in (None, "images") and sources:
            _reindex_images(c, sources)


@app.command()
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
    from service.ingest_cli import run_relink

    with container() as c:
        run_relink(c, force=force, progress=progress)


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


@app.command()
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


@app.command()
def demo(
    shared_data: Annotated[Path | None, typer.Option(help="The shared data folder (default: ../shared/data).")] = None,
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="Build the entity vector index.")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    serve_after: Annotated[bool, typer.Option("--serve/--no-serve", help="Serve the API afterwards.")] = True,
) -> None:
    """Load HPO (and, where present, Disease Ontology, PharmacotherapyDB and PubMed abstracts), index,
    answer three clinical questions with citations, then serve the API."""
    from service.demo import demo as run_demo
    from service.demo import find_shared_data

    with container() as c:
        run_demo(c, find_shared_data(shared_data), embed=embed, progress=progress)
    if serve_after:
        serve(host=None, port=None)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default MEDKG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default MEDKG_API_PORT).")] = None,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs)."""
    import uvicorn

    from service.api.app import create_app

    try:
        settings = load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from None
    settings = settings.model_copy(
        update={"api_host": host or settings.api_host, "api_port": port or settings.api_port}
    )
    root = f"http://{settings.api_host}:{settings.api_port}"
    out.print(f"serving on {root}: web pages at {root}/ (ask, /reports, /differential, /eval), API docs at /docs")
    # proxy_headers off: MEDKG_TRUSTED_PROXIES alone decides whose X-Forwarded-For is believed (uvicorn's own
    # default trusts any loopback peer's header and would hide the socket peer from service/api/security.py)
    uvicorn.run(
        create_app(settings, warm=True),
        host=settings.api_host,
        port=settings.api_port,
        log_level="info",
        proxy_headers=False,
    )


eval_app = typer.Typer(help="Evaluations on the configured store.", no_args_is_help=True)
_EVAL_OUT_HELP = "Output folder (default: MEDKG_EVAL_DIR, which the page /eval plots; eval-results if unset)."


def _eval_dir(out: Path | None) -> Path:
    """``--out``, else the configured ``MEDKG_EVAL_DIR``: where the page /eval looks."""
    if out is not None:
        return out
    try:
        return load_settings().eval_dir
    except SettingsError as exc:
        raise fail(str(exc)) from None


@eval_app.command("phenopackets")
def eval_phenopackets(
    file: Annotated[Path, typer.Argument(help="Phenopacket cases, one JSON per line.", exists=True, dir_okay=False)],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    out: Annotated[Path | None, typer.Option(help=_EVAL_OUT_HELP, file_okay=False)] = None,
    text: Annotated[
        bool, typer.Option("--text", help="Also write each case as text, link it back (with negation) and rank.")
    ] = False,
) -> None:
    """Differential diagnosis on published cases: top-1/3/10 and MRR beside two baselines (Resnik
    best-match average, pyhpo's set similarity), with 95% intervals of the differences; the figures go
    to OUT/<FILE's stem>.differential.json, which the web page /eval plots."""
    # eval drives the service layer; imported here, when the command runs, not at start-up.
    from eval.phenopackets import evaluate, report, save

    out = _eval_dir(out)
    try:  # before the run, not after it
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create the folder {out}: {exc.strerror or exc}") from None
    with container() as c:
        if not c.phenotype_index.diseases:
            raise fail("no disease annotations in the graph: run `medkg ingest hpo` first")
        result = evaluate(c.phenotype_index, c.graph, file, limit, linker=c.linker if text else None)
    report(result)
    Console(highlight=False, soft_wrap=True).print(f"wrote {save(result, out, file)}")


def _qa_eval_command(benchmark: str, summary: str) -> None:
    """``medkg eval <benchmark> FILE``: one QA benchmark through one answer mode (eval/qa_bench.py)."""

    @eval_app.command(
        benchmark,
        short_help=f"{summary}: accuracy by answer mode (offline, closed-book, rag, kg-rag).",
        help=f"{summary}: accuracy (95% CI), per subject, parse rate, latency, tokens; per-question JSONL, "
        "metrics and summary.md in --out. Resumes: questions already answered there are skipped.",
    )
    def command(
        file: Annotated[Path, typer.Argument(help="The questions (or MIRAGE's benchmark.json).", dir_okay=False)],
        mode: Annotated[str, typer.Option(help="offline (no LLM), closed-book, rag (passages), kg-rag.")] = "offline",
        limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
        url: Annotated[str | None, typer.Option(help="A running medkg server: POST /v1/qa (kg-rag).")] = None,
        out: Annotated[Path | None, typer.Option(help=_EVAL_OUT_HELP, file_okay=False)] = None,
        k: Annotated[int, typer.Option(min=1, max=50, help="Passages to retrieve at most.")] = 8,
        hops: Annotated[int, typer.Option(min=0, max=4, help="Longest path between linked entities.")] = 2,
        budget: Annotated[int | None, typer.Option(min=100, max=16000, help="Evidence tokens at most.")] = None,
        context: Annotated[bool, typer.Option(help="PubMedQA: with the abstract (reasoning-required).")] = True,
        fresh: Annotated[bool, typer.Option("--fresh", help="Start over instead of resuming.")] = False,
        json_schema: Annotated[bool, typer.Option("--json-schema/--free-text", help="LLM answer format.")] = True,
        api_key: Annotated[
            str | None, typer.Option(envvar="MEDKG_EVAL_API_KEY", help="Key of the --url server.")
        ] = None,
    ) -> None:
        from eval.qa_bench import EvalError, run_cli, summary_line

        try:
            result = run_cli(
                benchmark, file, mode=mode, limit=limit, url=url, out=_eval_dir(out), k=k, hops=hops, budget=budget,
                context=context, fresh=fresh, json_schema=json_schema, api_key=api_key,
            )  # fmt: skip
        except EvalError as exc:
            raise fail(str(exc)) from None
        out_console = Console(highlight=False, soft_wrap=True)
        out_console.print(summary_line(result))
        files = result["files"]
        out_console.print(f"wrote {files['jsonl']}, {files['summary']}, {files['report']}")
        if result["interrupted"]:
            raise fail("interrupted: run the same command again to resume", code=130)


for _name, _summary in (
    ("medqa", "MedQA-USMLE"),
    ("medmcqa", "MedMCQA"),
    ("mmlu", "MMLU-Med"),
    ("pubmedqa", "PubMedQA yes/no/maybe"),
    ("kgrag-mcq", "KG-RAG gene multiple choice"),
    ("kgrag-tf", "KG-RAG true/false"),
):
    _qa_eval_command(_name, _summary)


@eval_app.command("plot")
def eval_plot(
    folder: Annotated[
        Path | None, typer.Argument(help="An output folder of `medkg eval` (default: MEDKG_EVAL_DIR).", file_okay=False)
    ] = None,
    out: Annotated[Path | None, typer.Option(help="The HTML file (default: FOLDER/report.html).")] = None,
) -> None:
    """Plot the runs in FOLDER (accuracy by dataset and mode, latency distributions, differential
    diagnosis runs) as one self-contained HTML page; the web page /eval shows the same charts for
    MEDKG_EVAL_DIR."""
    from service.web.eval_charts import collect_differential, collect_runs, render_report

    folder = _eval_dir(folder)
    if not folder.is_dir():
        raise fail(f"{folder} is not a folder: run `medkg eval medqa FILE --out {folder}` first")
    target = out or folder / "report.html"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_report(folder), encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {target}: {exc.strerror or exc}") from None
    runs = len(collect_runs(folder)) + len(collect_differential(folder))
    Console(highlight=False, soft_wrap=True).print(f"wrote {target} ({runs} runs)")


@eval_app.command("pubmedqa-retrieval")
def eval_pubmedqa_retrieval(
    file: Annotated[Path | None, typer.Argument(help="PubMedQA JSON (default: the shared dev file).")] = None,
    distractors: Annotated[str | None, typer.Option(help="More abstracts (PubMed XML); '' for none.")] = None,
    floor: Annotated[float | None, typer.Option(help="Similarity floor of the floored hybrid run.")] = None,
    out: Annotated[Path | None, typer.Option(help=_EVAL_OUT_HELP, file_okay=False)] = None,
) -> None:
    """PubMedQA gold-abstract retrieval: Recall@1/5 and MRR of BM25, dense and hybrid (eval/pubmedqa_retrieval.py)."""
    from eval.pubmedqa_retrieval import main as retrieval_main

    out = _eval_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create the folder {out}: {exc.strerror or exc}") from None
    argv = [f"--file={file}"] if file else []
    argv += [f"--distractors={distractors}"] if distractors is not None else []
    argv += [f"--floor={floor}"] if floor is not None else []
    code = retrieval_main([*argv, "--json", str(out / "pubmedqa-retrieval.json")])
    if code:
        raise typer.Exit(code)


def _register_subcommands() -> None:
    from service.ingest_cli import app as ingest_app

    app.add_typer(ingest_app, name="ingest")
    app.add_typer(eval_app, name="eval")


_register_subcommands()


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
