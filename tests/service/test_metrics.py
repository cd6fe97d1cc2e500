"""/metrics parses as Prometheus text and counts what was routed; logs never hold bodies."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .helpers import PARCEL, TEXTS, drain_shadows, state

pytestmark = pytest.mark.service

ASK = {
    "text": "where is my order",
    "facts": {"action": "lookup_order", "missing_user_fields": ["order_id"]},
}
REVIEW = {"text": "refund me", "facts": {"action": "issue_refund", "amount": 900}}


def samples(client) -> dict[str, list]:
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def total(found: dict[str, list], name: str, **labels: str) -> float:
    return sum(
        s.value for s in found.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_metrics_count_decisions_segments_and_latency(make_app, tmp_path):
    client = make_app(tmp_path, shadows=("v2",), segment_fact="action")
    for _ in range(3):
        client.post("/v1/route", json=ASK)
    for _ in range(2):
        client.post("/v1/route", json=REVIEW)
    client.post("/v1/route/batch", json={"items": [{"text": t, "facts": {}} for t in TEXTS]})
    client.post("/v1/route", json={**PARCEL, "request_id": "d"})
    client.post("/v1/route", json={**PARCEL, "request_id": "d"})
    client.post("/v1/route", json={"facts": {"amount": -1}})
    drain_shadows(client)
    m = samples(client)
    n_live = 3 + 2 + len(TEXTS) + 1
    assert total(m, "hybridroute_decisions_total", role="live", version="1") == n_live
    assert total(m, "hybridroute_decisions_total", role="shadow", version="2") == n_live
    assert total(m, "hybridroute_decisions_total", role="live", destination="ask_user") >= 3
    assert (
        total(m, "hybridroute_segment_decisions_total", segment="lookup_order", outcome="ask_user")
        == 3
    )
    assert (
        total(
            m, "hybridroute_segment_decisions_total", segment="issue_refund", outcome="human_review"
        )
        == 2
    )
    assert total(m, "hybridroute_segment_decisions_total") == n_live
    assert total(m, "hybridroute_duplicate_requests_total", version="1") == 1
    assert total(m, "hybridroute_request_seconds_count", endpoint="/v1/route") == 8
    assert total(m, "hybridroute_request_seconds_count", endpoint="/v1/route/batch") == 1
    assert total(m, "hybridroute_requests_total", endpoint="/v1/route", status="422") == 1
    assert total(m, "hybridroute_route_seconds_count", role="live") == 7 + 1
    assert total(m, "hybridroute_log_commit_decisions_sum") == 2 * n_live + 1
    assert total(m, "hybridroute_routers", role="live", version="1") == 1


def test_segment_values_are_capped(make_app, tmp_path):
    client = make_app(tmp_path, segment_fact="amount", max_segments=3)
    for amount in range(6):
        client.post("/v1/route", json={"text": "where is my parcel", "facts": {"amount": amount}})
    segments = {s.labels["segment"] for s in samples(client)["hybridroute_segment_decisions_total"]}
    assert segments == {"0", "1", "2", "other"}


def test_same_snapshot_conflicts_and_fallback_causes(make_app, tmp_path, monkeypatch):
    client = make_app(tmp_path)
    client.post("/v1/route", json=PARCEL)
    clf = state(client).routers.current.live.router.classifier

    def down(texts):
        raise TimeoutError("model timed out")

    monkeypatch.setattr(clf, "predict_proba", down)
    client.post("/v1/route", json=PARCEL)  # same snapshot, same version, another destination
    client.post("/v1/route", json=PARCEL)  # again unlike the first decision: counted too
    m = samples(client)
    assert total(m, "hybridroute_same_snapshot_conflicts_total", version="1") == 2
    assert total(m, "hybridroute_fallbacks_total", cause="classifier_error (TimeoutError)") == 2


def test_every_app_has_its_own_registry(make_app, tmp_path):
    import prometheus_client

    one = tmp_path / "one"
    two = tmp_path / "two"
    one.mkdir()
    two.mkdir()
    a, b = make_app(one), make_app(two)
    a.post("/v1/route", json=PARCEL)
    assert total(samples(a), "hybridroute_decisions_total") == 1
    assert total(samples(b), "hybridroute_decisions_total") == 0
    assert b"hybridroute_decisions" not in prometheus_client.generate_latest()


SECRET = "sk-proj-" + "Q" * 40
BODY_TEXT = f"my key is {SECRET} please route this very distinctive sentence"


def test_bodies_never_reach_the_logs(make_app, tmp_path, monkeypatch, caplog):
    with caplog.at_level("DEBUG"):
        client = make_app(tmp_path, shadows=("v2",))
        client.post("/v1/route", json={"text": BODY_TEXT, "facts": {"amount": 1}})
        client.post("/v1/route", json={"text": BODY_TEXT, "facts": {"amount": -1}})
        client.post("/v1/route/batch", json={"items": [{"text": BODY_TEXT, "facts": {}, "x": 1}]})
        drain_shadows(client)
        clf = state(client).routers.current.live.router.classifier

        def quoting(texts):  # a classifier whose error quotes the item
            raise ValueError(f"cannot classify {texts[0]!r}")

        monkeypatch.setattr(clf, "predict_proba", quoting)
        client.post("/v1/route", json={"text": BODY_TEXT, "facts": {"amount": 2}})
    assert caplog.records, "nothing was logged at all"
    assert SECRET not in caplog.text
    logged_by_service = [r for r in caplog.records if r.name.startswith("hybridroute.service")]
    assert all("distinctive" not in r.getMessage() for r in logged_by_service)


def test_a_kept_child_is_the_metrics_own_and_counts_there():
    from hybridroute.service._metrics import ServiceMetrics

    metrics = ServiceMetrics(None, 5)
    first = metrics.child(metrics.requests, "/v1/route", "200")
    assert first is metrics.requests.labels("/v1/route", "200")
    assert metrics.child(metrics.requests, "/v1/route", "200") is first
    for status in (200, 200, 422):
        metrics.on_request("/v1/route", status, 0.002)
    assert (
        metrics.registry.get_sample_value(
            "hybridroute_requests_total", {"endpoint": "/v1/route", "status": "200"}
        )
        == 2.0
    )
    assert (
        metrics.registry.get_sample_value(
            "hybridroute_requests_total", {"endpoint": "/v1/route", "status": "422"}
        )
        == 1.0
    )
    assert (
        metrics.registry.get_sample_value(
            "hybridroute_request_seconds_count", {"endpoint": "/v1/route"}
        )
        == 3.0
    )
