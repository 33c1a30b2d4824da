"""The FastAPI application: one container per process, clear errors for bad input and store faults."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kg.curie import CurieError
from kg.graph.base import GraphStoreError, GraphStoreUnavailable
from kg.settings import Settings
from service.api.routes import differential, graph, text
from service.container import Container


def create_app(settings: Settings | None = None, container: Container | None = None) -> FastAPI:
    """Build the app. The graph store opens lazily, so the app starts even while Neo4j is down
    (requests then get 503 with ``Retry-After``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.container = container or Container(settings)
        try:
            yield
        finally:
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

    @app.get("/healthz", tags=["ops"])
    def healthz(request: Request) -> JSONResponse:
        c: Container = request.app.state.container
        try:
            s = c.graph.stats()
        except GraphStoreUnavailable as exc:
            return JSONResponse(
                {"status": "unavailable", "detail": str(exc)}, status_code=503, headers={"Retry-After": "5"}
            )
        return JSONResponse({"status": "ok", "backend": s.backend, "entities": s.entities})

    @app.exception_handler(GraphStoreUnavailable)
    async def unavailable(_: Request, exc: GraphStoreUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(GraphStoreError)
    async def store_error(_: Request, exc: GraphStoreError) -> JSONResponse:
        return JSONResponse({"detail": "graph store error"}, status_code=500)

    @app.exception_handler(CurieError)
    async def bad_curie(_: Request, exc: CurieError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(ValueError)
    async def bad_value(_: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    return app
