"""The FastAPI application: one container per process, clear errors for bad input and store faults."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kg.errors import InvalidInput, NotConfigured
from kg.graph.base import GraphStoreError, GraphStoreUnavailable
from kg.settings import GraphBackend, Settings, SettingsError, load_settings
from kg.vector_index import VectorIndexError
from service.api.metrics import install_metrics
from service.api.overload import install_overload_limit
from service.api.readiness import Readiness
from service.api.routes import differential, evaluation, graph, images, qa, reports, sessions, text
from service.api.security import announce_startup, error_response, install_security
from service.build import BackgroundBuild
from service.container import Container
from service.mcp_server import build_server as build_mcp_server
from service.mcp_server import http_endpoint, mcp_route
from service.qa.engine import UnknownSession
from service.qa.llm import LLMError
from service.web import install_web

log = logging.getLogger("medkg.api")

#: How long a stopping server waits for its build to reach a progress update (a batch of embeddings,
#: a checkpoint: seconds).
BUILD_STOP_WAIT_S = 120


def _build_stopped(build: BackgroundBuild | None) -> bool:
    """Stop a running build (at its next progress update); False when it did not stop in time, so the
    stores it writes must not be closed under it (the process exit does)."""
    if build is None or not build.running:
        return True
    log.warning("stopping the build at its next checkpoint; run the same command again to finish it")
    if build.stop(timeout_s=BUILD_STOP_WAIT_S):
        return True
    log.error("the build did not stop within %d s; leaving the stores to the process exit", BUILD_STOP_WAIT_S)
    return False


def create_app(
    settings: Settings | None = None,
    container: Container | None = None,
    warm: bool = False,
    build: BackgroundBuild | None = None,
) -> FastAPI:
    """Build the app. The graph store opens lazily, so the app starts even while Neo4j is down
    (requests then get 503 with ``Retry-After``). ``warm``: load the models and build the linker
    in the background at start-up (``medkg serve`` does), so ``/readyz`` turns ready by itself.
    ``build``: a build on ``container`` to run behind the server (the served demo), started with it and
    stopped at its next progress update when the server stops."""
    app_settings = settings or (container.settings if container is not None else None) or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        announce_startup(app_settings)
        # over Neo4j, `medkg serve` is a reader (any number of replicas; loads are `medkg ingest` processes)
        app.state.container = container or Container(
            app_settings, read_only=app_settings.graph_backend == GraphBackend.neo4j
        )
        app.state.readiness = Readiness(app.state.container, build)
        if warm:
            app.state.readiness.start()
        if build is not None:
            build.start()
        # a new MCP server each start (its session manager runs once); its answers counted as /v1/qa's are
        mcp = build_mcp_server(lambda: app.state.container, observe=app.state.metrics.observe_answer)
        app.state.mcp_endpoint = http_endpoint(mcp)
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            if _build_stopped(build):
                app.state.container.close()

    app = FastAPI(
        title="medkg",
        version="0.1.0",
        lifespan=lifespan,
        description="Biomedical knowledge-graph RAG: graph queries, evidence retrieval, cited answers.",
    )
    app.include_router(graph.router)
    app.include_router(text.router)
    app.include_router(differential.router)
    app.include_router(qa.router)
    app.include_router(sessions.router)
    app.include_router(reports.router)
    app.include_router(images.router)
    app.include_router(evaluation.router)
    install_web(app)
    # MCP over streamable HTTP (/mcp), behind the same security layers
    app.router.routes.append(mcp_route(lambda: app.state.mcp_endpoint))
    generate_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            differential.describe_body(generate_openapi())  # generate_openapi keeps it as app.openapi_schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/healthz", tags=["ops"])
    def healthz(request: Request) -> JSONResponse:
        c: Container = request.app.state.container
        try:  # a probe every few seconds: a count from the count store, never a scan of the edges (stats)
            entities = c.graph.entity_count()
        except GraphStoreUnavailable as exc:
            return error_response(503, str(exc), headers={"Retry-After": "5"})
        return JSONResponse({"status": "ok", "backend": c.graph.backend, "entities": entities})

    @app.get("/readyz", tags=["ops"])
    def readyz(request: Request) -> JSONResponse:
        """200 once the stores answer and the models and indexes are loaded ("ready"; "building" while a
        build behind the server still embeds, with its progress and ETA); 503 (with what is missing)
        while they load, which the first call starts."""
        report = request.app.state.readiness.report()
        return JSONResponse(report, status_code=200 if report["status"] in ("ready", "building") else 503)

    install_overload_limit(app, app_settings)  # first, so innermost: after keys, rate and size limits
    install_security(app, app_settings)
    install_metrics(app)  # last, so outermost: it counts the refusals of the layers inside it too

    @app.exception_handler(GraphStoreUnavailable)
    async def unavailable(_: Request, exc: GraphStoreUnavailable) -> JSONResponse:
        return error_response(503, str(exc), headers={"Retry-After": "5"})

    @app.exception_handler(GraphStoreError)
    async def store_error(request: Request, exc: GraphStoreError) -> JSONResponse:
        # the cause goes to the log (the client gets no internals); never the request body
        log.error("graph store error on %s %s: %s", request.method, request.url.path, exc)
        return error_response(500, "graph store error")

    @app.exception_handler(LLMError)
    async def llm_failed(request: Request, exc: LLMError) -> JSONResponse:
        request.app.state.metrics.llm_errors.labels(status=str(exc.status)).inc()
        return error_response(exc.status, str(exc))

    @app.exception_handler(UnknownSession)
    async def unknown_session(_: Request, exc: UnknownSession) -> JSONResponse:
        return error_response(
            404, f"no session {exc.args[0]!r} (unknown or expired): create one with POST /v1/sessions"
        )

    @app.exception_handler(SettingsError)
    async def misconfigured(request: Request, exc: SettingsError) -> JSONResponse:
        """The server's configuration (a damaged key file, a bad setting): not the client's input. The
        cause goes to the log; the client is not shown paths."""
        log.error("configuration error on %s %s: %s", request.method, request.url.path, exc)
        return error_response(503, "the server is misconfigured (see its log)")

    @app.exception_handler(InvalidInput)
    async def bad_input(_: Request, exc: InvalidInput) -> JSONResponse:
        return error_response(422, str(exc))

    @app.exception_handler(NotConfigured)
    async def not_configured(_: Request, exc: NotConfigured) -> JSONResponse:
        """A well-formed request this server is not set up for (mode "llm" without an LLM)."""
        return error_response(409, str(exc))

    @app.exception_handler(ValueError)
    async def bad_value(request: Request, exc: ValueError) -> JSONResponse:
        """Any other ValueError is the server's (a model it built, a library's complaint about data it
        produced): the client's input errors are ``InvalidInput``, or a 422 of the route itself."""
        log.error("unexpected %s on %s %s: %s", type(exc).__name__, request.method, request.url.path, exc)
        return error_response(500, "internal error")

    @app.exception_handler(VectorIndexError)
    async def index_unusable(_: Request, exc: VectorIndexError) -> JSONResponse:
        """A damaged index file: named, with how to rebuild it (also on /readyz), never a traceback."""
        return error_response(503, str(exc))

    return app
