"""The API's security and error layer end to end: keys, open mode, size and rate limits, CORS, error shape."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from kg.settings import load_settings
from service.api.app import create_app
from service.api.security import RateLimiter, is_loopback, startup_warning
from service.container import Container

pytestmark = pytest.mark.reliability

KEY = "medkg-test-key-5f1c2a"
OTHER_KEY = "medkg-other-key-9b3d"
LOCAL = ("127.0.0.1", 50000)
REMOTE = ("203.0.113.7", 50000)


def make_app(tmp_path: Path, **overrides: Any) -> FastAPI:
    options: dict[str, Any] = {"api_keys": None, "cors_origins": ""} | overrides
    settings = load_settings(data_dir=tmp_path, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2, **options)
    return create_app(container=Container(settings))


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path, api_keys=f"{KEY},{OTHER_KEY}"), client=REMOTE) as c:
        yield c


def assert_error(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code and body["status"] == status and "detail" in body
    return body


def test_a_key_is_required(keyed: TestClient) -> None:
    missing = keyed.get("/v1/stats")
    assert_error(missing, 401, "unauthorized")
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert "X-API-Key" in missing.json()["detail"]
    for headers in ({"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": f"Basic {KEY}"}):
        r = keyed.get("/v1/stats", headers=headers)
        assert_error(r, 401, "unauthorized")
        assert r.headers["WWW-Authenticate"] == "Bearer"
    assert keyed.get("/v1/stats", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert keyed.get("/v1/stats", headers={"authorization": f"bearer {OTHER_KEY}"}).status_code == 200
    assert keyed.get("/v1/stats", headers={"X-API-Key": KEY}).status_code == 200


def test_health_and_docs_need_no_key(keyed: TestClient) -> None:
    assert keyed.get("/healthz").status_code == 200
    spec = keyed.get("/openapi.json")
    assert spec.status_code == 200
    assert set(spec.json()["components"]["securitySchemes"]) == {"bearerKey", "headerKey"}
    assert keyed.get("/docs").status_code == 200


def test_a_key_configured_as_its_digest(tmp_path: Path) -> None:
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    with TestClient(make_app(tmp_path, api_keys=f"sha256:{digest.upper()}"), client=REMOTE) as c:
        assert c.get("/v1/stats", headers={"X-API-Key": KEY}).status_code == 200
        assert c.get("/v1/stats", headers={"X-API-Key": f"sha256:{digest}"}).status_code == 401
        assert c.get("/v1/stats", headers={"X-API-Key": digest}).status_code == 401


def _everything_in(obj: Any, seen: set[int] | None = None) -> Iterator[str]:
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield repr(obj)
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _everything_in(k, seen)
            yield from _everything_in(v, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _everything_in(v, seen)
    elif hasattr(obj, "__dict__"):
        yield from _everything_in(vars(obj), seen)


def test_only_digests_are_kept(tmp_path: Path) -> None:
    app = make_app(tmp_path, api_keys=KEY)
    state = app.state.security
    kept = list(_everything_in(state))
    assert not any(KEY in text for text in kept)
    assert state.keys.digests == (hashlib.sha256(KEY.encode()).hexdigest(),)
    assert KEY not in repr(state) and KEY not in repr(state.keys)


def test_open_mode_serves_loopback_only(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    with TestClient(app, client=LOCAL, base_url="http://127.0.0.1:8000") as local:
        assert local.get("/v1/stats").status_code == 200
    with TestClient(app, client=("::1", 50000), base_url="http://[::1]:8000") as local6:
        assert local6.get("/v1/stats").status_code == 200
    with TestClient(app, client=REMOTE) as remote:
        r = remote.get("/v1/stats")
        assert_error(r, 403, "forbidden")
        assert "MEDKG_API_KEYS" in r.json()["detail"]
        assert remote.get("/v1/stats", headers={"X-API-Key": "anything"}).status_code == 403
        assert remote.get("/healthz").status_code == 200
    # TestClient's default client host "testclient" counts as local (no real server reports it).
    with TestClient(app) as default:
        assert default.get("/v1/stats").status_code == 200


def test_open_mode_refuses_pages_of_other_sites(tmp_path: Path) -> None:
    """Without keys, a loopback client is trusted: a web page of another site must not borrow that
    trust by DNS rebinding (its own host name resolved to 127.0.0.1) or by posting across sites."""
    app = make_app(tmp_path)
    with TestClient(app, client=LOCAL, base_url="http://localhost:8000") as local:
        assert local.get("/v1/stats").status_code == 200
        page = {"Origin": "http://localhost:8000"}  # this machine's own pages
        assert local.post("/v1/sessions", headers=page).status_code == 201
        rebound = local.get("/v1/stats", headers={"Host": "attacker.example:8000"})
        assert_error(rebound, 403, "forbidden")
        assert "attacker.example" in rebound.json()["detail"]
        crossed = local.post("/v1/sessions", headers={"Origin": "https://evil.example"})
        assert_error(crossed, 403, "forbidden")
        assert local.get("/", headers={"Host": "attacker.example"}).status_code == 200  # no data in a page


def test_pages_and_static_files_cost_no_bucket_and_bodies_keep_their_limit(tmp_path: Path) -> None:
    app = make_app(tmp_path, rate_limit_per_minute=3, max_request_bytes=2000, max_upload_bytes=100_000)
    with TestClient(app) as client:
        for _ in range(10):
            assert client.get("/static/medkg.js").status_code == 200 and client.get("/").status_code == 200
        assert client.get("/v1/stats").status_code == 200  # the bucket is untouched
        body = b"--x\r\n" + b"a" * 5000 + b"\r\n--x--\r\n"  # multipart to a route that takes no upload
        r = client.post("/v1/search", content=body, headers={"Content-Type": "multipart/form-data; boundary=x"})
        assert r.status_code == 413 and "MEDKG_MAX_REQUEST_BYTES" in r.text
        bad = client.post("/v1/search", json={"q": "x" * 600, "k": "many"})
        assert bad.status_code == 422 and "x" * 50 not in bad.text  # where and what, never the value sent


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "10.0.0.1", "203.0.113.7", "::", "example.org", "", None):
        assert not is_loopback(host), host


def test_open_mode_is_announced_at_startup(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.WARNING, logger="medkg.api"):
        with TestClient(make_app(tmp_path, api_host="0.0.0.0"), client=LOCAL):
            pass
    warnings = [r for r in caplog.records if r.name == "medkg.api" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "MEDKG_API_KEYS" in warnings[0].getMessage() and "0.0.0.0" in warnings[0].getMessage()
    err = capsys.readouterr().err
    assert "MEDKG_API_KEYS is not set" in err and "0.0.0.0" in err


def test_startup_warning_text() -> None:
    local = startup_warning(load_settings(api_keys=None, api_host="127.0.0.1"))
    assert local is not None and "loopback" in local and "binds to" not in local
    assert startup_warning(load_settings(api_keys=KEY, api_host="0.0.0.0")) is None


def test_oversize_bodies_get_413(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path, api_keys=KEY, max_request_bytes=1024), client=REMOTE) as c:
        auth = {"X-API-Key": KEY, "content-type": "application/json"}
        r = c.post("/v1/differential", content=b"x" * 2000, headers=auth)
        assert_error(r, 413, "payload_too_large")
        assert "1024" in r.json()["detail"]

        sent: list[int] = []

        def chunks(n: int) -> Iterator[bytes]:
            for _ in range(n):
                sent.append(1)
                yield b" " * 512

        r = c.post("/v1/differential", content=chunks(4), headers=auth)
        assert_error(r, 413, "payload_too_large")
        # Under the limit, a chunked body reaches the app (and here fails as JSON).
        r = c.post("/v1/differential", content=chunks(1), headers=auth)
        assert_error(r, 422, "validation_error")


def test_malformed_json_and_invalid_fields_get_structured_422(keyed: TestClient) -> None:
    auth = {"X-API-Key": KEY}
    r = keyed.post("/v1/differential", content=b"{not json", headers=auth | {"content-type": "application/json"})
    body = assert_error(r, 422, "validation_error")
    assert isinstance(body["detail"], str) and "not valid JSON" in body["detail"]
    r = keyed.post("/v1/differential", json={"top_k": 0}, headers=auth)
    body = assert_error(r, 422, "validation_error")
    assert isinstance(body["detail"], list) and body["detail"][0]["loc"][-1] == "top_k"
    r = keyed.get("/v1/entities/nonsense", headers=auth)  # not a CURIE: no entity has it
    assert "has no prefix" in assert_error(r, 404, "not_found")["detail"]


def test_other_errors_share_the_shape(tmp_path: Path) -> None:
    app = make_app(tmp_path, api_keys=KEY)

    def boom() -> None:
        raise RuntimeError("password=hunter2 in the stack")

    app.add_api_route("/v1/boom", boom)
    with TestClient(app, client=REMOTE, raise_server_exceptions=False) as c:
        auth = {"X-API-Key": KEY}
        assert_error(c.get("/v1/no-such-route", headers=auth), 404, "not_found")
        assert_error(c.delete("/v1/stats", headers=auth), 405, "method_not_allowed")
        r = c.get("/v1/boom", headers=auth)
        body = assert_error(r, 500, "internal_error")
        assert body["detail"] == "internal error" and "hunter2" not in r.text


def test_rate_limit_per_caller(tmp_path: Path) -> None:
    app = make_app(tmp_path, api_keys=f"{KEY},{OTHER_KEY}", rate_limit_per_minute=3)
    with TestClient(app, client=REMOTE) as c:
        first = {"X-API-Key": KEY}
        assert [c.get("/v1/stats", headers=first).status_code for _ in range(3)] == [200, 200, 200]
        r = c.get("/v1/stats", headers=first)
        assert_error(r, 429, "rate_limited")
        assert 1 <= int(r.headers["Retry-After"]) <= 20
        assert c.get("/v1/stats", headers={"X-API-Key": OTHER_KEY}).status_code == 200  # its own bucket
        assert all(c.get("/healthz").status_code == 200 for _ in range(5))  # probes are exempt
        # Failed attempts draw on the client address's bucket, so key guessing is slowed.
        wrong = {"X-API-Key": "guess"}
        assert [c.get("/v1/stats", headers=wrong).status_code for _ in range(4)] == [401, 401, 401, 429]


def test_token_bucket_refills_continuously() -> None:
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])
    assert all(limiter.acquire("a") == 0.0 for _ in range(60))
    assert limiter.acquire("a") == pytest.approx(1.0)
    assert limiter.acquire("b") == 0.0
    now[0] += 0.5
    assert limiter.acquire("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert limiter.acquire("a") == 0.0
    assert RateLimiter(0).acquire("a") == 0.0


def test_cors_only_when_configured(tmp_path: Path) -> None:
    origin = "https://ui.example"
    preflight = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    with TestClient(make_app(tmp_path / "a", api_keys=KEY, cors_origins=origin), client=REMOTE) as c:
        r = c.options("/v1/differential", headers=preflight)
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == origin
        assert "POST" in r.headers["access-control-allow-methods"]
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        simple = c.get("/v1/stats", headers={"Origin": origin, "X-API-Key": KEY})
        assert simple.headers["access-control-allow-origin"] == origin
        refused = c.get("/v1/stats", headers={"Origin": origin})
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == origin
        other = c.get("/v1/stats", headers={"Origin": "https://evil.example", "X-API-Key": KEY})
        assert "access-control-allow-origin" not in other.headers
    with TestClient(make_app(tmp_path / "b", api_keys=KEY), client=REMOTE) as c:
        r = c.options("/v1/differential", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = c.get("/v1/stats", headers={"Origin": origin, "X-API-Key": KEY})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_body_limit_counts_chunks_as_they_arrive_and_leaves_streams_alone() -> None:
    import asyncio

    from starlette.requests import Request
    from starlette.responses import StreamingResponse

    from service.api.security import BodySizeLimitMiddleware

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await Request(scope, receive).body()

        async def parts() -> Any:
            for n in range(3):
                yield f"part{n};".encode()

        await StreamingResponse(parts())(scope, receive, send)

    def run(chunks: list[bytes]) -> tuple[list[dict[str, Any]], int]:
        pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
        taken = 0
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            nonlocal taken
            if not pending:  # like a server: nothing more until the client disconnects
                await asyncio.Event().wait()
            taken += 1
            return pending.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
        asyncio.run(BodySizeLimitMiddleware(inner, max_bytes=1024)(scope, receive, send))
        return sent, taken

    sent, taken = run([b"x" * 600] * 5)
    assert sent[0]["status"] == 413 and taken == 2  # stopped reading at the chunk that passed the limit
    assert b'"payload_too_large"' in sent[1]["body"]
    sent, _ = run([b"x" * 600])
    assert sent[0]["status"] == 200
    assert [m["body"] for m in sent[1:] if m.get("body")] == [b"part0;", b"part1;", b"part2;"]


# --- reverse proxies: MEDKG_TRUSTED_PROXIES, X-Forwarded-For and Forwarded ----------------------------

PROXY = ("127.0.0.1", 40000)  # nginx on this machine, proxying to 127.0.0.1:8000
LOCAL_URL = "http://127.0.0.1:8000"


def with_whoami(app: FastAPI) -> FastAPI:
    """A route that shows what the app (and so its logs) sees as the client and the caller."""

    def whoami(request: Request) -> dict[str, Any]:
        return {"client": request.client.host if request.client else None, "caller": request.state.api_caller}

    app.add_api_route("/v1/whoami", whoami)
    return app


def test_open_mode_refuses_forwarded_requests_from_a_peer_that_is_not_a_trusted_proxy(tmp_path: Path) -> None:
    """A proxy on this machine makes every client look local: without keys and without MEDKG_TRUSTED_PROXIES,
    a request that says it was forwarded for someone is refused, whatever address it names."""
    app = make_app(tmp_path)
    with TestClient(app, client=PROXY, base_url=LOCAL_URL) as c:
        assert c.get("/v1/stats").status_code == 200  # local use without such headers is unaffected
        for headers in (
            {"X-Forwarded-For": "203.0.113.7"},
            {"X-Forwarded-For": "127.0.0.1"},  # a remote client behind a pass-through proxy can claim this
            {"x-forwarded-for": "::1"},
            {"Forwarded": "for=203.0.113.7;proto=https"},
            {"Forwarded": "for=127.0.0.1"},
            {"X-Forwarded-For": ""},
            {"X-Forwarded-For": "garbage"},
        ):
            r = c.get("/v1/stats", headers=headers)
            body = assert_error(r, 403, "forbidden")
            assert "MEDKG_API_KEYS" in body["detail"] and "MEDKG_TRUSTED_PROXIES" in body["detail"], headers
            assert c.post("/v1/sessions", headers=headers).status_code == 403
        assert c.get("/healthz", headers={"X-Forwarded-For": "203.0.113.7"}).status_code == 200  # probes stay public
    with TestClient(app, base_url=LOCAL_URL) as default:  # TestClient's own "testclient" peer: the same rule
        assert default.get("/v1/stats", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 403


def test_a_trusted_proxy_names_the_client_in_open_mode(tmp_path: Path) -> None:
    app = make_app(tmp_path, trusted_proxies="127.0.0.1")
    with TestClient(app, client=PROXY, base_url=LOCAL_URL) as c:
        # nginx: proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for (appends the address it saw)
        remote = c.get("/v1/stats", headers={"X-Forwarded-For": "203.0.113.7"})
        body = assert_error(remote, 403, "forbidden")
        assert "loopback" in body["detail"] and "MEDKG_API_KEYS" in body["detail"]
        assert c.get("/v1/stats", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 200  # a local user
        # a remote client that sends its own header: the proxy appends the address it saw, the right-most counts
        assert c.get("/v1/stats", headers={"X-Forwarded-For": "127.0.0.1, 203.0.113.7"}).status_code == 403
        assert c.get("/v1/stats", headers={"Forwarded": "for=203.0.113.7;proto=https"}).status_code == 403
        assert c.get("/v1/stats", headers={"Forwarded": 'for="[2001:db8:cafe::17]:4711"'}).status_code == 403
        assert c.get("/v1/stats", headers={"Forwarded": "for=127.0.0.1;proto=http"}).status_code == 200
        assert c.get("/v1/stats", headers={"Forwarded": 'For="[::1]:4711"'}).status_code == 200
        # A trusted proxy that names no client: it is not the client; refuse rather than serve the world.
        unnamed = c.get("/v1/stats")
        assert_error(unnamed, 403, "forbidden")
        assert "X-Forwarded-For" in unnamed.json()["detail"]
        # Malformed or unknown addresses: the client is unknown, never loopback, never a crash.
        for headers in (
            {"X-Forwarded-For": ""},
            {"X-Forwarded-For": "localhost"},
            {"X-Forwarded-For": "127.0.0.1, "},
            {"X-Forwarded-For": "127.0.0.1,,"},
            {"X-Forwarded-For": "999.0.0.1"},
            {"X-Forwarded-For": "127.0.0.1:notaport"},
            {"X-Forwarded-For": "127.0.0.1:" + "9" * 5000},  # int() of it would raise
            {"X-Forwarded-For": "[::1"},
            {"X-Forwarded-For": "127.0.0.1/8"},
            {"X-Forwarded-For": "unknown"},
            {"X-Forwarded-For": "\u00e9\u00e9".encode()},  # not latin-1 text
            {"Forwarded": "for="},
            {"Forwarded": "for=unknown"},
            {"Forwarded": "for=_hidden"},
            {"Forwarded": "proto=https"},
            {"Forwarded": 'for="[::1'},
            {"Forwarded": 'for="127.0.0.1'},
            {"Forwarded": "garbage"},
            {"Forwarded": ";;,,"},
            # both headers, naming different clients: one of them came from the client itself
            {"X-Forwarded-For": "127.0.0.1", "Forwarded": "for=203.0.113.7"},
            {"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=127.0.0.1"},
        ):
            r = c.get("/v1/stats", headers=headers)
            assert_error(r, 403, "forbidden")
        both = {"X-Forwarded-For": "127.0.0.1", "Forwarded": "for=127.0.0.1"}
        assert c.get("/v1/stats", headers=both).status_code == 200
    # A peer that is not a trusted proxy is its own client, whatever it says.
    with TestClient(app, client=REMOTE) as c:
        assert c.get("/v1/stats", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 403


def test_a_chain_of_trusted_proxies(tmp_path: Path) -> None:
    """The client is the right-most address that is not a trusted proxy; malformed entries left of it
    do not matter (a client can write anything there)."""
    app = with_whoami(make_app(tmp_path, trusted_proxies="127.0.0.1, 10.0.0.0/8"))
    with TestClient(app, client=PROXY, base_url=LOCAL_URL) as c:
        r = c.get("/v1/whoami", headers={"X-Forwarded-For": "::1, 10.1.2.3"})
        assert r.status_code == 200 and r.json() == {"client": "::1", "caller": "host:::1"}
        r = c.get("/v1/whoami", headers={"X-Forwarded-For": "garbage, 127.0.0.1, ::1, 10.1.2.3"})
        assert r.status_code == 200 and r.json()["client"] == "::1"
        assert c.get("/v1/whoami", headers={"X-Forwarded-For": "::1, 203.0.113.7, 10.1.2.3"}).status_code == 403
        # every hop a trusted proxy: the left-most is the client (a request of a proxy host itself)
        r = c.get("/v1/whoami", headers={"X-Forwarded-For": "127.0.0.1, 10.9.9.9"})
        assert r.status_code == 200 and r.json()["client"] == "127.0.0.1"
        # two header lines are one list, in order
        r = c.get("/v1/whoami", headers=[("X-Forwarded-For", "::1"), ("X-Forwarded-For", "10.1.2.3")])
        assert r.status_code == 200 and r.json()["client"] == "::1"
    with TestClient(app, client=("10.4.4.4", 1234), base_url=LOCAL_URL) as c:
        r = c.get("/v1/whoami", headers={"Forwarded": 'for=127.0.0.1, for="10.0.0.7";by=10.4.4.4'})
        assert r.status_code == 200 and r.json()["client"] == "127.0.0.1"


def test_rate_buckets_and_the_app_see_the_client_a_trusted_proxy_names(tmp_path: Path) -> None:
    """Behind a proxy every request comes from the proxy: the bucket (and request.client, which the
    access log and the app see) must be the client it forwards for, not one bucket for everyone."""
    app = with_whoami(make_app(tmp_path, api_keys=KEY, rate_limit_per_minute=3, trusted_proxies="127.0.0.1"))
    with TestClient(app, client=PROXY) as c:
        alice, bob = {"X-Forwarded-For": "198.51.100.1"}, {"X-Forwarded-For": "198.51.100.2"}
        # failed keys draw on the client's bucket: alice's guessing must not lock bob out
        assert [c.get("/v1/stats", headers=alice | {"X-API-Key": "guess"}).status_code for _ in range(4)] == [
            401,
            401,
            401,
            429,
        ]
        assert c.get("/v1/stats", headers=bob | {"X-API-Key": "guess"}).status_code == 401
        r = c.get("/v1/whoami", headers=bob | {"X-API-Key": KEY})
        assert r.status_code == 200
        assert r.json()["client"] == "198.51.100.2" and r.json()["caller"].startswith("key:")
        r = c.get("/v1/whoami", headers={"Forwarded": 'for="[2001:DB8::1]:4711"', "X-API-Key": KEY})
        assert r.json()["client"] == "2001:db8::1"
    # From a peer that is not a trusted proxy the header is ignored: a client cannot pick its bucket.
    with TestClient(app, client=REMOTE) as c:
        codes = [
            c.get("/v1/stats", headers={"X-Forwarded-For": f"198.51.100.{n}", "X-API-Key": "guess"}).status_code
            for n in range(10, 14)
        ]
        assert codes == [401, 401, 401, 429]
        r = c.get("/v1/whoami", headers={"X-Forwarded-For": "198.51.100.9", "X-API-Key": KEY})
        assert r.status_code == 200 and r.json()["client"] == REMOTE[0]


def test_open_mode_rate_buckets_are_per_forwarded_client(tmp_path: Path) -> None:
    app = make_app(tmp_path, rate_limit_per_minute=2, trusted_proxies="127.0.0.1")
    with TestClient(app, client=PROXY, base_url=LOCAL_URL) as c:
        v4, v6 = {"X-Forwarded-For": "127.0.0.1"}, {"X-Forwarded-For": "::1"}
        assert [c.get("/v1/stats", headers=v4).status_code for _ in range(3)] == [200, 200, 429]
        assert c.get("/v1/stats", headers=v6).status_code == 200


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("10.0.0.0/33", "10.0.0.0/33"),
        ("10.0.0.1/8", "host bits"),
        ("proxy.internal", "proxy.internal"),
        ("127.0.0.1, *", "'*'"),
        ("127.0.0.1;10.0.0.1", "127.0.0.1;10.0.0.1"),
    ],
)
def test_a_bad_trusted_proxy_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, value: str, fragment: str
) -> None:
    from kg.settings import SettingsError

    monkeypatch.setenv("MEDKG_TRUSTED_PROXIES", value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "MEDKG_TRUSTED_PROXIES" in str(info.value) and fragment in str(info.value)


def test_trusted_proxies_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().trusted_proxies == ""
    monkeypatch.setenv("MEDKG_TRUSTED_PROXIES", " 127.0.0.1 , 10.0.0.0/8,, ::1, ::ffff:192.0.2.1 ")
    assert load_settings().trusted_proxies == "127.0.0.1,10.0.0.0/8,::1,192.0.2.1"


def test_startup_warning_names_the_proxy_setting() -> None:
    text = startup_warning(load_settings(api_keys=None))
    assert text is not None and "MEDKG_TRUSTED_PROXIES" in text
    text = startup_warning(load_settings(api_keys=None, trusted_proxies="127.0.0.1"))
    assert text is not None and "127.0.0.1" in text


def test_forwarded_headers_never_crash_the_resolver() -> None:
    """Whatever a client writes into the headers, the answer is an address or unknown."""
    import random

    from starlette.datastructures import Headers

    from service.api.security import ProxyTrust

    trust = ProxyTrust.from_config("127.0.0.1,10.0.0.0/8")
    rng = random.Random(7)
    alphabet = 'abf0123456789:.,;=[]"\\ _%/-\t\u00e9'
    for _ in range(3000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))).encode("utf-8")
        for raw in ([(b"x-forwarded-for", value)], [(b"forwarded", value)], [(b"forwarded", b"for=" + value)]):
            client = trust.resolve("127.0.0.1", Headers(raw=raw))
            assert client.forwarded and client.trusted_peer
            if client.host is not None:
                ipaddress.ip_address(client.host)  # an address, never text from the header
