"""VectorIndex against real FAISS and real files; vectors come from a seeded numpy Generator."""

from __future__ import annotations

import json
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
