"""The API's security and error layer: API keys, loopback-only open mode, body-size and rate limits,
CORS, and one JSON shape for every error.

Install it with :func:`install_security`. Error responses look like::

    {"error": "unauthorized", "detail": "missing API key: ...", "status": 401}

``detail`` is a message, or for a request that fails validation (422) the list of problems.

Keys (``MEDKG_API_KEYS``) are hashed at install time; only their SHA-256 digests stay in memory,
and a configured ``sha256:<hex>`` entry is used as is, so a deployment need not hold the plaintext.
Without keys the API serves loopback clients only (``127.0.0.1``, ``::1``) and says so at start-up.

Behind a reverse proxy every request comes from the proxy. ``MEDKG_TRUSTED_PROXIES`` names the proxies
whose ``X-Forwarded-For`` / ``Forwarded: for=`` headers are believed (:class:`ProxyTrust`): the client is
the right-most address of the chain that is not a trusted proxy, and that address is what the loopback
check, the rate buckets and ``request.client`` (so the access log) see. Without keys, a request that
carries such a header from any other peer is refused, and so is one from a trusted proxy that names no
client: either would otherwise make a remote client look local.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, NamedTuple

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kg.settings import Settings

__all__ = [
    "ApiKeyRing",
    "BodySizeLimitMiddleware",
    "ErrorBody",
    "ForwardedClient",
    "ProxyTrust",
    "RateLimiter",
    "SecurityMiddleware",
    "SecurityState",
    "announce_startup",
    "error_code",
    "error_response",
    "install_security",
    "is_loopback",
    "startup_warning",
]

log = logging.getLogger("medkg.api")

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
#: Host names a loopback client reaches this machine by (Starlette's TestClient: "testserver").
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

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


# --- keys ------------------------------------------------------------------------------------------


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKeyRing:
    """The SHA-256 hex digests of the configured API keys; the plaintext is never stored."""

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


def _presented_key(headers: Headers) -> str | None:
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    key = headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


def is_loopback(host: str | None) -> bool:
    """Whether a client address (or bind host) is this machine."""
    if not host:
        return False
    # Starlette's TestClient reports the client as "testclient" unless given client=(host, port).
    # A real ASGI server always reports the socket peer's IP address, never this name, so treating
    # it as loopback lets in-process tests run in open mode and opens nothing to the network.
    if host in ("localhost", "testclient"):
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


# --- reverse proxies -------------------------------------------------------------------------------

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> _Address | None:
    """An IP address as a socket or a proxy reports it, IPv4-mapped IPv6 as IPv4; None if it is not one."""
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _node(text: str) -> tuple[_Address, int] | None:
    """One hop of a forwarding header: ``1.2.3.4``, ``1.2.3.4:80``, ``2001:db8::1``, ``[2001:db8::1]`` or
    ``[2001:db8::1]:80``. None for anything else ("unknown", an obfuscated ``_name``, garbage)."""
    text = text.strip()
    port_text = None
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        text, port_text = inside, (rest[1:] if rest else None)
    elif text.count(":") == 1:
        text, port_text = text.split(":")
    port = 0
    if port_text is not None:
        # ASCII digits only, and few of them (int() of a huge digit string raises)
        if not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
            return None
        port = int(port_text)
    if not text or "%" in text or port > 65535:
        return None
    ip = _address(text)
    return (ip, port) if ip is not None else None


def _forwarded_for(value: str) -> list[str | None]:
    """The ``for=`` of each element of an RFC 7239 ``Forwarded`` header, in order (None where an element
    has none or cannot be read). Quoted strings may hold ``,``, ``;`` and ``=``."""
    elements: list[str | None] = []
    pairs: dict[str, str] = {}
    token, quoted, escaped, broken = "", False, False, False

    def end_pair() -> None:
        nonlocal token, broken
        name, eq, val = token.partition("=")
        name = name.strip().lower()
        if eq and name and name not in pairs:
            pairs[name] = val.strip()
        elif eq or name or val.strip():
            broken = True
        token = ""

    def end_element() -> None:
        nonlocal pairs, broken
        end_pair()
        for_value = pairs.get("for")
        if for_value is not None and for_value.startswith('"'):
            for_value = for_value[1:-1] if len(for_value) > 1 and for_value.endswith('"') else None
        elements.append(None if broken or not for_value else for_value)
        pairs, broken = {}, False

    for ch in value:
        if escaped:
            token += ch
            escaped = False
        elif quoted:
            if ch == "\\":
                escaped = True
                continue
            token += ch
            quoted = ch != '"'
        elif ch == '"':
            token += ch
            quoted = True
        elif ch == ";":
            end_pair()
        elif ch == ",":
            end_element()
        else:
            token += ch
    if quoted or escaped:
        broken = True
    end_element()
    return elements


class ForwardedClient(NamedTuple):
    """Who sent a request: the socket ``peer``, and the ``host`` it is taken to come from (None: unknown)."""

    host: str | None
    port: int
    peer: str
    #: whether the request carries X-Forwarded-For or Forwarded
    forwarded: bool
    #: whether the peer is a trusted proxy (so those headers were believed)
    trusted_peer: bool


class ProxyTrust:
    """The reverse proxies whose forwarding headers are believed (``MEDKG_TRUSTED_PROXIES``)."""

    def __init__(self, networks: Iterable[_Network] = ()) -> None:
        self.networks: tuple[_Network, ...] = tuple(networks)

    @classmethod
    def from_config(cls, configured: str | Iterable[str]) -> ProxyTrust:
        """Addresses and CIDR networks, a list or comma-separated (validated by the settings)."""
        entries = configured.split(",") if isinstance(configured, str) else configured
        return cls(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, ip: _Address | None) -> bool:
        return ip is not None and any(ip.version == n.version and ip in n for n in self.networks)

    def _walk(self, hops: list[str | None]) -> tuple[_Address, int] | None:
        # The standard algorithm: each proxy appends the address it saw, so read from the right and stop
        # at the first hop that is not a trusted proxy; what is further left is the client's own word.
        nodes = []
        for hop in reversed(hops):
            node = _node(hop) if hop is not None else None
            if node is None:
                return None
            if not self.trusts(node[0]):
                return node
            nodes.append(node)
        return nodes[-1] if nodes else None  # every hop a trusted proxy: the left-most is the client

    def resolve(self, peer: str | None, headers: Headers) -> ForwardedClient:
        """The client of a request from ``peer``: the peer itself, unless it is a trusted proxy and
        says whom it forwards for. Malformed headers, or two that disagree, give an unknown client."""
        peer = peer or ""
        peer_ip = _address(peer.strip("[]"))
        own = str(peer_ip) if peer_ip is not None else peer
        xff = headers.getlist("x-forwarded-for")
        fwd = headers.getlist("forwarded")
        forwarded = bool(xff or fwd)
        if not self.trusts(peer_ip):
            return ForwardedClient(own or None, 0, peer, forwarded, False)
        if not forwarded:
            return ForwardedClient(own, 0, peer, False, True)
        found: list[tuple[_Address, int] | None] = []
        if xff:
            found.append(self._walk(",".join(xff).split(",")))
        if fwd:
            found.append(self._walk(_forwarded_for(",".join(fwd))))
        named = [f for f in found if f is not None]
        if len(named) != len(found) or len({ip for ip, _ in named}) != 1:
            return ForwardedClient(None, 0, peer, True, True)
        ip, port = named[0]
        return ForwardedClient(str(ip), port, peer, True, True)

    def __repr__(self) -> str:
        return f"ProxyTrust({', '.join(map(str, self.networks)) or 'none'})"


# --- rate limit ------------------------------------------------------------------------------------


class RateLimiter:
    """A token bucket per caller: ``per_minute`` tokens, refilled continuously, burst = ``per_minute``.

    Thread-safe. ``per_minute == 0`` turns it off.
    """

    def __init__(
        self, per_minute: int, *, clock: Callable[[], float] = time.monotonic, max_callers: int = 10_000
    ) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0  # tokens per second
        self._clock = clock
        self._max_callers = max_callers
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, when)
        self._lock = threading.Lock()

    def acquire(self, caller: str) -> float:
        """Take a token for ``caller``: ``0.0`` if granted, else the seconds until one is due."""
        if self.per_minute <= 0:
            return 0.0
        capacity = float(self.per_minute)
        with self._lock:
            now = self._clock()
            tokens, when = self._buckets.get(caller, (capacity, now))
            tokens = min(capacity, tokens + (now - when) * self._rate)
            if tokens >= 1.0:
                self._buckets[caller] = (tokens - 1.0, now)
                if len(self._buckets) > self._max_callers:
                    self._prune(now, capacity)
                return 0.0
            self._buckets[caller] = (tokens, now)
            return (1.0 - tokens) / self._rate

    def _prune(self, now: float, capacity: float) -> None:
        # A bucket that has refilled completely is the same as no bucket.
        full = [c for c, (t, w) in self._buckets.items() if t + (now - w) * self._rate >= capacity]
        for caller in full:
            del self._buckets[caller]

    def __repr__(self) -> str:
        return f"RateLimiter({self.per_minute}/min, {len(self._buckets)} caller(s))"


# --- middleware ------------------------------------------------------------------------------------


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


def _path(scope: Scope) -> str:
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def _too_many(wait: float) -> JSONResponse:
    seconds = max(1, math.ceil(wait))
    return error_response(429, f"rate limit exceeded: retry in {seconds} s", headers={"Retry-After": str(seconds)})


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
        path = _path(scope)
        peer = scope.get("client")
        headers = Headers(scope=scope)
        who = self.state.proxies.resolve(peer[0] if peer else None, headers)
        if who.trusted_peer and who.host is not None and who.forwarded:
            scope["client"] = (who.host, who.port)
        host = who.host or ""
        limiter = self.state.limiter
        refusal: Response | None = None
        caller = f"host:{who.host or 'unknown'}"
        if path not in PUBLIC_PATHS and not path.startswith(PUBLIC_PREFIXES):
            if self.state.keys:
                presented = _presented_key(headers)
                digest = self.state.keys.match(presented) if presented is not None else None
                if digest is None:
                    # Failed attempts draw on the address's bucket, which slows key guessing.
                    wait = limiter.acquire(caller)
                    if wait:
                        refusal = _too_many(wait)
                    else:
                        detail = (
                            "invalid API key"
                            if presented is not None
                            else "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
                        )
                        refusal = error_response(401, detail, headers={"WWW-Authenticate": "Bearer"})
                else:
                    caller = f"key:{digest}"
            elif reason := _not_local(who):
                refusal = error_response(403, reason)
            elif reason := _foreign_page(headers, host):
                refusal = error_response(403, reason)
        public = path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
        if refusal is None and not public:  # pages, static files and probes cost no bucket
            wait = limiter.acquire(caller)
            if wait:
                refusal = _too_many(wait)
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


def _not_local(who: ForwardedClient) -> str | None:
    """Why an open-mode (no keys) request is not from this machine, or None."""
    if who.forwarded and not who.trusted_peer:
        # A proxy on this machine makes every client look local; its headers are the only sign.
        return (
            f"no API keys are configured, so this API serves loopback clients only, and this request was "
            f"forwarded (X-Forwarded-For or Forwarded) by {who.peer or 'a peer'}, which is not a trusted proxy: "
            "set MEDKG_API_KEYS to serve other clients, or MEDKG_TRUSTED_PROXIES to the proxy's address"
        )
    if who.trusted_peer and not who.forwarded:
        return (
            f"no API keys are configured, so this API serves loopback clients only, and this request came from "
            f"the trusted proxy {who.peer} without naming its client: the proxy must send X-Forwarded-For "
            "(nginx: proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for) or Forwarded"
        )
    if who.host is None and who.forwarded:
        return (
            "no API keys are configured, so this API serves loopback clients only, and the client's address "
            "could not be read from X-Forwarded-For / Forwarded (malformed, unknown, or the two disagree)"
        )
    if not is_loopback(who.host):
        return (
            "no API keys are configured, so this API serves loopback clients only: "
            "set MEDKG_API_KEYS to serve other clients"
        )
    return None


def _hostname(value: str) -> str:
    """The host name of a Host header or an Origin ("127.0.0.1:8000", "http://[::1]:8000")."""
    netloc = value.split("://", 1)[-1].split("/", 1)[0]
    if netloc.startswith("["):
        return netloc[1:].split("]", 1)[0].lower()
    return netloc.rsplit(":", 1)[0].lower() if netloc.count(":") == 1 else netloc.lower()


def _foreign_page(headers: Headers, client: str) -> str | None:
    """Why an open-mode (no keys, loopback) request may come from a web page of another site, or None.
    A page can reach a loopback API through DNS rebinding (its own host name, resolved to 127.0.0.1:
    a Host that is not this machine's) or post to it across sites (an Origin that is not this
    machine); without keys nothing else would stop either."""
    names = _LOCAL_NAMES | ({"testserver"} if client == "testclient" else set())
    host = headers.get("host")
    if host is not None and _hostname(host) not in names:
        return f"Host {host!r} is not this machine: without API keys this API answers requests to localhost only"
    origin = headers.get("origin")
    if origin is not None and _hostname(origin) not in names:
        return f"requests from pages of {origin!r} are refused: without API keys only this machine's pages may call"
    return None


class _BodyTooLarge(Exception):
    pass


class BodySizeLimitMiddleware:
    """413 for a body over ``max_bytes``: at once from ``Content-Length``, else while a chunked body
    is received. Pure ASGI, so streaming responses are untouched."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_upload_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes or max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        # File uploads (multipart: a DICOM study) to the routes that take one have a limit of their own,
        # MEDKG_MAX_UPLOAD_BYTES (any other route keeps the request limit, whatever its content type).
        upload = _path(scope) in UPLOAD_PATHS and headers.get("content-type", "").lower().startswith(
            "multipart/form-data"
        )
        limit = self.max_upload_bytes if upload else self.max_bytes
        setting = "MEDKG_MAX_UPLOAD_BYTES" if upload else "MEDKG_MAX_REQUEST_BYTES"

        def too_large() -> JSONResponse:
            return error_response(413, f"request body over {limit} bytes ({setting})")

        length = headers.get("content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await error_response(400, "invalid Content-Length header")(scope, receive, send)
                return
            if declared > limit:
                await too_large()(scope, receive, send)
                return

        received = 0
        exceeded = False
        started = False
        replaced = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            if exceeded:
                raise _BodyTooLarge
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started, replaced
            if exceeded and not started:
                # Whatever the app made of the cut-off body (often a 400), the answer is 413.
                if not replaced:
                    replaced = True
                    await too_large()(scope, receive, send)
                return
            if replaced:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _BodyTooLarge:
            if not started and not replaced:
                replaced = True
                await too_large()(scope, receive, send)
            elif not replaced:
                raise


# --- error handlers --------------------------------------------------------------------------------


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code < 200 or exc.status_code in (204, 205, 304):
        return Response(status_code=exc.status_code, headers=headers)
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


# --- start-up --------------------------------------------------------------------------------------


def startup_warning(settings: Settings) -> str | None:
    """What to say loudly at start-up about the API's exposure, or ``None`` when keys are set."""
    if settings.api_keys is not None:
        return None
    text = (
        "WARNING: MEDKG_API_KEYS is not set: the medkg API needs no key and serves loopback clients "
        "(127.0.0.1, ::1) only; every other client gets 403. Set MEDKG_API_KEYS to serve other hosts."
    )
    if settings.trusted_proxy_list:
        text += (
            f" Requests from the trusted proxies ({', '.join(settings.trusted_proxy_list)}) are served when the "
            "client they name in X-Forwarded-For / Forwarded is loopback."
        )
    else:
        text += (
            " Behind a reverse proxy every client looks local: a request that carries X-Forwarded-For or "
            "Forwarded is refused unless MEDKG_TRUSTED_PROXIES names the proxy."
        )
    if not is_loopback(settings.api_host):
        text += f" The API binds to {settings.api_host}, which other hosts can reach, and they will be refused."
    return text


def announce_startup(settings: Settings) -> str | None:
    """Log the :func:`startup_warning` (``medkg.api``, WARNING) and print it to stderr."""
    text = startup_warning(settings)
    if text:
        log.warning(text)
        print(text, file=sys.stderr, flush=True)
    return text


def _document_keys(app: FastAPI) -> None:
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


class ErrorBody(BaseModel):
    """The body of every error response (what :func:`error_response` writes)."""

    error: str = Field(description="A code: validation_error, not_found, unauthorized, rate_limited, ...")
    detail: Any = Field(description="A message, or for a request that fails validation (422) the list of problems.")
    status: int = Field(description="The HTTP status, repeated.")


def _document_errors(app: FastAPI) -> None:
    """Declare the app's one error shape in the OpenAPI schema: FastAPI's default 422 schema
    (``{"detail": [...]}``) is not what this app answers, and clients generated from it would fail."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas["ErrorBody"] = ErrorBody.model_json_schema()
        body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                responses = operation.get("responses", {})
                for status, response in responses.items():
                    if status[:1] in ("4", "5"):
                        response["content"] = body
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install_security(app: FastAPI, settings: Settings) -> None:
    """Add keys, limits, CORS and the JSON error handlers to ``app`` (before it starts)."""
    state = SecurityState(settings)
    app.state.security = state

    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal_error)

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
    _document_errors(app)
    if state.keys:
        _document_keys(app)
