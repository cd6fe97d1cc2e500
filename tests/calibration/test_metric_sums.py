"""The one ECE and AURC formulas: from per-bin sums and from tied blocks.

``expected_calibration_error`` and the streamed evaluation both compute ECE with
``ece_from_bin_sums`` over ``width_bin_sums`` (sums of batches add up); ``aurc`` and the
streamed (binned) AURC both end in ``aurc_from_blocks``.
"""

from __future__ import annotations

import numpy as np
import pytest

from hybridroute.calibration import aurc, expected_calibration_error, reliability_diagram
from hybridroute.calibration._metrics import (
    DEFAULT_ECE_BINS,
    aurc_from_blocks,
    ece_from_bin_sums,
    width_bin_sums,
)


def _scores(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    conf = np.round(rng.uniform(0.2, 1.0, size=n), 2)  # rounded: many ties
    conf[:3] = [0.0, 1.0, 1.0]  # both edges, 1.0 in the last bin
    correct = rng.random(n) < conf
    return conf, correct


@pytest.mark.parametrize(("seed", "n", "n_bins"), [(0, 50, 15), (1, 500, 10), (2, 7, 3)])
def test_ece_from_batches_of_bin_sums_is_the_ece(seed, n, n_bins):
    conf, correct = _scores(seed, n)
    total = [np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)]
    for part in np.array_split(np.arange(n), 4):
        for acc, add in zip(total, width_bin_sums(conf[part], correct[part], n_bins), strict=True):
            acc += add
    ece = expected_calibration_error(conf, correct, n_bins=n_bins)
    assert ece_from_bin_sums(*total) == pytest.approx(ece, abs=1e-12)
    # and it is the item-weighted gap of the reliability diagram
    d = reliability_diagram(conf, correct, n_bins=n_bins)
    assert ece == pytest.approx(np.sum(d.count * np.abs(d.accuracy - d.confidence)) / n)
    assert d.count.sum() == n and total[0].sum() == n


def test_the_default_ece_has_fifteen_bins():
    conf, correct = _scores(3, 200)
    assert DEFAULT_ECE_BINS == 15
    assert expected_calibration_error(conf, correct) == expected_calibration_error(
        conf, correct, n_bins=15
    )
    assert np.isnan(ece_from_bin_sums([0, 0], [0.0, 0.0], [0, 0]))


@pytest.mark.parametrize(("seed", "n"), [(0, 40), (4, 300)])
def test_aurc_is_the_blocks_formula_over_distinct_confidences(seed, n):
    conf, correct = _scores(seed, n)
    levels = np.unique(conf)[::-1]  # most confident first, one block per distinct score
    count = np.array([np.sum(conf == v) for v in levels])
    errors = np.array([np.sum((conf == v) & ~correct) for v in levels])
    assert aurc_from_blocks(count, errors) == pytest.approx(aurc(conf, correct), abs=1e-12)
    # empty blocks change nothing; no items at all is nan
    padded = np.insert(count, 1, 0), np.insert(errors, 1, 0)
    assert aurc_from_blocks(*padded) == pytest.approx(aurc(conf, correct), abs=1e-12)
    assert np.isnan(aurc_from_blocks([0], [0]))
