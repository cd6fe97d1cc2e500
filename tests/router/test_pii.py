"""The router's ``redact_pii`` option: what the classifier, the record, the log and replay see.

Personal data is redacted once, where the text enters the router (after it is checked,
before the snapshot, its hash and the classifier), so every later reader sees the same
redacted text; a router bundle records the option under its seal.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from hybridroute._integrity import seal
from hybridroute._pii import PII_KINDS, PIIRedaction
from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.records import DecisionLog, replay
from hybridroute.router import HybridRouter, load_router

from .conftest import FixedClassifier

INTENTS = ["order_status", "refund_request", "out_of_scope"]

RAW = (
    "Refund please: card 4111 1111 1111 1111, reach me at jo+refunds@mail.example.com or "
    "+44 20 7946 0958; my IBAN is GB82 WEST 1234 5698 7654 32. Order 55123, paid $1,234.56."
)
REDACTED = (
    "Refund please: card [CARD], reach me at [EMAIL] or "
    "[PHONE]; my IBAN is [IBAN]. Order 55123, paid $1,234.56."
)
SECRETS = ("4111", "jo+refunds", "7946", "GB82", "WEST")


class Capturing(FixedClassifier):
    """A fixed classifier that keeps every text it is asked to score."""

    def __init__(self, classes, table=None):
        super().__init__(classes, table)
        self.seen: list[str] = []

    def predict_proba(self, texts):
        self.seen.extend(texts)
        return super().predict_proba(texts)


class AsyncCapturing(Capturing):
    """The same, natively async (``arank``), as the LLM classifier is."""

    async def arank(self, texts, k=2):
        return self.rank(texts, k)


def make(rules, factory, clf=None, **kw):
    clf = clf if clf is not None else Capturing(INTENTS, {REDACTED: {"refund_request": 50.0}})
    return HybridRouter(
        rules=rules,
        classifier=clf,
        policy=factory(clf.classes_),
        name="t",
        version="1",
        oos_label="out_of_scope",
        **kw,
    )


def expected_hash(text: str) -> str:
    """The snapshot hash of a snapshot of no facts and ``text``, computed independently."""
    from hybridroute._canonical import hash_canonical
    from hybridroute.rules import load_rules

    from .conftest import EXAMPLE

    facts = load_rules(EXAMPLE).validate_facts({})
    return str(hash_canonical({"facts": dict(facts), "text": text}))


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize("value", [True, "all", list(PII_KINDS), PIIRedaction()])
def test_the_option_is_kept_as_a_frozen_settings_value(rules, empirical_policy_factory, value):
    r = make(rules, empirical_policy_factory, redact_pii=value)
    assert r.redact_pii == PIIRedaction()


@pytest.mark.parametrize("value", [None, False, (), ""])
def test_without_the_option_texts_are_used_and_stored_as_given(
    rules, empirical_policy_factory, value
):
    clf = Capturing(INTENTS)
    r = make(rules, empirical_policy_factory, clf, redact_pii=value)
    assert r.redact_pii is None
    d = r.route({}, RAW)
    assert clf.seen == [RAW] and d.input_snapshot["text"] == RAW


def test_an_unknown_kind_is_refused_naming_the_option(rules, empirical_policy_factory):
    with pytest.raises(UserInputError, match="redact_pii: 'ssn' is not a kind"):
        make(rules, empirical_policy_factory, redact_pii=["email", "ssn"])


# --------------------------------------------------------------------------- every path


def test_the_classifier_sees_only_the_redacted_text(rules, empirical_policy_factory):
    clf = Capturing(INTENTS, {REDACTED: {"refund_request": 50.0}})
    r = make(rules, empirical_policy_factory, clf, redact_pii=True)
    d = r.route({}, RAW)
    assert clf.seen == [REDACTED]
    # the table is keyed by the redacted text: the classifier's answer is what it saw
    assert (d.stage, d.label) == ("model", "refund_request")
    assert d.input_snapshot["text"] == REDACTED
    assert d.snapshot_hash == expected_hash(REDACTED)
    assert d.snapshot_hash != expected_hash(RAW)


@pytest.mark.parametrize("path", ["route", "route_many", "aroute", "aroute_many", "arank"])
def test_every_routing_path_redacts(rules, empirical_policy_factory, path):
    clf = (AsyncCapturing if path == "arank" else Capturing)(INTENTS)
    r = make(rules, empirical_policy_factory, clf, redact_pii=True)
    items = [{"facts": {}, "text": RAW}, {"facts": {}, "text": "call (555) 123-4567"}]
    if path == "route":
        decisions = [r.route(i["facts"], i["text"]) for i in items]
    elif path == "route_many":
        decisions = r.route_many(items)
    elif path == "aroute":
        decisions = [asyncio.run(r.aroute(i["facts"], i["text"])) for i in items]
    else:
        decisions = asyncio.run(r.aroute_many(items))
    assert [d.input_snapshot["text"] for d in decisions] == [REDACTED, "call [PHONE]"]
    assert clf.seen == [REDACTED, "call [PHONE]"]


@pytest.mark.parametrize(
    "facts", [{"has_permission": False}, {"amount": 5000}, {"tool_error_kind": "retryable"}]
)
def test_a_rule_decision_stores_the_redacted_text_too(rules, empirical_policy_factory, facts):
    clf = Capturing(INTENTS)
    r = make(rules, empirical_policy_factory, clf, redact_pii=True)
    d = r.route(facts, RAW)
    assert d.stage == "rule" and clf.seen == []
    assert d.input_snapshot["text"] == REDACTED


def test_same_input_with_and_without_personal_data_differs_only_in_it(
    rules, empirical_policy_factory
):
    r = make(rules, empirical_policy_factory, redact_pii=True)
    a = r.route({}, "my card 4111 1111 1111 1111 was charged twice")
    b = r.route({}, "my card 5555-5555-5555-4444 was charged twice")
    assert a.snapshot_hash == b.snapshot_hash  # the stored input is the same: "[CARD]"


def test_only_the_chosen_kinds_are_redacted(rules, empirical_policy_factory):
    clf = Capturing(INTENTS)
    r = make(rules, empirical_policy_factory, clf, redact_pii="email,phone")
    d = r.route({}, RAW)
    assert d.input_snapshot["text"] == (
        "Refund please: card 4111 1111 1111 1111, reach me at [EMAIL] or [PHONE]; my IBAN is "
        "GB82 WEST 1234 5698 7654 32. Order 55123, paid $1,234.56."
    )


def test_the_text_limit_applies_to_the_text_as_given(rules, empirical_policy_factory):
    from hybridroute.exceptions import InputError

    clf = Capturing(INTENTS)
    r = make(rules, empirical_policy_factory, clf, redact_pii=True)
    with pytest.raises(InputError, match="the limit"):
        r.route({}, "4111 1111 1111 1111 " * (r.max_text_chars // 20 + 1))
    assert clf.seen == []


# --------------------------------------------------------------------------- log and replay


def test_the_log_stores_the_redacted_text_and_replay_keeps_its_hash(
    rules, empirical_policy_factory, tmp_path
):
    r = make(rules, empirical_policy_factory, redact_pii=True)
    items = [
        {"facts": {}, "text": RAW},
        {"facts": {"amount": 5000}, "text": RAW},
        {"facts": {}, "text": "write to kat.owens@example.net, IBAN DE89370400440532013000"},
    ]
    decisions = r.route_many(items)
    path = tmp_path / "log.sqlite"
    with DecisionLog(path) as log:
        log.extend(decisions)
    with DecisionLog(path) as log:
        records = list(log.records())
    texts = [rec["input_snapshot"]["text"] for rec in records]
    assert texts == [REDACTED, REDACTED, "write to [EMAIL], IBAN [IBAN]"]
    raw_bytes = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for secret in (*SECRETS, "kat.owens", "DE8937"):
        assert secret.encode() not in raw_bytes
    # replay with the same router (the text is redacted again: nothing changes), with a
    # router that redacts nothing (the stored text is already redacted), and rescored
    plain = make(rules, empirical_policy_factory, r.classifier)
    for router in (r, plain):
        for rec in records:
            for rescore in (False, True):
                again = router.replay(rec, rescore=rescore)
                assert again.snapshot_hash == rec["snapshot_hash"]
                assert again.input_snapshot["text"] == rec["input_snapshot"]["text"]
    report = replay(records, r)
    assert report["mismatches"] == 0 and report["unreplayable"] == 0


def test_with_policy_keeps_the_redaction(rules, empirical_policy_factory):
    r = make(rules, empirical_policy_factory, redact_pii=["card"])
    other = r.with_policy(empirical_policy_factory(r.classes, target=0.8, seed=1), version="2")
    assert other.redact_pii == PIIRedaction(kinds=("card",)) and other.version == "2"
    assert other.route({}, "card 4111111111111111").input_snapshot["text"] == "card [CARD]"


# --------------------------------------------------------------------------- bundles


@pytest.fixture(scope="module")
def redacting_bundle(rules, local_clf, policy, tmp_path_factory):
    router = HybridRouter(
        rules=rules,
        classifier=local_clf,
        policy=policy,
        name="support",
        version="1",
        redact_pii=["email", "card", "phone"],
    )
    path = tmp_path_factory.mktemp("pii-bundle") / "router"
    router.save(path)
    return router, path


def test_a_bundle_records_the_option_and_loads_it_back(redacting_bundle, support):
    router, path = redacting_bundle
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["redact_pii"] == ["email", "card", "phone"]
    loaded = load_router(path)
    assert loaded.redact_pii == PIIRedaction(kinds=("email", "card", "phone"))
    test = support.split("test")
    items = [
        {"facts": {}, "text": f"{test.texts[i]} card 4111-1111-1111-1111 jo@example.com"}
        for i in range(30)
    ]
    assert loaded.route_many(items) == router.route_many(items)
    assert all("[CARD]" in d.input_snapshot["text"] for d in loaded.route_many(items))


def test_a_bundle_without_the_option_routes_texts_as_given(router, tmp_path):
    router.save(tmp_path / "b")
    assert "redact_pii" not in json.loads((tmp_path / "b" / "manifest.json").read_text())
    loaded = load_router(tmp_path / "b")
    assert loaded.redact_pii is None
    assert loaded.route({}, RAW).input_snapshot["text"] == RAW


@pytest.mark.parametrize(
    ("extra", "kinds"),
    [
        (None, ("email", "card", "phone")),
        (["iban"], PII_KINDS),
        (True, PII_KINDS),
        (["email"], ("email", "card", "phone")),
    ],
)
def test_loading_can_add_kinds_to_the_bundles(redacting_bundle, extra, kinds):
    _, path = redacting_bundle
    assert load_router(path, redact_pii=extra).redact_pii == PIIRedaction(kinds=kinds)
    assert HybridRouter.load(path, redact_pii=extra).redact_pii == PIIRedaction(kinds=kinds)


def test_loading_adds_kinds_to_a_bundle_without_any(router, tmp_path):
    router.save(tmp_path / "b")
    assert load_router(tmp_path / "b", redact_pii="iban").redact_pii == PIIRedaction(
        kinds=("iban",)
    )


def _copy(path, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(path, out)
    return out


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(redact_pii=["email"]),  # a kind dropped
        lambda m: m.pop("redact_pii"),  # the option removed
        lambda m: m.update(redact_pii=[*PII_KINDS]),  # a kind added
    ],
)
def test_a_tampered_option_is_refused_by_the_seal(redacting_bundle, tmp_path, edit):
    _, path = redacting_bundle
    out = _copy(path, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    edit(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="content_sha256"):
        load_router(out)


def test_a_bundle_without_the_option_cannot_gain_one_past_the_seal(router, tmp_path):
    router.save(tmp_path / "b")
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest["redact_pii"] = ["email"]
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="content_sha256"):
        load_router(tmp_path / "b")


@pytest.mark.parametrize(
    "value", [["ssn"], [], "email", ["email", "email"], [1], {"email": True}, None]
)
def test_a_resealed_bad_option_is_refused_naming_the_field(redacting_bundle, tmp_path, value):
    _, path = redacting_bundle
    out = _copy(path, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["redact_pii"] = value
    (out / "manifest.json").write_text(json.dumps(seal(manifest)))
    with pytest.raises(ArtifactError, match="field 'redact_pii' must be a list of distinct kinds"):
        load_router(out)
