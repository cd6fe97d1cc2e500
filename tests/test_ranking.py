"""``hybridroute._ranking``: the one rule that completes a partial ranking into a row."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute._ranking import complete_ranking


@pytest.mark.parametrize(
    ("columns", "scores", "n", "row"),
    [
        ([2], [0.5], 3, [0.25, 0.25, 0.5]),  # the rest shares what the ranking left
        ([1, 0], [0.5, 0.25], 4, [0.25, 0.5, 0.125, 0.125]),
        ([0, 1, 2], [0.5, 0.25, 0.25], 3, [0.5, 0.25, 0.25]),  # a full ranking is kept
        ([0], [1.0], 3, [1.0, 0.0, 0.0]),  # nothing left to share
        ([0, 1], [0.75, 0.5], 3, [0.75, 0.5, 0.0]),  # scores over 1: nothing shared
        ([1, 1], [0.25, 0.5], 3, [0.25, 0.5, 0.25]),  # a column twice keeps its last score
    ],
)
def test_unranked_columns_share_what_the_ranking_left(columns, scores, n, row) -> None:
    out = complete_ranking(columns, scores, n)
    assert out.dtype == np.float64 and out.tolist() == row


def test_scores_are_not_judged_here() -> None:
    # the caller refuses a negative or non-finite score; the rule only fills the rest
    assert complete_ranking([0], [-0.5], 3).tolist() == [-0.5, 0.75, 0.75]
    nan = complete_ranking([0], [math.nan], 2)
    assert math.isnan(nan[0]) and nan[1] == 0.0


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.permutations(range(n)).flatmap(
                lambda order: st.integers(1, n).map(lambda k: order[:k])
            ),
            st.lists(st.floats(0, 1), min_size=n, max_size=n),
        )
    )
)
def test_the_row_holds_the_scores_and_sums_to_at_least_one(case) -> None:
    n, columns, raw = case
    scores = raw[: len(columns)]
    row = complete_ranking(columns, scores, n)
    assert row[list(columns)].tolist() == [float(s) for s in scores]
    rest = [j for j in range(n) if j not in columns]
    if rest:
        assert len({row[j] for j in rest}) == 1  # shared equally
        assert row.sum() >= 1.0 - 1e-12 or sum(scores) >= 1.0


def test_the_policy_completes_a_partial_ranking_with_it() -> None:
    from hybridroute.calibration import EmpiricalThreshold, Policy
    from hybridroute.classifiers import RankedLabels

    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 500)
    fitted = EmpiricalThreshold(0.7).fit(conf, rng.random(500) < conf)
    policy = Policy.build(classes=["a", "b", "c", "d"], threshold=fitted)
    for labels, scores in (
        (("c",), (0.6,)),
        (("b", "d"), (0.5, 0.3)),
        (("a", "c", "d"), (0.4, 0.3, 0.1)),
    ):
        cols = [policy.classes.index(x) for x in labels]
        row = complete_ranking(cols, scores, 4)[None, :]
        want = policy.apply_proba(row, top=[cols[0]])[0]
        assert policy.apply(RankedLabels(labels=labels, scores=scores)) == want
