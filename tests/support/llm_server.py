"""A local OpenAI-compatible HTTP server for tests: real HTTP, so the real ``openai`` client is used.

``POST /v1/chat/completions`` answers from a queue of :class:`Reply` objects (or, when the queue is
empty, from a handler callable given the request body); every request is recorded. A reply can be an
assistant message, an HTTP error, a raw (malformed) body, or arrive late (for client timeouts)::

    with FakeLLMServer() as llm:
        llm.enqueue(Reply.error(500), {"answer": 42})  # a dict is sent as the message's JSON content
        client = openai.OpenAI(base_url=llm.base_url, api_key="none")
        ...
        assert llm.requests[-1].body["model"] == "fake-model"

A request with ``"stream": true`` gets the completion as server-sent events, the way the OpenAI API
sends them (``Content-Type: text/event-stream``, ``Transfer-Encoding: chunked``): one
``data: {chat.completion.chunk}`` event per piece (the first delta carries the ``assistant`` role, then
the content in pieces of ``Reply.chunk_chars`` characters, ``Reply.chunk_delay_s`` apart, then an empty
delta with the ``finish_reason``; a usage chunk follows when ``stream_options.include_usage`` is set),
then ``data: [DONE]``. Error replies (status other than 200) and raw bodies are sent as they are, streamed
or not::

    llm.enqueue(Reply("Hello, world", chunk_chars=4, chunk_delay_s=0.01))
    stream = client.chat.completions.create(model="fake-model", messages=[...], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello, world"

``GET /v1/models`` lists ``model_ids``. With nothing queued and no handler the server answers HTTP
400 (which the client does not retry), so a test that makes one call too many fails loudly.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLMServer", "RecordedRequest", "Reply"]


@dataclass
class Reply:
    """One answer. ``content`` becomes the assistant message of a chat completion; ``body`` (bytes,
    text or a JSON-able object) replaces the whole response body instead."""

    content: str | None = None
    status: int = 200
    body: bytes | str | dict[str, Any] | None = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    chunk_chars: int = 8  # streamed replies: characters of content per chunk
    chunk_delay_s: float = 0.0  # streamed replies: pause between chunks

    @classmethod
    def json(cls, obj: Any, **kwargs: Any) -> Reply:
        return cls(content=json.dumps(obj), **kwargs)

    @classmethod
    def error(cls, status: int = 500, message: str = "fake server error", **kwargs: Any) -> Reply:
        # retry-after-ms keeps the client's retry backoff short in tests.
        headers = {"retry-after-ms": "10", **kwargs.pop("headers", {})}
        body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
        return cls(status=status, body=body, headers=headers, **kwargs)

    @classmethod
    def raw(cls, body: bytes | str, status: int = 200, **kwargs: Any) -> Reply:
        return cls(status=status, body=body.encode() if isinstance(body, str) else body, **kwargs)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body, or the raw text when it is not JSON

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []


Handler = Callable[[Any], "Reply | str | dict[str, Any]"]


def _as_reply(value: Reply | str | dict[str, Any]) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    return Reply.json(value)


class FakeLLMServer:
    def __init__(self, handler: Handler | None = None, model_ids: tuple[str, ...] = ("fake-model",)) -> None:
        self.handler = handler
        self.model_ids = model_ids
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def enqueue(self, *replies: Reply | str | dict[str, Any]) -> None:
        with self._lock:
            self._queue.extend(_as_reply(r) for r in replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- request handling --------------------------------------------------------------------
    def _next_reply(self, body: Any) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.handler is not None:
            return _as_reply(self.handler(body))
        return Reply.error(400, "fake LLM server: no reply queued for this request")

    def _completion(self, reply: Reply, body: Any) -> dict[str, Any]:
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        return {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content, "refusal": None},
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def _chunks(self, reply: Reply, body: Any) -> list[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a streamed reply."""
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        base = {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return {**base, "choices": [choice]}

        content = reply.content or ""
        size = max(1, reply.chunk_chars)
        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": content[i : i + size]}) for i in range(0, len(content), size)]
        chunks.append(chunk({}, reply.finish_reason))
        options = body.get("stream_options") if isinstance(body, dict) else None
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            chunks.append({**base, "choices": [], "usage": usage})
        return chunks

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _stream(self, reply: Reply, body: Any) -> None:
                """Send a reply as server-sent events, in HTTP/1.1 chunked framing."""

                def framed(data: bytes) -> bytes:
                    return f"{len(data):X}\r\n".encode() + data + b"\r\n"

                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Transfer-Encoding", "chunked")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for i, obj in enumerate(fake._chunks(reply, body)):
                        if i and reply.chunk_delay_s and fake._closing.wait(reply.chunk_delay_s):
                            self.close_connection = True
                            return
                        self.wfile.write(framed(b"data: " + json.dumps(obj).encode() + b"\n\n"))
                    # [DONE] and the zero-length last chunk go out together: the openai client stops
                    # reading at [DONE], and a terminator arriving after it would be reset on close.
                    self.wfile.write(framed(b"data: [DONE]\n\n") + b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up

            def _record(self, body: Any) -> None:
                with fake._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    fake.requests.append(RecordedRequest(self.command, self.path, headers, body))

            def do_GET(self) -> None:
                self._record(None)
                if self.path.rstrip("/") == "/v1/models":
                    data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in fake.model_ids]
                    self._send(200, json.dumps({"object": "list", "data": data}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                self._record(body)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                reply = fake._next_reply(body)
                if reply.delay_s and fake._closing.wait(reply.delay_s):
                    return
                if reply.body is None and reply.status == 200 and isinstance(body, dict) and body.get("stream"):
                    self._stream(reply, body)
                    return
                if reply.body is None:
                    payload = json.dumps(fake._completion(reply, body)).encode()
                elif isinstance(reply.body, bytes):
                    payload = reply.body
                elif isinstance(reply.body, str):
                    payload = reply.body.encode()
                else:
                    payload = json.dumps(reply.body).encode()
                self._send(reply.status, payload, reply.headers)

        return _Handler
