"""The service routes RouteRequest values: each item is checked once by the live router (a
refusal names its item), and the checked values are what is routed and logged."""

from __future__ import annotations

import pytest

from .helpers import PARCEL, REFUND, RULE, log_rows


@pytest.fixture()
def checks(monkeypatch):
    """Every facts mapping the rule sets validate (one per check of an item)."""
    from hybridroute.rules import RuleSet

    validate = RuleSet.validate_facts
    seen: list[object] = []

    def counting(self, facts):
        seen.append(facts)
        return validate(self, facts)

    monkeypatch.setattr(RuleSet, "validate_facts", counting)
    return seen


@pytest.mark.parametrize("n", [1, 3, 12])
def test_each_item_of_a_batch_is_checked_once(make_app, tmp_path, checks, n):
    client = make_app(tmp_path)
    items = [{**(PARCEL, REFUND, RULE)[i % 3], "request_id": f"r{i}"} for i in range(n)]
    r = client.post("/v1/route/batch", json={"items": items})
    assert r.status_code == 200, r.text
    assert len(checks) == n
    assert [row["item_id"] for row in log_rows(tmp_path)] == [f"r{i}" for i in range(n)]


@pytest.mark.parametrize("bad_at", [0, 2, 5])
def test_a_refused_item_is_named_without_checking_the_batch_again(
    make_app, tmp_path, checks, bad_at
):
    client = make_app(tmp_path)
    items = [dict(PARCEL) for _ in range(6)]
    items[bad_at] = {"text": "a", "facts": {"amount": "lots"}}
    r = client.post("/v1/route/batch", json={"items": items})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == f"items[{bad_at}].facts.amount"
    assert len(checks) == bad_at + 1  # the items up to the refused one, each once
    assert log_rows(tmp_path) == []


def test_one_item_is_checked_once(make_app, tmp_path, checks):
    client = make_app(tmp_path)
    assert client.post("/v1/route", json={**PARCEL, "request_id": "one"}).status_code == 200
    assert len(checks) == 1
    r = client.post("/v1/route", json={"text": "a", "facts": {"amount": "lots"}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "facts.amount"
    assert len(checks) == 2


@pytest.mark.parametrize(
    ("facts", "field"),
    [([1, 2], "facts"), ("x", "facts"), (3, "facts")],
    ids=["list", "str", "int"],
)
def test_facts_that_are_not_an_object_are_refused_naming_them(make_app, tmp_path, facts, field):
    client = make_app(tmp_path)
    one = client.post("/v1/route", json={"text": "a", "facts": facts})
    assert one.status_code == 422 and one.json()["error"]["field"] == field
    assert "facts must be a JSON object" in one.json()["error"]["message"]
    batch = client.post("/v1/route/batch", json={"items": [PARCEL, {"text": "a", "facts": facts}]})
    assert batch.status_code == 422 and batch.json()["error"]["field"] == f"items[1].{field}"
    assert log_rows(tmp_path) == []
