"""`medkg ask` as a user runs it: a data dir built with the QA fixture graph, the real CLI process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kg.settings import load_settings
from service.container import Container
from tests.support.cli import run
from tests.support.qa_store import build_qa_store


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("ask") / "data"
    with Container(load_settings(data_dir=data, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2)) as c:
        build_qa_store(c)
    return data


def test_ask_prints_a_cited_answer(data_dir: Path, tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(data_dir), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    r = run(["ask", "Which phenotypes are characteristic of Marfan syndrome?"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = " ".join(r.stdout.split())
    assert "Arachnodactyly [KG:" in out and "https://pubmed.ncbi.nlm.nih.gov/20591885/" in out
    assert re.search(r"\d+ ms \(link \d+", out)

    r = run(["ask", "What drugs treat epilepsy?", "--json"], env, tmp_path)
    data = json.loads(r.stdout)
    assert "KG:DRUGBANK:DB00313-TREATS-DOID:1826" in {c["id"] for c in data["citations"]}

    r = run(["ask", "What is the capital of France?", "--json"], env, tmp_path)
    assert json.loads(r.stdout)["insufficient_evidence"] is True


def test_ask_in_a_session(data_dir: Path, tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(data_dir), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    r = run(["ask", "Which phenotypes are characteristic of Marfan syndrome?", "--session", "new"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    session = re.search(r"session: (\S+)", r.stderr).group(1)  # type: ignore[union-attr]
    r = run(["ask", "and what about its treatment?", "--session", session, "--json"], env, tmp_path)
    data = json.loads(r.stdout)
    assert "Marfan syndrome" in data["expanded_query"] and data["session_id"] == session
    r = run(["ask", "anything", "--session", "AAAAAAAAAAAAAAAAAAAAAAAA"], env, tmp_path)
    assert r.returncode == 2 and "unknown or expired" in r.stderr and "Traceback" not in r.stderr
    r = run(["ask", "anything", "--mode", "llm"], env, tmp_path)
    assert r.returncode == 2 and "MEDKG_LLM_BASE_URL" in r.stderr
