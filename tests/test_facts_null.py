"""What ``null`` means for a fact: "not given" unless the fact is declared nullable.

A ``null`` for a fact that is not nullable is exactly an absent key: the declared default
applies (a required fact without one is refused as missing), and the validated facts, the
snapshot and its hash are those of the request without the key, so replay and
idempotency see one request. A nullable fact keeps ``null`` as its value. The toolkit's
own exported sets (which write an unset fact as ``null``) route without a refusal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridroute.cli import main
from hybridroute.contracts import FactSchema, FactSpec
from hybridroute.exceptions import FactsError

from .router.conftest import EXAMPLE, fitted_policy

DEFAULTS = {
    "bool": False,
    "int": 3,
    "number": 1.5,
    "str": "x",
    "list[str]": ["a"],
    "list[number]": [1, 2.5],
    "object": {"k": 1},
}
TYPES = list(DEFAULTS)


def _schema(type_: str, **decl) -> FactSchema:
    other = FactSpec(name="other", type="int", default=0)
    return FactSchema((FactSpec(name="f", type=type_, **decl), other))


@pytest.mark.parametrize("type_", TYPES)
def test_null_is_the_default_of_a_fact_that_is_not_nullable(type_):
    schema = _schema(type_, default=DEFAULTS[type_])
    given, absent = schema.validate({"f": None}), schema.validate({})
    assert given == absent
    assert schema.canonical_json(given) == schema.canonical_json(absent)
    assert given["f"] is absent["f"]  # the very default object (the fast JSON path)


@pytest.mark.parametrize("type_", TYPES)
def test_null_for_a_required_fact_is_missing(type_):
    schema = _schema(type_)
    with pytest.raises(FactsError, match=r"^fact 'f': required fact is missing \(null"):
        schema.validate({"f": None})
    with pytest.raises(FactsError, match=r"^fact 'f': required fact is missing$"):
        schema.validate({})


@pytest.mark.parametrize("type_", TYPES)
def test_a_nullable_fact_keeps_null(type_):
    with_default = _schema(type_, nullable=True, default=DEFAULTS[type_])
    assert with_default.validate({"f": None})["f"] is None
    assert with_default.validate({})["f"] == with_default.validate({"f": DEFAULTS[type_]})["f"]
    required = _schema(type_, nullable=True)
    assert required.validate({"f": None}) == {"f": None, "other": 0}
    with pytest.raises(FactsError, match="required fact is missing"):
        required.validate({})


@pytest.mark.parametrize("type_", TYPES)
def test_one_value_check_still_refuses_null(type_):
    """``FactSpec.check`` checks a value; only a set of facts has "not given"."""
    with pytest.raises(FactsError, match="expected"):
        FactSpec(name="f", type=type_, default=DEFAULTS[type_]).check(None)


def test_null_is_not_a_way_around_an_undeclared_name():
    with pytest.raises(FactsError, match="not declared"):
        _schema("int", default=1).validate({"typo": None})


def test_the_dataset_check_agrees():
    from hybridroute._labelled_rows import REQUIRED_MISSING, check_fact_value

    spec = FactSpec(name="f", type="str")
    assert check_fact_value(spec, "null", None, None, required=True) == (None, REQUIRED_MISSING)
    nullable = FactSpec(name="f", type="str", nullable=True)
    assert check_fact_value(nullable, "null", None, None, required=True) == (None, None)


# ---------------------------------------------------------------- rules, router, CLI


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    root = tmp_path_factory.mktemp("null-facts")
    ds = load_dataset("support-tickets")
    clf = LocalClassifier(Cs=(10.0,)).fit(ds.split("train").texts, ds.split("train").y)
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    router = HybridRouter(
        rules=load_rules(EXAMPLE), classifier=clf, policy=policy, name="s", version="1"
    )
    return router.save(root / "bundle")


NULLS = [
    {"action": None},
    {"amount": None, "step": None},
    {"has_permission": None, "missing_user_fields": None, "route_history": None},
    {"tool_error_kind": None},  # nullable, default null: the same either way
]


@pytest.mark.parametrize("facts", NULLS)
def test_the_snapshot_of_null_is_the_snapshot_of_absent(bundle, facts):
    from hybridroute.router import load_router

    router = load_router(bundle)
    text = "my parcel never arrived"
    given, absent = router.route(facts, text), router.route({}, text)
    assert given.input_snapshot == absent.input_snapshot
    assert given.snapshot_hash == absent.snapshot_hash
    assert given.selected_destination == absent.selected_destination
    assert router.rules.decide(facts) == router.rules.decide({})


@pytest.mark.parametrize("facts", NULLS)
def test_route_rules_takes_null(capsys, facts):
    assert main(["route", "--rules", str(EXAMPLE), "--facts", json.dumps(facts), "--json"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert main(["route", "--rules", str(EXAMPLE), "--json"]) == 0
    assert given["snapshot_hash"] == json.loads(capsys.readouterr().out)["snapshot_hash"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    """``datasets export support-tickets``, one ``{"id", "text", "facts"}`` file per split."""
    root = tmp_path_factory.mktemp("export")
    assert main(["datasets", "export", "support-tickets", "--out", str(root / "t.jsonl")]) == 0
    lines: dict[str, list[str]] = {}
    for raw in (root / "t.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(raw)
        item = {"id": row["id"], "text": row["text"], "facts": row["facts"]}
        lines.setdefault(row["split"], []).append(json.dumps(item))
    files = {}
    for split, rows in lines.items():
        files[split] = root / f"{split}.jsonl"
        files[split].write_text("\n".join(rows) + "\n", encoding="utf-8")
    return files


def test_the_exported_set_writes_unset_facts_as_null(exported):
    nulls = 0
    for path in exported.values():
        for raw in path.read_text(encoding="utf-8").splitlines():
            nulls += sum(
                v is None for k, v in json.loads(raw)["facts"].items() if k != "tool_error_kind"
            )
    assert nulls > 0  # the case this file is about is in the data


@pytest.mark.parametrize("split", ["train", "calibration", "test"])
def test_every_exported_row_routes(bundle, exported, tmp_path, capsys, split):
    n = len(exported[split].read_text(encoding="utf-8").splitlines())
    log = tmp_path / "log.sqlite"
    rc = main(
        ["route", "--router", str(bundle), "--input", str(exported[split]), "--log", str(log)]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert f"routed {n} items" in out.out and f"logged {n} to" in out.out


@pytest.mark.service
def test_the_service_sees_one_request(bundle, tmp_path):
    from fastapi.testclient import TestClient

    from hybridroute.service import ServiceConfig, create_app

    config = ServiceConfig(router=bundle, log=f"sqlite:///{tmp_path / 'log.sqlite'}")
    with TestClient(create_app(config)) as client:
        hashes = []
        for facts in ({"action": None, "amount": None}, {}):
            r = client.post("/v1/route", json={"text": "my parcel never arrived", "facts": facts})
            assert r.status_code == 200, r.text
            hashes.append(r.json()["decision"]["snapshot_hash"])
    assert hashes[0] == hashes[1]
