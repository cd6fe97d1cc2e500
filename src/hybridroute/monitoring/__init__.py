"""Monitoring a deployed router: is the auto-route precision guarantee still holding?

* :class:`BettingConfidenceSequence` -- an anytime-valid confidence sequence for a mean
  in [0, 1] (Waudby-Smith & Ramdas' hedged betting capital), with importance weights for
  audit samples drawn at varying rates.
* :class:`PrecisionMonitor` -- the live guarantee: states ``insufficient``, ``holding``,
  ``certified_online`` and ``breach`` from audited outcomes, safe to read after every label.
  ``breach`` comes from a one-sided betting test that bets on recent labels only
  (``hybridroute.monitoring._confseq.BettingDropTest``): a large drop is found within about
  a hundred labels (a small one takes longer, and longer after a long healthy phase near
  the target), and on any stream whose precision stays at or above the target at every label
  it fires with probability at most ``delta``.
* :func:`traffic_shift` / :class:`TrafficShift` -- how far live traffic's predicted-label
  mix and out-of-scope share moved from a reference (calibration) mix.
* :func:`monitor_log` -- that state for one router version of a decision log, from its
  audited decisions and their audit outcomes (what ``hybridroute monitor`` prints).
* :func:`recalibrate_from_log` / :class:`Recalibration` -- a router's threshold refitted on
  its own audited decisions (what ``hybridroute calibrate --from-log`` writes), with what
  that certifies and what it cannot.
* :func:`promotion_gate` / :class:`PromotionReport` -- may a candidate router version replace
  the incumbent? Disagreement (shadow or replay), the candidate's auto-route precision on the
  audited window with exact bounds, a paired test on a labelled set, rules never silently
  weakened (what ``hybridroute promote`` prints).
* :func:`repeated_clopper_pearson` -- the naive baseline (an exact interval recomputed at
  every label), kept for benchmarks that show why it must not be used to monitor.

This package imports numpy and scipy (through :mod:`hybridroute.calibration`) only.
"""

from __future__ import annotations

from ._confseq import BettingConfidenceSequence, repeated_clopper_pearson
from ._from_log import monitor_log
from ._monitor import (
    MONITOR_STATES,
    PrecisionMonitor,
    TrafficShift,
    labels_to_certify,
    traffic_shift,
)
from ._promote import PromotionReport, promotion_gate
from ._recalibrate import Recalibration, recalibrate_from_log

__all__ = [
    "MONITOR_STATES",
    "BettingConfidenceSequence",
    "PrecisionMonitor",
    "PromotionReport",
    "Recalibration",
    "TrafficShift",
    "labels_to_certify",
    "monitor_log",
    "promotion_gate",
    "recalibrate_from_log",
    "repeated_clopper_pearson",
    "traffic_shift",
]
