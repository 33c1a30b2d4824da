"""Graph stores: one interface, :class:`~kg.graph.base.BaseGraphStore`, two adapters (Ladybug embedded, Neo4j).

Each adapter keeps its Cypher in a module of its own (``ladybug_cypher``, ``neo4j_cypher``); the
logic that does not depend on the database (merging, conflict handling, path bounds, ordering)
lives once, in :class:`~kg.graph.base.BaseGraphStore`.
"""

from kg.graph.base import BaseGraphStore
from kg.graph.errors import GraphStoreError, GraphStoreUnavailable
from kg.graph.factory import build_graph_store

__all__ = ["BaseGraphStore", "GraphStoreError", "GraphStoreUnavailable", "build_graph_store"]
