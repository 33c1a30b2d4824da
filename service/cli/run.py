"""Running medkg: the demo (the main job end to end) and the HTTP API."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kg.settings import Settings
from service.cli.common import announce_embedding, container, err, out, settings

if TYPE_CHECKING:  # imported by the commands that run, so `medkg --help` stays fast
    from service.build import BackgroundBuild
    from service.container import Container


def demo(
    shared_data: Annotated[Path | None, typer.Option(help="The shared data folder (default: ../shared/data).")] = None,
    embed: Annotated[
        bool,
        typer.Option(
            "--embed/--no-embed",
            help="Embed: the entity index, abstracts, reports, images (without: the graph alone, and the "
            "differential shown without its embedding view).",
        ),
    ] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    serve_after: Annotated[
        bool, typer.Option("--serve/--no-serve", help="Serve the API as soon as the graph is loaded.")
    ] = True,
) -> None:
    """Load HPO (and, where present, Disease Ontology, PharmacotherapyDB and PubMed abstracts), index,
    answer three clinical questions with citations, and serve the API. Served, the pages and the API
    answer once the graph is loaded, while the indexes are still built (progress and ETA on /readyz and
    the pages); stopped (Ctrl-C) and run again, it finishes the job."""
    from service.build import BackgroundBuild
    from service.cli.render import show_demo
    from service.demo import find_shared_data, graph_parts, index_parts

    announce_embedding(settings())
    shared = find_shared_data(shared_data)
    with container(writes="medkg demo") as c:
        for part in graph_parts(c, shared, progress=progress):
            for event in part.run():
                show_demo(out, err, event)
        parts = index_parts(c, shared, embed=embed, progress=progress)
        if not serve_after:
            for part in parts:
                for event in part.run():
                    show_demo(out, err, event)
            return
        build = BackgroundBuild(parts, on_event=lambda event: show_demo(out, err, event))
        _serve(settings(), container=c, build=build)
        build.stop()  # the server has stopped it, or waited for it in vain: the stores close after it


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default MEDKG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default MEDKG_API_PORT).")] = None,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs)."""
    configured = settings()
    configured = configured.model_copy(
        update={"api_host": host or configured.api_host, "api_port": port or configured.api_port}
    )
    announce_embedding(configured)
    _serve(configured)


def mcp(
    http: Annotated[
        bool, typer.Option("--http", help="Streamable HTTP at /mcp (the whole API beside it) instead of stdio.")
    ] = False,
    host: Annotated[str | None, typer.Option(help="With --http: bind address (default MEDKG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="With --http: port (default MEDKG_API_PORT).")] = None,
) -> None:
    """Serve medkg's tools to LLM agents over the Model Context Protocol: stdio (an agent starts this command),
    or streamable HTTP (--http; every `medkg serve` has it at /mcp, with the API's keys and limits)."""
    if http:
        out.print("MCP over streamable HTTP: /mcp of the server below")
        serve(host=host, port=port)
        return
    import logging
    import sys

    from kg.settings import GraphBackend
    from service.api.readiness import Readiness
    from service.container import Container
    from service.mcp_server import build_server

    # stdout carries the protocol: every log line goes to stderr
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    configured = settings()
    c = Container(configured, read_only=configured.graph_backend == GraphBackend.neo4j)
    Readiness(c, None).start()  # models and indexes load in the background, so the first call is quicker
    try:
        build_server(lambda: c).run()  # stdio, until the agent closes it
    finally:
        c.close()


def _serve(configured: Settings, container: Container | None = None, build: BackgroundBuild | None = None) -> None:
    import uvicorn

    from service.api.app import create_app

    root = f"http://{configured.api_host}:{configured.api_port}"
    out.print(f"serving on {root}: web pages at {root}/ (ask, /reports, /differential, /eval), API docs at /docs")
    if build is not None:
        out.print(f"still indexing behind the server: answers use what is indexed so far (progress on {root}/readyz)")
    # proxy_headers off: MEDKG_TRUSTED_PROXIES alone decides whose X-Forwarded-For is believed (uvicorn's own
    # default trusts any loopback peer's header and would hide the socket peer from service/api/security/proxies.py)
    uvicorn.run(
        create_app(configured, container=container, warm=True, build=build),
        host=configured.api_host,
        port=configured.api_port,
        log_level="info",
        proxy_headers=False,
    )


COMMANDS = [demo, serve, mcp]
