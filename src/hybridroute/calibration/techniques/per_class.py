"""Per-class thresholds, with small classes pooled."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from .. import _record as rec
from .._base import as_flags, as_scores, jsonable_threshold, same_length
from .._bounds import required_calibration_size
from ._base import Technique, ThresholdFitter, Verdict

__all__ = ["PerClassThreshold"]

#: Name of the group that pools the classes too small to be fitted alone.
POOLED = "__pooled__"


class PerClassThreshold(Technique):
    """One threshold per predicted label; classes too small to fit alone share a pooled one.

    Items are grouped by their *predicted* (top) label. A class with at least
    ``min_class_size`` calibration items gets its own copy of ``base``; the others are
    pooled into one group fitted once, whose threshold they share. Which classes are
    pooled depends on item counts only, never on correctness, so each group's fit keeps
    ``base``'s guarantee for that group. With ``simultaneous=True`` the base's ``delta``
    is divided among the groups (Bonferroni) so that all groups' guarantees hold together.

    In a policy it replaces the auto-route threshold by the item's label's threshold
    (a label not seen at fit time takes the pooled one).

    Parameters
    ----------
    base : ThresholdFitter
        The fitter cloned for each group (e.g. :class:`CertifiedPrecisionThreshold`).
    min_class_size : int or None, default None
        Items needed to fit a class alone. ``None`` derives it from a certifying base:
        twice the smallest accepted count it can certify with zero errors (its first
        start; a class below that could only be certified by luck).
    simultaneous : bool, default False
        Split ``delta`` among groups so every group's guarantee holds at once.

    Attributes
    ----------
    thresholds_ : dict of str to float
        Threshold of every class seen at fit time (pooled classes carry the pool's).
    pool_threshold_ : float
        Threshold for pooled classes and for labels not seen at fit time.
    pooled_classes_ : tuple of str
    groups_ : dict of str to dict
        Each group's fitted record (key ``__pooled__`` for the pool).
    """

    method = "per_class"

    def __init__(
        self,
        base: ThresholdFitter,
        min_class_size: int | None = None,
        simultaneous: bool = False,
    ) -> None:
        self.base = base
        self.min_class_size = min_class_size
        self.simultaneous = simultaneous

    def _min_size(self) -> int:
        if self.min_class_size is not None:
            if int(self.min_class_size) != self.min_class_size or self.min_class_size < 1:
                raise ValueError(
                    f"min_class_size must be a positive integer, got {self.min_class_size!r}"
                )
            return int(self.min_class_size)
        certifiable = getattr(self.base, "_certifiable_count", None)
        if certifiable is not None:
            return 2 * int(certifiable())
        params = self.base.get_params(deep=False)
        if "target" in params and "delta" in params:
            return 2 * required_calibration_size(float(params["target"]), float(params["delta"]))
        raise ValueError(
            f"min_class_size must be given for a {type(self.base).__name__} base "
            "(it has no target and delta to derive it from)"
        )

    def fit(self, scores: Any, correct: Any, labels: Sequence[str]) -> Self:
        """Fit on scores, correctness and the predicted label of each item.

        Parameters
        ----------
        scores : array-like of float, shape (n_items,)
            The score ``base`` thresholds (usually the calibrated top-label confidence);
            finite.
        correct : array-like of bool or 0/1, shape (n_items,)
            Whether each item's top label was right.
        labels : sequence of str, length n_items
            Each item's *predicted* (top) label: it picks the item's group.

        Returns
        -------
        PerClassThreshold
            ``self``, fitted; ``certified_`` is True only when every group's fit is.

        Raises
        ------
        ValueError
            If ``base`` is not a threshold fitter, ``min_class_size`` is not a positive
            integer (or is ``None`` with a base that has no ``target`` and ``delta``), or the
            inputs are empty, differ in length or hold bad values.
        """
        if not isinstance(self.base, ThresholdFitter):
            raise ValueError(f"base must be a threshold fitter, got {self.base!r}")
        s = as_scores(scores)
        c = as_flags(correct)
        lab = np.asarray([str(x) for x in labels], dtype=object)
        same_length(scores=s, correct=c, labels=lab)
        min_size = self._min_size()
        classes, counts = np.unique(lab.astype(str), return_counts=True)
        own = [str(k) for k, m in zip(classes, counts, strict=True) if m >= min_size]
        pooled = [str(k) for k, m in zip(classes, counts, strict=True) if m < min_size]
        n_groups = len(own) + (1 if pooled else 0)
        overrides: dict[str, Any] = {}
        base_params = self.base.get_params(deep=False)
        if self.simultaneous and "delta" in base_params and n_groups > 1:
            overrides["delta"] = float(base_params["delta"]) / n_groups
        groups: dict[str, Any] = {}
        thresholds: dict[str, float] = {}
        for k in own:
            mask = lab == k
            f = self.base._clone(**overrides).fit(s[mask], c[mask])
            groups[k] = f
            thresholds[k] = float(f.threshold_)
        if pooled:
            mask = np.isin(lab, pooled)
            f = self.base._clone(**overrides).fit(s[mask], c[mask])
            groups[POOLED] = f
            pool_t = float(f.threshold_)
            for k in pooled:
                thresholds[k] = pool_t
        else:
            pool_t = math.inf
        self.thresholds_ = dict(sorted(thresholds.items()))
        self.pool_threshold_ = pool_t
        self.pooled_classes_ = tuple(sorted(pooled))
        self.min_class_size_ = min_size
        self.fitted_groups_ = groups
        self.groups_ = {k: f.to_state() for k, f in sorted(groups.items())}
        passed = self.predict(s, lab.tolist())
        self.coverage_ = float(passed.mean())
        self.precision_ = float(c[passed].mean()) if passed.any() else math.nan
        self.n_calibration_ = len(s)
        self.certified_ = all(bool(getattr(f, "certified_", False)) for f in groups.values())
        return self

    def threshold_for(self, label: str) -> float:
        """The threshold applied to items whose top label is ``label``."""
        self._check_fitted("thresholds_")
        return self.thresholds_.get(str(label), self.pool_threshold_)

    def predict(self, scores: Any, labels: Sequence[str]) -> np.ndarray:
        """Boolean array: which items pass their class's threshold."""
        self._check_fitted("thresholds_")
        s = as_scores(scores, allow_empty=True)
        lab = [str(x) for x in labels]
        if len(lab) != len(s):
            raise ValueError(f"inputs differ in length: scores={len(s)}, labels={len(lab)}")
        t = np.array([self.threshold_for(k) for k in lab], dtype=float)
        return s >= t

    def decide(self, score: float, label: str | None = None) -> Verdict:
        """Whether one item's score passes its label's threshold (``class:<label>``)."""
        threshold = self.thresholds_.get(str(label), self.pool_threshold_)
        return Verdict(score >= threshold, jsonable_threshold(threshold), f"class:{label}")

    def _state(self) -> dict[str, Any]:
        self._check_fitted("thresholds_")
        return {
            "method": self.method,
            "base": self.base.method,
            "score": self.score_name,
            "min_class_size": self.min_class_size_,
            "simultaneous": bool(self.simultaneous),
            "thresholds": {k: jsonable_threshold(v) for k, v in self.thresholds_.items()},
            "pool_threshold": jsonable_threshold(self.pool_threshold_),
            "pooled_classes": list(self.pooled_classes_),
            "groups": self.groups_,
            "calibration_size": self.n_calibration_,
            "coverage": self.coverage_,
            "precision": None if math.isnan(self.precision_) else self.precision_,
            "certified": self.certified_,
        }

    @classmethod
    def _read(cls, state: Any, field: str) -> Self:
        """Every group's record, and each class's threshold its group's."""
        from . import read_technique

        groups = state.get("groups")
        rec.ensure(
            isinstance(groups, dict) and bool(groups),
            f"{field}.groups",
            "must be a non-empty object",
        )
        fitted = {}
        for name, group in groups.items():
            fitted[name] = read_technique(group, f"{field}.groups.{name}")
            rec.same(
                group.get("method"),
                state.get("base"),
                f"{field}.groups.{name}.method",
                f"{field}.base",
            )
        thresholds = state.get("thresholds")
        pooled = state.get("pooled_classes")
        rec.ensure(isinstance(thresholds, dict), f"{field}.thresholds", "must be an object")
        rec.ensure(
            isinstance(pooled, list) and all(isinstance(c, str) for c in pooled),
            f"{field}.pooled_classes",
            "must be a list of labels",
        )
        pool = groups.get(POOLED)
        rec.same(
            state.get("pool_threshold"),
            None if pool is None else pool.get("threshold"),
            f"{field}.pool_threshold",
            f"{field}.groups.{POOLED}",
        )
        rec.ensure(
            (pool is None) == (not pooled), f"{field}.pooled_classes", "do not match the groups"
        )
        for label, value in thresholds.items():
            source = POOLED if label in pooled else label
            rec.ensure(source in groups, f"{field}.thresholds.{label}", "has no fitted group")
            rec.same(
                value,
                groups[source].get("threshold"),
                f"{field}.thresholds.{label}",
                f"{field}.groups.{source}",
            )
        rec.same(
            state["certified"],
            all(bool(g.get("certified")) for g in groups.values()),
            f"{field}.certified",
            "its groups",
        )
        first = next(iter(fitted.values()))
        return cls(
            first._clone(), state.get("min_class_size"), bool(state.get("simultaneous"))
        )._restore(  # type: ignore[arg-type]
            state,
            field,
            fitted_groups_=fitted,
            groups_=dict(groups),
            thresholds_={k: rec.threshold_value(v) for k, v in thresholds.items()},
            pool_threshold_=rec.threshold_value(state.get("pool_threshold")),
            pooled_classes_=tuple(pooled),
            min_class_size_=state.get("min_class_size"),
        )
