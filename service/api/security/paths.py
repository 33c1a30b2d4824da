"""Which request paths the security layer treats apart: public pages and probes (no key, no rate
bucket), health probes (no in-flight limit) and the upload routes (their own body limit)."""

from __future__ import annotations

from starlette.types import Scope

__all__ = ["HEALTH_PATHS", "PUBLIC_PATHS", "PUBLIC_PREFIXES", "UPLOAD_PATHS", "is_public", "request_path"]

#: Paths served without a key (and, in open mode, to any client), and without cost to a rate bucket.
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    # the web pages and their static files: no data in them; their API calls carry the key
    | {"/", "/reports", "/differential", "/eval"}
)
PUBLIC_PREFIXES = ("/static/",)
#: Probes: the in-flight limit (overload.py) leaves them alone.
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
#: The routes that take a study upload (multipart): MEDKG_MAX_UPLOAD_BYTES; every other body MEDKG_MAX_REQUEST_BYTES.
UPLOAD_PATHS = frozenset({"/v1/qa", "/v1/reports", "/v1/images/preview"})


def request_path(scope: Scope) -> str:
    """The request's path below the app's ``root_path``."""
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def is_public(path: str) -> bool:
    """Whether ``path`` (from :func:`request_path`) is served without a key and without a rate bucket."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
