"""Showing results to people on a terminal: an answer with its citations, what a load did, a report
draft. The use cases return these results; only the CLI prints them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # what is printed: imported where it is printed, so that `medkg --help` stays fast
    from ingest.pubmed.distributed import RayLoad
    from ingest.summary import IngestSummary
    from kg.entity_index import IndexUpdate
    from service.demo import Note, Outcome, Step
    from service.ingestion import ImagesLoad, LiteratureLoad, Relink, ReportsLoad, SourceLoad
    from service.qa.engine import QAResponse
    from service.radiology.generator import GeneratedReport


def print_answer(console: Console, r: QAResponse, show_timings: bool = True) -> None:
    console.print(f"[bold]Q:[/] {r.question}", highlight=False)
    if r.expanded_query != r.question:
        console.print(f"[dim]searched as: {r.expanded_query}[/]", highlight=False)
    label = "insufficient evidence" if r.insufficient_evidence else f"confidence {r.confidence:.2f}"
    console.print(f"[bold]A[/] ({r.mode}, {label}): {r.answer}", highlight=False, soft_wrap=True)
    for c in r.citations:
        title = f" {c.title}" if c.kind == "passage" and c.title else ""
        text = " ".join(c.text.split())
        text = text if c.kind == "kg" else text[:200] + ("..." if len(text) > 200 else "")
        console.print(f"  [{c.id}]{title}", highlight=False, soft_wrap=True)
        console.print(f"      {text}", highlight=False, soft_wrap=True)
        if c.url:
            console.print(f"      {c.url}", highlight=False)
    if r.dropped_citations:
        console.print(f"  [yellow]dropped (not in the evidence):[/] {', '.join(r.dropped_citations)}", highlight=False)
    for p in r.kg_paths[:3]:
        hops = [p.nodes[0]["name"]]
        for step, node in zip(p.steps, p.nodes[1:], strict=True):
            hops.append(f"-[{step.type}]- {node['name']} ({node['id']})")
        console.print("  path: " + " ".join(hops), highlight=False, soft_wrap=True)
    if show_timings:
        stages = ", ".join(f"{k} {v:.0f}" for k, v in r.timings_ms.items() if k != "total")
        console.print(
            f"[dim]{r.timings_ms.get('total', 0):.0f} ms ({stages}); {r.evidence.items} evidence items, "
            f"{r.evidence.tokens} tokens[/]",
            highlight=False,
        )


def print_summary(console: Console, report: IngestSummary) -> None:
    table = Table(title=f"{report.source}: done in {report.seconds:.1f} s", title_justify="left")
    for column in ("", "added", "updated", "unchanged", "invalidated", "skipped"):
        table.add_column(column, justify="right" if column else "left")
    for label, s in (("entities", report.entities), ("relations", report.relations)):
        skipped = ", ".join(f"{n:,} {why}" for why, n in s.skipped.items()) or "0"
        table.add_row(label, f"{s.added:,}", f"{s.updated:,}", f"{s.unchanged:,}", f"{s.invalidated:,}", skipped)
    console.print(table)
    if report.read:
        console.print("read: " + ", ".join(f"{n:,} {what}" for what, n in report.read.items()), highlight=False)
    if report.notes:
        console.print("notes: " + ", ".join(f"{n:,} {what}" for what, n in report.notes.items()), highlight=False)
    if report.problem_count:
        console.print(f"[yellow]{report.problem_count:,} problem(s), skipped; the rest loaded:[/]")
        for p in report.problems[:20]:
            console.print(f"  {p}", highlight=False, soft_wrap=True)
        if report.problem_count > 20:
            console.print(f"  ... and {report.problem_count - 20:,} more")


def print_timings(console: Console, report: IngestSummary) -> None:
    if report.timings:
        console.print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items()), highlight=False)


def print_entity_index(console: Console, update: IndexUpdate) -> None:
    console.print(
        f"{update.label}: {update.embedded:,} embedded, {update.unchanged:,} unchanged, "
        f"{update.total:,} in the index ({update.seconds:.1f} s)",
        highlight=False,
    )


def print_source_load(console: Console, loaded: SourceLoad) -> None:
    print_summary(console, loaded.summary)
    if loaded.documents_to_relink:
        console.print(
            f"[yellow]the {loaded.documents_to_relink:,} documents loaded before were linked with the entities the "
            "graph held then: `medkg relink` links them with these too[/]"
        )
    for update in (loaded.entity_index, loaded.phrase_index):
        if update is not None:
            print_entity_index(console, update)


def print_literature_load(console: Console, loaded: LiteratureLoad) -> None:
    print_summary(console, loaded.summary)
    if loaded.entity_index is not None:
        u = loaded.entity_index
        console.print(f"entity index: {u.embedded:,} embedded, {u.total:,} in the index", highlight=False)
    console.print(f"text index: {loaded.documents:,} documents, {loaded.passages:,} passages", highlight=False)
    print_timings(console, loaded.summary)


def print_ray_load(console: Console, loaded: RayLoad, documents: int, passages: int) -> None:
    p = loaded.prepared
    where = loaded.address or f"local Ray, {loaded.workers} worker(s)"
    rate = f", {p.articles / p.seconds:.1f} articles/s" if p.seconds else ""
    console.print(
        f"ray ({where}): {loaded.shards:,} shard(s), {loaded.merged_before:,} merged before; prepared "
        f"{p.shards:,} ({p.articles:,} articles, {p.passages:,} passages, {p.seconds:.1f} s{rate}); "
        f"merged {loaded.merged:,} in {loaded.merge_seconds:.1f} s (shard files: {loaded.shard_dir})",
        highlight=False,
    )
    print_summary(console, loaded.summary)
    console.print(f"text index: {documents:,} documents, {passages:,} passages", highlight=False)
    print_timings(console, loaded.summary)


def print_relink(console: Console, relinked: Relink) -> None:
    for report in relinked.summaries:
        r = report.relations
        if r.added or r.updated or r.invalidated or report.problem_count:
            print_summary(console, report)
            print_timings(console, report)
        else:
            read = ", ".join(f"{n:,} {what}" for what, n in report.read.items() if n) or "nothing to relink"
            console.print(f"{report.source}: no link changed ({read}; {report.seconds:.1f} s)", highlight=False)
    console.print(f"linker signature {relinked.signature}", highlight=False)


def print_images_load(console: Console, loaded: ImagesLoad) -> None:
    r = loaded.result
    console.print(
        f"dicom: {r.files:,} files, {r.images:,} images ({r.added:,} added, {r.changed:,} changed, "
        f"{r.unchanged:,} unchanged, {r.embedded:,} embedded; {r.duplicates:,} duplicate instances skipped), "
        f"{r.reports_linked:,} paired with their report, "
        + (f"{r.edges_ended:,} edges ended that corrected files no longer state, " if r.edges_ended else "")
        + f"{loaded.in_index:,} in the image index ({r.seconds:.1f} s)",
        highlight=False,
    )
    if r.errors:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.error_kinds.items()))
        console.print(f"[yellow]{len(r.errors):,} file(s) skipped ({kinds}); the rest loaded:[/]")
        for e in r.errors[:20]:
            console.print(f"  {e}", highlight=False, soft_wrap=True)


def print_reports_load(console: Console, loaded: ReportsLoad) -> None:
    result = loaded.result
    print_summary(console, result)
    console.print(
        f"reports: {result.documents_added:,} added, {result.documents_changed:,} changed, "
        f"{result.documents_unchanged:,} unchanged"
        + (f", {result.documents_retired:,} retired (not in the file)" if loaded.replace else "")
        + f"; {loaded.in_table:,} in the report table",
        highlight=False,
    )


def print_draft(console: Console, r: GeneratedReport) -> None:
    """A report draft in short, as the demo shows it (``medkg report`` prints every section)."""
    console.print(f"[bold]TECHNIQUE:[/] {r.technique}", highlight=False)
    console.print(f"[bold]FINDINGS:[/] {r.findings or '-'}", highlight=False)
    console.print(f"[bold]IMPRESSION:[/] {r.impression or '-'}", highlight=False)
    for p in r.priors:
        console.print(f"  prior {p.doc_id} ({p.score:.2f}, by {' and '.join(p.via)}): {p.impression}", highlight=False)


def show_demo(console: Console, log: Console, event: Step | Note | Outcome) -> None:
    """One event of ``service.demo.demo``: what a load did on ``log`` (as ``medkg ingest`` prints it, on
    stderr), the rest on ``console``."""
    from kg.entity_index import IndexUpdate
    from service.demo import Note, Step
    from service.ingestion import ImagesLoad, LiteratureLoad, Relink, ReportsLoad, SourceLoad
    from service.qa.engine import QAResponse
    from service.radiology.generator import GeneratedReport

    if isinstance(event, Step):
        console.rule(event.title)
    elif isinstance(event, Note):
        console.print(f"[bold]{event.label}[/] {event.text}" if event.label else event.text, highlight=False)
    elif isinstance(value := event.value, QAResponse):
        console.print()
        print_answer(console, value)
    elif isinstance(value, GeneratedReport):
        print_draft(console, value)
    elif isinstance(value, IndexUpdate):
        print_entity_index(console, value)
    else:
        show = {
            SourceLoad: print_source_load,
            LiteratureLoad: print_literature_load,
            Relink: print_relink,
            ImagesLoad: print_images_load,
            ReportsLoad: print_reports_load,
        }[type(value)]
        show(log, value)
