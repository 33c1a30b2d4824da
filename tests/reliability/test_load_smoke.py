"""The load test's verdicts (benchmarks/load_test.py) on recorded requests: what counts as a step
that holds, and what counts as graceful under overload. The load test itself runs in
`make check-reliability` against a real `medkg serve`."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.load_test import graceful, holds, saturated, summarize

pytestmark = pytest.mark.reliability


def record(rows: list[tuple[float, float, int, str | None, str | None]], start: float = 1000.0) -> dict[str, Any]:
    """Requests as the locustfile writes them: (start offset s, latency ms, status, Retry-After, error)."""
    return {
        "window": {"start": start, "stop": start + 10},
        "requests": [[start + t, ms, "POST /v1/qa", status, ra, err] for t, ms, status, ra, err in rows],
    }


def test_a_step_holds_with_p95_under_500_ms_no_errors_and_the_offered_rate_served() -> None:
    rows = [(2 + i * 0.1, 100.0 + i, 200, None, None) for i in range(80)]  # 80 answers in 8 measured seconds
    step = summarize(record(rows), warm_s=2) | {"target_qps": 10}
    assert step["qps"] == pytest.approx(80 / 8, rel=0.05) and step["errors"] == {}
    assert step["p50_ms"] is not None and step["p95_ms"] <= 500
    assert holds(step)
    assert not holds(step | {"target_qps": 20})  # half of what was offered: it did not hold it


def test_one_error_or_a_slow_tail_means_it_does_not_hold() -> None:
    ok = [(2 + i * 0.1, 100.0, 200, None, None) for i in range(70)]
    slow = summarize(record(ok + [(3, 900.0, 200, None, None)] * 10), warm_s=2) | {"target_qps": 8}
    assert slow["p95_ms"] == 900.0 and not holds(slow)
    assert not saturated(slow)  # slow, but it served what it was offered: stepping goes on
    shed = summarize(record(ok + [(3, 5.0, 503, "1", "overloaded")]), warm_s=2) | {"target_qps": 7}
    assert shed["errors"] == {"503": 1} and shed["error_codes"] == {"overloaded": 1} and not holds(shed)
    assert saturated(shed)


def test_requests_sent_in_the_warm_up_are_left_out() -> None:
    summary = summarize(record([(1.5, 100.0, 500, None, "internal_error"), (3, 100.0, 200, None, None)]), warm_s=2)
    assert summary["requests"] == 1 and summary["errors"] == {}


def test_graceful_overload_sheds_with_retry_after_and_nothing_else() -> None:
    rows = [(3, 100.0, 200, None, None), (3, 500.0, 503, "1", "overloaded"), (4, 2.0, 429, "3", "rate_limited")]
    assert graceful(summarize(record(rows), warm_s=2)) == []
    no_header = summarize(record([*rows, (5, 500.0, 503, None, "overloaded")]), warm_s=2)
    assert "without Retry-After" in graceful(no_header)[0]
    crashed = summarize(record([*rows, (5, 50.0, 500, None, "internal_error"), (6, 30000.0, 0, None, "Timeout")]), 2)
    assert "{'0': 1, '500': 1}" in graceful(crashed)[0]
