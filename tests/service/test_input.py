"""Every class of bad request gets its 4xx JSON error naming the field -- never a 500,
never a traceback -- and nothing is routed or logged."""

from __future__ import annotations

import json

import pytest

from .helpers import PARCEL, log_rows

pytestmark = pytest.mark.service

DEEP = "[" * 70 + "]" * 70


def post_raw(client, path: str, content: bytes | str, **headers: str):
    return client.post(
        path, content=content, headers={"content-type": "application/json", **headers}
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "a", "facts": {}', "request body"),
        ("{'text': 'single quotes'}", "request body"),
        ('{"text": "a", "text": "b", "facts": {}}', "duplicate key 'text'"),
        ('{"facts": {"amount": 1, "amount": 2}}', "duplicate key 'amount'"),
        ('{"facts": {"x": ' + DEEP + "}}", "nested too deeply"),
        ('{"facts": {"amount": ' + "9" * 80 + "}}", "digits"),
        ('{"facts": {"amount": NaN}}', "NaN"),
        ('{"facts": {"amount": Infinity}}', "Infinity"),
        ('{"text": "\\ud800", "facts": {}}', "surrogate"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_malformed_json_is_400(make_app, tmp_path, content, message):
    client = make_app(tmp_path)
    r = post_raw(client, "/v1/route", content)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input"
    assert message.lower() in err["message"].lower()
    assert "Traceback" not in r.text
    assert log_rows(tmp_path) == []


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ([], None, "must be a JSON object, got"),
        ("text", None, "must be a JSON object"),
        ({**PARCEL, "colour": "red"}, "colour", "unknown key(s) ['colour']"),
        ({**PARCEL, "id": 3}, "id", "unknown key"),
        ({"text": 42, "facts": {}}, "text", "text must be a string or null, got"),
        ({"text": ["a"], "facts": {}}, "text", "text must be a string"),
        ({**PARCEL, "request_id": 7}, "request_id", "request_id must be a string"),
        ({**PARCEL, "request_id": ""}, "request_id", "request_id is empty"),
        ({**PARCEL, "request_id": "x" * 300}, "request_id", "longer than 256"),
        ({"text": "a\u0000b", "facts": {}}, "text", "NUL"),
        ({"text": "x" * 100_001, "facts": {}}, "text", "the limit is 100,000"),
        ({"text": "a", "facts": {"amount": -5}}, "facts.amount", "below the minimum 0"),
        ({"text": "a", "facts": {"amount": "ten"}}, "facts.amount", "amount"),
        ({"text": "a", "facts": {"attempts": 1.5}}, "facts.attempts", "attempts"),
        ({"text": "a", "facts": {"action": "launch_missiles"}}, "facts.action", "launch_missiles"),
        ({"text": "a", "facts": {"has_permission": "yes"}}, "facts.has_permission", "bool"),
        ({"text": "a", "facts": {"colour": "red"}}, "facts.colour", "colour"),
        ({"text": "a", "facts": ["amount"]}, "facts", "facts"),
        ({"text": "a", "facts": {}, "evidence": "all of it"}, "evidence", "evidence"),
        (
            {"text": "a", "facts": {}, "evidence": {"required_points": "p", "items": []}},
            "evidence",
            "required_points",
        ),
    ],
)
def test_a_bad_item_is_422_naming_the_field(make_app, tmp_path, body, field, message):
    client = make_app(tmp_path)
    r = client.post("/v1/route", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input"
    assert err["field"] == field
    assert message.lower() in err["message"].lower(), err["message"]
    assert log_rows(tmp_path) == []


def test_a_bad_fact_has_the_cli_words(make_app, tmp_path, bundles):
    from hybridroute.cli import main

    client = make_app(tmp_path)
    err = client.post("/v1/route", json={"text": "a", "facts": {"amount": -5}}).json()["error"]
    import contextlib
    import io

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(
            ["route", "--router", str(bundles["v1"]), "--text", "a", "--facts", '{"amount": -5}']
        )
    assert code == 2
    assert err["message"] in stderr.getvalue()


def test_a_sensitive_fact_value_is_never_repeated(make_app, tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "s" * 32)
    client = make_app(tmp_path, sensitive_facts=("action",))
    r = client.post("/v1/route", json={"text": "a", "facts": {"action": "secret-plan-42"}})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "facts.action"
    assert "secret-plan-42" not in r.text


@pytest.mark.parametrize(
    ("ctype", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data", 415),
        ("application/json; charset=utf-8", 200),
    ],
)
def test_only_json_bodies_are_read(make_app, tmp_path, ctype, status):
    client = make_app(tmp_path)
    r = client.post("/v1/route", content=json.dumps(PARCEL), headers={"content-type": ctype})
    assert r.status_code == status
    if status != 200:
        assert r.json()["error"]["code"] == "invalid_input"


def test_oversized_body_by_content_length_is_413(make_app, tmp_path):
    client = make_app(tmp_path, max_body_bytes=2048)
    body = json.dumps({"text": "x" * 4000, "facts": {}})
    r = post_raw(client, "/v1/route", body)
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["code"] == "too_large" and "2,048 bytes" in err["message"]
    r = post_raw(client, "/v1/route/batch", json.dumps({"items": [PARCEL] * 100}))
    assert r.status_code == 413


@pytest.mark.parametrize("chunk", [100, 1000])
def test_oversized_chunked_body_is_413_while_it_is_read(make_app, tmp_path, chunk):
    client = make_app(tmp_path, max_body_bytes=2048)
    sent: list[int] = []

    def stream():
        yield b'{"text": "'
        for _ in range(10_000):  # 1-10 MB if it were all read
            sent.append(chunk)
            yield b"x" * chunk
        yield b'", "facts": {}}'

    r = client.post("/v1/route", content=stream(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "too_large"
    assert log_rows(tmp_path) == []


@pytest.mark.parametrize("value", ["abc", "-1", "1e3"])
def test_a_bad_content_length_is_400(make_app, tmp_path, value):
    from hybridroute.service._input import RequestProblem, read_limited

    async def chunks():
        yield b"{}"

    import asyncio

    with pytest.raises(RequestProblem) as info:
        asyncio.run(read_limited({"content-length": value}, chunks(), 1024))
    assert info.value.status == 400


def test_batch_over_max_batch_is_413(make_app, tmp_path):
    client = make_app(tmp_path, max_batch=3)
    r = client.post("/v1/route/batch", json={"items": [PARCEL] * 4})
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["code"] == "too_large" and err["field"] == "items"
    assert "limit is 3" in err["message"]
    assert client.post("/v1/route/batch", json={"items": [PARCEL] * 3}).status_code == 200


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"text": "a", "facts": {"amount": -1}}, "items[2].facts.amount"),
        ({"text": "a", "facts": {"action": "nope"}}, "items[2].facts.action"),
        ({"text": 5, "facts": {}}, "items[2].text"),
        ({"text": "a", "facts": {}, "extra": 1}, "items[2].extra"),
        ("not an item", "items[2]"),
        ({"text": "a\u0000", "facts": {}}, "items[2].text"),
        ({**PARCEL, "request_id": "r0"}, "items[2].request_id"),  # repeated within the batch
    ],
)
def test_a_bad_item_refuses_the_whole_batch_naming_it(make_app, tmp_path, bad, field):
    client = make_app(tmp_path)
    items = [{**PARCEL, "request_id": "r0"}, PARCEL, bad, PARCEL]
    r = client.post("/v1/route/batch", json={"items": items})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["field"] == field
    assert err["message"].startswith("items[2]")
    assert log_rows(tmp_path) == []  # nothing routed, nothing logged


@pytest.mark.parametrize(
    ("body", "field"),
    [({"items": "all"}, "items"), ({"items": [], "mode": "fast"}, "mode"), ({}, "items")],
)
def test_a_malformed_batch_is_422(make_app, tmp_path, body, field):
    client = make_app(tmp_path)
    r = client.post("/v1/route/batch", json=body)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == field


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v2/route", 404, "not_found"),
        ("POST", "/nothing/here", 404, "not_found"),
        ("GET", "/v1/route", 405, "invalid_input"),
        ("DELETE", "/healthz", 405, "invalid_input"),
    ],
)
def test_unknown_routes_and_methods_are_json(make_app, tmp_path, method, path, status, code):
    client = make_app(tmp_path)
    r = client.request(method, path)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == code


def test_a_bug_is_a_json_500_without_details(make_app, tmp_path, monkeypatch, caplog):
    client = make_app(tmp_path)
    router = client.app.state.hybridroute.routers.current.live.router

    def bug(items):
        raise KeyError("sk-proj-" + "A" * 40)

    monkeypatch.setattr(router, "route_many", bug)
    with caplog.at_level("DEBUG"):
        r = client.post("/v1/route", json=PARCEL)
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "internal"
    assert "sk-proj" not in r.text and "Traceback" not in r.text
    assert "sk-proj" not in caplog.text
    assert "KeyError" in caplog.text
