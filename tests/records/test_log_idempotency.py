"""A request id names one request: the same id with another request is refused, on every
backend, for every way of writing (log_many, log_groups, append/flush), across connections.

The request is compared through the stored snapshot hash (facts, text, evidence), so the
log keeps nothing new to compare requests with; the router and version are in the key.
"""

from __future__ import annotations

import json
import threading

import pytest

from hybridroute.contracts import Decision
from hybridroute.exceptions import RequestIdConflictError, UserInputError
from hybridroute.records import open_log


def decision(text: str = "t", *, version: str = "1", evidence: bool = False, **facts) -> Decision:
    snapshot: dict = {"facts": {"amount": 0, **facts}, "text": text}
    if evidence:
        snapshot["evidence"] = {"required_points": ["p"], "items": []}
    return Decision(
        router="r",
        router_version=version,
        stage="rule",
        input_snapshot=snapshot,
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    )


# the ways a second request under a logged id can differ from the first
OTHER_REQUESTS = {
    "text": decision("another text"),
    "a fact": decision(amount=5000),
    "a new fact": decision(has_permission=False),
    "no text": Decision(
        router="r",
        router_version="1",
        stage="rule",
        input_snapshot={"facts": {"amount": 0}},
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    ),
    "evidence": decision(evidence=True),
}


@pytest.mark.parametrize("other", list(OTHER_REQUESTS), ids=list(OTHER_REQUESTS))
def test_the_same_id_with_another_request_is_refused(log_url, other):
    with open_log(log_url) as log:
        (first,) = log.log_many([(decision(), "t-1", "live")])
        with pytest.raises(RequestIdConflictError, match=r"'t-1'.*another request") as info:
            log.log_many([(OTHER_REQUESTS[other], "t-1", "live")])
        assert info.value.item_ids == ("t-1",) and info.value.positions == (0,)
        assert log.count() == 1
        # the same request again is answered with the stored decision
        (again,) = log.log_many([(decision(), "t-1", "live")])
        assert again.duplicate and again.decision_id == first.decision_id
        # the id is free for another router version
        (new,) = log.log_many([(decision("z", version="2"), "t-1", "live")])
        assert not new.duplicate and log.count() == 2


def test_a_conflict_refuses_its_whole_request_and_nothing_else(log_url):
    with open_log(log_url) as log:
        log.log_many([(decision("a"), "a", "live")])
        out = log.log_groups(
            [
                [(decision("x"), "x", "live")],  # a request of its own: written
                [  # a batch: one item conflicts, so none of it is written
                    (decision("b"), "b", "live"),
                    (decision("other"), "a", "live"),
                    (decision("c"), None, "live"),
                ],
                [(decision("q"), "q", "live"), (decision("q"), "q", "live")],  # written
            ]
        )
        assert isinstance(out[1], RequestIdConflictError)
        assert out[1].positions == (1,) and out[1].item_ids == ("a",)
        assert [r.duplicate for r in out[0]] == [False]
        assert [r.duplicate for r in out[2]] == [False, True]
        ids = sorted(r["item_id"] or "" for r in log.rows())
        assert ids == ["a", "q", "x"]
        assert log.lookup("r", "1", "b") is None


def test_a_conflict_within_one_request_refuses_it(log_url):
    with open_log(log_url) as log:
        with pytest.raises(RequestIdConflictError) as info:
            log.log_many(
                [
                    (decision("1"), "k", "live"),
                    (decision("2"), "j", "live"),
                    (decision("3"), "k", "live"),
                ]
            )
        assert info.value.positions == (2,)
        assert log.count() == 0


def test_an_id_may_not_span_two_requests_of_one_write(log_url):
    with open_log(log_url) as log:
        with pytest.raises(ValueError, match="two groups"):
            log.log_groups([[(decision(), "k", "live")], [(decision(), "k", "live")]])
        assert log.count() == 0


def test_flush_refuses_a_conflict_with_on_duplicate_error_too(log_url):
    with open_log(log_url, on_duplicate="error", batch_size=10) as log:
        log.append(decision(), item_id="a")
        log.flush()
        log.append(decision("x"), item_id="b")
        log.append(decision("other"), item_id="a")
        with pytest.raises(RequestIdConflictError):
            log.flush()
        assert log.count() == 1 and log.pending == 1


def test_replicas_racing_with_one_id_and_two_requests(log_url):
    """Two connections (replicas) log one id with different requests at once, many times:
    exactly one request per id is stored, every other call is refused or a same-request
    duplicate, and no batch is half-written."""
    rounds = 30
    errors: list[BaseException] = []
    results: dict[int, list] = {0: [], 1: []}
    barrier = threading.Barrier(2)

    def work(w: int) -> None:
        try:
            with open_log(log_url) as log:
                for k in range(rounds):
                    barrier.wait(timeout=30)
                    try:
                        out = log.log_many(
                            [
                                (decision(f"w{w}"), f"id{k}", "live"),
                                (decision(f"w{w}"), f"side{w}-{k}", "live"),
                            ]
                        )
                        results[w].append(("ok", k, [r.duplicate for r in out]))
                    except RequestIdConflictError:
                        results[w].append(("conflict", k, None))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and errors == []
    with open_log(log_url) as log:
        rows = list(log.rows())
    by_id = {r["item_id"]: r for r in rows}
    for k in range(rounds):
        winners = [w for w in (0, 1) if results[w][k][0] == "ok"]
        assert len(winners) == 1, (k, results[0][k], results[1][k])
        (w,) = winners
        assert by_id[f"id{k}"]["record"]["input_snapshot"]["text"] == f"w{w}"
        assert f"side{w}-{k}" in by_id and f"side{1 - w}-{k}" not in by_id
    assert len(rows) == 2 * rounds


@pytest.mark.parametrize(
    "request_id",
    [
        "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234",
        "ghp_" + "a1B2" * 9,
        "password=hunter22secret",
        "Bearer abcdefghijklmnop1234",
        "AKIA" + "ABCDEFGHIJKLMNOP",
    ],
)
def test_a_request_id_shaped_like_a_credential_is_refused(log_url, request_id):
    with open_log(log_url) as log:
        with pytest.raises(UserInputError, match="looks like a credential") as info:
            log.log_many([(decision(), request_id, "live")])
        assert request_id not in str(info.value)
        with pytest.raises(UserInputError, match="looks like a credential"):
            log.append(decision(), item_id=request_id, role="shadow")
        assert log.count() == 0 and log.pending == 0


def test_a_request_id_quoting_a_sensitive_value_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    with open_log(url, sensitive_fields=["email"], salt="pepper") as log:
        log._redactor.learn([{"email": "ann@example.org"}])
        with pytest.raises(UserInputError, match="sensitive value"):
            log.log_many([(decision(), "ticket-ann@example.org", "live")])
        (ok,) = log.log_many([(decision(), "ticket-17", "live")])
    assert json.dumps(ok.record).count("ann@example.org") == 0
