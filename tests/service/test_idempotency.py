"""A request id is an idempotency key bound to its request: the same id with the same
request answers the stored decision, the same id with another request is refused (409),
in single routes, batches, under concurrency, across replicas and through the CLI."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import uvicorn_thread
from .helpers import PARCEL, drain_shadows, log_rows

pytestmark = pytest.mark.service

FIRST = {"text": "my parcel never arrived", "facts": {"amount": 20}}
# the ways another request can come under the same id
OTHERS = {
    "the issue's": {"text": "refund me", "facts": {"has_permission": False, "amount": 5000}},
    "text": {"text": "my parcel never arrived!", "facts": {"amount": 20}},
    "one fact": {"text": "my parcel never arrived", "facts": {"amount": 21}},
    "no text": {"text": None, "facts": {"amount": 20}},
    "no facts": {"text": "my parcel never arrived"},
    "evidence": {
        "text": "my parcel never arrived",
        "facts": {"amount": 20},
        "evidence": {"required_points": ["where"], "items": []},
    },
}


def post(client, body, rid):
    return client.post("/v1/route", json={**body, "request_id": rid})


@pytest.mark.parametrize("other", list(OTHERS))
def test_another_request_under_a_logged_id_is_refused(make_app, tmp_path, other):
    client = make_app(tmp_path)
    first = post(client, FIRST, "t-1")
    assert first.status_code == 200 and first.json()["duplicate"] is False
    refused = post(client, OTHERS[other], "t-1")
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "conflict" and error["field"] == "request_id"
    assert "'t-1'" in error["message"] and "another request" in error["message"]
    assert "decision" not in refused.json()  # never the other input's decision
    again = post(client, FIRST, "t-1")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["decision_id"] == first.json()["decision_id"]
    assert [r["item_id"] for r in log_rows(tmp_path)] == ["t-1"]


def test_defaults_make_no_difference(make_app, tmp_path):
    """``{"amount": 0}`` and ``{}`` are one request: the snapshot holds the defaults."""
    client = make_app(tmp_path)
    a = post(client, {"text": "hello", "facts": {}}, "d-1")
    b = post(client, {"text": "hello", "facts": {"amount": 0}}, "d-1")
    assert a.status_code == b.status_code == 200 and b.json()["duplicate"] is True


def test_a_batch_with_one_conflict_is_refused_whole(make_app, tmp_path):
    client = make_app(tmp_path)
    assert post(client, FIRST, "t-1").status_code == 200
    items = [
        {**PARCEL, "request_id": "b-0"},
        {**OTHERS["the issue's"], "request_id": "t-1"},
        {"text": "hello", "facts": {}},
    ]
    refused = client.post("/v1/route/batch", json={"items": items})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "conflict" and error["field"] == "items[1].request_id"
    assert [r["item_id"] for r in log_rows(tmp_path)] == ["t-1"]  # nothing of the batch
    items[1] = {**FIRST, "request_id": "t-1"}  # the same request: fine
    ok = client.post("/v1/route/batch", json={"items": items})
    assert ok.status_code == 200
    assert [r["duplicate"] for r in ok.json()["results"]] == [False, True, False]
    assert len(log_rows(tmp_path)) == 3


def test_concurrent_requests_under_one_id(make_app, tmp_path):
    """Many clients at once, two different requests under each id: per id one request
    wins (answered 200, fresh once, then duplicates), every other one gets 409."""
    client = make_app(tmp_path)
    bodies = [FIRST, OTHERS["the issue's"]]

    def one(k: int):
        rid = f"c-{k % 5}"
        body = bodies[(k // 5) % 2]
        r = post(client, body, rid)
        return rid, body is FIRST, r.status_code, r.json()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(80)))
    rows = {r["item_id"]: r for r in log_rows(tmp_path)}
    assert len(rows) == 5
    for rid, is_first, status, body in answers:
        stored_first = rows[rid]["record"]["input_snapshot"]["text"] == FIRST["text"]
        if is_first == stored_first:
            assert status == 200 and body["decision_id"] == rows[rid]["decision_id"]
        else:
            assert status == 409 and body["error"]["code"] == "conflict"
    fresh = [b for _, _, s, b in answers if s == 200 and not b["duplicate"]]
    assert len(fresh) == 5


def test_a_shadow_conflict_never_touches_the_live_answer(make_app, tmp_path):
    from hybridroute.records import open_log

    client = make_app(tmp_path, shadows=("v2",))
    # the shadow version already holds s-1 for another request (e.g. a replayed log)
    shadow_router = client.app.state.hybridroute.routers.current.shadows[0].router
    other = shadow_router.route(OTHERS["the issue's"]["facts"], OTHERS["the issue's"]["text"])
    with open_log(f"sqlite:///{tmp_path / 'decisions.sqlite'}") as log:
        log.log_many([(other, "s-1", "shadow")])
    r = post(client, FIRST, "s-1")
    assert r.status_code == 200 and r.json()["duplicate"] is False
    drain_shadows(client)
    roles = sorted((row["role"], row["item_id"]) for row in log_rows(tmp_path))
    assert roles == [("live", "s-1"), ("shadow", "s-1")]


def test_the_cli_route_url_refuses_a_reused_id(make_app, bundles, tmp_path, capsys):
    from hybridroute.cli import main
    from hybridroute.service import ServiceConfig, create_app

    config = ServiceConfig(router=bundles["v1"], log=f"sqlite:///{tmp_path / 'd.sqlite'}")
    with uvicorn_thread(create_app(config)) as url:
        base = ["route", "--url", url, "--id", "t-1"]
        assert main([*base, "--facts", '{"amount": 20}', "--text", FIRST["text"]]) == 0
        capsys.readouterr()
        code = main([*base, "--facts", '{"has_permission": false, "amount": 5000}'])
        err = capsys.readouterr().err
        assert code == 2 and "'t-1'" in err and "another request" in err
        assert "Traceback" not in err
        assert main([*base, "--facts", '{"amount": 20}', "--text", FIRST["text"]]) == 0


@pytest.mark.postgres
def test_replicas_on_one_postgres_log(bundles, postgres_db_url):
    """Two apps (replicas) on one PostgreSQL log, the same ids with different requests
    sent to both at once: one request per id is stored, the loser gets 409."""
    from fastapi.testclient import TestClient

    from hybridroute.records import open_log
    from hybridroute.service import ServiceConfig, create_app

    config = ServiceConfig(router=bundles["v1"], log=postgres_db_url)
    barrier = threading.Barrier(2)
    answers: dict[int, list] = {0: [], 1: []}
    with TestClient(create_app(config)) as a, TestClient(create_app(config)) as b:

        def work(k: int, client) -> None:
            body = [FIRST, OTHERS["the issue's"]][k]
            for i in range(25):
                barrier.wait(timeout=30)
                answers[k].append(post(client, body, f"r-{i}").status_code)

        threads = [threading.Thread(target=work, args=(k, c)) for k, c in ((0, a), (1, b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    with open_log(postgres_db_url) as log:
        rows = {r["item_id"]: r for r in log.rows()}
    assert len(rows) == 25
    for i in range(25):
        pair = sorted((answers[0][i], answers[1][i]))
        assert pair == [200, 409], (i, pair)
        winner = 0 if answers[0][i] == 200 else 1
        text = rows[f"r-{i}"]["record"]["input_snapshot"]["text"]
        assert text == [FIRST, OTHERS["the issue's"]][winner]["text"]
