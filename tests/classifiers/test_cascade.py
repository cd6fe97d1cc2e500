"""The cascade: local first, unsure items to the LLM (real litellm + instructor stack
against the stand-in; stand-in answers are not an LLM's accuracy)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hybridroute import _integrity as integrity
from hybridroute.classifiers import (
    CascadeClassifier,
    IntentClassifier,
    LLMClassifier,
    LocalClassifier,
    PromptTemplate,
    RankedLabels,
    RetrySettings,
    load_classifier,
)
from hybridroute.classifiers import _persistence as persistence
from hybridroute.classifiers._cascade import _clone
from hybridroute.exceptions import ArtifactError, NotFittedError
from hybridroute.testing import LabelMapPolicy, StandInLLM

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier")

LABELS = ["card_arrival", "refund", "top_up"]
TRAIN = {
    "where is my card": "card_arrival",
    "my card has not arrived yet": "card_arrival",
    "card still not delivered": "card_arrival",
    "give my money back": "refund",
    "I want a refund please": "refund",
    "refund the payment": "refund",
    "add money to my account": "top_up",
    "top up failed": "top_up",
    "how do I top up with a transfer": "top_up",
}
FAST = RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005)


class Scripted(IntentClassifier):
    """A local stage with fixed scores per text (to make escalation exact)."""

    kind = "scripted"

    def __init__(self, scores):
        self.scores = scores

    def fit(self, texts, labels):
        self.classes_ = np.array(sorted(set(labels)))
        return self

    def predict_proba(self, texts):
        rows = []
        for text in texts:
            label, score = self.scores[text]
            row = np.full(len(self.classes_), (1 - score) / (len(self.classes_) - 1))
            row[list(self.classes_).index(label)] = score
            rows.append(row)
        return np.array(rows)


SCRIPT = {
    "sure card": ("card_arrival", 0.95),
    "sure refund": ("refund", 0.9),
    "unsure card": ("card_arrival", 0.5),
    "unsure top up": ("top_up", 0.4),
}
LLM_TRUTH = {"unsure card": "refund", "unsure top up": "top_up"}


@pytest.fixture
def server():
    with StandInLLM(LabelMapPolicy({**TRAIN, **LLM_TRUTH}, confidence=0.8), labels=LABELS) as s:
        yield s


def llm(server, **kw):
    kw.setdefault("retry", FAST)
    return LLMClassifier("openai/gpt-4o-mini", api_base=server.api_base, **kw)


def cascade(server, *, threshold=None, policy=None, **kw):
    """A cascade over the scripted local stage: fitted by the cascade for a threshold
    value; built over fitted stages for a fitted object (which names no model, so ``fit``
    would refuse it)."""
    if policy is None:
        return CascadeClassifier(
            Scripted(SCRIPT), llm(server, **kw), threshold=threshold, policy=policy
        ).fit(list(TRAIN), list(TRAIN.values()))
    texts, labels = list(TRAIN), list(TRAIN.values())
    return CascadeClassifier.from_fitted(
        Scripted(SCRIPT).fit(texts, labels),
        llm(server, **kw).fit(texts, labels),
        threshold=threshold,
        policy=policy,
    )


def test_escalates_below_the_threshold(server):
    clf = cascade(server, threshold=0.8)
    batch = clf.classify(list(SCRIPT))
    assert batch.escalated.tolist() == [False, False, True, True]
    assert [r.top for r in batch.ranked] == ["card_arrival", "refund", "refund", "top_up"]
    assert [r.usage["stage"] for r in batch.ranked] == ["local", "local", "llm", "llm"]
    assert batch.ranked[2].usage["local_label"] == "card_arrival"
    assert batch.ranked[2].usage["local_confidence"] == pytest.approx(0.5)
    report = batch.report
    assert (report.n_items, report.n_escalated, report.share_escalated) == (4, 2, 0.5)
    assert report.requests == 2 == server.stats()["requests"]
    assert report.cost_usd > 0 and report.prompt_tokens > 0
    np.testing.assert_allclose(batch.proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(batch.proba[2], [0.1, 0.8, 0.1])  # the LLM's row


def test_threshold_is_inclusive_for_kept_items(server):
    batch = cascade(server, threshold=0.9).classify(["sure refund"])
    assert batch.escalated.tolist() == [False] and batch.llm is None
    assert batch.report.requests == 0 and batch.report.share_escalated == 0


class FittedThreshold:
    threshold_ = 0.92


class FittedPerClass:
    thresholds_ = {"card_arrival": 0.99, "refund": 0.5}
    pool_threshold_ = 0.3

    def threshold_for(self, label):
        return self.thresholds_.get(label, self.pool_threshold_)


class FittedPolicy:
    """Duck-typed like hybridroute.calibration.Policy: auto-routes refunds only."""

    def apply(self, ranked):
        from types import SimpleNamespace

        return SimpleNamespace(action="auto_route" if ranked.top == "refund" else "human_review")


@pytest.mark.parametrize(
    ("policy", "escalated"),
    [
        (FittedThreshold(), [False, True, True, True]),
        (FittedPerClass(), [True, False, True, False]),
        (FittedPolicy(), [True, False, True, True]),
    ],
    ids=["threshold_", "threshold_for", "apply"],
)
def test_threshold_from_a_fitted_object(server, policy, escalated):
    batch = cascade(server, policy=policy).classify(list(SCRIPT))
    assert batch.escalated.tolist() == escalated
    assert batch.report.requests == sum(escalated)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of threshold= .* no default threshold"),
        ({"threshold": 0.5, "policy": FittedThreshold()}, "exactly one of"),
        ({"threshold": "high"}, "threshold must be a number"),
        ({"policy": object()}, "policy must be fitted"),
    ],
)
def test_no_default_threshold(server, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cascade(server, **kwargs)


def test_llm_abstention_passes_through():
    with StandInLLM(labels=LABELS, faults={"server_error": 1.0}) as server:
        retry = RetrySettings(max_transport_retries=1, backoff_initial=0.001)
        clf = cascade(server, threshold=0.8, retry=retry)
        batch = clf.classify(["sure card", "unsure card"])
    kept, escalated = batch.ranked
    assert kept.top == "card_arrival" and not kept.abstained
    assert escalated.abstain_reason == "provider_error" and escalated.top is None
    assert batch.report.llm_abstentions == {"provider_error": 1}
    assert batch.report.requests == 2
    np.testing.assert_allclose(batch.proba[1], [0.5, 0.25, 0.25])  # the local row
    assert clf.predict(["unsure card"]) == [None]


def test_with_the_local_classifier_and_save_load(server, tmp_path):
    local = LocalClassifier(Cs=(10.0,))
    clf = CascadeClassifier(local, llm(server), threshold=0.99).fit(
        list(TRAIN), list(TRAIN.values())
    )
    assert list(clf.classes_) == LABELS
    texts = ["where is my card", "unsure top up"]
    ranked = clf.rank(texts)
    assert all(isinstance(r, RankedLabels) for r in ranked)
    assert clf.predict_proba(texts).shape == (2, 3)
    saved = clf.save(tmp_path / "cascade")
    loaded = load_classifier(saved)
    assert isinstance(loaded, CascadeClassifier) and loaded.threshold == 0.99
    assert isinstance(loaded.local, LocalClassifier) and isinstance(loaded.llm, LLMClassifier)
    assert loaded.predict(texts) == clf.predict(texts)


def test_saving_per_class_thresholds(server, tmp_path):
    local = LocalClassifier(Cs=(10.0,)).fit(list(TRAIN), list(TRAIN.values()))
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    clf = CascadeClassifier.from_fitted(local, stage, policy=FittedPerClass())
    loaded = load_classifier(clf.save(tmp_path / "c"))
    assert loaded.policy.threshold_for("card_arrival") == 0.99
    assert loaded.policy.threshold_for("top_up") == 0.3
    assert loaded.model_fingerprint == local.fingerprint()
    never = CascadeClassifier.from_fitted(
        local, stage, policy=type("P", (), {"threshold_": math.inf})()
    )
    assert load_classifier(never.save(tmp_path / "inf")).threshold == math.inf
    with pytest.raises(ValueError, match="saved without it"):
        CascadeClassifier.from_fitted(local, stage, policy=FittedPolicy()).save(tmp_path / "p")


def test_label_sets_must_agree(server):
    with pytest.raises(ValueError, match="lacks local labels"):
        CascadeClassifier.from_fitted(
            Scripted(SCRIPT).fit(["a"], ["card_arrival"]),
            llm(server).fit(["b"], ["refund"]),
            threshold=0.5,
        )


def test_not_fitted():
    clf = CascadeClassifier(Scripted(SCRIPT), LLMClassifier("m"), threshold=0.5)
    with pytest.raises(NotFittedError):
        clf.predict(["x"])


# --------------------------------------------------------------------------- fit clones


def other_data():
    """Labelled texts that train another local model over the same label set."""
    texts = [f"{text} please" for text in TRAIN] + ["card not here", "refund me"]
    return texts, [*TRAIN.values(), "card_arrival", "refund"]


@pytest.mark.parametrize("handed", ["unfitted", "fitted", "loaded"])
def test_fit_leaves_the_handed_objects_alone(server, tmp_path, handed):
    """Before, fit refitted ``local`` and ``llm`` in place (and a loaded local kept the
    old model's manifest, hence its fingerprint, after refitting)."""
    local = LocalClassifier(Cs=(10.0,))
    stage = llm(server)
    if handed != "unfitted":
        local.fit(*other_data())
        stage.fit(*other_data())
    if handed == "loaded":
        local = load_classifier(local.save(tmp_path / "local"))
    before = None if handed == "unfitted" else local.predict_proba(list(SCRIPT))
    clf = CascadeClassifier(local, stage, threshold=0.8).fit(list(TRAIN), list(TRAIN.values()))
    assert clf.local is local and clf.llm is stage  # the arguments, untouched
    assert clf.local_ is not local and clf.llm_ is not stage
    assert isinstance(clf.local_, LocalClassifier) and isinstance(clf.llm_, LLMClassifier)
    assert clf.local_.get_params() == local.get_params()
    assert not hasattr(clf.local_, "manifest_")
    if handed == "unfitted":
        assert not hasattr(local, "classes_") and not hasattr(stage, "classes_")
    else:
        np.testing.assert_array_equal(local.predict_proba(list(SCRIPT)), before)
        assert stage.n_train_ == len(other_data()[0])
        assert clf.local_.fingerprint() != local.fingerprint()
    assert clf.llm_.n_train_ == len(TRAIN)
    assert clf.model_fingerprint_ is None  # a bare value names no model


def test_fit_clones_an_llm_stage_with_a_prompt(server):
    prompt = PromptTemplate(version="p", label_descriptions={"refund": "money back"})
    stage = llm(server, prompt=prompt)
    clf = CascadeClassifier(Scripted(SCRIPT), stage, threshold=0.8)
    clf.fit(list(TRAIN), list(TRAIN.values()))
    assert clf.llm_.prompt == prompt and not hasattr(stage, "classes_")


def test_the_clone_fallback_rebuilds_from_the_constructor_arguments():
    class Plain:  # no get_params: the estimator contract only
        def __init__(self, a, /, b, *, c=3):
            self.a, self.b, self.c = a, b, c

    original = Plain([1], b={"x": 1}, c=4)
    original.classes_ = "learned"
    copy = _clone(original)
    assert (copy.a, copy.b, copy.c) == ([1], {"x": 1}, 4) and copy.a is not original.a
    assert not hasattr(copy, "classes_")

    class Hidden:
        def __init__(self, a):
            self._a = a

    with pytest.raises(TypeError, match="argument 'a' is not stored under its own name"):
        _clone(Hidden(1))


# --------------------------------------------------------------------------- the model a
# threshold or policy was fitted on


def fitted_policy(local, *, bind=True):
    """A real policy fitted on ``local``'s scores (bound to it unless ``bind`` is false)."""
    from hybridroute.calibration import fit_policy

    texts = [f"{text} {i}" for i in range(12) for text in TRAIN]
    gold = [label for _ in range(12) for label in TRAIN.values()]
    return fit_policy(
        local.predict_proba(texts),
        gold,
        [str(c) for c in local.classes_],
        objective="coverage",
        target=0.5,
        model_fingerprint=local.fingerprint() if bind else None,
    )


def trained(texts=None, labels=None):
    if texts is None:
        texts, labels = list(TRAIN), list(TRAIN.values())
    return LocalClassifier(Cs=(10.0,)).fit(texts, labels)


def rule(kind, model):
    """The escalation rule of ``kind``, fitted on (and naming) ``model``."""
    if kind == "policy":
        return {"policy": fitted_policy(model)}
    if kind == "threshold":
        return {"threshold": 0.7, "model_fingerprint": model.fingerprint()}
    return {"policy": FittedPerClass(), "model_fingerprint": model.fingerprint()}


RULES = ["policy", "threshold", "fitter"]


@pytest.mark.parametrize("kind", RULES)
def test_fit_refuses_a_rule_fitted_on_another_model(server, kind):
    """Before, fit retrained the local model and kept the rule fitted on the old one."""
    named = rule(kind, trained(*other_data()))
    unfitted = LocalClassifier(Cs=(10.0,))
    with pytest.raises(ValueError, match=r"fitted on local model \w{12}…, but the local stage"):
        CascadeClassifier(unfitted, llm(server), **named).fit(list(TRAIN), list(TRAIN.values()))
    assert not hasattr(unfitted, "classes_")


@pytest.mark.parametrize("kind", RULES)
def test_fit_accepts_the_rule_of_the_model_it_trains(server, kind):
    model = trained()  # deterministic training: fit reproduces this model
    clf = CascadeClassifier(LocalClassifier(Cs=(10.0,)), llm(server), **rule(kind, model))
    clf.fit(list(TRAIN), list(TRAIN.values()))
    assert clf.model_fingerprint_ == model.fingerprint() == clf.local_.fingerprint()
    assert len(clf.rank(["where is my card"])) == 1


@pytest.mark.parametrize("kind", RULES)
def test_from_fitted_refuses_a_rule_fitted_on_another_model(server, kind):
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    with pytest.raises(ValueError, match="was fitted on local model"):
        CascadeClassifier.from_fitted(trained(), stage, **rule(kind, trained(*other_data())))
    model = trained()
    assert CascadeClassifier.from_fitted(model, stage, **rule(kind, model)).model_fingerprint_


@pytest.mark.parametrize(
    "policy",
    [FittedThreshold(), FittedPerClass(), "unbound-policy"],
    ids=["threshold_", "for", "artifact"],
)
def test_fit_refuses_a_policy_that_names_no_model(server, policy):
    if policy == "unbound-policy":
        policy = fitted_policy(trained(), bind=False)
    clf = CascadeClassifier(LocalClassifier(Cs=(10.0,)), llm(server), policy=policy)
    with pytest.raises(ValueError, match="does not name the model it was fitted on"):
        clf.fit(list(TRAIN), list(TRAIN.values()))
    assert not hasattr(clf, "classes_") and not hasattr(clf.local, "classes_")


def test_the_named_model_must_agree_and_be_a_fingerprint(server):
    a, b = trained(), trained(*other_data())
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    with pytest.raises(ValueError, match=r"the policy records model .* but model_fingerprint="):
        CascadeClassifier.from_fitted(
            a, stage, policy=fitted_policy(a), model_fingerprint=b.fingerprint()
        )
    for bad in ("abc", a.fingerprint().upper(), 7):
        with pytest.raises(ValueError, match="model_fingerprint must be a model fingerprint"):
            CascadeClassifier.from_fitted(a, stage, threshold=0.5, model_fingerprint=bad)
    duck = type("P", (), {"threshold_": 0.5, "model_fingerprint": "model-a"})()
    with pytest.raises(ValueError, match="policy's model_fingerprint is not a fingerprint"):
        CascadeClassifier.from_fitted(a, stage, policy=duck)


def test_a_named_model_needs_a_local_stage_with_a_fingerprint(server):
    local = Scripted(SCRIPT).fit(list(TRAIN), list(TRAIN.values()))  # kind not registered
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    with pytest.raises(ValueError, match="fingerprint of the local Scripted cannot be computed"):
        CascadeClassifier.from_fitted(local, stage, threshold=0.5, model_fingerprint="0" * 64)


# --------------------------------------------------------------------------- saved cascades


def test_a_saved_cascade_names_its_local_stage(server, tmp_path):
    model = trained()
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    saved = CascadeClassifier.from_fitted(model, stage, threshold=0.7).save(tmp_path / "c")
    manifest = persistence.read_manifest(saved)
    assert manifest["state"]["escalation"]["model_fingerprint"] == model.fingerprint()
    loaded = load_classifier(saved)
    assert loaded.model_fingerprint == loaded.model_fingerprint_ == model.fingerprint()
    # the loaded rule is bound: a refit on other data is refused, on the same data not
    again = CascadeClassifier(
        LocalClassifier(Cs=(10.0,)),
        llm(server),
        threshold=loaded.threshold,
        model_fingerprint=loaded.model_fingerprint,
    )
    with pytest.raises(ValueError, match="was fitted on local model"):
        again.fit(*other_data())
    assert again.fit(list(TRAIN), list(TRAIN.values())).local_.fingerprint() == model.fingerprint()
    resaved = loaded.save(tmp_path / "again")
    assert persistence.classifier_fingerprint(resaved) == persistence.classifier_fingerprint(saved)


def _reseal(directory, change):
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest["state"]["escalation"])
    body = {k: v for k, v in manifest.items() if k not in ("content_sha256", "signature")}
    body["fingerprint"] = persistence._fingerprint(body, directory)
    path.write_text(json.dumps(integrity.seal(body)))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda e: e.update(model_fingerprint="0" * 64), "fitted on local model 000000000000…"),
        (lambda e: e.update(model_fingerprint="f" * 63), "is not a model fingerprint"),
        (lambda e: e.update(model_fingerprint=["x"]), "is not a model fingerprint"),
    ],
    ids=["another-model", "short", "not-a-string"],
)
def test_a_saved_cascade_whose_thresholds_name_another_model_is_refused(
    server, tmp_path, change, match
):
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    saved = CascadeClassifier.from_fitted(trained(), stage, threshold=0.7).save(tmp_path / "c")
    _reseal(saved, change)
    with pytest.raises(ArtifactError, match=match):
        load_classifier(saved)


def test_a_cascade_saved_before_the_model_was_recorded_loads_unbound(server, tmp_path):
    stage = llm(server).fit(list(TRAIN), list(TRAIN.values()))
    saved = CascadeClassifier.from_fitted(trained(), stage, threshold=0.7).save(tmp_path / "c")
    _reseal(saved, lambda e: e.pop("model_fingerprint"))
    loaded = load_classifier(saved)
    assert loaded.threshold == 0.7 and loaded.model_fingerprint_ is None
