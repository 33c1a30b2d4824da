"""The API's security and error layer: API keys, loopback-only open mode, trusted proxies, body-size
and rate limits, CORS, and one JSON shape for every error. Install it with :func:`install_security`."""

from __future__ import annotations

from service.api.security.body_limit import BodySizeLimitMiddleware
from service.api.security.errors import ErrorBody, error_code, error_response
from service.api.security.keys import ApiKeyRing
from service.api.security.middleware import SecurityMiddleware, SecurityState, install_security
from service.api.security.open_mode import announce_startup, is_loopback, startup_warning
from service.api.security.paths import HEALTH_PATHS, PUBLIC_PATHS, PUBLIC_PREFIXES, UPLOAD_PATHS
from service.api.security.proxies import ForwardedClient, ProxyTrust
from service.api.security.rate_limit import RateLimiter

__all__ = [
    "HEALTH_PATHS",
    "PUBLIC_PATHS",
    "PUBLIC_PREFIXES",
    "UPLOAD_PATHS",
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
