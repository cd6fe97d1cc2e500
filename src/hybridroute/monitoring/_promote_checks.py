"""The four checks of the promotion gate (see :mod:`._promote` for what each decides).

Each check takes the incumbent's logged inputs with the candidate's decision on each
(:class:`_Item`) and returns one :class:`GateCheck`: its state, a one-line reason with the
figures that decided, and everything measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._canonical import hash_canonical
from ..exceptions import UserInputError
from ._labels import Label, Labels, settle_labels, vocabularies_for

if TYPE_CHECKING:
    from ..records._logbase import LogBase
    from ._routing import RouterLike

__all__ = ["CHECK_STATES", "GateCheck", "hypergeometric_bounds", "rules_sha256"]

#: The states of one check; ``pass`` and ``skipped`` let the gate pass.
CHECK_STATES = ("pass", "fail", "insufficient", "skipped")

_AUTO = "model"  # the stage of an auto-routed decision: what the audit samples
_RULE = "rule"
_ASPECTS = ("destination", "stage", "reason_code")


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:.4f}"


# --------------------------------------------------------------------------- one check


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One check of the promotion gate.

    Attributes
    ----------
    name : str
        One of :data:`PROMOTION_CHECKS`.
    status : str
        ``pass``, ``fail``, ``insufficient`` (the evidence cannot decide: the gate fails) or
        ``skipped`` (not asked for, e.g. no labelled set).
    reason : str
        One line saying why, with the figures that decided.
    figures : mapping
        Everything measured (plain JSON types).
    """

    name: str
    status: str
    reason: str
    figures: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in CHECK_STATES:
            raise ValueError(f"status must be one of {CHECK_STATES}, got {self.status!r}")
        object.__setattr__(self, "figures", MappingProxyType(dict(self.figures)))

    @property
    def passed(self) -> bool:
        """Whether this check lets the gate pass (``pass`` or ``skipped``)."""
        return self.status in ("pass", "skipped")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {
            "status": self.status,
            "passed": self.passed,
            "reason": self.reason,
            **_plain(dict(self.figures)),
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- the candidate's decisions


@dataclass(slots=True)
class _Item:
    """One live input of the incumbent and the candidate's decision on it."""

    row: dict[str, Any]
    cand: dict[str, Any] | None = None  # stage, selected_destination, reason_code, label, rule_id
    source: str | None = None  # "shadow" | "replay"
    error: str | None = None


def _view(d: Any) -> dict[str, Any]:
    """The fields of a decision (a Decision or a record) the gate compares."""
    get = d.get if isinstance(d, Mapping) else lambda k: getattr(d, k)
    return {
        "stage": str(get("stage")),
        "selected_destination": get("selected_destination"),
        "reason_code": str(get("reason_code")),
        "label": get("label"),
        "rule_id": get("rule_id"),
    }


def _key(d: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (d["selected_destination"], d["stage"], d["reason_code"])


def _read_by_rules(router: RouterLike) -> set[str]:
    return {f for rule in getattr(router.rules, "rules", ()) for f in rule.facts_read()}


def _hashed_reason(record: Mapping[str, Any], read_by_rules: set[str]) -> str | None:
    hashed = set((record.get("detail") or {}).get("hashed_facts") or ()) & read_by_rules
    if not hashed:
        return None
    return f"sensitive fact(s) {', '.join(sorted(hashed))} are stored hashed and read by a rule"


def _live_key(row: Mapping[str, Any]) -> Any:
    # the service shadows a request without a request id under the live decision's id
    return row["item_id"] if row["item_id"] is not None else row["decision_id"]


# --------------------------------------------------------------------------- check 1: disagreement


def _tally(items: Sequence[_Item]) -> dict[str, Any]:
    """Disagreement of the candidate with the incumbent, by aspect and by the incumbent's
    stage and reason code (the shape of :meth:`ShadowComparison.to_dict`)."""
    n = 0
    disagree = dict.fromkeys(_ASPECTS, 0)
    by: dict[str, dict[str, dict[str, int]]] = {"stage": {}, "reason_code": {}}
    for it in items:
        if it.cand is None:
            continue
        a = _view(it.row["record"])
        differs = {
            "destination": a["selected_destination"] != it.cand["selected_destination"],
            "stage": a["stage"] != it.cand["stage"],
            "reason_code": a["reason_code"] != it.cand["reason_code"],
        }
        n += 1
        for aspect, d in differs.items():
            disagree[aspect] += d
        for what in ("stage", "reason_code"):
            row = by[what].setdefault(str(a[what]), {"n": 0, **dict.fromkeys(_ASPECTS, 0)})
            row["n"] += 1
            for aspect, d in differs.items():
                row[aspect] += d
    return {
        "n": n,
        "disagree": disagree,
        "disagreement_rate": {a: _r(disagree[a] / n) if n else None for a in _ASPECTS},
        "by_stage": dict(sorted(by["stage"].items())),
        "by_reason_code": dict(sorted(by["reason_code"].items())),
    }


def _disagreement_check(
    log: LogBase,
    items: Sequence[_Item],
    incumbent: RouterLike,
    candidate: RouterLike,
    shadows: Mapping[Any, Mapping[str, Any]],
    *,
    max_disagreement: float | None,
    max_listed: int,
) -> GateCheck:
    from ..records import shadow_disagreement

    shadow_table = None
    if shadows:
        report = shadow_disagreement(
            log, live_version=incumbent.version, shadow_version=candidate.version
        )
        for comp in report.comparisons:
            if (comp.live_router, comp.shadow_router) == (incumbent.name, candidate.name):
                shadow_table = comp.to_dict()
    replayed = [it for it in items if it.source == "replay"]
    overall = _tally(items)
    # the candidate bundle must reproduce its own shadow decisions (replayed from their
    # recorded classifier output: no classifier call); otherwise it is another bundle
    checked = mismatched = unverifiable = 0
    examples: list[dict[str, Any]] = []
    read_by_rules = _read_by_rules(candidate)
    for it in items:
        cand = it.cand
        if it.source != "shadow" or cand is None:
            continue
        rec = shadows[_live_key(it.row)]
        if _hashed_reason(rec, read_by_rules) is not None:
            unverifiable += 1
            continue
        try:
            again = _view(candidate.replay(rec))
        except UserInputError:
            unverifiable += 1
            continue
        checked += 1
        if _key(again) != _key(cand):
            mismatched += 1
            if len(examples) < max_listed:
                examples.append(
                    {
                        "decision_id": it.row["decision_id"],
                        "request_id": it.row["item_id"],
                        "shadow": {"destination": cand["selected_destination"]},
                        "replayed": {"destination": again["selected_destination"]},
                    }
                )
    sources = sorted({it.source for it in items if it.source})
    figures = {
        "source": "+".join(sources) if sources else None,
        **overall,
        "shadow": shadow_table,
        "replay": _tally(replayed) if replayed else None,
        "shadow_reproduced": {
            "checked": checked,
            "mismatches": mismatched,
            "unverifiable": unverifiable,
            "examples": examples,
        },
        "max_disagreement": max_disagreement,
    }
    rate = overall["disagreement_rate"]["destination"]
    where = " and ".join(sources) if sources else "no decision"
    said = (
        f"{overall['n']} input(s) compared ({where}): destination differs on "
        f"{overall['disagree']['destination']} ({_num(rate)}), stage on "
        f"{overall['disagree']['stage']}, reason code on {overall['disagree']['reason_code']}"
    )
    if mismatched:
        return GateCheck(
            "disagreement",
            "fail",
            f"the candidate bundle does not reproduce {mismatched} of its {checked} logged "
            "shadow decisions: it is not the bundle that ran as shadow",
            figures,
        )
    if max_disagreement is not None and rate is not None and rate > max_disagreement:
        return GateCheck(
            "disagreement", "fail", f"{said}; more than the {max_disagreement:g} allowed", figures
        )
    return GateCheck("disagreement", "pass", said, figures)


# --------------------------------------------------------------------------- check 2: precision


def _smallest(ok: Any, lo: int, hi: int) -> int:
    """The smallest integer in [lo, hi] where the monotone ``ok`` holds (it holds at hi)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _largest(ok: Any, lo: int, hi: int) -> int:
    """The largest integer in [lo, hi] where the monotone ``ok`` holds (it holds at lo)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def hypergeometric_bounds(
    successes: int, sample: int, population: int, delta: float
) -> tuple[int, int]:
    """Exact one-sided bounds on the successes in a finite population from a sample of it.

    ``sample`` items drawn without replacement from ``population`` hold ``successes``; the
    population's count ``K`` is then at least the lower bound with probability at least
    ``1 - delta``, and at most the upper bound with probability at least ``1 - delta``
    (the smallest ``K`` with ``P(X >= successes | K) > delta``, the largest with
    ``P(X <= successes | K) > delta``, ``X`` hypergeometric).

    Parameters
    ----------
    successes, sample, population : int
        ``0 <= successes <= sample <= population``.
    delta : float
        In (0, 1).

    Returns
    -------
    tuple of int
        ``(lower, upper)``, with ``successes <= lower <= upper <= population - (sample -
        successes)``.
    """
    from scipy.stats import hypergeom

    if not 0 <= successes <= sample <= population:
        raise ValueError(
            f"need 0 <= successes <= sample <= population, got {successes}, {sample}, {population}"
        )
    lo, hi = successes, population - (sample - successes)
    # P(X >= s | K) grows with K: the smallest K where it exceeds delta
    lower = _smallest(
        lambda k: float(hypergeom.sf(successes - 1, population, k, sample)) > delta, lo, hi
    )
    # P(X <= s | K) falls with K: the largest K where it exceeds delta
    upper = _largest(
        lambda k: float(hypergeom.cdf(successes, population, k, sample)) > delta, lo, hi
    )
    return int(lower), int(upper)


@dataclass(slots=True)
class _Group:
    n: int = 0  # inputs
    audited: int = 0
    correct: int = 0
    pending: int = 0  # audited, no audit outcome yet
    disputed: int = 0  # audited, its audit labels disagree (wrong for lower, right for upper)

    def to_dict(self) -> dict[str, int]:
        return {
            "n": self.n,
            "audited": self.audited,
            "correct": self.correct,
            "pending": self.pending,
            "disputed": self.disputed,
        }


def _settled(
    log: LogBase, rows: Sequence[Mapping[str, Any]], routers: Sequence[RouterLike]
) -> Labels:
    """The settled labels (:mod:`._labels`) of the incumbent's audited decisions (from
    their ``audit`` outcomes) and of the decisions it did not auto-route (from their
    ``human_review`` outcomes); ``adjudication`` settles either."""
    audited = {r["decision_id"]: r for r in rows if r["stage"] == _AUTO and r.get("audited") == 1}
    deferred = {r["decision_id"]: r for r in rows if r["stage"] != _AUTO}
    keys = {(str(r["router"]), str(r["router_version"])) for r in rows}
    vocabularies = vocabularies_for(log, keys, routers)
    outcomes = log.outcomes()
    a = settle_labels(outcomes, audited, sources=("audit",), vocabularies=vocabularies)
    b = settle_labels(outcomes, deferred, sources=("human_review",), vocabularies=vocabularies)
    return Labels({**a.by_decision, **b.by_decision}, a.invalid + b.invalid)


def _bounds(
    groups: Mapping[float | None, _Group],
    deferred: Mapping[str, int],
    unknown: int,
    delta: float,
) -> dict[str, Any]:
    """Estimate and exact bounds of the precision over the auto-routed inputs (module doc)."""
    sampled = [g for p, g in groups.items() if p and g.audited]
    share = delta / len(sampled) if sampled else delta
    low = high = 0
    est_num = est_den = 0.0
    for p, g in groups.items():
        if p and g.audited:
            # pending and disputed audits count as wrong for the lower bound, right for
            # the upper one
            k_low = hypergeometric_bounds(g.correct, g.audited, g.n, share)[0]
            right = g.correct + g.pending + g.disputed
            k_high = hypergeometric_bounds(right, g.audited, g.n, share)[1]
        else:
            k_low, k_high = 0, g.n  # never audited: anything is possible
        low += k_low
        high += k_high
        labelled = g.audited - g.pending
        if labelled:
            est_num += g.n * g.correct / labelled
            est_den += g.n
    low += deferred["correct"]
    high += deferred["correct"] + deferred["unlabelled"] + deferred["disputed"] + unknown
    est_num += deferred["correct"]
    est_den += deferred["labelled"]
    m = sum(g.n for g in groups.values()) + deferred["n"] + unknown
    return {
        "estimate": _r(est_num / est_den) if est_den else None,
        "lower": _r(low / m) if m else None,
        "upper": _r(high / m) if m else None,
        "delta_per_audit_rate": _r(share),
    }


def _strata(
    items: Sequence[_Item], decision_of: Any, labels: Labels
) -> tuple[dict[float | None, _Group], dict[str, int]]:
    groups: dict[float | None, _Group] = {}
    deferred = {"n": 0, "labelled": 0, "correct": 0, "unlabelled": 0, "disputed": 0}
    for it in items:
        d = decision_of(it)
        if d is None or d["stage"] != _AUTO:
            continue
        row = it.row
        if row["stage"] == _AUTO:
            p = row.get("audit_p")
            g = groups.setdefault(None if p is None else float(p), _Group())
            g.n += 1
            if row.get("audited") == 1:
                g.audited += 1
                label: Label | None = labels.get(row["decision_id"])
                if label is None:
                    g.pending += 1
                elif label.disputed:
                    g.disputed += 1
                else:
                    g.correct += label.correct(d)
        else:
            deferred["n"] += 1
            label = labels.get(row["decision_id"])
            if label is None:
                deferred["unlabelled"] += 1
            else:
                deferred["labelled"] += 1
                deferred["disputed"] += label.disputed
                deferred["correct"] += label.correct(d)
    return groups, deferred


def _coverage(m: int, unknown: int, n: int, delta: float) -> dict[str, Any]:
    from ..calibration import clopper_pearson_lower, clopper_pearson_upper

    return {
        "coverage": _r(m / (n - unknown)) if n - unknown else None,
        "coverage_window": [_r(m / n), _r((m + unknown) / n)] if n else None,
        "coverage_bounds": [
            _r(clopper_pearson_lower(m, n, delta)),
            _r(clopper_pearson_upper(m + unknown, n, delta)),
        ]
        if n
        else None,
    }


def _precision_check(
    items: Sequence[_Item],
    labels: Labels,
    *,
    target: float,
    delta: float,
    target_note: str,
    max_disputed_share: float,
    candidate_guarantee: Mapping[str, Any],
    calibration_window: Mapping[str, Any] | None,
) -> GateCheck:
    n = len(items)
    unknown = sum(1 for it in items if it.cand is None)
    groups, deferred = _strata(items, lambda it: it.cand, labels)
    m = sum(g.n for g in groups.values()) + deferred["n"]
    bounds = _bounds(groups, deferred, unknown, delta)
    a_groups, a_deferred = _strata(items, lambda it: _view(it.row["record"]), labels)
    disputes = labels.disputes(max_disputed_share, [it.row["decision_id"] for it in items])
    a_m = sum(g.n for g in a_groups.values())
    incumbent = {
        "auto_routed": a_m,
        **_bounds(a_groups, a_deferred, 0, delta),
        **_coverage(a_m, 0, n, delta),
    }
    pending = sum(g.pending for g in groups.values())
    auto = _Group(
        n=sum(g.n for g in groups.values()),
        audited=sum(g.audited for g in groups.values()),
        correct=sum(g.correct for g in groups.values()),
        pending=pending,
        disputed=sum(g.disputed for g in groups.values()),
    )
    figures = {
        "method": "exact hypergeometric bounds per audit rate (Bonferroni over rates) over "
        "the logged window; unlabelled and disputed inputs count as wrong (lower) and right "
        "(upper)",
        "target": target,
        "target_source": target_note,
        "delta": delta,
        **bounds,
        "inputs": n,
        "unreplayable": unknown,
        "candidate_auto_routed": m,
        **_coverage(m, unknown, n, delta),
        "from_incumbent_auto": {
            **auto.to_dict(),
            "by_audit_rate": [
                {"audit_p": p, **g.to_dict()}
                for p, g in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0.0))
            ],
        },
        "from_incumbent_deferred": deferred,
        "unlabelled": deferred["unlabelled"] + pending + unknown,
        "disputes": disputes,
        "invalid_outcomes": labels.invalid_report(),
        "incumbent": incumbent,
        "candidate_policy": dict(candidate_guarantee),
        "calibration_window": None if calibration_window is None else dict(calibration_window),
    }
    lower, upper = bounds["lower"], bounds["upper"]
    if n == 0:
        return GateCheck(
            "precision",
            "insufficient",
            "every logged input of the incumbent lies in the window the candidate was "
            "calibrated on: judge it on audits logged after that window",
            figures,
        )
    if m + unknown == 0:
        return GateCheck(
            "precision",
            "insufficient",
            f"the candidate auto-routes none of the {n} logged input(s): no precision to certify",
            figures,
        )
    said = (
        f"candidate auto-route precision {_num(bounds['estimate'])}, bounds "
        f"[{_num(lower)}, {_num(upper)}] at delta {delta:g}, target {target:g}"
    )
    if calibration_window is not None and calibration_window.get("excluded"):
        said += (
            f" (on the {n} logged input(s) outside its calibration window, seq "
            f"{calibration_window.get('first_seq')}..{calibration_window.get('last_seq')})"
        )
    if disputes["exceeded"]:
        return GateCheck(
            "precision",
            "fail",
            f"{said}; but {disputes['disputed']} of the {disputes['labelled']} labelled "
            f"input(s) are disputed (their labels disagree), more than the "
            f"{disputes['max_share']:g} allowed: settle them with outcomes of source "
            "adjudication",
            figures,
        )
    if lower is not None and lower >= target:
        return GateCheck("precision", "pass", f"{said}: the lower bound reaches it", figures)
    if upper is not None and upper < target:
        return GateCheck("precision", "fail", f"{said}: below target", figures)
    gaps = [
        f"{count} {what}"
        for count, what in (
            (
                deferred["unlabelled"],
                "the incumbent did not auto-route and no human_review outcome labels",
            ),
            (pending, "audited but still without an audit outcome"),
            (auto.disputed + deferred["disputed"], "disputed (their labels disagree)"),
            (unknown, "could not be replayed"),
        )
        if count
    ]
    sampled = f"{auto.audited} of the {auto.n} that both auto-route were audited"
    return GateCheck(
        "precision",
        "insufficient",
        f"{said}: insufficient evidence (of its {m + unknown} auto-routed input(s): "
        f"{'; '.join([*gaps, sampled])})",
        figures,
    )


# --------------------------------------------------------------------------- check 3: paired test


def _paired_check(
    incumbent: RouterLike,
    candidate: RouterLike,
    dataset: Any,
    *,
    alpha: float,
    n_boot: int,
    seed: int,
) -> GateCheck:
    if dataset is None:
        return GateCheck("paired_test", "skipped", "no labelled set given", {})
    from ..evaluation import compare, evaluate_router

    ea = evaluate_router(incumbent, dataset, n_boot=n_boot, seed=seed)
    eb = evaluate_router(candidate, dataset, n_boot=n_boot, seed=seed)
    key = "next_step_correct" if any(r.get("gold_next_step") for r in ea.rows) else "correct"
    cmp = compare(ea, eb, key=key, seed=seed)
    mc = cmp["mcnemar"]
    figures = {
        "dataset": getattr(dataset, "name", None),
        "dataset_fingerprint": getattr(dataset, "fingerprint", None),
        "rows": len(ea.rows),
        "n": cmp["n"],
        "key": key,
        "alpha": alpha,
        "accuracy_incumbent": _r(cmp["accuracy_a"]),
        "accuracy_candidate": _r(cmp["accuracy_b"]),
        "mcnemar": mc,
        "paired_bootstrap": cmp["paired_bootstrap"],
        "incumbent": {k: ea.get(k) for k in ("coverage", "selective_precision", "accuracy")},
        "candidate": {k: eb.get(k) for k in ("coverage", "selective_precision", "accuracy")},
    }
    what = "next step" if key == "next_step_correct" else "intent"
    if cmp["n"] == 0:
        return GateCheck(
            "paired_test", "insufficient", f"no row of the labelled set has a gold {what}", figures
        )
    said = (
        f"{cmp['n']} rows ({what}): accuracy incumbent {_num(cmp['accuracy_a'])}, candidate "
        f"{_num(cmp['accuracy_b'])}; McNemar p={mc['p_value']:.4g} ({mc['only_a_correct']} "
        f"only incumbent right, {mc['only_b_correct']} only candidate); bootstrap "
        f"incumbent - candidate {cmp['paired_bootstrap']['accuracy_difference']} "
        f"{cmp['paired_bootstrap']['ci']}"
    )
    if mc["p_value"] < alpha and mc["only_a_correct"] > mc["only_b_correct"]:
        return GateCheck(
            "paired_test", "fail", f"candidate significantly worse at {alpha:g}: {said}", figures
        )
    return GateCheck("paired_test", "pass", said, figures)


# --------------------------------------------------------------------------- check 4: rules


def rules_sha256(router: RouterLike) -> str:
    """The canonical hash of a router's rule set (its rules-file document)."""
    return hash_canonical(router.rules.to_dict())


def _rules_check(
    items: Sequence[_Item],
    incumbent: RouterLike,
    candidate: RouterLike,
    *,
    allow_rule_changes: bool,
    max_listed: int,
    only_rules_changed: bool = False,
    where: str = "the decision log",
) -> GateCheck:
    sha_a, sha_b = rules_sha256(incumbent), rules_sha256(candidate)
    changed_rules = sha_a != sha_b
    impact = None
    if changed_rules and only_rules_changed:
        # nothing but the rules differs: the comparison is `hybridroute rules diff` over the
        # incumbent's logged inputs (the same function), so both report the same figures
        impact = incumbent.rules.diff(
            candidate.rules,
            [it.row for it in items],
            max_examples=max_listed,
            source=f"log {where} (version {incumbent.version})",
        )
    rule_decisions = compared = unverifiable = 0
    kinds = {"incumbent_rule_overturned": 0, "candidate_rule_added": 0}
    examples: list[dict[str, Any]] = []
    for it in items:
        a = _view(it.row["record"])
        b = it.cand
        if a["stage"] == _RULE:
            rule_decisions += 1
            if b is None:
                unverifiable += 1
                continue
            compared += 1
        elif b is None or b["stage"] != _RULE:
            continue
        if _key(a) == _key(b):
            continue
        kind = "incumbent_rule_overturned" if a["stage"] == _RULE else "candidate_rule_added"
        kinds[kind] += 1
        if len(examples) < max_listed:
            examples.append(
                {
                    "decision_id": it.row["decision_id"],
                    "request_id": it.row["item_id"],
                    "kind": kind,
                    "source": it.source,
                    "incumbent": {
                        "stage": a["stage"],
                        "destination": a["selected_destination"],
                        "reason_code": a["reason_code"],
                        "rule_id": a["rule_id"],
                    },
                    "candidate": {
                        "stage": b["stage"],
                        "destination": b["selected_destination"],
                        "reason_code": b["reason_code"],
                        "rule_id": b["rule_id"],
                    },
                }
            )
    changed = sum(kinds.values())
    if impact is not None:
        changed, unverifiable = impact["changed"], impact["unreplayable"]
    figures = {
        "rules_changed": changed_rules,
        "only_rules_changed": bool(changed_rules and only_rules_changed),
        "incumbent_rules_sha256": sha_a,
        "candidate_rules_sha256": sha_b,
        "incumbent_rule_decisions": rule_decisions,
        "compared": compared,
        "unverifiable": unverifiable,
        "changed": changed,
        "changed_by_kind": kinds,
        "examples": examples,
        "allow_rule_changes": allow_rule_changes,
        "impact": None if impact is None else dict(impact),
    }
    if not changed_rules:
        if changed:
            return GateCheck(
                "rules",
                "fail",
                f"the rules are unchanged, yet {changed} decision(s) differ under the candidate "
                "(a replay defect, or logged facts that no longer replay)",
                figures,
            )
        note = f"; {unverifiable} could not be replayed" if unverifiable else ""
        return GateCheck(
            "rules",
            "pass",
            f"rules unchanged; {compared} rule-stage decision(s) identical{note}",
            figures,
        )
    if unverifiable:
        of = (
            f"the incumbent's {impact['inputs']} logged input(s)"
            if impact is not None
            else f"the incumbent's {rule_decisions} rule-stage decision(s)"
        )
        return GateCheck(
            "rules",
            "insufficient",
            f"rules changed and {unverifiable} of {of} could not be replayed (run the "
            "candidate as a shadow to check them)",
            figures,
        )
    if not changed:
        what = (
            f"{impact['compared']} logged input(s) (the rules diff)"
            if impact is not None
            else f"{compared} rule-stage decision(s)"
        )
        return GateCheck("rules", "pass", f"rules changed, but none of the {what} differs", figures)
    said = (
        f"rules changed: {changed} decisions differ ({kinds['incumbent_rule_overturned']} of "
        f"the incumbent's rule decisions overturned, {kinds['candidate_rule_added']} new rule "
        "decisions)"
    )
    if impact is not None:
        said += (
            f"; only the rules changed, so by the rules diff: {impact['changed']} of "
            f"{impact['compared']} logged inputs ({_num(impact['changed_share'])} of traffic), "
            f"{impact['refused_by_new']} refused by the new rules"
        )
    if allow_rule_changes:
        return GateCheck("rules", "pass", f"{said}; accepted (allow_rule_changes)", figures)
    return GateCheck(
        "rules", "fail", f"{said}; accept them explicitly with --allow-rule-changes", figures
    )
