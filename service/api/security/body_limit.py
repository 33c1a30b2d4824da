"""The request body limits: ``MEDKG_MAX_REQUEST_BYTES``, and ``MEDKG_MAX_UPLOAD_BYTES`` for a study
upload to the routes that take one (413 past either)."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.security.errors import error_response
from service.api.security.paths import UPLOAD_PATHS, request_path

__all__ = ["BodySizeLimitMiddleware"]


class _BodyTooLarge(Exception):
    pass


class BodySizeLimitMiddleware:
    """413 for a body over ``max_bytes``: at once from ``Content-Length``, else while a chunked body
    is received. Pure ASGI, so streaming responses are untouched."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_upload_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes or max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        # File uploads (multipart: a DICOM study) to the routes that take one have a limit of their own,
        # MEDKG_MAX_UPLOAD_BYTES (any other route keeps the request limit, whatever its content type).
        upload = request_path(scope) in UPLOAD_PATHS and headers.get("content-type", "").lower().startswith(
            "multipart/form-data"
        )
        limit = self.max_upload_bytes if upload else self.max_bytes
        setting = "MEDKG_MAX_UPLOAD_BYTES" if upload else "MEDKG_MAX_REQUEST_BYTES"

        def too_large() -> JSONResponse:
            return error_response(413, f"request body over {limit} bytes ({setting})")

        length = headers.get("content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await error_response(400, "invalid Content-Length header")(scope, receive, send)
                return
            if declared > limit:
                await too_large()(scope, receive, send)
                return

        received = 0
        exceeded = False
        started = False
        replaced = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            if exceeded:
                raise _BodyTooLarge
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started, replaced
            if exceeded and not started:
                # Whatever the app made of the cut-off body (often a 400), the answer is 413.
                if not replaced:
                    replaced = True
                    await too_large()(scope, receive, send)
                return
            if replaced:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _BodyTooLarge:
            if not started and not replaced:
                replaced = True
                await too_large()(scope, receive, send)
            elif not replaced:
                raise
