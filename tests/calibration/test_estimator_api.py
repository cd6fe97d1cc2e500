"""Calibrators and threshold fitters speak scikit-learn's public estimator API.

``get_params`` / ``set_params`` (with ``<component>__<parameter>`` for nested fitters) and
``sklearn.base.clone``: a clone of a fitted estimator is unfitted, has equal parameters and
shares no mutable state; ``__init__`` stores its arguments and nothing else.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

import hybridroute.calibration as cal
import hybridroute.calibration.experimental as experimental
from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    CostThreshold,
    CoverageThreshold,
    EmpiricalThreshold,
    EvidenceThresholds,
    IsotonicCalibration,
    MarginThreshold,
    OutOfScopeThreshold,
    PerClassThreshold,
    TemperatureScaling,
    ThreeWayThreshold,
)
from hybridroute.calibration._base import _Estimator
from hybridroute.calibration.experimental import (
    FallbackPrecisionThreshold,
    LabelFreeStartThreshold,
)
from hybridroute.exceptions import NotFittedError

from .conftest import synthetic, synthetic_proba


def _data():
    scores, correct = synthetic(2000, 5)
    proba, y = synthetic_proba(1000, 4, 5)
    rng = np.random.default_rng(5)
    labels = rng.choice(["a", "b", "c"], size=2000, p=[0.6, 0.3, 0.1]).tolist()
    sources = rng.choice(["bm25", "dense"], size=2000).tolist()
    return {"scores": scores, "correct": correct, "proba": proba, "y": y, "labels": labels,
            "sources": sources, "is_oos": rng.random(2000) < 0.3}  # fmt: skip


DATA = _data()

SCORES = ("scores", "correct")
#: Each estimator with non-default arguments, and the DATA entries its fit takes.
CASES = {
    "TemperatureScaling": (lambda: TemperatureScaling(bounds=(0.05, 20.0)), ("proba", "y")),
    "IsotonicCalibration": (IsotonicCalibration, ("proba", "y")),
    "CertifiedPrecisionThreshold": (
        lambda: CertifiedPrecisionThreshold(target=0.9, delta=0.1, n_starts=2, grid=[0.5, 0.9]),
        SCORES,
    ),
    "EmpiricalThreshold": (lambda: EmpiricalThreshold(target=0.9), SCORES),
    "FallbackPrecisionThreshold": (
        lambda: FallbackPrecisionThreshold(
            target=0.9, delta=0.1, n_starts=2, weights=[3.0, 1.0], grid=[0.5, 0.9]
        ),
        SCORES,
    ),
    "LabelFreeStartThreshold": (
        lambda: LabelFreeStartThreshold(target=0.9, delta=0.1, grid=[0.5, 0.9]),
        SCORES,
    ),
    "CoverageThreshold": (lambda: CoverageThreshold(coverage=0.6, delta=0.1), SCORES),
    "CostThreshold": (
        lambda: CostThreshold(cost_misroute=5.0, cost_ask_user=None, cost_human_review=2.0),
        SCORES,
    ),
    "PerClassThreshold": (
        lambda: PerClassThreshold(
            CertifiedPrecisionThreshold(0.85, 0.1), min_class_size=150, simultaneous=True
        ),
        ("scores", "correct", "labels"),
    ),
    "MarginThreshold": (lambda: MarginThreshold(target=0.85, delta=0.1), SCORES),
    "OutOfScopeThreshold": (
        lambda: OutOfScopeThreshold(recall=0.8, precision=None, delta=0.1),
        ("scores", "is_oos"),
    ),
    "ThreeWayThreshold": (
        lambda: ThreeWayThreshold(
            auto=CertifiedPrecisionThreshold(0.95, 0.05), ask=EmpiricalThreshold(0.7)
        ),
        SCORES,
    ),
    "EvidenceThresholds": (
        lambda: EvidenceThresholds(base=CertifiedPrecisionThreshold(0.8, 0.1, n_starts=1)),
        ("sources", "scores", "correct"),
    ),
}
NAMES = sorted(CASES)


def _fit(name: str, est):
    return est.fit(*(DATA[key] for key in CASES[name][1]))


def _same(a, b) -> bool:
    """Parameter values equal: nested fitters by type and parameters, arrays elementwise."""
    if hasattr(a, "get_params"):
        return type(a) is type(b) and _same_params(
            a.get_params(deep=False), b.get_params(deep=False)
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return a == b


def _same_params(p: dict, q: dict) -> bool:
    return p.keys() == q.keys() and all(_same(p[k], q[k]) for k in p)


def _learned(est) -> list[str]:
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))


#: The public names and the research ones (hybridroute.calibration.experimental).
NAMESPACE = {**vars(cal), **vars(experimental)}


def test_the_grid_covers_every_public_estimator() -> None:
    public = {
        n for n in [*cal.__all__, *experimental.__all__] if isinstance(NAMESPACE[n], type)
        and issubclass(NAMESPACE[n], _Estimator) and n != "ThresholdFitter"
    }  # fmt: skip
    assert public == set(CASES)


@pytest.mark.parametrize("name", NAMES)
def test_init_stores_its_arguments_and_nothing_else(name) -> None:
    make = CASES[name][0]
    est = make()
    params = est.get_params(deep=False)
    assert vars(est) == params
    rebuilt = type(est)(**params)
    assert all(rebuilt.get_params(deep=False)[k] is v for k, v in params.items())


@pytest.mark.parametrize("name", NAMES)
def test_clone_of_a_fitted_estimator_is_unfitted_with_equal_params(name) -> None:
    est = _fit(name, CASES[name][0]())
    assert _learned(est)
    copy = clone(est)
    assert type(copy) is type(est) and copy is not est
    assert _learned(copy) == []
    assert _same_params(copy.get_params(deep=False), est.get_params(deep=False))
    assert repr(copy) == repr(est)
    # nothing mutable is shared: nested fitters and containers are copies
    mutable = [
        k for k, v in est.get_params(deep=False).items()
        if isinstance(v, (list, dict, np.ndarray)) or hasattr(v, "get_params")
    ]  # fmt: skip
    assert all(getattr(copy, k) is not getattr(est, k) for k in mutable)
    # and it fits to the same result
    refit = _fit(name, copy)
    assert refit.summary() == est.summary()


@pytest.mark.parametrize("name", NAMES)
def test_get_params_and_set_params_round_trip(name) -> None:
    make = CASES[name][0]
    est = make()
    deep = est.get_params(deep=True)
    shallow = est.get_params(deep=False)
    assert set(shallow) <= set(deep)
    nested = {k for k in deep if "__" in k}
    assert {k.split("__")[0] for k in nested} <= set(shallow)
    # setting every parameter back (nested names too) changes nothing
    assert est.set_params(**deep) is est
    assert _same_params(est.get_params(deep=True), deep)
    # the shallow parameters of one estimator rebuild it on a fresh one
    other = clone(make())
    assert _same_params(other.set_params(**shallow).get_params(deep=True), deep)
    assert other.set_params() is other


@pytest.mark.parametrize("name", NAMES)
def test_set_params_refuses_an_unknown_name(name) -> None:
    est = CASES[name][0]()
    with pytest.raises(ValueError, match=f"unknown parameter 'nope' of {name}"):
        est.set_params(nope=1)


@pytest.mark.parametrize(
    "est,key,value",
    [
        (lambda: PerClassThreshold(CertifiedPrecisionThreshold(0.9, 0.1)), "base__delta", 0.02),
        (lambda: ThreeWayThreshold.certified(0.95, 0.8), "ask__target", 0.75),
        (lambda: EvidenceThresholds(base=EmpiricalThreshold(0.9)), "base__target", 0.6),
    ],
)
def test_nested_parameters_are_set_through_double_underscores(est, key, value) -> None:
    e = est()
    assert e.set_params(**{key: value}).get_params()[key] == value
    outer, inner = key.split("__")
    assert getattr(getattr(e, outer), inner) == value


def test_a_nested_name_on_a_plain_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match=r"EvidenceThresholds\.base has no parameters of its own"):
        EvidenceThresholds().set_params(base__target=0.9)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "IsotonicCalibration"])  # no params
def test_set_params_validates_nothing_until_fit(name) -> None:
    est = CASES[name][0]()
    first = sorted(est.get_params(deep=False))[0]
    est.set_params(**{first: "not a number"})  # stored as given, like __init__
    with pytest.raises((ValueError, TypeError)):
        _fit(name, est)


def test_changing_a_clones_nested_fitter_leaves_the_original_alone() -> None:
    tw = ThreeWayThreshold.certified(0.95, 0.8)
    copy = clone(tw).set_params(auto__target=0.9)
    assert tw.auto.target == 0.95 and copy.auto.target == 0.9
    assert tw._clone().auto is not tw.auto


def test_a_clone_is_not_fitted() -> None:
    fitted = CertifiedPrecisionThreshold(0.9).fit(DATA["scores"], DATA["correct"])
    with pytest.raises(NotFittedError, match="not fitted yet"):
        clone(fitted).predict([0.5])


@pytest.mark.parametrize(
    "est,text",
    [
        (CertifiedPrecisionThreshold(0.9), "CertifiedPrecisionThreshold(target=0.9, delta=0.05, n_starts=3, grid=None)"),
        (IsotonicCalibration(), "IsotonicCalibration()"),
        (
            ThreeWayThreshold(EmpiricalThreshold(0.9), EmpiricalThreshold(0.7)),
            "ThreeWayThreshold(auto=EmpiricalThreshold(target=0.9), ask=EmpiricalThreshold(target=0.7))",
        ),
    ],
)  # fmt: skip
def test_repr_names_every_argument(est, text) -> None:
    assert repr(est) == text


@pytest.mark.parametrize("name", NAMES)
def test_repr_rebuilds_the_estimator(name) -> None:
    est = CASES[name][0]()
    rebuilt = eval(repr(est), NAMESPACE)  # our own repr, in a test
    assert _same_params(rebuilt.get_params(deep=True), est.get_params(deep=True))
