"""Locust traffic for ``benchmarks/load_test.py``: what clinicians send to ``medkg serve`` (the ``MIX`` of
QA, search, entity look-ups and differentials), seeded per user so a run sends the same sequence every time.

Alone: ``locust -f benchmarks/locustfile.py --headless -u 4 -r 4 -t 20s --host http://127.0.0.1:8000``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from locust import FastHttpUser, constant, constant_throughput, events, task

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for benchmarks.load_test
from benchmarks.load_test import DIFFERENTIALS, ENTITY_NAMES, MIX, QUESTIONS, SEARCHES  # noqa: E402

# Configured by the environment (load_test.py sets it).
KEY = os.environ.get("MEDKG_LOAD_KEY", "")  # sent as Authorization: Bearer
RATE = float(os.environ.get("MEDKG_LOAD_RATE", "1"))  # requests per second per user; 0: back to back
SEED = int(os.environ.get("MEDKG_LOAD_SEED", "0"))
# A JSON file written at exit: every request (start, latency, endpoint, status, Retry-After, the body's
# error code) and when the test started and stopped.
RECORD = os.environ.get("MEDKG_LOAD_RECORD")
# Replicas: each user sends to one of these base URLs, in turn (a client-side balancer); else --host.
HOSTS = [h for h in os.environ.get("MEDKG_LOAD_HOSTS", "").split(",") if h]

_records: list[list[Any]] = []
_window: dict[str, float] = {}
_user_numbers = itertools.count()
_host_numbers = itertools.count()


@events.test_start.add_listener
def _started(**_: Any) -> None:
    _window["start"] = time.time()


@events.test_stopping.add_listener
def _stopped(**_: Any) -> None:
    # when the step stops sending (test_stop fires only after the requests in flight have drained:
    # that wait sends nothing and would lower the measured rate)
    _window["stop"] = time.time()


@events.request.add_listener
def _record(name: str, response_time: float, response: Any, exception: Any, start_time: float, **_: Any) -> None:
    status = getattr(response, "status_code", 0) or 0
    headers = getattr(response, "headers", None) or {}
    retry_after = headers.get("Retry-After") if status >= 400 else None
    code = None
    if status >= 400:
        try:
            code = json.loads(response.text or "{}").get("error")
        except (ValueError, AttributeError):
            code = "not_json"
    elif exception is not None and not status:
        code = type(exception).__name__
    _records.append([round(start_time, 4), round(response_time, 2), name, status, retry_after, code])


@events.quit.add_listener
def _write(**_: Any) -> None:
    if RECORD:
        with open(RECORD, "w") as f:
            json.dump({"window": _window, "columns": ["start", "ms", "name", "status", "retry_after", "error"],
                       "requests": _records}, f)  # fmt: skip


class Clinician(FastHttpUser):
    wait_time = constant_throughput(RATE) if RATE > 0 else constant(0)
    network_timeout = 30.0
    connection_timeout = 10.0

    def __init__(self, environment: Any) -> None:
        if HOSTS:
            self.host = HOSTS[next(_host_numbers) % len(HOSTS)]
        super().__init__(environment)

    def on_start(self) -> None:
        self.rng = random.Random(SEED * 100_003 + next(_user_numbers))
        self.headers = {"Authorization": f"Bearer {KEY}"} if KEY else {}

    def _send(self, method: str, path: str, name: str, **kwargs: Any) -> None:
        with self.client.request(
            method, path, name=name, headers=self.headers, catch_response=True, **kwargs
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")

    @task
    def clinician_request(self) -> None:
        kinds, weights = zip(*MIX, strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        if kind == "qa":
            body = {"question": self.rng.choice(QUESTIONS), "options": {"mode": "extractive"}}
            self._send("POST", "/v1/qa", "POST /v1/qa", json=body)
        elif kind == "search":
            self._send("POST", "/v1/search", "POST /v1/search", json={"q": self.rng.choice(SEARCHES), "k": 10})
        elif kind == "entities":
            query = urlencode({"q": self.rng.choice(ENTITY_NAMES)})
            self._send("GET", f"/v1/entities?{query}", "GET /v1/entities")
        else:
            self._send("POST", "/v1/differential", "POST /v1/differential", json=self.rng.choice(DIFFERENTIALS))
