"""A Ray load (`medkg ingest pubmed --ray`) killed with SIGKILL, the driver and every process it started (Ray's
own included), at two steps: while Ray prepares the shards (some written, some not) and while the driver merges
them (some recorded, one half written). Each re-run goes on from what is durable, and the end equals an
uninterrupted one-process load: graph counts, passages, vectors, mentions, co-mentions and search rankings."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest

from ingest.pubmed.readers import expand_paths, iter_records
from kg.settings import load_settings
from service import ingestion
from service.container import Container
from tests.conftest import shared
from tests.integration.ingest.pubmed.test_distributed import fresh, queries_from, snapshot
from tests.support.live_server import MEDKG

pytestmark = [pytest.mark.reliability, pytest.mark.slow]


def _kill_when(command: list[str], env: dict[str, str], ready: Callable[[], bool], log: Path) -> None:
    """Run ``command`` and SIGKILL its whole process tree as soon as ``ready()`` holds."""
    with log.open("w") as out:
        child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while not ready():
        assert child.poll() is None, f"the load ended ({child.returncode}) before the kill: {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, "the step to kill at never came"
        time.sleep(0.05)
    root = psutil.Process(child.pid)
    tree = [root, *root.children(recursive=True)]
    for process in tree:
        try:
            process.kill()  # SIGKILL
        except psutil.NoSuchProcess:
            pass
    child.wait()
    psutil.wait_procs(tree, timeout=30)


def _merged(shards: Path) -> int:
    manifest = shards / "merged.jsonl"
    return len(manifest.read_text().splitlines()) if manifest.exists() else 0


def test_a_ray_load_killed_while_preparing_and_while_merging_ends_as_one_uninterrupted(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    files = expand_paths([shared("pubmed_xml", "ncbiutils"), shared("pubmed_xml", "biopython_entrez")])
    data = tmp_path / "ray"
    with fresh(request, "ladybug", data):  # the entities, entity index and HPO lexicon a load links against
        pass
    env = {
        **os.environ, "MEDKG_DATA_DIR": str(data), "MEDKG_EMBEDDING_DTYPE": "float32", "HF_HUB_OFFLINE": "1",
        "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", "MEDKG_LADYBUG_MAX_DB_SIZE_GB": "4", "MEDKG_TORCH_THREADS": "1",
        "MEDKG_INGEST_CHECKPOINT_EVERY": "3",  # shards are recorded merged at checkpoints: one every few articles
    }  # fmt: skip
    command = [MEDKG, "ingest", "pubmed", *map(str, files), "--ray", "--workers", "1", "--no-progress"]
    shards = data / "shards"

    # 1. while Ray prepares: the first shard file is in place, others are not (each shard embedded here, not
    # read from the vector memo: preparing one takes seconds, so the kill comes before the next)
    killed = {**env, "MEDKG_VECTOR_MEMO_MB": "0"}
    _kill_when(command, killed, lambda: any(shards.glob("*.parquet")), tmp_path / "first.log")
    written = len(list(shards.glob("*.parquet")))
    assert 0 < written < len(files) and _merged(shards) == 0, written
    # 2. while the driver merges: a shard is recorded merged, others are not
    _kill_when(command, killed, lambda: _merged(shards) > 0, tmp_path / "second.log")
    assert 0 < _merged(shards) < len(files)
    # 3. to the end
    last = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert last.returncode == 0, last.stderr[-3000:]
    assert _merged(shards) == len(files) and not list(shards.glob("*.parquet"))

    settings = load_settings(data_dir=data, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=4,
                             embedding_dtype="float32")  # fmt: skip
    with Container(settings) as c:
        queries = queries_from(c)
        resumed = snapshot(c, queries)
        vectors = c.text_index.vectors.vectors_of(resumed["passages"])
    with fresh(request, "ladybug", tmp_path / "plain") as c:
        ingestion.load_literature(c, iter_records(files), "pubmed", link=True, extract=False, progress=False)
        expected = snapshot(c, queries)
        expected_vectors = c.text_index.vectors.vectors_of(expected["passages"])
    for key in expected:
        assert resumed[key] == expected[key], key
    assert vectors.keys() == expected_vectors.keys() and len(vectors) > 40
    worst = max(float(np.abs(vectors[k] - expected_vectors[k]).max()) for k in vectors)
    assert worst < 1e-5, worst  # float32 vectors of the same text, computed in other batches
