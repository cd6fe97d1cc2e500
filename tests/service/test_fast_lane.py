"""The routing endpoints' fast lane: past FastAPI's stack, with the same answers.

A ``POST`` to ``/v1/route`` or ``/v1/route/batch`` goes from the app's guard straight to
its endpoint (see ``hybridroute.service._app._App``). These tests show that it does --
FastAPI's router never sees such a request -- and that every answer, refusals and an
internal error included, is the one the whole stack gives.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.routing import APIRouter

from .helpers import PARCEL, RULE


@pytest.fixture
def router_calls(monkeypatch) -> list[str]:
    """The paths FastAPI's router was called with (on every app made in the test)."""
    seen: list[str] = []
    original = APIRouter.__call__

    async def spy(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(f"{scope['method']} {scope['path']}")
        await original(self, scope, receive, send)

    monkeypatch.setattr(APIRouter, "__call__", spy)
    return seen


def test_routing_posts_skip_fastapis_router_and_the_rest_do_not(make_app, tmp_path, router_calls):
    client = make_app(tmp_path / "a")
    assert client.post("/v1/route", json={**PARCEL, "request_id": "f-1"}).status_code == 200
    got = client.post("/v1/route/batch", json={"items": [PARCEL, RULE]})
    assert got.status_code == 200 and len(got.json()["results"]) == 2
    assert router_calls == []  # neither went through FastAPI's router
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/route").status_code == 405  # not a POST: the whole stack
    assert router_calls == ["GET /healthz", "GET /v1/route"]


def test_with_cors_the_routing_posts_take_the_whole_stack(make_app, tmp_path, router_calls):
    client = make_app(tmp_path / "a", cors_origins=("https://app.example",))
    got = client.post("/v1/route", json=PARCEL, headers={"origin": "https://app.example"})
    assert got.status_code == 200
    assert got.headers["access-control-allow-origin"] == "https://app.example"
    assert router_calls == ["POST /v1/route"]


def _slow_lane(client: Any) -> None:
    """Make ``client``'s app send every request through FastAPI's whole stack."""
    app = client.app
    app.hybridroute_fast = {}
    app.middleware_stack = app.build_middleware_stack()


#: Requests whose answers must not depend on the lane (path, headers, body bytes).
CASES: list[tuple[str, dict[str, str], bytes]] = [
    ("/v1/route", {"content-type": "application/json"}, json.dumps(PARCEL).encode()),
    ("/v1/route", {"content-type": "application/json"}, json.dumps(RULE).encode()),
    ("/v1/route", {"content-type": "application/json"}, b'{"text": "x", "facts": '),
    ("/v1/route", {"content-type": "text/plain"}, json.dumps(PARCEL).encode()),
    ("/v1/route", {}, json.dumps(PARCEL).encode()),
    ("/v1/route", {"content-type": "application/json"}, b'{"text": "hi", "bogus": 1}'),
    (
        "/v1/route",
        {"content-type": "application/json"},
        b'{"text": "hi", "facts": {"amount": "x"}}',
    ),
    ("/v1/route", {"content-type": "application/json"}, b"[1, 2]"),
    ("/v1/route", {"content-type": "application/json", "sec-fetch-site": "cross-site"}, b"{}"),
    ("/v1/route/batch", {"content-type": "application/json"}, b'{"items": [{"text": 5}]}'),
    ("/v1/route/batch", {"content-type": "application/json"}, b'{"items": []}'),
    ("/v1/route/batch", {"content-type": "application/json"}, b'{"things": []}'),
    ("/v1/route/batch", {"content-type": "application/json"}, b"x" * (100 * 1024)),
]


def _answers(client: Any) -> list[tuple[int, Any, list[tuple[str, str]]]]:
    out = []
    for path, headers, body in CASES:
        got = client.post(path, content=body, headers=headers)
        doc = got.json()
        for result in doc.get("results", [doc]) if got.status_code == 200 else []:
            result.pop("decision_id", None)  # new for every logged decision
            result.get("decision", {}).pop("decision_id", None)
            result.get("decision", {}).pop("created_at", None)
        kept = sorted((k, v) for k, v in got.headers.items() if k not in {"content-length", "date"})
        out.append((got.status_code, doc, kept))
    return out


def test_every_answer_is_the_whole_stacks(make_app, tmp_path, router_calls):
    fast = _answers(make_app(tmp_path / "fast", max_body_bytes=64 * 1024))
    assert router_calls == []
    slow_client = make_app(tmp_path / "slow", max_body_bytes=64 * 1024)
    _slow_lane(slow_client)
    slow = _answers(slow_client)
    assert len(router_calls) >= 9  # all but those the door refuses
    assert [a[0] for a in fast] == [200, 200, 400, 415, 415, 422, 422, 422, 403, 422, 200, 422, 413]
    for case, f, s in zip(CASES, fast, slow, strict=True):
        assert f == s, case[:2]


def test_an_internal_error_in_the_fast_lane_is_a_json_500(make_app, tmp_path, monkeypatch, caplog):
    client = make_app(tmp_path / "a")

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret text of the request")

    monkeypatch.setattr(type(client.app.state.hybridroute), "route_one", broken)
    with caplog.at_level("ERROR", logger="hybridroute.service"):
        got = client.post("/v1/route", json=PARCEL)
    assert got.status_code == 500
    assert got.json()["error"]["code"] == "internal"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert "secret text" not in caplog.text
    assert "internal error on POST /v1/route: RuntimeError" in caplog.text
