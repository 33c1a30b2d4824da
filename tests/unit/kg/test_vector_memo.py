import logging
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from kg.vector_memo import VectorMemo


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_kept_vectors_come_back_and_others_are_none(tmp_path: Path) -> None:
    memo = VectorMemo("m", 8, max_mb=1, root=tmp_path)
    vectors = _vectors(3)
    memo.put(["fever", "cough", "Marfan syndrome: a disorder of fibrillin"], vectors)
    again = VectorMemo("m", 8, max_mb=1, root=tmp_path)  # another process's view of the same file
    got = again.get(["cough", "headache", "fever"])
    assert got[1] is None
    assert np.array_equal(got[0], vectors[1]) and np.array_equal(got[2], vectors[0])
    assert (again.hits, again.misses) == (2, 1)
    assert VectorMemo("other", 8, max_mb=1, root=tmp_path).get(["fever"]) == [None]  # another embedding's file


def test_the_oldest_vectors_go_when_it_is_full(tmp_path: Path) -> None:
    memo = VectorMemo("m", 8, max_mb=1, root=tmp_path)
    memo.max_rows = 10
    texts = [f"term {i}" for i in range(25)]
    vectors = _vectors(25)
    for start in range(0, 25, 5):
        memo.put(texts[start : start + 5], vectors[start : start + 5])
    got = memo.get(texts)
    assert [v is not None for v in got] == [False] * 15 + [True] * 10
    assert np.array_equal(np.stack(got[15:]), vectors[15:])
    memo.put(texts[15:16], vectors[15:16])  # kept again: it is the newest now
    memo.put(["term 25"], _vectors(1, seed=1))
    assert memo.get(["term 15", "term 16"])[0] is not None and memo.get(["term 16"]) == [None]


def test_a_damaged_file_is_started_anew(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "m.sqlite").write_bytes(b"this is no database, only bytes " * 200)
    memo = VectorMemo("m", 8, max_mb=1, root=tmp_path)
    with caplog.at_level(logging.WARNING, logger="kg.vector_memo"):
        assert memo.get(["fever"]) == [None]
    assert "damaged" in caplog.text
    memo.put(["fever"], _vectors(1))
    assert memo.get(["fever"])[0] is not None


def test_a_memo_it_cannot_write_is_passed_over_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    memo = VectorMemo("m", 8, max_mb=1, root=blocked)
    with caplog.at_level(logging.WARNING, logger="kg.vector_memo"):
        memo.put(["fever"], _vectors(1))
        assert memo.get(["fever", "cough"]) == [None, None]
        memo.put(["cough"], _vectors(1))
    assert len(caplog.records) == 1 and "embedding without it" in caplog.text


def test_a_vector_of_another_length_is_a_miss(tmp_path: Path) -> None:
    VectorMemo("m", 8, max_mb=1, root=tmp_path).put(["fever"], _vectors(1))
    assert VectorMemo("m", 4, max_mb=1, root=tmp_path).get(["fever"]) == [None]


def _writer(root: str, worker: int) -> None:
    memo = VectorMemo("m", 8, max_mb=10, root=Path(root))
    for batch in range(20):
        texts = [f"w{worker} b{batch} t{i}" for i in range(50)]
        memo.put(texts, _vectors(50, seed=worker * 100 + batch))


def test_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(str(tmp_path), w)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    texts = [f"w{w} b{b} t{i}" for w in range(3) for b in range(20) for i in range(50)]
    got = VectorMemo("m", 8, max_mb=10, root=tmp_path).get(texts)
    assert all(v is not None for v in got)
    assert np.array_equal(got[50], _vectors(50, seed=1)[0])  # worker 0, batch 1, text 0


def test_a_lock_told_at_once_is_waited_out_not_taken_for_a_broken_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite can answer "database is locked" without waiting its busy timeout (three processes opening a
    new memo at once did, in CI): the read or write is tried again, and the memo stays in use."""
    memo = VectorMemo("m", 8, max_mb=1, root=tmp_path)
    connect, told = memo._connect, []

    def locked_once() -> object:
        if len(told) < 2:
            told.append(1)
            raise sqlite3.OperationalError("database is locked")
        return connect()

    monkeypatch.setattr(memo, "_connect", locked_once)
    memo.put(["fever"], _vectors(1))
    assert memo.get(["fever"])[0] is not None and len(told) == 2 and not memo._broken
