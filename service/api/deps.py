"""Request dependencies: the process-wide container and its stores."""

from __future__ import annotations

from fastapi import Request

from kg.graph.base import BaseGraphStore
from service.container import Container


def get_container(request: Request) -> Container:
    return request.app.state.container


def get_graph(request: Request) -> BaseGraphStore:
    return get_container(request).graph
