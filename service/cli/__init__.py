"""``medkg``: the command-line interface. Commands are thin: they read options, call the container or a
use case (service.ingestion, service.demo) and print; groups of higher layers (``medkg eval``) are
mounted from the ``medkg.cli`` entry-point group."""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from service.cli import clinical, data, graph, run
from service.cli.ingest import app as ingest_app

app = typer.Typer(
    name="medkg",
    help="medkg: biomedical knowledge-graph RAG (graph store, retrieval, cited answers).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
for module in (graph, clinical, data, run):
    for command in module.COMMANDS:
        app.command()(command)
app.add_typer(ingest_app, name="ingest")
for plugin in entry_points(group="medkg.cli"):  # eval/cli.py: `medkg eval ...`
    app.add_typer(plugin.load(), name=plugin.name)


def main() -> None:  # pragma: no cover - console entry point
    app()
