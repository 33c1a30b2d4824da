"""Request dependencies: the process-wide container and its stores; the schema of a body declared by hand."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import BaseModel

from kg.graph.base import BaseGraphStore
from service.container import Container


def get_container(request: Request) -> Container:
    return request.app.state.container


def get_graph(request: Request) -> BaseGraphStore:
    return get_container(request).graph


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema with its definitions inlined, for a request body declared by hand
    (``openapi_extra``): an OpenAPI document resolves ``#/$defs/...`` against its own root, where
    pydantic's definitions are not (schemathesis skipped the body's options as unresolvable)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return inline({**definitions[ref.rsplit("/", 1)[1]], **rest})
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(schema)
