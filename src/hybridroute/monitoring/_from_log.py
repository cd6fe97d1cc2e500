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

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..contracts import ReasonCode
from ..records._outcomes import misplaced_outcomes, read_outcomes_after
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

__all__ = ["LogMonitor", "monitor_log"]

#: Seconds after a read during which a PostgreSQL row numbered below what that read saw
#: may still become visible (its transaction was open then): far above any commit the
#: log's own timeouts let through.
OVERLAP_S = 120.0


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
    # only the audited rows and only the columns needed, records left unparsed
    for values in log._columns(_READ, router_version=router_version, role="live", audited=True):
        row = dict(zip(("seq", *_READ), values, strict=True))
        audited[row["decision_id"]] = row
        versions.add(str(row["router_version"]))
    if router_version is None and len(versions) > 1:
        raise ValueError(
            f"the log holds audited decisions of router versions {sorted(versions)}; "
            "choose one with --router-version"
        )
    version = next(iter(versions), None) if router_version is None else router_version
    counts = reference.get("label_counts") if reference is not None else None
    mix = None
    if counts and version is not None:
        mix = _label_counts(log, version, None)
    return _state_of(
        log,
        audited,
        log.outcomes(),
        mix,
        version=version,
        target=target,
        delta=delta,
        window=window,
        reference=reference,
        routers=routers,
        max_disputed_share=max_disputed_share,
    )


def _label_counts(
    log: LogBase, version: str, seqs: tuple[int, int | None] | None
) -> dict[tuple[Any, Any], int]:
    """``(label, reason_code)`` -> count of the version's live classified decisions (of
    ``after < seq <= upto`` for ``seqs``), counted by the database."""
    rows = log._counts(
        ("label", "reason_code"),
        router_version=version,
        role="live",
        stages=("model", "policy"),
        seqs=seqs,
    )
    return {(label, reason): int(n) for label, reason, n in rows}


def _mix_of(counts: Mapping[tuple[Any, Any], int], oos_label: str) -> dict[str, int]:
    """Predicted labels from ``(label, reason_code)`` counts, out of scope as ``oos_label``."""
    mix: dict[str, int] = {}
    for (label, reason), n in counts.items():
        key = oos_label if reason == OUT_OF_SCOPE else label
        if key is not None:
            mix[str(key)] = mix.get(str(key), 0) + int(n)
    return mix


def _state_of(
    log: LogBase,
    audited: Mapping[str, Mapping[str, Any]],
    outcomes: Iterable[Mapping[str, Any]],
    counts: Mapping[tuple[Any, Any], int] | None,
    *,
    version: str | None,
    target: float,
    delta: float,
    window: int,
    reference: Mapping[str, Any] | None,
    routers: Iterable[RouterLike],
    max_disputed_share: float,
    precision: Callable[[list[Any]], PrecisionMonitor] | None = None,
    misplaced: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The monitor's state from what was read: the version's audited rows (in log order),
    every stored outcome (in recorded order) and its label counts (``None``: no shift).

    ``precision(observations)`` gives the :class:`PrecisionMonitor` fed with
    ``(correct, weight, recorded_at)`` in order (default: a new one fed with all);
    ``misplaced``: the log's misplaced outcomes of the version (default: counted now)."""
    if not audited or version is None:
        which = f"router version {version!r}" if version else "any router version"
        raise ValueError(
            f"the log holds no audited decision of {which}: route with an audit rate "
            "(--audit-rate and HYBRIDROUTE_AUDIT_KEY) first"
        )
    keys = {(str(r["router"]), str(r["router_version"])) for r in audited.values()}
    labels = settle_labels(
        outcomes,
        audited,
        sources=("audit",),
        vocabularies=vocabularies_for(log, keys, routers),
    )
    pi_min = min(float(r["audit_p"]) for r in audited.values())
    ordered = labels.ordered()
    observations = [
        (
            1.0 if lb.correct(audited[lb.decision_id]) else 0.0,
            pi_min / float(audited[lb.decision_id]["audit_p"]),
            lb.recorded_at,
        )
        for lb in ordered
    ]
    if precision is None:
        monitor = _fed(PrecisionMonitor(target, delta, window=window), observations)
    else:
        monitor = precision(observations)
    out = monitor.to_dict()
    reference_counts = reference.get("label_counts") if reference is not None else None
    oos_label = str((reference or {}).get("out_of_scope_label") or "out_of_scope")
    live_mix = _mix_of(counts, oos_label) if reference_counts and counts is not None else None
    shift = (
        traffic_shift(reference_counts, live_mix, out_of_scope=oos_label).to_dict()
        if reference_counts and live_mix
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
            **(
                misplaced
                if misplaced is not None
                else log.misplaced_outcomes(router_version=version)
            ),
        },
    )
    return out


def _fed(monitor: PrecisionMonitor, observations: list[Any]) -> PrecisionMonitor:
    """``monitor`` updated with ``(correct, weight, recorded_at)`` observations."""
    if observations:
        xs, ws, ts = zip(*observations, strict=True)
        monitor.update_many(list(xs), list(ws), times=list(ts))
    return monitor


class LogMonitor:
    """:func:`monitor_log` kept up to date: each :meth:`update` reads only what is new.

    The state read so far is kept -- the version's audited rows, the outcomes, the label
    counts of its classified decisions -- and an update reads only the rows after what is
    *settled*, so its cost follows what arrived since, not the size of the log. Its result
    is :func:`monitor_log`'s on the same log.

    What is settled: on SQLite (one writer; rows appear in ``seq`` order) everything an
    update read. On PostgreSQL a row is numbered when inserted and appears when its
    transaction commits, so a row below the highest ``seq`` seen may still appear; what
    an update saw is settled only once ``overlap_s`` has passed since, and the rows after
    it are read again (with the outcomes, whose late arrivals the same re-read covers).

    Parameters
    ----------
    target, delta, window, reference, routers, max_disputed_share
        As :func:`monitor_log`.
    router_version : str
        The router version watched.
    overlap_s : float, default :data:`OVERLAP_S`
        How long what an update saw on PostgreSQL stays unsettled.
    clock : callable, default time.monotonic
        The clock of ``overlap_s``.
    """

    def __init__(
        self,
        *,
        target: float,
        delta: float,
        router_version: str,
        window: int = 200,
        reference: Mapping[str, Any] | None = None,
        routers: Iterable[RouterLike] = (),
        max_disputed_share: float = DEFAULT_MAX_DISPUTED_SHARE,
        overlap_s: float = OVERLAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.delta = delta
        self.router_version = router_version
        self.window = window
        self.reference = reference
        self.routers = tuple(routers)
        self.max_disputed_share = check_max_disputed_share(max_disputed_share)
        self.overlap_s = float(overlap_s)
        self._clock = clock
        self._seq = 0  # decisions with seq <= this are settled (read, and final)
        self._outcome_seq = 0  # the same for outcomes
        self._audited: dict[str, dict[str, Any]] = {}
        self._outcomes: list[dict[str, Any]] = []
        self._counts: dict[tuple[Any, Any], int] = {}
        self._reads: deque[tuple[float, int, int]] = deque()  # (time, seq, outcome seq)
        # the precision monitor and what it was fed: the next observations extend them
        # (a new label comes after the others), or it is fed again from the start
        self._precision: PrecisionMonitor | None = None
        self._fed: list[Any] = []
        self._misplaced = {"shadow": 0, "audit_not_audited": 0}  # of the settled outcomes
        #: Rows read by the latest update (decisions, outcomes): what it cost.
        self.last_read = (0, 0)

    def _settle_to(self, log: LogBase) -> tuple[int, int]:
        """The ``seq`` of decisions and of outcomes up to which the log is final now."""
        high = log._last_seq(), log._last_seq(log._outcomes_table)
        if log.commits_in_seq_order:
            return high
        now = self._clock()
        self._reads.append((now, *high))
        settled = self._seq, self._outcome_seq
        while self._reads and now - self._reads[0][0] >= self.overlap_s:
            _, dec, out = self._reads.popleft()
            settled = max(settled[0], dec), max(settled[1], out)
        return settled

    def update(self, log: LogBase) -> dict[str, Any]:
        """The monitor's state now (:func:`monitor_log`'s), reading only what is new.

        What it reads joins the kept state only once every read succeeded: an update
        that fails (the log cannot be read) leaves the state as it was.
        """
        settle, settle_out = self._settle_to(log)
        version = self.router_version
        settled: dict[str, dict[str, Any]] = {}
        recent: dict[str, dict[str, Any]] = {}
        for values in log._columns(
            _READ, router_version=version, role="live", audited=True, after=self._seq
        ):
            row = dict(zip(("seq", *_READ), values, strict=True))
            (settled if row["seq"] <= settle else recent)[row["decision_id"]] = row
        counts: dict[tuple[Any, Any], int] | None = None
        new_counts: dict[tuple[Any, Any], int] = {}
        if self.reference is not None and self.reference.get("label_counts"):
            if settle > self._seq:
                new_counts = _label_counts(log, version, (self._seq, settle))
            counts = dict(self._counts)
            for part in (new_counts, _label_counts(log, version, (max(settle, self._seq), None))):
                for key, n in part.items():
                    counts[key] = counts.get(key, 0) + n
        read = read_outcomes_after(log._query, log._outcomes_table, self._outcome_seq)
        new_misplaced = self._count_misplaced(log, (self._outcome_seq, settle_out))
        misplaced = self._count_misplaced(log, (max(settle_out, self._outcome_seq), None))
        for name, n in self._misplaced.items():
            misplaced[name] += n + new_misplaced[name]
        # every read done: what is settled joins the kept state
        for name, n in new_misplaced.items():
            self._misplaced[name] += n
        self._audited.update(settled)
        for key, n in new_counts.items():
            self._counts[key] = self._counts.get(key, 0) + n
        recent_outcomes: list[dict[str, Any]] = []
        for seq, outcome in read:
            (self._outcomes if seq <= settle_out else recent_outcomes).append(outcome)
        self._seq, self._outcome_seq = max(self._seq, settle), max(self._outcome_seq, settle_out)
        self.last_read = (len(settled) + len(recent), len(read))
        return _state_of(
            log,
            {**self._audited, **recent},
            self._outcomes + recent_outcomes,
            counts,
            version=version,
            target=self.target,
            delta=self.delta,
            window=self.window,
            reference=self.reference,
            routers=self.routers,
            max_disputed_share=self.max_disputed_share,
            precision=self._precision_for,
            misplaced=misplaced,
        )

    def _count_misplaced(self, log: LogBase, seqs: tuple[int, int | None]) -> dict[str, int]:
        """The misplaced outcomes (:meth:`~hybridroute.records.DecisionLog.misplaced_outcomes`)
        among the outcomes of ``seqs``: outcomes never change, nor do the decisions they
        name, so the settled ones are counted once."""
        if seqs[1] is not None and seqs[1] <= seqs[0]:
            return {"shadow": 0, "audit_not_audited": 0}
        return misplaced_outcomes(
            log._query,
            decisions=log._table,
            table=log._outcomes_table,
            router_version=self.router_version,
            seqs=seqs,
        )

    def _precision_for(self, observations: list[Any]) -> PrecisionMonitor:
        """The kept precision monitor fed up to ``observations``: only the new ones when
        they extend what it was fed, else a new monitor fed with all of them."""
        kept, fed = self._precision, self._fed
        if kept is None or len(observations) < len(fed) or observations[: len(fed)] != fed:
            kept = PrecisionMonitor(self.target, self.delta, window=self.window)
            fed = []
        self._precision = _fed(kept, observations[len(fed) :])
        self._fed = list(observations)
        return self._precision
