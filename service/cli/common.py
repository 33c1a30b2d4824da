"""What every ``medkg`` command shares: the consoles, the one-line error exit, the configured container
and JSON-or-table output."""

from __future__ import annotations

import errno
import json
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from kg.curie import CurieError
from kg.embedders import EmbedderError
from kg.graph.base import GraphStoreError
from kg.settings import Settings, SettingsError, load_settings
from kg.vector_index import VectorIndexError

if TYPE_CHECKING:  # the container pulls in the models' libraries: imported when a command needs it
    from service.container import Container

out = Console()
err = Console(stderr=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def settings() -> Settings:
    """The configured settings, or a one-line error naming the bad setting."""
    try:
        return load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from None


@contextmanager
def container(embeds: bool = False, writes: str | None = None) -> Iterator[Container]:
    """A container whose configuration and store errors end the command with a one-line message; for a
    command that ``embeds``, a line saying which embedding path it loads when the model loads (seconds);
    a command that ``writes`` (its name) is the data dir's one writer, or ends saying who is."""
    from service.container import Container
    from service.data_lock import DataDirBusy

    c = Container(settings())
    if writes:
        try:
            c.claim_writer(writes)
        except DataDirBusy as exc:
            c.close()
            raise fail(str(exc)) from None
    if embeds:  # said when the model loads, so bad input fails first with its one line
        c.text_embedder.on_load = lambda _: announce_embedding(c.settings)
    failure: Exception | None = None
    try:
        if writes:  # the writer's progress, for the servers on the data dir to export (/metrics)
            from kg.progress import PROGRESS_FILE, published

            with published(c.settings.data_dir / PROGRESS_FILE, writes):
                yield c
        else:
            yield c
    except (GraphStoreError, CurieError, ValueError, OSError, VectorIndexError, EmbedderError, sqlite3.Error) as exc:
        failure = exc
    finally:
        try:
            c.close()
        except GraphStoreError:
            pass
        except (OSError, ValueError, sqlite3.Error) as exc:  # closing writes too (a full disk fails it again)
            failure = failure or exc
    if failure is not None:
        raise fail(describe_failure(failure, c.settings.data_dir))


def describe_failure(exc: Exception, data_dir: Path) -> str:
    """One line for a command's failure; a full disk (SQLite's, Tantivy's or a file's ENOSPC) said as such,
    with what to do: nothing written before the last checkpoint is lost, and a re-run goes on from there."""
    text = str(exc)
    if getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in text or "No space left" in text:
        return (
            f"no space left on the device of {data_dir} ({text}): free space and run the command again; "
            "what was written before stays as it was, and a re-run goes on from the last checkpoint"
        )
    if isinstance(exc, sqlite3.Error):
        return f"a database file under {data_dir} failed: {text}"
    return text


def announce_embedding(configured: Settings) -> None:
    """Say which embedding path this CPU gets (kg.embedders.resolve_path) before a command loads the model."""
    from kg.embedders import resolve_path

    path = resolve_path(configured.embedding_backend, configured.embedding_dtype, configured.embedding_device)
    note = "; its graph is exported once, on first use" if path.graph else ""
    err.print(f"text embedding: {configured.embedding_model} on {path} ({path.reason}){note}", soft_wrap=True)


def emit(data: Any, as_json: bool, render: Callable[[Any], None] | None = None) -> None:
    if as_json or render is None:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        render(data)
