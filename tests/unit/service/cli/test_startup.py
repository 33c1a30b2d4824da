"""`medkg --help` and the parsing of every command must not wait for the models' libraries: the CLI
imports them only when a command runs (issue: a fast CLI)."""

from __future__ import annotations

import json
import subprocess
import sys

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
