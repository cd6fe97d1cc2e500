"""Synthetic calibration data shared by the calibration tests."""

from __future__ import annotations

import numpy as np
import pytest


def synthetic(n: int, seed: int, *, skew: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated-by-construction scores: ``correct ~ Bernoulli(score)``."""
    rng = np.random.default_rng(seed)
    scores = rng.beta(skew, 1.0, size=n)
    correct = rng.random(n) < scores
    return scores, correct


def synthetic_proba(
    n: int, k: int, seed: int, *, sharpness: float = 3.0
) -> tuple[np.ndarray, np.ndarray]:
    """Probability rows over ``k`` classes and labels drawn from a sharper truth."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * sharpness
    true_p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in true_p])
    # a model that is over-confident: logits doubled
    model = np.exp(2 * logits) / np.exp(2 * logits).sum(axis=1, keepdims=True)
    return model, y


@pytest.fixture
def scores_correct() -> tuple[np.ndarray, np.ndarray]:
    return synthetic(3000, 0)
