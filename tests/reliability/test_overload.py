"""Load shedding over real HTTP: the real app under uvicorn, a request held in flight by a client that
has sent only part of its body, and what the next request gets (MEDKG_MAX_IN_FLIGHT)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from kg.settings import load_settings
from service.api.app import create_app
from service.api.overload import InFlightLimiter

pytestmark = pytest.mark.reliability

KEY = "medkg-overload-test-key"


@contextmanager
def serving(tmp_path: Path, **overrides: Any) -> Iterator[tuple[str, Any]]:
    """uvicorn serving the real app on a free loopback port: (base URL, app)."""
    options: dict[str, Any] = {"api_keys": None, "rate_limit_per_minute": 0, "cors_origins": ""} | overrides
    settings = load_settings(data_dir=tmp_path, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2, **options)
    app = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


class HeldRequest:
    """``POST /v1/qa`` whose body arrives in two parts: in flight (the route reads its body) until
    :meth:`finish` sends the rest. The body is ``{"question": ""}``: a quick 422 once complete."""

    BODY = b'{"question": ""}'

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST /v1/qa HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(self.BODY)}\r\nConnection: close\r\n\r\n"
        )
        self.sock.sendall(head.encode() + self.BODY[:5])

    def finish(self) -> int:
        self.sock.sendall(self.BODY[5:])
        data = b""
        while chunk := self.sock.recv(65536):
            data += chunk
        self.sock.close()
        return int(data.split(b" ", 2)[1])


def test_a_request_over_the_limit_gets_503_overloaded_with_retry_after(tmp_path: Path) -> None:
    with serving(tmp_path, max_in_flight=1, max_queue_wait_s=0.3) as (base, app):
        limiter: InFlightLimiter = app.state.overload
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.get("/v1/entities", params={"q": "Marfan syndrome"}).status_code == 200
            held = HeldRequest(base)
            wait_until(lambda: limiter.in_flight == 1, "the held request takes the only slot")

            t0 = time.perf_counter()
            r = client.get("/v1/entities", params={"q": "Marfan syndrome"})
            waited = time.perf_counter() - t0
            assert r.status_code == 503
            assert r.headers["Retry-After"] == "1"
            body = r.json()
            assert body["error"] == "overloaded" and body["status"] == 503
            assert "MEDKG_MAX_IN_FLIGHT" in body["detail"]
            assert waited >= 0.3  # it waited its turn for the queue wait first
            assert client.post("/v1/search", json={"q": "marfan"}).status_code == 503
            assert limiter.shed == 2

            health = client.get("/healthz")  # probes are never held back
            assert health.status_code == 200 and health.json()["status"] == "ok"

            assert held.finish() == 422  # the held request is served in the end
            wait_until(lambda: limiter.in_flight == 0, "the slot is free again")
            assert client.get("/v1/entities", params={"q": "Marfan syndrome"}).status_code == 200
            assert limiter.in_flight == 0


def test_a_waiting_request_takes_the_slot_when_it_frees(tmp_path: Path) -> None:
    with serving(tmp_path, max_in_flight=1, max_queue_wait_s=20) as (base, app):
        limiter: InFlightLimiter = app.state.overload
        held = HeldRequest(base)
        wait_until(lambda: limiter.in_flight == 1, "the held request takes the only slot")
        result: dict[str, Any] = {}

        def queued() -> None:
            t0 = time.perf_counter()
            result["status"] = httpx.get(f"{base}/v1/entities", params={"q": "seizure"}, timeout=30).status_code
            result["seconds"] = time.perf_counter() - t0

        thread = threading.Thread(target=queued)
        thread.start()
        wait_until(lambda: limiter.waiting == 1, "the second request waits for the slot")
        time.sleep(0.2)
        assert "status" not in result  # still waiting: not refused, not served alongside
        assert held.finish() == 422
        thread.join(timeout=30)
        assert result["status"] == 200 and result["seconds"] < 20
        assert limiter.shed == 0 and limiter.in_flight == 0


def test_keys_are_checked_before_a_slot_is_taken(tmp_path: Path) -> None:
    with serving(tmp_path, api_keys=KEY, max_in_flight=1, max_queue_wait_s=0.1) as (base, app):
        limiter: InFlightLimiter = app.state.overload
        held = HeldRequest(base, {"Authorization": f"Bearer {KEY}"})
        wait_until(lambda: limiter.in_flight == 1, "the held request takes the only slot")
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.get("/v1/entities", params={"q": "x"}).status_code == 401  # no key: refused first
            keyed = client.get("/v1/entities", params={"q": "x"}, headers={"X-API-Key": KEY})
            assert keyed.status_code == 503 and keyed.json()["error"] == "overloaded"
        assert held.finish() == 422


def test_zero_turns_the_limit_off(tmp_path: Path) -> None:
    with serving(tmp_path, max_in_flight=0) as (base, app):
        assert app.state.overload is None
        held = HeldRequest(base)
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(3):
                assert client.get("/v1/entities", params={"q": "x"}).status_code == 200
        assert held.finish() == 422


def test_a_waiter_cancelled_after_the_handover_gives_its_slot_back() -> None:
    async def scenario() -> InFlightLimiter:
        limiter = InFlightLimiter(1, wait_s=5)
        assert await limiter.acquire()
        waiter = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0.01)
        assert limiter.waiting == 1
        limiter.release()  # handed to the waiter ...
        waiter.cancel()  # ... whose client has gone away before it ran
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return limiter

    limiter = asyncio.run(scenario())
    assert limiter.in_flight == 0 and limiter.waiting == 0
