"""Replay: re-run a router on logged input snapshots and report what changes.

Each logged record carries its input snapshot (facts and text) and, for model-stage
decisions, the classifier's full ranking. Replaying with the same router version must
reproduce every decision (a mismatch there is a defect); replaying with another version
shows exactly which decisions that version changes. Model-stage records replay from the
recorded ranking by default (pure policy replay: no classifier call, no cost); pass
``rescore=True`` to score the text again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import UserInputError

if TYPE_CHECKING:
    from ..router import HybridRouter

__all__ = ["ReplayReport", "replay"]


class ReplayReport(dict):
    """A JSON-able replay report (a dict) with :meth:`summary_lines`."""

    def summary_lines(self) -> list[str]:
        lines = [
            f"replayed {self['n']} decisions with {self['router']} {self['router_version']}"
            f" ({'rescored' if self['rescore'] else 'recorded classifier output'}): "
            f"{self['mismatches']} mismatches ({self['mismatch_rate']:.2%})"
        ]
        if self["unreplayable"]:
            lines.append(f"  {self['unreplayable']} records could not be replayed (see 'errors')")
        for stage, row in sorted(self["by_stage"].items()):
            lines.append(f"  stage {stage}: {row['mismatches']}/{row['n']} changed")
        for change, count in list(self["transitions"].items())[:10]:
            lines.append(f"  {change}: {count}")
        return lines


def replay(
    records: Iterable[Mapping[str, Any]],
    router: HybridRouter,
    *,
    rescore: bool = False,
    max_examples: int = 10,
) -> ReplayReport:
    """Replay logged decision records through ``router`` and compare destinations.

    Parameters
    ----------
    records : iterable of mappings
        Decision records (``Decision.to_dict()`` shape; :meth:`DecisionLog.records`).
    router : HybridRouter
        The router to replay with (the same version, or another).
    rescore : bool
        Score the logged text again instead of reusing the recorded ranking.
    max_examples : int
        How many changed decisions to include in full.

    Returns
    -------
    ReplayReport
        ``n``, ``mismatches``, ``mismatch_rate``, ``reason_changes``, breakdowns
        ``by_stage`` and ``by_reason_code`` (of the logged decision), ``transitions``
        (``old -> new`` destination counts), ``examples``, and ``unreplayable`` records
        with the error for each: a record whose sensitive facts are stored hashed and read
        by one of the router's rules cannot be replayed faithfully, and is counted here.
    """
    n = mismatches = reason_changes = unreplayable = 0
    by_stage: dict[str, dict[str, int]] = {}
    by_reason: dict[str, dict[str, int]] = {}
    transitions: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    rules = getattr(router, "rules", None)
    read_by_rules = {f for rule in getattr(rules, "rules", ()) for f in rule.facts_read()}
    for pos, rec in enumerate(records):
        hashed = set((rec.get("detail") or {}).get("hashed_facts") or ()) & read_by_rules
        if hashed:
            # the log holds salted hashes of these facts, and a rule reads them: the input
            # cannot be reconstructed, so the record is reported rather than mis-replayed
            unreplayable += 1
            if len(errors) < max_examples:
                errors.append(
                    {
                        "position": pos,
                        "snapshot_hash": rec.get("snapshot_hash"),
                        "error": f"sensitive fact(s) {', '.join(sorted(hashed))} are stored hashed "
                        "and read by a rule",
                    }
                )
            continue
        try:
            new = router.replay(rec, rescore=rescore)
        except UserInputError as exc:
            unreplayable += 1
            if len(errors) < max_examples:
                errors.append(
                    {"position": pos, "snapshot_hash": rec.get("snapshot_hash"), "error": str(exc)}
                )
            continue
        n += 1
        old_dest = rec["selected_destination"]
        changed = new.selected_destination != old_dest
        stage_row = by_stage.setdefault(str(rec.get("stage")), {"n": 0, "mismatches": 0})
        reason_row = by_reason.setdefault(str(rec.get("reason_code")), {"n": 0, "mismatches": 0})
        stage_row["n"] += 1
        reason_row["n"] += 1
        if new.reason_code != rec.get("reason_code"):
            reason_changes += 1
        if changed:
            mismatches += 1
            stage_row["mismatches"] += 1
            reason_row["mismatches"] += 1
            transitions[f"{old_dest} -> {new.selected_destination}"] += 1
            if len(examples) < max_examples:
                snap = rec.get("input_snapshot") or {}
                examples.append(
                    {
                        "position": pos,
                        "snapshot_hash": rec.get("snapshot_hash"),
                        "text": snap.get("text"),
                        "old": {
                            "destination": old_dest,
                            "reason_code": rec.get("reason_code"),
                            "stage": rec.get("stage"),
                            "router_version": rec.get("router_version"),
                            "confidence": rec.get("confidence"),
                            "threshold": rec.get("threshold"),
                        },
                        "new": {
                            "destination": new.selected_destination,
                            "reason_code": new.reason_code,
                            "stage": new.stage,
                            "router_version": new.router_version,
                            "confidence": new.confidence,
                            "threshold": new.threshold,
                        },
                    }
                )
    return ReplayReport(
        router=router.name,
        router_version=router.version,
        rescore=bool(rescore),
        n=n,
        mismatches=mismatches,
        mismatch_rate=(mismatches / n) if n else 0.0,
        reason_changes=reason_changes,
        unreplayable=unreplayable,
        by_stage=by_stage,
        by_reason_code=by_reason,
        transitions=dict(transitions.most_common()),
        examples=examples,
        errors=errors,
    )
