"""Open mode: without API keys the API serves loopback clients (``127.0.0.1``, ``::1``) only, refuses
what could make a remote client or another site's page look local, and says so at start-up."""

from __future__ import annotations

import ipaddress
import logging
import sys

from starlette.datastructures import Headers

from kg.settings import Settings
from service.api.security.proxies import ForwardedClient

__all__ = ["announce_startup", "foreign_page", "is_loopback", "not_local", "startup_warning"]

log = logging.getLogger("medkg.api")

#: Host names a loopback client reaches this machine by (Starlette's TestClient: "testserver").
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


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


def not_local(who: ForwardedClient) -> str | None:
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


def foreign_page(headers: Headers, client: str) -> str | None:
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
