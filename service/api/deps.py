"""Request dependencies: the process-wide container and its stores; the schema of a body declared by hand
(JSON, or multipart with a DICOM upload)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import HTTPException, Request
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


def _form_parts(model: type[BaseModel] | None) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """Each part of ``model``'s form: its name -> (the object field it belongs to, or None; its schema). A form
    is flat: an object field's own fields are parts (``k``, ``mode`` of ``options``); a nullable field is a
    part left out (a form has no null)."""

    def no_null(prop: dict[str, Any]) -> dict[str, Any]:
        options = [o for o in prop.get("anyOf", []) if o.get("type") != "null"]
        if len(options) == 1:
            return {**{k: v for k, v in prop.items() if k not in ("anyOf", "default")}, **options[0]}
        return prop

    parts: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for name, prop in (body_schema(model)["properties"] if model else {}).items():
        if "properties" in prop:
            assert not set(prop["properties"]) & set(parts), f"{model}: a part of {name} has a field's name"
            parts |= {sub: (name, no_null(p)) for sub, p in prop["properties"].items()}
        else:
            parts[name] = (None, no_null(prop))
    return parts


def multipart_body(model: type[BaseModel] | None, file_description: str, *, file_required: bool) -> dict[str, Any]:
    """The ``multipart/form-data`` media type of a route that takes ``model``'s fields beside a DICOM upload
    (the part ``file``): one part per field (``_form_parts``), with the model's constraints; the file is
    declared ``application/dicom`` (a client, or a fuzzer, then knows that random bytes are not one)."""
    properties = {name: prop for name, (_, prop) in _form_parts(model).items()}
    properties["file"] = {"type": "string", "format": "binary", "description": file_description}
    required = [*(body_schema(model).get("required", []) if model else []), *(["file"] if file_required else [])]
    return {
        "schema": {"type": "object", "required": required, "properties": properties, "additionalProperties": False},
        "encoding": {"file": {"contentType": "application/dicom"}},
    }


_INTEGER = re.compile(r"^-?\d+$")


def form_fields(model: type[BaseModel] | None, fields: dict[str, str]) -> dict[str, Any]:
    """The text parts of a multipart body (``multipart_body``) as the fields of ``model``, for a strict
    validation: ``true``/``false`` for a boolean, digits for an integer, an object field's parts gathered into
    it. 422 naming the part for an unknown part or text of the wrong kind, as a JSON body of the wrong type gets."""
    parts = _form_parts(model)
    unknown = sorted(set(fields) - set(parts))
    if unknown:
        raise HTTPException(422, f"unknown parts {unknown}: expected {sorted(parts)} and 'file'")
    out: dict[str, Any] = {}
    for name, text in fields.items():
        parent, prop = parts[name]
        value: Any = text
        if prop.get("type") == "boolean":
            if text not in ("true", "false"):
                raise HTTPException(422, f"the part {name!r} must be true or false")
            value = text == "true"
        elif prop.get("type") == "integer":
            if not _INTEGER.match(text):
                raise HTTPException(422, f"the part {name!r} must be an integer")
            value = int(text)
        if parent is None:
            out[name] = value
        else:
            out.setdefault(parent, {})[name] = value
    return out
