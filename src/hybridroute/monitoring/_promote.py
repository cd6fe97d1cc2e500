"""The promotion gate: may a candidate router version replace the incumbent?

:func:`promotion_gate` reads a decision log in which the incumbent ``A`` routed live traffic
(with an audit rate, so that a random sample of its auto-routed decisions carries audit
outcomes) and judges a candidate ``B`` on four checks. The gate passes only when every check
passes; a check that cannot decide says ``insufficient`` and fails rather than guess.

1. **disagreement** -- how often ``B`` decides otherwise than ``A`` did, by aspect
   (destination, stage, reason code) and by ``A``'s stage and reason code. From the log's
   shadow decisions when ``B`` ran as a shadow (:func:`hybridroute.records.shadow_disagreement`),
   else by replaying ``B`` on ``A``'s logged inputs; the report says which. ``B``'s shadow
   decisions are also replayed through ``B`` itself: a bundle that does not reproduce them is
   not the one that ran as shadow, and fails. Disagreement alone fails only above
   ``max_disagreement`` (its harm is what the precision check measures).
2. **precision** -- ``B``'s auto-route precision (decisions of stage ``model``, the stage
   audits sample) on the logged window, with exact bounds. Every input of ``A``'s window gets
   ``B``'s decision (its shadow decision, else a replay), so which inputs ``B`` auto-routes is
   known exactly; what is unknown is whether each is correct. They fall in two groups:

   * inputs ``A`` auto-routed too: the audit selected each with its recorded inclusion
     probability ``π`` (``audit_p``) by a keyed hash, independently of its correctness, so
     the audited ones are a random sample of the group. Per audit rate, the number of correct
     inputs among the group's ``N`` gets the exact hypergeometric bounds of the sample's
     count (a finite population, sampled without replacement), each at ``δ / G`` for ``G``
     audit rates (Bonferroni); an audited input still without an audit outcome counts as
     wrong for the lower bound and right for the upper one;
   * inputs ``A`` did not auto-route (deferred, or decided by a rule that ``B`` changed):
     never audited. Only a ``human_review`` outcome labels them, and it is taken as it is;
     one without counts as wrong for the lower bound and right for the upper one.

   Each decision's label is settled by the rule the monitor and recalibration share
   (:mod:`._labels`): outcomes that disagree make a decision *disputed* (counted as wrong
   for the lower bound and right for the upper one, like a pending audit) until an outcome
   of source ``adjudication`` settles it; outcomes naming a label or destination the
   incumbent's version does not have, or observed before the decision, are left out and
   reported. When more than ``max_disputed_share`` of the labelled inputs are disputed,
   the check fails: the labels themselves are in question.

   Inputs that cannot be replayed (sensitive facts stored hashed and read by a rule) count
   as auto-routed and wrong (lower) or right (upper). The bounds are of the precision over
   the logged window, each holding with probability at least ``1 - δ`` over the audit draw,
   with no assumption about which deferred items were reviewed; like any certificate they
   speak for traffic like the window. ``B`` passes when the lower bound reaches the target,
   fails ``below target`` when the upper bound is under it, and is ``insufficient`` in
   between. The point estimate leaves unlabelled inputs out (it assumes they are like the
   labelled ones; the bounds do not). Coverage (the share ``B`` auto-routes) is exact on the
   window, with Clopper-Pearson bounds for traffic like it. The target is the higher of the
   two policies' targets (a candidate cannot pass by promising less) unless given. A
   candidate refitted from this log (``hybridroute calibrate --from-log``: its policy's
   provenance names this log, the incumbent and the ``seq`` window it read) is judged only
   on the decisions outside that window, unless ``include_calibration_audits``: its
   threshold was chosen on those audits, and they would flatter it.
3. **paired_test** (with a labelled set) -- both routers route every row; per-item
   correctness (the gold next step where the set has one, else the intent), McNemar's exact
   test and the paired bootstrap (:func:`hybridroute.evaluation.compare`). Fails when ``B``
   is significantly worse at level ``alpha``.
4. **rules** -- every rule-stage decision ``A`` logged must be identical under ``B``
   (destination, stage, reason code) unless ``B``'s rules file differs from ``A``'s (the
   canonical hash of the rule set). When it differs, the decisions that change (``A``'s rule
   decisions ``B`` overturns, and inputs ``B``'s rules now decide) are counted and listed;
   they pass only with ``allow_rule_changes``. With identical rules any difference is a
   defect, and fails. When *only* the rules changed (the same model, policy, label map,
   exits and redaction), the comparison is ``hybridroute rules diff`` itself
   (:meth:`RuleSet.diff` over the incumbent's logged inputs): its counts decide, and its
   groups by (old destination, new destination, rule) and share of traffic are reported
   (``figures["impact"]``), so the gate and the diff a reviewer ran show the same figures.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..exceptions import InputError, UserInputError
from ._labels import DEFAULT_MAX_DISPUTED_SHARE
from ._promote_checks import (
    _ASPECTS,
    GateCheck,
    _disagreement_check,
    _hashed_reason,
    _Item,
    _live_key,
    _num,
    _paired_check,
    _precision_check,
    _read_by_rules,
    _rules_check,
    _settled,
    _view,
)

if TYPE_CHECKING:
    from ..records._logbase import LogBase
    from ._routing import RouterLike

__all__ = ["PROMOTION_CHECKS", "GateCheck", "PromotionReport", "promotion_gate"]

#: The checks of the gate, in the order they are reported.
PROMOTION_CHECKS = ("disagreement", "precision", "paired_test", "rules")

_REPLAY_CHUNK = 256


@dataclass(frozen=True, slots=True)
class PromotionReport:
    """What :func:`promotion_gate` decided, check by check.

    Attributes
    ----------
    incumbent, candidate : mapping
        ``{"name", "version"}`` of each router.
    log : str
        The decision log read (its name, without a password).
    checks : tuple of GateCheck
        In the order of :data:`PROMOTION_CHECKS`.
    decisions : mapping
        How the candidate's decision on each of the incumbent's logged inputs was obtained:
        ``inputs``, ``from_shadow``, ``from_replay``, ``unreplayable``, and ``rescored``
        (whether a replay scored the text again: the candidate's model differs).
    """

    incumbent: Mapping[str, str]
    candidate: Mapping[str, str]
    log: str
    checks: tuple[GateCheck, ...]
    decisions: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether the candidate may replace the incumbent: every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def reasons(self) -> tuple[str, ...]:
        """``"check: reason"`` of every check that did not pass (empty when the gate passed)."""
        return tuple(f"{c.name}: {c.reason}" for c in self.checks if not c.passed)

    def check(self, name: str) -> GateCheck:
        """The check called ``name`` (one of :data:`PROMOTION_CHECKS`)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: ``passed``, ``status``, ``reasons``, the routers, the log, how the
        candidate's decisions were obtained, and each check under ``checks``."""
        return {
            "passed": self.passed,
            "status": "pass" if self.passed else "fail",
            "reasons": list(self.reasons),
            "incumbent": dict(self.incumbent),
            "candidate": dict(self.candidate),
            "log": self.log,
            "decisions": dict(self.decisions),
            "checks": {c.name: c.to_dict() for c in self.checks},
        }

    def metrics(self) -> dict[str, float]:
        """The headline numbers, flat (for MLflow); absent ones left out."""
        out: dict[str, Any] = {"passed": 1.0 if self.passed else 0.0}
        for c in self.checks:
            out[f"{c.name}_passed"] = 1.0 if c.passed else 0.0
        f = {c.name: c.figures for c in self.checks}
        d = f.get("disagreement", {})
        out["disagreement_n"] = d.get("n")
        for aspect in _ASPECTS:
            out[f"disagreement_{aspect}_rate"] = (d.get("disagreement_rate") or {}).get(aspect)
        p = f.get("precision", {})
        for k in ("estimate", "lower", "upper", "target"):
            out[f"precision_{k}"] = p.get(k)
        out["coverage_candidate"] = p.get("coverage")
        out["coverage_incumbent"] = (p.get("incumbent") or {}).get("coverage")
        out["precision_incumbent_estimate"] = (p.get("incumbent") or {}).get("estimate")
        out["unlabelled_auto_routed"] = p.get("unlabelled")
        t = f.get("paired_test", {})
        out["paired_n"] = t.get("n")
        out["accuracy_incumbent"] = t.get("accuracy_incumbent")
        out["accuracy_candidate"] = t.get("accuracy_candidate")
        out["mcnemar_p_value"] = (t.get("mcnemar") or {}).get("p_value")
        out["accuracy_difference"] = (t.get("paired_bootstrap") or {}).get("accuracy_difference")
        r = f.get("rules", {})
        out["rule_decisions_changed"] = r.get("changed")
        return {
            k: float(v)
            for k, v in out.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }

    def summary_lines(self) -> list[str]:
        """A few lines for the terminal: the verdict, then each check and its figures."""
        a, b = self.incumbent, self.candidate
        lines = [
            f"promotion gate: {'PASS' if self.passed else 'FAIL'} -- candidate {b['name']} "
            f"{b['version']} vs incumbent {a['name']} {a['version']} ({self.log})",
        ]
        d = self.decisions
        lines.append(
            f"  candidate decisions on {d.get('inputs', 0)} logged input(s): "
            f"{d.get('from_shadow', 0)} from its shadow decisions, {d.get('from_replay', 0)} "
            f"replayed ({'rescored' if d.get('rescored') else 'recorded classifier output'}), "
            f"{d.get('unreplayable', 0)} not replayable"
        )
        for c in self.checks:
            lines.append(f"  [{c.status}] {c.name}: {c.reason}")
            lines.extend(f"      {x}" for x in _detail_lines(c))
        return lines


def _detail_lines(c: GateCheck) -> list[str]:
    f = c.figures
    out: list[str] = []
    if c.name == "disagreement":
        for stage, row in (f.get("by_stage") or {}).items():
            out.append(
                f"incumbent stage {stage}: n={row['n']}, destination {row['destination']}, "
                f"stage {row['stage']}, reason code {row['reason_code']} differ"
            )
    elif c.name == "precision" and f.get("candidate_auto_routed") is not None:
        inc = f.get("incumbent") or {}
        out.append(
            f"coverage: candidate {_num(f.get('coverage'))}, incumbent "
            f"{_num(inc.get('coverage'))}; incumbent precision {_num(inc.get('estimate'))} "
            f"[{_num(inc.get('lower'))}, {_num(inc.get('upper'))}]"
        )
        out.append(
            f"candidate auto-routes {f['candidate_auto_routed']}: "
            f"{f['from_incumbent_auto']['n']} the incumbent auto-routed "
            f"({f['from_incumbent_auto']['audited']} audited, {f['from_incumbent_auto']['pending']}"
            f" pending), {f['from_incumbent_deferred']['n']} it did not "
            f"({f['from_incumbent_deferred']['labelled']} with a human_review outcome)"
        )
    elif c.name == "rules":
        for g in ((f.get("impact") or {}).get("groups") or ())[:10]:
            out.append(
                f"rules diff: {g['count']} ({_num(g['share'])}) {g['old_destination']} "
                f"[{g['old_by']}] -> {g['new_destination']} [{g['new_by']}]"
            )
        for ex in f.get("examples") or ():
            i, k = ex["incumbent"], ex["candidate"]
            out.append(
                f"decision {ex['decision_id']} (request {ex['request_id'] or '-'}): "
                f"{i['stage']} {i['destination']}/{i['reason_code']} -> "
                f"{k['stage']} {k['destination']}/{k['reason_code']}"
            )
        more = (f.get("changed") or 0) - len(f.get("examples") or ())
        if more > 0:
            out.append(f"... and {more} more")
    return out


# --------------------------------------------------------------------------- the candidate's decisions


def _model_id(router: RouterLike) -> str | None:
    fp = getattr(router.policy, "model_fingerprint", None)
    if fp:
        return str(fp)
    manifest = getattr(router.classifier, "manifest_", None)
    return manifest.get("fingerprint") if isinstance(manifest, Mapping) else None


def _same_model(a: RouterLike, b: RouterLike) -> bool:
    """Whether the recorded classifier output of ``a``'s decisions is ``b``'s too."""
    fa, fb = _model_id(a), _model_id(b)
    if fa is not None and fb is not None:
        return fa == fb
    return a.classifier is b.classifier


def _only_rules_differ(a: RouterLike, b: RouterLike) -> bool:
    """Whether ``b`` differs from ``a`` in nothing but its rules: the same model, policy,
    label map, exits and redaction (then the rules diff is the whole comparison)."""
    pa = getattr(a.policy, "content_sha256", None)
    pb = getattr(b.policy, "content_sha256", None)
    return (
        pa is not None
        and pa == pb
        and _same_model(a, b)
        and dict(a.destinations) == dict(b.destinations)
        and (a.oos_label, a.oos_destination, a.fallback_destination)
        == (b.oos_label, b.oos_destination, b.fallback_destination)
        and a.redact_pii == b.redact_pii
    )


def _replay_all(items: Sequence[_Item], router: RouterLike, *, rescore: bool) -> None:
    """Set the candidate's decision of each item by replaying its logged record.

    With ``rescore`` the text is scored again in batches (``route_many`` of the snapshot is
    what :meth:`HybridRouter.replay` with ``rescore=True`` does one by one); a batch the
    router refuses is replayed item by item so that only the refused inputs are lost.
    """
    read_by_rules = _read_by_rules(router)
    todo: list[_Item] = []
    for it in items:
        it.error = _hashed_reason(it.row["record"], read_by_rules)
        if it.error is None:
            todo.append(it)

    def one(it: _Item) -> None:
        try:
            it.cand = _view(router.replay(it.row["record"], rescore=rescore))
            it.source = "replay"
        except UserInputError as exc:
            it.error = str(exc)

    if not rescore:
        for it in todo:
            one(it)
        return
    for start in range(0, len(todo), _REPLAY_CHUNK):
        chunk = todo[start : start + _REPLAY_CHUNK]
        batch = []
        for it in chunk:
            snap = it.row["record"].get("input_snapshot") or {}
            batch.append(
                {
                    "facts": snap.get("facts"),
                    "text": snap.get("text"),
                    "evidence": snap.get("evidence"),
                }
            )
        try:
            decided = router.route_many(batch)
        except UserInputError:
            for it in chunk:
                one(it)
            continue
        for it, d in zip(chunk, decided, strict=True):
            it.cand, it.source = _view(d), "replay"


# --------------------------------------------------------------------------- the gate


def _fraction(value: Any, what: str, *, closed: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (0 <= value <= 1 if closed else 0 < value < 1):
        return float(value)
    interval = "[0, 1]" if closed else "(0, 1)"
    raise UserInputError(f"{what} must be a number in {interval}, got {value!r}")


def _calibration_window(
    candidate: RouterLike, incumbent: RouterLike, where: str
) -> dict[str, Any] | None:
    """The window of this log's audits the candidate's policy was refitted on, if any.

    A policy written by ``hybridroute calibrate --from-log`` records, in its provenance, the
    log, router and version it read and the first and last ``seq`` of the rows it used.
    """
    prov = candidate.policy.provenance or {}
    window = prov.get("window")
    if not isinstance(window, Mapping) or "last_seq" not in window:
        return None
    return {
        "log": prov.get("log"),
        "router": prov.get("router"),
        "router_version": prov.get("router_version"),
        "first_seq": window.get("first_seq"),
        "last_seq": window.get("last_seq"),
        "this_log": _same_log(prov.get("log"), where)
        and (prov.get("router"), prov.get("router_version")) == (incumbent.name, incumbent.version),
    }


def _same_log(name: Any, where: str) -> bool:
    """Whether a log named ``name`` (a URL or a path, as a provenance records it) is the
    open log called ``where`` (a SQLite log's path; a PostgreSQL URL without password)."""
    if not isinstance(name, str) or not name:
        return False
    from ..records._url import display_url, is_url, sqlite_path

    if name == where or display_url(name) == where:
        return True
    try:
        path = sqlite_path(name) if is_url(name) and name.lower().startswith("sqlite:") else name
    except UserInputError:
        return False
    if is_url(path) or is_url(where):
        return False
    return os.path.realpath(path) == os.path.realpath(where)


def _promise(
    incumbent: RouterLike,
    candidate: RouterLike,
    target: float | None,
    delta: float | None,
    where: str,
) -> tuple[float, float, str]:
    ga = incumbent.policy.guarantee or {}
    gb = candidate.policy.guarantee or {}
    if target is None:
        given = [
            (t, who)
            for t, who in ((gb.get("target"), "candidate"), (ga.get("target"), "incumbent"))
            if t is not None
        ]
        if not given:
            raise InputError(
                "neither router's policy promises a precision target; give one (--target)",
                path=where,
            )
        target, who = max(given, key=lambda tw: tw[0])
        note = (
            f"the higher of the policies' targets (candidate {gb.get('target')}, incumbent "
            f"{ga.get('target')}): the {who}'s"
        )
    else:
        note = "given"
    if delta is None:
        deltas = [d for d in (gb.get("delta"), ga.get("delta")) if d is not None]
        if not deltas:
            raise InputError(
                "neither router's policy records its delta; give one (--delta)", path=where
            )
        delta = min(deltas)
    return (
        _fraction(target, "the precision target"),
        _fraction(delta, "delta"),
        note,
    )


def promotion_gate(
    log: LogBase,
    incumbent: RouterLike,
    candidate: RouterLike,
    *,
    dataset: Any = None,
    target: float | None = None,
    delta: float | None = None,
    allow_rule_changes: bool = False,
    max_disagreement: float | None = None,
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
    max_listed: int = 20,
    include_calibration_audits: bool = False,
    max_disputed_share: float = DEFAULT_MAX_DISPUTED_SHARE,
) -> PromotionReport:
    """Decide whether ``candidate`` may replace ``incumbent`` (see the module docstring).

    Parameters
    ----------
    log : DecisionLog or PostgresLog
        An open decision log (:func:`hybridroute.records.open_log`) holding the incumbent's
        live decisions, routed with an audit rate, and their outcomes (``audit`` outcomes of
        the audited decisions; ``human_review`` outcomes of the deferred ones); and, when the
        candidate ran as a shadow, its shadow decisions.
    incumbent, candidate : HybridRouter
        The router version now live (``A``) and the one proposed (``B``).
    dataset : LabelledSet, optional
        A labelled split (held out from both policies' calibration) for the paired test;
        ``None`` skips it.
    target, delta : float, optional
        The precision ``B`` must certify and the error probability of every bound. Default:
        the higher of the two policies' targets, and the smaller of their deltas.
    allow_rule_changes : bool, default False
        Accept decisions that differ because the candidate's rules file differs.
    max_disagreement : float, optional
        Fail when the share of inputs whose destination differs exceeds it (``None``:
        disagreement is reported, not judged).
    alpha : float, default 0.05
        Significance level of the paired test.
    n_boot : int, default 1000
        Bootstrap resamples of the paired test's evaluations.
    seed : int, default 0
        Seeds the bootstraps.
    max_listed : int, default 20
        How many changed decisions (and other examples) to list in full.
    include_calibration_audits : bool, default False
        Judge the candidate's precision on the audits its policy was refitted on, too. By
        default a candidate from ``hybridroute calibrate --from-log`` on this log (its
        provenance names this log, the incumbent and a ``seq`` window) is judged only on
        the incumbent's decisions outside that window: its threshold was chosen on those
        audits, so they would flatter it.
    max_disputed_share : float, default 0.05
        The precision check fails when more than this share of the labelled inputs it
        judges is disputed (see :mod:`._labels`).

    Returns
    -------
    PromotionReport
        ``passed``, ``reasons``, and the four checks with their figures.

    Raises
    ------
    UserInputError
        Both routers are one version; an option out of range; no target known; the log holds
        no live decision of the incumbent, or none of them was audited; the log knows no
        vocabulary of the incumbent's version and ``incumbent`` is not that version.
    """
    where = str(getattr(log, "where", "the decision log"))
    if (incumbent.name, incumbent.version) == (candidate.name, candidate.version):
        raise UserInputError(
            f"the incumbent and the candidate are the same router version "
            f"({incumbent.name} {incumbent.version}): give the candidate a new version"
        )
    target, delta, target_note = _promise(incumbent, candidate, target, delta, where)
    alpha = _fraction(alpha, "alpha")
    max_disputed_share = _fraction(max_disputed_share, "the largest disputed share", closed=True)
    if max_disagreement is not None:
        max_disagreement = _fraction(max_disagreement, "the largest disagreement", closed=True)
    if isinstance(max_listed, bool) or int(max_listed) < 0:
        raise UserInputError(f"max_listed must be a count, got {max_listed!r}")
    rows = _live_rows(log, incumbent, where)
    items = [_Item(row=r) for r in rows]
    shadows, rescore = _candidate_decisions(log, items, incumbent, candidate)
    try:
        labels = _settled(log, rows, [incumbent])
    except ValueError as exc:
        raise InputError(str(exc), path=where) from None
    fresh, window = _judged_items(items, candidate, incumbent, where, include_calibration_audits)
    checks = (
        _disagreement_check(
            log,
            items,
            incumbent,
            candidate,
            shadows,
            max_disagreement=max_disagreement,
            max_listed=max_listed,
        ),
        _precision_check(
            fresh,
            labels,
            target=target,
            delta=delta,
            target_note=target_note,
            max_disputed_share=max_disputed_share,
            candidate_guarantee=candidate.policy.guarantee or {},
            calibration_window=window,
        ),
        _paired_check(incumbent, candidate, dataset, alpha=alpha, n_boot=n_boot, seed=seed),
        _rules_check(
            items,
            incumbent,
            candidate,
            allow_rule_changes=allow_rule_changes,
            max_listed=max_listed,
            only_rules_changed=_only_rules_differ(incumbent, candidate),
            where=where,
        ),
    )
    return PromotionReport(
        incumbent=MappingProxyType({"name": incumbent.name, "version": incumbent.version}),
        candidate=MappingProxyType({"name": candidate.name, "version": candidate.version}),
        log=where,
        checks=checks,
        decisions=MappingProxyType(_decision_counts(items, rescore, max_listed)),
    )


def _live_rows(log: LogBase, incumbent: RouterLike, where: str) -> list[dict[str, Any]]:
    """The incumbent's live rows in the log; refused when there are none, or none audited."""
    rows = [
        r
        for r in log.rows(router_version=incumbent.version, role="live")
        if r["router"] == incumbent.name
    ]
    if not rows:
        raise InputError(
            f"the log holds no live decision of the incumbent {incumbent.name} {incumbent.version}",
            path=where,
        )
    if not any(r.get("audited") == 1 for r in rows):
        raise InputError(
            f"the log holds no audited decision of the incumbent {incumbent.name} "
            f"{incumbent.version}: route with an audit rate (--audit-rate and "
            "HYBRIDROUTE_AUDIT_KEY) and add audit outcomes first",
            path=where,
        )
    return rows


def _candidate_decisions(
    log: LogBase, items: list[_Item], incumbent: RouterLike, candidate: RouterLike
) -> tuple[dict[Any, Any], bool]:
    """Give each item the candidate's decision: its logged shadow decision, else a replay.

    Returns the candidate's shadow records by item id and whether the replays rescored the
    text (the candidate's model is not the incumbent's).
    """
    shadows = {
        r["item_id"]: r["record"]
        for r in log.rows(router_version=candidate.version, role="shadow")
        if r["router"] == candidate.name and r["item_id"] is not None
    }
    for it in items:
        rec = shadows.get(_live_key(it.row))
        if rec is not None:
            it.cand, it.source = _view(rec), "shadow"
    rescore = not _same_model(incumbent, candidate)
    _replay_all([it for it in items if it.cand is None], candidate, rescore=rescore)
    return shadows, rescore


def _judged_items(
    items: list[_Item],
    candidate: RouterLike,
    incumbent: RouterLike,
    where: str,
    include_calibration_audits: bool,
) -> tuple[list[_Item], dict[str, Any] | None]:
    """The items the precision check judges, and the candidate's calibration window.

    A candidate refitted on this log's audits is judged outside the ``seq`` window it was
    fitted on (unless ``include_calibration_audits``); the window says how many that left out.
    """
    window = _calibration_window(candidate, incumbent, where)
    fresh = items
    if window is not None and window["this_log"] and not include_calibration_audits:
        # the candidate's threshold was chosen on these audits: judging it on them again
        # would be in-sample, so the precision check reads the decisions outside the window
        lo, hi = int(window["first_seq"]), int(window["last_seq"])
        fresh = [it for it in items if not lo <= int(it.row["seq"]) <= hi]
    if window is not None:
        window = {**window, "excluded": len(items) - len(fresh)}
    return fresh, window


def _decision_counts(items: list[_Item], rescore: bool, max_listed: int) -> dict[str, Any]:
    """Where the candidate's decisions came from (shadow, replay, none) and the first errors."""
    errors = [it.error for it in items if it.cand is None and it.error]
    return {
        "inputs": len(items),
        "from_shadow": sum(1 for it in items if it.source == "shadow"),
        "from_replay": sum(1 for it in items if it.source == "replay"),
        "unreplayable": sum(1 for it in items if it.cand is None),
        "rescored": rescore,
        "errors": errors[:max_listed],
    }
