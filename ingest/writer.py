"""Writes a loader's stream (entities, relations, ended facts, releases, problems, counts) into the graph
store in batches, with progress and a report; every write is an idempotent upsert, so a re-run changes nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ingest.summary import IngestSummary, Problem
from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore
from kg.model import SAME_AS, Entity, Relation
from kg.progress import progress_bar

__all__ = ["Complete", "Ended", "Item", "OlderRelease", "Supersedes", "ingest", "link_xrefs"]

_DATED = re.compile(r"\d{4}-\d{2}-\d{2}")  # a release's date: the part of a source after its family


@dataclass(frozen=True)
class Ended:
    """The current edge with ``relation``'s key (subject, type, object, source) no longer holds."""

    relation: Relation


@dataclass(frozen=True)
class Supersedes:
    """This load is the whole of release ``source`` (e.g. ``hpo:2025-01-16``): current edges of the
    older releases of the same ``family`` (``hpo:``: earlier dates, and an undated ``hpo:unknown``;
    an undated load supersedes nothing) are ended, but for
    those of ``kept_types``, which the load did not read (HPO without its gene file)."""

    source: str
    family: str
    kept_types: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Complete:
    """This load states every edge of ``source`` (a file loaded with ``--replace``): the current edges
    of ``source`` it does not state again are ended once it is written, and with a ``family``
    (``doid:``) those of its older releases too (``doid:2016-06-24`` before ``doid:2026-07-31``). Comes
    before those edges; a load with problems ends nothing. The load's entities replace (not merge with)
    what ``source`` alone stated of them, but for ``entities=False``: a former name of the source whose
    edges the load restates under its new name, but whose entity statements it shared with other loads."""

    source: str
    family: str | None = None
    entities: bool = True


Item = Entity | Relation | Ended | Supersedes | Complete | Problem | tuple[str, int]


class OlderRelease(InvalidInput):
    """A file loaded whole (:class:`Complete`) is a release older than one of its family the graph holds
    current: loading it would state again, as current, what the newer release changed or dropped (and
    give its entities the older wording). Raised before anything of the load is written."""


def _older_release(source: str, than: str, family: str) -> bool:
    """Whether ``source`` is a release of ``family`` older than release ``than``: a dated release
    supersedes older dates and an undated one (``hpo:unknown``); an undated release supersedes none."""
    if not source.startswith(family) or source == than:
        return False
    theirs, mine = source.removeprefix(family), than.removeprefix(family)
    return bool(_DATED.fullmatch(mine)) and (not _DATED.fullmatch(theirs) or theirs < mine)


def _newer_releases(store: BaseGraphStore, complete: Complete) -> list[str]:
    """The current sources of ``complete``'s release family newer than it (dated releases only: an
    undated one, ``doid:unknown``, is never newer)."""
    family = complete.family
    if not family:
        return []
    return sorted(
        s
        for s in store.current_sources()
        if s.startswith(family) and _DATED.fullmatch(s.removeprefix(family)) and s > complete.source
    )


def ingest(
    store: BaseGraphStore,
    items: Iterable[Item],
    source: str,
    *,
    progress: bool = True,
    entity_batch: int = 20_000,
    relation_batch: int = 200_000,
    link: bool = True,
) -> IngestSummary:
    """Write ``items`` to ``store``; then (``link``) turn xrefs into ``SAME_AS`` edges.

    Entities are written as they come, in batches; relations are held until their batch is full and
    written after the entities seen so far, so a loader that yields a file's entities before its relations
    never loses an edge to ordering. ``Ended``, ``Complete`` and ``Supersedes`` end edges after the writes
    (a ``valid_to``, never a deletion); the last two only when the load had no problem: a line it could not
    read may hold a fact it still states, so nothing is ended and the report says so.

    The whole load runs in the store's ``bulk()`` (Ladybug: no checkpoint at each commit; one at the end):
    writing all of HPO took 43.5-49.7 s with a checkpoint at every commit, 23.6-23.8 s without (AMD EPYC,
    one session). A load killed part way leaves a consistent graph that may lack part of what it wrote, and
    running it again writes it (every write is an upsert)."""
    with store.bulk():
        return _ingest(store, items, source, progress, entity_batch, relation_batch, link)


def _ingest(
    store: BaseGraphStore,
    items: Iterable[Item],
    source: str,
    progress: bool,
    entity_batch: int,
    relation_batch: int,
    link: bool,
) -> IngestSummary:
    report = IngestSummary(source=source)
    started = time.perf_counter()
    entities: list[Entity] = []
    relations: list[Relation] = []
    ended: list[Relation] = []
    supersedes: list[Supersedes] = []
    stated: dict[str, set[str]] = {}  # source loaded whole (Complete) -> the keys of its edges in this load
    whole: list[Complete] = []
    replacing: set[str] = set()  # the sources whose statements of an entity this load replaces (Complete)
    written: set[str] = set()  # ids of the entities this load has replaced: a later batch merges with them

    def flush_entities() -> None:
        if entities:
            t0 = time.perf_counter()
            if replacing:  # an entity's statement is replaced once per load; its rows in a later batch add to it
                again = [e for e in entities if e.id in written]
                first = [e for e in entities if e.id not in written]
                written.update(e.id for e in first)
                report.entities += store.upsert_entities(first, replacing=replacing)
                if again:
                    report.entities += store.upsert_entities(again)
            else:
                report.entities += store.upsert_entities(entities)
            report.timed("write entities", time.perf_counter() - t0)
            entities.clear()

    def flush_relations() -> None:
        flush_entities()
        if relations:
            t0 = time.perf_counter()
            report.relations += store.upsert_relations(relations)
            report.timed("write relations", time.perf_counter() - t0)
            relations.clear()

    with progress_bar(desc=f"ingest {source}", unit=" items", disable=not progress, mininterval=0.5) as bar:
        for item in items:
            if isinstance(item, Entity):
                entities.append(item)
                if len(entities) >= entity_batch:
                    flush_entities()
            elif isinstance(item, Relation):
                relations.append(item)
                if (keys := stated.get(item.source)) is not None:
                    keys.add(item.key)
                if len(relations) >= relation_batch:
                    flush_relations()
            elif isinstance(item, Ended):
                ended.append(item.relation)
            elif isinstance(item, Supersedes):
                supersedes.append(item)
            elif isinstance(item, Complete):
                if newer := _newer_releases(store, item):
                    raise OlderRelease(
                        f"the graph holds {', '.join(newer)}, newer than {item.source}: loading the older file "
                        "whole would make current again what the newer release changed or dropped; load it "
                        "into another data dir (MEDKG_DATA_DIR)"
                    )
                stated.setdefault(item.source, set())
                whole.append(item)
                if item.entities:
                    replacing.add(item.source)
                    if item.family:  # and its older releases'
                        replacing.add(item.family)
            elif isinstance(item, Problem):
                report.problem(item)
            else:
                what, n = item
                report.count(what, n)
                continue
            bar.update(1)
        flush_relations()
    if ended:
        t0 = time.perf_counter()
        report.relations.invalidated += store.invalidate_relations(ended)
        report.timed("end relations", time.perf_counter() - t0)
    if whole and report.problem_count:  # a line it could not read may hold an edge it still states
        report.note("--replace: nothing ended, the file had problems (fix them and load it again)")
        whole.clear()
    for complete in whole:
        t0 = time.perf_counter()
        n = store.end_source(complete.source, keep=stated[complete.source])
        report.relations.invalidated += n
        report.count(f"edges of {complete.source} the file no longer states (ended)", n)
        if complete.family:
            supersedes.append(Supersedes(complete.source, complete.family))
        report.timed("end what the file no longer states", time.perf_counter() - t0)
    if supersedes and report.problem_count:  # a line it could not read may hold a fact it still states
        report.note("newer release: older releases not ended, the files had problems (fix them and load again)")
        supersedes.clear()
    if supersedes:
        t0 = time.perf_counter()
        current = store.current_sources()
        for release in supersedes:
            for older in (s for s in current if _older_release(s, release.source, release.family)):
                n = store.end_source(older, keep_types=release.kept_types)
                report.relations.invalidated += n
                report.count(f"edges of the older release {older} (ended)", n)
        report.timed("end older releases", time.perf_counter() - t0)
    if link:
        t0 = time.perf_counter()
        link_xrefs(store, report, progress=progress)
        report.timed("link xrefs", time.perf_counter() - t0)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def link_xrefs(store: BaseGraphStore, report: IngestSummary, page: int = 20_000, progress: bool = True) -> None:
    """Make every xref between two entities of the graph a ``SAME_AS`` edge (idempotent).

    Runs over the whole graph, not only the last load, so loading sources in any order ends with
    the same edges (an OMIM xref in the Disease Ontology links once OMIM diseases arrive from HPO).
    """
    after = ""
    links: list[Relation] = []
    with progress_bar(desc="link xrefs", unit=" entities", disable=not progress, mininterval=0.5) as bar:
        while batch := store.scan_entities(after=after, limit=page, with_xrefs=True):
            after = batch[-1].id
            present = store.existing({x for e in batch for x in e.xrefs})
            for entity in batch:
                for xref in entity.xrefs:
                    if xref in present and xref != entity.id:
                        links.append(Relation(subject=entity.id, type=SAME_AS, object=xref, source="xref"))
                    else:
                        report.note("xrefs to entities not in the graph")
            bar.update(len(batch))
    if links:
        report.relations += store.upsert_relations(links)
    report.count("xref links", len(links))
