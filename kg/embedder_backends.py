"""Inference graphs of a sentence-transformers model for ONNX Runtime, OpenVINO and AOTInductor, and the cache
they live in.

The model (Transformer, pooling and whatever else it stacks) is traced once to one ONNX graph from the
already loaded PyTorch model - nothing is downloaded - then, on demand, graph-optimised (optimum's O1-O3
levels, done with onnxruntime's own transformer optimizer) or int8-quantised. For AOTInductor it is
exported with ``torch.export`` (batch and sequence length dynamic) and compiled by torch's own compiler into
a package of C++ kernels (a C++ compiler is needed once, to build it; loading it takes milliseconds).
Each graph is written to a temporary name, renamed into place and recorded with its SHA-256 in a sidecar; a
graph whose record is missing or does not match (an interrupted or damaged export) is rebuilt. The cache
folder is keyed by a hash of the weights and module configuration, so a changed model never reuses another's
graph.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "GRAPHS",
    "ExportCache",
    "ExportError",
    "InductorRunner",
    "OnnxRunner",
    "OpenVinoRunner",
    "default_cache_root",
    "model_inputs",
]

log = logging.getLogger(__name__)

# Bumped when the export code changes what a graph holds: old cache folders are then left alone.
EXPORT_FORMAT = 1
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"

# name -> (graph it is derived from, what it is). optimum's O-levels: O1 basic ORT optimisations; O2 extended
# ones plus the transformer fusions (attention, skip-layernorm, bias-GELU); O3 = O2 with GELU approximated
# (tanh). optimum's O4 is O3 in float16 for GPUs, so there is none here.
GRAPHS: dict[str, tuple[str | None, str]] = {
    "float32": (None, "the traced float32 graph"),
    "O1": ("float32", "ORT basic graph optimisations"),
    "O2": ("float32", "ORT extended optimisations and transformer fusions"),
    "O3": ("float32", "O2 with the GELU approximation"),
    "O1-int8": ("O1", "int8 dynamic quantisation of the O1 graph's matrix products"),
    "O2-int8": ("O2", "int8 dynamic quantisation of the O2 graph's matrix products"),
    "int8-static": ("float32", "int8 static quantisation (QDQ), activations calibrated on given texts"),
    "aoti-float32": (None, "the model compiled by AOTInductor (torch.export, C++ kernels), float32"),
    "aoti-bfloat16": (None, "the model in bfloat16 compiled by AOTInductor (AMX/AVX512-BF16 kernels)"),
}


class ExportError(RuntimeError):
    """A graph cannot be exported, optimised or loaded."""


def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/medkg/embedders`` (default ``~/.cache/medkg/embedders``): one cache for every data
    dir, as a graph depends on the model and the libraries only."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "medkg" / "embedders"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def model_key(model: Any) -> str:  # noqa: ANN401 - a SentenceTransformer
    """A hash of what the graph is made of: the modules' configuration, every weight, the export format
    and the torch version that traces it."""
    import torch

    digest = hashlib.sha256(f"{EXPORT_FORMAT}\n{torch.__version__}\n{model!r}\n".encode())
    for name, tensor in model.state_dict().items():
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def files_key(model_dir: Path) -> str:
    """A hash of a model folder's files and of what exports them, read without loading the model (or
    importing torch): what finds the graphs exported from those files (:meth:`ExportCache.found`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        exporter = version("torch")
    except PackageNotFoundError:
        exporter = "none"
    digest = hashlib.sha256(f"{EXPORT_FORMAT}\n{exporter}\n".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(model_dir)}:{_sha256(path)}\n".encode())
    return digest.hexdigest()[:16]


def model_inputs(model: Any) -> tuple[str, ...]:  # noqa: ANN401 - a SentenceTransformer
    """The tensors the model's own preprocessing gives a graph, in the graphs' order."""
    return tuple(n for n in INPUT_NAMES if n in model.preprocess(["a"]))


def _export(model: Any, out: Path) -> None:  # noqa: ANN401 - a SentenceTransformer
    import torch

    names = model_inputs(model)

    class Sentence(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, tensors, strict=True)))[OUTPUT_NAME]

    # two texts of different lengths: padding and a batch of more than one are traced, not constants
    example = model.preprocess(["a short text", "a longer text of several more words, so the first is padded"])
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {OUTPUT_NAME: {0: "batch"}}
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python conditions it froze (shape checks)
        torch.onnx.export(
            Sentence().eval(),
            tuple(example[n] for n in names),
            str(out),
            input_names=list(names),
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
            do_constant_folding=True,
        )


def _compile_aoti(model: Any, out: Path, dtype: str) -> None:  # noqa: ANN401 - a SentenceTransformer
    """``model`` (a copy, in ``dtype``) exported with dynamic batch and sequence length, and compiled by
    AOTInductor into the package ``out``. Weights are not frozen into the kernels: frozen, the bf16 package
    was slower (155 against 168 passages/s on a 2-core Xeon with AMX, docs/benchmarks.md)."""
    import copy

    import torch

    names = model_inputs(model)
    copied = copy.deepcopy(model).to(getattr(torch, dtype)).eval()

    class Sentence(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = copied

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, tensors, strict=True)))[OUTPUT_NAME].float()

    example = model.preprocess(["a short text", "a longer text of several more words, so the first is padded"])
    # texts are cut to the model's max_seq_length by its preprocessing; batches of any size
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    sequence = torch.export.Dim("sequence", min=2, max=model.max_seq_length)
    shapes = tuple({0: batch, 1: sequence} for _ in names)
    with torch.inference_mode():
        program = torch.export.export(Sentence().eval(), tuple(example[n] for n in names), dynamic_shapes=(shapes,))
    torch._inductor.aoti_compile_and_package(program, package_path=str(out))


def _optimise(src: Path, out: Path, level: str) -> None:
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet_onnxruntime():
        if level == "O1":
            optimised = optimize_model(str(src), model_type="bert", opt_level=1, only_onnxruntime=True)
        else:
            options = FusionOptions("bert")
            options.enable_gelu_approximation = level == "O3"
            optimised = optimize_model(str(src), model_type="bert", opt_level=2, optimization_options=options)
        optimised.save_model_to_file(str(out))


class _OnnxRuntimeChatter(logging.Filter):
    """Drops the records of ONNX Runtime's Python tools (optimizer, quantizer) below ERROR. The quantizer
    logs each tensor it passes over on the root logger (some 50 wrapped records a graph, which filled the
    first ``medkg demo``'s screen) and advice to its own developers as warnings; a failed build raises."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or f"{os.sep}onnxruntime{os.sep}" not in record.pathname


@contextlib.contextmanager
def _quiet_onnxruntime() -> Iterator[None]:
    """While a graph is optimised or quantised, the root logger's handlers pass over ONNX Runtime's chatter
    (its optimizer logs under bare module names, ``fusion_base``..., so no one logger's level reaches it)."""
    chatter, handlers = _OnnxRuntimeChatter(), list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(chatter)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(chatter)


def _quantise_static(model: Any, src: Path, out: Path, texts: list[str]) -> None:  # noqa: ANN401
    from onnxruntime.quantization import CalibrationDataReader

    names = model_inputs(model)

    class Batches(CalibrationDataReader):
        def __init__(self) -> None:
            batches = [texts[i : i + 16] for i in range(0, len(texts), 16)]
            self.feeds = iter({n: f[n].numpy().astype(np.int64) for n in names} for f in map(model.preprocess, batches))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    prepared = out.with_name(out.name + ".prep.onnx")
    # ORT's shape inference leaves scratch files in the working directory: work in the cache folder (this
    # graph is built by benchmarks only - it fails the quality bar - so changing directory is safe here)
    with contextlib.chdir(out.parent), _quiet_onnxruntime():
        _quantise_static_here(src, prepared, out, Batches())


def _quantise_static_here(src: Path, prepared: Path, out: Path, batches: Any) -> None:  # noqa: ANN401
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(str(src), str(prepared), skip_symbolic_shape=True)
        quantize_static(
            str(prepared),
            str(out),
            batches,
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=False,
        )
    finally:
        prepared.unlink(missing_ok=True)


def _quantise(src: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The matrix products only (quantised embeddings cost quality for no speed), int8 weights per output
    # channel in 7 bits: without VNNI the u8 x s8 products saturate in 16 bits at full range, so one graph
    # gives the same vectors on every CPU. Measured (benchmarks/embedding.py): per-tensor weights, or the
    # embedding tables quantised too, fall to mean cosine 0.95 to float32.
    with _quiet_onnxruntime():
        quantize_dynamic(
            str(src),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # types of the fused ops' outputs
        )


def model_slug(model_name: str) -> str:
    """A model's name as a file name's part (the last 60 characters that are letters, digits, ._-)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model_name.replace("package:", "")).strip("_")[-60:]


def _files_link(root: Path, model_name: str, files: str) -> Path:
    return root / f"{model_slug(model_name)}-files-{files}.json"


def _read_link(link: Path) -> str | None:
    """The cache folder a files link names (the last full load's), or None."""
    try:
        return str(json.loads(link.read_text())["directory"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ExportCache:
    """The graphs of one model under ``root/<name>-<key>/``; :meth:`graph` returns a verified file,
    building (or rebuilding) it first when needed. ``built`` lists what this object had to build."""

    def __init__(
        self,
        model: Any,  # noqa: ANN401 - a SentenceTransformer (None: found by its files, can verify, not build)
        model_name: str,
        root: Path | None = None,
        calibration: list[str] | None = None,
        files: str | None = None,
        directory: Path | None = None,
    ) -> None:
        self.model = model
        self.calibration = calibration  # the texts int8-static calibrates its activations on
        root = root or default_cache_root()
        self.directory = directory or root / f"{model_slug(model_name)}-{model_key(model)}"
        self.built: list[str] = []
        if files is not None and directory is None:  # the model's files name this folder from now on
            link = _files_link(root, model_name, files)
            if _read_link(link) != self.directory.name:
                root.mkdir(parents=True, exist_ok=True)
                tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"directory": self.directory.name}))
                tmp.replace(link)

    @classmethod
    def found(cls, model_name: str, files: str, root: Path | None = None) -> ExportCache | None:
        """The cache of the model whose folder's :func:`files_key` is ``files``, where an earlier load of
        the model named it; None where none did."""
        root = root or default_cache_root()
        name = _read_link(_files_link(root, model_name, files))
        return None if name is None else cls(None, model_name, root, directory=root / Path(name).name)

    def path(self, graph: str) -> Path:
        return self.directory / f"{graph}{_suffix(graph)}"

    def _record(self, graph: str) -> Path:
        return self.directory / f"{graph}.json"

    def valid(self, graph: str) -> bool:
        """The graph's file is whole: its record exists and its size and SHA-256 match."""
        path, record = self.path(graph), self._record(graph)
        try:
            meta = json.loads(record.read_text())
            return path.stat().st_size == meta["size"] and _sha256(path) == meta["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            return False

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One process builds at a time (pytest-xdist workers, two services on one host)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def graph(self, graph: str, rebuild: bool = False) -> Path:
        if graph not in GRAPHS:
            raise ExportError(f"unknown graph {graph!r}; known: {', '.join(GRAPHS)}")
        if not rebuild and self.valid(graph):
            return self.path(graph)
        if self.model is None:
            raise ExportError(f"graph {graph!r} is not in {self.directory}, and building it needs the model loaded")
        source, _ = GRAPHS[graph]
        src = self.graph(source) if source else None  # before the lock: flock does not nest in a process
        with self._locked():
            if not rebuild and self.valid(graph):  # another process built it while this one waited
                return self.path(graph)
            self._build(graph, src)
        return self.path(graph)

    def _build(self, graph: str, src: Path | None) -> None:
        path, record = self.path(graph), self._record(graph)
        record.unlink(missing_ok=True)  # no record while the file is replaced: a crash leaves it invalid
        tmp = self.directory / f".{graph}.{os.getpid()}.tmp{_suffix(graph)}"
        started = time.perf_counter()
        try:
            if graph == "float32":
                _export(self.model, tmp)
            elif graph.startswith("aoti-"):
                _compile_aoti(self.model, tmp, graph.removeprefix("aoti-"))
            elif graph == "int8-static":
                if not self.calibration:
                    raise ExportError("int8-static needs calibration texts")
                _quantise_static(self.model, src, tmp, self.calibration)
            elif graph.endswith("int8"):
                _quantise(src, tmp)
            else:
                _optimise(src, tmp, graph)
            os.replace(tmp, path)
        except Exception as exc:
            raise ExportError(f"cannot build the {graph} graph in {self.directory}: {exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
            for extra in self.directory.glob(f".{graph}.{os.getpid()}.tmp*"):  # external data, if any
                extra.unlink(missing_ok=True)
        meta = {
            "size": path.stat().st_size,
            "sha256": _sha256(path),
            "built_s": round(time.perf_counter() - started, 2),
        }
        tmp_record = record.with_suffix(f".{os.getpid()}.tmp")
        tmp_record.write_text(json.dumps(meta))
        os.replace(tmp_record, record)
        self.built.append(graph)
        log.info("embedding graph %s built in %.1f s: %s", graph, meta["built_s"], path)


def _suffix(graph: str) -> str:
    return ".pt2" if graph.startswith("aoti-") else ".onnx"


def _input_names(inputs: list[Any]) -> tuple[str, ...]:
    return tuple(i.get_any_name() if hasattr(i, "get_any_name") else i.name for i in inputs)


class GraphTokenizer:
    """A sentence-transformers model's own text preprocessing without sentence-transformers (or torch): its
    ``tokenizer.json``, cut at its ``max_seq_length`` and padded to the longest text of a batch, as
    ``model.preprocess`` does (the same ids, masks and types: tests/unit/kg/test_embedder_backends.py). Only
    for a folder of a plain text model, a Transformer then Pooling (and Normalize), whose graph holds all but
    the tokenizer; :meth:`of` returns None for any other."""

    PLAIN = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling")

    def __init__(self, tokenizer: Any, lowercase: bool) -> None:  # noqa: ANN401 - a tokenizers.Tokenizer
        self.tokenizer = tokenizer
        self.lowercase = lowercase

    @classmethod
    def of(cls, model_dir: Path) -> GraphTokenizer | None:
        try:
            modules = [m["type"] for m in json.loads((model_dir / "modules.json").read_text())]
            config = json.loads((model_dir / "sentence_bert_config.json").read_text())
            special = json.loads((model_dir / "tokenizer_config.json").read_text())
            if tuple(modules[:2]) != cls.PLAIN or modules[2:] not in ([], ["sentence_transformers.models.Normalize"]):
                return None
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            pad = str(special.get("pad_token", "[PAD]"))
            if tokenizer.token_to_id(pad) is None:
                return None
            tokenizer.enable_truncation(int(config["max_seq_length"]))
            tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad)
        except Exception:  # noqa: BLE001 - a folder it cannot read as a plain model: the full load instead
            return None
        return cls(tokenizer, bool(config.get("do_lower_case")))

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        encoded = self.tokenizer.encode_batch([t.lower() for t in texts] if self.lowercase else texts)
        return {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }


class OnnxRunner:
    """One ONNX Runtime CPU session over a graph; ``run(features)`` -> (batch, dim) float32. Thread-safe."""

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about nodes left on the CPU provider are noise here
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names = _input_names(self.session.get_inputs())

    def run(self, features: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run([OUTPUT_NAME], {n: features[n] for n in self.names})[0]


class OpenVinoRunner:
    """One OpenVINO CPU compilation of a graph at a set precision (``f32`` or ``bf16``); ``run`` takes a fresh
    infer request per call, so threads may share it."""

    def __init__(self, path: Path, threads: int, precision: str = "f32") -> None:
        import openvino as ov

        core = ov.Core()
        config = {
            "INFERENCE_PRECISION_HINT": precision,
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",
        }
        self.compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
        self.names = _input_names(self.compiled.inputs)
        self.output = self.compiled.output(OUTPUT_NAME)

    def run(self, features: dict[str, np.ndarray]) -> np.ndarray:
        request = self.compiled.create_infer_request()
        return np.asarray(request.infer({n: features[n] for n in self.names})[self.output])


class InductorRunner:
    """An AOTInductor package loaded into this process; ``run(features)`` -> (batch, dim) float32. Its
    kernels use torch's intra-op threads (MEDKG_TORCH_THREADS)."""

    def __init__(self, path: Path, names: tuple[str, ...]) -> None:
        import torch

        self._torch = torch
        self.package = torch._inductor.aoti_load_package(str(path))
        self.names = names

    def run(self, features: dict[str, np.ndarray]) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            return self.package(*(torch.from_numpy(features[n]) for n in self.names)).numpy()
