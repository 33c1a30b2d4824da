"""Reverse proxies (``MEDKG_TRUSTED_PROXIES``): whose ``X-Forwarded-For`` / ``Forwarded: for=`` headers are
believed, and the client address a request is taken to come from."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import NamedTuple

from starlette.datastructures import Headers

__all__ = ["ForwardedClient", "ProxyTrust"]

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
    """The reverse proxies whose forwarding headers are believed (``MEDKG_TRUSTED_PROXIES``).

    Behind a reverse proxy every request comes from the proxy. The client is the right-most address of
    the chain that is not a trusted proxy, and that address is what the loopback check, the rate
    buckets and ``request.client`` (so the access log) see.
    """

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
