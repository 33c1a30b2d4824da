"""A build that runs behind a live server: the parts of a job that embed (the entity index, abstracts,
reports, images) run one after another in a background thread while the API answers from what is
indexed so far. ``report()`` (shown by ``/readyz`` and the pages) gives each part's state and the
running part's progress and ETA, read from its progress bars (:mod:`kg.progress`). ``stop()`` asks the
running part to stop at its next progress update; every part is resumable (checkpointed loads,
fingerprinted embeddings), so the same job run again finishes the work and loses nothing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kg.progress import Stopped, Watch, watched

__all__ = ["BackgroundBuild", "Part"]

log = logging.getLogger("medkg.build")


@dataclass
class Part:
    """One resumable part of a job: ``run()`` does it, yielding events for ``on_event`` to show."""

    title: str
    run: Callable[[], Iterable[object]]


@dataclass
class _PartState:
    state: str = "waiting"  # waiting, running, done, stopped, failed
    started: float | None = None
    finished: float | None = None
    error: str | None = None
    watch: Watch | None = None


class BackgroundBuild:
    def __init__(self, parts: list[Part], on_event: Callable[[object], None] = lambda _: None) -> None:
        self.parts = parts
        self.on_event = on_event
        self._states = [_PartState() for _ in parts]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="medkg-build", daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        for part, status in zip(self.parts, self._states, strict=True):
            watch = Watch()
            with self._lock:
                if self._stop.is_set():
                    status.state = "stopped"
                    continue
                status.state, status.started, status.watch = "running", time.monotonic(), watch
            try:
                with watched(watch):
                    for event in part.run():
                        self.on_event(event)
                outcome, error = "done", None
            except Stopped:
                outcome, error = "stopped", None
            except Exception as exc:  # noqa: BLE001 - reported, and the parts after it still run
                log.exception("the build's part %r failed", part.title)
                outcome, error = "failed", f"{type(exc).__name__}: {exc}"
            with self._lock:
                status.state, status.finished, status.error = outcome, time.monotonic(), error

    def stop(self, timeout_s: float | None = None) -> bool:
        """Ask the running part to stop at its next progress update and skip the rest; wait for the thread
        (``timeout_s`` at most). True once it has ended."""
        with self._lock:
            self._stop.set()
            for status in self._states:
                if status.state == "running" and status.watch is not None:
                    status.watch.request_stop()
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.running

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the build to end by itself; True once it has."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.running

    def report(self) -> dict[str, Any]:
        """The build's state (running, done, stopped, failed), each part's, and the running part's progress
        with its ETA (seconds, where its size is known ahead)."""
        now = time.monotonic()
        parts: list[dict[str, Any]] = []
        eta: float | None = None
        with self._lock:
            for part, status in zip(self.parts, self._states, strict=True):
                entry: dict[str, Any] = {"title": part.title, "state": status.state}
                if status.started is not None:
                    entry["seconds"] = round((status.finished or now) - status.started, 1)
                if status.error:
                    entry["error"] = status.error
                if status.state == "running" and status.watch is not None:
                    bar = status.watch.active()
                    if bar is not None:
                        entry["progress"] = bar.as_dict(now)
                        eta = bar.eta_s(now)
                parts.append(entry)
        states = {p["state"] for p in parts}
        if self.running or (self._thread is None and "waiting" in states):
            state = "running"
        elif "failed" in states:
            state = "failed"
        elif "stopped" in states:
            state = "stopped"
        else:
            state = "done"
        return {"state": state, "eta_s": round(eta) if eta is not None else None, "parts": parts}
