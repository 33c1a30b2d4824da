"""The composition root: the one place that reads settings and builds stores, indexes and models."""

from __future__ import annotations

from functools import cached_property

from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.settings import GraphBackend, Settings, load_settings

__all__ = ["Container", "build_graph_store"]


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


class Container:
    """Lazily built components for one process; ``close()`` releases them."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()

    @cached_property
    def graph(self) -> BaseGraphStore:
        return build_graph_store(self.settings)

    @cached_property
    def text_embedder(self) -> TextEmbedder:
        return TextEmbedder(self.settings.embedding_model, device=self.settings.embedding_device)

    @cached_property
    def entity_index(self) -> EntityIndex:
        return EntityIndex(self.settings.data_dir / "indexes", self.text_embedder)

    def close(self) -> None:
        if "graph" in self.__dict__:
            self.graph.close()
            del self.__dict__["graph"]

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
