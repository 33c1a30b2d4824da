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


def _files(directory: Path, name: str = "entities") -> list[str]:
    return sorted(p.name for p in (directory / f"{name}.vectors").iterdir() if not p.name.startswith("."))


def test_save_open_round_trip(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path)
    index.upsert(ids[:3], vectors[:3], ["f0", "f1", "f2"])
    index.remove(ids[90:])
    index.save()
    assert [p.name for p in tmp_path.iterdir()] == ["entities.vectors"]
    assert _files(tmp_path)[0] == "map.sqlite" and "seg-000001.f32" in _files(tmp_path)
    reopened = VectorIndex.open(tmp_path, "entities", DIM)
    queries = _vectors(10, seed=5)
    assert reopened.search(queries, k=7) == index.search(queries, k=7)
    assert reopened.ids() == index.ids() and reopened.fingerprint("HP:0000001") == "f1"
    assert reopened.upsert(["HP:0000100"], _vectors(1, seed=9)) == 1  # row counter persisted: no collision
    assert len(reopened) == 91 and reopened.search(vectors[0], k=1)[0][0][0] == "HP:0000000"


def test_a_save_appends_one_segment_and_rewrites_none(tmp_path: Path) -> None:
    """The cost of a save follows what changed: earlier segment files are never written again."""
    index, ids, vectors = _filled(tmp_path, n=50)
    index.save()
    first = tmp_path / "entities.vectors" / "seg-000001.f32"
    before = (first.stat().st_ino, first.stat().st_mtime_ns, first.read_bytes())
    assert first.stat().st_size == 50 * DIM * 4
    for i in range(3):
        index.upsert([f"new{i}"], _vectors(1, seed=100 + i))
        index.remove([ids[i]])
        index.save()
    index.save()  # nothing changed: nothing written
    assert [f for f in _files(tmp_path) if f.endswith(".f32")] == [f"seg-00000{i}.f32" for i in range(1, 5)]
    assert (first.stat().st_ino, first.stat().st_mtime_ns, first.read_bytes()) == before
    reopened = VectorIndex.open(tmp_path, "entities", DIM)
    assert len(reopened) == 50 and reopened.ids() == ids[3:] + ["new0", "new1", "new2"]
    assert reopened.search(vectors[0], k=1)[0][0][0] != ids[0]  # a dead row is never found again
    assert reopened.stats()["rows"] == 53


def test_open_missing_files_gives_empty_index(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path / "not-yet", "images", DIM)
    assert len(index) == 0 and index.ids() == []
    assert index.search(_vectors(2), k=3) == [[], []]
    index.save()
    assert len(VectorIndex.open(tmp_path / "not-yet", "images", DIM)) == 0


@pytest.mark.parametrize("damage", ["truncate", "flip"])
@pytest.mark.parametrize("file", ["seg-000001.f32", "seg-000002.f32"])
def test_corrupt_segment_file_is_detected(tmp_path: Path, damage: str, file: str) -> None:
    index = _filled(tmp_path)[0]
    index.save()
    index.upsert(["late"], _vectors(1, seed=7))
    index.save()
    path = tmp_path / "entities.vectors" / file
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(VectorIndexError, match=f"{file} is corrupt"):
        VectorIndex.open(tmp_path, "entities", DIM)


def test_missing_segment_and_damaged_id_map_are_detected(tmp_path: Path) -> None:
    _filled(tmp_path)[0].save()
    store = tmp_path / "entities.vectors"
    (store / "seg-000001.f32").rename(tmp_path / "elsewhere")
    with pytest.raises(VectorIndexError, match="seg-000001.f32 is missing"):
        VectorIndex.open(tmp_path, "entities", DIM)
    (tmp_path / "elsewhere").rename(store / "seg-000001.f32")
    reopened = VectorIndex.open(tmp_path, "entities", DIM)
    count = len(reopened)
    reopened.close()  # nothing of it open when its files are damaged (it failed once to raise below, in CI)
    assert count == 100
    for extra in store.glob("map.sqlite-*"):
        extra.unlink()
    (store / "map.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(VectorIndexError, match="map.sqlite is not a valid id map"):
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
    assert reopened.kind == "flat" and len(reopened) == 40 and reopened.stats()["rows"] == 40
    assert [hits[0][0] for hits in reopened.search(vectors[160:], k=1)] == ids[160:]


def test_growing_past_flat_max_appends_codes_and_scores_exactly(tmp_path: Path) -> None:
    """Past flat_max a save trains the quantizer once; later saves append the codes of their vectors
    only, and the scores returned are exact cosines (re-ranked from the full vectors)."""
    index = VectorIndex.open(tmp_path, "passages", DIM, flat_max=300, rerank=200)  # random data: no clusters
    vectors = _vectors(1000, seed=11)
    for start in range(0, 1000, 250):
        index.upsert([f"P{i}" for i in range(start, start + 250)], vectors[start : start + 250])
        index.fit_kind()
        index.save()
    assert index.kind == "ivf"
    assert [f for f in _files(tmp_path, "passages") if f.endswith(".codes")] == [
        f"seg-00000{i}.q1.codes" for i in range(1, 5)
    ]
    assert "quantizer-1.faiss" in _files(tmp_path, "passages")
    normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = _vectors(50, seed=12)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = np.argsort(-(queries @ normed.T), axis=1)[:, :10]
    got = index.search(queries, k=10)
    recall = np.mean([len({h for h, _ in g} & {f"P{i}" for i in e}) / 10 for g, e in zip(got, exact, strict=True)])
    assert recall >= 0.9
    for q, hits in zip(queries, got, strict=True):
        assert [s for _, s in hits] == pytest.approx([float(normed[int(p[1:])] @ q) for p, _ in hits], abs=1e-5)
    reopened = VectorIndex.open(tmp_path, "passages", DIM, flat_max=300, rerank=200)
    assert reopened.kind == "ivf" and reopened.search(queries, k=10) == got


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
    """Make the ``call``-th call of ``os.replace`` / ``_fsync`` / ``_commit`` (the SQLite commit) in
    kg.vector_index first copy ``directory`` to ``snapshot`` (what a hard kill leaves on disk: no finally
    blocks run, no transaction rolled back) and then raise."""
    import shutil

    import kg.vector_index as module

    owner, attr = {"replace": (module.os, "replace"), "fsync": (module, "_fsync")}.get(target, (module, "_commit"))
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
    [("commit", 1), ("fsync", 1), ("fsync", 2), ("replace", 1)],
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
        index.close()
        reopened = VectorIndex.open(where, "entities", DIM)  # never "corrupt"
        assert reopened.ids() in (old_ids, new_ids)
        hits = reopened.search(_vectors(1, seed=3), k=1)[0]
        assert (hits[0][0] == "HP:0000100") == (reopened.ids() == new_ids)
        # The next save commits cleanly over whatever the kill left, and removes it.
        reopened.upsert(["HP:0000200"], _vectors(1, seed=4))
        reopened.save()
        again = VectorIndex.open(where, "entities", DIM)
        assert again.ids() == reopened.ids()
        segments = [f for f in _files(where) if f.endswith(".f32")]
        assert segments == ["seg-000001.f32", "seg-000002.f32"] + (["seg-000003.f32"] if "HP:0000100" in again else [])


@pytest.mark.parametrize(("target", "call"), [("commit", 1), ("replace", 1), ("replace", 2), ("fsync", 3)])
def test_switch_to_ivf_killed_at_any_point_opens_one_kind_or_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, call: int
) -> None:
    directory, snapshot = tmp_path / "indexes", tmp_path / "at-kill"
    index, ids, vectors = _filled(directory, n=200, flat_max=50)
    index.save()
    _crash_at(monkeypatch, target, call, directory, snapshot)
    with pytest.raises(_Killed):
        index.fit_kind()
    monkeypatch.undo()
    reopened = VectorIndex.open(snapshot, "entities", DIM, flat_max=50)
    assert reopened.ids() == ids and reopened.kind in ("flat", "ivf")
    was_flat = reopened.kind == "flat"
    assert reopened.fit_kind() == was_flat and reopened.kind == "ivf"
    assert [h[0][0] for h in reopened.search(vectors[:20], k=1)] == ids[:20]
    reopened.upsert(["late"], _vectors(1, seed=5))
    reopened.save()
    files = _files(snapshot)  # only the current quantizer and its codes are left
    assert [f for f in files if f.startswith("quantizer-")] == ["quantizer-1.faiss"]
    assert [f for f in files if f.endswith(".codes")] == ["seg-000001.q1.codes", "seg-000002.q1.codes"]
    assert VectorIndex.open(snapshot, "entities", DIM, flat_max=50).search(vectors[:20], k=1) == reopened.search(
        vectors[:20], k=1
    )


@pytest.mark.parametrize("call", [1, 2, 3])
def test_compaction_killed_between_its_renames_is_finished_by_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: int
) -> None:
    directory, snapshot = tmp_path / "indexes", tmp_path / "at-kill"
    index, ids, _ = _filled(directory, n=30)
    index.save()
    index.remove(ids[:10])
    index.save()
    import kg.vector_index as module

    real, calls = module.os.replace, {"n": 0}

    def crashing(src: object, dst: object) -> None:  # killed after the call-th of the swap's three renames
        real(src, dst)
        if str(dst).endswith(".next") or calls["n"]:
            calls["n"] += 1
        if calls["n"] == call:
            import shutil

            shutil.copytree(directory, snapshot)
            raise _Killed

    monkeypatch.setattr(module.os, "replace", crashing)
    with pytest.raises(_Killed):
        index.rebuild()
    monkeypatch.undo()
    where = snapshot
    reopened = VectorIndex.open(where, "entities", DIM)
    assert reopened.ids() == ids[10:] and reopened.stats()["rows"] in (20, 30)
    assert not (where / "entities.vectors.next").exists() and not (where / "entities.vectors.old").exists()


def test_compaction_drops_dead_rows(tmp_path: Path) -> None:
    index, ids, vectors = _filled(tmp_path, n=100)
    index.save()
    index.remove(ids[:60])
    index.upsert(ids[60:70], -vectors[60:70])
    index.save()
    assert index.stats()["rows"] == 110
    expected = index.search(vectors, k=5)
    index.rebuild()
    assert index.stats() | {"rows": 40, "segments": 1} == index.stats() and index.ids() == ids[70:] + ids[60:70]
    got = index.search(vectors, k=5)
    assert [[h for h, _ in hits] for hits in got] == [[h for h, _ in hits] for hits in expected]
    assert [s for hits in got for _, s in hits] == pytest.approx([s for hits in expected for _, s in hits], abs=1e-5)
    assert [f for f in _files(tmp_path) if not f.startswith("map.sqlite")] == ["seg-000001.f32"] and [
        p.name for p in tmp_path.iterdir()
    ] == ["entities.vectors"]


def _legacy_pair(directory: Path, name: str, vectors: np.ndarray, ids: list[str], **meta: object) -> None:
    """The two files an older medkg wrote (format 1): a FAISS IndexIDMap2 and its JSON id map."""
    import hashlib

    import faiss

    directory.mkdir(parents=True, exist_ok=True)
    normed = vectors.copy()
    faiss.normalize_L2(normed)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(normed.shape[1]))
    index.add_with_ids(normed, np.arange(len(ids), dtype=np.int64))
    faiss.write_index(index, str(directory / f"{name}.faiss"))
    content = {
        "format": 1,
        "dim": normed.shape[1],
        "index_kind": "flat",
        "ids": [[sid, i, f"f{i}" if i % 2 == 0 else None] for i, sid in enumerate(ids)],
        "next_id": len(ids),
        "sha256": hashlib.sha256((directory / f"{name}.faiss").read_bytes()).hexdigest(),
    } | meta
    (directory / f"{name}.ids.json").write_text(json.dumps(content), encoding="utf-8")


def test_pair_written_by_earlier_versions_is_moved_in_once(tmp_path: Path) -> None:
    vectors = _vectors(3)
    _legacy_pair(tmp_path, "entities", vectors, ["a", "b", "c"])
    opened = VectorIndex.open(tmp_path, "entities", DIM, model="model-a")
    assert opened.ids() == ["a", "b", "c"] and opened.fingerprint("a") == "f0" and opened.fingerprint("b") is None
    assert opened.search(vectors[1], k=1)[0][0][0] == "b"
    assert [p.name for p in tmp_path.iterdir()] == ["entities.vectors"]  # the old pair is gone
    opened.upsert(["d"], _vectors(1, seed=8))
    opened.save()
    assert VectorIndex.open(tmp_path, "entities", DIM).ids() == ["a", "b", "c", "d"]
    with pytest.raises(VectorIndexError, match="model 'model-a'"):  # the model that opened it is recorded
        VectorIndex.open(tmp_path, "entities", DIM, model="model-b")


def test_damaged_or_foreign_pair_of_an_earlier_version_is_refused(tmp_path: Path) -> None:
    _legacy_pair(tmp_path, "entities", _vectors(4), _ids(4), model="model-a")
    with pytest.raises(VectorIndexError, match="entities.faiss holds vectors of model 'model-a'"):
        VectorIndex.open(tmp_path, "entities", DIM, model="model-b")
    path = tmp_path / "entities.faiss"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(VectorIndexError, match="entities.faiss is corrupt"):
        VectorIndex.open(tmp_path, "entities", DIM)
    (tmp_path / "entities.ids.json").unlink()
    with pytest.raises(VectorIndexError, match="entities.ids.json is missing"):
        VectorIndex.open(tmp_path, "entities", DIM)
    moved = VectorIndex.set_aside(tmp_path, "entities")
    assert [p.name.split(".damaged-")[0] for p in moved] == ["entities.faiss"]
    assert len(VectorIndex.open(tmp_path, "entities", DIM)) == 0


def test_set_aside_moves_the_store(tmp_path: Path) -> None:
    _filled(tmp_path)[0].save()
    moved = VectorIndex.set_aside(tmp_path, "entities")
    assert [p.name.split(".damaged-")[0] for p in moved] == ["entities.vectors"] and moved[0].is_dir()
    assert len(VectorIndex.open(tmp_path, "entities", DIM)) == 0


def test_an_index_built_by_another_model_is_refused(tmp_path: Path) -> None:
    """Two models of the same dimension embed into different spaces: the id map names the model, and
    opening with another one is an error naming both, not nonsense results."""
    index = VectorIndex.open(tmp_path, "passages", DIM, model="model-a")
    index.upsert(_ids(5), _vectors(5))
    index.save()
    with pytest.raises(VectorIndexError, match="model 'model-a', but this process embeds with 'model-b'"):
        VectorIndex.open(tmp_path, "passages", DIM, model="model-b")
    same = VectorIndex.open(tmp_path, "passages", DIM, model="model-a")
    assert same.ids() == _ids(5)
    unchecked = VectorIndex.open(tmp_path, "passages", DIM)  # no model given: opens, keeps the one named
    assert unchecked.model == "model-a"
    unchecked.save()
    with pytest.raises(VectorIndexError, match="model-a"):
        VectorIndex.open(tmp_path, "passages", DIM, model="model-b")


def test_an_index_saved_without_a_model_opens_and_records_the_next(tmp_path: Path) -> None:
    index = VectorIndex.open(tmp_path, "passages", DIM)
    index.upsert(_ids(3), _vectors(3))
    index.save()
    opened = VectorIndex.open(tmp_path, "passages", DIM, model="model-b")
    assert opened.ids() == _ids(3)
    opened.upsert(["x"], _vectors(1, seed=2))
    opened.save()
    with pytest.raises(VectorIndexError, match="model-b"):
        VectorIndex.open(tmp_path, "passages", DIM, model="model-c")


def test_temporary_files_of_a_killed_save_are_swept_on_open(tmp_path: Path) -> None:
    index, _, _ = _filled(tmp_path, n=5)
    index.save()
    store = tmp_path / "entities.vectors"
    stale = [store / ".seg-000002.f32.abc123.tmp", store / ".quantizer-1.faiss.def456.tmp"]
    fresh = store / ".seg-000002.f32.ghi789.tmp"  # a save of another process, under way
    for path in (*stale, fresh):
        path.write_bytes(b"partial")
    hour_ago = time.time() - 3600
    for path in stale:
        os.utime(path, (hour_ago, hour_ago))
    reopened = VectorIndex.open(tmp_path, "entities", DIM)
    assert len(reopened) == 5
    assert not any(p.exists() for p in stale) and fresh.exists()


def test_a_reader_sees_the_last_commit_and_leaves_a_writers_files_alone(tmp_path: Path) -> None:
    """An API replica opens the index read-only beside the data dir's writer: it reads the committed
    content, deletes none of the files a save in progress has written (a writer's open would sweep them),
    and refuses to write."""
    writer, ids, vectors = _filled(tmp_path, 50)
    writer.save()
    unlisted = writer.store / "seg-000099.f32"  # what a save killed or still running leaves unlisted
    unlisted.write_bytes(b"\0" * 64)
    reader = VectorIndex.open(tmp_path, "entities", DIM, read_only=True)
    assert len(reader) == 50 and reader.search(vectors[:1], 1)[0][0][0] == ids[0]
    assert unlisted.exists()
    with pytest.raises(VectorIndexError, match="read-only"):
        reader.upsert(["HP:9"], _vectors(1, seed=9))
    with pytest.raises(VectorIndexError, match="read-only"):
        reader.save()
    writer.upsert(["HP:new"], _vectors(1, seed=7))
    writer.save()
    assert len(reader) == 50  # its generation, until it is opened again
    assert len(VectorIndex.open(tmp_path, "entities", DIM, read_only=True)) == 51
    assert not VectorIndex.open(tmp_path / "none", "entities", DIM, read_only=True).store.exists()  # nothing made
