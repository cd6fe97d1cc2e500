"""Shadows route every request after its answer, logged with role shadow under the same
request id; /v1/shadow reports the disagreement, and a shadow never changes a live answer."""

from __future__ import annotations

import time

import pytest

from .helpers import PARCEL, RULE, TEXTS, drain_shadows, log_rows, state

pytestmark = pytest.mark.service


def test_shadow_rows_pair_with_live_rows(make_app, tmp_path):
    client = make_app(tmp_path, shadows=("v2",))
    with_id = client.post("/v1/route", json={**PARCEL, "request_id": "s-1"}).json()
    without_id = client.post("/v1/route", json=PARCEL).json()
    batch = client.post(
        "/v1/route/batch", json={"items": [RULE, {**PARCEL, "request_id": "s-2"}]}
    ).json()["results"]
    drain_shadows(client)
    live = log_rows(tmp_path, role="live")
    shadow = log_rows(tmp_path, role="shadow")
    assert [r["item_id"] for r in live] == ["s-1", None, None, "s-2"]
    assert {r["record"]["router_version"] for r in shadow} == {"2"}
    assert sorted(r["item_id"] for r in shadow) == sorted(
        ["s-1", without_id["decision_id"], batch[0]["decision_id"], "s-2"]
    )
    # the live answer is the live router's, whatever the shadow decides
    assert with_id["decision"]["router_version"] == "1"
    assert with_id["decision"]["selected_destination"] == "order_status"
    # a repeated request is not shadowed again
    client.post("/v1/route", json={**PARCEL, "request_id": "s-1"})
    drain_shadows(client)
    assert len(log_rows(tmp_path, role="shadow")) == 4


def test_v1_shadow_reports_disagreement_by_stage_and_reason(make_app, tmp_path):
    client = make_app(tmp_path, shadows=("v2",))
    items = [{"text": t, "facts": {}, "request_id": f"q{i}"} for i, t in enumerate(TEXTS)]
    items.append({**RULE, "request_id": "rule-1"})
    client.post("/v1/route/batch", json={"items": items})
    drain_shadows(client)
    report = client.get("/v1/shadow").json()
    assert report["live"] == {"name": "support", "version": "1"}
    assert report["shadows"] == [{"name": "support", "version": "2"}]
    (comp,) = report["comparisons"]
    assert comp["live"]["version"] == "1" and comp["shadow"]["version"] == "2"
    assert comp["n"] == len(items)
    # v2 cannot certify its target: every model decision differs, the rule one agrees
    assert comp["by_stage"]["rule"]["destination"] == 0
    model = comp["by_stage"].get("model", {"n": 0, "destination": 0})
    assert model["destination"] == model["n"] > 0
    assert comp["disagree"]["destination"] >= model["n"]
    assert sum(row["n"] for row in comp["by_reason_code"].values()) == len(items)
    filtered = client.get("/v1/shadow", params={"shadow_version": "9"}).json()
    assert filtered["comparisons"] == []
    r = client.get("/v1/shadow", params={"version": "2"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "version"


def test_a_failing_shadow_never_touches_the_live_answer(make_app, tmp_path, monkeypatch):
    client = make_app(tmp_path, shadows=("v2",))
    shadow = state(client).routers.current.shadows[0].router

    def broken(items):
        raise RuntimeError("shadow bug")

    monkeypatch.setattr(shadow, "route_many", broken)
    r = client.post("/v1/route", json=PARCEL)
    assert r.status_code == 200 and r.json()["decision"]["selected_destination"] == "order_status"
    drain_shadows(client)
    assert log_rows(tmp_path, role="shadow") == []
    assert len(log_rows(tmp_path, role="live")) == 1


@pytest.mark.parametrize("seam", ["check", "route_many"])
def test_a_shadow_that_refuses_an_item_routes_the_others(make_app, tmp_path, monkeypatch, seam):
    """Refused where a schema refuses (the shadow's check of each request) or later, in
    routing (e.g. an evidence source its policy lacks): the other items are routed."""
    from hybridroute.exceptions import FactsError

    client = make_app(tmp_path, shadows=("v2",))
    shadow = state(client).routers.current.shadows[0].router
    real = getattr(shadow, seam)

    def picky(arg):
        items = arg if seam == "route_many" else [arg]
        # a request, or a CheckedRequest holding one
        if any(getattr(it, "request", it).text == "hello" for it in items):
            raise FactsError("this shadow's schema refuses it")
        return real(arg)

    monkeypatch.setattr(shadow, seam, picky)
    items = [{"text": t, "facts": {}} for t in ("where is my parcel", "hello", "refund me")]
    client.post("/v1/route/batch", json={"items": items})
    drain_shadows(client)
    assert len(log_rows(tmp_path, role="shadow")) == 2
    assert 'hybridroute_shadow_errors_total{version="2"} 1.0' in client.get("/metrics").text


def test_a_full_shadow_queue_drops_and_counts(make_app, tmp_path, monkeypatch):
    client = make_app(tmp_path, shadows=("v2",), shadow_queue=1)
    shadow = state(client).routers.current.shadows[0].router
    real = shadow.route_many

    def slow(items):
        time.sleep(0.3)
        return real(items)

    monkeypatch.setattr(shadow, "route_many", slow)
    start = time.perf_counter()
    for _ in range(4):
        assert client.post("/v1/route", json=PARCEL).status_code == 200
    assert time.perf_counter() - start < 1.0  # live answers never waited for the shadow
    drain_shadows(client)
    text = client.get("/metrics").text
    dropped = [ln for ln in text.splitlines() if ln.startswith("hybridroute_shadow_dropped_total")]
    assert dropped and float(dropped[0].split()[-1]) >= 1
    assert 1 <= len(log_rows(tmp_path, role="shadow")) <= 3


def test_v1_shadow_pairs_requests_without_a_request_id(make_app, tmp_path):
    client = make_app(tmp_path, shadows=("v2",))
    client.post("/v1/route", json=PARCEL)
    client.post("/v1/route/batch", json={"items": [RULE, {"text": "refund me", "facts": {}}]})
    drain_shadows(client)
    report = client.get("/v1/shadow").json()
    # the shadow rows carry the live decision id as their request id: they pair
    assert [c["n"] for c in report["comparisons"]] == [3]
    assert report["unpaired_shadow_decisions"] == 0
