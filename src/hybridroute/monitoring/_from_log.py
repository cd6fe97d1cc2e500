"""The live guarantee read from a decision log: audited decisions and their audit outcomes.

Only outcomes of source ``audit`` on decisions the log selected for audit count: the audit
sample is a random sample of auto-routed traffic (selected by a keyed hash of the decision
id, see :class:`hybridroute.records.AuditSampler`), while human-review labels cover only
what the router did *not* auto-route and user feedback comes from whoever chose to give
it. Labels are taken in the order they were recorded, which is the order a monitor
watching the log live would have seen them.

An audited decision is correct when its gold next step (if the outcome gives one) is the
destination the router selected, otherwise when its gold intent is the label it
predicted. A decision with several audit outcomes counts once, by its first; the others
are counted as conflicts. Each label is weighted ``π_min / π`` by its inclusion
probability ``π`` (``audit_p``), ``π_min`` the smallest rate among this version's audited
decisions; with one constant audit rate every weight is 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contracts import ReasonCode
from ._monitor import PrecisionMonitor, traffic_shift

OUT_OF_SCOPE = ReasonCode.OUT_OF_SCOPE.value
#: The decision columns the monitor reads (besides ``seq``).
_READ = (
    "decision_id",
    "router_version",
    "label",
    "selected_destination",
    "audit_p",
    "audited",
)

__all__ = ["monitor_log"]


def _correct(outcome: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    if outcome.get("gold_next_step") is not None:
        return bool(outcome["gold_next_step"] == row["selected_destination"])
    return bool(outcome.get("gold_intent") == row["label"])


def _label_mix(log: Any, version: str, oos_label: str) -> dict[str, int]:
    """Predicted labels of the version's live classified decisions (stages ``model`` and
    ``policy``), out-of-scope decisions as ``oos_label``; counted by the database."""
    mix: dict[str, int] = {}
    rows = log._counts(
        ("label", "reason_code"), router_version=version, role="live", stages=("model", "policy")
    )
    for label, reason, n in rows:
        key = oos_label if reason == OUT_OF_SCOPE else label
        if key is not None:
            mix[str(key)] = mix.get(str(key), 0) + int(n)
    return mix


def monitor_log(
    log: Any,
    *,
    target: float,
    delta: float,
    router_version: str | None = None,
    window: int = 200,
    reference: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The monitor's state for one router version of ``log``.

    Parameters
    ----------
    log : DecisionLog or PostgresLog
        An open decision log (:func:`hybridroute.records.open_log`).
    target, delta : float
        The precision the router's policy promises and its confidence (``policy.target``,
        ``policy.delta``).
    router_version : str, optional
        The router version to watch. ``None``: the one version with audited decisions
        (an error when there are several).
    window : int, default 200
        The span of the breach test's recent-label bets (see :class:`PrecisionMonitor`).
    reference : mapping, optional
        The calibration data the policy records (``policy.calibration_data``: its
        ``label_counts`` and ``out_of_scope_label``). Given, the result's ``shift`` is
        :func:`traffic_shift` of the version's live classified decisions (stages ``model``
        and ``policy``: predicted labels, out-of-scope decisions as the out-of-scope label)
        against it; otherwise ``None``.

    Returns
    -------
    dict
        :meth:`PrecisionMonitor.to_dict` (``status``, ``labels``, ``precision`` ->
        ``{estimate, lower, upper}``, ``target``, ``delta``, ``breach``) plus
        ``router_version``, ``audited`` (decisions selected for audit), ``pending``
        (audited, no audit outcome yet), ``conflicting_outcomes`` and ``shift``.

    Raises
    ------
    ValueError
        When ``router_version`` is ``None`` and several versions have audited decisions,
        or when the log holds no audited decision of that version.
    """
    audited: dict[str, dict[str, Any]] = {}
    versions: set[str] = set()
    counts = reference.get("label_counts") if reference is not None else None
    oos_label = str((reference or {}).get("out_of_scope_label") or "out_of_scope")
    # only the audited rows and only the columns needed, records left unparsed: a service
    # recomputes this often
    for values in log._columns(_READ, router_version=router_version, role="live", audited=True):
        row = dict(zip(("seq", *_READ), values, strict=True))
        audited[row["decision_id"]] = row
        versions.add(str(row["router_version"]))
    if router_version is None and len(versions) > 1:
        raise ValueError(
            f"the log holds audited decisions of router versions {sorted(versions)}; "
            "choose one with --router-version"
        )
    if not audited:
        which = f"router version {router_version!r}" if router_version else "any router version"
        raise ValueError(
            f"the log holds no audited decision of {which}: route with an audit rate "
            "(--audit-rate and HYBRIDROUTE_AUDIT_KEY) first"
        )
    pi_min = min(float(r["audit_p"]) for r in audited.values())
    monitor = PrecisionMonitor(target, delta, window=window)
    seen: set[str] = set()
    corrects: list[float] = []
    weights: list[float] = []
    times: list[str | None] = []
    conflicts = 0
    for outcome in log.outcomes():
        labelled = audited.get(outcome["decision_id"])
        if outcome.get("source") != "audit" or labelled is None:
            continue
        row = labelled
        if outcome["decision_id"] in seen:
            conflicts += 1
            continue
        seen.add(outcome["decision_id"])
        corrects.append(1.0 if _correct(outcome, row) else 0.0)
        weights.append(pi_min / float(row["audit_p"]))
        times.append(outcome.get("recorded_at"))
    if corrects:
        monitor.update_many(corrects, weights, times=times)
    out = monitor.to_dict()
    version = next(iter(versions)) if router_version is None else router_version
    live_mix = _label_mix(log, version, oos_label) if counts else None
    shift = (
        traffic_shift(counts, live_mix, out_of_scope=oos_label).to_dict()
        if counts and live_mix
        else None
    )
    out.update(
        router_version=version,
        shift=shift,
        audited=len(audited),
        pending=len(audited) - len(seen),
        conflicting_outcomes=conflicts,
    )
    return out
