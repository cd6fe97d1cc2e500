"""The routing endpoints against a SQLite log: answers, the log, dedupe, health."""

from __future__ import annotations

import threading

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.service import ServiceConfig, create_app

from .helpers import PARCEL, REFUND, RULE, TEXTS, log_rows, state

pytestmark = pytest.mark.service


def test_route_answers_the_logged_decision(make_app, tmp_path):
    client = make_app(tmp_path)
    r = client.post("/v1/route", json={**PARCEL, "request_id": "t-1"})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"decision_id", "duplicate", "decision"}
    assert body["duplicate"] is False
    decision = Decision.from_dict(body["decision"], verify_hash=True)
    assert decision.selected_destination == "order_status"
    assert decision.router_version == "1"
    rows = log_rows(tmp_path)
    assert [(row["decision_id"], row["role"], row["item_id"]) for row in rows] == [
        (body["decision_id"], "live", "t-1")
    ]
    assert rows[0]["record"] == body["decision"]


@pytest.mark.parametrize("item", [PARCEL, REFUND, RULE, {"text": None, "facts": {}}, {}])
def test_route_matches_the_library(make_app, tmp_path, bundles, item):
    from hybridroute.router import load_router

    client = make_app(tmp_path)
    body = client.post("/v1/route", json=item).json()
    expected = load_router(bundles["v1"]).route(item.get("facts"), item.get("text"))
    got = body["decision"]
    for key in ("stage", "selected_destination", "reason_code", "snapshot_hash", "rule_id"):
        assert got[key] == expected.to_dict()[key]


def test_repeated_request_id_returns_the_stored_decision(make_app, tmp_path):
    client = make_app(tmp_path)
    first = client.post("/v1/route", json={**PARCEL, "request_id": "same"}).json()
    again = client.post("/v1/route", json={**PARCEL, "request_id": "same"}).json()
    other_input = client.post("/v1/route", json={**REFUND, "request_id": "same"})
    assert again["duplicate"] is True and again["decision_id"] == first["decision_id"]
    assert again["decision"] == first["decision"]  # the stored one, not a new routing
    assert other_input.status_code == 409  # another request under a logged id
    no_id = [client.post("/v1/route", json=PARCEL).json() for _ in range(2)]
    assert [b["duplicate"] for b in no_id] == [False, False]
    assert len(log_rows(tmp_path)) == 3


def test_concurrent_repeats_of_one_request_id_log_one_row(make_app, tmp_path):
    client = make_app(tmp_path)
    answers: list[dict] = []

    def send() -> None:
        answers.append(client.post("/v1/route", json={**PARCEL, "request_id": "race"}).json())

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(answers) == 8
    assert len({a["decision_id"] for a in answers}) == 1
    assert sum(not a["duplicate"] for a in answers) == 1
    assert len(log_rows(tmp_path)) == 1


def test_batch_routes_in_order_and_logs_every_item(make_app, tmp_path):
    client = make_app(tmp_path)
    items = [
        {"text": t, "facts": {"amount": i}, "request_id": f"b-{i}"} for i, t in enumerate(TEXTS)
    ]
    r = client.post("/v1/route/batch", json={"items": items})
    assert r.status_code == 200
    results = r.json()["results"]
    assert [res["decision"]["input_snapshot"]["text"] for res in results] == TEXTS
    rows = log_rows(tmp_path)
    assert [row["item_id"] for row in rows] == [f"b-{i}" for i in range(len(TEXTS))]
    assert [row["decision_id"] for row in rows] == [res["decision_id"] for res in results]
    again = client.post("/v1/route/batch", json={"items": items[:3]}).json()["results"]
    assert [a["duplicate"] for a in again] == [True] * 3
    assert len(log_rows(tmp_path)) == len(TEXTS)
    assert client.post("/v1/route/batch", json={"items": []}).json() == {"results": []}


def test_every_decision_a_client_received_is_in_the_log(make_app, tmp_path):
    client = make_app(tmp_path)
    received: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        for i in range(15):
            body = {"text": TEXTS[i % len(TEXTS)], "facts": {"amount": i}}
            if i % 2:
                body["request_id"] = f"w{k}-{i}"
            answer = client.post("/v1/route", json=body).json()
            with lock:
                received.append(answer["decision_id"])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(received) == 60
    logged = {row["decision_id"] for row in log_rows(tmp_path)}
    assert set(received) <= logged and len(logged) == 60


def test_classifier_failure_is_a_fallback_decision(make_app, tmp_path, monkeypatch):
    client = make_app(tmp_path)
    router = state(client).routers.current.live.router

    def broken(texts, **kw):
        raise RuntimeError("model server exploded")

    monkeypatch.setattr(router.classifier, "predict_proba", broken)
    body = client.post("/v1/route", json=PARCEL).json()
    assert body["decision"]["stage"] == "fallback"
    assert body["decision"]["detail"]["cause"] == "classifier_error (RuntimeError)"
    metrics = client.get("/metrics").text
    assert 'cause="classifier_error (RuntimeError)"' in metrics


def test_health_ready_and_routers(make_app, tmp_path, bundles):
    client = make_app(tmp_path, shadows=("v2",))
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    routers = client.get("/v1/routers").json()["routers"]
    assert [(r["name"], r["version"], r["role"]) for r in routers] == [
        ("support", "1", "live"),
        ("support", "2", "shadow"),
    ]
    from hybridroute._integrity import file_sha256

    assert routers[0]["manifest_sha256"] == file_sha256(bundles["v1"] / "manifest.json")
    policy = routers[0]["policy"]
    assert policy["certified"] is True and policy["target"] == 0.85 and policy["delta"] == 0.1
    assert isinstance(policy["threshold"], float) and len(policy["model_fingerprint"]) >= 12


def test_readyz_is_503_with_the_reason_when_the_log_is_not_writable(
    make_app, tmp_path, monkeypatch
):
    client = make_app(tmp_path)
    log = state(client).log

    def not_writable(**kw) -> None:
        raise ArtifactError("the log file is read-only", path="decisions.sqlite")

    monkeypatch.setattr(log, "check_writable", not_writable)
    r = client.get("/readyz")
    assert r.status_code == 503
    err = r.json()["error"]
    assert err["code"] == "unavailable" and "read-only" in err["message"]


def test_a_failed_commit_is_a_503_and_nothing_is_answered(make_app, tmp_path, monkeypatch):
    client = make_app(tmp_path)
    log = state(client).log

    def fail(groups):
        raise OSError("disk full")

    monkeypatch.setattr(log, "log_groups", fail)
    r = client.post("/v1/route", json=PARCEL)
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "unavailable"
    assert "decision" not in r.json()


def test_no_cors_unless_configured(make_app, tmp_path):
    client = make_app(tmp_path)
    preflight = {"origin": "https://evil.example", "access-control-request-method": "POST"}
    r = client.options("/v1/route", headers=preflight)
    assert "access-control-allow-origin" not in r.headers
    r = client.post("/v1/route", json=PARCEL, headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers
    other = tmp_path / "cors"
    other.mkdir()
    client = make_app(other, cors_origins=("https://ops.example",))
    r = client.options("/v1/route", headers={**preflight, "origin": "https://ops.example"})
    assert r.headers["access-control-allow-origin"] == "https://ops.example"
    r = client.options("/v1/route", headers=preflight)
    assert r.headers.get("access-control-allow-origin") != "https://evil.example"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"segment_fact": "queue"}, "'queue' is not a fact of router support 1"),
        ({"shadows": ("v1",)}, "the live router's version"),
    ],
)
def test_create_app_refuses_a_bad_config(bundles, tmp_path, kwargs, match):
    shadows = tuple(bundles[s] for s in kwargs.pop("shadows", ()))
    config = ServiceConfig(
        router=bundles["v1"], log=str(tmp_path / "x.sqlite"), shadows=shadows, **kwargs
    )
    with pytest.raises(UserInputError, match=match):
        create_app(config)


def test_create_app_refuses_a_tampered_bundle(bundles, tmp_path):
    config = ServiceConfig(router=bundles["tampered"], log=str(tmp_path / "x.sqlite"))
    with pytest.raises(ArtifactError, match=r"checksum mismatch.*destinations\.json"):
        create_app(config)


def test_the_package_surface_is_small_and_light():
    import subprocess
    import sys

    import hybridroute.service as service

    assert service.__all__ == ["ServiceConfig", "create_app"]
    code = (
        "import sys, hybridroute.service; "
        "print(any(m in sys.modules for m in ('fastapi', 'uvicorn', 'prometheus_client')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_a_large_batch_is_parsed_and_answered_off_the_loop(make_app, tmp_path):
    from hybridroute.service._routes import OFF_LOOP_BYTES, OFF_LOOP_ITEMS

    client = make_app(tmp_path)
    n = OFF_LOOP_ITEMS * 4
    text = "where is my parcel, it was due last week " * 12
    items = [{"text": f"{i} {text}", "facts": {"amount": i}} for i in range(n)]
    import json

    assert len(json.dumps({"items": items})) > OFF_LOOP_BYTES
    results = client.post("/v1/route/batch", json={"items": items}).json()["results"]
    assert [r["decision"]["input_snapshot"]["facts"]["amount"] for r in results] == list(range(n))
    assert len(log_rows(tmp_path)) == n
