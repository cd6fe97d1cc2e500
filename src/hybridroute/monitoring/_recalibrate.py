"""Recalibration from production: refit a router's threshold on its own audited decisions.

**What the rows are.** The log's audit sampler selects each auto-routed live decision of a
router version with inclusion probability ``π`` (``audit_p``) by a keyed hash of its
decision id -- independently of its input and of whether it was right. When rates varied,
each audited decision is kept with probability ``π_min / π`` (a seeded hash of its
decision id again), so the kept ones are a uniform ``π_min`` sample. Those with an audit
outcome are the calibration rows: the router's logged calibrated confidence (the incumbent
policy's scale), and whether it was right under the label its ``audit`` and
``adjudication`` outcomes give it (:func:`._labels.settle_labels`, the monitor's rule: its
gold next step is the destination it chose, or else its gold intent is the label it
predicted; a *disputed* decision counts as wrong, whatever order its outcomes were written
in). Outcomes naming a label or destination the version does not have, or observed before
the decision, are left out and reported. When more than ``max_disputed_share`` of the
labelled decisions are disputed, nothing is certified: the labels themselves are in
question (adjudicate them first).

**What the new policy certifies.** The incumbent's calibrator and its margin,
out-of-scope and evidence gates are kept; the auto-route threshold is refitted with the
incumbent's objective fitter (same target and delta unless asked otherwise) on those rows,
which all lie at or above the old threshold, so the new threshold is at least the old one.
With probability at least ``1 - delta`` over the draw of the audit sample, the precision of
the decisions the new policy auto-routes is at least ``target`` -- on traffic exchangeable
with the log window the rows came from, assuming audit labels are correct and that which
audits got labelled does not depend on whether the decision was right.

**What it cannot certify.** Items the old policy did not auto-route (below its
threshold, stopped by a gate, or decided by a rule) were never audited, so the log says
nothing about them: the new policy never auto-routes anything the old one would not, and
it cannot win coverage back. Lowering a threshold needs a labelled calibration set
(``hybridroute calibrate --dataset``). Nor does it hold for traffic unlike the window's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._canonical import canonical_json
from .._time import parse_utc_time
from ._labels import (
    DEFAULT_MAX_DISPUTED_SHARE,
    Label,
    check_max_disputed_share,
    settle_labels,
    vocabularies_for,
)

if TYPE_CHECKING:
    from ..calibration import CertifiedPrecisionThreshold, Policy
    from ..records._logbase import LogBase
    from ._routing import RouterLike

__all__ = ["Recalibration", "recalibrate_from_log"]

#: What the refitted policy certifies, recorded in its provenance.
CERTIFIES = (
    "precision of the decisions this policy auto-routes >= target with probability >= "
    "1 - delta, for traffic exchangeable with the log window; fitted on an audit sample of "
    "the incumbent's auto-routed decisions, so it auto-routes nothing the incumbent did not"
)


@dataclass(frozen=True, slots=True)
class Recalibration:
    """A policy refitted from a log, and where its rows came from.

    Attributes
    ----------
    policy : Policy
        The new policy (the incumbent's with its threshold refitted).
    report : dict
        Counts (``audited``, ``labelled``, ``pending``, ``thinned``, ``calibration_size``),
        ``disputes`` and ``invalid_outcomes`` (as the monitor reports them), the window (first / last ``seq`` and ``logged_at`` used),
        the incumbent's and the new threshold, the certificate, and ``data_fingerprint``
        (SHA-256 of the rows the threshold was fitted on).
    """

    policy: Policy
    report: Mapping[str, Any]


def _parse_time(value: str | datetime | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_utc_time(value)  # a time without a UTC offset is refused, never guessed
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _keep(decision_id: str, ratio: float, seed: int) -> bool:
    """Thinning: keep with probability ``ratio``, by a seeded hash of the decision id."""
    if ratio >= 1.0:
        return True
    digest = hashlib.sha256(f"recalibrate:{seed}:{decision_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < ratio


def _fitter(
    policy: Policy, target: float | None, delta: float | None
) -> CertifiedPrecisionThreshold:
    """A fresh fitter of the incumbent's kind; target and delta default to its own."""
    from ..calibration import CertifiedPrecisionThreshold

    fit = policy.to_dict()["objective"]["fit"]
    if fit.get("method") != CertifiedPrecisionThreshold.method:
        raise ValueError(
            f"the incumbent policy's threshold was fitted by {fit.get('method')!r}; "
            "recalibration from a log refits a certified precision threshold "
            "(objective precision or oos) only"
        )
    g = policy.guarantee
    return CertifiedPrecisionThreshold(
        float(g["target"] if target is None else target),
        float(g["delta"] if delta is None else delta),
        n_starts=int(fit.get("n_starts", 3)),
    )


def recalibrate_from_log(
    log: LogBase,
    router: RouterLike,
    *,
    router_version: str | None = None,
    target: float | None = None,
    delta: float | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    seed: int = 0,
    log_name: str | None = None,
    max_disputed_share: float = DEFAULT_MAX_DISPUTED_SHARE,
) -> Recalibration:
    """Refit ``router``'s auto-route threshold on the audited decisions it logged.

    Parameters
    ----------
    log : DecisionLog or PostgresLog
        An open decision log (:func:`hybridroute.records.open_log`) with audit outcomes.
    router : HybridRouter
        The incumbent: the router (bundle) that made the logged decisions.
    router_version : str, optional
        The logged version to read; default ``router.version``. It must be the router's
        own version: the logged confidences are its policy's.
    target, delta : float, optional
        The precision to certify and its error probability; default the incumbent
        policy's.
    since, until : str or datetime, optional
        The log window: decisions logged at or after ``since`` and before ``until`` (ISO
        8601; a time without zone is UTC).
    seed : int, default 0
        Seeds the thinning of audits drawn at varying rates.
    log_name : str, optional
        How the provenance names the log (e.g. its URL without a password).
    max_disputed_share : float, default 0.05
        Refuse when more than this share of the labelled audited decisions in the window
        is disputed (see :mod:`._labels`).

    Returns
    -------
    Recalibration

    Raises
    ------
    ValueError
        A version mismatch, a policy whose threshold cannot be refitted this way, a bad
        window, no labelled audit in the window, disputes over ``max_disputed_share``, or
        a version whose vocabulary the log does not know (register it).
    """
    max_disputed_share = check_max_disputed_share(max_disputed_share)
    version = _check_version(router, router_version)
    policy = router.policy
    fitter = _fitter(policy, target, delta)
    lo = _parse_time(since, "--since")
    hi = _parse_time(until, "--until")
    if lo is not None and hi is not None and lo >= hi:
        raise ValueError(f"--since ({since}) must be before --until ({until})")
    audited = _audited_rows(log, router, version, lo, hi)
    sample = _labelled_sample(log, router, version, audited, seed, max_disputed_share)
    labelled = sample.labelled
    scores = [float(row["confidence"]) for row, _ in labelled]
    correct = [label.correct(row) for row, label in labelled]
    fitter.fit(scores, correct)
    # the gold intents of the settled rows (a disputed row has none): the label mix
    settled = [label for _, label in labelled if not label.disputed]
    gold = [label.gold_intent for label in settled]
    mix = [str(g) for g in gold] if gold and all(g is not None for g in gold) else None
    fingerprint = _data_fingerprint(labelled, correct)
    window = _window(lo, hi, labelled)
    provenance = {
        "command": "hybridroute calibrate --from-log",
        "log": log_name if log_name is not None else getattr(log, "where", None),
        "router": router.name,
        "router_version": version,
        "incumbent_policy_sha256": policy.content_sha256,
        "incumbent_threshold": policy.thresholds["auto"],
        "window": window,
        "audit_rate_min": sample.pi_min,
        "thinning_seed": int(seed),
        "data_fingerprint": fingerprint,
        "certifies": CERTIFIES,
    }
    new = policy.with_refit_threshold(
        fitter,
        calibration_labels=mix,
        calibration_data={
            "population": f"audit sample of router {router.name!r} version {version!r}'s "
            "auto-routed decisions",
            # rows fitted on as wrong whose gold intent is disputed (not in label_counts)
            "disputed": len(labelled) - len(settled),
        },
        provenance=provenance,
    )
    report = _report(router.name, version, audited, sample, window, policy, new, fingerprint)
    return Recalibration(policy=new, report=report)


def _check_version(router: RouterLike, router_version: str | None) -> str:
    """The logged version to read: the router's own (its policy's scale), else refuse."""
    version = router.version if router_version is None else str(router_version)
    if version != router.version:
        raise ValueError(
            f"the router is version {router.version!r} but the log rows asked for are version "
            f"{version!r}; the logged confidences are on the scale of the policy that logged "
            "them, so recalibrate the bundle of that version"
        )
    return version


def _audited_rows(
    log: LogBase,
    router: RouterLike,
    version: str,
    lo: datetime | None,
    hi: datetime | None,
) -> dict[str, dict[str, Any]]:
    """The live audited decisions of ``router`` at ``version`` logged in ``[lo, hi)``, by id.

    Raises when there are none (the router was not routing with an audit rate).
    """
    audited: dict[str, dict[str, Any]] = {}
    for row in log.rows(router_version=version, role="live"):
        if (
            row.get("audited") != 1
            or row.get("router") != router.name
            or row.get("confidence") is None
        ):
            continue
        at = _parse_time(row["logged_at"], "logged_at")
        if (lo is not None and at is not None and at < lo) or (
            hi is not None and at is not None and at >= hi
        ):
            continue
        audited[row["decision_id"]] = row
    if not audited:
        raise ValueError(
            f"the log holds no audited decision of router {router.name!r} version {version!r}"
            + (" in the window" if lo or hi else "")
            + ": route with an audit rate (--audit-rate and HYBRIDROUTE_AUDIT_KEY) first"
        )
    return audited


@dataclass(frozen=True, slots=True)
class _Sample:
    """The calibration rows: labelled audited decisions, thinned to one rate, in log order."""

    labelled: list[tuple[dict[str, Any], Label]]
    pi_min: float
    thinned: int
    disputes: dict[str, Any]
    invalid_outcomes: dict[str, Any]


def _labelled_sample(
    log: LogBase,
    router: RouterLike,
    version: str,
    audited: dict[str, dict[str, Any]],
    seed: int,
    max_disputed_share: float,
) -> _Sample:
    """Settle the audits' labels, thin them to a uniform ``π_min`` sample, check disputes.

    Raises when no audited decision has a label yet, or when more than
    ``max_disputed_share`` of the labelled ones are disputed.
    """
    pi_min = min(float(r["audit_p"]) for r in audited.values())
    keys = {(router.name, version)}
    labels = settle_labels(
        log.outcomes(),
        audited,
        sources=("audit",),
        vocabularies=vocabularies_for(log, keys, [router]),
    )
    disputes = labels.disputes(max_disputed_share)
    labelled: list[tuple[dict[str, Any], Label]] = []
    thinned = 0
    for label in labels.ordered():
        row = audited[label.decision_id]
        if not _keep(row["decision_id"], pi_min / float(row["audit_p"]), seed):
            thinned += 1
            continue
        labelled.append((row, label))
    if not labelled:
        raise ValueError(
            f"none of the {len(audited)} audited decisions of version {version!r} has an "
            "audit outcome yet (hybridroute audits pending lists them)"
        )
    if disputes["exceeded"]:
        raise ValueError(
            f"{disputes['disputed']} of the {disputes['labelled']} labelled audited decisions "
            f"of version {version!r} are disputed (their audit labels disagree): a share of "
            f"{disputes['share']:.4f}, more than the {disputes['max_share']:g} allowed, so the "
            "labels cannot certify a threshold; settle them with outcomes of source "
            "adjudication (or allow more with --max-disputed-share)"
        )
    labelled.sort(key=lambda pair: pair[0]["seq"])
    return _Sample(labelled, pi_min, thinned, disputes, labels.invalid_report())


def _data_fingerprint(labelled: list[tuple[dict[str, Any], Label]], correct: list[bool]) -> str:
    """SHA-256 of the rows the threshold is fitted on: (decision id, confidence, correct)."""
    rows_doc = [
        [row["decision_id"], float(row["confidence"]), bool(c)]
        for (row, _), c in zip(labelled, correct, strict=True)
    ]
    return hashlib.sha256(canonical_json(rows_doc).encode()).hexdigest()


def _window(
    lo: datetime | None, hi: datetime | None, labelled: list[tuple[dict[str, Any], Label]]
) -> dict[str, Any]:
    """The window asked for and the first / last row used (``seq`` and ``logged_at``)."""
    first, last = labelled[0][0], labelled[-1][0]
    return {
        "since": None if lo is None else lo.isoformat(),
        "until": None if hi is None else hi.isoformat(),
        "first_seq": int(first["seq"]),
        "last_seq": int(last["seq"]),
        "first_logged_at": first["logged_at"],
        "last_logged_at": last["logged_at"],
    }


def _report(
    router_name: str,
    version: str,
    audited: dict[str, dict[str, Any]],
    sample: _Sample,
    window: dict[str, Any],
    old: Policy,
    new: Policy,
    fingerprint: str,
) -> dict[str, Any]:
    """The recalibration's report: counts, disputes, window, both thresholds, certificate."""
    g = new.guarantee
    disputes = sample.disputes
    return {
        "router": router_name,
        "router_version": version,
        "audited": len(audited),
        "labelled": disputes["labelled"],
        "pending": len(audited) - disputes["labelled"],
        "thinned": sample.thinned,
        "disputes": disputes,
        "invalid_outcomes": sample.invalid_outcomes,
        "calibration_size": len(sample.labelled),
        "window": window,
        "incumbent_threshold": old.thresholds["auto"],
        "threshold": new.thresholds["auto"],
        "certified": g["certified"],
        "target": g["target"],
        "delta": g["delta"],
        "bound": g["bound"],
        "reason": g["reason"],
        "retained_share": new.to_dict()["expected"]["coverage"],
        "data_fingerprint": fingerprint,
        "certifies": CERTIFIES,
    }
