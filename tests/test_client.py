"""The service client over ``httpx.MockTransport``: results, what is retried (and what is
never retried), backoff, and how answers become errors. No server is needed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from hybridroute.client import AsyncRouterClient, RetrySettings, RouterClient, RouteResult
from hybridroute.contracts import Decision, RouteRequest
from hybridroute.exceptions import (
    HybridRouteError,
    InputError,
    ServiceError,
    ServiceUnavailableError,
    UserInputError,
)

URL = "http://127.0.0.1:9"
FAST = RetrySettings(retries=2, backoff_s=0.0)


def record(amount: int = 20, text: str | None = "where is my parcel") -> dict[str, Any]:
    return Decision(
        router="support",
        router_version="1",
        input_snapshot={"facts": {"amount": amount}, "text": text},
        allowed_destinations=("human_review", "answer"),
        selected_destination="human_review",
        reason_code="default_exit",
        stage="rule",
        rule_id="default",
    ).to_dict()


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """A route answer for a request body (the decision of its facts)."""
    return {
        "decision_id": "d-" + str(body.get("request_id", "none")),
        "duplicate": False,
        "decision": record(body["facts"].get("amount", 0), body["text"]),
    }


class Script:
    """A handler that plays ``outcomes`` in order (then 200s) and keeps every request."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else 200
        if isinstance(outcome, Exception):
            raise outcome
        if isinstance(outcome, httpx.Response):
            return outcome
        if outcome != 200:
            return httpx.Response(
                outcome,
                json={"error": {"code": "unavailable", "field": None, "message": "busy"}},
            )
        if request.url.path == "/healthz":
            return httpx.Response(200, json={"status": "ok"})
        if request.url.path == "/v1/routers":
            return httpx.Response(200, json={"routers": [{"name": "support", "version": "1"}]})
        body = json.loads(request.content)
        if request.url.path == "/v1/route/batch":
            return httpx.Response(200, json={"results": [answer(it) for it in body["items"]]})
        return httpx.Response(200, json=answer(body))


def call(kind: str, script: Script, method: str, *args: Any, **client_args: Any) -> Any:
    """Call ``method`` on a sync or an async client over ``script``."""
    client_args.setdefault("retries", FAST)
    if kind == "sync":
        with RouterClient(URL, transport=httpx.MockTransport(script), **client_args) as c:
            return getattr(c, method)(*args)

    async def run() -> Any:
        async with AsyncRouterClient(
            URL, transport=httpx.MockTransport(script), **client_args
        ) as c:
            return await getattr(c, method)(*args)

    return asyncio.run(run())


KINDS = pytest.mark.parametrize("kind", ["sync", "async"])
TRANSIENT = [
    502,
    503,
    504,
    httpx.ConnectError("refused"),
    httpx.ReadTimeout("slow"),
    httpx.ConnectTimeout("slow"),
    httpx.RemoteProtocolError("server dropped the connection"),
    httpx.ReadError("reset"),
]
TRANSIENT_IDS = ["502", "503", "504", "connect", "read-timeout", "connect-timeout", "drop", "reset"]


# --------------------------------------------------------------------------- results


@KINDS
def test_route_returns_the_verified_decision_with_its_id(kind):
    script = Script()
    r = call(kind, script, "route", "where is my parcel", {"amount": 20}, "t-1")
    assert isinstance(r, RouteResult)
    assert r.decision == Decision.from_dict(record(20), verify_hash=True)
    assert r.decision_id == "d-t-1" and r.duplicate is False
    sent = json.loads(script.requests[0].content)
    assert sent == {"text": "where is my parcel", "facts": {"amount": 20}, "request_id": "t-1"}
    assert script.requests[0].headers["content-type"] == "application/json"


@KINDS
def test_route_batch_keeps_the_order(kind):
    items = [{"text": f"t{i}", "facts": {"amount": i}, "request_id": f"r{i}"} for i in range(5)]
    results = call(kind, Script(), "route_batch", items)
    assert [r.decision_id for r in results] == [f"d-r{i}" for i in range(5)]
    assert [r.decision.input_snapshot["facts"]["amount"] for r in results] == list(range(5))


@KINDS
@pytest.mark.parametrize(
    ("request_", "args"),
    [
        (
            RouteRequest(text="where is my parcel", facts={"amount": 20}, request_id="t-1"),
            ("where is my parcel", {"amount": 20}, "t-1"),
        ),
        (RouteRequest(text="x"), ("x", None)),
        (RouteRequest(facts={"amount": 3}), (None, {"amount": 3})),
    ],
    ids=["text-facts-id", "text-only", "facts-only"],
)
def test_a_route_request_sends_what_the_loose_arguments_send(kind, request_, args):
    by_request, by_args = Script(), Script()
    assert call(kind, by_request, "route", request_) == call(kind, by_args, "route", *args)
    assert by_request.requests[0].content == by_args.requests[0].content


def test_a_route_request_with_evidence_sends_it():
    evidence = {"required_points": ["p"], "items": []}
    script = Script()
    call("sync", script, "route", RouteRequest(text="t", evidence=evidence, request_id="e-1"))
    sent = json.loads(script.requests[0].content)
    assert sent == {"text": "t", "facts": {}, "evidence": evidence, "request_id": "e-1"}


@KINDS
def test_a_batch_of_route_requests_is_sent_and_retried_as_mappings_are(kind):
    requests = [
        RouteRequest(text=f"t{i}", facts={"amount": i}, request_id=f"r{i}") for i in range(3)
    ]
    mappings = [r.to_dict() for r in requests]
    by_request, by_mapping = Script(503), Script(503)  # every item has an id: retried
    assert call(kind, by_request, "route_batch", requests) == call(
        kind, by_mapping, "route_batch", mappings
    )
    assert [r.content for r in by_request.requests] == [r.content for r in by_mapping.requests]
    assert len(by_request.requests) == 2
    # a request without an id makes the batch unsafe to repeat, as a mapping without one does
    script = Script(503)
    with pytest.raises(ServiceUnavailableError, match="not retried"):
        call(kind, script, "route_batch", [*requests, RouteRequest(text="no id")])
    assert len(script.requests) == 1


@pytest.mark.parametrize(
    "extra",
    [{"facts": {"amount": 1}}, {"request_id": "t-1"}, {"evidence": {"items": []}}],
    ids=["facts", "request_id", "evidence"],
)
def test_a_route_request_holds_its_own_parts(extra):
    script = Script()
    with RouterClient(URL, transport=httpx.MockTransport(script)) as c:
        with pytest.raises(TypeError, match="holds its own"):
            c.route(RouteRequest(text="x"), **extra)
    assert script.requests == []


@pytest.mark.parametrize("item", [42, "text", ("x", {})], ids=["int", "str", "tuple"])
def test_a_batch_item_is_a_route_request_or_a_mapping(item):
    script = Script()
    with RouterClient(URL, transport=httpx.MockTransport(script)) as c:
        with pytest.raises(InputError, match=r"items\[1\] must be a RouteRequest or a mapping"):
            c.route_batch([RouteRequest(text="ok"), item])
    assert script.requests == []


@KINDS
def test_routers_and_health(kind):
    assert call(kind, Script(), "routers") == [{"name": "support", "version": "1"}]
    assert call(kind, Script(), "health") == {"status": "ok"}


@pytest.mark.parametrize(
    "body",
    [
        {
            "decision_id": "d",
            "duplicate": False,
            "decision": {**record(), "snapshot_hash": "0" * 64},
        },
        {"decision_id": "d", "duplicate": "no", "decision": record()},
        {"decision_id": "", "duplicate": False, "decision": record()},
        {"duplicate": False, "decision": record()},
        {"decision_id": "d", "duplicate": False, "decision": {**record(), "extra": 1}},
        ["not", "an", "object"],
    ],
    ids=["bad-hash", "bad-duplicate", "empty-id", "no-id", "unknown-key", "a-list"],
)
def test_an_answer_that_is_not_a_routing_result_is_refused(body):
    script = Script(httpx.Response(200, json=body))
    with pytest.raises(ServiceUnavailableError, match="not a routing result") as info:
        call("sync", script, "route", "x", {}, "t-1")
    assert not isinstance(info.value, UserInputError)


@pytest.mark.parametrize(
    ("response", "match"),
    [
        (httpx.Response(200, content=b"<html>"), "not JSON"),
        (httpx.Response(200, json={"results": []}), "0 results for 2 items"),
        (httpx.Response(200, json={}), "no results for 2 items"),
    ],
)
def test_a_batch_answer_must_hold_one_result_per_item(response, match):
    items = [{"text": "a", "facts": {}}, {"text": "b", "facts": {}}]
    with pytest.raises(ServiceUnavailableError, match=match):
        call("sync", Script(response), "route_batch", items)


# --------------------------------------------------------------------------- retries


@KINDS
@pytest.mark.parametrize("outcome", TRANSIENT, ids=TRANSIENT_IDS)
def test_a_request_with_a_request_id_is_retried(kind, outcome):
    script = Script(outcome, outcome)
    r = call(kind, script, "route", "x", {"amount": 1}, "t-1")
    assert r.decision_id == "d-t-1"
    assert len(script.requests) == 3
    # the very same request each time: the service deduplicates on its request id
    assert len({req.content for req in script.requests}) == 1


@KINDS
@pytest.mark.parametrize("outcome", TRANSIENT, ids=TRANSIENT_IDS)
def test_a_post_without_a_request_id_is_never_retried(kind, outcome):
    script = Script(outcome)
    with pytest.raises(ServiceUnavailableError, match="not retried") as info:
        call(kind, script, "route", "x", {"amount": 1})
    assert len(script.requests) == 1 and info.value.attempts == 1


@KINDS
@pytest.mark.parametrize(
    ("ids", "sent"),
    [(["a", "b", "c"], 2), (["a", None, "c"], 1), ([None, None, None], 1)],
    ids=["all-ids", "one-missing", "none"],
)
def test_a_batch_is_retried_only_when_every_item_has_a_request_id(kind, ids, sent):
    items = [{"text": "t", "facts": {}, **({} if i is None else {"request_id": i})} for i in ids]
    script = Script(503)
    if sent == 2:
        assert len(call(kind, script, "route_batch", items)) == 3
    else:
        with pytest.raises(ServiceUnavailableError, match="503"):
            call(kind, script, "route_batch", items)
    assert len(script.requests) == sent


@KINDS
@pytest.mark.parametrize("method", ["routers", "health"])
def test_gets_are_always_retried(kind, method):
    script = Script(httpx.ConnectError("refused"), 503)
    assert call(kind, script, method)
    assert len(script.requests) == 3


@KINDS
@pytest.mark.parametrize("retries", [0, 1, 3])
def test_the_retry_budget_is_bounded(kind, retries):
    script = Script(*([503] * 10))
    with pytest.raises(ServiceUnavailableError, match="503") as info:
        call(
            kind,
            script,
            "route",
            "x",
            {},
            "t-1",
            retries=RetrySettings(retries=retries, backoff_s=0),
        )
    assert len(script.requests) == retries + 1 == info.value.attempts
    assert info.value.status == 503
    if retries:
        assert f"after {retries + 1} attempts" in str(info.value)


@pytest.mark.parametrize("status", [500, 501, 505])
def test_other_server_errors_are_not_retried(status):
    script = Script(status)
    with pytest.raises(ServiceUnavailableError, match=str(status)):
        call("sync", script, "route", "x", {}, "t-1")
    assert len(script.requests) == 1


def test_the_backoff_doubles_up_to_its_bound(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("hybridroute.client.time.sleep", waits.append)
    settings = RetrySettings(retries=5, backoff_s=0.1, max_backoff_s=0.5)
    call("sync", Script(*([503] * 5)), "route", "x", {}, "t-1", retries=settings)
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])


@pytest.mark.parametrize(
    ("retry_after", "expected"), [("0.3", 0.3), ("120", 1.0), ("soon", 0.05), ("nan", 0.05)]
)
def test_retry_after_is_honoured_within_the_bound(monkeypatch, retry_after, expected):
    waits: list[float] = []
    monkeypatch.setattr("hybridroute.client.time.sleep", waits.append)
    busy = httpx.Response(503, headers={"retry-after": retry_after}, json={})
    call("sync", Script(busy), "route", "x", {}, "t-1", retries=RetrySettings())
    assert waits == pytest.approx([expected])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"retries": -1},
        {"retries": 11},
        {"retries": True},
        {"backoff_s": -1.0},
        {"max_backoff_s": float("inf")},
    ],
)
def test_retry_settings_are_checked(kwargs):
    with pytest.raises((TypeError, ValueError)):
        RetrySettings(**kwargs)


# --------------------------------------------------------------------------- errors


@KINDS
@pytest.mark.parametrize(
    ("status", "code", "field", "message"),
    [
        (422, "invalid_input", "facts.amount", "fact 'amount': expected a number, got 'lots'"),
        (422, "invalid_input", "items[3].text", "unknown key 'txt'"),
        (413, "too_large", None, "the body is larger than 1,048,576 bytes"),
        (400, "invalid_input", None, "malformed JSON at line 1"),
        (404, "not_found", None, "no such route"),
    ],
)
def test_a_4xx_is_a_service_error_in_the_servers_words(kind, status, code, field, message):
    body = {"error": {"code": code, "field": field, "message": message}}
    script = Script(httpx.Response(status, json=body))
    with pytest.raises(ServiceError, match="^" + message.replace("[", r"\[")) as info:
        call(kind, script, "route", "x", {"amount": "lots"}, "t-1")
    err = info.value
    assert (err.status, err.code, err.field) == (status, code, field)
    assert isinstance(err, UserInputError)  # the CLI prints it as one line, exit 2
    assert len(script.requests) == 1  # a refusal is never retried, request id or not


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(404, content=b"<html>not found</html>"),
        httpx.Response(404, json={"detail": "Not Found"}),
        httpx.Response(404, json={"error": {"code": 7, "message": "x"}}),
    ],
)
def test_a_4xx_that_is_not_the_services_json_still_says_what_happened(response):
    with pytest.raises(ServiceError, match="HTTP 404") as info:
        call("sync", Script(response), "routers")
    assert info.value.code == "http_404" and info.value.field is None


@pytest.mark.parametrize(
    "exc",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.TooManyRedirects("loop")],
)
def test_transport_failures_are_ours_not_httpx(exc):
    with pytest.raises(ServiceUnavailableError) as info:
        call("sync", Script(exc, exc, exc), "route", "x", {}, "t-1")
    assert isinstance(info.value, HybridRouteError)
    assert not isinstance(info.value, httpx.HTTPError)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "http://127.0.0.1:9/v1/route" in str(info.value)


def test_messages_name_the_url_without_credentials_or_the_body():
    script = Script(httpx.ConnectError("refused"))
    with (
        RouterClient(
            "http://user:s3cret@127.0.0.1:9", transport=httpx.MockTransport(script), retries=0
        ) as c,
        pytest.raises(ServiceUnavailableError) as info,
    ):
        c.route("my card number is 4111", {"amount": 1})
    text = str(info.value)
    assert "s3cret" not in text and "4111" not in text and "127.0.0.1:9/v1/route" in text
    assert "s3cret" not in repr(c)


@pytest.mark.parametrize(
    ("facts", "match"),
    [({"amount": float("nan")}, "not valid JSON"), ({"when": object()}, "JSON cannot carry")],
)
def test_facts_json_cannot_carry_are_refused_before_sending(facts, match):
    script = Script()
    with pytest.raises(InputError, match=match):
        call("sync", script, "route", "x", facts, "t-1")
    assert script.requests == []


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://host", ValueError),
        ("127.0.0.1:8080", ValueError),
        ("http://", ValueError),
        (8080, TypeError),
    ],
)
def test_the_base_url_is_checked(url, error):
    with pytest.raises(error):
        RouterClient(url)


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), "10"])
def test_the_timeout_is_checked(timeout):
    with pytest.raises((TypeError, ValueError)):
        RouterClient(URL, timeout=timeout)


def test_import_hybridroute_does_not_import_the_client():
    code = "import sys, hybridroute; print('hybridroute.client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False"
