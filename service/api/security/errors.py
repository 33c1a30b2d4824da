"""The API's one error shape, ``{"error": code, "detail": ..., "status": status}``, its handlers and
its OpenAPI schema. ``detail`` is a message, or for a request that fails validation (422) the list
of problems."""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

__all__ = ["ErrorBody", "document_errors", "error_code", "error_response", "install_error_handlers"]

log = logging.getLogger("medkg.api")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    410: "gone",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    501: "not_implemented",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


def error_code(status: int) -> str:
    """The ``error`` code for an HTTP status (``401`` → ``"unauthorized"``)."""
    if status in _CODES:
        return _CODES[status]
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "bad_request" if 400 <= status < 500 else "internal_error"


def error_response(
    status: int, detail: Any, code: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The app's one error shape: ``{"error": code, "detail": detail, "status": status}``."""
    body = {"error": code or error_code(status), "detail": jsonable_encoder(detail), "status": status}
    return JSONResponse(body, status_code=status, headers=headers)


# What FastAPI raises (400) for a body it cannot decode; a body that is not JSON is 422 here, as for any other.
FASTAPI_BODY_ERROR = "There was an error parsing the body"


# --- error handlers --------------------------------------------------------------------------------


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code == 405:  # Starlette names the methods of the first route of the path only
        headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
    if exc.status_code < 200 or exc.status_code in (204, 205, 304):
        return Response(status_code=exc.status_code, headers=headers)
    if exc.status_code == 400 and exc.detail == FASTAPI_BODY_ERROR:  # bytes that are not UTF-8 text: not JSON
        return error_response(422, "request body is not valid JSON (UTF-8 text)", headers=headers)
    return error_response(exc.status_code, exc.detail, headers=headers)


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    for err in errors:
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error")
            detail = "request body is not valid JSON" + (f": {reason}" if reason else "")
            return error_response(422, detail, "validation_error")
    # where and what, never the value sent (it may be the whole body, and clinical text)
    return error_response(
        422, [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in errors], "validation_error"
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal error", "internal_error")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the request's path answers (HEAD with GET, as Starlette serves it)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)  # PARTIAL: the path, not the method
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    """Answer HTTP errors, validation errors and unhandled exceptions in the one error shape."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal_error)


# --- OpenAPI ---------------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """The body of every error response (what :func:`error_response` writes)."""

    error: str = Field(description="A code: validation_error, not_found, unauthorized, rate_limited, ...")
    detail: Any = Field(description="A message, or for a request that fails validation (422) the list of problems.")
    status: int = Field(description="The HTTP status, repeated.")


_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}
# What the layers in front of every route can answer, besides what a route itself documents.
_GUARDED = {
    "401": ("A key is required (MEDKG_API_KEYS) and none or a wrong one was sent.", None),
    "403": ("Open mode (no keys configured): the client is not on loopback, or a foreign page sent it.", None),
    "429": ("Rate limit (MEDKG_RATE_LIMIT_PER_MINUTE) exceeded.", _RETRY_AFTER),
}
_ALWAYS = {
    "503": (
        "Unavailable: overloaded (MEDKG_MAX_IN_FLIGHT), the graph store is down, or an index is damaged.",
        _RETRY_AFTER,
    ),
}
_WITH_BODY = {
    "413": ("The request body is larger than MEDKG_MAX_REQUEST_BYTES (MEDKG_MAX_UPLOAD_BYTES for uploads).", None)
}
_WITH_INPUT = {"422": ("A parameter or the body is not valid: the problems in detail.", None)}
_MULTIPART = {"400": ("A multipart body that cannot be parsed.", None)}


def document_errors(app: FastAPI, public: Callable[[str], bool]) -> None:
    """Declare every error status each operation can answer, in the app's one error shape, in the
    OpenAPI schema: what the route documents, and what the layers in front of it answer (keys 401/403
    and the rate limit 429 on paths that are not ``public``, the overload limit and a store down 503,
    the body limit 413, validation 422), 429 and 503 with their ``Retry-After``. FastAPI's default 422
    schema (``{"detail": [...]}``) is not what this app answers, and clients generated from it would fail."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas["ErrorBody"] = ErrorBody.model_json_schema()
        body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for path, item in schema.get("paths", {}).items():
            for operation in item.values():
                responses = operation.setdefault("responses", {})
                extra = dict(_ALWAYS)
                if not public(path):
                    extra |= _GUARDED
                if "requestBody" in operation:
                    extra |= _WITH_BODY
                if "requestBody" in operation or operation.get("parameters"):
                    extra |= _WITH_INPUT
                if "multipart/form-data" in operation.get("requestBody", {}).get("content", {}):
                    extra |= _MULTIPART
                for status, (description, headers) in extra.items():
                    response = responses.setdefault(status, {"description": description})
                    if headers:
                        response.setdefault("headers", {}).update(headers)
                for status, response in responses.items():
                    if status[:1] in ("4", "5"):
                        response["content"] = body
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
