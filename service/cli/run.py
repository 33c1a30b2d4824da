"""Running medkg: the demo (the main job end to end) and the HTTP API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import announce_embedding, container, err, out, settings


def demo(
    shared_data: Annotated[Path | None, typer.Option(help="The shared data folder (default: ../shared/data).")] = None,
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="Build the entity vector index.")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    serve_after: Annotated[bool, typer.Option("--serve/--no-serve", help="Serve the API afterwards.")] = True,
) -> None:
    """Load HPO (and, where present, Disease Ontology, PharmacotherapyDB and PubMed abstracts), index,
    answer three clinical questions with citations, then serve the API."""
    from service.cli.render import show_demo
    from service.demo import demo as run_demo
    from service.demo import find_shared_data

    announce_embedding(settings())
    with container() as c:
        for event in run_demo(c, find_shared_data(shared_data), embed=embed, progress=progress):
            show_demo(out, err, event)
    if serve_after:
        serve(host=None, port=None)


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default MEDKG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default MEDKG_API_PORT).")] = None,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs)."""
    import uvicorn

    from service.api.app import create_app

    configured = settings()
    configured = configured.model_copy(
        update={"api_host": host or configured.api_host, "api_port": port or configured.api_port}
    )
    root = f"http://{configured.api_host}:{configured.api_port}"
    announce_embedding(configured)
    out.print(f"serving on {root}: web pages at {root}/ (ask, /reports, /differential, /eval), API docs at /docs")
    # proxy_headers off: MEDKG_TRUSTED_PROXIES alone decides whose X-Forwarded-For is believed (uvicorn's own
    # default trusts any loopback peer's header and would hide the socket peer from service/api/security/proxies.py)
    uvicorn.run(
        create_app(configured, warm=True),
        host=configured.api_host,
        port=configured.api_port,
        log_level="info",
        proxy_headers=False,
    )


COMMANDS = [demo, serve]
