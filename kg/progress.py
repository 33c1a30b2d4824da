"""Progress bars another thread can watch, and stop: every long loop of medkg counts with
:func:`progress_bar` (a tqdm bar on the console, as before). A job run under :func:`watched` (the
served demo's background build) sees each bar's counts, rate and ETA, and can ask the job to stop: the
bar's next ``update`` raises :class:`Stopped`, and the loop ends as at an error, keeping what its
last checkpoint made durable."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

__all__ = ["BarState", "Stopped", "Watch", "progress_bar", "watched"]

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
