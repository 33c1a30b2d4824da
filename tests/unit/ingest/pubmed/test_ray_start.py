"""A local Ray that does not come up within Ray's own 30 s limit (a busy machine) is started again; any
other failure, or the last attempt's, is raised as it is. Ray's start is replaced here: its timeout cannot
be provoked on purpose."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from ingest.pubmed import distributed  # noqa: E402

TIMEOUT = "The current node timed out during startup. This could happen because some of the raylet failed"


def _flaky_init(monkeypatch: pytest.MonkeyPatch, failures: list[Exception]) -> list[dict]:
    calls: list[dict] = []

    def init(**options: object) -> None:
        calls.append(options)
        if failures:
            raise failures.pop(0)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    return calls


def test_a_start_that_times_out_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky_init(monkeypatch, [Exception(TIMEOUT)])
    distributed._start_local_ray(2, {"include_dashboard": False})
    assert calls == [{"num_cpus": 2, "include_dashboard": False}] * 2


def test_other_failures_and_the_last_timeout_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky_init(monkeypatch, [ValueError("bad option")])
    with pytest.raises(ValueError, match="bad option"):
        distributed._start_local_ray(2, {})
    assert len(calls) == 1
    calls = _flaky_init(monkeypatch, [Exception(TIMEOUT)] * 3)
    with pytest.raises(Exception, match="timed out during startup"):
        distributed._start_local_ray(2, {}, attempts=3)
    assert len(calls) == 3
