"""OpenMP thread counts: FAISS's and torch's are one per-thread setting of one runtime, so each is set
around its own work, in the thread that does it, and put back after."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch

from kg import threads
from kg.vector_index import VectorIndex


@pytest.fixture(autouse=True)
def counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "_COUNTS", dict(threads._COUNTS))


def test_a_container_leaves_torchs_count_alone(tmp_path: Path) -> None:
    """The bug this module fixes: a container set FAISS's count of 1 for the thread that made it, and torch,
    which reads the same runtime's setting until told otherwise, then embedded on one core there."""
    script = (
        "import torch\n"
        "from kg.settings import load_settings\n"
        "from service.container import Container\n"
        "before = torch.get_num_threads()\n"
        f"with Container(load_settings(data_dir={str(tmp_path)!r}, faiss_threads=1)) as c:\n"
        "    print(before, torch.get_num_threads())\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "2"}  # two, as on a 2-core machine (the suite runs with one)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    before, after = run.stdout.split()
    assert (before, after) == ("2", "2"), run.stdout + run.stderr


def test_each_library_gets_its_count_in_any_thread() -> None:
    threads.configure(faiss=3, torch=3)  # neither library's default here (one per core, or OMP_NUM_THREADS)
    seen: dict[str, object] = {}

    def work() -> None:
        before = (faiss.omp_get_max_threads(), torch.get_num_threads())
        with threads.faiss_threads():
            seen["faiss"] = faiss.omp_get_max_threads()
        seen["before"], seen["after"] = before, (faiss.omp_get_max_threads(), torch.get_num_threads())
        threads.use_torch_threads()
        seen["torch"] = torch.get_num_threads()
        torch.set_num_threads(before[1])
        threads.configure(faiss=1, torch=None)
        threads.use_torch_threads()  # none configured: torch's own count is left alone
        seen["unconfigured"] = torch.get_num_threads()

    worker = threading.Thread(target=work)  # a thread started after the counts were configured
    worker.start()
    worker.join()
    assert (seen["faiss"], seen["torch"]) == (3, 3)
    assert seen["after"] == seen["before"] and seen["unconfigured"] == seen["before"][1]


def test_a_search_leaves_the_threads_count_as_it_found_it(tmp_path: Path) -> None:
    threads.configure(faiss=1)
    torch.set_num_threads(2)
    faiss.omp_set_num_threads(2)
    index = VectorIndex.open(tmp_path, "t", 8)
    vectors = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    index.upsert([f"v{i}" for i in range(20)], vectors)
    assert index.search(vectors[3], 1)[0][0][0] == "v3"
    assert torch.get_num_threads() == 2 and faiss.omp_get_max_threads() == 2
