"""Opens the graph store that settings name (Ladybug embedded, or Neo4j), for every composition root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kg.settings import GraphBackend

if TYPE_CHECKING:
    from kg.graph.base import BaseGraphStore
    from kg.settings import Settings

__all__ = ["build_graph_store"]


def build_graph_store(settings: Settings) -> BaseGraphStore:
    """Open the configured graph store (raises ``GraphStoreUnavailable`` with the reason)."""
    batch = {"batch_size": settings.batch_size} if settings.batch_size else {}
    if settings.graph_backend is GraphBackend.neo4j:
        from kg.graph.neo4j_store import Neo4jGraphStore

        return Neo4jGraphStore(
            uri=settings.neo4j_uri,
            user=settings.neo4j_user,
            password=settings.neo4j_password.get_secret_value(),
            database=settings.neo4j_database,
            **batch,
            connect_timeout_s=settings.neo4j_connect_timeout_s,
        )
    from kg.graph.ladybug_store import LadybugGraphStore

    return LadybugGraphStore(
        settings.ladybug_path,
        buffer_pool_mb=settings.ladybug_buffer_pool_mb,
        max_db_size_gb=settings.ladybug_max_db_size_gb,
        **batch,
    )
