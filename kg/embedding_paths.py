"""Which path computes the text embeddings: the backend (PyTorch, or ONNX Runtime / OpenVINO / AOTInductor
over an exported graph), the precision and the graph, chosen per CPU for ``auto``. Cheap to import (no torch
until a CPU is asked about), so the settings validate a configuration with :func:`check_path` at start-up."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BACKENDS",
    "PRECISIONS",
    "EmbedderError",
    "EmbeddingPath",
    "check_path",
    "cpu_features",
    "resolve_dtype",
    "resolve_path",
]

BACKENDS = ("auto", "torch", "onnx", "openvino", "inductor")
# The precisions each backend runs; float32 on any of them gives the same vectors to float rounding
# (cosine >= 0.99999 to PyTorch's), so it keeps the model's signature, and indexes stay valid.
PRECISIONS = {
    "torch": ("float32", "bfloat16", "float16"),
    "onnx": ("float32", "int8"),
    "openvino": ("float32", "bfloat16"),
    "inductor": ("float32", "bfloat16"),
}
_PACKAGES = {"onnx": "onnxruntime", "openvino": "openvino"}


class EmbedderError(RuntimeError):
    """The configured embedding model cannot be found or loaded."""


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """``auto`` runs bfloat16 on a CPU with native bf16 (AVX512-BF16/AMX: ~1.8x faster on 2 cores,
    cosine to the float32 vectors >= 0.996 on PubMed passages) and float32 on other CPUs; on a GPU,
    bfloat16 where it has it (Ampere and later: A100, H100, H200), else float16."""
    if dtype in ("float32", "bfloat16", "float16"):
        return dtype
    if dtype != "auto":
        raise EmbedderError(f"embedding dtype must be auto, float32, bfloat16 or float16 (got {dtype!r})")
    if device != "cpu":
        return "bfloat16" if _accelerator_bf16(device) else "float16"
    return "bfloat16" if _native_bf16() else "float32"


def _accelerator_bf16(device: str) -> bool:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    return False


def cpu_features() -> dict[str, Any]:
    """The CPU's model name and the instruction sets that decide the embedding path (Linux /proc/cpuinfo)."""
    name, flags = "unknown", set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    return {
        "model": name,
        "flags": bool(flags),  # whether the flags could be read (not on macOS or Windows)
        "cores": os.cpu_count(),
        "avx2": "avx2" in flags,
        "avx512": "avx512f" in flags,
        "avx512_vnni": "avx512_vnni" in flags,
        "bf16": "avx512_bf16" in flags or "amx_bf16" in flags,
        "amx": "amx_tile" in flags,
    }


def _native_bf16() -> bool:
    """AVX512-BF16 or AMX tiles (Intel Xeon Sapphire Rapids and later: bf16 matrix products in hardware), read
    from /proc/cpuinfo (importing torch to ask it costs 2 s), else from torch where the flags are not there."""
    features = cpu_features()
    if features["flags"]:
        return features["bf16"] or features["amx"]
    import torch

    supported = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool((supported and supported()) or (amx and amx()))


def _amx() -> bool:
    """AMX tiles (Intel Xeon Sapphire Rapids and later), where bf16 matrix products outrun int8 on VNNI."""
    features = cpu_features()
    if features["flags"]:
        return features["amx"]
    import torch

    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(amx and amx())


@dataclass(frozen=True)
class EmbeddingPath:
    """How the vectors are computed: the backend, its precision, the exported graph it runs (None on
    torch) and why this path was taken."""

    backend: str
    dtype: str
    graph: str | None = None
    reason: str = "configured"

    @property
    def suffix(self) -> str:
        """What the signature adds to the model name: nothing for float32 (the same vectors on every
        backend), ``@bfloat16`` for torch's bf16 (as before backends existed), ``@<backend>-<dtype>`` else."""
        if self.dtype == "float32":
            return ""
        return f"@{self.dtype}" if self.backend == "torch" else f"@{self.backend}-{self.dtype}"

    def __str__(self) -> str:
        graph = f" ({self.graph} graph)" if self.graph else ""
        return f"{self.backend} {self.dtype}{graph}"


# The graph each exported backend runs at each precision, from benchmarks/embedding.py.
_GRAPHS = {("onnx", "float32"): "O3", ("onnx", "int8"): "O2-int8", ("openvino", "float32"): "float32"}
_GRAPHS[("openvino", "bfloat16")] = "float32"  # OpenVINO converts the weights itself
_GRAPHS |= {("inductor", "float32"): "aoti-float32", ("inductor", "bfloat16"): "aoti-bfloat16"}


def _available(backend: str) -> bool:
    if backend == "inductor":  # torch's compiler builds its package with the system's C++ compiler, once
        return _cxx_compiler() is not None
    return backend == "torch" or importlib.util.find_spec(_PACKAGES[backend]) is not None


def _cxx_compiler() -> str | None:
    """The C++ compiler AOTInductor would call (``$CXX``, else g++ or clang++ on the PATH), or None."""
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")


def check_path(backend: str, dtype: str, device: str = "cpu") -> None:
    """Raise :class:`EmbedderError` for a backend and dtype setting that cannot run together (cheap: no
    model, no torch; what settings validation calls)."""
    if backend not in BACKENDS:
        raise EmbedderError(f"embedding backend must be one of {', '.join(BACKENDS)} (got {backend!r})")
    if dtype not in ("auto", "float32", "bfloat16", "float16", "int8"):
        raise EmbedderError(f"embedding dtype must be auto, float32, bfloat16, float16 or int8 (got {dtype!r})")
    if dtype == "float16" and device == "cpu":
        raise EmbedderError("float16 embeddings run on a GPU (MEDKG_EMBEDDING_DEVICE=cuda); CPUs run bfloat16")
    if device != "cpu" and backend not in ("auto", "torch"):
        raise EmbedderError(f"the {backend} embedding backend runs on the CPU only (device is {device!r})")
    if backend in ("auto", "torch") and dtype == "int8" and device != "cpu":
        raise EmbedderError("int8 embeddings run on the onnx backend, on the CPU only")
    if backend in PRECISIONS and dtype != "auto" and dtype not in PRECISIONS[backend]:
        raise EmbedderError(f"the {backend} embedding backend runs {' or '.join(PRECISIONS[backend])}, not {dtype}")
    needed = "onnx" if backend == "auto" and dtype == "int8" else backend
    if needed in _PACKAGES and not _available(needed):
        raise EmbedderError(
            f"embedding backend {needed!r} needs the {_PACKAGES[needed]} package (pip install {_PACKAGES[needed]})"
        )
    if needed == "inductor" and not _available(needed):
        raise EmbedderError("embedding backend 'inductor' needs a C++ compiler (g++ or clang++, or $CXX) to build")


def resolve_path(backend: str = "auto", dtype: str = "auto", device: str = "cpu") -> EmbeddingPath:
    """The embedding path for a backend setting (``auto``, ``torch``, ``onnx``, ``openvino``, ``inductor``) and a dtype
    setting (``auto`` or one the backend runs). ``auto`` on a CPU: see :func:`_auto`."""
    check_path(backend, dtype, device)
    if device != "cpu":
        return EmbeddingPath("torch", resolve_dtype(dtype, device), None, f"device {device}")
    if backend == "auto":
        return _auto(dtype)
    if backend == "torch":
        return EmbeddingPath("torch", resolve_dtype(dtype, device))
    if dtype == "auto":  # the exported backends' own fastest precision at unchanged quality
        dtype = "bfloat16" if backend in ("openvino", "inductor") and _native_bf16() else "float32"
    return EmbeddingPath(backend, dtype, _GRAPHS[(backend, dtype)])


def _auto(dtype: str) -> EmbeddingPath:
    """The fastest path measured at unchanged quality (mean cosine >= 0.99 and minimum >= 0.97 to the
    float32 vectors) on each kind of CPU (docs/benchmarks.md#embedding-backends): with AMX tiles, bfloat16 -
    OpenVINO's when installed (3.5x float32 on 2 cores), else torch's (2.8x; cosine 0.9999 to float32);
    on every other CPU ONNX Runtime's int8 graph (cosine 0.993): 1.9x on AVX2 alone, and 2.45x on AVX-512
    with VNNI and bf16 but no AMX, where bf16 gave 2.4x (OpenVINO) and 1.7x (torch); torch float32 where
    onnxruntime is not installed. AOTInductor's bf16 package (3.75x with AMX) is asked for by name: every
    process that loads it pays a package load, and every load keeps its own copy of the weights, which a
    test suite of many short processes could not afford."""
    if dtype == "int8":
        return EmbeddingPath("onnx", "int8", _GRAPHS[("onnx", "int8")], "asked for int8")
    if dtype == "float32":
        return EmbeddingPath("torch", "float32", None, "asked for float32")
    if dtype == "bfloat16" and not _native_bf16():
        return EmbeddingPath("torch", "bfloat16", None, "asked for bfloat16 on a CPU without native bf16")
    if dtype == "bfloat16" or _amx():
        reason = "asked for bfloat16" if dtype == "bfloat16" else "AMX CPU: bf16 matrix tiles"
        if _available("openvino"):
            return EmbeddingPath("openvino", "bfloat16", _GRAPHS[("openvino", "bfloat16")], reason)
        return EmbeddingPath("torch", "bfloat16", None, reason)
    if _available("onnx"):
        return EmbeddingPath("onnx", "int8", _GRAPHS[("onnx", "int8")], "no AMX: int8 on ONNX Runtime")
    if _native_bf16():
        return EmbeddingPath("torch", "bfloat16", None, "native bf16 CPU, onnxruntime not installed")
    return EmbeddingPath("torch", "float32", None, "no native bf16, onnxruntime not installed")
