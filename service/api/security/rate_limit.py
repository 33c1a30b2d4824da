"""The per-caller rate limit (``MEDKG_RATE_LIMIT_PER_MINUTE``): a token bucket per API key or client
address, and its 429 answer."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from starlette.responses import JSONResponse

from service.api.security.errors import error_response

__all__ = ["RateLimiter", "too_many"]


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


def too_many(wait: float) -> JSONResponse:
    """429 with ``Retry-After``: the whole seconds until ``wait`` has passed."""
    seconds = max(1, math.ceil(wait))
    return error_response(429, f"rate limit exceeded: retry in {seconds} s", headers={"Retry-After": str(seconds)})
