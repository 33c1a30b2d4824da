"""API keys (``MEDKG_API_KEYS``): kept as SHA-256 digests only, read from ``Authorization: Bearer`` or
``X-API-Key``, and declared in the OpenAPI schema so /docs can send one."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import Headers

__all__ = ["ApiKeyRing", "document_keys", "presented_key"]


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKeyRing:
    """The SHA-256 hex digests of the configured API keys; the plaintext is never stored.

    A configured ``sha256:<hex>`` entry is used as is, so a deployment need not hold the plaintext.
    """

    def __init__(self, digests: Iterable[str] = ()) -> None:
        self.digests: tuple[str, ...] = tuple(sorted({d.lower() for d in digests}))

    @classmethod
    def from_config(cls, configured: str | None) -> ApiKeyRing:
        """Entries are comma-separated: a plaintext key (hashed here) or ``sha256:<64 hex>``."""
        digests = []
        for entry in (configured or "").split(","):
            entry = entry.strip()
            if not entry:
                continue
            if entry.lower().startswith("sha256:"):
                digests.append(entry[len("sha256:") :])
            else:
                digests.append(_digest(entry))
        return cls(digests)

    def __bool__(self) -> bool:
        return bool(self.digests)

    def __len__(self) -> int:
        return len(self.digests)

    def match(self, presented: str) -> str | None:
        """The digest of ``presented`` if it is a configured key, else ``None`` (constant-time compare)."""
        digest = _digest(presented)
        found = None
        for known in self.digests:  # no early exit: the time taken does not say which key matched
            if hmac.compare_digest(known, digest):
                found = known
        return found

    def __repr__(self) -> str:
        return f"ApiKeyRing({len(self.digests)} key(s))"


def presented_key(headers: Headers) -> str | None:
    """The key a request sends (``Authorization: Bearer <key>``, else ``X-API-Key``), or None."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    key = headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


def document_keys(app: FastAPI) -> None:
    """Declare the two key headers in the OpenAPI schema, so /docs can send a key."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes["bearerKey"] = {"type": "http", "scheme": "bearer", "description": "An API key (MEDKG_API_KEYS)."}
        schemes["headerKey"] = {"type": "apiKey", "in": "header", "name": "X-API-Key"}
        schema["security"] = [{"bearerKey": []}, {"headerKey": []}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
