"""``fit_policy``: the whole calibration procedure from a probability matrix and gold labels."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hybridroute.calibration import Policy, fit_policy, load_evidence_labels
from hybridroute.exceptions import DatasetError, UserInputError

from .conftest import synthetic_proba

CLASSES = ["billing", "refund", "shipping", "account"]
OOS = "out_of_scope"


def make_data(
    n: int = 1500, seed: int = 0, *, oos_share: float = 0.15, oos_as_class: bool = False
) -> tuple[np.ndarray, list[str], list[str]]:
    """Over-confident scores over CLASSES; a share of rows relabelled out of scope.

    Out-of-scope rows get flatter probabilities (as a real model gives text unlike its
    training data). With ``oos_as_class`` the model has an out-of-scope column too.
    """
    k = len(CLASSES)
    proba, y = synthetic_proba(n, k, seed)
    gold = [CLASSES[i] for i in y]
    rng = np.random.default_rng(seed + 1)
    oos_rows = np.flatnonzero(rng.random(n) < oos_share)
    proba[oos_rows] = rng.dirichlet(np.full(k, 2.0), size=len(oos_rows))
    for i in oos_rows:
        gold[i] = OOS
    classes = list(CLASSES)
    if oos_as_class:
        extra = np.full((n, 1), 0.02)
        extra[oos_rows, 0] = rng.uniform(0.3, 0.9, size=len(oos_rows))
        proba = np.hstack([proba, extra])
        proba /= proba.sum(axis=1, keepdims=True)
        classes.append(OOS)
    return proba, gold, classes


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, list[str], list[str]]:
    return make_data()


# --------------------------------------------------------------------------- objectives


@pytest.mark.parametrize(
    "objective,kwargs",
    [
        ("precision", {"target": 0.8, "delta": 0.1}),
        ("empirical", {"target": 0.85}),
        ("coverage", {"target": 0.7}),
        ("cost", {"costs": {"misroute": 20.0, "ask_user": 1.0, "human_review": 3.0}}),
        ("three-way", {"target": 0.85, "ask_target": 0.6}),
        ("oos", {"target": 0.8, "precision_target": 0.8, "delta": 0.1}),
    ],
)
def test_objectives_build_a_loadable_policy(data, tmp_path, objective, kwargs) -> None:
    proba, gold, classes = data
    pol = fit_policy(proba, gold, classes, objective=objective, oos_label=OOS, **kwargs)
    doc = pol.to_dict()
    assert doc["objective"]["name"] == objective
    assert doc["classes"] == classes
    assert doc["calibrator"]["method"] == "temperature"
    t = doc["thresholds"]
    assert t["auto"] is not None and 0.0 <= t["auto"] <= 1.0
    assert (t["ask"] is not None) == (objective in ("three-way", "cost"))
    assert (t["oos"] is not None) == (objective == "oos")
    if objective == "oos":
        assert t["oos"]["score"] == "one_minus_confidence" and t["oos"]["label"] is None
    if objective in ("precision", "three-way", "oos"):
        assert doc["guarantee"]["certified"] is True
        assert doc["guarantee"]["bound"] >= kwargs.get("precision_target", kwargs["target"])
    prov = doc["provenance"]
    assert prov["split_seed"] == 0
    assert prov["calibrator_size"] == round(0.3 * len(gold))
    assert prov["calibrator_size"] + prov["threshold_size"] == len(gold)
    assert prov["objective_args"]["objective"] == objective
    assert doc["calibration_data"]["size"] == prov["threshold_size"]
    assert 0.05 < doc["calibration_data"]["out_of_scope_share"] < 0.25
    pol.save(tmp_path / "p.json")
    assert Policy.load(tmp_path / "p.json").to_json() == pol.to_json()


@pytest.mark.parametrize(
    "objective,extra_args",
    [
        ("precision", {}),
        ("three-way", {"ask_target": 0.8}),
        ("oos", {"precision_target": 0.95}),
        (
            "cost",
            {"cost_misroute": 10.0, "cost_ask_user": None, "cost_human_review": 3.0},
        ),
    ],
)
def test_objective_args_are_recorded(data, objective, extra_args) -> None:
    proba, gold, classes = data
    costs = {"ask_user": None} if objective == "cost" else None
    pol = fit_policy(proba, gold, classes, objective=objective, oos_label=OOS, costs=costs)
    args = pol.provenance["objective_args"]
    assert args == {"objective": objective, "target": 0.95, "delta": 0.05, **extra_args}
    if objective == "cost":
        assert pol.thresholds["ask"] is None  # ask_user=None drops the ask zone


def test_coverage_default_target_is_0_8(data) -> None:
    proba, gold, classes = data
    pol = fit_policy(proba, gold, classes, objective="coverage", oos_label=OOS)
    assert pol.provenance["objective_args"]["target"] == 0.8


def test_oos_label_among_classes_uses_its_probability() -> None:
    proba, gold, classes = make_data(oos_as_class=True)
    pol = fit_policy(proba, gold, classes, objective="oos", oos_label=OOS, target=0.8, delta=0.1)
    oos = pol.thresholds["oos"]
    assert oos["score"] == "label_probability" and oos["label"] == OOS
    assert oos["cutoff"] is not None


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("objective", ["precision", "empirical", "coverage", "three-way", "oos"])
def test_per_class_and_margin(data, objective) -> None:
    proba, gold, classes = data
    pol = fit_policy(
        proba,
        gold,
        classes,
        objective=objective,
        oos_label=OOS,
        target=0.8,
        precision_target=0.8,
        delta=0.1,
        per_class=True,
        margin=True,
    )
    t = pol.thresholds
    assert set(t["per_class"]) <= set(classes) and t["per_class"]
    assert t["margin"] is not None


@pytest.mark.parametrize("calibrator", ["temperature", "isotonic", "none"])
def test_calibrators(data, calibrator) -> None:
    proba, gold, classes = data
    pol = fit_policy(proba, gold, classes, calibrator=calibrator, target=0.8, oos_label=OOS)
    doc = pol.to_dict()
    assert doc["calibrator"]["method"] == calibrator
    prov = doc["provenance"]
    if calibrator == "none":
        assert prov["calibrator_size"] == 0 and prov["calibrator_fraction"] == 0.0
        assert prov["threshold_size"] == len(gold)
    else:
        assert prov["calibrator_fraction"] == 0.3


def test_evidence_records_fit_per_source_thresholds(data) -> None:
    proba, gold, classes = data
    pol = fit_policy(
        proba, gold, classes, oos_label=OOS, target=0.8, evidence_records=load_evidence_labels()
    )
    assert set(pol.evidence_thresholds) == {"bm25", "char_tfidf"}


def test_fallback_is_written(data) -> None:
    proba, gold, classes = data
    pol = fit_policy(proba, gold, classes, oos_label=OOS, fallback="ask_user")
    assert pol.thresholds["fallback"] == "ask_user"


def test_caller_provenance_is_kept_and_merged(data) -> None:
    proba, gold, classes = data
    pol = fit_policy(
        proba,
        gold,
        classes,
        oos_label=OOS,
        seed=4,
        provenance={"dataset_fingerprint": "abc123", "split_seed": 4},
    )
    prov = pol.provenance
    assert prov["dataset_fingerprint"] == "abc123" and prov["split_seed"] == 4


# --------------------------------------------------------------------------- reproducibility


def test_same_inputs_give_identical_json(data) -> None:
    proba, gold, classes = data
    kwargs = {"objective": "three-way", "oos_label": OOS, "margin": True, "per_class": True}
    a = fit_policy(proba, gold, classes, **kwargs).to_json()
    b = fit_policy(proba.copy(), list(gold), tuple(classes), **kwargs).to_json()
    assert a == b
    json.loads(a)  # plain JSON


def test_seed_changes_the_split(data) -> None:
    proba, gold, classes = data
    a = fit_policy(proba, gold, classes, oos_label=OOS, seed=0)
    b = fit_policy(proba, gold, classes, oos_label=OOS, seed=1)
    assert a.to_dict()["calibrator"] != b.to_dict()["calibrator"]
    assert b.provenance["split_seed"] == 1


def test_numpy_inputs_are_accepted(data) -> None:
    proba, gold, classes = data
    a = fit_policy(proba, gold, classes, oos_label=OOS, target=0.9)
    b = fit_policy(
        proba.tolist(),
        np.array(gold),
        np.array(classes),
        oos_label=OOS,
        target=np.float64(0.9),
        seed=np.int64(0),
    )
    assert a.to_json() == b.to_json()


def test_uncertifiable_target_routes_nothing(data) -> None:
    proba, gold, classes = data
    pol = fit_policy(proba[:200], gold[:200], classes, oos_label=OOS, target=0.999, delta=0.01)
    assert pol.thresholds["auto"] is None and pol.certified is False
    assert pol.guarantee["required_calibration_size"] > 200


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"objective": "recall"}, "objective must be one of"),
        ({"calibrator": "platt"}, "calibrator must be one of"),
        ({"fallback": "reject"}, "fallback must be one of"),
        ({"target": 1.5}, r"target must be in \(0, 1\)"),
        ({"delta": 0}, r"delta must be in \(0, 1\)"),
        ({"ask_target": -0.1}, "ask_target"),
        ({"precision_target": 1.0}, "precision_target"),
        ({"calibrator_fraction": 1.0}, r"calibrator_fraction must be in \[0, 1\)"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"seed": 1.5}, "seed must be a non-negative integer"),
        ({"seed": True}, "seed must be a non-negative integer"),
        ({"margin": "yes"}, "margin must be True or False"),
        ({"objective": "cost", "per_class": True}, "per_class works with"),
        ({"objective": "oos", "oos_label": None}, "oos objective needs oos_label"),
        ({"objective": "cost", "costs": {"misroute": 1, "review": 2}}, "unknown cost 'review'"),
        ({"objective": "cost", "costs": {"misroute": -1}}, "misroute.*non-negative"),
        ({"costs": [1, 2, 3]}, "costs must be a mapping"),
        ({"oos_label": 3}, "oos_label must be a string"),
        ({"provenance": {"when": object()}}, "provenance must hold plain JSON values"),
        ({"provenance": {"split_seed": 9}}, "provenance sets split_seed"),
        ({"provenance": ["a"]}, "provenance must be a mapping"),
    ],
)
def test_bad_arguments(data, kwargs, match) -> None:
    proba, gold, classes = data
    kwargs = {"oos_label": OOS, **kwargs}
    with pytest.raises(ValueError, match=match):
        fit_policy(proba, gold, classes, **kwargs)


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda p, g, c: (p[:, :3], g, c), "proba has 3 columns but there are 4 classes"),
        (lambda p, g, c: (p, g[:-1], c), "gold has 1499 labels but proba has 1500 rows"),
        (lambda p, g, c: (p, g, ["a", "a", "b", "c"]), "classes must be unique; repeated: a"),
        (lambda p, g, c: (p[:, :1], g, c[:1]), "at least two labels"),
        (lambda p, g, c: (-p, g, c), "finite, non-negative"),
        (lambda p, g, c: (np.vstack([np.zeros((1, 4)), p[1:]]), g, c), "row 0 sums to zero"),
    ],
)
def test_bad_arrays(data, change, match) -> None:
    proba, gold, classes = change(*data)
    with pytest.raises(ValueError, match=match):
        fit_policy(proba, gold, classes, oos_label=OOS)


def test_unknown_labels_are_a_dataset_error(data) -> None:
    proba, gold, classes = data
    # without oos_label the out-of-scope rows' label is unknown to the model
    with pytest.raises(DatasetError, match=r"column 'label'.*not in the model's label set"):
        fit_policy(proba, gold, classes)
    assert issubclass(DatasetError, UserInputError)


def test_too_few_rows_for_the_calibrator(data) -> None:
    proba, gold, classes = data
    with pytest.raises(DatasetError, match=r"too few in-scope calibration rows.*calibrator 'none'"):
        fit_policy(proba, gold, classes, oos_label=OOS, calibrator_fraction=0.0)


def test_no_rows_left_for_thresholds(data) -> None:
    proba, gold, classes = data
    with pytest.raises(DatasetError, match="no calibration rows are left"):
        fit_policy(proba[:3], gold[:3], classes, oos_label=OOS, calibrator_fraction=0.9)


def test_oos_objective_needs_out_of_scope_rows(data) -> None:
    proba, gold, classes = data
    keep = [i for i, g in enumerate(gold) if g != OOS]
    with pytest.raises(DatasetError, match="no out-of-scope rows"):
        fit_policy(proba[keep], [gold[i] for i in keep], classes, objective="oos", oos_label=OOS)


@pytest.mark.parametrize(
    "records,match",
    [
        ([], "evidence_records is empty"),
        ([{"source": "bm25", "score": 0.3}], "row 1, column 'covered'"),
        ([{"source": "bm25", "score": math.nan, "covered": True}], "finite number"),
        (["bm25"], "must be a mapping"),
    ],
)
def test_bad_evidence_records(data, records, match) -> None:
    proba, gold, classes = data
    with pytest.raises(DatasetError, match=match):
        fit_policy(proba, gold, classes, oos_label=OOS, evidence_records=records)


# --------------------------------------------------------------------------- model binding


def test_model_fingerprint_is_recorded_and_checked(data, tmp_path) -> None:
    proba, gold, classes = data
    fp = "0123456789abcdef" * 4
    pol = fit_policy(proba, gold, classes, oos_label=OOS, model_fingerprint=fp)
    assert pol.model_fingerprint == fp and pol.to_dict()["model_fingerprint"] == fp
    pol.save(tmp_path / "p.json")
    assert Policy.load(tmp_path / "p.json").model_fingerprint == fp
    assert fit_policy(proba, gold, classes, oos_label=OOS).model_fingerprint is None
    for bad in ("abc", fp.upper(), fp + "0", 12):
        with pytest.raises(ValueError, match="model_fingerprint must be"):
            fit_policy(proba, gold, classes, oos_label=OOS, model_fingerprint=bad)


# Every policy fit_policy builds must load back: the consistency checks must never refuse
# an honest fit (a false refusal would make a correct policy unusable).
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "objective,kwargs",
    [
        ("precision", {"target": 0.9}),
        ("precision", {"target": 0.97, "margin": True, "per_class": True}),
        ("empirical", {"target": 0.9, "per_class": True}),
        ("coverage", {"target": 0.6, "margin": True}),
        ("cost", {}),
        ("cost", {"costs": {"ask_user": None}}),
        ("three-way", {"target": 0.9, "ask_target": 0.7, "per_class": True}),
        ("oos", {"target": 0.7, "precision_target": 0.8, "margin": True}),
    ],
)
@pytest.mark.parametrize("calibrator", ["temperature", "isotonic", "none"])
def test_no_honest_fit_is_refused_on_load(seed, objective, kwargs, calibrator) -> None:
    proba, gold, classes = make_data(600 + 300 * seed, seed, oos_as_class=seed % 2 == 1)
    delta = (0.01, 0.1, 0.3)[seed]
    pol = fit_policy(
        proba,
        gold,
        classes,
        objective=objective,
        calibrator=calibrator,
        seed=seed,
        delta=delta,
        oos_label=OOS,
        **kwargs,
    )
    assert Policy.from_dict(json.loads(pol.to_json())) == pol


# --------------------------------------------------------------------------- leakage

TRAIN_FP, CAL_FP, SET_FP = "1" * 64, "2" * 64, "3" * 64


def _guarded(data, training, holders):
    proba, gold, classes = data
    return fit_policy(
        proba,
        gold,
        classes,
        oos_label=OOS,
        training_fingerprint=training,
        calibration_fingerprints=holders,
    )


@pytest.mark.parametrize(
    ("holders", "named"),
    [
        ({"the calibration split": TRAIN_FP}, "the calibration split"),
        ({"the calibration split": CAL_FP, "the whole set": TRAIN_FP}, "the whole set"),
        ({"rows carved from train": TRAIN_FP, "the whole set": SET_FP}, "rows carved from train"),
    ],
)
def test_a_model_trained_on_the_calibration_rows_is_refused(data, holders, named) -> None:
    with pytest.raises(DatasetError, match=rf"trained on {named}, which holds the calibration"):
        _guarded(data, TRAIN_FP, holders)


@pytest.mark.parametrize(
    ("training", "holders"),
    [
        (TRAIN_FP, {"the calibration split": CAL_FP, "the whole set": SET_FP}),
        (None, {"the calibration split": CAL_FP}),  # unknown training data: nothing to check
        (TRAIN_FP, None),
    ],
)
def test_a_model_trained_elsewhere_is_accepted_and_nothing_is_recorded(data, training, holders):
    proba, gold, classes = data
    assert _guarded(data, training, holders) == fit_policy(proba, gold, classes, oos_label=OOS)


@pytest.mark.parametrize(
    ("training", "holders", "match"),
    [
        (12, {"x": CAL_FP}, "training_fingerprint must be a string"),
        (TRAIN_FP, [CAL_FP], "calibration_fingerprints must map names"),
    ],
)
def test_leakage_arguments_are_checked(data, training, holders, match) -> None:
    with pytest.raises(ValueError, match=match):
        _guarded(data, training, holders)


# --------------------------------------------------------------------------- options


def test_options_and_their_defaults_live_in_one_place() -> None:
    from hybridroute.calibration import FitOptions
    from hybridroute.calibration.calibrators import CALIBRATORS
    from hybridroute.calibration.techniques import OBJECTIVES

    d = FitOptions()
    assert FitOptions.CHOICES["objective"] == tuple(OBJECTIVES)
    assert FitOptions.CHOICES["calibrator"] == (*CALIBRATORS, "none")
    assert FitOptions.check() == d  # nothing given: the defaults
    assert FitOptions.check(objective="coverage").target == 0.8  # the objective's default
    checked = FitOptions.check(objective="cost", costs={"ask_user": None})
    assert (checked.cost_misroute, checked.cost_ask_user) == (d.cost_misroute, None)
    assert checked.objective_args() == {
        "objective": "cost",
        "target": 0.95,
        "delta": 0.05,
        "cost_misroute": 10.0,
        "cost_ask_user": None,
        "cost_human_review": 3.0,
    }


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"target": 2}, "target"),
        ({"delta": 0}, "delta"),
        ({"calibrator_fraction": 1}, "calibrator_fraction"),
        ({"objective": "cost", "per_class": True}, "per_class"),
        ({"costs": {"misroute": -1}}, "cost_misroute"),
        ({"fallback": "drop"}, "fallback"),
    ],
)
def test_a_bad_option_names_itself(kwargs, option) -> None:
    from hybridroute.calibration import FitOptions

    with pytest.raises(ValueError) as info:
        FitOptions.check(**kwargs)
    assert info.value.option == option  # what the command line names as --option
