"""The betting confidence sequence: coverage of the mean, shrinkage, edges, weights, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridroute.monitoring import BettingConfidenceSequence, repeated_clopper_pearson
from hybridroute.monitoring._confseq import BettingDropTest


def bernoulli(p: float, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def test_before_any_observation_the_interval_is_everything():
    cs = BettingConfidenceSequence()
    assert (cs.n, cs.lower, cs.upper) == (0, 0.0, 1.0)
    assert math.isnan(cs.estimate)


@pytest.mark.parametrize(("p", "seed"), [(0.3, 0), (0.7, 1), (0.92, 2), (0.5, 3)])
def test_interval_contains_the_sample_mean_and_the_truth(p, seed):
    x = bernoulli(p, 1500, seed)
    cs = BettingConfidenceSequence(delta=0.05).update_many(x)
    assert cs.n == 1500
    assert cs.estimate == pytest.approx(x.mean())
    assert cs.lower <= cs.estimate <= cs.upper
    assert cs.lower <= p <= cs.upper


@pytest.mark.parametrize("p", [0.2, 0.6, 0.95])
def test_width_shrinks_with_n(p):
    x = bernoulli(p, 4000, seed=7)
    lower, upper = BettingConfidenceSequence().trace(x)
    width = upper - lower
    assert width[99] > width[999] > width[3999]
    # roughly the 1/sqrt(n) rate: 40x the labels, well under a third of the width
    assert width[3999] < width[99] / 3


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_running_intersection_is_monotone(p):
    lower, upper = BettingConfidenceSequence().trace(bernoulli(p, 2000, seed=11))
    assert np.all(np.diff(lower) >= 0)
    assert np.all(np.diff(upper) <= 0)
    assert np.all(lower <= upper)


@pytest.mark.parametrize("n", [50, 400])
def test_all_ones_and_all_zeros(n):
    ones = BettingConfidenceSequence().update_many(np.ones(n))
    assert ones.upper == 1.0 and ones.estimate == 1.0
    assert 0.5 < ones.lower < 1.0
    zeros = BettingConfidenceSequence().update_many(np.zeros(n))
    assert zeros.lower == 0.0 and zeros.estimate == 0.0
    assert 0.0 < zeros.upper < 0.5
    # symmetric by construction (theta = 1/2, symmetric grid)
    assert zeros.upper == pytest.approx(1.0 - ones.lower)


def test_all_ones_tightens_with_n():
    lower, upper = BettingConfidenceSequence().trace(np.ones(1000))
    assert np.all(upper == 1.0)
    assert lower[49] < lower[199] < lower[999]


def test_one_at_a_time_equals_batch():
    x = bernoulli(0.8, 700, seed=5)  # spans more than one internal block
    w = np.random.default_rng(6).uniform(0.2, 1.0, size=700)
    batch = BettingConfidenceSequence().update_many(x, w)
    single = BettingConfidenceSequence()
    for xi, wi in zip(x, w, strict=True):
        single.update(float(xi), float(wi))
    assert (single.n, single.lower, single.upper) == (batch.n, batch.lower, batch.upper)
    assert single.estimate == pytest.approx(batch.estimate)
    np.testing.assert_allclose(single.log_capital_up_, batch.log_capital_up_)


def test_fractional_observations_are_accepted():
    x = np.random.default_rng(3).beta(8, 2, size=1000)  # mean 0.8
    cs = BettingConfidenceSequence().update_many(x)
    assert cs.lower < 0.8 < cs.upper
    assert cs.upper - cs.lower < 0.1


def test_unit_weights_change_nothing():
    x = bernoulli(0.7, 500, seed=9)
    a = BettingConfidenceSequence().update_many(x)
    b = BettingConfidenceSequence().update_many(x, 1.0)
    c = BettingConfidenceSequence().update_many(x, np.ones(500))
    assert (a.lower, a.upper) == (b.lower, b.upper) == (c.lower, c.upper)


def test_importance_weights_recover_the_stream_precision():
    # Two strata of auto-routed traffic: "easy" (precision 0.98) audited at 2%, "hard"
    # (precision 0.6) audited at 20%. Audited items over-represent the hard stratum, so the
    # unweighted interval is biased low; weights pi_min / pi undo it.
    rng = np.random.default_rng(21)
    n = 200_000
    hard = rng.random(n) < 0.2
    correct = np.where(hard, rng.random(n) < 0.6, rng.random(n) < 0.98).astype(float)
    pi = np.where(hard, 0.2, 0.02)
    audited = rng.random(n) < pi
    truth = 0.8 * 0.98 + 0.2 * 0.6
    x, w = correct[audited], (0.02 / pi)[audited]
    weighted = BettingConfidenceSequence().update_many(x, w)
    unweighted = BettingConfidenceSequence().update_many(x)
    assert weighted.lower < truth < weighted.upper
    assert weighted.estimate == pytest.approx(truth, abs=0.02)
    assert unweighted.upper < truth  # the naive reading of a stratified audit is wrong


def test_smaller_weights_give_wider_intervals():
    x = bernoulli(0.9, 1000, seed=4)
    full = BettingConfidenceSequence().update_many(x)
    light = BettingConfidenceSequence().update_many(x, 0.25)
    assert light.upper - light.lower > full.upper - full.lower


@pytest.mark.parametrize("delta", [0.01, 0.1])
def test_smaller_delta_gives_wider_intervals(delta):
    x = bernoulli(0.6, 800, seed=8)
    cs = BettingConfidenceSequence(delta=delta).update_many(x)
    ref = BettingConfidenceSequence(delta=0.05).update_many(x)
    wider = (cs.upper - cs.lower) > (ref.upper - ref.lower)
    assert wider == (delta < 0.05)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (1.5, r"observation 0 must be a finite number in \[0, 1\], got 1.5"),
        (-0.1, r"observation 0 .* got -0.1"),
        (float("nan"), r"observation 0 .* got nan"),
        (float("inf"), r"observation 0 .* got inf"),
        ("yes", r"observations must be numbers in \[0, 1\]"),
    ],
)
def test_bad_observation_is_refused(x, match):
    cs = BettingConfidenceSequence()
    with pytest.raises(ValueError, match=match):
        cs.update(x)
    assert cs.n == 0


def test_bad_observation_in_a_batch_names_its_position_and_adds_nothing():
    cs = BettingConfidenceSequence().update_many([1, 0, 1])
    with pytest.raises(ValueError, match=r"observation 2 .* got 2.0"):
        cs.update_many([1, 1, 2, 0])
    assert cs.n == 3


@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (0.0, r"weight 0 must be in \(0, 1\].*got 0.0"),
        (-1.0, r"weight 0 must be in \(0, 1\].*got -1.0"),
        (1.01, r"weight 0 must be in \(0, 1\].*got 1.01"),
        (float("nan"), r"weight 0 must be in \(0, 1\].*got nan"),
    ],
)
def test_bad_weight_is_refused(weight, match):
    cs = BettingConfidenceSequence()
    with pytest.raises(ValueError, match=match):
        cs.update(1.0, weight)
    assert cs.n == 0


def test_weights_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match=r"weights have shape \(2,\), observations \(3,\)"):
        BettingConfidenceSequence().update_many([1, 0, 1], [0.5, 0.5])


@pytest.mark.parametrize("delta", [0, 1, -0.5, 1.5, float("nan"), "a", None])
def test_bad_delta_is_refused(delta):
    with pytest.raises(ValueError, match=r"delta must be"):
        BettingConfidenceSequence(delta=delta)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"grid": 2}, "grid must be an integer >= 3"),
        ({"grid": 10.5}, "grid must be an integer >= 3"),
        ({"grid": True}, "grid must be an integer >= 3"),
        ({"theta": 0.0}, r"theta must be in \(0, 1\)"),
        ({"max_bet": 1.0}, r"max_bet must be in \(0, 1\)"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BettingConfidenceSequence(**kwargs)


def test_it_is_deterministic():
    x = bernoulli(0.85, 600, seed=13)
    a = BettingConfidenceSequence().trace(x)
    b = BettingConfidenceSequence().trace(x)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_repeated_clopper_pearson_is_the_exact_interval_at_each_label():
    from hybridroute.calibration import clopper_pearson_lower, clopper_pearson_upper

    x = bernoulli(0.8, 50, seed=2)
    lower, upper = repeated_clopper_pearson(x, delta=0.1)
    k = int(x[:20].sum())
    assert lower[19] == pytest.approx(clopper_pearson_lower(k, 20, 0.05))
    assert upper[19] == pytest.approx(clopper_pearson_upper(k, 20, 0.05))
    assert lower.shape == upper.shape == (50,)


@pytest.mark.parametrize(("xs", "match"), [([0, 0.5, 1], "0/1"), ([[1, 0]], "0/1")])
def test_repeated_clopper_pearson_takes_binary_outcomes(xs, match):
    with pytest.raises(ValueError, match=match):
        repeated_clopper_pearson(xs)


def _ever_excluded(lower: np.ndarray, upper: np.ndarray, p: float) -> bool:
    return bool(np.any((lower > p) | (upper < p)))


@pytest.mark.slow
def test_time_uniform_coverage_over_many_stable_streams():
    """P(the CS *ever* excludes p) <= delta; the naive repeated test does not keep it."""
    from scipy import stats

    delta, p, streams, length = 0.05, 0.92, 200, 2000  # p = target 0.9 + a small margin
    cs_misses = naive_misses = 0
    for seed in range(streams):
        x = bernoulli(p, length, seed=10_000 + seed)
        cs_misses += _ever_excluded(*BettingConfidenceSequence(delta=delta).trace(x), p)
        naive_misses += _ever_excluded(*repeated_clopper_pearson(x, delta=delta), p)
    cs_rate, naive_rate = cs_misses / streams, naive_misses / streams
    print(
        f"\never-excludes rate over {streams} streams of {length}: "
        f"betting CS {cs_rate:.3f}, repeated Clopper-Pearson {naive_rate:.3f} (delta {delta})"
    )
    # binomial tolerance: a rate at delta would exceed this bound with probability < 0.1%
    allowed = stats.binom.ppf(0.999, streams, delta) / streams
    assert cs_rate <= allowed
    # and the naive test's rate exceeds delta beyond what chance would explain
    assert naive_misses > stats.binom.ppf(0.999, streams, delta)


def test_empty_batches_and_one_pass_iterables():
    cs = BettingConfidenceSequence()
    lower, upper = cs.trace([])
    assert lower.shape == upper.shape == (0,) and cs.n == 0
    cs.update_many((x for x in [1, 0, 1]), (w for w in [0.5, 0.5, 1.0]))
    assert cs.n == 3 and cs.estimate == pytest.approx(0.75)
    assert BettingConfidenceSequence().update_many(np.array([True, False])).n == 2


# -- the one-sided drop test -----------------------------------------------------------


def test_the_drop_test_does_not_bet_while_the_recent_mean_is_above_the_level():
    test = BettingDropTest(0.9)
    log_k = test.trace(np.ones(2000))
    assert np.all(log_k == 0.0) and test.bet == 0.0 and not test.rejected
    assert (test.n, test.rejected_at_, test.max_log_capital_) == (2000, None, 0.0)


@pytest.mark.parametrize(("level", "p"), [(0.9, 0.7), (0.5, 0.3), (0.95, 0.85)])
def test_the_drop_test_rejects_a_mean_below_the_level_and_sticks(level, p):
    test = BettingDropTest(level, 0.05)
    log_k = test.trace(bernoulli(p, 1000, seed=17))
    found = test.rejected_at_
    assert found is not None and found == int(np.argmax(log_k >= np.log(20))) + 1
    test.update_many(np.ones(3000))  # good news afterwards does not undo a rejection
    assert test.rejected_at_ == found and test.log_capital_ < test.max_log_capital_


def test_the_drop_test_one_at_a_time_equals_batch():
    x = np.concatenate([bernoulli(0.95, 300, 1), bernoulli(0.75, 300, 2)])
    w = np.random.default_rng(3).uniform(0.2, 1.0, size=600)
    batch = BettingDropTest(0.9).update_many(x, w)
    single = BettingDropTest(0.9)
    for xi, wi in zip(x, w, strict=True):
        single.update(float(xi), float(wi))
    assert single.rejected_at_ == batch.rejected_at_ is not None
    assert single.log_capital_ == pytest.approx(batch.log_capital_)
    assert single.bet == pytest.approx(batch.bet)


def test_every_factor_keeps_a_share_of_the_capital():
    # the worst case for the gambler: scores just below the level (the biggest bets: a
    # small, sure gain), then ones (the largest loss a bet can take)
    test = BettingDropTest(0.9, max_bet=0.5)
    test.update_many(np.full(300, 0.8))
    assert test.bet == pytest.approx(0.5 / 0.1)  # the truncation c / (1 - level)
    log_k = test.trace(np.ones(50))
    assert np.all(np.diff(np.concatenate(([test.log_capital_], log_k))) > np.log(0.5) - 1e-12)


def test_a_constant_weight_hardly_matters_and_varying_weights_are_followed():
    # the bet scales as 1 / w, so a constant weight changes only the prior's share
    x = np.concatenate([bernoulli(0.95, 500, 4), bernoulli(0.7, 2000, 5)])
    full = BettingDropTest(0.9).update_many(x).rejected_at_
    light = BettingDropTest(0.9).update_many(x, 0.3).rejected_at_
    assert full is not None and light is not None and 500 < full and abs(full - light) <= 10
    # the errors after the change sit on items of weight 0.05 (audited 20x as often as the
    # rest): weighted, they are rare events of the stream, and the test does not reject
    w = np.where(x == 0.0, 0.05, 1.0)
    assert BettingDropTest(0.9).update_many(x, w).rejected_at_ is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level": 1.0}, r"level must be in \(0, 1\)"),
        ({"level": "x"}, r"level must be a number"),
        ({"level": 0.9, "delta": 0.0}, r"delta must be in \(0, 1\)"),
        ({"level": 0.9, "window": 0}, "window must be an integer >= 1"),
        ({"level": 0.9, "window": True}, "window must be an integer >= 1"),
        ({"level": 0.9, "max_bet": 1.0}, r"max_bet must be in \(0, 1\)"),
    ],
)
def test_the_drop_test_refuses_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BettingDropTest(**kwargs)


@pytest.mark.parametrize(
    ("xs", "ws", "match"),
    [([1, 2], None, r"observation 1 must be a finite number"), ([1, 0], [1, 0], r"weight 1")],
)
def test_the_drop_test_refuses_bad_observations_and_adds_nothing(xs, ws, match):
    test = BettingDropTest(0.9).update_many([0, 0])
    before = (test.n, test.log_capital_, test.bet)
    with pytest.raises(ValueError, match=match):
        test.update_many(xs, ws)
    assert (test.n, test.log_capital_, test.bet) == before
    assert test.trace([]).shape == (0,)
