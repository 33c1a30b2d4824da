"""An ingest killed with SIGKILL in the middle of a file (graph batches written after the last
checkpoint, indexes not yet saved) and run again ends exactly where an uninterrupted run ends: the
same graph counts, the same passages and documents, the same FAISS vectors and the same BM25 and
dense rankings. The load runs in a child process, on the embedded store, over real PubMed XML."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import shared

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

XML = ("pubmed_xml", "user_exports", "qi29_pubmed_result.xml")
ARTICLES = 40  # of the file's 121: enough for four checkpoints
KILL_AFTER = 27  # articles handed to the loader: two batches past the checkpoint at 20

CHILD = r"""
import json, sys, time
from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.xml import parse_pubmed_xml
from ingest.pubmed.model import Article
from kg.model import Entity
from kg.settings import load_settings
from service.container import Container

data_dir, xml, limit, pause_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = Container(load_settings(data_dir=data_dir, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2))
c.graph.upsert_entities([
    Entity(id="DOID:162", name="cancer", category="Disease"),
    Entity(id="DOID:9352", name="type 2 diabetes mellitus", category="Disease", synonyms=["type 2 diabetes"]),
    Entity(id="HP:0002664", name="Neoplasm", category="Phenotype", synonyms=["tumor", "tumour"]),
    Entity(id="DOID:1612", name="breast cancer", category="Disease"),
])

def articles():
    n = 0
    with open(xml, "rb") as fh:
        for record in parse_pubmed_xml(fh, xml):
            if not isinstance(record, Article):
                continue
            if n == pause_at:
                print("PAUSED", flush=True)  # mid-file: the parent kills the process here
                time.sleep(600)
            if n == limit:
                return
            n += 1
            yield record

linker = c.document_linker
loader = PubmedLoader(c.graph, c.text_index, c.nlp, linker, progress=False, batch_size=4, checkpoint_every=10)
report = loader.load(articles(), source="pubmed")
print(json.dumps({"unchanged": report.read.get("articles unchanged", 0)}), flush=True)
c.close()
"""

SNAPSHOT = r"""
import json, sys
from kg.settings import load_settings
from service.container import Container

c = Container(load_settings(data_dir=sys.argv[1], ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2))
s = c.graph.stats()
t = c.text_index
queries = ["insulin resistance in type 2 diabetes", "tumor growth", "randomized trial outcome"]
print(json.dumps({
    "entities": s.entities, "relations": s.relations, "invalidated": s.invalidated_relations,
    "categories": s.categories, "relation_types": s.relation_types,
    "passages": len(t), "documents": t.document_count(), "vectors": len(t.vectors),
    "bm25": {q: [[i, round(x, 4)] for i, x in t.bm25_search(q, 20)] for q in queries},
    "dense": {q: [[i, round(x, 4)] for i, x in t.dense_search(q, 20)] for q in queries},
}))
c.close()
"""


def _env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    return {**base, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MEDKG_TORCH_THREADS": "1"}


def _load(data_dir: Path, xml: Path, pause_at: int = -1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(data_dir), str(xml), str(ARTICLES), str(pause_at)],
        env=_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def _snapshot(data_dir: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", SNAPSHOT, str(data_dir)], env=_env(), capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_sigkill_mid_file_then_rerun_equals_an_uninterrupted_load(tmp_path: Path) -> None:
    xml = shared(*XML)
    whole = _load(tmp_path / "whole", xml)
    assert whole.returncode == 0, whole.stderr[-3000:]
    expected = _snapshot(tmp_path / "whole")
    assert expected["documents"] == ARTICLES and expected["passages"] > ARTICLES

    killed_dir = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(killed_dir), str(xml), str(ARTICLES), str(KILL_AFTER)],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        line = ""
        while "PAUSED" not in line:
            assert time.monotonic() < deadline, "the loader never reached the kill point"
            line = child.stdout.readline()
            assert line or child.poll() is None, child.stderr.read()[-3000:]
        child.send_signal(signal.SIGKILL)  # no handler, no flush, no atexit: as a crash or an OOM kill
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL

    rerun = _load(killed_dir, xml)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    unchanged = json.loads(rerun.stdout.strip().splitlines()[-1])["unchanged"]
    assert 0 < unchanged < KILL_AFTER  # what reached a checkpoint was kept, the rest redone
    assert _snapshot(killed_dir) == expected
