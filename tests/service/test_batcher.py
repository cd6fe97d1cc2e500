"""Micro-batching of single-item requests (issue 27 item 1).

Concurrent single items share one ``route_many`` call; a lone request is routed at once; an
item's refusal stays its own; a batch never holds more than its bound nor waits past its
window; through the app, each answer is its own request's decision, logged once.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from hybridroute.exceptions import FactsError, UserInputError
from hybridroute.service._batcher import (
    MAX_ENV,
    WINDOW_ENV,
    RouteBatcher,
    route_each,
    settings_from_env,
)

from .helpers import PARCEL, REFUND, RULE, log_rows


class FakeRouter:
    """Checks refuse items whose text is ``"bad"``; routing refuses a call holding
    ``"poison"`` as a whole; every ``route_many`` call is recorded."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def check(self, request):
        if request == "bad":
            raise FactsError("not a number", field="amount")
        return request

    def route_many(self, items):
        self.calls.append(list(items))
        if "poison" in items:
            raise UserInputError("the rules cannot be evaluated on poison")
        return [f"decision:{i}" for i in items]


def loaded(router, inline=True):
    return SimpleNamespace(router=router, inline=inline)


async def _serve(batcher, lr, items, hold=0.0):
    """Each item as a request being served concurrently (its ticket held meanwhile)."""

    async def one(item):
        with batcher.coming() as ticket:
            await asyncio.sleep(0)
            try:
                return await batcher.route(lr, item, ticket)
            except UserInputError as exc:
                return exc
            finally:
                await asyncio.sleep(hold)  # the commit the answer waits for

    return await asyncio.gather(*(one(i) for i in items))


@pytest.fixture()
def executor():
    with ThreadPoolExecutor(2) as pool:
        yield pool


@pytest.mark.parametrize("n", [2, 8, 40])
def test_concurrent_items_share_one_classifier_call(executor, n):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=0.05, max_items=64)
    items = [f"t{i}" for i in range(n)]
    got = asyncio.run(_serve(batcher, loaded(router), items))
    assert got == [f"decision:t{i}" for i in range(n)]
    assert len(router.calls) == 1 and sorted(router.calls[0]) == sorted(items)
    assert (batcher.batches, batcher.items) == (1, n)


def test_each_batch_is_reported_and_a_failing_report_fails_no_request(executor, caplog):
    sizes = []
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=0.05, max_items=4, on_batch=sizes.append)
    got = asyncio.run(_serve(batcher, loaded(router), [f"t{i}" for i in range(10)]))
    assert got == [f"decision:t{i}" for i in range(10)]
    assert sizes == [len(call) for call in router.calls] and sum(sizes) == 10

    def broken(size):
        raise RuntimeError("metrics bug")

    batcher = RouteBatcher(executor, window_s=0.05, max_items=4, on_batch=broken)
    got = asyncio.run(_serve(batcher, loaded(router), ["a", "b", "c"]))
    assert got == ["decision:a", "decision:b", "decision:c"]
    assert "micro-batch callback failed: RuntimeError" in caplog.text


@pytest.mark.parametrize("inline", [True, False])
def test_a_lone_request_is_routed_at_once(executor, inline):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=5.0, max_items=64)

    async def alone():
        out = []
        for i in range(3):  # one after another: never two at once
            with batcher.coming() as ticket:
                out.append(await batcher.route(loaded(router, inline), f"t{i}", ticket))
        return out

    start = time.monotonic()
    assert asyncio.run(alone()) == ["decision:t0", "decision:t1", "decision:t2"]
    assert time.monotonic() - start < 1.0  # no 5 s window waited
    assert router.calls == [["t0"], ["t1"], ["t2"]]


@pytest.mark.parametrize("bad", [[0], [3], [1, 4], [0, 1, 2, 3, 4, 5]])
def test_a_refused_item_fails_alone(executor, bad):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=0.05, max_items=64)
    items = ["bad" if i in bad else f"t{i}" for i in range(6)]
    got = asyncio.run(_serve(batcher, loaded(router), items))
    for i, result in enumerate(got):
        if i in bad:
            assert isinstance(result, FactsError) and result.field == "amount"
        else:
            assert result == f"decision:t{i}"


@pytest.mark.parametrize("poison_at", [0, 2, 5])
def test_a_batch_refused_as_a_whole_is_routed_item_by_item(executor, poison_at):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=0.05, max_items=64)
    items = [f"t{i}" for i in range(6)]
    items[poison_at] = "poison"
    got = asyncio.run(_serve(batcher, loaded(router), items))
    for i, result in enumerate(got):
        if i == poison_at:
            assert isinstance(result, UserInputError) and "poison" in str(result)
        else:
            assert result == f"decision:t{i}"


@pytest.mark.parametrize(("n", "most"), [(10, 3), (7, 7), (9, 1)])
def test_a_batch_holds_at_most_its_bound(executor, n, most):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=0.05, max_items=most)
    got = asyncio.run(_serve(batcher, loaded(router), [f"t{i}" for i in range(n)]))
    assert got == [f"decision:t{i}" for i in range(n)]
    assert max(len(c) for c in router.calls) <= most
    assert sum(len(c) for c in router.calls) == n


def test_no_batching_with_a_zero_window(executor):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=0.0, max_items=64)
    got = asyncio.run(_serve(batcher, loaded(router), [f"t{i}" for i in range(5)]))
    assert got == [f"decision:t{i}" for i in range(5)]
    assert [len(c) for c in router.calls] == [1] * 5


@pytest.mark.parametrize("window", [0.02, 0.1])
def test_a_request_still_coming_is_waited_for_no_longer_than_the_window(executor, window):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=window, max_items=64)

    async def scene():
        with batcher.coming():  # a request whose body never arrives
            with batcher.coming() as ticket:
                start = time.monotonic()
                got = await asyncio.wait_for(batcher.route(loaded(router), "t0", ticket), 5)
                return got, time.monotonic() - start

    got, took = asyncio.run(scene())
    assert got == "decision:t0"
    assert window * 0.8 <= took < window + 1.0


def test_a_request_that_leaves_before_routing_releases_the_batch(executor):
    router = FakeRouter()
    batcher = RouteBatcher(executor, window_s=10.0, max_items=64)

    async def scene():
        async def leaves():
            with batcher.coming():
                await asyncio.sleep(0.05)  # refused while reading its body

        async def routes():
            with batcher.coming():
                pass  # another active request, answered already
            with batcher.coming() as ticket:
                return await batcher.route(loaded(router), "t0", ticket)

        start = time.monotonic()
        _, got = await asyncio.gather(leaves(), routes())
        return got, time.monotonic() - start

    got, took = asyncio.run(scene())
    assert got == "decision:t0" and took < 5


def test_route_each_keeps_each_items_own_result():
    router = FakeRouter()
    got = route_each(router, ["t0", "bad", "t2"])
    assert got[0] == "decision:t0" and got[2] == "decision:t2"
    assert isinstance(got[1], FactsError)
    assert router.calls == [["t0", "t2"]]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (WINDOW_ENV, "soon", "must be a number"),
        (WINDOW_ENV, "-1", "between 0 and 50"),
        (WINDOW_ENV, "51", "between 0 and 50"),
        (MAX_ENV, "0", "between 1 and 4096"),
        (MAX_ENV, "2.5", "whole number"),
    ],
)
def test_bad_batching_settings_are_refused(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(UserInputError, match=message):
        settings_from_env()


def test_batching_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv(WINDOW_ENV, "2")
    monkeypatch.setenv(MAX_ENV, "16")
    assert settings_from_env() == (0.002, 16)
    monkeypatch.delenv(WINDOW_ENV)
    monkeypatch.delenv(MAX_ENV)
    assert settings_from_env() == (0.001, 64)


# --------------------------------------------------------------------------- the app


def _state(client):
    return client.app.state.hybridroute


def test_concurrent_single_requests_are_batched_and_each_logged_once(make_app, tmp_path):
    client = make_app(tmp_path)
    items = [{**(PARCEL, REFUND, RULE)[i % 3], "request_id": f"c{i}"} for i in range(24)]
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda it: client.post("/v1/route", json=it), items))
    assert [a.status_code for a in answers] == [200] * 24
    rows = {row["item_id"]: row for row in log_rows(tmp_path)}
    assert sorted(rows) == sorted(it["request_id"] for it in items)
    for item, answer in zip(items, answers, strict=True):
        body = answer.json()
        assert body["decision_id"] == rows[item["request_id"]]["decision_id"]
        assert body["decision"]["input_snapshot"]["text"] == item["text"]
    batcher = _state(client).batcher
    assert batcher.items == 24 and batcher.batches <= 24
    # /metrics says how many requests each classifier call held
    text = client.get("/metrics").text
    assert f"hybridroute_micro_batch_items_sum {float(batcher.items)}" in text
    assert f"hybridroute_micro_batch_items_count {float(batcher.batches)}" in text


def test_a_request_id_sent_at_once_by_many_clients_is_logged_once(make_app, tmp_path):
    client = make_app(tmp_path)
    item = {**PARCEL, "request_id": "same"}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: client.post("/v1/route", json=item), range(8)))
    assert [a.status_code for a in answers] == [200] * 8
    ids = {a.json()["decision_id"] for a in answers}
    assert len(ids) == 1 and sum(not a.json()["duplicate"] for a in answers) == 1
    assert [row["item_id"] for row in log_rows(tmp_path)] == ["same"]


def test_a_refused_item_among_concurrent_ones_is_named_alone(make_app, tmp_path):
    client = make_app(tmp_path)
    items = [{**PARCEL, "request_id": f"ok{i}"} for i in range(7)]
    items.insert(3, {"text": "a", "facts": {"amount": "lots"}, "request_id": "bad"})
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda it: client.post("/v1/route", json=it), items))
    codes = [a.status_code for a in answers]
    assert codes == [200] * 3 + [422] + [200] * 4
    assert answers[3].json()["error"]["field"] == "facts.amount"
    assert sorted(row["item_id"] for row in log_rows(tmp_path)) == sorted(
        f"ok{i}" for i in range(7)
    )
