"""Load shedding: a bound on the requests the API works on at once. Past ``MEDKG_MAX_IN_FLIGHT``, a request
waits up to ``MEDKG_MAX_QUEUE_WAIT_S`` for a slot, else gets 503 ``overloaded`` with ``Retry-After``: a
server offered more than it can do answers quickly and keeps its latency, instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from kg.settings import Settings
from service.api.security import HEALTH_PATHS, error_response

__all__ = ["InFlightLimiter", "OverloadMiddleware", "install_overload_limit"]

log = logging.getLogger("medkg.api")

RETRY_AFTER_S = 1


class InFlightLimiter:
    """At most ``limit`` holders at once; others wait up to ``wait_s`` in arrival order.

    Used from one event loop (the ASGI server's), so it needs no lock. A released slot is handed
    straight to the oldest waiter, so a request that waited is never overtaken by a newcomer.
    """

    def __init__(self, limit: int, wait_s: float) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.wait_s = wait_s
        self.in_flight = 0
        self.shed = 0  # requests refused since start
        self._waiters: deque[asyncio.Future[bool]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._waiters if not f.done())

    async def acquire(self) -> bool:
        """Take a slot: ``True`` once held (the caller must :meth:`release` it), ``False`` if none
        became free within ``wait_s``."""
        if self.in_flight < self.limit and not self.waiting:
            self.in_flight += 1
            return True
        if self.wait_s <= 0:
            self.shed += 1
            return False
        loop = asyncio.get_running_loop()
        slot: asyncio.Future[bool] = loop.create_future()  # True: a slot handed over; False: the wait ran out
        self._waiters.append(slot)
        timer = loop.call_later(self.wait_s, _expire, slot)
        try:
            granted = await slot
        except asyncio.CancelledError:  # the client went away while waiting
            if slot.done() and not slot.cancelled() and slot.result():
                self.release()  # handed over just before: pass it on
            raise
        finally:
            timer.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(slot)
        if not granted:
            self.shed += 1
        return granted

    def release(self) -> None:
        """Give a slot back: to the oldest waiter if there is one, else free it."""
        while self._waiters:
            slot = self._waiters.popleft()
            if not slot.done():
                slot.set_result(True)  # the waiter now holds this slot; in_flight is unchanged
                return
        self.in_flight -= 1

    def __repr__(self) -> str:
        return f"InFlightLimiter({self.in_flight}/{self.limit} in flight, wait {self.wait_s} s, {self.shed} shed)"


def _expire(slot: asyncio.Future[bool]) -> None:
    if not slot.done():
        slot.set_result(False)


class OverloadMiddleware:
    """503 ``overloaded`` with ``Retry-After`` when :class:`InFlightLimiter` has no slot in time.

    Pure ASGI: a streaming response holds its slot until its last byte is sent."""

    def __init__(self, app: ASGIApp, limiter: InFlightLimiter) -> None:
        self.app = app
        self.limiter = limiter
        self._warned_at = -1e9

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "") in HEALTH_PATHS:
            await self.app(scope, receive, send)
            return
        limiter = self.limiter
        if not await limiter.acquire():
            now = time.monotonic()
            if now - self._warned_at > 10:
                self._warned_at = now
                log.warning("overloaded: %s; shedding load with 503", limiter)
            refusal = error_response(
                503,
                f"the server is at its limit of {limiter.limit} requests in flight (MEDKG_MAX_IN_FLIGHT) "
                f"and none finished within {limiter.wait_s:g} s: retry in {RETRY_AFTER_S} s",
                code="overloaded",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
            await refusal(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            limiter.release()


def install_overload_limit(app: FastAPI, settings: Settings) -> InFlightLimiter | None:
    """Add :class:`OverloadMiddleware` (``MEDKG_MAX_IN_FLIGHT`` 0: none) and keep its limiter on
    ``app.state.overload``. Call it before ``install_security`` so that it sits innermost: a request has
    passed the key check, the rate limit and the body-size limit before it takes a slot. Health and
    readiness probes are never held back."""
    if settings.max_in_flight <= 0:
        app.state.overload = None
        return None
    limiter = InFlightLimiter(settings.max_in_flight, settings.max_queue_wait_s)
    app.state.overload = limiter
    app.add_middleware(OverloadMiddleware, limiter=limiter)
    return limiter
