"""The ``medkg`` console script, run as a user runs it (a subprocess with its own environment)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.conftest import require_neo4j
from tests.support.cli import run
from tests.support.live_server import medkg_serve


def test_help_lists_commands(tmp_path: Path) -> None:
    r = run(["--help"], {}, tmp_path)
    assert r.returncode == 0
    for command in ("stats", "config", "entity", "find", "neighbours", "paths"):
        assert command in r.stdout


def test_stats_on_the_embedded_default(tmp_path: Path) -> None:
    r = run(["stats", "--json"], {"MEDKG_DATA_DIR": str(tmp_path / "data")}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["backend"] == "ladybug"
    assert (tmp_path / "data" / "graph.lbug").exists()
    r = run(["stats"], {"MEDKG_DATA_DIR": str(tmp_path / "data")}, tmp_path)
    assert "entities: 0" in r.stdout


def test_bad_backend_exits_nonzero_naming_the_setting(tmp_path: Path) -> None:
    r = run(["stats"], {"MEDKG_GRAPH_BACKEND": "mongodb"}, tmp_path)
    assert r.returncode == 2
    assert "MEDKG_GRAPH_BACKEND" in r.stderr and "ladybug" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_neo4j_down_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"bolt://127.0.0.1:{port}"
    r = run(
        ["stats"],
        {"MEDKG_GRAPH_BACKEND": "neo4j", "MEDKG_NEO4J_URI": uri, "MEDKG_NEO4J_CONNECT_TIMEOUT_S": "3"},
        tmp_path,
    )
    assert r.returncode == 2
    assert uri in r.stderr and "cannot connect" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.neo4j
def test_neo4j_wrong_password_names_the_uri(tmp_path: Path) -> None:
    neo = require_neo4j()
    r = run(
        ["stats"],
        {"MEDKG_GRAPH_BACKEND": "neo4j", "MEDKG_NEO4J_URI": neo["uri"], "MEDKG_NEO4J_PASSWORD": "definitely-wrong"},
        tmp_path,
    )
    assert r.returncode == 2
    assert neo["uri"] in r.stderr and "credentials" in r.stderr
    assert "definitely-wrong" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.neo4j
def test_stats_and_paths_on_neo4j(tmp_path: Path, _neo4j_store) -> None:  # noqa: ANN001
    from kg.model import Entity, Relation

    neo = require_neo4j()
    _neo4j_store.clear()
    _neo4j_store.upsert_entities(
        [
            Entity(id="DB00945", name="Aspirin", category="Drug"),
            Entity(id="DOID:0050423", name="Kawasaki disease", category="Disease"),
        ]
    )
    _neo4j_store.upsert_relations([Relation(subject="DB00945", type="TREATS", object="DOID:0050423")])
    env = {
        "MEDKG_GRAPH_BACKEND": "neo4j",
        "MEDKG_NEO4J_URI": neo["uri"],
        "MEDKG_NEO4J_USER": neo["user"],
        "MEDKG_NEO4J_PASSWORD": neo["password"],
        "MEDKG_NEO4J_DATABASE": neo["database"],
    }
    try:
        r = run(["stats", "--json"], env, tmp_path)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert (data["backend"], data["entities"], data["relations"]) == ("neo4j", 2, 1)
        r = run(["paths", "Compound::DB00945", "Disease::DOID:0050423"], env, tmp_path)
        assert r.returncode == 0, r.stderr
        assert "Aspirin" in r.stdout and "-[TREATS]->" in r.stdout and "Kawasaki disease" in r.stdout
    finally:
        _neo4j_store.clear()


def test_entity_lookup_errors(tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    r = run(["entity", "HP:0001250"], env, tmp_path)
    assert r.returncode == 1 and "no entity" in r.stderr
    r = run(["entity", "0001250"], env, tmp_path)
    assert r.returncode == 2 and "has no prefix" in r.stderr and "Traceback" not in r.stderr


def test_config_masks_secrets(tmp_path: Path) -> None:
    r = run(["config"], {"MEDKG_NEO4J_PASSWORD": "hunter2", "MEDKG_LLM_API_KEY": "sk-abc"}, tmp_path)
    assert r.returncode == 0
    assert "hunter2" not in r.stdout and "sk-abc" not in r.stdout
    assert json.loads(r.stdout)["MEDKG_GRAPH_BACKEND"] == "ladybug"


def test_eval_output_folders_are_created_or_refused_in_one_line(tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    runs = tmp_path / "runs"
    runs.mkdir()
    nested = tmp_path / "not" / "yet" / "report.html"
    r = run(["eval", "plot", str(runs), "--out", str(nested)], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert nested.is_file() and f"wrote {nested}" in r.stdout
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("{}\n")
    for args in (
        ["eval", "plot", str(runs), "--out", str(blocker / "report.html")],
        ["eval", "pubmedqa-retrieval", "--out", str(blocker / "runs")],
        ["eval", "phenopackets", str(cases), "--out", str(blocker / "runs")],
    ):
        r = run(args, env, tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert str(blocker) in r.stderr and "Traceback" not in r.stderr + r.stdout


def test_serve_leaves_forwarded_headers_to_the_trusted_proxies_setting(tmp_path: Path) -> None:
    """``medkg serve`` as deployed: uvicorn's own proxy-header handling (which believes any loopback
    peer's ``X-Forwarded-For``) is off, so the app sees the socket peer and names it when it refuses a
    forwarded request from a peer that is not in ``MEDKG_TRUSTED_PROXIES``."""
    import httpx

    base = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    env = {**base, "MEDKG_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    with medkg_serve(env, tmp_path / "serve.log", cwd=tmp_path, probe="/healthz") as url:
        assert httpx.get(f"{url}/v1/stats", timeout=30).status_code == 200  # a loopback client, no header
        forwarded = httpx.get(f"{url}/v1/stats", headers={"X-Forwarded-For": "203.0.113.9"}, timeout=30)
        assert forwarded.status_code == 403
        body = forwarded.text
        assert "by 127.0.0.1, which is not a trusted proxy" in body and "203.0.113.9" not in body
