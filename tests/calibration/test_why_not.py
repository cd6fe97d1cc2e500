"""The text an uncertified fit gives for why, and the size it plans."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("seed", [2, 7])
def test_an_uncertified_fit_never_plans_a_size_it_already_has(seed: int) -> None:
    """The "why not" text once said "about 22 would be needed" of a 52-item set: a plan at or
    below the size at hand is no estimate, so the text says more data is needed, no number."""
    from hybridroute.calibration.techniques.certified_precision import (
        CertifiedPrecisionThreshold,
    )

    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(seed * 20):
        n = int(rng.integers(40, 120))
        s = rng.random(n)
        c = rng.random(n) < (0.7 + 0.3 * s)
        fit = CertifiedPrecisionThreshold(target=0.9, delta=0.05).fit(s, c)
        if fit.certified_:
            continue
        hits += 1
        assert fit.required_size_ is None or fit.required_size_ > n, fit.reason_
        if fit.required_size_ is None and "best observed" not in (fit.reason_ or ""):
            assert "more labelled items are needed" in (fit.reason_ or "")
    assert hits
