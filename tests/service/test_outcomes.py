"""The service's review loop: audited routes (the inclusion probability recorded, routing
unchanged), ``GET /v1/audits``, ``POST /v1/outcomes`` (all or nothing, 422 naming
``outcomes[i].field``), both behind the admin token."""

from __future__ import annotations

import pytest

from hybridroute.exceptions import UserInputError
from hybridroute.records import AUDIT_KEY_ENV, AuditSampler

from .helpers import PARCEL, RULE, TEXTS, log_rows

pytestmark = pytest.mark.service

TOKEN = "t0ken-" + "y" * 30
AUTH = {"authorization": f"Bearer {TOKEN}"}
ITEMS = [{"text": t, "facts": {"amount": 20}, "request_id": f"r{i}"} for i, t in enumerate(TEXTS)]
ITEMS.append({**RULE, "request_id": "rule"})


@pytest.fixture
def audited(make_app, tmp_path, monkeypatch):
    """An app auditing every auto-routed decision, after routing :data:`ITEMS`."""
    monkeypatch.setenv(AUDIT_KEY_ENV, "service-audit-key")
    client = make_app(tmp_path, token=TOKEN, audit_rate=1.0)
    r = client.post("/v1/route/batch", json={"items": ITEMS})
    assert r.status_code == 200
    return client, r.json()["results"]


def test_audited_decisions_are_listed_and_closed_by_outcomes(audited, tmp_path):
    client, results = audited
    rows = {r["decision_id"]: r for r in log_rows(tmp_path)}
    auto = [r["decision_id"] for r in results if r["decision"]["stage"] == "model"]
    assert auto and len(auto) < len(results)
    for r in results:
        row = rows[r["decision_id"]]
        assert row["audit_p"] == (1.0 if row["stage"] == "model" else 0.0)
        assert row["audited"] == (row["stage"] == "model")
    got = client.get("/v1/audits", headers=AUTH)
    assert got.status_code == 200
    doc = got.json()
    assert doc["count"] == len(auto) and [p["decision_id"] for p in doc["pending"]] == auto
    assert doc["pending"][0]["text"] == rows[auto[0]]["record"]["input_snapshot"]["text"]
    body = {
        "outcomes": [
            {"decision_id": auto[0], "gold_intent": "order_status", "source": "audit"},
            {"request_id": "r1", "router": "support", "router_version": "1",
             "gold_next_step": "refund_request", "source": "audit"},
        ]
    }  # fmt: skip
    posted = client.post("/v1/outcomes", json=body, headers=AUTH)
    assert posted.status_code == 200
    assert posted.json() == {"added": 2, "already_present": 0, "conflicts": []}
    again = client.post("/v1/outcomes", json=body, headers=AUTH)  # a retry: idempotent
    assert again.json() == {"added": 0, "already_present": 2, "conflicts": []}
    closed = {auto[0], next(r["decision_id"] for r in results if r["decision"] and
                            rows[r["decision_id"]]["item_id"] == "r1")}  # fmt: skip
    left = client.get("/v1/audits", headers=AUTH).json()["pending"]
    assert [p["decision_id"] for p in left] == [d for d in auto if d not in closed]
    one = client.get("/v1/audits", params={"limit": 1, "router_version": "1"}, headers=AUTH)
    assert one.json()["count"] == 1
    assert client.get("/v1/audits", params={"router_version": "9"}, headers=AUTH).json() == {
        "count": 0, "pending": []
    }  # fmt: skip


def test_a_conflicting_outcome_is_reported(audited):
    client, results = audited
    first = results[0]["decision_id"]
    for gold, conflicts in (("order_status", 0), ("refund_request", 1)):
        body = {"outcomes": [{"decision_id": first, "gold_intent": gold, "source": "human_review"}]}
        r = client.post("/v1/outcomes", json=body, headers=AUTH)
        assert r.status_code == 200 and len(r.json()["conflicts"]) == conflicts
    assert r.json()["conflicts"][0]["previous"] == [
        {"gold_intent": "order_status", "gold_next_step": None}
    ]


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ({"source": "oracle"}, "outcomes[1].source", "must be one of"),
        ({"decision_id": "f" * 32}, "outcomes[1].decision_id", "holds no decision"),
        ({"gold_intent": None}, "outcomes[1].gold_intent", "no gold given"),
        ({"at": "soon"}, "outcomes[1].at", "not an ISO 8601 time"),
        ({"gold_intent": "no_such_label"}, "outcomes[1].gold_intent", "is not a label of router"),
        ({"gold_next_step": "rm -rf /"}, "outcomes[1].gold_next_step", "is not a destination"),
        ({"at": "2000-01-01T00:00:00Z"}, "outcomes[1].at", "is before decision"),
        ({"extra": 1}, "outcomes[1].extra", "not an outcome field"),
    ],
)
def test_a_bad_outcome_is_a_422_naming_it_and_nothing_is_written(audited, bad, field, words):
    client, results = audited
    good = {"decision_id": results[0]["decision_id"], "gold_intent": "order_status",
            "source": "human_review"}  # fmt: skip
    r = client.post("/v1/outcomes", json={"outcomes": [good, {**good, **bad}]}, headers=AUTH)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "invalid_input" and error["field"] == field
    assert error["message"].startswith(f"{field}: ") and words in error["message"]
    assert client.app.state.hybridroute.log.outcomes() == []


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"outcomes": {}}, 422, "outcomes"),
        ({"outcomes": [], "more": 1}, 422, "more"),
        ({"outcomes": ["x"]}, 422, "outcomes[0]"),
        ({"outcomes": [{}] * 3}, 413, "outcomes"),
    ],
)
def test_a_bad_body_is_refused(make_app, tmp_path, body, status, field):
    client = make_app(tmp_path, token=TOKEN, max_batch=2)
    r = client.post("/v1/outcomes", json=body, headers=AUTH)
    assert r.status_code == status and r.json()["error"]["field"] == field


@pytest.mark.parametrize(("method", "path"), [("post", "/v1/outcomes"), ("get", "/v1/audits")])
def test_review_endpoints_need_the_admin_token(make_app, tmp_path, method, path):
    kw = {"json": {"outcomes": []}} if method == "post" else {}
    off = make_app(tmp_path / "off")
    r = getattr(off, method)(path, headers=AUTH, **kw)
    assert r.status_code == 403 and r.json()["error"]["code"] == "admin_disabled"
    on = make_app(tmp_path / "on", token=TOKEN, admin=False)  # on with several workers too
    assert getattr(on, method)(path, **kw).status_code == 401
    assert (
        getattr(on, method)(path, headers={"authorization": "Bearer no"}, **kw).status_code == 401
    )
    assert getattr(on, method)(path, headers=AUTH, **kw).status_code == 200


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "x"}, {"page": "2"}])
def test_bad_audit_queries_are_422(make_app, tmp_path, query):
    client = make_app(tmp_path, token=TOKEN)
    r = client.get("/v1/audits", params=query, headers=AUTH)
    assert r.status_code == 422 and r.json()["error"]["field"] == next(iter(query))


def test_an_audit_never_changes_what_is_routed(make_app, tmp_path, monkeypatch):
    monkeypatch.setenv(AUDIT_KEY_ENV, "k")
    answers = []
    for rate in (0.0, 0.5, 1.0):
        client = make_app(tmp_path / str(rate), audit_rate=rate)
        r = client.post("/v1/route/batch", json={"items": ITEMS})
        one = client.post("/v1/route", json=PARCEL)
        assert r.status_code == one.status_code == 200
        answers.append([x["decision"] for x in r.json()["results"]] + [one.json()["decision"]])
        rows = log_rows(tmp_path / str(rate))
        if rate:  # and the selection is the keyed hash of the stored decision id
            sampler = AuditSampler(rate, "k")
            assert [bool(x["audited"]) for x in rows] == [
                sampler.mark(x["decision_id"], x["stage"])[1] for x in rows
            ]
        else:
            assert all(x["audit_p"] is None for x in rows)
    assert answers[0] == answers[1] == answers[2]


def test_an_audit_rate_without_its_key_fails_at_start(bundles, tmp_path, monkeypatch):
    from hybridroute.service import ServiceConfig, create_app

    monkeypatch.delenv(AUDIT_KEY_ENV, raising=False)
    config = ServiceConfig(router=bundles["v1"], log=str(tmp_path / "l.sqlite"), audit_rate=0.02)
    with pytest.raises(UserInputError, match=f"set {AUDIT_KEY_ENV}"):
        create_app(config)
    assert ServiceConfig.from_json(config.to_json()).audit_rate == 0.02  # travels to workers


@pytest.mark.parametrize("rate", [-0.5, 2, "0.1", float("inf")])
def test_a_bad_audit_rate_names_the_config_field(bundles, tmp_path, rate):
    from hybridroute.service import ServiceConfig

    with pytest.raises(UserInputError, match="field 'audit_rate': must be"):
        ServiceConfig(router=bundles["v1"], log=str(tmp_path / "l.sqlite"), audit_rate=rate)


def test_the_live_guarantee_is_served_as_json_gauges_and_on_the_page(audited, monkeypatch):
    from prometheus_client.parser import text_string_to_metric_families

    from hybridroute.service import _monitor

    client, results = audited
    auto = [r for r in results if r["decision"]["stage"] == "model"]
    monkeypatch.setattr(_monitor, "REFRESH_S", 0.0)  # recompute on every look
    before = client.get("/v1/monitor").json()
    assert before["status"] == "insufficient" and before["labels"] == 0
    assert before["pending"] == before["audited"] == len(auto)
    outcomes = [
        {
            "decision_id": r["decision_id"],
            "gold_intent": r["decision"]["label"],
            "source": "audit",
        }
        for r in auto
    ]
    assert client.post("/v1/outcomes", json={"outcomes": outcomes}, headers=AUTH).status_code == 200
    state = client.get("/v1/monitor").json()
    assert state["labels"] == len(auto) and state["pending"] == 0
    assert state["precision"]["estimate"] == 1.0 and state["router_version"] == "1"
    gauges = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(client.get("/metrics").text)
        for s in f.samples
        if s.name.startswith("hybridroute_monitor")
    }
    key = (("router", state["router"]), ("version", "1"))
    assert gauges[("hybridroute_monitor_audit_labels", key)] == len(auto)
    status = {k[1][1][1]: v for k, v in gauges.items() if k[0] == "hybridroute_monitor_status"}
    assert status[state["status"]] == 1.0 and sum(status.values()) == 1.0
    page = client.get("/").text
    assert f'id="monitor-status">{state["status"]}<' in page
    assert f'data-count="{len(auto)}"' in page


def test_without_audits_the_monitor_says_why(make_app, tmp_path):
    client = make_app(tmp_path)
    state = client.get("/v1/monitor").json()
    assert state["status"] == "unavailable" and "--audit-rate" in state["reason"]
    assert 'id="monitor-status">unavailable<' in client.get("/").text
