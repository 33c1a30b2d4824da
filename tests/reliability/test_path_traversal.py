"""Path traversal against every API input that could name a file.

No route of the API takes a file name or path to open: study ids, entity ids and session ids are
keys into the store and SQLite tables, uploads are read in memory (their file name is ignored),
and the only files served are the bundled web pages and ``/static/`` (Starlette's StaticFiles).
This proves it: ``../../etc/passwd``, absolute paths, percent-encoded and double-encoded variants,
overlong UTF-8, backslashes and NUL bytes in each of those inputs are answered 4xx, nothing of
``/etc/passwd`` or of a secret file next to the data dir comes back, and Python opens no file
outside the data dir and the installed code while they are served (an audit hook watches
``open``). Requests are sent as raw ASGI calls, as uvicorn delivers them: the path
percent-decoded, its ``..`` segments untouched (an HTTP client would remove them).
"""

from __future__ import annotations

import io
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import anyio
import pydicom.data
import pytest
from fastapi.testclient import TestClient

from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container

pytestmark = pytest.mark.reliability

KEY = "path-traversal-test-key"
TRAVERSALS = [
    "../../../../../../etc/passwd",
    "..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "%252e%252e%252f%252e%252e%252fetc%252fpasswd",  # double-encoded
    "%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",  # overlong UTF-8 dots
    "..%5c..%5c..%5cetc%5cpasswd",  # backslashes
    "....//....//....//etc/passwd",
    "/etc/passwd",
    "%2fetc%2fpasswd",
    "file:///etc/passwd",
    "passwd%00.png",
    "..%00/..%00/etc/passwd",
    "IMG:../../../../etc/passwd",
    "a" * 5000,
]

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], str | bytes):
        _OPENED.append(args[0] if isinstance(args[0], str) else args[0].decode("utf-8", "replace"))


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one records only while a test asks it to


@pytest.fixture()
def opened() -> Iterator[list[str]]:
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A file beside the data dir that no request may read."""
    root = tmp_path_factory.mktemp("traversal")
    value = f"MEDKG-SECRET-{uuid.uuid4().hex}"
    (root / "secret.txt").write_text(value)
    return root / "secret.txt", value


@pytest.fixture(scope="module")
def client(secret: tuple[Path, str]) -> Iterator[TestClient]:
    data_dir = secret[0].parent / "data"
    settings = load_settings(
        data_dir=data_dir, api_keys=None, rate_limit_per_minute=0, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2
    )
    with TestClient(create_app(container=Container(settings)), base_url="http://127.0.0.1") as c:
        yield c


def raw_request(
    client: TestClient, method: str, raw_path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request as uvicorn would pass it: ``path`` percent-decoded, dot segments kept."""
    path, _, query = raw_path.partition("?")
    head = [(b"host", b"127.0.0.1"), *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(path),
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": head + [(b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    messages: list[dict[str, Any]] = []
    done: list[anyio.Event] = []

    async def call() -> None:
        done.append(anyio.Event())
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done[0].wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done[0].set()

        await client.app(scope, receive, send)

    assert client.portal is not None
    client.portal.call(call)
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


def assert_nothing_leaked(body: bytes, opened: list[str], secret: tuple[Path, str]) -> None:
    path, value = secret
    assert value.encode() not in body and b"root:x:0:0" not in body and b"/bin/" not in body
    for name in opened:
        resolved = str(Path(name).resolve()) if "\x00" not in name else name
        assert resolved != "/etc/passwd" and resolved != str(path) and "passwd" not in name, name
        assert not resolved.startswith(str(path.parent)) or resolved.startswith(str(path.parent / "data")), name


def _in_path(payload: str) -> str:
    return payload if "%" in payload else quote(payload, safe="/:")


@pytest.mark.parametrize(
    "template",
    [
        "/static/{p}",
        "/{p}",
        "/v1/entities/{p}",
        "/v1/entities/{p}/neighbours",
        "/v1/entities/{p}/neighbourhood",
        "/v1/sessions/{p}",
        "/v1/images/{p}/preview",
        "/v1/paths?source={p}&target={p}",
        "/v1/entities?q={p}",
    ],
)
def test_path_like_inputs_in_urls(
    client: TestClient, opened: list[str], secret: tuple[Path, str], template: str
) -> None:
    assert raw_request(client, "GET", "/static/medkg.css")[0] == 200
    assert any(name.endswith("medkg.css") for name in opened), "the audit hook sees the files served"
    payloads = [*TRAVERSALS, quote(str(secret[0]), safe="/"), "../" * 8 + str(secret[0]).lstrip("/")]
    for payload in payloads:
        url = template.format(p=_in_path(payload))
        status, body = raw_request(client, "GET", url)
        if "?" in template:  # a name search or an id pair: nothing found, or 422 for a bad value
            assert status in (200, 404, 422) and (status != 200 or body == b"[]"), (url, status, body[:200])
        else:
            assert 400 <= status < 500, (url, status, body[:200])
        assert_nothing_leaked(body, opened, secret)


def test_static_files_are_served_and_a_key_cannot_be_skipped_through_them(secret: tuple[Path, str]) -> None:
    """``/static/`` needs no key; a traversal out of it must neither read files nor reach the API."""
    settings = load_settings(
        data_dir=secret[0].parent / "keyed", api_keys=KEY, rate_limit_per_minute=0,
        ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2,
    )  # fmt: skip
    with TestClient(create_app(container=Container(settings)), base_url="http://127.0.0.1") as c:
        assert raw_request(c, "GET", "/static/medkg.css")[0] == 200
        assert raw_request(c, "GET", "/v1/stats")[0] == 401
        for escape in ("/static/../v1/stats", "/static/%2e%2e/v1/stats", "/static/..%2fv1%2fstats"):
            status, body = raw_request(c, "GET", escape)
            assert status == 404 and b"entities" not in body, (escape, status, body)


def test_study_ids_in_bodies_and_upload_file_names(
    client: TestClient, opened: list[str], secret: tuple[Path, str], tmp_path: Path
) -> None:
    ids = [*(unquote(p) for p in TRAVERSALS), str(secret[0]), "../" * 8 + str(secret[0]).lstrip("/")]
    for image_id in ids:
        for path, payload in (
            ("/v1/reports", {"image_id": image_id[:200], "indication": "chest pain"}),
            ("/v1/qa", {"question": "What does this study show?", "image_id": image_id[:200]}),
        ):
            r = client.post(path, json=payload)
            assert 400 <= r.status_code < 500, (path, image_id, r.status_code, r.text[:200])
            assert_nothing_leaked(r.content, opened, secret)
    dicom = Path(pydicom.data.get_testdata_file("CT_small.dcm")).read_bytes()
    before = set(Path("/").glob("*"))
    for name in [*ids, "..\\..\\evil.dcm", "../" * 8 + str(tmp_path / "written.dcm").lstrip("/")]:
        for content in (dicom, b"not a DICOM at all"):
            r = client.post("/v1/images/preview", files={"file": (name, io.BytesIO(content), "application/dicom")})
            expected = (200, 400) if content == dicom else (400, 415)  # 400: a file name the multipart parser refuses
            assert r.status_code in expected, (name, r.status_code, r.text[:200])
            assert_nothing_leaked(r.content, opened, secret)
    assert not (tmp_path / "written.dcm").exists() and set(Path("/").glob("*")) == before
    writes = [n for n in opened if "evil" in n or "written" in n or "passwd" in n]
    assert not writes, writes
