"""The security middleware (API keys, open mode, rate limit) and :func:`install_security`, which adds
it to the app with the body limits, CORS and the JSON error handlers."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from kg.settings import Settings
from service.api.security.body_limit import BodySizeLimitMiddleware
from service.api.security.errors import document_errors, error_response, install_error_handlers
from service.api.security.keys import ApiKeyRing, document_keys, presented_key
from service.api.security.open_mode import foreign_page, not_local
from service.api.security.paths import is_public, request_path
from service.api.security.proxies import ProxyTrust
from service.api.security.rate_limit import RateLimiter, too_many

__all__ = ["SecurityMiddleware", "SecurityState", "install_security"]


class SecurityState:
    """What :func:`install_security` keeps (on ``app.state.security``): digests, never plaintext keys."""

    def __init__(self, settings: Settings) -> None:
        configured = settings.api_keys.get_secret_value() if settings.api_keys is not None else None
        self.keys = ApiKeyRing.from_config(configured)
        self.limiter = RateLimiter(settings.rate_limit_per_minute)
        self.max_request_bytes = settings.max_request_bytes
        self.cors_origins = tuple(settings.cors_origin_list)
        self.proxies = ProxyTrust.from_config(settings.trusted_proxy_list)

    @property
    def open_mode(self) -> bool:
        return not self.keys

    def __repr__(self) -> str:
        mode = "open (loopback only)" if self.open_mode else f"{len(self.keys)} API key(s)"
        return f"SecurityState({mode}, {self.limiter!r}, {self.proxies!r}, max_request_bytes={self.max_request_bytes})"


class SecurityMiddleware:
    """API keys (401), loopback-only open mode (403) and the per-caller rate limit (429).

    The client is the socket peer, or the one a trusted proxy names (:class:`ProxyTrust`); a client a
    proxy names replaces ``scope["client"]`` (so ``request.client`` and the access log show it), and the
    peer stays in ``request.state.api_peer``. Sets ``request.state.api_caller`` to ``"key:<digest>"`` or
    ``"host:<address>"`` (``"host:unknown"`` where the headers could not be read).
    """

    def __init__(self, app: ASGIApp, state: SecurityState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = request_path(scope)
        peer = scope.get("client")
        headers = Headers(scope=scope)
        who = self.state.proxies.resolve(peer[0] if peer else None, headers)
        if who.trusted_peer and who.host is not None and who.forwarded:
            scope["client"] = (who.host, who.port)
        host = who.host or ""
        limiter = self.state.limiter
        refusal: Response | None = None
        caller = f"host:{who.host or 'unknown'}"
        if not is_public(path):
            if self.state.keys:
                presented = presented_key(headers)
                digest = self.state.keys.match(presented) if presented is not None else None
                if digest is None:
                    # Failed attempts draw on the address's bucket, which slows key guessing.
                    wait = limiter.acquire(caller)
                    if wait:
                        refusal = too_many(wait)
                    else:
                        detail = (
                            "invalid API key"
                            if presented is not None
                            else "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
                        )
                        refusal = error_response(401, detail, headers={"WWW-Authenticate": "Bearer"})
                else:
                    caller = f"key:{digest}"
            elif reason := not_local(who):
                refusal = error_response(403, reason)
            elif reason := foreign_page(headers, host):
                refusal = error_response(403, reason)
        if refusal is None and not is_public(path):  # pages, static files and probes cost no bucket
            wait = limiter.acquire(caller)
            if wait:
                refusal = too_many(wait)
        if refusal is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await refusal(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["api_caller"] = caller
        state["api_peer"] = who.peer
        await self.app(scope, receive, send)


def install_security(app: FastAPI, settings: Settings) -> None:
    """Add keys, limits, CORS and the JSON error handlers to ``app`` (before it starts)."""
    state = SecurityState(settings)
    app.state.security = state

    install_error_handlers(app)

    # add_middleware puts each new one outside the previous: CORS (outermost, so preflights and
    # error responses get its headers) → keys and rate limit → body size → the app.
    app.add_middleware(
        BodySizeLimitMiddleware, max_bytes=state.max_request_bytes, max_upload_bytes=settings.max_upload_bytes
    )
    app.add_middleware(SecurityMiddleware, state=state)
    if state.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(state.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
            expose_headers=["Retry-After"],
        )
    document_errors(app, is_public)
    if state.keys:
        document_keys(app)
