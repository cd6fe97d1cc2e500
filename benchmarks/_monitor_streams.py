"""Scored rows, simulated deployments and the three monitors of ``bench_monitor``.

Private to :mod:`benchmarks.bench_monitor`. Three parts:

* **scored rows** -- the local classifier of ``bench_calibration`` (TF-IDF word 1-2 + char
  2-5 -> logistic regression, ``LocalClassifier(Cs=(10.0,))``) fitted on a set's train split
  and scoring its test split, keeping the top two labels as well as the confidence (the
  label-mix, out-of-scope and degraded-model settings need them). For Banking77, which
  has no out-of-scope rows, CLINC150's out-of-scope test texts are scored by the Banking77
  model as its out-of-scope traffic.
* **deployments** -- a seeded half of the scored rows calibrates a certified threshold; the
  other half is the traffic it is deployed on. The auto-routed items of that half (top
  label in scope, confidence at or above the threshold) are the *pool* stable streams
  draw from; each drift setting defines the pool after the change.
* **monitors** -- our :class:`~hybridroute.monitoring.PrecisionMonitor`, MAPIE's
  ``RiskMonitoring`` and the naive repeated Clopper--Pearson test, each read after every
  label of the same audited streams.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OOS = "oos"


# --------------------------------------------------------------------------- scored rows


@dataclass(frozen=True)
class ScoredRows:
    """A classifier's scores on one labelled set (one row per scored text).

    ``top1`` / ``top2`` / ``truth`` index ``classes``; ``truth`` is ``-1`` for a row whose
    true label is out of scope (or not a class of the model). ``oos_class`` is the index of
    the model's own out-of-scope class (CLINC150's ``oos``), ``-1`` when it has none.
    ``extra_*`` are out-of-scope texts from elsewhere, scored by the same model (the
    out-of-scope traffic of a set that has none of its own); they may be empty.
    """

    name: str
    classes: tuple[str, ...]
    conf: np.ndarray
    top1: np.ndarray
    top2: np.ndarray
    truth: np.ndarray
    oos_class: int
    extra_conf: np.ndarray
    extra_top1: np.ndarray
    extra_top2: np.ndarray

    def __len__(self) -> int:
        return len(self.conf)

    @property
    def correct(self) -> np.ndarray:
        """Whether the top label is the true one (an out-of-scope row never is)."""
        return (self.top1 == self.truth) & (self.truth >= 0) & (self.top1 != self.oos_class)

    @property
    def out_of_scope(self) -> np.ndarray:
        """Rows whose true label is out of scope."""
        return self.truth < 0

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            path,
            classes=np.asarray(self.classes),
            conf=self.conf,
            top1=self.top1,
            top2=self.top2,
            truth=self.truth,
            oos_class=np.asarray(self.oos_class),
            extra_conf=self.extra_conf,
            extra_top1=self.extra_top1,
            extra_top2=self.extra_top2,
        )

    @classmethod
    def load(cls, name: str, path: Path) -> ScoredRows:
        d = np.load(path, allow_pickle=False)
        return cls(
            name=name,
            classes=tuple(str(c) for c in d["classes"]),
            conf=d["conf"],
            top1=d["top1"],
            top2=d["top2"],
            truth=d["truth"],
            oos_class=int(d["oos_class"]),
            extra_conf=d["extra_conf"],
            extra_top1=d["extra_top1"],
            extra_top2=d["extra_top2"],
        )


def _rank(proba: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(-proba, axis=1, kind="stable")[:, :2]
    return proba.max(axis=1), order[:, 0], order[:, 1]


def _fit_and_score(
    name: str, train: Any, scored: Any, extra_texts: list[str] | None = None
) -> ScoredRows:
    from hybridroute.classifiers import LocalClassifier

    t0 = time.perf_counter()
    # the classifier and setting bench_calibration scores these sets with
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    classes = tuple(str(c) for c in clf.classes_)
    index = {c: i for i, c in enumerate(classes)}
    conf, top1, top2 = _rank(clf.predict_proba(scored.texts))
    truth = np.array([-1 if str(v) == OOS else index.get(str(v), -1) for v in scored.y])
    if extra_texts:
        extra_conf, extra_top1, extra_top2 = _rank(clf.predict_proba(extra_texts))
    else:
        extra_conf = np.zeros(0)
        extra_top1 = extra_top2 = np.zeros(0, dtype=int)
    rows = ScoredRows(
        name=name,
        classes=classes,
        conf=conf,
        top1=top1,
        top2=top2,
        truth=truth,
        oos_class=index.get(OOS, -1),
        extra_conf=extra_conf,
        extra_top1=extra_top1,
        extra_top2=extra_top2,
    )
    print(
        f"# {name}: fitted and scored in {time.perf_counter() - t0:.0f}s; top-1 accuracy "
        f"{rows.correct.mean():.4f} on {len(rows)} rows ({int(rows.out_of_scope.sum())} "
        f"out of scope), {len(extra_conf)} extra out-of-scope texts",
        file=sys.stderr,
    )
    return rows


def scored_rows(name: str, data_dir: Path | None, cache: Path | None = None) -> ScoredRows:
    """Scores of ``name`` (``banking77``, ``clinc150`` or ``support-tickets``), cached.

    Public sets are read from ``data_dir`` (never downloaded); ``support-tickets`` is the
    bundled set (train split -> calibration + test splits), for quick runs.
    """
    if cache is not None and (cache / f"{name}_monitor_rows.npz").exists():
        return ScoredRows.load(name, cache / f"{name}_monitor_rows.npz")
    from hybridroute.datasets import load_dataset

    if name == "support-tickets":
        ds = load_dataset("support-tickets")
        rows = _fit_and_score(name, ds.split("train"), ds.split("calibration", "test"))
    elif name in ("banking77", "clinc150"):
        if data_dir is None:
            raise FileNotFoundError(
                f"{name}: public sets not found: set HYBRIDROUTE_DATA_DIR or --data-dir"
            )
        ds = load_dataset(name, data_dir=data_dir, download=False)
        extra = None
        if name == "banking77":
            # Banking77 has no out-of-scope rows: CLINC150's out-of-scope test texts are
            # the Banking77 model's out-of-scope traffic (none of them is a banking intent
            # of the model, so every one it auto-routes is an error)
            clinc = load_dataset("clinc150", data_dir=data_dir, download=False).split("test")
            extra = [t for t, y in zip(clinc.texts, clinc.y, strict=True) if str(y) == OOS]
        rows = _fit_and_score(name, ds.split("train"), ds.split("test"), extra)
    else:
        raise ValueError(f"unknown set {name!r}: banking77, clinc150 or support-tickets")
    if cache is not None:
        rows.save(cache / f"{name}_monitor_rows.npz")
    return rows


def synthetic_rows(n: int = 3000, classes: int = 12, seed: int = 0) -> ScoredRows:
    """Calibrated synthetic scores with an out-of-scope share (for tests and examples)."""
    rng = np.random.default_rng(seed)
    names = (*(f"c{i}" for i in range(classes)), OOS)
    truth = rng.integers(0, classes, n)
    oos = rng.random(n) < 0.15
    # harder classes: a lower confidence on average
    difficulty = np.linspace(0.0, 0.15, classes)[truth]
    conf = np.clip(rng.beta(12, 0.8, n) - difficulty, 0.05, 0.999)
    right = rng.random(n) < conf
    conf = np.where(oos, rng.beta(2, 4, n), conf)  # out-of-scope texts: less confident
    wrong = (truth + rng.integers(1, classes, n)) % classes
    top1 = np.where(right, truth, wrong)
    top2 = np.where(right, wrong, truth)
    top1 = np.where(oos & (rng.random(n) < 0.5), classes, top1)  # half found out of scope
    truth = np.where(oos, -1, truth)
    m = max(n // 5, 1)
    return ScoredRows(
        name="synthetic",
        classes=names,
        conf=conf,
        top1=top1,
        top2=top2,
        truth=truth,
        oos_class=classes,
        extra_conf=np.clip(rng.beta(2, 2, m), 0.05, 0.999),
        extra_top1=rng.integers(0, classes, m),
        extra_top2=rng.integers(0, classes, m),
    )


# --------------------------------------------------------------------------- deployments


@dataclass(frozen=True)
class Pool:
    """What one auto-routed decision can be: ``correct`` per item, drawn with ``weights``."""

    correct: np.ndarray
    weights: np.ndarray | None = None

    @property
    def precision(self) -> float:
        w = self.weights
        return float(np.average(self.correct, weights=w)) if len(self.correct) else math.nan

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """``k`` items drawn with replacement: their correctness (0.0 / 1.0)."""
        p = None if self.weights is None else self.weights / self.weights.sum()
        return self.correct[rng.choice(len(self.correct), size=k, p=p)].astype(float)


@dataclass(frozen=True)
class Setting:
    """A simulated deployment: the pool before and after the change (``None``: no change)."""

    name: str
    before: Pool
    after: Pool | None
    description: str


def split_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded 50/50 split of ``n`` rows: calibration indices, deployment indices."""
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])


def settings_for(
    rows: ScoredRows,
    target: float,
    delta: float,
    seed: int,
    *,
    mix_share: float = 0.5,
    hard_classes: float = 0.1,
    oos_share: float = 0.4,
    flip: float = 0.1,
) -> tuple[dict[str, Setting | str], dict[str, Any]]:
    """The deployments of one scored set; a setting it cannot have maps to a reason.

    A certified threshold (:class:`~hybridroute.calibration.CertifiedPrecisionThreshold`,
    ``target`` / ``delta``) is fitted on the calibration half's in-scope predictions; the
    deployment half's auto-routed items form the stable pool. ``stable_edge`` instead uses
    the lowest threshold at which the deployment pool itself still meets the target (an
    oracle): its precision is at the target, the hardest stream a monitor may not alarm on.
    After the change (drift settings):

    * ``label_mix`` -- a share ``mix_share`` of the traffic comes from the true classes
      with the lowest auto-routed precision (the worst ``hard_classes`` of the classes);
    * ``oos_surge`` -- out-of-scope texts become ``oos_share`` of incoming traffic (the
      ones the model auto-routes are errors);
    * ``degraded`` -- a share ``flip`` of decisions carry the model's second choice instead
      of its first (same confidence, so still auto-routed).
    """
    from hybridroute.calibration import CertifiedPrecisionThreshold, EmpiricalThreshold

    cal, dep = split_halves(len(rows), seed)
    correct = rows.correct
    in_scope_pred = rows.top1 != rows.oos_class
    c = cal[in_scope_pred[cal]]
    threshold = float(
        CertifiedPrecisionThreshold(target, delta).fit(rows.conf[c], correct[c]).threshold_
    )
    d = dep[in_scope_pred[dep]]
    routed = d[rows.conf[d] >= threshold]
    info: dict[str, Any] = {
        "threshold": threshold,
        "calibration_rows": len(cal),
        "deployment_rows": len(dep),
        "auto_routed_share": len(routed) / len(dep),
    }
    out: dict[str, Setting | str] = {}
    if len(routed) == 0:
        reason = "the certified threshold auto-routes nothing"
        return dict.fromkeys(SETTINGS, reason), info
    base = Pool(correct[routed])
    info["pool_precision"] = base.precision
    out["stable"] = Setting("stable", base, None, "the certified threshold's auto-routed items")
    edge = float(EmpiricalThreshold(target).fit(rows.conf[d], correct[d]).threshold_)
    edge_pool = Pool(correct[d[rows.conf[d] >= edge]])
    info["edge_threshold"] = edge
    out["stable_edge"] = (
        Setting("stable_edge", edge_pool, None, "lowest threshold meeting the target (oracle)")
        if len(edge_pool.correct) and edge_pool.precision >= target
        else "no threshold meets the target on the deployment half"
    )

    # (a) label mix: oversample the true classes with the lowest auto-routed precision
    truth = rows.truth[routed]
    ok = correct[routed]
    labels = np.unique(truth[truth >= 0])
    per_class = np.array([ok[truth == y].mean() for y in labels])
    k = max(1, round(hard_classes * len(labels)))
    hard = labels[np.argsort(per_class, kind="stable")[:k]]
    is_hard = np.isin(truth, hard)
    if is_hard.any() and (~is_hard).any():
        w = np.where(is_hard, mix_share / is_hard.sum(), (1 - mix_share) / (~is_hard).sum())
        out["label_mix"] = Setting(
            "label_mix",
            base,
            Pool(ok, w),
            f"{mix_share:.0%} of traffic from the {k} lowest-precision classes",
        )
    else:
        out["label_mix"] = "too few classes"

    # (b) out-of-scope surge: all out-of-scope texts, own and extra, as one population
    own_oos = dep[rows.out_of_scope[dep]]
    inscope = dep[~rows.out_of_scope[dep]]
    oos_routed = np.concatenate(
        [
            (rows.conf[own_oos] >= threshold) & (rows.top1[own_oos] != rows.oos_class),
            rows.extra_conf >= threshold,
        ]
    )
    if len(oos_routed) == 0:
        out["oos_surge"] = "no out-of-scope texts"
    else:
        ins = inscope[in_scope_pred[inscope] & (rows.conf[inscope] >= threshold)]
        rate_in = len(ins) / max(len(inscope), 1)  # auto-routed share of in-scope traffic
        rate_oos = float(oos_routed.mean())  # ... of out-of-scope traffic
        n_oos = int(oos_routed.sum())
        info["oos_auto_routed_share"] = rate_oos
        if n_oos == 0:
            out["oos_surge"] = "the threshold auto-routes no out-of-scope text"
        else:
            # incoming traffic: (1 - s) in scope, s out of scope; the auto-routed stream
            # mixes them in proportion (1 - s) rate_in : s rate_oos
            mass_oos = oos_share * rate_oos / (oos_share * rate_oos + (1 - oos_share) * rate_in)
            ok_in = correct[ins]
            w = np.concatenate(
                [np.full(len(ins), (1 - mass_oos) / len(ins)), np.full(n_oos, mass_oos / n_oos)]
            )
            out["oos_surge"] = Setting(
                "oos_surge",
                base,
                Pool(np.concatenate([ok_in, np.zeros(n_oos, dtype=bool)]), w),
                f"out-of-scope texts {oos_share:.0%} of incoming traffic",
            )

    # (c) degraded model: a share of decisions carries the runner-up label
    second = (rows.top2[routed] == rows.truth[routed]) & (rows.truth[routed] >= 0)
    w = np.concatenate([np.full(len(routed), 1 - flip), np.full(len(routed), flip)])
    out["degraded"] = Setting(
        "degraded",
        base,
        Pool(np.concatenate([ok, second]), w),
        f"{flip:.0%} of decisions carry the model's second choice",
    )
    return out, info


SETTINGS = ("stable", "stable_edge", "label_mix", "oos_surge", "degraded")


# --------------------------------------------------------------------------- streams


@dataclass(frozen=True)
class Stream:
    """The audited labels of one simulated deployment.

    ``labels[i]`` is the audit outcome of the ``i``-th audited decision and
    ``decision[i]`` its index (1-based) among all auto-routed decisions; ``before`` labels
    came before the change (all of them on a stable stream).
    """

    labels: np.ndarray
    decision: np.ndarray
    before: int


def make_stream(
    setting: Setting, rate: float, change: int, horizon: int, rng: np.random.Generator
) -> Stream:
    """``horizon`` auto-routed decisions, each audited with probability ``rate``.

    Decisions ``1..change`` come from the pool before the change, the rest from the pool
    after it (a stable setting has one pool throughout).
    """
    audited = np.flatnonzero(rng.random(horizon) < rate) + 1
    cut = int(np.searchsorted(audited, change, side="right")) if setting.after else len(audited)
    first = setting.before.draw(rng, cut)
    rest = setting.after.draw(rng, len(audited) - cut) if setting.after else np.zeros(0)
    return Stream(np.concatenate([first, rest]), audited, cut)


# --------------------------------------------------------------------------- monitors


def ours_breach(x: np.ndarray, target: float, delta: float) -> int | None:
    """Label count at which :class:`PrecisionMonitor` first reports ``breach`` (or None).

    The monitor's breach is its drop test's first rejection (``detector_``); the confidence
    sequence it keeps beside it does not take part, so only the drop test is run here.
    """
    from hybridroute.monitoring import PrecisionMonitor

    mon = PrecisionMonitor(target, delta)
    return mon.detector_.update_many(x).rejected_at_


def ours_certify(x: np.ndarray, target: float, delta: float, chunk: int = 256) -> int | None:
    """Label count at which :class:`PrecisionMonitor` first reports ``certified_online``.

    Reads the monitor's confidence sequence after every label (in chunks, stopping at the
    first certification): ``certified_online`` is its lower bound above the target, which
    no stream reaches before ``required_labels_``. A breach reported earlier would show
    ``breach`` instead; callers take the earlier of the two.
    """
    from hybridroute.monitoring import PrecisionMonitor

    mon = PrecisionMonitor(target, delta)
    for start in range(0, len(x), chunk):
        lower, _ = mon.sequence_.trace(x[start : start + chunk])
        hit = np.flatnonzero(lower > target)
        if hit.size:
            found = start + int(hit[0]) + 1
            return max(found, mon.required_labels_)
    return None


def naive_first(
    x: np.ndarray, target: float, delta: float, chunk: int = 1024
) -> tuple[int | None, int | None]:
    """Repeated one-sided Clopper--Pearson at level ``delta``: first breach, first certify.

    The same intervals as :func:`~hybridroute.monitoring.repeated_clopper_pearson` at
    ``2 delta`` (a two-sided interval with ``delta`` on each side, so each look alone is a
    one-sided exact test at ``delta``, the nominal level of each of our monitor's
    statements): breach at the first label whose upper bound is below the target, certify
    at the first whose lower bound is above it. Only labels where the running mean is on
    the right side of the target can cross (the upper bound is never below the mean, the
    lower never above it), so only those are evaluated, in chunks, stopping at the first
    crossing.
    """
    from hybridroute.calibration import clopper_pearson_lower, clopper_pearson_upper

    k = np.cumsum(x)
    n = np.arange(1, len(x) + 1, dtype=float)
    mean = k / n

    def first(cand: np.ndarray, crosses: Callable[[np.ndarray], np.ndarray]) -> int | None:
        for start in range(0, len(cand), chunk):
            part = cand[start : start + chunk]
            hit = np.flatnonzero(crosses(part))
            if hit.size:
                return int(part[hit[0]]) + 1
        return None

    breach = first(
        np.flatnonzero(mean < target),
        lambda i: np.atleast_1d(clopper_pearson_upper(k[i], n[i], delta)) < target,
    )
    certify = first(
        np.flatnonzero(mean > target),
        lambda i: np.atleast_1d(clopper_pearson_lower(k[i], n[i], delta)) > target,
    )
    return breach, certify


class MapieBound:
    """The first label at which MAPIE's ``RiskMonitoring`` flags a shift, for many streams.

    ``RiskMonitoring(risk, test_level, threshold=...)`` keeps a conjugate-mixture
    empirical-Bernstein lower confidence sequence (Howard et al. 2021, MAPIE's
    ``conjugate_mixture_empirical_bernstein_bound`` with ``v_opt=1``, at ``test_level / 2``
    for the online part, split again in two inside the bound) on the mean of the risk
    sequence and flags a harmful shift when its running maximum exceeds the threshold.
    ``update`` recomputes the whole bound, one root-finding per label, from scratch: about
    0.2 ms a label here, too slow for thousands of streams of thousands of labels. This
    class asks the same question without the root-finding: the bound at label ``t`` is
    ``μ̂_t - b(V_t) / t`` with ``b(v)`` the root in ``s`` of ``log M(s, v) = log(1/α)`` for
    MAPIE's (increasing in ``s``) log-supermartingale ``M``, so it exceeds ``thr`` exactly
    when ``log M(t (μ̂_t - thr), V_t) > log(1/α)``. ``M`` and its constants are MAPIE's own
    (``GammaExponentialMixtureBound``); :func:`mapie_check` compares the answer with
    ``RiskMonitoring.update`` itself.

    Parameters
    ----------
    test_level : float
        ``RiskMonitoring``'s ``test_level``.
    threshold : float
        The monitoring threshold on the risk's mean (given, not computed from reference
        data).
    """

    def __init__(self, test_level: float, threshold: float) -> None:
        from mapie.exchangeability_testing.bounds import GammaExponentialMixtureBound

        self.test_level = test_level
        self.threshold = threshold
        alpha = test_level / 2  # RiskMonitoring's online share
        self.alpha = alpha / 2  # conjugate_mixture_empirical_bernstein_bound's split
        self._mix = GammaExponentialMixtureBound(v_opt=1, c=1, alpha_opt=alpha / 2)

    def log_supermartingale(self, s: np.ndarray, v: np.ndarray) -> np.ndarray:
        """MAPIE's ``GammaExponentialMixtureBound.log_supermg``, over arrays."""
        from scipy.special import gammainc, gammaln

        m = self._mix
        cs_v = (m.c * s + v) / m.c_sq
        a = (v + m.rho) / m.c_sq
        x = cs_v + m.rho_c_sq
        with np.errstate(divide="ignore"):
            log_p = np.log(gammainc(a, x))
        return m.leading_constant + gammaln(a) + log_p - a * np.log(x) + cs_v

    def first_detection(self, risk: np.ndarray) -> int | None:
        """Label count (1-based) at which the monitor first flags, or None."""
        r = np.asarray(risk, dtype=float)
        if r.size == 0:
            return None
        t = np.arange(1, len(r) + 1)
        mu = np.cumsum(r) / t
        prev = np.concatenate(([0.5], mu[:-1]))
        v = np.cumsum((r - prev) ** 2)
        s = t * (mu - self.threshold)
        cand = np.flatnonzero(s > 0)
        if cand.size == 0:
            return None
        hit = self.log_supermartingale(s[cand], v[cand]) > math.log(1 / self.alpha)
        return int(cand[np.argmax(hit)]) + 1 if hit.any() else None


def mapie_breach(x: np.ndarray, target: float, test_level: float) -> int | None:
    """MAPIE ``RiskMonitoring(risk="precision", threshold=1 - target)``: first flag."""
    return MapieBound(test_level, 1 - target).first_detection(1.0 - x)


def mapie_certify(x: np.ndarray, target: float, test_level: float) -> int | None:
    """The mirrored monitor (the risk is *being correct*, threshold ``target``): first flag.

    Its lower bound on the mean of the correctness sequence is a lower bound on the
    precision, so a flag means "certified above the target".
    """
    return MapieBound(test_level, target).first_detection(x)


def _real_mapie_flags(risk: Any, x: np.ndarray, threshold: float, test_level: float) -> bool:
    from mapie.exchangeability_testing import RiskMonitoring

    mon = RiskMonitoring(risk, test_level=test_level, threshold=threshold, warn=False)
    mon.update(x.astype(int), np.ones(len(x), dtype=int))
    return bool(mon.harmful_shift_detected)


def mapie_check(x: np.ndarray, target: float, test_level: float, cap: int = 4000) -> bool:
    """Does :class:`MapieBound` flag at exactly the label ``RiskMonitoring`` first does?

    For both the breach monitor (risk ``"precision"``) and the mirrored certifying one, at
    the label :class:`MapieBound` names (flagged there, not one label before) or, when it
    names none, over the stream's first ``cap`` labels (not flagged there).
    """
    from mapie.risk_control import BinaryRisk

    correctness = BinaryRisk(
        risk_occurrence=lambda y_true, y_pred: y_true == y_pred,
        risk_condition=lambda y_true, y_pred: y_pred == 1,
        higher_is_better=False,
    )
    pairs: list[tuple[Any, float, Callable[..., int | None]]] = [
        ("precision", 1 - target, mapie_breach),
        (correctness, target, mapie_certify),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for risk, thr, fast in pairs:
            found = fast(x, target, test_level)
            if found is None:
                n = min(len(x), cap)
                if n and _real_mapie_flags(risk, x[:n], thr, test_level):
                    return False
                continue
            if found > cap:
                continue
            if not _real_mapie_flags(risk, x[:found], thr, test_level):
                return False
            if found > 1 and _real_mapie_flags(risk, x[: found - 1], thr, test_level):
                return False
    return True


# --------------------------------------------------------------------------- window study

#: (target, precision before, precision after) of the synthetic drops the study runs.
WINDOW_CASES = (
    *((0.95, 0.96, p) for p in (0.94, 0.93, 0.92, 0.90, 0.85, 0.75)),
    *((0.90, 0.93, p) for p in (0.88, 0.86, 0.84, 0.80, 0.70)),
)


def window_study(
    windows: tuple[int, ...] = (50, 100, 200, 400, 800),
    streams: int = 200,
    before: tuple[int, ...] = (200, 4000),
    after: int = 30_000,
    null_labels: int = 20_000,
    delta: float = 0.05,
    seed: int = 7,
) -> dict[str, Any]:
    """The drop test's ``window`` on synthetic Bernoulli streams (no data needed).

    For each window: the median delay (labels after the change) on every drop of
    :data:`WINDOW_CASES` after ``before`` healthy labels, each window's delay over the best
    window's on the same case (its *regret*), and the false-alarm rate on ``streams``
    streams of ``null_labels`` labels at precision exactly the target and at target + 0.01.
    The same seeded streams serve every window.
    """
    from hybridroute.monitoring._confseq import BettingDropTest

    rows = []
    for c, (target, p0, p1) in enumerate(WINDOW_CASES):
        for b in before:
            delays: dict[int, list[float]] = {w: [] for w in windows}
            for s in range(streams):
                rng = np.random.default_rng([seed, c, b, s])
                x = np.concatenate([rng.random(b) < p0, rng.random(after) < p1]).astype(float)
                for w in windows:
                    r = BettingDropTest(target, delta, window=w).update_many(x).rejected_at_
                    delays[w].append(math.inf if r is None else r - b)
            med = {w: float(np.median(v)) for w, v in delays.items()}
            best = min(med.values())
            rows.append(
                {
                    "target": target,
                    "before": p0,
                    "after": p1,
                    "healthy_labels": b,
                    "median_delay": med,
                    "regret": {w: m / best for w, m in med.items()},
                }
            )
    null = {}
    for target, p in ((0.95, 0.95), (0.95, 0.96), (0.90, 0.90), (0.90, 0.91)):
        alarms = dict.fromkeys(windows, 0)
        for s in range(streams):
            x = (np.random.default_rng([seed, 99, int(p * 100), s]).random(null_labels) < p).astype(
                float
            )
            for w in windows:
                alarms[w] += BettingDropTest(target, delta, window=w).update_many(x).rejected
        null[f"{target:g}@{p:g}"] = {w: a / streams for w, a in alarms.items()}
    return {
        "windows": list(windows),
        "streams": streams,
        "delta": delta,
        "cases": rows,
        "worst_regret": {w: max(r["regret"][w] for r in rows) for w in windows},
        "false_alarm_rate": null,
    }


def print_window_study(res: dict[str, Any]) -> None:
    """The window study as a table (median delays in labels; regret = / best window)."""
    ws = res["windows"]
    print(
        f"drop test window study: {res['streams']} synthetic streams per case, delta "
        f"{res['delta']}; median labels from the change to the breach (inf: under half found)"
    )
    print(
        f"{'target':>6s} {'p before':>8s} {'after':>6s} {'healthy':>7s} "
        + " ".join(f"{'w' + str(w):>7s}" for w in ws)
    )
    for r in res["cases"]:
        cells = " ".join(f"{r['median_delay'][w]:7.0f}" for w in ws)
        print(
            f"{r['target']:6.2f} {r['before']:8.2f} {r['after']:6.2f} {r['healthy_labels']:7d} {cells}"
        )
    print(
        f"{'worst regret (delay / best window)':>30s} "
        + " ".join(f"{res['worst_regret'][w]:7.2f}" for w in ws)
    )
    for key, rates in res["false_alarm_rate"].items():
        target, p = key.split("@")
        print(
            f"false alarms, target {target}, precision {p}: "
            + " ".join(f"w{w} {rates[w]:.3f}" for w in ws)
        )
