"""Image encoders: the descriptor on real DICOM images, and transformers vision models (tiny,
randomly initialised, saved to a temporary folder and loaded offline)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
import pydicom
import pytest

from multimodal.deid import Pseudonymizer
from multimodal.dicom import read_dicom
from multimodal.encoders import DescriptorEncoder, ImageEncoder, TransformersImageEncoder, build_image_encoder

P = Pseudonymizer(b"e" * 32)
PYDICOM_FILES = Path(pydicom.data.__file__).parent / "test_files"


@pytest.fixture(scope="module")
def samples() -> dict[str, np.ndarray]:
    """Small real images from the pydicom wheel: CT, MR, and an RGB ultrasound."""
    return {
        name: read_dicom(PYDICOM_FILES / file, P).pixels
        for name, file in (("ct", "CT_small.dcm"), ("mr", "MR_small.dcm"), ("us", "examples_rgb_color.dcm"))
    }


def test_descriptor_vectors(samples: dict[str, np.ndarray]) -> None:
    enc = DescriptorEncoder()
    assert isinstance(enc, ImageEncoder) and enc.dimension == 151
    vectors = enc.encode(list(samples.values()))
    assert vectors.shape == (3, 151) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(enc.encode([samples["ct"]])[0], vectors[0])  # deterministic
    assert enc.encode([]).shape == (0, 151)
    # odd inputs: tiny, integer, single-channel, constant
    odd = enc.encode(
        [np.ones((3, 5)), (samples["ct"] * 255).astype(np.uint8), samples["mr"][..., None], np.zeros((9, 9))]
    )
    assert np.isfinite(odd).all() and np.allclose(np.linalg.norm(odd, axis=1), 1.0, atol=1e-5)


def test_descriptor_neighbours_follow_modality(samples: dict[str, np.ndarray]) -> None:
    enc = DescriptorEncoder()
    rng = np.random.default_rng(0)
    ct = samples["ct"]
    flipped = np.clip(ct[:, ::-1] + rng.normal(0, 0.03, ct.shape), 0, 1).astype(np.float32)
    v_ct, v_flip, v_mr, v_us = enc.encode([ct, flipped, samples["mr"], samples["us"]])
    assert v_ct @ v_flip > v_ct @ v_mr + 0.1
    assert v_ct @ v_flip > v_ct @ v_us + 0.1
    grey_us = samples["us"] @ np.array([0.299, 0.587, 0.114], np.float32)
    assert enc.encode([grey_us])[0] @ v_us < 0.999  # the colour statistics count


def test_descriptor_speed() -> None:
    enc = DescriptorEncoder()
    images = [np.random.default_rng(i).random((512, 512), dtype=np.float32) for i in range(60)]
    enc.encode(images[:5])
    started = time.perf_counter()
    enc.encode(images)
    rate = len(images) / (time.perf_counter() - started)
    # Measured ~550/s on one core of the development machine; the bound leaves room for a busy CI box.
    assert rate > 100, f"{rate:.0f} images/s"


# ---- transformers ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("image-models")
    vit = ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37
    )
    ViTModel(vit).save_pretrained(root / "vit")
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(root / "vit")
    clip = CLIPConfig(
        text_config={
            "vocab_size": 99,
            "hidden_size": 16,
            "intermediate_size": 37,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 16,
            "bos_token_id": 0,
            "eos_token_id": 2,
            "pad_token_id": 1,
        },
        vision_config={
            "image_size": 32,
            "patch_size": 8,
            "hidden_size": 16,
            "intermediate_size": 37,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        },
        projection_dim=24,
    )
    CLIPModel(clip).save_pretrained(root / "clip")
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(root / "clip")
    return {"vit": root / "vit", "clip": root / "clip"}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test: a local model must load offline."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize(("kind", "dimension"), [("vit", 32), ("clip", 24)])
def test_transformers_encoder_from_a_local_folder(
    kind: str, dimension: int, tiny_models: dict[str, Path], samples: dict[str, np.ndarray], no_network: None
) -> None:
    enc = build_image_encoder(str(tiny_models[kind]))
    assert isinstance(enc, TransformersImageEncoder) and isinstance(enc, ImageEncoder)
    assert enc.local and enc.dimension == dimension
    assert enc.signature.startswith(f"transformers:{kind}:")
    images = [samples["ct"], samples["us"], samples["mr"], samples["ct"]]
    vectors = enc.encode(images)
    assert vectors.shape == (4, dimension) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[3], atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])
    enc.batch_size = 1  # batching does not change a vector
    np.testing.assert_allclose(enc.encode(images[:2]), vectors[:2], atol=1e-4)
    assert enc.encode([]).shape == (0, dimension)


def test_signature_changes_with_the_weights(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    import torch
    from transformers import ViTImageProcessor, ViTModel

    model = ViTModel.from_pretrained(tiny_models["vit"], local_files_only=True)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    model.save_pretrained(tmp_path / "vit")
    ViTImageProcessor.from_pretrained(tiny_models["vit"], local_files_only=True).save_pretrained(tmp_path / "vit")
    a = TransformersImageEncoder(str(tiny_models["vit"]))
    b = TransformersImageEncoder(str(tmp_path / "vit"))
    assert a.signature != b.signature


def test_build_image_encoder_default_and_bad_model(tmp_path: Path) -> None:
    assert isinstance(build_image_encoder("descriptor"), DescriptorEncoder)
    (tmp_path / "empty-model").mkdir()
    with pytest.raises(ValueError, match="cannot load the image model"):
        build_image_encoder(str(tmp_path / "empty-model"))
