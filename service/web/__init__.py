"""The clinician web pages, served by the API app: ``/`` (ask), ``/reports``, ``/differential`` and ``/eval``.
Static files only (cytoscape.js bundled under ``static/vendor``), so the pages work offline; they call the
JSON API with the API key the user enters (kept in the browser's session storage).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["PAGES", "STATIC_PREFIX", "install_web"]

HERE = Path(__file__).resolve().parent
PAGES = {"/": "index.html", "/reports": "reports.html", "/differential": "differential.html", "/eval": "eval.html"}
STATIC_PREFIX = "/static/"
# Scripts, images and requests from this origin only; styles may also be inline (cytoscape.js sizes its
# canvas with style attributes).
CSP = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _page(file: str):  # noqa: ANN202 - a route handler
    path = HERE / "pages" / file

    def page() -> FileResponse:
        return FileResponse(path, media_type="text/html; charset=utf-8", headers=HEADERS)

    return page


def install_web(app: FastAPI) -> None:
    router = APIRouter(include_in_schema=False)
    for route, file in PAGES.items():
        router.add_api_route(route, _page(file), methods=["GET"], name=f"page:{file}")
    app.include_router(router)
    app.mount(STATIC_PREFIX.rstrip("/"), StaticFiles(directory=HERE / "static"), name="static")
