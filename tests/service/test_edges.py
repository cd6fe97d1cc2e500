"""The service's edges: what is refused at the door, what is echoed, slow and vanishing
clients, and what ``hybridroute serve`` checks before it starts.

* Cross-site browser requests (``Origin`` / ``Sec-Fetch-Site``) that would change state
  are 403 ``forbidden_origin`` unless their origin is a configured CORS origin; bodies not
  declared JSON are 415 (a missing ``Content-Type`` included) -- on every state-changing
  endpoint, through the ASGI app with explicit headers (the real browser:
  ``test_browser_crosssite.py``).
* Nothing an answer or the access log echoes carries a credential: a 422's ``field``, the
  404 path, request ids (refused at the door), query strings and paths in the access log.
* Raw sockets against a real uvicorn server (bounded by socket timeouts, so a regression
  fails instead of hanging): a client that goes away mid-body is no internal error; a slow
  or stalled body is 408 and closed; slow or oversized headers are 408 / 431 and closed.
* ``hybridroute serve`` refuses a taken port, a host that does not resolve or is not of
  this machine in one line, exit 2, before printing or creating anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hybridroute.exceptions import UserInputError

from .conftest import free_port, serve_command, wait_healthy
from .helpers import PARCEL, log_rows
from .test_serve import _stop, run_cli

pytestmark = pytest.mark.service

TOKEN = "edge-admin-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}
JSON = {"content-type": "application/json"}
KEY = "sk-proj-" + "Ab1" * 8  # shaped like a provider key: the scrubber knows it

#: Every state-changing endpoint, with a body it would accept.
STATE_CHANGING = [
    ("POST", "/v1/route", PARCEL),
    ("POST", "/v1/route/batch", {"items": [PARCEL]}),
    ("POST", "/v1/outcomes", {"outcomes": []}),
    ("POST", "/v1/admin/reload", {"path": "/nowhere"}),
    ("POST", "/v1/admin/promote", {"version": "9"}),
]


def _send(client: Any, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.request(method, path, content=content, headers={**AUTH, **headers})


# --------------------------------------------------------------------------- the door


@pytest.mark.parametrize(
    "browser",
    [
        {"origin": "https://evil.example"},
        {"origin": "https://evil.example", "sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "cross-site"},  # no Origin at all
        {"origin": "http://sub.testserver", "sec-fetch-site": "same-site"},
        {"origin": "null"},  # a sandboxed frame, a data: URL, a file
        {"origin": "http://testserver.evil.example"},
        {"origin": "http://testserver:8081"},  # another port is another origin
        {"origin": "http://testserver", "sec-fetch-site": "cross-site"},  # the browser knows
        {"origin": "https://ops.example.evil"},  # near a configured one is not it
    ],
    ids=lambda h: "+".join(f"{k}={v}" for k, v in h.items()),
)
def test_cross_site_browser_requests_are_refused_everywhere(make_app, tmp_path, browser):
    client = make_app(tmp_path, token=TOKEN, cors_origins=("https://ops.example",))
    for method, path, body in [*STATE_CHANGING, ("PUT", "/v1/route", PARCEL)]:
        for ctype in ("application/json", "text/plain", None):
            headers = {**browser, **({"content-type": ctype} if ctype else {})}
            r = _send(client, method, path, body, headers)
            assert r.status_code == 403, (method, path, ctype, r.text)
            error = r.json()["error"]
            assert error["code"] == "forbidden_origin"
            assert "origin check" in error["message"]
            assert "access-control-allow-origin" not in r.headers
    assert log_rows(tmp_path) == []


@pytest.mark.parametrize(
    "headers",
    [
        {},  # curl, httpx, RouterClient: not a browser
        {"origin": "http://testserver", "sec-fetch-site": "same-origin"},
        {"origin": "http://testserver"},  # a browser without Sec-Fetch-Site
        {"origin": "https://testserver"},  # the service behind a proxy that terminates TLS
        {"origin": "http://sub.example", "sec-fetch-site": "same-origin"},  # a proxy's Host
        {"sec-fetch-site": "none"},  # typed by the user
        {"origin": "https://ops.example", "sec-fetch-site": "cross-site"},  # CORS-configured
    ],
    ids=lambda h: "+".join(f"{k}={v}" for k, v in h.items()) or "no-browser-headers",
)
def test_same_origin_configured_and_non_browser_requests_pass(make_app, tmp_path, headers):
    client = make_app(tmp_path, cors_origins=("https://OPS.example:443",))
    r = _send(client, "POST", "/v1/route", PARCEL, {**JSON, **headers})
    assert r.status_code == 200, r.text
    if headers.get("origin") == "https://ops.example":
        assert r.headers["access-control-allow-origin"] == "https://ops.example"
    assert len(log_rows(tmp_path)) == 1


def test_a_configured_origin_gets_its_preflight_and_others_do_not(make_app, tmp_path):
    client = make_app(tmp_path, cors_origins=("https://ops.example",))
    ask = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    ok = client.options("/v1/route", headers={**ask, "origin": "https://ops.example"})
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "https://ops.example"
    other = client.options("/v1/route", headers={**ask, "origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    r = _send(client, "POST", "/v1/route", PARCEL, {**JSON, "origin": "https://evil.example"})
    assert r.status_code == 403


@pytest.mark.parametrize(
    "ctype",
    [
        None,  # what a no-cors fetch of a Blob sends
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "application/jsonx",
        "text/json",
        "application/json, text/plain",
        "",
    ],
)
def test_a_body_not_declared_json_is_415_on_every_state_changing_endpoint(
    make_app, tmp_path, ctype
):
    client = make_app(tmp_path, token=TOKEN)
    for method, path, body in STATE_CHANGING:
        headers = {} if ctype is None else {"content-type": ctype}
        r = _send(client, method, path, body, headers)
        assert r.status_code == 415, (path, r.text)
        assert r.json()["error"]["code"] == "invalid_input"
        assert "application/json" in r.json()["error"]["message"]
    # chunked (no Content-Length) and empty bodies are refused the same way
    chunks = iter([json.dumps(PARCEL).encode()])
    r = client.post("/v1/route", content=chunks, headers={"content-type": "text/plain"})
    assert r.status_code == 415
    r = client.post("/v1/route", content=b"")
    assert r.status_code == 415
    assert log_rows(tmp_path) == []


def test_safe_methods_and_bodyless_requests_keep_their_answers(make_app, tmp_path):
    client = make_app(tmp_path)
    evil = {"origin": "https://evil.example", "sec-fetch-site": "cross-site"}
    assert client.get("/healthz", headers=evil).status_code == 200  # reads: the browser
    assert client.request("GET", "/healthz", content=b"x", headers=evil).status_code == 200
    assert client.post("/nothing/here").status_code == 404
    assert client.delete("/healthz").status_code == 405


# --------------------------------------------------------------------------- echoes


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/route", {"text": "a", "facts": {KEY: 1}}, "facts.[REDACTED]"),
        ("/v1/route", {"text": "a", KEY: 1}, "[REDACTED]"),
        ("/v1/route", {"text": "a", "password=hunter22x": 1}, "password=[REDACTED]"),
        ("/v1/route/batch", {"items": [PARCEL, {"facts": {KEY: True}}]}, None),
        ("/v1/route/batch", {"items": [], "token:abcdef123456": 1}, None),
        ("/v1/outcomes", {"outcomes": [], "api_key=" + "z" * 20: 1}, None),
    ],
)
def test_a_422_field_never_echoes_what_its_message_scrubs(make_app, tmp_path, path, body, field):
    client = make_app(tmp_path, token=TOKEN)
    r = _send(client, "POST", path, body, JSON)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    for secret in (KEY, "hunter22x", "abcdef123456", "z" * 20):
        assert secret not in r.text
    assert "[REDACTED]" in error["field"]
    if field is not None:
        assert error["field"] == field


def test_echoed_fields_and_messages_are_bounded(make_app, tmp_path):
    client = make_app(tmp_path)
    long_key = "k" * 100_000
    r = _send(client, "POST", "/v1/route", {"text": "a", long_key: 1}, JSON)
    assert r.status_code == 422
    error = r.json()["error"]
    assert len(error["field"]) <= 200 and len(error["message"]) <= 4000


@pytest.mark.parametrize(
    "rid",
    [
        KEY,
        "sk-ant-" + "Zz9" * 10,
        "token=abcdef123",
        "password: hunter22x",
        "my_secret=opensesame",
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "ghp_" + "a1B2" * 9,
        "xoxb-1234567890-abcdef",
        "Bearer abcdefghijklmnop1234",
        "ENV-SECRET-VALUE-42",  # the value of a credential-like environment variable
    ],
)
def test_request_ids_that_look_like_credentials_are_refused(make_app, tmp_path, monkeypatch, rid):
    monkeypatch.setenv("EDGE_TEST_API_KEY", "ENV-SECRET-VALUE-42")
    client = make_app(tmp_path)
    r = _send(client, "POST", "/v1/route", {**PARCEL, "request_id": rid}, JSON)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["field"] == "request_id"
    assert "looks like a credential" in error["message"] and "opaque id" in error["message"]
    batch = {"items": [{**PARCEL, "request_id": "ok-1"}, {**PARCEL, "request_id": rid}]}
    r = _send(client, "POST", "/v1/route/batch", batch, JSON)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "items[1].request_id"
    assert rid not in r.text and rid.split()[-1] not in r.text
    assert log_rows(tmp_path) == []


@pytest.mark.parametrize("rid", ["t-1", "ticket-12345", "0b0e8a8e-3c57-4f6b-9a41-2f0c5d4e7a10"])
def test_opaque_request_ids_are_accepted(make_app, tmp_path, rid):
    client = make_app(tmp_path)
    r = _send(client, "POST", "/v1/route", {**PARCEL, "request_id": rid}, JSON)
    assert r.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        f"/v1/{KEY}",
        "/" + "a" * 190 + KEY,  # cut at 200 characters, the key would lose its shape
        "/v1/route/password=hunter22x",
    ],
)
def test_the_404_path_echo_is_scrubbed_before_it_is_cut(make_app, tmp_path, path):
    client = make_app(tmp_path)
    r = client.get(path)
    assert r.status_code == 404
    message = r.json()["error"]["message"]
    assert "sk-proj" not in message and "hunter22x" not in message
    assert len(message) < 300


def test_a_405_names_no_unknown_method(make_app, tmp_path):
    client = make_app(tmp_path)
    r = client.request("HUNTER2SECRETMETHOD", "/healthz")
    assert r.status_code == 405
    assert "HUNTER2" not in r.text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("/healthz", "/healthz"),
        (f"/healthz?api_key={KEY}", "/healthz?[query not logged]"),
        ("/v1/audits?password=hunter22x&limit=3", "/v1/audits?[query not logged]"),
        ("/x?", "/x?[query not logged]"),
        (f"/v1/{KEY}", "/v1/[REDACTED]"),
        ("/v1/api_key%3Dsecretvalue123", "/v1/api_key%3D[REDACTED]"),
        ("/" + "a" * 300, "/" + "a" * 198 + "…"),
    ],
)
def test_the_access_log_path(raw, shown):
    from hybridroute.service._edges import log_path

    assert log_path(raw) == shown


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("name", ["body_timeout_s", "header_timeout_s"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), True, "10", 3601])
def test_timeouts_are_checked(bundles, tmp_path, name, value):
    from hybridroute.service import ServiceConfig

    with pytest.raises(UserInputError, match=f"field '{name}'"):
        ServiceConfig(router=bundles["v1"], log=str(tmp_path / "l"), **{name: value})


@pytest.mark.parametrize(
    "origin",
    ["*", "null", "ops.example", "https://ops.example/", "https://ops.example/app", "ftp://x"],
)
def test_cors_origins_must_be_origins(bundles, tmp_path, origin):
    from hybridroute.service import ServiceConfig

    with pytest.raises(UserInputError, match="field 'cors_origins'"):
        ServiceConfig(router=bundles["v1"], log=str(tmp_path / "l"), cors_origins=(origin,))


def test_config_round_trip_keeps_the_new_fields(bundles, tmp_path):
    from hybridroute.service import ServiceConfig

    config = ServiceConfig(
        router=str(bundles["v1"]),
        log=str(tmp_path / "l"),
        admin=False,
        body_timeout_s=2.5,
        header_timeout_s=3,
        cors_origins=("HTTPS://Ops.Example:443", "http://localhost:8001"),
    )
    assert config.cors_origins == ("https://ops.example", "http://localhost:8001")
    assert ServiceConfig.from_json(config.to_json()) == config


# --------------------------------------------------------------------------- real sockets


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def loud(self) -> list[str]:
        """Warnings and errors, but for the start-up line on admin endpoints."""
        return [
            r.getMessage()
            for r in self.records
            if r.levelno >= logging.WARNING and not r.getMessage().startswith("admin endpoints")
        ]


@pytest.fixture
def server_log() -> Iterator[_Records]:
    """Every record of the server's loggers, whatever logging configuration ran before."""
    handler = _Records()
    names = ("hybridroute", "uvicorn", "uvicorn.error", "asyncio")
    for name in names:
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler
    finally:
        for name in names:
            logging.getLogger(name).removeHandler(handler)


@contextlib.contextmanager
def edge_server(
    bundles, tmp_path, *, ours: bool = False, **config: Any
) -> Iterator[tuple[int, Any]]:
    """The app on a real uvicorn server on a free port, in a thread; yields ``(port,
    app)``. ``ours``: with the protocol ``hybridroute serve`` runs (header deadline and
    size cap); else uvicorn's own (what the app bounds, it bounds under any server)."""
    import uvicorn

    from hybridroute.service import ServiceConfig, create_app

    http: Any = "auto"
    if ours:
        from hybridroute.service._protocol import HttpProtocol

        http = HttpProtocol
    app = create_app(
        ServiceConfig(
            router=bundles["v1"], log=f"sqlite:///{tmp_path / 'decisions.sqlite'}", **config
        )
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, http=http, log_config=None, lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        yield port, app
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(5)
    return sock


def read_to_eof(sock: socket.socket, limit: float = 6.0) -> tuple[bytes, bool]:
    """What the server sends until it closes the connection (``True``) or ``limit``
    seconds pass (``False``)."""
    data = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def head(path: str = "/v1/route", length: int | None = None, chunked: bool = False) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def requests_counted(port: int, endpoint: str, status: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for line in text.splitlines():
        if (
            line.startswith("hybridroute_requests_total{")
            and f'endpoint="{endpoint}"' in line
            and f'status="{status}"' in line
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_counted(
    port: int, endpoint: str, statuses: int | tuple[int, ...], n: int, timeout: float = 5.0
) -> None:
    """Until ``n`` requests to ``endpoint`` are counted with one of ``statuses`` (bounded)."""
    statuses = statuses if isinstance(statuses, tuple) else (statuses,)
    deadline = time.monotonic() + timeout
    while sum(requests_counted(port, endpoint, s) for s in statuses) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{n} requests to {endpoint} not counted as {statuses}")
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["close", "reset", "close-after-headers"])
@pytest.mark.parametrize("path", ["/v1/route", "/v1/route/batch"])
def test_a_client_that_vanishes_mid_body_is_no_internal_error(
    bundles, tmp_path, server_log, how, path
):
    body = json.dumps(PARCEL if path == "/v1/route" else {"items": [PARCEL]}).encode()
    with edge_server(bundles, tmp_path) as (port, _):
        for _ in range(5):
            sock = connect(port)
            sock.sendall(head(path, length=len(body) + 100))
            if how != "close-after-headers":
                sock.sendall(body[:10])
            time.sleep(0.05)
            if how == "reset":  # an RST instead of a FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        wait_counted(port, path, (499, 500), 5)  # all five handled
        assert server_log.loud() == []  # no "internal error", no traceback
        assert requests_counted(port, path, 499) == 5  # counted as the client's doing
    assert log_rows(tmp_path) == []


@pytest.mark.parametrize("how", ["trickle", "stall", "chunked-trickle", "stall-before-body"])
def test_a_slow_body_is_408_and_the_connection_closes(bundles, tmp_path, server_log, how):
    body = json.dumps(PARCEL).encode()
    with edge_server(bundles, tmp_path, body_timeout_s=1.0) as (port, _):
        sock = connect(port)
        start = time.monotonic()
        sock.sendall(head(length=len(body), chunked=how == "chunked-trickle"))
        if how in ("trickle", "chunked-trickle"):

            def trickle() -> None:  # a byte every 0.3 s, for longer than the deadline
                with contextlib.suppress(OSError):
                    for i in range(10):
                        piece = body[i : i + 1]
                        if how == "chunked-trickle":
                            piece = b"1\r\n" + piece + b"\r\n"
                        sock.sendall(piece)
                        time.sleep(0.3)

            sender = threading.Thread(target=trickle, daemon=True)
            sender.start()
        elif how == "stall":
            sock.sendall(body[:5])
        answer, closed = read_to_eof(sock)
        took = time.monotonic() - start
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b'"code":"timeout"' in answer and b"body_timeout_s" in answer
        assert closed, "the connection stayed open after the 408"
        assert 0.9 < took < 4.0
        wait_counted(port, "/v1/route", 408, 1)
    assert server_log.loud() == []
    assert log_rows(tmp_path) == []


def test_a_body_that_arrives_in_time_is_routed(bundles, tmp_path):
    body = json.dumps(PARCEL).encode()
    with edge_server(bundles, tmp_path, ours=True, body_timeout_s=1.0) as (port, app):
        sock = connect(port)
        for _ in range(2):  # two requests on one kept-alive connection
            sock.sendall(head(length=len(body)))
            for i in range(0, len(body), 20):  # in pieces, 0.1 s apart
                sock.sendall(body[i : i + 20])
                time.sleep(0.1)
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
            time.sleep(0.5)  # idle within the header deadline
        # two pipelined requests in one write
        sock.sendall((head(length=len(body)) + body) * 2)
        seen = b""
        deadline = time.monotonic() + 5
        while seen.count(b"HTTP/1.1 200 ") < 2 and time.monotonic() < deadline:
            seen += sock.recv(65536)
        assert seen.count(b"HTTP/1.1 200 ") == 2
        sock.close()
    assert len(log_rows(tmp_path)) == 4


def test_a_slow_answer_is_not_cut_by_either_deadline(bundles, tmp_path, monkeypatch):
    with edge_server(bundles, tmp_path, ours=True, header_timeout_s=0.5, body_timeout_s=0.5) as (
        port,
        app,
    ):
        service = app.state.hybridroute
        original = service.route

        async def slow(*args: Any, **kw: Any) -> Any:
            await asyncio.sleep(1.2)  # longer than both deadlines: the request is ours now
            return await original(*args, **kw)

        monkeypatch.setattr(service, "route", slow)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/route", json=PARCEL, timeout=10)
        assert r.status_code == 200


@pytest.mark.parametrize("how", ["trickle-line", "trickle-headers", "idle", "after-an-answer"])
def test_slow_headers_are_cut_off(bundles, tmp_path, server_log, how):
    body = json.dumps(PARCEL).encode()
    with edge_server(bundles, tmp_path, ours=True, header_timeout_s=1.0) as (port, _):
        sock = connect(port)
        if how == "after-an-answer":
            sock.sendall(head(length=len(body)) + body)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        start = time.monotonic()
        if how != "idle":
            partial = head(length=len(body))[:-2] if how != "trickle-line" else b"POST /v1/r"

            def trickle() -> None:
                with contextlib.suppress(OSError):
                    for i in range(20):
                        sock.sendall(partial[i : i + 1])
                        time.sleep(0.3)

            threading.Thread(target=trickle, daemon=True).start()
        answer, closed = read_to_eof(sock)
        took = time.monotonic() - start
        sock.close()
        assert closed, "the connection stayed open"
        assert 0.9 < took < 4.0
        if how == "idle":
            assert answer == b""
        else:
            assert answer.startswith(b"HTTP/1.1 408 ") and b"header_timeout_s" in answer
    assert server_log.loud() == []
    assert len(log_rows(tmp_path)) == (1 if how == "after-an-answer" else 0)


@pytest.mark.parametrize("where", ["headers", "url"])
def test_oversized_headers_are_431(bundles, tmp_path, where):
    with edge_server(bundles, tmp_path, ours=True) as (port, _):
        sock = connect(port)
        if where == "url":
            data = b"GET /healthz?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        else:
            pad = b"X-Pad: " + b"a" * 1000 + b"\r\n"
            data = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + pad * 70 + b"\r\n"
        with contextlib.suppress(OSError):
            sock.sendall(data)
        answer, closed = read_to_eof(sock)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
        assert closed
        # the server still answers others
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200


# --------------------------------------------------------------------------- serve


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("host", "port", "words"),
    [
        ("127.0.0.1", "{taken}", "Address already in use"),
        ("localhost", "{taken}", "Address already in use"),
        ("nohost.invalid", "8080", "does not resolve"),
        ("no such host", "8080", "does not resolve"),
        ("256.1.1.1", "8080", "does not resolve"),
        ("192.0.2.1", "{free}", "Cannot assign requested address"),  # not of this machine
    ],
)
def test_serve_refuses_an_address_it_cannot_listen_on(
    bundles, tmp_path, taken_port, host, port, words
):
    port = port.format(taken=taken_port, free=free_port())
    log = tmp_path / "log.sqlite"
    code, out, err = run_cli(
        "serve", "--router", str(bundles["v1"]), "--log", str(log), "--host", host, "--port", port
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert f"--host {host} --port {port}" in lines[0]
    assert out == ""  # no banner
    assert not log.exists()  # nothing created


def test_serve_refuses_bad_timeouts_before_anything(bundles, tmp_path):
    log = tmp_path / "log.sqlite"
    code, out, err = run_cli(
        "serve", "--router", str(bundles["v1"]), "--log", str(log), "--body-timeout", "0"
    )
    assert code == 2 and "body_timeout_s" in err and out == ""
    assert not log.exists()


def test_serve_logs_no_credential_and_bounds_slow_clients(bundles, tmp_path):
    """The real ``hybridroute serve``: its access log prints no query string and no key in
    a path, and its server closes slow headers and slow bodies."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = serve_command(
        bundles, f"sqlite:///{tmp_path / 'd.sqlite'}", port,
        "--header-timeout", "1", "--body-timeout", "1",
    )  # fmt: skip
    out = tmp_path / "out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_healthy(url, proc)
        secrets = [KEY, "hunter22x", "abcdef123456", "supersecretvalue9"]
        for path in (
            f"/healthz?api_key={KEY}",
            "/v1/audits?password=hunter22x&limit=1",
            "/nothing?token=abcdef123456",
            f"/v1/route/{KEY}",
            "/v1/x/api_key%3Dsupersecretvalue9",
        ):
            httpx.get(url + path, timeout=5)
        httpx.post(url + f"/v1/route?api_key={KEY}", json=PARCEL, timeout=5)
        sock = connect(port)
        sock.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        answer, closed = read_to_eof(sock)
        assert closed and answer.startswith(b"HTTP/1.1 408 ")
        sock = connect(port)
        sock.sendall(head(length=100) + b"{")
        answer, closed = read_to_eof(sock)
        assert closed and answer.startswith(b"HTTP/1.1 408 ")
    finally:
        _stop(proc)
    text = out.read_text()
    for secret in secrets:
        assert secret not in text
    access = [line for line in text.splitlines() if '" 200' in line or '" 404' in line]
    assert any("/healthz?[query not logged]" in line for line in access), text
    assert any("/v1/route/[REDACTED]" in line for line in access), text
    assert re.search(r"POST /v1/route\?\[query not logged\] HTTP/1.1\" 200", text), text
    assert "ERROR" not in text


# --------------------------------------------------------------------------- the door, unit


def _scope(method: str = "POST", **headers: str | list[str]) -> dict[str, Any]:
    pairs = []
    for name, value in headers.items():
        for v in value if isinstance(value, list) else [value]:
            pairs.append((name.replace("_", "-").encode(), v.encode()))
    return {"type": "http", "method": method, "scheme": "http", "headers": pairs}


@pytest.mark.parametrize(
    ("scope", "status"),
    [
        (_scope(host="example.com:80", origin="http://example.com"), None),
        (_scope(host="example.com", origin="https://example.com"), None),
        (_scope(host="[::1]:8080", origin="http://[::1]:8080"), None),
        (_scope(host="Example.COM:8080", origin="http://example.com:8080"), None),
        (_scope(host="example.com", origin="http://example.com:8080"), 403),
        (_scope(host="example.com", origin=["http://example.com", "http://evil.example"]), 403),
        (_scope(host="example.com", sec_fetch_site=["same-origin", "cross-site"]), 403),
        (_scope(origin="http://example.com"), 403),  # no Host: no own origin to compare
        (_scope(host=["a.example", "example.com"], origin="http://example.com"), 403),
        (_scope("GET", origin="http://evil.example", sec_fetch_site="cross-site"), None),
        (_scope("OPTIONS", origin="http://evil.example"), None),  # a preflight
        (_scope(content_length="10"), 415),
        (_scope(transfer_encoding="chunked", content_type="text/plain"), 415),
        (_scope(content_length="10", content_type=["application/json", "text/plain"]), 415),
        (_scope(content_length="0"), None),  # no body: the endpoint decides
        (_scope("DELETE", content_length="2", content_type="application/json"), None),
    ],
)
def test_the_door_unit(scope, status):
    from hybridroute.service._edges import check_door

    problem = check_door(scope, ("https://ops.example",))
    assert (problem and problem.status) == status
