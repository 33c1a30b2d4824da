"""OpenMP thread counts, set around the work they are for.

FAISS and torch (and AOTInductor's kernels) run on one OpenMP runtime, whose thread count is a setting of
each calling thread: a count set for one library is the other's too, and a thread started later does not
see it. Set once for FAISS at start, it ran every embedding of the main thread (loads, the demo, reindex)
on one core, and left FAISS at one per core in the server's worker threads. So each count is set where
its library's work runs, in the thread that runs it: :func:`faiss_threads` around searches, put back
after (``MEDKG_FAISS_THREADS``), :func:`use_torch_threads` before embedding (``MEDKG_TORCH_THREADS``; torch
keeps one count for the process, so it is not put back: a server embedding in several threads at once
would flip it under the others).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["configure", "embedding_threads", "faiss_threads", "use_torch_threads"]

# the counts of this process (Container sets them from the settings): FAISS's always a number (1 unless
# configured), torch's None for torch's own default
_COUNTS: dict[str, int | None] = {"faiss": 1, "torch": None}


def configure(faiss: int = 1, torch: int | None = None) -> None:
    """The threads FAISS searches with, and torch embeds with (None: torch's default, one per core)."""
    _COUNTS.update(faiss=faiss, torch=torch)


@contextmanager
def faiss_threads() -> Iterator[None]:
    """FAISS's count for this thread while the block runs (1: a single query is fastest alone)."""
    import faiss

    wanted, before = _COUNTS["faiss"], faiss.omp_get_max_threads()
    if wanted == before:
        yield
        return
    faiss.omp_set_num_threads(wanted)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def embedding_threads() -> int:
    """The threads an exported graph's runtime (ONNX Runtime, OpenVINO) embeds with, read without importing
    torch: ``MEDKG_TORCH_THREADS`` where set, else torch's own default (``OMP_NUM_THREADS``, else one per
    physical core)."""
    if (wanted := _COUNTS["torch"]) is not None:
        return wanted
    if (env := os.environ.get("OMP_NUM_THREADS", "")).isdigit() and int(env) > 0:
        return int(env)
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:
        physical = None
    return physical or os.cpu_count() or 1


def use_torch_threads() -> None:
    """torch's configured count, for this thread and the process (none configured: left as it is)."""
    wanted = _COUNTS["torch"]
    if wanted is not None:
        import torch

        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)
