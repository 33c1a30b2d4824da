"""Neo4jGraphStore: Neo4j 5.26 LTS over Bolt with the official ``neo4j`` driver: batched ``UNWIND`` writes,
a uniqueness constraint on ``Entity.id``, parameters only. Connection and authentication failures become
:class:`GraphStoreUnavailable` naming the URI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import neo4j
from neo4j import exceptions as neo4j_errors

import kg.graph.neo4j_cypher as q
from kg.graph.base import BaseGraphStore
from kg.graph.errors import TRANSACTION_ABORTED, GraphStoreError, GraphStoreUnavailable
from kg.graph.rows import key_rows
from kg.model import Direction

T = TypeVar("T")

__all__ = ["Neo4jGraphStore"]

_UNAVAILABLE = (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired, OSError)
# Once the server is found unreachable (after the driver's own retries, up to connect_timeout_s), calls fail at
# once for this long before one tries again: requests get their 503 in no time, not each after 10 s of retries.
UNREACHABLE_HOLD_S = 2.0


class Neo4jGraphStore(BaseGraphStore):
    backend = "neo4j"
    cypher = q

    def __init__(
        self,
        uri: str,
        user: str,
        password: str,
        database: str = "neo4j",
        batch_size: int = 5000,
        connect_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(batch_size=batch_size)
        self.uri = uri
        self.database = database
        self._unreachable_until, self._unreachable_why = 0.0, ""
        try:
            self._driver = neo4j.GraphDatabase.driver(
                uri,
                auth=(user, password),
                connection_timeout=connect_timeout_s,
                connection_acquisition_timeout=connect_timeout_s,
                max_transaction_retry_time=connect_timeout_s,
                notifications_min_severity=neo4j.NotificationMinimumSeverity.OFF,
            )
            self._driver.verify_connectivity()
        except neo4j_errors.AuthError as exc:
            self._close_driver()
            raise GraphStoreUnavailable(
                f"Neo4j at {uri} refused the credentials of user {user!r} (check MEDKG_NEO4J_USER and "
                f"MEDKG_NEO4J_PASSWORD)"
            ) from exc
        except (*_UNAVAILABLE, neo4j_errors.DriverError, ValueError) as exc:
            self._close_driver()
            raise GraphStoreUnavailable(f"cannot connect to Neo4j at {uri}: {exc}") from exc
        for statement in q.SCHEMA:
            self._run(statement)

    # ---- plumbing ----------------------------------------------------------------------------
    @property
    def _tx(self) -> neo4j.Transaction | None:
        return getattr(self._local, "tx", None)

    @_tx.setter
    def _tx(self, value: neo4j.Transaction | None) -> None:
        self._local.tx = value

    @property
    def _session(self) -> neo4j.Session | None:
        return getattr(self._local, "session", None)

    @_session.setter
    def _session(self, value: neo4j.Session | None) -> None:
        self._local.session = value

    def _unavailable(self, exc: Exception) -> GraphStoreUnavailable:
        """The error for an unreachable server, remembered for ``UNREACHABLE_HOLD_S``."""
        self._unreachable_until, self._unreachable_why = time.monotonic() + UNREACHABLE_HOLD_S, str(exc)
        return GraphStoreUnavailable(f"Neo4j at {self.uri} is unavailable: {exc}")

    def _check_reachable(self) -> None:
        if time.monotonic() < self._unreachable_until:
            raise GraphStoreUnavailable(
                f"Neo4j at {self.uri} is unavailable: {self._unreachable_why} (tried again within "
                f"{UNREACHABLE_HOLD_S:g} s)"
            )

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """The driver's errors as the store's: unreachable or refused -> GraphStoreUnavailable (503, at once
        for a moment after the server was found unreachable), a failed query or transaction -> GraphStoreError."""
        self._check_reachable()
        try:
            yield
        except neo4j_errors.AuthError as exc:
            raise GraphStoreUnavailable(f"Neo4j at {self.uri} refused the credentials: {exc.message}") from exc
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc
        except neo4j_errors.Neo4jError as exc:
            raise GraphStoreError(f"Neo4j query failed ({exc.code}): {exc.message}") from exc
        except neo4j_errors.TransactionError as exc:  # an earlier statement failed the transaction
            raise GraphStoreError(TRANSACTION_ABORTED) from exc

    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        params = params or {}
        with self._mapped_errors():
            if self._tx is not None:
                return [record.values() for record in self._tx.run(query, params)]
            records, _, _ = self._driver.execute_query(query, params, database_=self.database)
            return [record.values() for record in records]

    def transact(self, work: Callable[[Any], T], *, write: bool = True) -> T:
        """``work(tx)`` in a managed transaction of its own (retried by the driver on transient errors, so
        ``work`` must only read and write through ``tx``), outside the store's write lock: for state that
        is not knowledge, kept where every API replica sees it (:mod:`service.qa.graph_sessions`)."""
        with self._mapped_errors(), self._driver.session(database=self.database) as session:
            return session.execute_write(work) if write else session.execute_read(work)

    def _begin(self) -> None:
        self._check_reachable()
        try:
            self._session = self._driver.session(database=self.database)
            self._tx = self._session.begin_transaction()
            self._tx.run(q.WRITE_LOCK).consume()  # one writer at a time (see WRITE_LOCK)
        except _UNAVAILABLE as exc:
            self._end_session()
            raise self._unavailable(exc) from exc

    def _commit(self) -> None:
        try:
            assert self._tx is not None
            self._tx.commit()
        except _UNAVAILABLE as exc:
            raise self._unavailable(exc) from exc
        except neo4j_errors.TransactionError as exc:
            raise GraphStoreError(TRANSACTION_ABORTED) from exc
        finally:
            self._end_session()

    def _rollback(self) -> None:
        try:
            if self._tx is not None and not self._tx.closed():
                self._tx.rollback()
        except _UNAVAILABLE:
            pass  # the server dropped the transaction with the connection
        finally:
            self._end_session()

    def _end_session(self) -> None:
        self._tx = None
        if self._session is not None:
            self._session.close()
            self._session = None

    def _close_driver(self) -> None:
        driver = getattr(self, "_driver", None)
        if driver is not None:
            driver.close()

    def close(self) -> None:
        self._end_session()
        self._close_driver()

    def clear(self) -> None:
        for statement in q.CLEAR_SOME:
            while self._run(statement)[0][0]:
                pass

    # ---- entities ----------------------------------------------------------------------------
    def _fetch_entities(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        return [row[0] for row in self._run(q.FETCH_ENTITIES, {"ids": list(ids)})]

    def _existing_ids(self, ids: Sequence[str]) -> set[str]:
        return {row[0] for row in self._run(q.EXISTING_IDS, {"ids": list(ids)})}

    def _insert_entities(self, rows: Sequence[dict[str, Any]]) -> None:
        self._run(q.UPSERT_ENTITIES, {"rows": list(rows)})

    def _update_entities(self, rows: Sequence[dict[str, Any]]) -> None:
        self._run(q.UPSERT_ENTITIES, {"rows": list(rows)})

    def _scan_entities(self, after: str, limit: int, with_xrefs: bool) -> list[dict[str, Any]]:
        return [row[0] for row in self._run(q.SCAN_ENTITIES[with_xrefs], {"after": after, "limit": limit})]

    def _find_by_key(self, key: str, category: str | None, limit: int) -> list[dict[str, Any]]:
        return [row[0] for row in self._run(q.FIND_BY_KEY, {"key": key, "category": category, "limit": limit})]

    # ---- relations ---------------------------------------------------------------------------
    def _current_relations(self, rels: Sequence[Any]) -> list[dict[str, Any]]:
        rows = [{"subject": r.subject, "object": r.object, "key": r.key} for r in rels]
        return [row[0] for row in self._run(q.CURRENT_BY_KEY, {"rows": rows})]

    def _create_relations(self, rows: Sequence[dict[str, Any]]) -> None:
        self._run(q.CREATE_RELATIONS, {"rows": list(rows)})

    def _replace_relations(self, rows: Sequence[dict[str, Any]]) -> None:
        self._run(q.REPLACE_RELATIONS, {"rows": list(rows)})

    def _invalidate_keys(self, rows: Sequence[dict[str, Any]], at: str) -> int:
        rows = self._run(q.INVALIDATE_BY_KEY, {"rows": key_rows(rows), "at": at})
        return int(rows[0][0]) if rows else 0

    # ---- traversal ---------------------------------------------------------------------------
    def _expand_query(self, n_ids: int, direction: Direction, filters: str, brief: bool = False) -> str:
        left, right = q.DIRECTIONS[direction]
        return (q.EXPAND_BRIEF if brief else q.EXPAND).format(left=left, right=right, filters=filters)

    def _expand_row(self, row: list[Any], brief: bool = False) -> tuple[str, dict[str, Any], dict[str, Any]]:
        return row[0], row[1], row[2]

    def _path_candidates(
        self, source: str, target: str, shortest: int, longest: int, rel_types: Sequence[str] | None, cap: int
    ) -> list[tuple[list[str], list[dict[str, Any]]]]:
        params: dict[str, Any] = {"source": source, "target": target, "cap": cap}
        type_filter = ""
        if rel_types is not None:
            type_filter = q.PATH_TYPE_FILTER
            params["types"] = list(rel_types)
        query = q.PATHS.format(shortest=int(shortest), longest=int(longest), type_filter=type_filter)
        return [(list(row[0]), list(row[1])) for row in self._run(query, params)]

    def _read_relations(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [row[0] for row in self._run(query, params)]
