"""BaseGraphStore: the database-independent half of every adapter, and the interface all code types
against (the adapters subclass it; there is no separate Protocol). Errors live in ``kg.graph.errors``,
row conversion in ``kg.graph.rows``; both are re-exported here."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import ModuleType
from typing import Any, Literal

from kg.curie import normalize_curie
from kg.errors import InvalidInput
from kg.graph.errors import TRANSACTION_ABORTED, GraphStoreError, GraphStoreLocked, GraphStoreUnavailable
from kg.graph.rows import (
    entity_to_row,
    key_rows,
    relation_to_row,
    row_to_entity,
    row_to_relation,
    same_statement,
)
from kg.model import (
    SAME_AS,
    Direction,
    Entity,
    GraphPath,
    GraphStats,
    Neighbour,
    Relation,
    Subgraph,
    WriteSummary,
    format_time,
    name_key,
    utc_now,
)

__all__ = [
    "TRANSACTION_ABORTED",
    "BaseGraphStore",
    "GraphStoreError",
    "GraphStoreLocked",
    "GraphStoreUnavailable",
    # re-exported from kg.graph.rows
    "entity_to_row",
    "key_rows",
    "relation_to_row",
    "row_to_entity",
    "row_to_relation",
]


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _relation_order(rel: Relation) -> tuple[str, str]:
    return (rel.key, format_time(rel.valid_from) if rel.valid_from else "")


class BaseGraphStore(ABC):
    """Database-independent logic; subclasses supply the primitives below and their Cypher module,
    which names the same fragments in each dialect (CURRENT_FILTER, TYPE_FILTER, SUBJECT_FILTER, ...).

    An adapter implements a handful of primitives (a statement runner, fetch, insert, update, the
    expand and path queries, transactions) in its own Cypher dialect; this class turns them into the
    public operations so that both adapters give the same answers to the same calls:

    * upserts are idempotent: an entity is merged with what is stored (lists are unions); a relation
      has one *current* edge per ``(subject, type, object, source)`` key. Re-stating it unchanged does
      nothing, re-stating it with new evidence updates it in place, and contradicting it (the
      ``negated`` flag flips) invalidates the stored edge (sets ``valid_to``) and adds a new one. Edges
      are never deleted by an upsert.
    * "current" queries see only edges whose ``valid_to`` is null; history stays queryable.
    * paths are simple, undirected, bounded by ``max_hops`` hops that are not ``SAME_AS`` (up to
      ``free_same_as`` ``SAME_AS`` hops come free), ordered by cost, length, then node ids.
    """

    backend: str = "abstract"
    cypher: ModuleType

    def __init__(self, batch_size: int = 5000, path_candidate_cap: int = 5000) -> None:
        self.batch_size = batch_size
        self.path_candidate_cap = path_candidate_cap
        # Transaction state is per thread: API requests run in a thread pool and must not join
        # each other's transactions.
        self._local = threading.local()

    @property
    def _batch_depth(self) -> int:
        return getattr(self._local, "batch_depth", 0)

    @_batch_depth.setter
    def _batch_depth(self, value: int) -> None:
        self._local.batch_depth = value

    # ---- primitives --------------------------------------------------------------------------
    @abstractmethod
    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run one statement (in this thread's transaction, if any) and return its rows."""

    @abstractmethod
    def _fetch_entities(self, ids: Sequence[str]) -> list[dict[str, Any]]: ...
    @abstractmethod
    def _insert_entities(self, rows: Sequence[dict[str, Any]]) -> None: ...
    @abstractmethod
    def _update_entities(self, rows: Sequence[dict[str, Any]]) -> None: ...
    @abstractmethod
    def _existing_ids(self, ids: Sequence[str]) -> set[str]: ...
    @abstractmethod
    def _scan_entities(self, after: str, limit: int, with_xrefs: bool) -> list[dict[str, Any]]:
        """Entities with id > ``after`` in id order (only those with xrefs, if asked)."""

    @abstractmethod
    def _find_by_key(self, key: str, category: str | None, limit: int) -> list[dict[str, Any]]: ...
    @abstractmethod
    def _current_relations(self, rels: Sequence[Relation]) -> list[dict[str, Any]]:
        """Current stored edges whose key equals the key of one of ``rels``."""

    @abstractmethod
    def _create_relations(self, rows: Sequence[dict[str, Any]]) -> None:
        """Add edges for keys that have no current edge."""

    @abstractmethod
    def _replace_relations(self, rows: Sequence[dict[str, Any]]) -> None:
        """Make each row the current edge of its key, in place of the current one."""

    @abstractmethod
    def _invalidate_keys(self, rows: Sequence[dict[str, Any]], at: str) -> int:
        """Set ``valid_to`` on the current edges of the rows' keys; returns how many."""

    @abstractmethod
    def _expand_query(self, n_ids: int, direction: Direction, filters: str, brief: bool = False) -> str:
        """The statement returning ``from id, relation columns, neighbour columns`` for ``$ids``,
        ordered by from id, type, neighbour, key, valid_from and limited to ``$limit``; ``brief``: the
        neighbour's :data:`kg.graph.rows.BRIEF_ENTITY_COLUMNS` only."""

    @abstractmethod
    def _expand_row(self, row: list[Any], brief: bool = False) -> tuple[str, dict[str, Any], dict[str, Any]]: ...

    def _expand(
        self,
        ids: Sequence[str],
        rel_types: Sequence[str] | None,
        direction: Direction,
        include_invalid: bool,
        limit: int,
        brief: bool = False,
    ) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """``(from_id, relation row, neighbour entity row)`` of the current (or all) edges of ``ids``
        (``brief``: the neighbour's id, name and category only)."""
        params: dict[str, Any] = {"ids": list(ids), "limit": limit}
        filters = self._expand_filters(rel_types, include_invalid, params)
        return [
            self._expand_row(row, brief)
            for row in self._run(self._expand_query(len(ids), direction, filters, brief), params)
        ]

    @abstractmethod
    def _path_candidates(
        self, source: str, target: str, shortest: int, longest: int, rel_types: Sequence[str] | None, cap: int
    ) -> list[tuple[list[str], list[dict[str, Any]]]]:
        """Up to ``cap`` undirected paths of ``shortest``..``longest`` hops over current, non-negated
        edges, in the database's order (which is not shortest first)."""

    @abstractmethod
    def _read_relations(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The relation rows of a ``RELATIONS_BY_ENDPOINTS`` query (see ``_relation_rows``)."""

    @abstractmethod
    def _begin(self) -> None: ...
    @abstractmethod
    def _commit(self) -> None: ...
    @abstractmethod
    def _rollback(self) -> None: ...
    @abstractmethod
    def clear(self) -> None:
        """Remove every entity and relation (tests, re-initialisation)."""

    @abstractmethod
    def close(self) -> None: ...

    # ---- transactions ------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[BaseGraphStore]:
        """One transaction: everything written inside commits together, or not at all.

        Nested ``batch()`` blocks join the outer transaction. Each upsert call outside a batch
        commits per ``batch_size`` chunk.
        """
        if self._batch_depth:
            self._batch_depth += 1
            try:
                yield self
            finally:
                self._batch_depth -= 1
            return
        self._begin()
        self._batch_depth = 1
        try:
            yield self
        except BaseException:
            self._batch_depth = 0
            self._rollback()
            raise
        self._batch_depth = 0
        self._commit()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """A long load: the adapter may defer durability work to :meth:`checkpoint` and the end of the
        block (Ladybug does; a server database needs nothing)."""
        yield

    def checkpoint(self) -> None:  # noqa: B027 - optional hook: a server database has nothing to do
        """Make everything written so far durable (inside :meth:`bulk`)."""

    def __enter__(self) -> BaseGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writes ------------------------------------------------------------------------------
    def upsert_entities(self, entities: Iterable[Entity], replacing: Collection[str] = ()) -> WriteSummary:
        """Add or update entities: a stored entity is merged with the new statement of it
        (``Entity.merged_with``), except one that only the statement's own sources and those in
        ``replacing`` (sources, or families of releases ending in ``:``, such as ``doid:``) have
        stated, which the statement replaces (a corrected file loaded whole: a synonym it dropped
        goes, an obsolete flag it lifted is lifted; ``created_at`` is kept)."""
        incoming: dict[str, Entity] = {}
        for entity in entities:
            prior = incoming.get(entity.id)
            incoming[entity.id] = prior.merged_with(entity) if prior else entity
        summary = WriteSummary()
        items = list(incoming.values())
        for chunk in _chunks(items, self.batch_size):
            with self.batch():
                summary += self._upsert_entity_chunk(chunk, frozenset(replacing))
        return summary

    def _upsert_entity_chunk(self, chunk: Sequence[Entity], replacing: frozenset[str] = frozenset()) -> WriteSummary:
        now = format_time(utc_now())
        stored = {row["id"]: row_to_entity(row) for row in self._fetch_entities([e.id for e in chunk])}
        inserts, updates = [], []
        unchanged = 0
        for entity in chunk:
            old = stored.get(entity.id)
            if old is None:
                inserts.append(entity_to_row(entity, now))
                continue
            if replacing and all(s in entity.sources or _replaced(s, replacing) for s in old.sources):
                merged = entity.model_copy(update={"created_at": old.created_at or entity.created_at})
            else:
                merged = old.merged_with(entity)
            if merged.same_content(old):
                unchanged += 1
            else:
                updates.append(entity_to_row(merged, now))
        if inserts:
            self._insert_entities(inserts)
        if updates:
            self._update_entities(updates)
        return WriteSummary(added=len(inserts), updated=len(updates), unchanged=unchanged)

    def upsert_relations(self, relations: Iterable[Relation]) -> WriteSummary:
        incoming: dict[str, Relation] = {}
        for rel in relations:
            incoming[rel.key] = rel  # within one call the last statement of a fact wins
        summary = WriteSummary()
        items = list(incoming.values())
        for chunk in _chunks(items, self.batch_size):
            with self.batch():
                summary += self._upsert_relation_chunk(chunk)
        return summary

    def _upsert_relation_chunk(self, chunk: Sequence[Relation]) -> WriteSummary:
        now = format_time(utc_now())
        present = self._existing_ids(sorted({r.subject for r in chunk} | {r.object for r in chunk}))
        summary = WriteSummary()
        valid = []
        for rel in chunk:
            if rel.subject not in present or rel.object not in present:
                summary.skipped["endpoint not in graph"] = summary.skipped.get("endpoint not in graph", 0) + 1
            elif rel.subject == rel.object:  # states nothing; and the backends count a loop differently
                summary.skipped["self-loop"] = summary.skipped.get("self-loop", 0) + 1
            elif rel.valid_to is not None:
                summary.skipped["already invalid"] = summary.skipped.get("already invalid", 0) + 1
            else:
                valid.append(rel)
        # Compare stored rows with incoming rows directly: a re-run of an ingest touches every
        # fact, and building model objects for what is unchanged would dominate its cost.
        stored = {row["key"]: row for row in self._current_relations(valid)} if valid else {}
        creates: list[dict[str, Any]] = []
        replaces: list[dict[str, Any]] = []
        contradicted: list[dict[str, Any]] = []
        for rel in valid:
            row = relation_to_row(rel, now)
            old = stored.get(rel.key)
            if old is None:
                if rel.valid_from is not None:  # a start given by the source (a date), not the time of writing
                    row["valid_from"] = self._after_earlier_versions(rel, row["valid_from"])
                creates.append(row)
            elif same_statement(old, row):
                summary.unchanged += 1
            elif bool(old["negated"]) != rel.negated:  # a contradiction: end the old fact, start the new one
                contradicted.append(old)
                creates.append({**row, "valid_from": now})
            else:  # same fact, new evidence: update in place, keep when it became valid
                replaces.append({**row, "valid_from": old["valid_from"]})
        if contradicted:
            summary.invalidated += self._invalidate_keys(contradicted, now)
        if creates:
            self._create_relations(creates)
        if replaces:
            self._replace_relations(replaces)
        summary.added += len(creates)
        summary.updated += len(replaces)
        return summary

    def _after_earlier_versions(self, rel: Relation, start: str) -> str:
        """``start``, or the latest end of an earlier version of ``rel``'s fact when that is later: the
        versions of a fact never overlap in valid time (a fact ended in June and stated again with a
        January date is valid again from June, not twice from January to June). Read only for facts
        given a start, so bulk loads, which never are, read nothing more."""
        rows = self._relation_rows(rel.subject, rel.object, rel.type, True, 1_000_000)
        return max([start, *(r["valid_to"] for r in rows if r["key"] == rel.key and r.get("valid_to"))])

    def invalidate(
        self, subject: str, type: str, object: str, source: str | None = None, at: datetime | None = None
    ) -> int:
        """End the current edge(s) ``subject -type-> object`` (of one source, or of all): set
        ``valid_to``; the edges stay stored and visible to history queries. ``at`` before an edge's
        ``valid_from`` is refused (``InvalidInput``; nothing is ended): a fact cannot end before it
        began."""
        rows = self._relation_rows(normalize_curie(subject), normalize_curie(object), type, False, 1_000_000)
        targets = [row_to_relation(r) for r in rows]
        if source is not None:
            targets = [r for r in targets if r.source == source]
        if not targets:
            return 0
        if at is not None and at.tzinfo is None:  # a naive time is UTC, as format_time stores it
            at = at.replace(tzinfo=UTC)
        if at is not None and (early := [r for r in targets if r.valid_from is not None and at < r.valid_from]):
            since = ", ".join(f"{r.source} from {r.valid_from.isoformat()}" for r in early)
            raise InvalidInput(
                f"cannot end {subject} -{type}-> {object} at {at.isoformat()}, before it became valid ({since})"
            )
        with self.batch():
            return self._invalidate_keys([relation_to_row(r, "") for r in targets], format_time(at or utc_now()))

    def current_sources(self) -> dict[str, int]:
        """How many current edges each source has."""
        return dict(sorted((str(s), int(n)) for s, n in self._run(self.cypher.COUNT_CURRENT_BY_SOURCE)))

    def end_source(
        self,
        source: str,
        at: datetime | None = None,
        keep: Collection[str] = frozenset(),
        keep_types: Collection[str] = frozenset(),
    ) -> int:
        """End every current edge of ``source`` but those whose key is in ``keep`` or whose type is in
        ``keep_types`` (a release superseded by a newer one; what a load that is the whole of its
        source no longer states), in batches by key; the edges stay stored for history queries.
        Returns how many."""
        at_text, ended, after = format_time(at or utc_now()), 0, ""
        while rows := self._relation_rows(None, None, None, False, self.batch_size, source, after):
            after = rows[-1]["key"]
            if gone := [r for r in rows if r["key"] not in keep and r["type"] not in keep_types]:
                with self.batch():
                    ended += self._invalidate_keys(gone, at_text)
        return ended

    def invalidate_relations(self, relations: Iterable[Relation], at: datetime | None = None) -> int:
        """End the current edges that have the keys of ``relations`` (one batch per ``batch_size``)."""
        rows = [relation_to_row(r, "") for r in {r.key: r for r in relations}.values()]
        ended = 0
        for chunk in _chunks(rows, self.batch_size):
            with self.batch():
                ended += self._invalidate_keys(chunk, format_time(at or utc_now()))
        return ended

    # ---- reads -------------------------------------------------------------------------------
    def edge_rows(
        self, ids: Sequence[str], rel_types: Sequence[str], direction: Direction = "out", chunk: int = 10_000
    ) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
        """``(from id, relation row, neighbour row)`` of the current edges of many nodes, as plain
        rows (no model objects): for bulk analytics such as the phenotype index. The neighbour row holds
        its :data:`kg.graph.rows.BRIEF_ENTITY_COLUMNS` only (its description, synonyms and xrefs made reading all of
        HPO's annotations 2.7x slower), ``chunk`` ids a query (900 a query made reading HPO's IS_A 9x slower)."""
        for part in _chunks(sorted(set(ids)), chunk):
            yield from self._expand(part, rel_types, direction, False, 100_000_000, brief=True)

    def dump(self, page: int = 5000) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        """The whole graph as stored rows, a page of entities (in id order) at a time with every edge
        that starts at one of them, history included: for exports (kg.graph.neo4j_import)."""
        after = ""
        while rows := self._scan_entities(after, page, False):
            after = rows[-1]["id"]
            q = self.cypher
            query = q.RELATIONS_BY_ENDPOINTS.format(filters=q.SUBJECTS_FILTER)
            yield rows, self._read_relations(query, {"subjects": [r["id"] for r in rows], "limit": 1_000_000_000})

    def current_relations(self, relations: Iterable[Relation]) -> dict[str, Relation]:
        """The stored current edge of each key among ``relations`` (for merging evidence)."""
        items = list({r.key: r for r in relations}.values())
        found: dict[str, Relation] = {}
        for chunk in _chunks(items, self.batch_size):
            for row in self._current_relations(chunk):
                found[row["key"]] = row_to_relation(row)
        return found

    def get_entity(self, entity_id: str) -> Entity | None:
        return self.get_entities([entity_id]).get(normalize_curie(entity_id))

    def get_entities(self, entity_ids: Iterable[str]) -> dict[str, Entity]:
        ids = sorted({normalize_curie(i) for i in entity_ids})
        found: dict[str, Entity] = {}
        for chunk in _chunks(ids, self.batch_size):
            for row in self._fetch_entities(chunk):
                entity = row_to_entity(row)
                found[entity.id] = entity
        return found

    def existing(self, entity_ids: Iterable[str]) -> set[str]:
        """The normalised ids among ``entity_ids`` that are in the graph."""
        ids = sorted({normalize_curie(i) for i in entity_ids})
        found: set[str] = set()
        for chunk in _chunks(ids, self.batch_size):
            found |= self._existing_ids(chunk)
        return found

    def degrees(self, entity_ids: Iterable[str]) -> dict[str, int]:
        """How many edges (current or not, either direction) each entity has; 0 if it has none or
        is not in the graph. Keys are the normalised ids."""
        ids = sorted({normalize_curie(i) for i in entity_ids})
        found = dict.fromkeys(ids, 0)
        for chunk in _chunks(ids, self.batch_size):
            found.update({i: int(n) for i, n in self._run(self.cypher.DEGREES, {"ids": chunk})})
        return found

    def scan_entities(self, after: str = "", limit: int = 10_000, with_xrefs: bool = False) -> list[Entity]:
        """A page of entities in id order, starting after ``after`` (pass the last id of a page)."""
        return [row_to_entity(r) for r in self._scan_entities(after, limit, with_xrefs)]

    def find_entities(self, name: str, category: str | None = None, limit: int = 20) -> list[Entity]:
        """Entities whose name or a synonym equals ``name`` (case and white space ignored)."""
        key = name_key(name)
        if not key:
            return []
        # an empty category ("?category=") is no filter, on both backends
        return [row_to_entity(r) for r in self._find_by_key(key, category or None, limit)]

    def neighbours(
        self,
        entity_id: str,
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        include_invalid: bool = False,
        limit: int = 1000,
    ) -> list[Neighbour]:
        if direction not in ("out", "in", "both"):
            raise InvalidInput(f"direction must be 'out', 'in' or 'both', not {direction!r}")
        entity_id = normalize_curie(entity_id)
        rows = self._expand([entity_id], _types(rel_types), direction, include_invalid, limit)
        return [_neighbour(from_id, rel_row, ent_row) for from_id, rel_row, ent_row in rows]

    def neighbours_of(
        self,
        entity_ids: Sequence[str],
        rel_types: Sequence[str] | None = None,
        direction: Direction = "both",
        limit: int = 1000,
        chunk: int = 500,
    ) -> dict[str, list[Neighbour]]:
        """:meth:`neighbours` of many entities, ``chunk`` a query: each entity's first ``limit`` current
        edges, in the order :meth:`neighbours` gives them (one query for the subtypes of a class instead
        of one each: 50 of them took 150 ms on the embedded store)."""
        if direction not in ("out", "in", "both"):
            raise InvalidInput(f"direction must be 'out', 'in' or 'both', not {direction!r}")
        ids = list(dict.fromkeys(normalize_curie(i) for i in entity_ids))
        found: dict[str, list[Neighbour]] = {i: [] for i in ids}
        for part in _chunks(ids, chunk):
            for from_id, rel_row, ent_row in self._expand(part, _types(rel_types), direction, False, 100_000_000):
                if len(found[from_id]) < limit:
                    found[from_id].append(_neighbour(from_id, rel_row, ent_row))
        return found

    def neighbourhood(
        self, entity_id: str, hops: int = 2, rel_types: Sequence[str] | None = None, limit: int = 1000
    ) -> Subgraph:
        """The current edges within ``hops`` of ``entity_id`` (breadth first, at most ``limit``)."""
        if not 1 <= hops <= 5:
            raise InvalidInput("hops must be between 1 and 5")
        centre = self.get_entity(entity_id)
        if centre is None:
            return Subgraph(entities=[], relations=[])
        entities = {centre.id: centre}
        edges: dict[tuple[str, str], Relation] = {}
        frontier = [centre.id]
        for _ in range(hops):
            if not frontier or len(edges) >= limit:
                break
            nxt: list[str] = []
            for _from_id, rel_row, ent_row in self._expand(
                frontier, _types(rel_types), "both", False, limit - len(edges)
            ):
                rel = row_to_relation(rel_row)
                edges.setdefault(_relation_order(rel), rel)
                ent = row_to_entity(ent_row)
                if ent.id not in entities:
                    entities[ent.id] = ent
                    nxt.append(ent.id)
            frontier = nxt
        return Subgraph(
            entities=[entities[k] for k in sorted(entities)],
            relations=[edges[k] for k in sorted(edges)][:limit],
        )

    def paths(
        self,
        source: str,
        target: str,
        max_hops: int = 3,
        rel_types: Sequence[str] | None = None,
        limit: int = 10,
        free_same_as: int = 2,
        candidate_cap: int | None = None,
        degrees: Mapping[str, int] | None = None,
    ) -> list[GraphPath]:
        """Simple paths between two entities over current edges, in either direction. Negated
        edges (``NOT`` annotations) are facts, not connections: paths never cross them.

        A path may have at most ``max_hops`` hops that are not ``SAME_AS`` plus at most
        ``free_same_as`` ``SAME_AS`` hops. ``rel_types`` restricts the other hops. Paths come
        shortest first (fewest non-``SAME_AS`` hops, then fewest hops). At most ``candidate_cap``
        (default: the store's) raw paths are examined per query, which bounds the cost between hubs:
        one query over every length first; if it reached the cap it may have missed short paths
        (the databases enumerate long paths first), so the lengths are then searched one by one,
        shortest first, until ``limit`` paths better than any longer one are in hand.

        The databases walk out from the first endpoint, so the search starts from the endpoint with
        fewer edges (between a hub and a sparse entity this is several times cheaper); ``degrees``
        gives the edge counts if the caller has them (``degrees()``), else they are looked up. Paths
        still come from ``source`` to ``target``.
        """
        if not 1 <= max_hops <= 6 or not 0 <= free_same_as <= 3:
            raise InvalidInput("max_hops must be 1..6 and free_same_as 0..3")
        source, target = normalize_curie(source), normalize_curie(target)
        if source == target:
            return []
        types = _types(rel_types)
        if types is not None:
            types = sorted(set(types) | {SAME_AS})
        # one path per walk (nodes, and each hop's fact): the same fact from two sources is one hop, so
        # that such twins do not use up ``limit``; the one whose edge keys sort first stands for them
        found: dict[tuple[str, ...], tuple[tuple[str, ...], GraphPath]] = {}
        cap = candidate_cap or self.path_candidate_cap
        longest = max_hops + free_same_as

        def collect(rows: list[tuple[list[str], list[dict[str, Any]]]]) -> None:
            for nodes, rel_rows in rows:
                if len(set(nodes)) != len(nodes):
                    continue
                path = GraphPath(nodes=nodes, relations=[row_to_relation(r) for r in rel_rows])
                if path.cost > max_hops or path.length - path.cost > free_same_as:
                    continue
                walk = tuple(nodes) + tuple(f"{r.subject}|{r.type}|{r.object}" for r in path.relations)
                keys = tuple(r.key for r in path.relations)
                if walk not in found or keys < found[walk][0]:
                    found[walk] = (keys, path)

        if degrees is None or not {source, target} <= degrees.keys():
            degrees = self.degrees([source, target])
        reverse = degrees[target] < degrees[source]

        def candidates(shortest: int, longest: int) -> list[tuple[list[str], list[dict[str, Any]]]]:
            if not reverse:
                return self._path_candidates(source, target, shortest, longest, types, cap)
            rows = self._path_candidates(target, source, shortest, longest, types, cap)
            return [(nodes[::-1], rels[::-1]) for nodes, rels in rows]

        rows = candidates(1, longest)
        collect(rows)
        if len(rows) >= cap:  # truncated: deepen, one length at a time
            for length in range(1, longest + 1):
                collect(candidates(length, length))
                if len(found) >= limit:  # done if the limit-th best beats any longer path
                    kth = sorted((p.cost, p.length) for _, p in found.values())[limit - 1]
                    if kth < (max(0, length + 1 - free_same_as), length + 1):
                        break
        ordered = sorted(found.items(), key=lambda kv: (kv[1][1].cost, kv[1][1].length, kv[0]))
        return [p for _, (_, p) in ordered[:limit]]

    def relations(
        self,
        subject: str | None = None,
        object: str | None = None,
        type: str | None = None,
        include_invalid: bool = True,
        limit: int = 1000,
    ) -> list[Relation]:
        """Edges by subject and/or object (and type), history included unless told otherwise."""
        if not (subject and subject.strip()) and not (object and object.strip()):
            raise InvalidInput("give a subject, an object or both")
        rows = self._relation_rows(
            normalize_curie(subject) if subject else None,
            normalize_curie(object) if object else None,
            type,
            include_invalid,
            limit,
        )
        return [row_to_relation(r) for r in rows]

    def holders(self, rel_types: Sequence[str], end: Literal["subject", "object"]) -> set[str]:
        """The ids at the ``end`` of the current edges of these types: ``holders(["TREATS"], "object")``
        is every entity some drug treats."""
        if end not in ("subject", "object"):
            raise InvalidInput(f"end must be 'subject' or 'object', not {end!r}")
        return {row[0] for row in self._run(self.cypher.HOLDERS[end], {"types": _types(rel_types)})}

    def entity_count(self) -> int:
        """How many entities the graph holds: a cheap query (no scan of properties or edges), for
        liveness probes; ``stats`` has the full counts."""
        return int(self._run(self.cypher.COUNT_ENTITIES)[0][0])

    def stats(self) -> GraphStats:
        q = self.cypher
        categories = {c: int(n) for c, n in self._run(q.COUNT_ENTITIES_BY_CATEGORY)}
        types: dict[str, int] = {}
        current = invalid = 0
        for rel_type, is_current, n in self._run(q.COUNT_RELATIONS_BY_TYPE):
            if is_current:
                types[rel_type] = types.get(rel_type, 0) + int(n)
                current += int(n)
            else:
                invalid += int(n)
        return GraphStats(
            backend=self.backend,
            entities=sum(categories.values()),
            relations=current,
            invalidated_relations=invalid,
            categories=dict(sorted(categories.items())),
            relation_types=dict(sorted(types.items())),
        )

    # ---- query assembly shared by the adapters (fixed fragments of their Cypher modules) ------
    def _expand_filters(self, rel_types: Sequence[str] | None, include_invalid: bool, params: dict[str, Any]) -> str:
        q = self.cypher
        filters = [] if include_invalid else [q.CURRENT_FILTER]
        if rel_types is not None:
            filters.append(q.TYPE_FILTER)
            params["types"] = list(rel_types)
        return " AND ".join(filters) or q.TRUE_FILTER

    def _relation_rows(
        self,
        subject: str | None,
        object: str | None,
        type: str | None,
        include_invalid: bool,
        limit: int,
        source: str | None = None,
        after: str | None = None,
    ) -> list[dict[str, Any]]:
        """Edges by any of subject, object, type and source (current only unless ``include_invalid``),
        in key order, from the first key past ``after``."""
        q = self.cypher
        filters, params = [], {"limit": limit}
        for value, fragment, name in (
            (subject, q.SUBJECT_FILTER, "subject"),
            (object, q.OBJECT_FILTER, "object"),
            (type, q.RELTYPE_FILTER, "type"),
            (source, q.SOURCE_FILTER, "source"),
            (after, q.AFTER_KEY_FILTER, "after"),
        ):
            if value is not None:
                filters.append(fragment)
                params[name] = value
        if not include_invalid:
            filters.append(q.CURRENT_FILTER)
        return self._read_relations(q.RELATIONS_BY_ENDPOINTS.format(filters=" AND ".join(filters)), params)


def _replaced(source: str, replacing: frozenset[str]) -> bool:
    return source in replacing or any(r.endswith(":") and source.startswith(r) for r in replacing)


def _neighbour(from_id: str, rel_row: Any, ent_row: Any) -> Neighbour:
    """A row of :meth:`BaseGraphStore._expand` as a neighbour of ``from_id``, on the side it lies."""
    rel = row_to_relation(rel_row)
    return Neighbour(entity=row_to_entity(ent_row), relation=rel, direction="out" if rel.subject == from_id else "in")


def _types(rel_types: Sequence[str] | None) -> list[str] | None:
    if rel_types is None:
        return None
    if isinstance(rel_types, str):
        rel_types = [rel_types]
    return sorted(set(rel_types))
