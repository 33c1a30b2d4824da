"""Graph stores: one interface, :class:`~kg.graph.base.BaseGraphStore`, with the database-independent
logic; two adapters (Ladybug embedded, Neo4j), each with its Cypher in a module of its own."""

from kg.graph.base import BaseGraphStore
from kg.graph.errors import GraphStoreError, GraphStoreUnavailable
from kg.graph.factory import build_graph_store

__all__ = ["BaseGraphStore", "GraphStoreError", "GraphStoreUnavailable", "build_graph_store"]
