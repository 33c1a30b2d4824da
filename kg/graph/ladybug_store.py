"""LadybugGraphStore: the embedded default (the ``ladybug`` package, an on-disk Cypher database). Writes go
in bulk through ``COPY ... FROM`` an Arrow table; idempotence comes from :class:`BaseGraphStore` reading
what is stored first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ladybug
import pyarrow as pa

import kg.graph.ladybug_cypher as q
from kg.graph.base import BaseGraphStore
from kg.graph.errors import TRANSACTION_ABORTED, GraphStoreError, GraphStoreLocked, GraphStoreUnavailable
from kg.graph.rows import BRIEF_ENTITY_COLUMNS, key_rows
from kg.model import Direction

__all__ = ["LadybugGraphStore"]

# Explicit Arrow schemas: type inference on empty lists would give LIST(ANY).
_STR = pa.string()
_STR_LIST = pa.list_(pa.string())
_ENTITY_SCHEMA = pa.schema(
    [
        ("id", _STR),
        ("name", _STR),
        ("name_key", _STR),
        ("category", _STR),
        ("synonyms", _STR_LIST),
        ("synonym_keys", _STR_LIST),
        ("description", _STR),
        ("xrefs", _STR_LIST),
        ("sources", _STR_LIST),
        ("obsolete", pa.bool_()),
        ("created_at", _STR),
    ]
)
_RELATION_SCHEMA = pa.schema(
    [
        ("from", _STR),
        ("to", _STR),
        ("key", _STR),
        ("type", _STR),
        ("subject", _STR),
        ("object", _STR),
        ("source", _STR),
        ("evidence", _STR),
        ("confidence", pa.float64()),
        ("negated", pa.bool_()),
        ("valid_from", _STR),
        ("valid_to", _STR),
    ]
)
_INTERNAL = ("_ID", "_LABEL", "_SRC", "_DST")


def _props(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in _INTERNAL}


class LadybugGraphStore(BaseGraphStore):
    backend = "ladybug"
    cypher = q

    def __init__(
        self,
        path: str | Path,
        buffer_pool_mb: int = 2048,
        max_db_size_gb: int = 64,
        batch_size: int = 50_000,
        read_only: bool = False,
    ) -> None:
        super().__init__(batch_size=batch_size)
        self.read_only = read_only
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db: ladybug.Database | None = None
        self._connections: list[ladybug.Connection] = []
        self._connections_lock = threading.Lock()
        try:
            self._db = ladybug.Database(
                str(self.path),
                buffer_pool_size=buffer_pool_mb * 1024 * 1024,
                max_db_size=max_db_size_gb * 1024**3,
                read_only=read_only,
            )
            self._conn  # noqa: B018 - open this thread's connection now, so errors surface here
        except RuntimeError as exc:
            # Ladybug says only in its message that another process holds the file's lock
            error = GraphStoreLocked if "could not set lock" in str(exc).lower() else GraphStoreUnavailable
            raise error(f"cannot open the embedded graph store at {self.path}: {exc}") from exc
        if not read_only:
            for statement in q.SCHEMA:
                self._run(statement)

    # ---- plumbing ----------------------------------------------------------------------------
    @property
    def _conn(self) -> ladybug.Connection:
        """One connection per thread on the shared database (a connection is not shared by threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._db is None:
                raise GraphStoreError(f"the embedded graph store at {self.path} is closed")
            conn = ladybug.Connection(self._db)
            with self._connections_lock:
                self._connections.append(conn)
            self._local.conn = conn
        return conn

    def _execute(self, query: str, params: dict[str, Any], failed: str) -> Any:
        # Ladybug rolls a transaction back at its first failed statement and runs the next ones in
        # auto-commit mode; inside ``batch()`` they must fail instead, as on Neo4j.
        if self._batch_depth and getattr(self._local, "aborted", False):
            raise GraphStoreError(TRANSACTION_ABORTED)
        try:
            return self._conn.execute(query, params)
        except RuntimeError as exc:
            if self._batch_depth:
                self._local.aborted = True
            raise GraphStoreError(f"{failed}: {exc}") from exc

    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        result = self._execute(query, params or {}, "ladybug query failed")
        if isinstance(result, list):  # several statements
            result = result[-1]
        rows = result.get_all()
        result.close()
        return rows

    def _begin(self) -> None:
        self._local.aborted = False
        self._run("BEGIN TRANSACTION")

    def _commit(self) -> None:
        if getattr(self._local, "aborted", False):
            self._rollback()
            raise GraphStoreError(TRANSACTION_ABORTED)
        self._run("COMMIT")

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """A long load on this thread's connection. Ladybug writes ``COPY`` data straight to its files
        and checkpoints at every commit that copied rows, 0.4-0.7 s per commit once HPO is in the
        graph (566k edges) whatever the commit's size: a third of the abstract loader's time. Inside
        ``bulk()`` automatic checkpoints are off; :meth:`checkpoint` (the caller's resume points) and
        the end of the block make the copies durable. A crash in between loses the copies since the
        last checkpoint but leaves a consistent database, so the caller must record progress only
        after a checkpoint (the abstract loader does)."""
        if self.read_only or getattr(self._local, "bulk", False):
            yield
            return
        self._conn.execute("CALL auto_checkpoint=false")
        self._local.bulk = True
        try:
            yield
        finally:
            self._local.bulk = False
            try:
                self.checkpoint()
            finally:
                self._conn.execute("CALL auto_checkpoint=true")

    def checkpoint(self) -> None:
        """Fold everything committed into the database files."""
        if not self.read_only and not self._batch_depth:
            self._run("CHECKPOINT")

    def _rollback(self) -> None:
        self._local.aborted = False
        # A failed statement may already have ended the transaction; the original error matters.
        try:
            self._conn.execute("ROLLBACK")
        except RuntimeError:
            pass

    def close(self) -> None:
        if self._db is None:
            return
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._db.close()
        self._db = None

    def clear(self) -> None:
        with self.batch():
            for statement in q.CLEAR:
                self._run(statement)

    # ---- entities ----------------------------------------------------------------------------
    def _fetch_entities(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        rows = self._run(q.FETCH_ENTITIES, {"ids": list(ids)})
        return [dict(zip(q.ENTITY_COLUMNS, row, strict=True)) for row in rows]

    def _existing_ids(self, ids: Sequence[str]) -> set[str]:
        return {row[0] for row in self._run(q.EXISTING_IDS, {"ids": list(ids)})}

    def _insert_entities(self, rows: Sequence[dict[str, Any]]) -> None:
        self._copy(q.COPY_ENTITIES, pa.Table.from_pylist(list(rows), schema=_ENTITY_SCHEMA))

    def _update_entities(self, rows: Sequence[dict[str, Any]]) -> None:
        self._run(q.UPDATE_ENTITIES, {"rows": [{k: r[k] for k in q.ENTITY_COLUMNS} for r in rows]})

    def _scan_entities(self, after: str, limit: int, with_xrefs: bool) -> list[dict[str, Any]]:
        query = q.SCAN_ENTITIES.format(xrefs_filter=q.XREFS_FILTER if with_xrefs else "")
        return [
            dict(zip(q.ENTITY_COLUMNS, row, strict=True)) for row in self._run(query, {"after": after, "limit": limit})
        ]

    def _find_by_key(self, key: str, category: str | None, limit: int) -> list[dict[str, Any]]:
        query = q.FIND_BY_KEY.format(category_filter=q.CATEGORY_FILTER if category else "")
        params: dict[str, Any] = {"key": key, "limit": limit}
        if category:
            params["category"] = category
        return [dict(zip(q.ENTITY_COLUMNS, row, strict=True)) for row in self._run(query, params)]

    # Bulk COPY, not per-row MERGE, which Ladybug runs two orders of magnitude slower.
    def _copy(self, statement: str, arrow_table: pa.Table) -> None:
        # Ladybug's COPY scans the Python object that the statement names (`arrow_table`, a local here).
        self._execute(statement, {}, "ladybug bulk load failed")

    # ---- relations ---------------------------------------------------------------------------
    def _current_relations(self, rels: Sequence[Any]) -> list[dict[str, Any]]:
        wanted = {r.key for r in rels}
        subjects = sorted({r.subject for r in rels})
        query = q.by_ids(q.CURRENT_OF_SUBJECTS, len(subjects), "a")
        rows = (dict(zip(q.RELATION_COLUMNS, row, strict=True)) for row in self._run(query, {"ids": subjects}))
        return [row for row in rows if row["key"] in wanted]

    def _create_relations(self, rows: Sequence[dict[str, Any]]) -> None:
        table = pa.Table.from_pylist(
            [{"from": r["subject"], "to": r["object"], **r} for r in rows], schema=_RELATION_SCHEMA
        )
        self._copy(q.COPY_RELATIONS, table)

    def _replace_relations(self, rows: Sequence[dict[str, Any]]) -> None:
        self._run(q.DELETE_CURRENT_BY_KEY, {"rows": key_rows(rows)})
        self._create_relations(rows)

    def _invalidate_keys(self, rows: Sequence[dict[str, Any]], at: str) -> int:
        rows = self._run(q.INVALIDATE_BY_KEY, {"rows": key_rows(rows), "at": at})
        return int(rows[0][0]) if rows else 0

    # ---- traversal ---------------------------------------------------------------------------
    def _expand_query(self, n_ids: int, direction: Direction, filters: str, brief: bool = False) -> str:
        left, right = q.DIRECTIONS[direction]
        template = q.EXPAND_BRIEF if brief else q.EXPAND
        return q.by_ids(template, n_ids, "a", left=left, right=right, filters=filters)

    def _expand_row(self, row: list[Any], brief: bool = False) -> tuple[str, dict[str, Any], dict[str, Any]]:
        n = len(q.RELATION_COLUMNS)
        return (
            row[0],
            dict(zip(q.RELATION_COLUMNS, row[1 : 1 + n], strict=True)),
            dict(zip(BRIEF_ENTITY_COLUMNS if brief else q.ENTITY_COLUMNS, row[1 + n :], strict=True)),
        )

    def _path_candidates(
        self, source: str, target: str, shortest: int, longest: int, rel_types: Sequence[str] | None, cap: int
    ) -> list[tuple[list[str], list[dict[str, Any]]]]:
        rel_filter = q.CURRENT_FILTER + " AND " + q.ASSERTED_FILTER
        params: dict[str, Any] = {"source": source, "target": target, "cap": cap}
        if rel_types is not None:
            rel_filter += " AND " + q.TYPE_FILTER
            params["types"] = list(rel_types)
        query = q.PATHS.format(shortest=int(shortest), longest=int(longest), rel_filter=rel_filter)
        return [(list(row[0]), [_props(r) for r in row[1]]) for row in self._run(query, params)]

    def _read_relations(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(zip(q.RELATION_COLUMNS, row, strict=True)) for row in self._run(query, params)]
