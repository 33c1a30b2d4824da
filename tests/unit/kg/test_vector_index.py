"""VectorIndex against real FAISS and real files; vectors come from a seeded numpy Generator."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from kg.vector_index import VectorIndex, VectorIndexError

DIM = 32


def _vectors(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def _ids(n: int) -> list[str]:
    return [f"HP:{i:07d}" for i in range(n)]


def _filled(tmp_path: Path, n: int = 100, **kwargs: int) -> tuple[VectorIndex, list[str], np.ndarray]:
    index = VectorIndex.open(tmp_path, "entities", DIM, **kwargs)
    ids, vectors = _ids(n), _vectors(n)
    assert index.upsert(ids, vectors) == n
    return index, ids, vectors


def test_add_and_search_finds_exact_vector_first(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path)
    assert len(index) == 100 and "HP:0000007" in index and "HP:9999999" not in index
    results = index.search(vectors[[7, 42]], k=5)
    assert [hits[0][0] for hits in results] == ["HP:0000007", "HP:0000042"]
    assert all(hits[0][1] == pytest.approx(1.0, abs=1e-5) for hits in results)
    assert all(
        len(hits) == 5 and [s for _, s in hits] == sorted((s for _, s in hits), reverse=True) for hits in results
    )
    assert index.ids() == ids


def test_vectors_are_normalised_and_float64_is_coerced(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "entities", DIM)
    index.upsert(["a"], _vectors(1).astype(np.float64) * 10)
    stored = index.vector("a")
    assert stored is not None and stored.dtype == np.float32
    assert np.linalg.norm(stored) == pytest.approx(1.0, abs=1e-5)
    assert index.vector("missing") is None


def test_replace_changes_vector_and_keeps_len(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path)
    assert index.upsert(["HP:0000003"], vectors[[50]] * -1.0) == 1
    assert len(index) == 100
    hits = index.search(-vectors[50], k=2)[0]
    assert hits[0][0] == "HP:0000003" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert index.search(vectors[3], k=1)[0][0][0] != "HP:0000003"


def test_duplicate_ids_in_one_call_last_wins(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "entities", DIM)
    vectors = _vectors(3)
    assert index.upsert(["x", "y", "x"], vectors) == 2
    assert len(index) == 2
    np.testing.assert_allclose(index.vector("x"), vectors[2] / np.linalg.norm(vectors[2]), atol=1e-6)


def test_fingerprints_skip_unchanged_and_replace_changed(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "passages", DIM)
    ids, vectors = ["PMID:1#s1", "PMID:1#s2"], _vectors(2)
    assert index.needs_update(ids, ["h1", "h2"]) == [0, 1]
    assert index.upsert(ids, vectors, ["h1", "h2"]) == 2
    assert index.fingerprint("PMID:1#s1") == "h1" and index.fingerprint("nope") is None
    assert index.needs_update(ids, ["h1", "h2"]) == []
    assert index.upsert(ids, vectors, ["h1", "h2"]) == 0
    assert index.needs_update(ids + ["PMID:2#s1"], ["h1", "h2-new", "h3"]) == [1, 2]
    assert index.upsert(ids, _vectors(2, seed=1), ["h1", "h2-new"]) == 1
    assert index.fingerprint("PMID:1#s2") == "h2-new" and len(index) == 2
    assert index.search(_vectors(2, seed=1)[1], k=1)[0][0][0] == "PMID:1#s2"
    assert index.upsert(ids[:1], vectors[:1]) == 1  # no fingerprint: always written, stored one cleared
    assert index.fingerprint("PMID:1#s1") is None


def test_remove(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path, n=20)
    assert index.remove(["HP:0000002", "HP:0000005", "HP:0000005", "unknown"]) == 2
    assert len(index) == 18 and "HP:0000002" not in index and index.fingerprint("HP:0000002") is None
    assert all(hit[0] not in {"HP:0000002", "HP:0000005"} for hit in index.search(vectors[2], k=20)[0])
    assert index.remove([]) == 0
    assert index.upsert(["HP:0000002"], vectors[[2]]) == 1
    assert index.search(vectors[2], k=1)[0][0][0] == "HP:0000002"


def test_save_open_round_trip(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path)
    index.upsert(ids[:3], vectors[:3], ["f0", "f1", "f2"])
    index.remove(ids[90:])
    index.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entities.faiss", "entities.ids.json"]
    reopened = VectorIndex.open(tmp_path, "entities", DIM)
    queries = _vectors(10, seed=5)
    assert reopened.search(queries, k=7) == index.search(queries, k=7)
    assert reopened.ids() == index.ids() and reopened.fingerprint("HP:0000001") == "f1"
    assert reopened.upsert(["HP:0000100"], _vectors(1, seed=9)) == 1  # id counter persisted: no collision
    assert len(reopened) == 91 and reopened.search(vectors[0], k=1)[0][0][0] == "HP:0000000"


def test_open_missing_files_gives_empty_index(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path / "not-yet", "images", DIM)
    assert len(index) == 0 and index.ids() == []
    assert index.search(_vectors(2), k=3) == [[], []]
    index.save()
    assert len(VectorIndex.open(tmp_path / "not-yet", "images", DIM)) == 0


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_index_file_is_detected(tmp_path: Path, damage: str) -> None:
    _filled(tmp_path)[0].save()
    path = tmp_path / "entities.faiss"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(VectorIndexError, match="entities.faiss"):
        VectorIndex.open(tmp_path, "entities", DIM)


def test_missing_id_map_is_detected(tmp_path: Path) -> None:
    _filled(tmp_path)[0].save()
    (tmp_path / "entities.ids.json").unlink()
    with pytest.raises(VectorIndexError, match="entities.ids.json"):
        VectorIndex.open(tmp_path, "entities", DIM)


def test_unreadable_or_mismatched_id_map_is_detected(tmp_path: Path) -> None:
    _filled(tmp_path)[0].save()
    ids_path = tmp_path / "entities.ids.json"
    meta = json.loads(ids_path.read_text(encoding="utf-8"))
    meta["ids"] = meta["ids"][:-1]
    ids_path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(VectorIndexError, match="entities.faiss holds 100 vectors but its id map 99"):
        VectorIndex.open(tmp_path, "entities", DIM)
    ids_path.write_text("{not json", encoding="utf-8")
    with pytest.raises(VectorIndexError, match="entities.ids.json"):
        VectorIndex.open(tmp_path, "entities", DIM)


def test_wrong_dim_at_open(tmp_path: Path) -> None:
    _filled(tmp_path)[0].save()
    with pytest.raises(VectorIndexError, match=r"dimension 32.*dimension 64"):
        VectorIndex.open(tmp_path, "entities", 64)


def test_shape_and_length_mismatch_raise_value_error(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "entities", DIM)
    with pytest.raises(ValueError, match="shape"):
        index.upsert(["a"], _vectors(1, dim=DIM + 1))
    with pytest.raises(ValueError, match="shape"):
        index.upsert(["a"], _vectors(1)[0])
    with pytest.raises(ValueError):
        index.upsert(["a", "b"], _vectors(3))
    with pytest.raises(ValueError):
        index.upsert(["a", "b"], _vectors(2), ["only-one"])
    with pytest.raises(ValueError):
        index.needs_update(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="non-zero"):
        index.upsert(["a"], np.zeros((1, DIM), dtype=np.float32))
    with pytest.raises(ValueError, match="shape"):
        index.search(_vectors(1, dim=DIM - 1), k=1)
    with pytest.raises(ValueError):
        index.search(_vectors(1), k=0)
    assert len(index) == 0


def test_search_on_small_index_and_1d_query(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path, n=3)
    results = index.search(vectors[1], k=10)
    assert len(results) == 1 and len(results[0]) == 3
    assert results[0][0][0] == "HP:0000001"


def test_rebuild_to_ivf_keeps_results_and_persists(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path, n=200, flat_max=50, nprobe=2)
    assert index.kind == "flat"
    index.rebuild()
    assert index.kind == "ivf" and len(index) == 200
    top = [hits[0][0] for hits in index.search(vectors, k=1)]
    assert sum(found == expected for found, expected in zip(top, ids, strict=True)) >= 190
    assert index.upsert(["HP:0000000"], -vectors[[0]]) == 1 and index.remove(["HP:0000001"]) == 1
    assert index.search(-vectors[0], k=1)[0][0][0] == "HP:0000000"
    index.save()
    reopened = VectorIndex.open(tmp_path, "entities", DIM, flat_max=50, nprobe=2)
    assert reopened.kind == "ivf" and len(reopened) == 199
    assert reopened.search(vectors, k=5) == index.search(vectors, k=5)
    np.testing.assert_allclose(reopened.vector("HP:0000002"), index.vector("HP:0000002"))
    reopened.remove(ids[:160])
    reopened.rebuild()
    assert reopened.kind == "flat" and len(reopened) == 40
    assert [hits[0][0] for hits in reopened.search(vectors[160:], k=1)] == ids[160:]


def test_unicode_and_hash_ids_round_trip(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "passages", DIM)
    ids = ["PMID:123#s4", "UMLS:C0024796#ß-ü", "名前:1#图"]
    index.upsert(ids, _vectors(3), ["α", "β", "γ"])
    index.save()
    reopened = VectorIndex.open(tmp_path, "passages", DIM)
    assert reopened.ids() == ids and reopened.fingerprint("名前:1#图") == "γ"
    assert [hits[0][0] for hits in reopened.search(_vectors(3), k=1)] == ids


def test_invalid_name_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        VectorIndex.open(tmp_path, "../escape", DIM)


def test_concurrent_upserts_and_searches(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "entities", DIM)
    vectors = _vectors(400)

    def work(worker: int) -> None:
        for start in range(worker * 100, worker * 100 + 100, 10):
            index.upsert([f"T:{i}" for i in range(start, start + 10)], vectors[start : start + 10])
            index.search(vectors[start], k=3)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(4)))
    assert len(index) == 400
    assert [hits[0][0] for hits in index.search(vectors, k=1)] == [f"T:{i}" for i in range(400)]


class _Killed(BaseException):
    """Stands for the process being killed (not an Exception, so nothing on the way up catches it)."""


def _crash_at(monkeypatch: pytest.MonkeyPatch, target: str, call: int, directory: Path, snapshot: Path) -> None:
    """Make the ``call``-th call of ``os.replace`` / ``_fsync`` / ``faiss.write_index`` in kg.vector_index first
    copy ``directory`` to ``snapshot`` (what a hard kill leaves on disk: no finally blocks run) and then raise."""
    import shutil

    import kg.vector_index as module

    owner, attr = {"replace": (module.os, "replace"), "fsync": (module, "_fsync")}.get(
        target, (module.faiss, "write_index")
    )
    real, calls = getattr(owner, attr), {"n": 0}

    def crashing(*args: object) -> object:
        calls["n"] += 1
        if calls["n"] == call:
            shutil.copytree(directory, snapshot)
            raise _Killed(f"killed at {target} call {call}")
        return real(*args)

    monkeypatch.setattr(owner, attr, crashing)


@pytest.mark.parametrize(
    ("target", "call"),
    [("write_index", 1)] + [("fsync", n) for n in range(1, 5)] + [("replace", n) for n in range(1, 4)],
)
def test_save_killed_at_any_point_reopens_old_or_new_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, call: int
) -> None:
    directory, snapshot = tmp_path / "indexes", tmp_path / "at-kill"
    index = VectorIndex.open(directory, "entities", DIM)
    index.upsert(_ids(10), _vectors(10))
    index.save()
    old_ids = index.ids()
    index.upsert(["HP:0000100"], _vectors(1, seed=3))
    index.remove(["HP:0000000"])
    new_ids = index.ids()
    _crash_at(monkeypatch, target, call, directory, snapshot)
    with pytest.raises(_Killed):
        index.save()
    monkeypatch.undo()
    # Both the disk as a hard kill leaves it and the disk after the exception unwound (finally blocks ran).
    for where in (snapshot, directory):
        reopened = VectorIndex.open(where, "entities", DIM)  # never "corrupt"
        assert reopened.ids() in (old_ids, new_ids)
        hits = reopened.search(_vectors(1, seed=3), k=1)[0]
        assert (hits[0][0] == "HP:0000100") == (reopened.ids() == new_ids)
        # The next save commits cleanly over whatever the kill left.
        reopened.upsert(["HP:0000200"], _vectors(1, seed=4))
        reopened.save()
        again = VectorIndex.open(where, "entities", DIM)
        assert again.ids() == reopened.ids()
        assert sorted(p.name for p in where.iterdir() if not p.name.startswith(".")) == [
            "entities.faiss",
            "entities.ids.json",
        ]


def test_save_killed_after_commit_point_opens_new_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory, snapshot = tmp_path / "indexes", tmp_path / "at-kill"
    index = VectorIndex.open(directory, "entities", DIM)
    index.upsert(_ids(5), _vectors(5))
    index.save()
    index.upsert(["HP:0000100"], _vectors(1, seed=3))
    _crash_at(monkeypatch, "replace", 3, directory, snapshot)  # the index file is in place, its id map is not
    with pytest.raises(_Killed):
        index.save()
    monkeypatch.undo()
    assert "HP:0000100" in VectorIndex.open(snapshot, "entities", DIM)


def test_first_save_killed_after_commit_point_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory, snapshot = tmp_path / "indexes", tmp_path / "at-kill"
    index = VectorIndex.open(directory, "entities", DIM)
    index.upsert(_ids(5), _vectors(5))
    _crash_at(monkeypatch, "replace", 3, directory, snapshot)
    with pytest.raises(_Killed):
        index.save()
    monkeypatch.undo()
    assert not (snapshot / "entities.ids.json").exists()  # only the index file and the pending id map
    assert VectorIndex.open(snapshot, "entities", DIM).ids() == _ids(5)


def test_stale_pending_id_map_does_not_hide_a_corrupt_index_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, snapshot = tmp_path / "indexes", tmp_path / "at-kill"
    index, _, _ = _filled(directory, n=20)
    index.save()
    index.upsert(["HP:0000100"], _vectors(1, seed=3))
    _crash_at(monkeypatch, "replace", 2, directory, snapshot)  # killed before the commit point
    with pytest.raises(_Killed):
        index.save()
    monkeypatch.undo()
    assert (snapshot / "entities.ids.json.pending").exists()
    path = snapshot / "entities.faiss"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(VectorIndexError, match="entities.faiss is corrupt"):
        VectorIndex.open(snapshot, "entities", DIM)
    moved = VectorIndex.set_aside(snapshot, "entities")
    assert sorted(p.name.split(".damaged-")[0] for p in moved) == [
        "entities.faiss",
        "entities.ids.json",
        "entities.ids.json.pending",
    ]
    assert len(VectorIndex.open(snapshot, "entities", DIM)) == 0


def test_pair_written_by_earlier_versions_opens(tmp_path: Path) -> None:
    import hashlib

    import faiss

    vectors = _vectors(3)
    faiss.normalize_L2(vectors)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(vectors, np.arange(3, dtype=np.int64))
    faiss.write_index(index, str(tmp_path / "entities.faiss"))
    meta = {
        "format": 1,
        "dim": DIM,
        "index_kind": "flat",
        "ids": [["a", 0, "fa"], ["b", 1, None], ["c", 2, "fc"]],
        "next_id": 3,
        "sha256": hashlib.sha256((tmp_path / "entities.faiss").read_bytes()).hexdigest(),
    }
    (tmp_path / "entities.ids.json").write_text(json.dumps(meta), encoding="utf-8")
    opened = VectorIndex.open(tmp_path, "entities", DIM)
    assert opened.ids() == ["a", "b", "c"] and opened.fingerprint("a") == "fa"
    assert opened.search(vectors[1], k=1)[0][0][0] == "b"
    opened.upsert(["d"], _vectors(1, seed=8))
    opened.save()
    assert VectorIndex.open(tmp_path, "entities", DIM).ids() == ["a", "b", "c", "d"]


def test_repeated_saves_leave_only_the_pair(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "entities", DIM)
    for i in range(5):
        index.upsert([f"x{i}"], _vectors(1, seed=i))
        index.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entities.faiss", "entities.ids.json"]
    assert VectorIndex.open(tmp_path, "entities", DIM).ids() == [f"x{i}" for i in range(5)]


def test_an_index_built_by_another_model_is_refused(tmp_path: Path) -> None:
    """Two models of the same dimension embed into different spaces: the id map names the model, and
    opening with another one is an error naming both, not nonsense results."""
    index = VectorIndex.open(tmp_path, "passages", DIM, model="model-a")
    index.upsert(_ids(5), _vectors(5))
    index.save()
    assert json.loads((tmp_path / "passages.ids.json").read_text())["model"] == "model-a"
    with pytest.raises(VectorIndexError, match="model 'model-a', but this process embeds with 'model-b'"):
        VectorIndex.open(tmp_path, "passages", DIM, model="model-b")
    same = VectorIndex.open(tmp_path, "passages", DIM, model="model-a")
    assert same.ids() == _ids(5)
    unchecked = VectorIndex.open(tmp_path, "passages", DIM)  # no model given: opens, keeps the one named
    assert unchecked.model == "model-a"
    unchecked.save()
    with pytest.raises(VectorIndexError, match="model-a"):
        VectorIndex.open(tmp_path, "passages", DIM, model="model-b")


def test_an_id_map_saved_before_models_were_recorded_opens_and_records_the_model(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "passages", DIM)
    index.upsert(_ids(3), _vectors(3))
    index.save()
    path = tmp_path / "passages.ids.json"
    meta = json.loads(path.read_text())
    del meta["model"]  # the format of earlier versions
    path.write_text(json.dumps(meta))
    opened = VectorIndex.open(tmp_path, "passages", DIM, model="model-b")
    assert opened.ids() == _ids(3)
    opened.save()
    assert json.loads(path.read_text())["model"] == "model-b"


def test_temporary_files_of_a_killed_save_are_swept_on_open(tmp_path: Path) -> None:
    index, _, _ = _filled(tmp_path, n=5)
    index.save()
    stale = [tmp_path / ".entities.abc123.faiss.tmp", tmp_path / ".entities.def456.ids.json.tmp"]
    fresh = tmp_path / ".entities.ghi789.faiss.tmp"  # a save of another process, under way
    other = tmp_path / ".passages.jkl012.faiss.tmp"  # another index's
    for path in (*stale, fresh, other):
        path.write_bytes(b"partial")
    hour_ago = time.time() - 3600
    for path in (*stale, other):
        os.utime(path, (hour_ago, hour_ago))
    reopened = VectorIndex.open(tmp_path, "entities", DIM)
    assert len(reopened) == 5
    assert not any(p.exists() for p in stale) and fresh.exists() and other.exists()
