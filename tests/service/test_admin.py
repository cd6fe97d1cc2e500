"""Admin endpoints: off without a token, 401 with a wrong one, reload (a tampered bundle
refused) and promote (atomic: an in-flight request finishes on its router)."""

from __future__ import annotations

import threading

import pytest

from .helpers import PARCEL, state

pytestmark = pytest.mark.service

TOKEN = "t0ken-" + "x" * 30


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/admin/reload", {"path": "/nowhere"}), ("/v1/admin/promote", {"version": "2"})],
)
def test_without_a_token_admin_is_off(make_app, tmp_path, path, body, caplog):
    with caplog.at_level("INFO"):
        client = make_app(tmp_path)
    assert "admin endpoints are off (HYBRIDROUTE_ADMIN_TOKEN is not set)" in caplog.text
    for headers in ({}, auth(), auth("")):
        r = client.post(path, json=body, headers=headers)
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "admin_disabled"


def test_admin_false_turns_admin_off_whatever_the_environment(make_app, tmp_path):
    client = make_app(tmp_path, token=TOKEN, admin=False)
    r = client.post("/v1/admin/promote", json={"version": "2"}, headers=auth())
    assert r.status_code == 403 and "multi-worker" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": TOKEN},
        {"authorization": f"Basic {TOKEN}"},
        {"authorization": "Bearer"},
        {"authorization": "Bearer wrong"},
        {"authorization": f"Bearer {TOKEN}x"},
        {"authorization": f"Bearer {TOKEN[:-1]}"},
    ],
)
def test_a_wrong_token_is_401(make_app, tmp_path, headers):
    client = make_app(tmp_path, token=TOKEN)
    r = client.post("/v1/admin/promote", json={"version": "2"}, headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in r.text


def test_reload_then_promote(make_app, tmp_path, bundles):
    client = make_app(tmp_path, token=TOKEN)
    r = client.post("/v1/admin/reload", json={"path": str(bundles["v2"])}, headers=auth())
    assert r.status_code == 200, r.text
    assert r.json()["loaded"]["role"] == "shadow"
    roles = [(x["version"], x["role"]) for x in client.get("/v1/routers").json()["routers"]]
    assert roles == [("1", "live"), ("2", "shadow")]
    before = client.post("/v1/route", json=PARCEL).json()["decision"]["router_version"]
    r = client.post("/v1/admin/promote", json={"version": "2"}, headers=auth())
    assert r.status_code == 200, r.text
    assert r.json()["live"]["version"] == "2" and r.json()["previous"]["version"] == "1"
    roles = [(x["version"], x["role"]) for x in client.get("/v1/routers").json()["routers"]]
    assert roles == [("2", "live"), ("1", "shadow")]
    after = client.post("/v1/route", json=PARCEL).json()["decision"]["router_version"]
    assert (before, after) == ("1", "2")
    metrics = client.get("/metrics").text
    assert 'hybridroute_routers{name="support",role="live",version="2"} 1.0' in metrics


def test_a_tampered_bundle_is_refused_with_the_loader_words(make_app, tmp_path, bundles):
    client = make_app(tmp_path, token=TOKEN)
    r = client.post("/v1/admin/reload", json={"path": str(bundles["tampered"])}, headers=auth())
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["field"] == "path"
    assert "checksum mismatch" in err["message"] and "destinations.json" in err["message"]
    missing = client.post("/v1/admin/reload", json={"path": str(tmp_path / "no")}, headers=auth())
    assert (
        missing.status_code == 422 and "not a router bundle" in missing.json()["error"]["message"]
    )
    assert [x["version"] for x in client.get("/v1/routers").json()["routers"]] == ["1"]


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/v1/admin/promote", {"version": "7"}, 404, "version"),
        ("/v1/admin/promote", {"version": "1"}, 422, "version"),
        ("/v1/admin/promote", {}, 422, "version"),
        ("/v1/admin/promote", {"version": 2}, 422, "version"),
        ("/v1/admin/promote", {"version": "2", "force": True}, 422, "force"),
        ("/v1/admin/reload", {"path": "x", "role": "boss"}, 422, "role"),
        ("/v1/admin/reload", {"path": ["x"]}, 422, "path"),
    ],
)
def test_bad_admin_requests(make_app, tmp_path, path, body, status, field):
    client = make_app(tmp_path, token=TOKEN)
    r = client.post(path, json=body, headers=auth())
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field


def test_reload_as_live_swaps_at_once(make_app, tmp_path, bundles):
    client = make_app(tmp_path, token=TOKEN)
    r = client.post(
        "/v1/admin/reload", json={"path": str(bundles["v2"]), "role": "live"}, headers=auth()
    )
    assert r.status_code == 200 and r.json()["loaded"]["role"] == "live"
    assert client.post("/v1/route", json=PARCEL).json()["decision"]["router_version"] == "2"


def test_an_in_flight_request_finishes_on_the_router_it_started_with(
    make_app, tmp_path, bundles, monkeypatch
):
    client = make_app(tmp_path, shadows=("v2",), token=TOKEN)
    live = state(client).routers.current.live.router
    real = live.route_many
    entered, release = threading.Event(), threading.Event()

    def held(items):
        entered.set()
        assert release.wait(10)
        return real(items)

    monkeypatch.setattr(live, "route_many", held)
    answer: dict = {}
    # a batch: routed on a worker thread (one item of the local classifier is routed on
    # the event loop, where no promotion can interleave with it)
    batch = {"items": [PARCEL, PARCEL]}
    t = threading.Thread(
        target=lambda: answer.update(client.post("/v1/route/batch", json=batch).json())
    )
    t.start()
    assert entered.wait(10)
    r = client.post("/v1/admin/promote", json={"version": "2"}, headers=auth())
    assert r.status_code == 200
    release.set()
    t.join(timeout=10)
    assert [x["decision"]["router_version"] for x in answer["results"]] == ["1", "1"]
    monkeypatch.setattr(live, "route_many", real)
    assert client.post("/v1/route", json=PARCEL).json()["decision"]["router_version"] == "2"


def test_only_the_local_classifier_routes_one_item_on_the_event_loop(make_app, tmp_path):
    import dataclasses

    client = make_app(tmp_path)
    loaded = state(client).routers.current.live
    assert loaded.inline  # the fixture's bundle: the local classifier

    class SlowRemote:  # stands for an LLM, a cascade or an embedding model
        pass

    router = loaded.router
    original = router.classifier
    try:
        router.classifier = SlowRemote()
        assert not dataclasses.replace(loaded).inline
    finally:
        router.classifier = original
