"""The round-two certified fitters: label-free start and fallback (Wiens) chaining."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    clopper_pearson_lower,
    precision_p_value,
    required_calibration_size,
)
from hybridroute.calibration.experimental import (
    FallbackPrecisionThreshold,
    LabelFreeStartThreshold,
)
from hybridroute.calibration.techniques.fallback_precision import _run_fallback, fallback_starts
from hybridroute.exceptions import NotFittedError

from .conftest import synthetic


def _clustered(n: int, seed: int, share: float = 0.01, right: float = 0.7):
    """Calibrated scores plus a cluster of confident mistakes at the very top."""
    s, c = synthetic(n, seed, skew=8.0)
    rng = np.random.default_rng(seed + 1)
    m = max(1, round(share * n))
    idx = rng.choice(n, m, replace=False)
    s[idx] = rng.uniform(0.999, 1.0, m)
    c[idx] = rng.random(m) < right
    return s, c


DATA = {
    "calibrated": lambda seed, n: synthetic(n, seed),
    "sharp": lambda seed, n: synthetic(n, seed, skew=8.0),
    "clustered": lambda seed, n: _clustered(n, seed),
}


def _reachable(weights, counts, accepted, delta):
    last = sum(1 for c in counts if c <= accepted) - 1
    return [delta * sum(weights[a : last + 1]) for a in range(last + 1)]


# --------------------------------------------------------------------------- the chain


@pytest.mark.parametrize(
    ("pvals", "starts", "levels", "best", "level"),
    [
        # one start: a plain fixed sequence, stopping at the first failure
        ([0.01, 0.02, 0.9, 0.01], [0], [0.05], 1, 0.05),
        # a chain that runs into the next start continues at the sum of the two levels
        ([0.01, 0.01, 0.04, 0.06], [0, 2], [0.025, 0.025], 2, 0.05),
        # a bump loses what the chain gathered; the next start still holds its own level
        ([0.01, 0.9, 0.02, 0.03, 0.04], [0, 2], [0.025, 0.025], 2, 0.025),
        # nothing certified at the first start: the second one works alone
        ([0.9, 0.9, 0.01, 0.02], [0, 2], [0.025, 0.025], 3, 0.025),
        # coinciding starts add up
        ([0.04, 0.04, 0.9], [1, 1], [0.025, 0.025], 1, 0.05),
        # candidates above the first start are never tested
        ([0.001, 0.9, 0.01], [2], [0.05], 2, 0.05),
        # nothing at all
        ([0.9, 0.9], [0], [0.05], None, math.nan),
    ],
)
def test_run_fallback(pvals, starts, levels, best, level) -> None:
    got, got_level = _run_fallback(np.asarray(pvals), starts, levels)
    assert got == best
    if best is None:
        assert math.isnan(got_level)
    else:
        assert got_level == pytest.approx(level)


@pytest.mark.parametrize("n_starts", [1, 2, 3, 5])
def test_starts_double_from_the_zero_error_minimum(n_starts) -> None:
    for target, delta in [(0.9, 0.05), (0.95, 0.01), (0.98, 0.1)]:
        w, counts = fallback_starts(target, delta, 10_000, n_starts)
        assert w == pytest.approx([1 / n_starts] * n_starts)
        first = required_calibration_size(target, delta / n_starts)
        assert counts == [first * 2**j for j in range(n_starts)]


def test_weighted_starts_put_the_first_at_its_own_level() -> None:
    w, counts = fallback_starts(0.95, 0.05, 10_000, 3, (2, 1, 1))
    assert w == pytest.approx([0.5, 0.25, 0.25])
    assert counts[0] == required_calibration_size(0.95, 0.025)
    assert counts == [counts[0], 2 * counts[0], 4 * counts[0]]


@pytest.mark.parametrize("n", [10, 200, 1540, 5000, 100_000])
def test_auto_takes_the_most_equal_starts_that_fit(n) -> None:
    w, counts = fallback_starts(0.95, 0.05, n, "auto")
    k = len(w)
    assert w == pytest.approx([1 / k] * k)
    assert k == 1 or counts[-1] <= n
    # one more start would not fit
    more = required_calibration_size(0.95, 0.05 / (k + 1)) * 2**k
    assert more > n


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_starts": 0}, "positive integer"),
        ({"n_starts": True}, "positive integer"),
        ({"n_starts": "many"}, "positive integer"),
        ({"n_starts": 2, "weights": (1, 2, 3)}, "2 positive numbers"),
        ({"n_starts": 2, "weights": (1, -1)}, "positive numbers"),
        ({"n_starts": 2, "weights": (1, float("nan"))}, "positive numbers"),
        ({"n_starts": "auto", "weights": (1,)}, "cannot be given"),
    ],
)
def test_bad_settings_are_refused_at_fit(kwargs, match) -> None:
    s, c = synthetic(500, 0)
    with pytest.raises(ValueError, match=match):
        FallbackPrecisionThreshold(0.9, 0.05, **kwargs).fit(s, c)


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (LabelFreeStartThreshold, {"target": 1.2}, "target"),
        (LabelFreeStartThreshold, {"delta": 0.0}, "delta"),
        (FallbackPrecisionThreshold, {"delta": 1.0}, "delta"),
        (FallbackPrecisionThreshold, {"target": "high"}, "target"),
    ],
)
def test_bad_target_or_delta(cls, kwargs, match) -> None:
    s, c = synthetic(500, 0)
    with pytest.raises(ValueError, match=match):
        cls(**kwargs).fit(s, c)


# --------------------------------------------------------------------------- the fitters


@pytest.mark.parametrize("kind", sorted(DATA))
def test_label_free_start_is_one_fixed_sequence_from_the_zero_error_start(kind) -> None:
    for seed, target, delta in itertools.product([0, 1, 2], [0.9, 0.95, 0.98], [0.05, 0.005]):
        s, c = DATA[kind](seed, 1500)
        a = LabelFreeStartThreshold(target, delta).fit(s, c)
        b = CertifiedPrecisionThreshold(target, delta, n_starts=1).fit(s, c)
        assert a.threshold_ == b.threshold_
        assert a.certified_ == b.certified_
        assert a.required_size_ == b.required_size_ and a.reason_ == b.reason_
        assert a.start_counts_ == [required_calibration_size(target, delta)]
        if a.certified_:
            assert a.bound_ == b.bound_ and a.level_ == delta


@pytest.mark.parametrize("kind", sorted(DATA))
def test_fallback_certifies_everything_todays_method_does(kind) -> None:
    """Three equal starts are today's starts; every chain of today's holds at least delta/3."""
    grid = itertools.product(range(4), [0.9, 0.95, 0.98], [0.05, 0.01, 0.001], [300, 1500])
    for seed, target, delta, n in grid:
        s, c = DATA[kind](seed, n)
        ours = FallbackPrecisionThreshold(target, delta).fit(s, c)
        today = CertifiedPrecisionThreshold(target, delta).fit(s, c)
        assert ours.threshold_ <= today.threshold_, (seed, target, delta, n)
        assert ours.coverage_ >= today.coverage_
        if today.certified_:
            assert ours.certified_


def test_fallback_survives_a_bump_that_ends_the_single_sequence() -> None:
    """Two mistakes just past the first start end the label-free sequence there; the fallback
    chain's second start holds its own level and carries on (numbers exact by construction)."""
    target, delta = 0.9, 0.05
    w, counts = fallback_starts(target, delta, 10_000, 3)
    n = 4 * counts[0] + 400
    s = np.linspace(1.0, 0.0, n, endpoint=False)
    c = np.ones(n, dtype=bool)
    c[counts[0]] = False  # the first item past the first start's count is a mistake
    c[counts[0] + 1] = False
    single = LabelFreeStartThreshold(target, delta).fit(s, c)
    ours = FallbackPrecisionThreshold(target, delta).fit(s, c)
    assert single.certified_ and single.n_accepted_ < counts[0] + 1
    assert ours.certified_ and ours.n_accepted_ > counts[1]


@pytest.mark.parametrize(
    "make",
    [
        lambda t, d: FallbackPrecisionThreshold(t, d),
        lambda t, d: FallbackPrecisionThreshold(t, d, weights=(2, 1, 1)),
        lambda t, d: FallbackPrecisionThreshold(t, d, n_starts="auto"),
        lambda t, d: FallbackPrecisionThreshold(t, d, n_starts=1),
        lambda t, d: LabelFreeStartThreshold(t, d),
    ],
    ids=["equal", "half-first", "auto", "one", "label-free"],
)
def test_a_certificate_is_what_its_counts_give(make) -> None:
    delta = 0.05
    # a cluster of confident mistakes can sink a single sequence: calibrated sets only here
    for kind, target in itertools.product(["calibrated", "sharp"], [0.9, 0.95]):
        s, c = DATA[kind](3, 2000)
        f = make(target, delta).fit(s, c)
        assert f.certified_
        passed = s >= f.threshold_
        k, m = int(c[passed].sum()), int(passed.sum())
        assert f.coverage_ == pytest.approx(passed.mean())
        assert f.precision_ == pytest.approx(c[passed].mean())
        assert 0 < f.level_ <= delta + 1e-15
        reach = _reachable(f.weights_, f.start_counts_, m, delta)
        assert any(f.level_ == pytest.approx(lv) for lv in reach)
        assert precision_p_value(m - k, m, target) <= f.level_
        assert f.bound_ == pytest.approx(clopper_pearson_lower(k, m, f.level_))
        assert f.bound_ >= target
        rec = f.summary()
        assert rec["level"] == f.level_ and rec["start_counts"] == f.start_counts_
        assert rec["certified"] is True and rec["method"] == f.method


@pytest.mark.parametrize("cls", [LabelFreeStartThreshold, FallbackPrecisionThreshold])
def test_too_little_data_is_not_certified_and_routes_nothing(cls) -> None:
    s, c = synthetic(30, 3)
    f = cls(0.95, 0.05).fit(s, c)
    assert not f.certified_ and f.threshold_ == math.inf
    assert not f.predict(s).any()
    assert "30 calibration items" in f.reason_
    assert f.required_size_ == f.start_counts_[0]
    rec = f.summary()
    assert rec["threshold"] is None and rec["bound"] is None and rec["level"] is None


@pytest.mark.parametrize("cls", [LabelFreeStartThreshold, FallbackPrecisionThreshold])
def test_hopeless_target_says_more_data_will_not_help(cls) -> None:
    rng = np.random.default_rng(6)
    s, c = rng.random(500), rng.random(500) < 0.5
    f = cls(0.95, 0.05).fit(s, c)
    assert not f.certified_ and f.required_size_ is None
    assert "more data alone will not" in f.reason_


@pytest.mark.parametrize("cls", [LabelFreeStartThreshold, FallbackPrecisionThreshold])
def test_fixed_grid_uses_only_grid_values(cls) -> None:
    s, c = synthetic(2000, 7)
    grid = np.linspace(0, 1, 21)
    f = cls(0.9, 0.05, grid=grid).fit(s, c)
    assert f.certified_ and np.isclose(grid, f.threshold_).any()


@pytest.mark.parametrize("cls", [LabelFreeStartThreshold, FallbackPrecisionThreshold])
def test_unfitted_predict_and_summary_raise(cls) -> None:
    with pytest.raises(NotFittedError, match="not fitted"):
        cls().predict([0.5])
    with pytest.raises(NotFittedError, match="not fitted"):
        cls().summary()


@pytest.mark.parametrize("cls", [LabelFreeStartThreshold, FallbackPrecisionThreshold])
def test_inputs_are_validated(cls) -> None:
    with pytest.raises(ValueError, match="differ in length"):
        cls().fit([0.5, 0.6], [True])
    with pytest.raises(ValueError, match="non-finite"):
        cls().fit([0.5, float("nan")], [True, False])


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(40, 1200),
    target=st.sampled_from([0.8, 0.9, 0.95]),
    delta=st.sampled_from([0.1, 0.05, 0.01]),
)
def test_the_level_never_exceeds_delta_and_is_reachable(seed, n, target, delta) -> None:
    s, c = _clustered(n, seed, share=0.03, right=0.5)
    f = FallbackPrecisionThreshold(target, delta, n_starts="auto").fit(s, c)
    if f.certified_:
        m = int((s >= f.threshold_).sum())
        assert f.level_ <= delta * (1 + 1e-12)
        reach = _reachable(f.weights_, f.start_counts_, m, delta)
        assert any(f.level_ == pytest.approx(lv) for lv in reach)
