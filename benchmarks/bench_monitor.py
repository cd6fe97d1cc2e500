"""Monitoring the live guarantee on simulated deployments: ours against MAPIE and a naive test.

    python benchmarks/bench_monitor.py [--streams 200] [--json] [--cache DIR]
        [--target 0.95] [--rates 0.01,0.05,0.2] [--datasets banking77,clinc150]
    python benchmarks/bench_monitor.py --show saved.json   # the tables of a --json run

For Banking77 and CLINC150 the local classifier of ``bench_calibration`` (fitted once on
the train split) scores the test split. A seeded half of those rows calibrates a certified
auto-route threshold (:class:`~hybridroute.calibration.CertifiedPrecisionThreshold`, target
precision ``--target``, delta 0.05); the other half is the traffic it is deployed on, and
its auto-routed items (top label in scope, confidence at or above the threshold) are what
a deployment's auto-routed decisions are drawn from (with replacement). Each stream is
``--horizon`` auto-routed decisions; each decision is audited with probability ``--rates``
(1%, 5%, 20%), seeded, and the audited decisions' outcomes (correct or not) are the labels
every monitor reads, after every label, in arrival order. Settings (``--streams`` seeded
streams each, the same streams for every monitor):

* ``stable`` -- the certified threshold's auto-routed items throughout (precision at or
  above the target: a false alarm is any breach);
* ``stable_edge`` -- the same with the lowest threshold at which the deployment half still
  meets the target (chosen in hindsight): precision just at the target, the hardest
  stream on which a monitor may not alarm;
* ``label_mix`` -- from decision ``--change`` on, half the traffic comes from the true
  classes with the lowest auto-routed precision (the worst tenth of the classes);
* ``oos_surge`` -- from decision ``--change`` on, out-of-scope texts are 40% of incoming
  traffic (CLINC150's own; for Banking77, CLINC150's out-of-scope test texts scored by the
  Banking77 model); every one the model auto-routes is an error;
* ``degraded`` -- from decision ``--change`` on, 10% of decisions carry the model's second
  choice (same confidence, so still auto-routed).

Monitors, each at delta = 0.05:

* ``ours`` -- :class:`~hybridroute.monitoring.PrecisionMonitor` (``breach``: its drop test;
  ``certified_online``: its confidence sequence);
* ``mapie@L`` -- MAPIE's ``RiskMonitoring(risk="precision", test_level=L,
  threshold=1 - target)`` (a shift is flagged when its lower confidence sequence on the
  error rate of *all* labels so far exceeds ``1 - target``), and the same class on the
  mirrored risk (being correct, threshold ``target``) for certification. ``test_level``
  is split in two inside MAPIE and split again inside its bound, so at ``L = delta`` its
  one-sided statement is at ``delta / 4``; ``L = 4 delta`` (0.2) gives it the same
  one-sided level as ours, and the ladder (:data:`MAPIE_LEVELS`) goes further. *matched*
  is the largest ladder level whose false-alarm rate on this set's stable and
  stable-edge streams (at the same audit rate) is at most ours. Flags are computed
  without MAPIE's per-label root-finding (see ``_monitor_streams.MapieBound``) and checked
  against ``RiskMonitoring.update`` itself on ``--mapie-checks`` streams per cell;
* ``naive`` -- a one-sided Clopper--Pearson bound at level delta recomputed after every
  label (:func:`~hybridroute.monitoring.repeated_clopper_pearson` at ``2 delta``); breach
  when the upper bound is below the target, certified when the lower one is above.

Reported per (set, setting, audit rate): the false-alarm rate on stable streams (a breach
ever declared within the horizon, with its 95% Clopper--Pearson upper bound), labels
needed to reach ``certified_online`` on stable streams (median; never certified counts as
infinite), and on drift streams the detection delay from the change in labels and in
decisions (median over the streams that did not alarm before the change; undetected counts
as infinite) and the share detected within the horizon. A certification counts only if no
breach was declared before it. Goals (issue 18): our false alarms <= delta; our median
detection delay <= 0.8x MAPIE's at the same audit rate and false-alarm level. The default
run (200 streams) took 14 minutes on the shared 2-core development machine, plus about two
to fit the two classifiers (``--cache DIR`` keeps their scores for the next run);
``--streams 20`` about a tenth of that. ``--window-study`` prints the synthetic study
behind the drop test's default ``window`` instead (no data needed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:  # as part of the benchmarks package (python -m benchmarks)
    from . import _monitor_streams as ms
except ImportError:  # as a script
    import _monitor_streams as ms  # type: ignore[no-redef]

TARGET = 0.95
DELTA = 0.05
RATES = (0.01, 0.05, 0.20)
STREAMS = 200
CHANGE = 20_000  # auto-routed decisions before a drift setting's change
HORIZON = 220_000  # auto-routed decisions per stream
SEED = 20250618
DATASETS = ("banking77", "clinc150")
#: MAPIE ``test_level`` ladder (fixed in advance): 0.05 is its nominal level, 0.2 the one
#: whose one-sided online statement is at delta (= ours); larger ones are more lenient.
MAPIE_LEVELS = (0.05, 0.2, 0.5, 0.9)
SAME_LEVEL = 0.2  # MAPIE at the same one-sided level as ours
STABLE = ("stable", "stable_edge")
DRIFT = ("label_mix", "oos_surge", "degraded")


def _mapie(level: float) -> str:
    return f"mapie@{level:g}"


def _monitors(levels: Sequence[float] = MAPIE_LEVELS) -> list[str]:
    return ["ours", *(_mapie(lv) for lv in levels), "naive"]


# --------------------------------------------------------------------------- one cell


def _alarms(
    x: np.ndarray, target: float, delta: float, levels: Sequence[float], certify: bool
) -> dict[str, tuple[int | None, int | None]]:
    """Per monitor: (first breach, first certification) label counts on one stream."""
    out: dict[str, tuple[int | None, int | None]] = {}
    out["ours"] = (
        ms.ours_breach(x, target, delta),
        ms.ours_certify(x, target, delta) if certify else None,
    )
    for lv in levels:
        out[_mapie(lv)] = (
            ms.mapie_breach(x, target, lv),
            ms.mapie_certify(x, target, lv) if certify else None,
        )
    breach, cert = ms.naive_first(x, target, delta)
    out["naive"] = (breach, cert if certify else None)
    return out


def _median(values: Sequence[float]) -> float | None:
    """Median with undetected streams as +inf; ``None`` when it is infinite (or no values)."""
    if not values:
        return None
    m = float(np.median(np.asarray(values, dtype=float)))
    return m if math.isfinite(m) else None


def _rate_upper(k: int, n: int) -> float:
    from hybridroute.calibration import clopper_pearson_upper

    return float(clopper_pearson_upper(k, n, 0.05)) if n else math.nan


def evaluate_cell(
    setting: ms.Setting,
    rate: float,
    *,
    streams: int,
    target: float,
    delta: float,
    change: int,
    horizon: int,
    seed: Sequence[int],
    levels: Sequence[float] = MAPIE_LEVELS,
    checks: int = 1,
    check_cap: int = 4000,
    certify: bool = True,
) -> dict[str, Any]:
    """Every monitor on ``streams`` seeded streams of one setting at one audit rate."""
    stable = setting.after is None
    per: dict[str, dict[str, list[Any]]] = {
        m: {"breach": [], "certify": [], "decision": []} for m in _monitors(levels)
    }
    labels, before = [], []
    checked = agreed = 0
    for s in range(streams):
        st = ms.make_stream(setting, rate, change, horizon, np.random.default_rng([*seed, s]))
        labels.append(len(st.labels))
        before.append(st.before)
        found = _alarms(st.labels, target, delta, levels, certify and stable)
        for m, (b, c) in found.items():
            per[m]["breach"].append(b)
            per[m]["decision"].append(None if b is None else int(st.decision[b - 1]))
            # a breach is sticky: a certification after it is never reported
            per[m]["certify"].append(c if c is not None and (b is None or b > c) else None)
        if s < checks:
            for lv in sorted({levels[0], SAME_LEVEL} & set(levels)):
                checked += 1
                agreed += ms.mapie_check(st.labels, target, lv, cap=check_cap)
    cell: dict[str, Any] = {
        "setting": setting.name,
        "description": setting.description,
        "rate": rate,
        "streams": streams,
        "precision_before": setting.before.precision,
        "precision_after": None if stable else setting.after.precision,  # type: ignore[union-attr]
        "labels_mean": float(np.mean(labels)) if labels else 0.0,
        "labels_before_mean": float(np.mean(before)) if before else 0.0,
        "mapie_checked": checked,
        "mapie_agreed": agreed,
        "monitors": {},
    }
    for m, d in per.items():
        if stable:
            alarms = sum(b is not None for b in d["breach"])
            certs = [c for c in d["certify"] if c is not None]
            cell["monitors"][m] = {
                "false_alarm_rate": alarms / streams if streams else math.nan,
                "false_alarms": alarms,
                "false_alarm_upper95": _rate_upper(alarms, streams),
                "certified_share": len(certs) / streams if streams else math.nan,
                "certify_labels_median": _median(
                    [c if c is not None else math.inf for c in d["certify"]]
                ),
            }
            continue
        early = [b is not None and b <= n0 for b, n0 in zip(d["breach"], before, strict=True)]
        delays_l, delays_d = [], []
        for b, dec, n0, e in zip(d["breach"], d["decision"], before, early, strict=True):
            if e:
                continue
            delays_l.append(math.inf if b is None else b - n0)
            delays_d.append(math.inf if dec is None else dec - change)
        kept = len(delays_l)
        cell["monitors"][m] = {
            "early_alarm_rate": sum(early) / streams if streams else math.nan,
            "detected_share": sum(math.isfinite(v) for v in delays_l) / kept if kept else math.nan,
            "delay_labels_median": _median(delays_l),
            "delay_decisions_median": _median(delays_d),
        }
    return cell


# --------------------------------------------------------------------------- the run


def _matched(cells: dict[str, dict[str, Any]], rate: float, levels: Sequence[float]) -> Any:
    """The largest MAPIE level whose false alarms on stable + edge streams are <= ours."""
    stable = [c for c in cells.values() if c["setting"] in STABLE and c["rate"] == rate]
    if not stable:
        return None

    def alarms(m: str) -> int:
        return sum(c["monitors"][m]["false_alarms"] for c in stable)

    ours = alarms("ours")
    ok = [lv for lv in levels if alarms(_mapie(lv)) <= ours]
    return max(ok) if ok else None


def run(
    datasets: Sequence[str] = DATASETS,
    streams: int = STREAMS,
    rates: Sequence[float] = RATES,
    *,
    target: float = TARGET,
    delta: float = DELTA,
    change: int = CHANGE,
    horizon: int = HORIZON,
    seed: int = SEED,
    cache: Path | None = None,
    data_dir: Path | None = None,
    levels: Sequence[float] = MAPIE_LEVELS,
    mapie_checks: int = 1,
    mapie_cap: int = 4000,
    rows: dict[str, ms.ScoredRows] | None = None,
) -> dict[str, Any]:
    """Every (set, setting, audit rate) cell; the JSON document ``--json`` prints.

    ``mapie_checks`` streams per cell are checked against ``RiskMonitoring.update`` on
    their first ``mapie_cap`` labels. ``rows`` gives scored rows by set name instead of
    fitting the classifier (tests).
    """
    import mapie

    from hybridroute.monitoring import PrecisionMonitor

    if not 0 < change < horizon:
        raise ValueError(f"need 0 < change < horizon, got {change} and {horizon}")
    t_start = time.perf_counter()
    probe = PrecisionMonitor(target, delta)
    out: dict[str, Any] = {
        "benchmark": "monitor",
        "mapie_version": mapie.__version__,
        "target": target,
        "delta": delta,
        "rates": list(rates),
        "streams": streams,
        "change": change,
        "horizon": horizon,
        "seed": seed,
        "mapie_levels": list(levels),
        "monitor": {"window": probe.window, "required_labels": probe.required_labels_},
        "sets": {},
    }
    if data_dir is None and rows is None:
        data_dir = _data_dir()
    for i, name in enumerate(datasets):
        t0 = time.perf_counter()
        scored = rows[name] if rows is not None else ms.scored_rows(name, data_dir, cache)
        settings, info = ms.settings_for(scored, target, delta, seed + i)
        cells: dict[str, dict[str, Any]] = {}
        skipped: dict[str, str] = {}
        for j, key in enumerate(ms.SETTINGS):
            setting = settings[key]
            if isinstance(setting, str):
                skipped[key] = setting
                continue
            for k, rate in enumerate(rates):
                cells[f"{key}@{rate:g}"] = evaluate_cell(
                    setting,
                    rate,
                    streams=streams,
                    target=target,
                    delta=delta,
                    change=change,
                    horizon=horizon,
                    seed=(seed, i, j, k),
                    levels=levels,
                    checks=mapie_checks,
                    check_cap=mapie_cap,
                    certify=key == "stable",
                )
        out["sets"][name] = {
            "info": info,
            "cells": cells,
            "skipped": skipped,
            "matched": {f"{r:g}": _matched(cells, r, levels) for r in rates},
            "seconds": round(time.perf_counter() - t0, 1),
        }
    checked = sum(c["mapie_checked"] for s in out["sets"].values() for c in s["cells"].values())
    agreed = sum(c["mapie_agreed"] for s in out["sets"].values() for c in s["cells"].values())
    out["mapie_checks"] = {"checked": checked, "agreed": agreed}
    out["goals"] = goals(out)
    out["seconds"] = round(time.perf_counter() - t_start, 1)
    return out


def goals(res: dict[str, Any]) -> dict[str, Any]:
    """The issue's two goals, cell by cell: false alarms <= delta, delay ratio <= 0.8."""
    delta = res["delta"]
    fa, ratio = [], []
    for name, s in res["sets"].items():
        for c in s["cells"].values():
            if c["setting"] in STABLE:
                fa.append(c["monitors"]["ours"]["false_alarm_rate"] <= delta)
                continue
            ours = c["monitors"]["ours"]["delay_labels_median"]
            for label, level in (("same_level", SAME_LEVEL), ("matched", None)):
                lv = level if level is not None else s["matched"].get(f"{c['rate']:g}")
                if lv is None:
                    continue
                theirs = c["monitors"][_mapie(lv)]["delay_labels_median"]
                ratio.append(
                    {
                        "set": name,
                        "cell": f"{c['setting']}@{c['rate']:g}",
                        "against": label,
                        "ratio": _ratio(ours, theirs),
                        "met": _met(ours, theirs),
                    }
                )
    return {
        "false_alarms_at_most_delta": all(fa),
        "false_alarm_cells": len(fa),
        "delay_ratio_cells": len(ratio),
        "delay_ratio_met": sum(r["met"] is True for r in ratio),
        "delay_ratio_undecided": sum(r["met"] is None for r in ratio),
        "delay_ratios": ratio,
    }


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs (medians); None when either never reached a median detection."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def _met(ours: float | None, theirs: float | None) -> bool | None:
    """Is ours <= 0.8x theirs? None when neither detects half the streams in the horizon."""
    if ours is None:
        return None if theirs is None else False
    if theirs is None:  # MAPIE detected fewer than half the streams within the horizon
        return True
    return ours <= 0.8 * theirs


# --------------------------------------------------------------------------- tables


def _f(v: Any, spec: str = ".3f", width: int = 7) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return f"{'—':>{width}s}"
    return f"{v:{width}{spec}}"


def _n(v: Any, width: int = 7) -> str:
    """A median count (None: not reached by half the streams within the horizon)."""
    return f"{'never':>{width}s}" if v is None else f"{v:{width},.0f}"


def print_tables(res: dict[str, Any]) -> None:
    """The stable and drift tables of one run's results (what ``--show`` prints)."""
    levels = res["mapie_levels"]
    delta = res["delta"]
    print(
        f"MAPIE {res['mapie_version']}; target {res['target']}, delta {delta}; "
        f"{res['streams']} streams per cell of {res['horizon']:,} auto-routed decisions"
        f" (change at {res['change']:,}); PrecisionMonitor window {res['monitor']['window']},"
        f" certify needs >= {res['monitor']['required_labels']} labels; "
        f"{res.get('seconds', 0):.0f} s"
    )
    for name, s in res["sets"].items():
        info = s["info"]
        print(
            f"{name}: certified threshold {info['threshold']:.4f} (auto-routes "
            f"{info['auto_routed_share']:.1%} of the deployment half, precision "
            f"{info.get('pool_precision', math.nan):.4f}); edge threshold "
            f"{info.get('edge_threshold', math.nan):.4f}"
            + "".join(f"; {k}: {v}" for k, v in s["skipped"].items())
        )
    m_cols = ["ours", *(_mapie(lv) for lv in levels), "naive"]
    print()
    print("stable streams: false-alarm rate (breach ever declared)  |  labels to certify (median)")
    head = " ".join(f"{m:>10s}" for m in m_cols)
    print(f"{'set':10s} {'setting':11s} {'audit':>5s} {'p':>6s} {'labels':>7s}  {head}  |  {head}")
    for name, s in res["sets"].items():
        for c in s["cells"].values():
            if c["setting"] not in STABLE:
                continue
            mon = c["monitors"]
            fa = " ".join(f"{mon[m]['false_alarm_rate']:10.3f}" for m in m_cols)
            cert = " ".join(
                _n(mon[m]["certify_labels_median"], 10)
                if c["setting"] == "stable"
                else f"{'':>10s}"
                for m in m_cols
            )
            print(
                f"{name:10s} {c['setting']:11s} {c['rate']:5.0%} {c['precision_before']:6.4f} "
                f"{c['labels_mean']:7,.0f}  {fa}  |  {cert}"
            )
    print()
    print(
        "false alarms: ours (95% upper bound) vs delta; naive / delta  |  share certified "
        "within the horizon (stable)"
    )
    for name, s in res["sets"].items():
        for c in s["cells"].values():
            if c["setting"] not in STABLE:
                continue
            o, nv = c["monitors"]["ours"], c["monitors"]["naive"]
            share = " ".join(
                f"{m} {c['monitors'][m]['certified_share']:.2f}"
                for m in ("ours", _mapie(SAME_LEVEL), "naive")
                if m in c["monitors"]
            )
            print(
                f"{name:10s} {c['setting']:11s} {c['rate']:5.0%}  ours {o['false_alarms']}/"
                f"{c['streams']} = {o['false_alarm_rate']:.3f} (<= {o['false_alarm_upper95']:.3f})"
                f" {'<=' if o['false_alarm_rate'] <= delta else '>'} {delta}; naive "
                f"{nv['false_alarm_rate']:.3f} = {nv['false_alarm_rate'] / delta:.1f}x delta"
                + (f"  |  {share}" if c["setting"] == "stable" else "")
            )
    print()
    print(
        "drift streams: median detection delay in labels after the change "
        "(never: under half detected within the horizon); detected share in brackets"
    )
    cols = ["ours", _mapie(levels[0]), _mapie(SAME_LEVEL), "matched", "naive"]
    print(
        f"{'set':10s} {'setting':10s} {'audit':>5s} {'p before':>8s} {'after':>6s} "
        + " ".join(f"{m:>16s}" for m in cols)
        + f"  {'ours/same':>9s} {'ours/match':>10s}  early ours/naive"
    )
    for name, s in res["sets"].items():
        for c in s["cells"].values():
            if c["setting"] in STABLE:
                continue
            mon = c["monitors"]
            lv = s["matched"].get(f"{c['rate']:g}")
            cells = []
            for m in cols:
                key = _mapie(lv) if m == "matched" and lv is not None else m
                if key not in mon:
                    cells.append(f"{'n/a':>16s}")
                    continue
                d = mon[key]
                tag = f"@{lv:g} " if m == "matched" else ""
                cells.append(
                    f"{tag}{_n(d['delay_labels_median'], 6)} [{d['detected_share']:.2f}]".rjust(16)
                )
            ours = mon["ours"]["delay_labels_median"]
            same = mon.get(_mapie(SAME_LEVEL), {}).get("delay_labels_median")
            match = mon[_mapie(lv)]["delay_labels_median"] if lv is not None else None
            print(
                f"{name:10s} {c['setting']:10s} {c['rate']:5.0%} {c['precision_before']:8.4f} "
                f"{c['precision_after']:6.4f} "
                + " ".join(cells)
                + f"  {_f(_ratio(ours, same), '.2f', 9)} {_f(_ratio(ours, match), '.2f', 10)}"
                f"  {mon['ours']['early_alarm_rate']:.3f}/{mon['naive']['early_alarm_rate']:.3f}"
            )
    print()
    print("drift streams: median detection delay in auto-routed decisions after the change")
    cols = ["ours", _mapie(levels[0]), _mapie(SAME_LEVEL), "naive"]
    print(f"{'set':10s} {'setting':10s} {'audit':>5s} " + " ".join(f"{m:>11s}" for m in cols))
    for name, s in res["sets"].items():
        for c in s["cells"].values():
            if c["setting"] in STABLE:
                continue
            mon = c["monitors"]
            print(
                f"{name:10s} {c['setting']:10s} {c['rate']:5.0%} "
                + " ".join(
                    _n(mon[m]["delay_decisions_median"], 11) if m in mon else f"{'n/a':>11s}"
                    for m in cols
                )
            )
    g = res["goals"]
    mc = res["mapie_checks"]
    print()
    print(
        f"goals: our false alarms <= delta in {'every' if g['false_alarms_at_most_delta'] else 'NOT every'}"
        f" stable cell ({g['false_alarm_cells']}); median delay <= 0.8x MAPIE's in "
        f"{g['delay_ratio_met']} of {g['delay_ratio_cells']} comparisons (same level "
        f"{SAME_LEVEL:g} and matched; {g['delay_ratio_undecided']} undecided: neither detects "
        f"half the streams within the horizon). MAPIE flags checked against "
        f"RiskMonitoring.update: {mc['agreed']}/{mc['checked']} agree"
    )
    for r in g["delay_ratios"]:
        if r["met"] is not True:
            print(
                f"  {'not met' if r['met'] is False else 'undecided'}: {r['set']} {r['cell']} "
                f"vs MAPIE {r['against']}: ratio {_f(r['ratio'], '.2f', 0)}"
            )


# --------------------------------------------------------------------------- runner


def runner_entry(quick: bool, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks`` (``--set monitor.streams=200`` for the full run).

    Quick: the bundled support tickets, 3 streams of 40,000 decisions. Full: Banking77, 20
    streams (the script's defaults are both public sets and 200 streams; the runner keeps
    to its time budget: ``--set monitor.datasets=banking77,clinc150``).
    """
    datasets = str(settings.get("datasets", "support-tickets" if quick else "banking77"))
    names = [d.strip() for d in datasets.split(",") if d.strip()]
    streams = int(settings.get("streams", 3 if quick else 20))
    target = float(settings.get("target", 0.9 if quick else TARGET))
    rows: list[dict[str, Any]] = []
    public = [n for n in names if n != "support-tickets"]
    data_dir = _data_dir(settings.get("data_dir"))
    if public and data_dir is None:
        rows.append(
            {
                "bench": "monitor",
                "key": "monitor.skipped",
                "measure": f"monitoring on {', '.join(public)}",
                "value": None,
                "status": "skipped",
                "notes": "public sets not found: set HYBRIDROUTE_DATA_DIR or --data-dir",
            }
        )
        names = [n for n in names if n == "support-tickets"]
    if not names:
        return rows
    from contextlib import redirect_stdout

    horizon = int(settings.get("horizon", 40_000 if quick else HORIZON))
    change = int(settings.get("change", 4_000 if quick else CHANGE))
    with redirect_stdout(sys.stderr):
        res = run(
            names,
            streams,
            target=target,
            data_dir=data_dir,
            horizon=horizon,
            change=change,
            mapie_checks=int(settings.get("mapie_checks", 1)),
        )
    reduced = f"{streams} streams per cell" + (
        f" (the script's default is {STREAMS})" if streams < STREAMS else ""
    )
    for name, s in res["sets"].items():
        for rate in res["rates"]:
            stable = [
                c for c in s["cells"].values() if c["setting"] in STABLE and c["rate"] == rate
            ]
            drift = [c for c in s["cells"].values() if c["setting"] in DRIFT and c["rate"] == rate]
            if stable:
                n = sum(c["streams"] for c in stable)
                fa = {
                    m: sum(c["monitors"][m]["false_alarms"] for c in stable) / n
                    for m in ("ours", _mapie(SAME_LEVEL), "naive")
                }
                rows.append(
                    {
                        "bench": "monitor",
                        "key": f"monitor.{name}.a{rate:g}.false_alarms",
                        "measure": f"{name}, audit {rate:.0%}: breach false-alarm rate vs delta",
                        "value": fa["ours"],
                        "unit": "share",
                        "baseline": res["delta"],
                        "baseline_label": "delta",
                        "notes": f"stable + edge streams; naive CP {fa['naive']:.3f}, MAPIE@"
                        f"{SAME_LEVEL:g} {fa[_mapie(SAME_LEVEL)]:.3f}; target {target}; {reduced}",
                    }
                )
            for c in drift:
                ours = c["monitors"]["ours"]["delay_labels_median"]
                same = c["monitors"][_mapie(SAME_LEVEL)]["delay_labels_median"]
                rows.append(
                    {
                        "bench": "monitor",
                        "key": f"monitor.{name}.a{rate:g}.{c['setting']}.delay",
                        "measure": f"{name}, audit {rate:.0%}, {c['setting']}: median detection "
                        "delay (labels) vs MAPIE",
                        "value": ours,
                        "unit": "count",
                        "baseline": same,
                        "baseline_label": f"RiskMonitoring test_level {SAME_LEVEL:g}",
                        "status": "ok" if ours is not None else "n/a",
                        "notes": f"precision {c['precision_before']:.3f} -> "
                        f"{c['precision_after']:.3f}; detected ours "
                        f"{c['monitors']['ours']['detected_share']:.2f}, MAPIE "
                        f"{c['monitors'][_mapie(SAME_LEVEL)]['detected_share']:.2f}; goal "
                        f"ratio <= 0.8; {reduced}",
                    }
                )
    return rows


def _data_dir(explicit: str | None = None) -> Path | None:
    try:
        from ._core import find_data_dir
    except ImportError:  # as a script
        from _core import find_data_dir  # type: ignore[no-redef]
    return find_data_dir(explicit)


# --------------------------------------------------------------------------- main


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or not all(0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError("each value must be in (0, 1)")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=STREAMS, help="seeded streams per cell")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--rates", type=_floats, default=RATES, help="audit rates, e.g. 0.01,0.05")
    ap.add_argument("--target", type=float, default=TARGET)
    ap.add_argument("--change", type=int, default=CHANGE, help="decision of the change")
    ap.add_argument("--horizon", type=int, default=HORIZON, help="decisions per stream")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--mapie-checks", type=int, default=1, help="streams per cell checked")
    ap.add_argument("--data-dir", default=None, help="public sets (default: auto)")
    ap.add_argument("--cache", type=Path, default=None, help="cache the scored rows here")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--show", type=Path, default=None, help="print a saved --json run's tables")
    ap.add_argument(
        "--window-study",
        action="store_true",
        help="only the synthetic study behind the drop test's default window (no data)",
    )
    args = ap.parse_args(argv)
    if args.window_study:
        study = ms.window_study(streams=args.streams)
        if args.json:
            print(json.dumps(study, indent=2))
        else:
            ms.print_window_study(study)
        return 0
    if args.show is not None:
        print_tables(json.loads(args.show.read_text(encoding="utf-8")))
        return 0
    if args.streams < 1:
        ap.error("--streams must be at least 1")
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    data_dir = _data_dir(args.data_dir)
    if data_dir is None and any(n != "support-tickets" for n in names):
        ap.error("public sets not found: set HYBRIDROUTE_DATA_DIR or --data-dir")
    res = run(
        names,
        args.streams,
        args.rates,
        target=args.target,
        change=args.change,
        horizon=args.horizon,
        seed=args.seed,
        cache=args.cache,
        data_dir=data_dir,
        mapie_checks=args.mapie_checks,
    )
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
