"""Progress bars another thread can watch, and stop: every long loop of medkg counts with
:func:`progress_bar` (a tqdm bar on the console, as before). A job run under :func:`watched` (the
served demo's background build) sees each bar's counts, rate and ETA, and can ask the job to stop: the
bar's next ``update`` raises :class:`Stopped`, and the loop ends as at an error, keeping what its
last checkpoint made durable. A data dir's writer job runs under :func:`published`: its bars go to a file
that every server on the data dir exports on /metrics."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

__all__ = [
    "PROGRESS_FILE",
    "BarState",
    "Stopped",
    "Watch",
    "progress_bar",
    "published",
    "read_published",
    "watched",
]

_current = threading.local()


class Stopped(Exception):
    """The watcher asked the job to stop (raised by a bar's ``update`` in the job's own thread)."""


@dataclass
class BarState:
    """What one bar has counted: ``done`` of ``total`` (None: not known ahead). The rate is timed from
    the bar's first update (``started``, when ``base`` were done), so what comes before it (a model
    loading for the first batch) and the first jump (the part a resumed job had already done) do not
    count."""

    desc: str
    unit: str
    total: int | None
    done: int = 0
    base: int = 0
    started: float | None = None
    finished: float | None = None

    def rate(self, now: float | None = None) -> float | None:
        """Units per second since the first update, once that is a second ago."""
        if self.started is None:
            return None
        elapsed = (self.finished or now or time.monotonic()) - self.started
        return (self.done - self.base) / elapsed if elapsed >= 1.0 and self.done > self.base else None

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at the rate so far, where the total is known."""
        rate = self.rate(now)
        if self.total is None or rate is None or self.finished is not None:
            return None
        return max(0.0, (self.total - self.done) / rate)

    def as_dict(self, now: float | None = None) -> dict[str, Any]:
        rate, eta = self.rate(now), self.eta_s(now)
        return {
            "what": self.desc,
            "unit": self.unit.strip(),
            "done": self.done,
            "total": self.total,
            "percent": round(100 * self.done / self.total, 1) if self.total else None,
            "rate_per_s": round(rate, 1) if rate else None,
            "eta_s": round(eta) if eta is not None else None,
        }


class Watch:
    """The bars of the job run under it (thread-safe to read), and its stop request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bars: list[BarState] = []
        self._stop = threading.Event()

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def _add(self, bar: BarState) -> None:
        with self._lock:
            self._bars.append(bar)

    def _count(self, bar: BarState, n: float) -> None:
        with self._lock:
            bar.done += int(n)
            if bar.started is None:
                bar.started, bar.base = time.monotonic(), bar.done
        if self._stop.is_set():
            raise Stopped("stop requested")

    def _finish(self, bar: BarState) -> None:
        with self._lock:
            bar.finished = time.monotonic()

    def bars(self) -> list[BarState]:
        """Copies of the bars so far, oldest first."""
        with self._lock:
            return [BarState(**vars(b)) for b in self._bars]

    def active(self) -> BarState | None:
        """The newest bar still counting (nested bars: the inner one), else None."""
        with self._lock:
            running = [b for b in self._bars if b.finished is None]
            return BarState(**vars(running[-1])) if running else None


@contextmanager
def watched(watch: Watch) -> Iterator[Watch]:
    """Bars made in this thread inside the block report to ``watch``."""
    previous = getattr(_current, "watch", None)
    _current.watch = watch
    try:
        yield watch
    finally:
        _current.watch = previous


class _WatchedBar(tqdm):
    """A tqdm bar that also reports to the thread's :class:`Watch`, counting even when not displayed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._watch: Watch | None = getattr(_current, "watch", None)
        initial = int(kwargs.get("initial") or 0)
        self._state = BarState(
            str(kwargs.get("desc") or ""), str(kwargs.get("unit") or "it"), kwargs.get("total"), initial
        )
        if self._watch is not None:
            self._watch._add(self._state)
        super().__init__(*args, **kwargs)

    def update(self, n: float | None = 1) -> bool | None:
        if self._watch is not None:
            self._watch._count(self._state, n or 0)
        return super().update(n)

    def close(self) -> None:
        if self._watch is not None and self._state.finished is None:
            self._watch._finish(self._state)
        super().close()


def progress_bar(**kwargs: Any) -> tqdm:
    """``tqdm(**kwargs)`` that a :class:`Watch` of this thread sees (and can stop at its next update)."""
    return _WatchedBar(**kwargs)


# ---- a job's progress for other processes ---------------------------------------------------------------
#: Where a data dir's writer (``medkg ingest``, ``reindex``, ``relink``: one at a time) publishes its progress,
#: which every ``medkg serve`` on the data dir exports on /metrics.
PROGRESS_FILE = "writer-progress.json"


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


@contextmanager
def published(path: Path, job: str, every_s: float = 2.0) -> Iterator[Watch]:
    """Run the block under a :class:`Watch` whose bars are written to ``path`` (JSON: the job, its state,
    when it started and was last written, each bar's counts, rate and ETA) every ``every_s`` seconds and at
    the end (state ``finished`` or ``failed``). A job killed outright leaves ``running`` with an old
    ``updated_at``, which readers take as stalled. Writing is best effort: a full disk never fails the job."""
    watch = Watch()
    started = time.time()
    done = threading.Event()

    def snapshot(state: str) -> None:
        now = time.monotonic()
        data = {
            "job": job,
            "pid": os.getpid(),
            "state": state,
            "started_at": started,
            "updated_at": time.time(),
            "every_s": every_s,
            "bars": [b.as_dict(now) for b in watch.bars()],
        }
        try:
            _write_atomically(path, data)
        except OSError:
            pass

    def writer() -> None:
        while not done.wait(every_s):
            snapshot("running")

    snapshot("running")
    thread = threading.Thread(target=writer, name="progress-writer", daemon=True)
    thread.start()
    state = "failed"
    try:
        with watched(watch):
            yield watch
        state = "finished"
    finally:
        done.set()
        thread.join(timeout=every_s + 1)
        snapshot(state)


def read_published(path: Path, now: float | None = None) -> dict[str, Any] | None:
    """What :func:`published` last wrote to ``path`` (None when nothing was, or it cannot be read), with
    ``stalled``: a ``running`` job not heard of for three of its intervals (killed, or its host gone)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("bars"), list):
        return None
    age = (now or time.time()) - float(data.get("updated_at") or 0)
    data["stalled"] = data.get("state") == "running" and age > 3 * float(data.get("every_s") or 2.0) + 1
    return data
