"""Progress bars a watcher sees from another thread: counts (also of bars not shown), rate and ETA, the
innermost bar, and a stop request raised at the job's next update."""

from __future__ import annotations

import threading
import time

import pytest

from kg.progress import BarState, Stopped, Watch, progress_bar, watched


def test_a_watch_sees_the_bars_of_its_own_thread_only() -> None:
    watch = Watch()
    outside = progress_bar(total=3, disable=True)
    with watched(watch), progress_bar(total=10, desc="outer", unit=" items", disable=True) as outer:
        outer.update(4)
        with progress_bar(desc="inner", disable=True) as inner:
            inner.update(2)
            assert watch.active().desc == "inner"  # the innermost bar still counting
            seen: list[object] = []
            other = threading.Thread(target=lambda: seen.append(progress_bar(disable=True)))
            other.start()
            other.join()
        assert watch.active().desc == "outer" and watch.active().done == 4
    outside.update(3)
    assert [(b.desc, b.done, b.total) for b in watch.bars()] == [("outer", 4, 10), ("inner", 2, None)]
    assert watch.active() is None


def test_rate_and_eta_come_from_the_counts_since_the_bar_began() -> None:
    bar = BarState("embed", " passages", total=1000, done=300, base=100, started=0.0)
    assert bar.rate(now=0.5) is None  # under a second: no rate yet
    assert bar.rate(now=10.0) == 20.0  # 200 done in this run, not the 100 a resumed job had already
    assert bar.eta_s(now=10.0) == 35.0
    assert bar.as_dict(now=10.0) == {
        "what": "embed", "unit": "passages", "done": 300, "total": 1000, "percent": 30.0,
        "rate_per_s": 20.0, "eta_s": 35,
    }  # fmt: skip
    assert BarState("scan", "it", total=None, done=5, started=0.0).eta_s(now=10.0) is None


def test_the_rate_is_timed_from_the_first_update() -> None:
    """What precedes the first update (a model loading) and its count (what a resumed job skipped at
    once) are not part of the rate."""
    watch = Watch()
    with watched(watch), progress_bar(total=10, initial=6, disable=True) as bar:
        assert watch.active().done == 6 and watch.active().rate() is None
        bar.update(1)
        state = watch.active()
        assert (state.done, state.base) == (7, 7) and state.rate(now=state.started + 2) is None
        bar.update(2)
        state = watch.active()
        assert state.rate(now=state.started + 2) == 1.0 and state.eta_s(now=state.started + 2) == 1.0
    assert watch.bars()[0].finished is not None


def test_a_stop_request_ends_the_job_at_its_next_update() -> None:
    watch = Watch()
    counted = []
    with pytest.raises(Stopped), watched(watch), progress_bar(total=100, disable=True) as bar:
        for i in range(100):
            if i == 3:
                watch.request_stop()
            bar.update(1)
            counted.append(i)
    assert counted == [0, 1, 2] and watch.stop_requested


def test_a_published_job_writes_its_bars_while_it_runs_and_its_end(tmp_path) -> None:
    from kg.progress import published, read_published

    path = tmp_path / "progress.json"
    with (
        published(path, "medkg ingest pubmed", every_s=0.05),
        progress_bar(total=4, desc="articles", disable=True) as bar,
    ):
        bar.update(3)
        deadline = time.monotonic() + 5
        while (seen := read_published(path)) is None or not seen["bars"] or seen["bars"][0]["done"] != 3:
            assert time.monotonic() < deadline, seen
        assert seen["state"] == "running" and not seen["stalled"] and seen["bars"][0]["total"] == 4
    end = read_published(path)
    assert (end["job"], end["state"], end["bars"][0]["done"]) == ("medkg ingest pubmed", "finished", 3)
    assert read_published(path, now=end["updated_at"] + 3600)["stalled"] is False  # finished is never stalled
    with pytest.raises(RuntimeError), published(path, "medkg relink", every_s=0.05):
        raise RuntimeError("the job failed")
    assert read_published(path)["state"] == "failed"
    path.write_text("{not json")
    assert read_published(path) is None and read_published(tmp_path / "absent.json") is None
