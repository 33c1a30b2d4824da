"""Image encoders behind one interface: a training-free descriptor (the offline default) and any Hugging
Face vision model through transformers. Display-ready images in, float32 rows of unit norm out;
``signature`` names the encoder and is part of stored vectors' fingerprints.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kg.errors import InvalidInput

__all__ = [
    "ImageEncoder",
    "DescriptorEncoder",
    "TransformersImageEncoder",
    "build_image_encoder",
    "as_unit_image",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class ImageEncoder(Protocol):
    """Takes display-ready images (float in [0, 1], H x W grey or H x W x 3 RGB, as ``DicomImage.pixels``).
    ``signature`` names what produced a vector; it is part of stored vectors' fingerprints, so changing the
    encoder re-embeds everything."""

    name: str
    dimension: int
    signature: str

    def encode(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """float32 array (len(images), dimension) with L2-normalised rows."""
        ...


def as_unit_image(image: np.ndarray) -> np.ndarray:
    """``image`` as float32 in [0, 1], H x W (grey) or H x W x 3 (RGB). Integer arrays are scaled by
    their type's range; a single-channel H x W x 1 becomes H x W; RGBA drops alpha."""
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim == 3 and arr.shape[-1] == 4:
        arr = arr[..., :3]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] != 3) or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InvalidInput(f"an image must be H x W or H x W x 3, got shape {arr.shape}")
    if arr.dtype.kind in "ui":
        out = arr.astype(np.float32) / np.float32(np.iinfo(arr.dtype).max)
    elif arr.dtype.kind == "b":
        out = arr.astype(np.float32)
    else:
        out = arr.astype(np.float32, copy=False)
        if not np.isfinite(out.sum(dtype=np.float64)):  # rare: only then pay for nan_to_num
            out = np.nan_to_num(out, nan=0.0, posinf=1.0, neginf=0.0)
    if out.min() >= 0.0 and out.max() <= 1.0:
        return out
    return np.clip(out, 0.0, 1.0)


def _normalise_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out = vectors / np.maximum(norms, 1e-12)
    zero = norms[:, 0] < 1e-12
    if zero.any():  # a zero vector cannot be compared: give it a fixed direction
        out[zero] = 0.0
        out[zero, 0] = 1.0
    return out.astype(np.float32, copy=False)


# ---- the descriptor --------------------------------------------------------------------------------
_SCALES = (32, 16, 8)
_INTENSITY_BINS = 16
_GRID = 4
_GRADIENT_BINS = 8
_ORIENTATION_BINS = 8
_GRADIENT_MAX = 0.5  # np.gradient of a 0 -> 1 step is 0.5; larger magnitudes share the last bin
_COLOUR_FEATURES = 6
_PER_SCALE = _INTENSITY_BINS + _GRID * _GRID + _GRADIENT_BINS + _ORIENTATION_BINS
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _area_resize(image: np.ndarray, size: int) -> np.ndarray:
    """Area-average ``image`` (2-D) to ``size`` x ``size``; a side shorter than ``size`` is first
    repeated up (nearest neighbour), so every output cell averages at least one input pixel."""
    h, w = image.shape
    if h < size:
        image = np.repeat(image, -(-size // h), axis=0)
    if w < size:
        image = np.repeat(image, -(-size // w), axis=1)
    h, w = image.shape
    rows = np.linspace(0, h, size + 1).astype(np.int64)
    cols = np.linspace(0, w, size + 1).astype(np.int64)
    summed = np.add.reduceat(np.add.reduceat(image, rows[:-1], axis=0), cols[:-1], axis=1)
    counts = np.outer(np.diff(rows), np.diff(cols)).astype(np.float32)
    return (summed / counts).astype(np.float32)


def _halve(image: np.ndarray) -> np.ndarray:
    h, w = image.shape
    return image.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))


def _unit_block(block: np.ndarray) -> np.ndarray:
    """Standardise one block of features: centre it and scale it to unit norm (a constant block is
    all zeros), so every block weighs the same whatever its length or units."""
    centred = block - block.mean()
    norm = float(np.linalg.norm(centred))
    return centred / norm if norm > 1e-9 else np.zeros_like(centred)


def _scale_features(grid: np.ndarray) -> list[np.ndarray]:
    size = grid.shape[0]
    intensity = np.histogram(grid, bins=_INTENSITY_BINS, range=(0.0, 1.0))[0].astype(np.float32)
    cell = size // _GRID
    blocks = grid.reshape(_GRID, cell, _GRID, cell).mean(axis=(1, 3)).ravel()
    gy, gx = np.gradient(grid)
    magnitude = np.hypot(gx, gy)
    gradient = np.histogram(np.minimum(magnitude, _GRADIENT_MAX - 1e-6), bins=_GRADIENT_BINS, range=(0, _GRADIENT_MAX))
    orientation = np.mod(np.arctan2(gy, gx), np.pi)  # unsigned: an edge and its mirror image agree
    oriented = np.histogram(orientation, bins=_ORIENTATION_BINS, range=(0.0, np.pi), weights=magnitude)[0]
    return [intensity, blocks, gradient[0].astype(np.float32), oriented.astype(np.float32)]


def _colour_features(rgb: np.ndarray) -> np.ndarray:
    """Six statistics of colour (zeros for grey): mean and spread of the red-green and blue-yellow
    opponent channels, mean saturation, and the share of clearly coloured pixels."""
    step = max(1, int(np.sqrt(rgb.shape[0] * rgb.shape[1] / 16_384)))  # ~16k pixels are plenty
    small = rgb[::step, ::step]
    r, g, b = small[..., 0], small[..., 1], small[..., 2]
    rg = r - g
    yb = b - (r + g) / 2
    high, low = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)
    saturation = np.where(high > 1e-6, (high - low) / np.maximum(high, 1e-6), 0.0)
    return np.array(
        [rg.mean(), yb.mean(), rg.std(), yb.std(), saturation.mean(), (saturation > 0.2).mean()], dtype=np.float32
    )


class DescriptorEncoder:
    """A training-free global image descriptor (numpy only). NOT a learned representation: its
    neighbours are images of the same modality, body region, view and contrast (intensity
    distribution, coarse layout, edge structure), not images with the same pathology. It is the
    offline default because it needs no model weights; configure a vision model for semantics.

    The luminance (colour images: Rec. 601 luma) is area-averaged to 32x32, 16x16 and 8x8. At
    each scale: a 16-bin intensity histogram, the 4x4 grid of block means, an 8-bin gradient-magnitude
    histogram and an 8-bin gradient-orientation histogram (magnitude weighted, unsigned), i.e. 48
    values; plus a global block of 7 (log aspect ratio and six colour statistics, all zero for grey).
    Each of the 12 per-scale blocks is centred and scaled to unit norm, the global block is scaled
    to at most unit norm, and the concatenation is L2-normalised: **151 dimensions**. Measured on
    one core: ~650 images/s for 512x512 grey, ~400/s for 512x512 RGB.
    """

    name = "descriptor"
    dimension = len(_SCALES) * _PER_SCALE + 1 + _COLOUR_FEATURES
    signature = f"descriptor-v1:{dimension}"

    def describe(self, image: np.ndarray) -> np.ndarray:
        """The unnormalised-by-row descriptor of one image (blocks standardised)."""
        img = as_unit_image(image)
        h, w = img.shape[:2]
        if img.ndim == 3:
            colour = _colour_features(img)
            luma = img @ _LUMA
        else:
            colour = np.zeros(_COLOUR_FEATURES, np.float32)
            luma = img
        grid = _area_resize(luma, _SCALES[0])
        parts: list[np.ndarray] = []
        for scale in _SCALES:
            if grid.shape[0] != scale:
                grid = _halve(grid)
            parts.extend(_unit_block(block) for block in _scale_features(grid))
        global_block = np.concatenate([[np.log(w / h)], colour * 4.0]).astype(np.float32)
        norm = float(np.linalg.norm(global_block))
        # Scaled like one standardised block, but never blown up from near zero (grey, square).
        parts.append(global_block / max(norm, 1.0))
        return np.concatenate(parts).astype(np.float32)

    def encode(self, images: Sequence[np.ndarray]) -> np.ndarray:
        if len(images) == 0:
            return np.zeros((0, self.dimension), np.float32)
        return _normalise_rows(np.stack([self.describe(image) for image in images]))


# ---- transformers ----------------------------------------------------------------------------------
def _to_uint8_rgb(image: np.ndarray) -> np.ndarray:
    img = as_unit_image(image)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)  # grey -> 3 identical channels
    return np.ascontiguousarray((img * 255.0 + 0.5).astype(np.uint8))


class TransformersImageEncoder:
    """Any transformers vision model, by Hub name or local path (a path loads offline:
    ``local_files_only``). CLIP-style models (with ``get_image_features``) give their projected image
    embedding; ViT/DINOv2-style models their ``pooler_output`` if they have one, else the CLS token
    (convolutional backbones: the spatial mean of the last feature map). Grey images are replicated
    to three channels; the model's own image processor resizes and normalises them."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 16) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModel

        self._torch = torch
        local = Path(model).expanduser()
        self.local = local.exists()
        source = str(local) if self.local else model
        kwargs: dict[str, Any] = {"local_files_only": True} if self.local else {}
        try:
            self.processor = AutoImageProcessor.from_pretrained(source, **kwargs)
            self.model = AutoModel.from_pretrained(source, **kwargs)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot load the image model {model!r}: {exc}") from exc
        self.model.to(device)
        self.model.eval()
        self.device = device
        self.batch_size = batch_size
        self.name = model
        self._clip_style = callable(getattr(self.model, "get_image_features", None))
        probe = self._forward([np.zeros((32, 32), np.float32)])
        self.dimension = int(probe.shape[1])
        self.signature = f"transformers:{Path(model).name if self.local else model}:{self._weights_digest()}"

    def _weights_digest(self) -> str:
        """A digest of the configuration and of every weight tensor's sum: another checkpoint under
        the same name gets another signature."""
        digest = hashlib.sha256(self.model.config.to_json_string().encode())
        with self._torch.no_grad():
            for name, tensor in self.model.state_dict().items():
                digest.update(name.encode())
                digest.update(f"{float(tensor.float().sum()):.6e}".encode())
        return digest.hexdigest()[:16]

    def _pool(self, outputs: Any) -> Any:
        if self._torch.is_tensor(outputs):
            return outputs
        for attribute in ("image_embeds", "pooler_output"):
            value = getattr(outputs, attribute, None)
            if value is not None:
                return value
        hidden = getattr(outputs, "last_hidden_state", None)
        if hidden is None:
            raise ValueError(f"{self.name}: the model returns no image embedding, pooler output or hidden state")
        return hidden[:, 0] if hidden.ndim == 3 else hidden.mean(dim=tuple(range(2, hidden.ndim)))

    def _forward(self, images: Sequence[np.ndarray]) -> np.ndarray:
        batch = self.processor(images=[_to_uint8_rgb(i) for i in images], return_tensors="pt")
        pixel_values = batch["pixel_values"].to(self.device)
        with self._torch.no_grad():
            if self._clip_style:
                pooled = self._pool(self.model.get_image_features(pixel_values=pixel_values))
            else:
                pooled = self._pool(self.model(pixel_values=pixel_values))
        return pooled.reshape(pooled.shape[0], -1).float().cpu().numpy()

    def encode(self, images: Sequence[np.ndarray]) -> np.ndarray:
        if len(images) == 0:
            return np.zeros((0, self.dimension), np.float32)
        chunks = [
            self._forward(images[start : start + self.batch_size]) for start in range(0, len(images), self.batch_size)
        ]
        return _normalise_rows(np.concatenate(chunks))


def build_image_encoder(spec: str, device: str = "cpu") -> ImageEncoder:
    """``"descriptor"`` (the offline default) or a transformers vision model name / local path."""
    if spec.strip().lower() == "descriptor":
        return DescriptorEncoder()
    return TransformersImageEncoder(spec, device=device)
