"""Has a label mix departed from the one a policy was calibrated on?"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._base import check_fraction

__all__ = ["LabelMixDeparture", "label_mix_departure"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelMixDeparture:
    """How far an observed label mix is from a reference (calibration) mix.

    Attributes
    ----------
    total_variation : float
        ``0.5 * sum(|p_ref - p_obs|)``: the share of traffic that would have to change label
        to turn one mix into the other (0 identical, 1 disjoint).
    chi2, p_value : float
        Pearson goodness-of-fit of the observed counts against the reference shares
        (reference smoothed by half a count per label so labels it never saw do not give
        an infinite statistic).
    departs : bool
        True when the departure is both large (``total_variation >= max_tv``) and
        statistically clear (``p_value < alpha``).
    shifts : tuple of (label, reference share, observed share)
        The labels whose share moved most, largest move first (at most ten).
    n_observed : int
    """

    total_variation: float
    chi2: float
    p_value: float
    departs: bool
    shifts: tuple[tuple[str, float, float], ...]
    n_observed: int

    def message(self) -> str:
        """One line for a report or a warning."""
        top = ", ".join(f"{k} {a:.1%}→{b:.1%}" for k, a, b in self.shifts[:3])
        verdict = "departs markedly from" if self.departs else "is close to"
        return (
            f"label mix of {self.n_observed} items {verdict} the calibration mix "
            f"(total variation {self.total_variation:.3f}, chi-square p={self.p_value:.2g}; "
            f"largest shifts: {top})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_variation": self.total_variation,
            "chi2": self.chi2,
            "p_value": self.p_value,
            "departs": self.departs,
            "shifts": [list(s) for s in self.shifts],
            "n_observed": self.n_observed,
        }


def _counts(obj: Mapping[str, float] | Iterable[str], name: str) -> dict[str, float]:
    if isinstance(obj, Mapping):
        out = {str(k): float(v) for k, v in obj.items()}
    else:
        out = {str(k): float(v) for k, v in Counter(str(x) for x in obj).items()}
    if any(v < 0 or not math.isfinite(v) for v in out.values()):
        raise ValueError(f"{name} counts must be finite and non-negative")
    if sum(out.values()) <= 0:
        raise ValueError(f"{name} is empty")
    return out


def label_mix_departure(
    reference: Mapping[str, float] | Iterable[str],
    observed: Mapping[str, float] | Iterable[str],
    *,
    max_tv: float = 0.1,
    alpha: float = 0.01,
) -> LabelMixDeparture:
    """Compare an observed label mix with a reference one.

    A certified threshold holds for traffic like its calibration data. This check says
    whether a set or live traffic departs *markedly*: the total-variation distance is at
    least ``max_tv`` **and** a chi-square goodness-of-fit test rejects "same mix" at level
    ``alpha``. Requiring both keeps a tiny but significant wobble on a huge log, or a big
    but noisy difference on a handful of items, from raising an alarm. The defaults are
    starting points for a report, not a certificate; tune them to the traffic.

    Parameters
    ----------
    reference, observed : mapping of label to count (or share), or iterable of labels
        The reference is usually a policy's recorded calibration label mix. Observed counts
        must be counts (the chi-square test needs them); reference values may be shares.
    max_tv : float, default 0.1
    alpha : float, default 0.01

    Examples
    --------
    CLINC150's validation split has 3% out-of-scope items and its test split 18%: the
    out-of-scope share alone gives a total variation of at least 0.15, so the check fires.
    """
    max_tv = check_fraction(max_tv, "max_tv", open_low=False, open_high=False)
    alpha = check_fraction(alpha, "alpha")
    ref = _counts(reference, "reference")
    obs = _counts(observed, "observed")
    labels = sorted(set(ref) | set(obs))
    ref_total = sum(ref.values())
    obs_total = sum(obs.values())
    p_ref = {k: ref.get(k, 0.0) / ref_total for k in labels}
    p_obs = {k: obs.get(k, 0.0) / obs_total for k in labels}
    tv = 0.5 * sum(abs(p_ref[k] - p_obs[k]) for k in labels)
    # smoothed reference shares: half a count per label on the reference's own scale
    smooth = {k: ref.get(k, 0.0) + 0.5 for k in labels}
    smooth_total = sum(smooth.values())
    chi2 = 0.0
    for k in labels:
        expected = obs_total * smooth[k] / smooth_total
        chi2 += (obs.get(k, 0.0) - expected) ** 2 / expected
    dof = max(len(labels) - 1, 1)
    from scipy import stats

    p_value = float(stats.chi2.sf(chi2, dof))
    shifts = sorted(
        ((k, p_ref[k], p_obs[k]) for k in labels),
        key=lambda t: (-abs(t[1] - t[2]), t[0]),
    )[:10]
    return LabelMixDeparture(
        total_variation=float(tv),
        chi2=float(chi2),
        p_value=p_value,
        departs=bool(tv >= max_tv and p_value < alpha),
        shifts=tuple(shifts),
        n_observed=round(obs_total),
    )
