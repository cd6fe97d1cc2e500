"""The live guarantee read from a decision log: audited decisions and their audit outcomes.

Only outcomes of source ``audit`` on decisions the log selected for audit count: the audit
sample is a random sample of auto-routed traffic (selected by a keyed hash of the decision
id, see :class:`hybridroute.records.AuditSampler`), while human-review labels cover only
what the router did *not* auto-route and user feedback comes from whoever chose to give
it. Labels are taken in the order they were recorded, which is the order a monitor
watching the log live would have seen them.

Each audited decision counts once, with the label :func:`._labels.settle_labels` gives
it from its ``audit`` and ``adjudication`` outcomes (the rule the monitor, recalibration
and the promotion gate share): correct when its gold next step (if the label gives one) is
the destination the router selected, otherwise when its gold intent is the label it
predicted; a *disputed* decision (its audit labels disagree and no adjudication settles
them) counts as wrong, whatever order its outcomes were written in. Outcomes that name a
label or destination the router version does not have, or that were observed before the
decision, are left out and reported (``invalid_outcomes``). Each label is weighted
``π_min / π`` by its inclusion probability ``π`` (``audit_p``), ``π_min`` the smallest
rate among this version's audited decisions; with one constant audit rate every weight
is 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..contracts import ReasonCode
from ._labels import (
    DEFAULT_MAX_DISPUTED_SHARE,
    check_max_disputed_share,
    settle_labels,
    vocabularies_for,
)
from ._monitor import PrecisionMonitor, traffic_shift

OUT_OF_SCOPE = ReasonCode.OUT_OF_SCOPE.value
#: The decision columns the monitor reads (besides ``seq``).
_READ = (
    "decision_id",
    "router",
    "router_version",
    "logged_at",
    "label",
    "selected_destination",
    "audit_p",
    "audited",
)

if TYPE_CHECKING:
    from ..records._logbase import LogBase
    from ._routing import RouterLike

__all__ = ["monitor_log"]


def _label_mix(log: LogBase, version: str, oos_label: str) -> dict[str, int]:
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
    log: LogBase,
    *,
    target: float,
    delta: float,
    router_version: str | None = None,
    window: int = 200,
    reference: Mapping[str, Any] | None = None,
    routers: Iterable[RouterLike] = (),
    max_disputed_share: float = DEFAULT_MAX_DISPUTED_SHARE,
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
    routers : iterable of HybridRouter, optional
        Routers whose vocabulary (labels, out-of-scope label, destinations) checks the
        outcomes of their version when the log has none registered.
    max_disputed_share : float, default 0.05
        Flag the labels (``disputes["exceeded"]``) when more than this share of the
        labelled decisions is disputed.

    Returns
    -------
    dict
        :meth:`PrecisionMonitor.to_dict` (``status``, ``labels``, ``precision`` ->
        ``{estimate, lower, upper}``, ``target``, ``delta``, ``breach``) plus
        ``router_version``, ``audited`` (decisions selected for audit), ``pending``
        (audited, without a counted outcome yet), ``disputes`` (``labelled``,
        ``disputed``, ``adjudicated``, ``share``, ``max_share``, ``exceeded``),
        ``invalid_outcomes`` (``count`` and the first ``examples`` of the audit outcomes
        left out; ``shadow`` and ``audit_not_audited``: stored outcomes of the version's
        shadow decisions, and audit outcomes of its unaudited ones, never read) and
        ``shift``.

    Raises
    ------
    ValueError
        When ``router_version`` is ``None`` and several versions have audited decisions,
        when the log holds no audited decision of that version, or when the log knows no
        vocabulary of the version (and no router of it is given).
    """
    max_disputed_share = check_max_disputed_share(max_disputed_share)
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
    keys = {(str(r["router"]), str(r["router_version"])) for r in audited.values()}
    labels = settle_labels(
        log.outcomes(),
        audited,
        sources=("audit",),
        vocabularies=vocabularies_for(log, keys, routers),
    )
    pi_min = min(float(r["audit_p"]) for r in audited.values())
    monitor = PrecisionMonitor(target, delta, window=window)
    ordered = labels.ordered()
    if ordered:
        monitor.update_many(
            [1.0 if lb.correct(audited[lb.decision_id]) else 0.0 for lb in ordered],
            [pi_min / float(audited[lb.decision_id]["audit_p"]) for lb in ordered],
            times=[lb.recorded_at for lb in ordered],
        )
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
        pending=len(audited) - len(ordered),
        disputes=labels.disputes(max_disputed_share),
        invalid_outcomes={
            **labels.invalid_report(),
            **log.misplaced_outcomes(router_version=version),
        },
    )
    return out
