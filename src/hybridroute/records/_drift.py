"""Drift over a decision log: distributions by window, shift tests, nondeterminism.

Everything here works on the DataFrame of :meth:`DecisionLog.to_frame` (or anything with
the same columns), so it runs the same on a log file or an exported slice.

* destination and reason-code distributions by router version, by day, or by a fact
  (a *segment*);
* ask-user / human-review rates by segment;
* confidence histograms by window;
* a shift statistic of each window against a baseline window: the population stability
  index (PSI) and a chi-square test of homogeneity; a window is flagged when the test is
  significant at ``alpha`` **and** the PSI reaches ``psi_flag`` (a large sample makes
  tiny, harmless shifts significant; a small one makes large shifts noisy);
* fallback decisions (the classifier failed or abstained) counted by cause, overall and
  by window: the cause the router recorded (``detail["cause"]``: the reason code, with
  the exception's type when the classifier raised, e.g. ``classifier_error (TypeError)``),
  or the reason code of a record written before causes were recorded;
* the replay-mismatch rate inside the log: decisions with the same ``snapshot_hash`` but
  different destinations. Within one router version that is nondeterminism (a defect);
  across versions it is an intended change. The two are reported apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._fallback import fallback_cause

__all__ = ["DriftReport", "drift_report", "psi", "window_key"]

_EPS = 1e-4  # floor for empty cells in PSI, so a category absent from one window is finite


def psi(baseline: Sequence[float] | np.ndarray, current: Sequence[float] | np.ndarray) -> float:
    """Population stability index between two count (or share) vectors over the same categories."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(current, dtype=float)
    if b.shape != c.shape or b.ndim != 1:
        raise ValueError("baseline and current must be 1-d vectors over the same categories")
    if b.sum() <= 0 or c.sum() <= 0:
        return float("nan")
    p = np.maximum(b / b.sum(), _EPS)
    q = np.maximum(c / c.sum(), _EPS)
    p, q = p / p.sum(), q / q.sum()
    return float(np.sum((q - p) * np.log(q / p)))


def _chi2(baseline: np.ndarray, current: np.ndarray) -> tuple[float, float, int]:
    from scipy.stats import chi2_contingency

    table = np.vstack([baseline, current])
    keep = table.sum(axis=0) > 0
    table = table[:, keep]
    if table.shape[1] < 2 or (table.sum(axis=1) == 0).any():
        return 0.0, 1.0, 0
    stat, p, dof, _ = chi2_contingency(table, correction=False)
    return float(stat), float(p), int(dof)


def window_key(frame: Any, by: str) -> Any:
    """The window / segment label of each row: ``router_version``, ``day`` or a fact name."""
    import pandas as pd

    if by == "router_version":
        return frame["router_version"].astype(str)
    if by == "day":
        return pd.to_datetime(frame["logged_at"], utc=True).dt.strftime("%Y-%m-%d")
    if by in frame.columns and by not in ("record",):
        return frame[by].astype(str)
    values = []
    for rec in frame["record"]:
        facts = (rec.get("input_snapshot") or {}).get("facts") or {}
        if by not in facts:
            values.append("(absent)")
        else:
            v = facts[by]
            values.append(
                "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            )
    return pd.Series(values, index=frame.index, dtype=str)


class DriftReport(dict):
    """A JSON-able drift report (a dict with a :meth:`summary_lines` helper)."""

    def summary_lines(self) -> list[str]:
        lines = [
            f"{self['n']} decisions in {len(self['windows'])} window(s) by {self['by']}; "
            f"baseline {self['baseline']!r}"
        ]
        for w in self["shifts"]:
            flag = "SHIFT" if w["flagged"] else "ok"
            lines.append(
                f"  {w['window']}: n={w['n']} destination PSI={w['destination_psi']:.3f} "
                f"chi2 p={w['destination_p']:.3g} | reason PSI={w['reason_psi']:.3f} "
                f"p={w['reason_p']:.3g} -> {flag}"
            )
        by_cause = self.get("fallbacks_by_cause") or {}
        if not by_cause:
            lines.append("fallback decisions (the classifier failed or abstained): none")
        else:
            lines.append(
                f"fallback decisions (the classifier failed or abstained): {sum(by_cause.values())}"
                f" -- by cause: {_join_counts(by_cause)}"
            )
            if len(self["windows"]) > 1:
                for w, info in self["windows"].items():
                    if info.get("fallbacks_by_cause"):
                        lines.append(f"  {w}: {_join_counts(info['fallbacks_by_cause'])}")
        nd = self["replay_mismatch"]
        lines.append(
            f"same snapshot, different destination: {nd['within_version_conflicts']} within a version "
            f"(nondeterminism), {nd['across_version_changes']} across versions (intended changes)"
        )
        return lines


def _join_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _fallback_causes(frame: Any) -> list[str | None]:
    """Per row: the cause of a fallback decision (None for other stages), read by the one
    reader every evaluation counts fallbacks with (:func:`hybridroute._fallback.fallback_cause`)."""
    records = frame["record"] if "record" in frame.columns else [None] * len(frame)
    return [
        fallback_cause(
            {
                "stage": stage,
                "reason_code": reason,
                "detail": rec.get("detail") if isinstance(rec, dict) else None,
            }
        )
        for stage, reason, rec in zip(frame["stage"], frame["reason_code"], records, strict=True)
    ]


def _tally(keys: Any, causes: list[str | None]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Fallbacks by cause overall and by window, in one pass."""
    total: Counter[str] = Counter()
    by_window: dict[str, Counter[str]] = {}
    for k, c in zip(keys, causes, strict=True):
        if c is not None:
            total[c] += 1
            by_window.setdefault(k, Counter())[c] += 1
    return dict(sorted(total.items())), {k: dict(sorted(v.items())) for k, v in by_window.items()}


def _counts(keys: Any, values: Any, categories: list[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    index = {c: i for i, c in enumerate(categories)}
    for k, v in zip(keys, values, strict=True):
        vec = out.get(k)
        if vec is None:
            vec = out[k] = np.zeros(len(categories))
        vec[index[v]] += 1
    return out


def drift_report(
    frame: Any,
    *,
    by: str = "router_version",
    baseline: str | None = None,
    segment: str | None = None,
    alpha: float = 0.01,
    psi_flag: float = 0.1,
    confidence_bins: int = 10,
) -> DriftReport:
    """Drift of a decision log.

    Parameters
    ----------
    frame : pandas.DataFrame
        Rows of a decision log (:meth:`DecisionLog.to_frame`).
    by : str
        Window: ``router_version``, ``day``, or a fact name.
    baseline : str, optional
        The baseline window (default: the first window in sort order).
    segment : str, optional
        A fact to break ask-user / human-review rates down by (default: ``by``).
    alpha : float
        Significance level of the chi-square test.
    psi_flag : float
        PSI from which a significant shift is flagged (0.1 is the customary "moderate
        shift" mark; 0.25 "major").
    confidence_bins : int
        Equal-width bins on [0, 1] for the confidence histograms.
    """
    n = len(frame)
    if n == 0:
        return DriftReport(
            n=0,
            by=by,
            baseline=None,
            windows={},
            shifts=[],
            segments={},
            confidence_histograms={},
            fallbacks_by_cause={},
            replay_mismatch={
                "within_version_conflicts": 0,
                "across_version_changes": 0,
                "within_version_rate": 0.0,
                "examples": [],
            },
        )
    keys = window_key(frame, by)
    windows = sorted(set(keys))
    if baseline is None:
        baseline = windows[0]
    elif baseline not in windows:
        from ..exceptions import UserInputError

        raise UserInputError(
            f"baseline window {baseline!r} is not in the log (windows: {', '.join(windows)})"
        )
    dests = sorted(set(frame["selected_destination"]))
    reasons = sorted(set(frame["reason_code"]))
    dcount = _counts(keys, frame["selected_destination"], dests)
    rcount = _counts(keys, frame["reason_code"], reasons)

    fallbacks, fallbacks_by_window = _tally(keys, _fallback_causes(frame))
    window_info: dict[str, Any] = {}
    for w in windows:
        dn, rn = dcount[w], rcount[w]
        window_info[w] = {
            "n": int(dn.sum()),
            "destinations": {
                d: round(float(c / dn.sum()), 6) for d, c in zip(dests, dn, strict=True) if c
            },
            "reason_codes": {
                r: round(float(c / rn.sum()), 6) for r, c in zip(reasons, rn, strict=True) if c
            },
            "fallbacks_by_cause": fallbacks_by_window.get(w, {}),
        }

    shifts = []
    for w in windows:
        if w == baseline:
            continue
        d_psi = psi(dcount[baseline], dcount[w])
        r_psi = psi(rcount[baseline], rcount[w])
        d_stat, d_p, _ = _chi2(dcount[baseline], dcount[w])
        r_stat, r_p, _ = _chi2(rcount[baseline], rcount[w])
        flagged = (d_p < alpha and d_psi >= psi_flag) or (r_p < alpha and r_psi >= psi_flag)
        shifts.append(
            {
                "window": w,
                "n": window_info[w]["n"],
                "destination_psi": round(d_psi, 6),
                "destination_chi2": round(d_stat, 6),
                "destination_p": d_p,
                "reason_psi": round(r_psi, 6),
                "reason_chi2": round(r_stat, 6),
                "reason_p": r_p,
                "flagged": bool(flagged),
            }
        )

    seg_keys = keys if segment is None or segment == by else window_key(frame, segment)
    segments: dict[str, Any] = {}
    dest_arr = np.asarray(frame["selected_destination"], dtype=object)
    seg_arr = np.asarray(seg_keys, dtype=object)
    for s in sorted(set(seg_arr)):
        mask = seg_arr == s
        m = int(mask.sum())
        segments[s] = {
            "n": m,
            "ask_user_rate": round(float(np.mean(dest_arr[mask] == "ask_user")), 6),
            "human_review_rate": round(float(np.mean(dest_arr[mask] == "human_review")), 6),
        }

    edges = np.linspace(0.0, 1.0, confidence_bins + 1)
    hists: dict[str, Any] = {}
    conf = frame["confidence"].to_numpy(dtype=float, na_value=np.nan)
    key_arr = np.asarray(keys, dtype=object)
    for w in windows:
        vals = conf[(key_arr == w) & ~np.isnan(conf)]
        counts, _ = np.histogram(np.clip(vals, 0.0, 1.0), bins=edges)
        hists[w] = {
            "edges": [round(float(e), 6) for e in edges],
            "counts": [int(c) for c in counts],
            "n": int(vals.size),
        }

    return DriftReport(
        n=int(n),
        by=by,
        baseline=baseline,
        windows=window_info,
        shifts=shifts,
        segments={"by": segment or by, "values": segments},
        confidence_histograms=hists,
        fallbacks_by_cause=fallbacks,
        replay_mismatch=_replay_mismatch(frame),
    )


def _replay_mismatch(frame: Any) -> dict[str, Any]:
    """Same snapshot hash, different destination: within a version vs across versions."""
    within = 0
    across = 0
    examples: list[dict[str, Any]] = []
    groups = frame.groupby("snapshot_hash", sort=True)
    n_within_groups = 0
    for h, g in groups:
        if len(g) < 2:
            continue
        by_version = g.groupby("router_version")["selected_destination"].agg(
            lambda s: sorted(set(s))
        )
        conflicted = [v for v, ds in by_version.items() if len(ds) > 1]
        n_within_groups += 1
        if conflicted:
            within += 1
            if len(examples) < 5:
                examples.append(
                    {
                        "snapshot_hash": h,
                        "router_version": conflicted[0],
                        "destinations": by_version[conflicted[0]],
                        "kind": "nondeterminism",
                    }
                )
        firsts = {v: ds[0] for v, ds in by_version.items() if len(ds) == 1}
        if len(set(firsts.values())) > 1:
            across += 1
    total_groups = max(n_within_groups, 1)
    return {
        "within_version_conflicts": within,
        "across_version_changes": across,
        "within_version_rate": round(within / total_groups, 6) if n_within_groups else 0.0,
        "repeated_snapshots": n_within_groups,
        "examples": examples,
    }
