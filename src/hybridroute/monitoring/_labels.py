"""The label of an outcome-labelled decision: the one rule the monitor, recalibration and
the promotion gate share, so no reader can settle a disagreement another way.

**Which outcomes count.** A reader names the sources it reads for a decision (the monitor
and recalibration: ``audit`` on audited decisions; the promotion gate also
``human_review`` on the decisions the incumbent did not auto-route); outcomes of source
``adjudication`` count for every reader. Stored outcomes that break what the log checks
when it takes an outcome (:mod:`hybridroute.records._outcomes`) -- a gold intent that is
not a label of the decision's router version, a gold next step that is not one of its
destinations, an observation time before the decision was logged -- may have been written
by an older version: they are *left out* and reported, never counted as a wrong
prediction.

**The rule** (it depends on the set of outcomes, never on the order they were written):

1. The outcomes of a decision *agree* when no two of them give different gold intents and
   no two give different gold next steps; their label is then the gold intent and gold
   next step they give.
2. Outcomes of source ``adjudication``, when a decision has any, decide alone: when they
   agree, their label settles the decision whatever the other outcomes say; when they
   disagree, the decision stays disputed.
3. Otherwise the outcomes of the sources read decide: when they agree, that is the label;
   when they disagree, the decision is *disputed*.
4. A disputed decision is never counted as correct: the monitor and recalibration count it
   as wrong; the promotion gate counts it as wrong for its lower bound and as right for
   its upper bound (like an audit still pending), so a dispute can only make a
   certificate harder to get.
5. A labelled decision takes its place in the label stream at its first counted outcome
   (what any of its outcomes says does not move it).

**Too many disputes.** When the disputed decisions exceed ``max_disputed_share`` (default
:data:`DEFAULT_MAX_DISPUTED_SHARE`) of the labelled decisions a reader judges, the labels
themselves are in question: recalibration refuses to certify, ``hybridroute monitor``
flags it (exit code 4), and the promotion gate's precision check fails. Outcomes of
source ``adjudication`` settle disputes.

A decision is *correct* under its label when its gold next step (if the label gives one) is
the destination selected, otherwise when its gold intent is the label predicted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..records._logbase import LogBase
    from ._routing import RouterLike

__all__ = [
    "ADJUDICATION",
    "DEFAULT_MAX_DISPUTED_SHARE",
    "Label",
    "Labels",
    "check_max_disputed_share",
    "is_correct",
    "settle_labels",
    "vocabularies_for",
]

#: The outcome source whose label settles a disputed decision.
ADJUDICATION = "adjudication"
#: Largest share of disputed decisions among the labelled ones before a certificate is
#: refused (recalibration) or flagged (monitor, promotion gate).
DEFAULT_MAX_DISPUTED_SHARE = 0.05
# invalid outcomes listed in full in a report
_LISTED = 20

Gold = tuple[str | None, str | None]


def check_max_disputed_share(value: Any) -> float:
    """``value`` as a share in [0, 1] (raises ValueError otherwise)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 <= value <= 1:
        raise ValueError(f"the largest disputed share must be a number in [0, 1], got {value!r}")
    return float(value)


def is_correct(gold: Gold, decision: Mapping[str, Any]) -> bool:
    """Whether ``decision`` (``selected_destination`` and ``label``) is right under the
    gold ``(intent, next step)``: the next step decides when there is one."""
    intent, step = gold
    if step is not None:
        return bool(step == decision.get("selected_destination"))
    return bool(intent is not None and intent == decision.get("label"))


@dataclass(frozen=True, slots=True)
class Label:
    """The settled label of one decision.

    Attributes
    ----------
    decision_id : str
    gold_intent, gold_next_step : str or None
        The label its outcomes agree on (both ``None`` when disputed).
    disputed : bool
        Its counted outcomes disagree (and no agreeing adjudication settles them).
    adjudicated : bool
        Settled by outcomes of source ``adjudication``.
    position : int
        Where its first counted outcome lies in the order outcomes were recorded.
    recorded_at : str or None
        When that outcome was recorded.
    """

    decision_id: str
    gold_intent: str | None
    gold_next_step: str | None
    disputed: bool
    adjudicated: bool
    position: int
    recorded_at: str | None

    @property
    def gold(self) -> Gold:
        """``(gold_intent, gold_next_step)``."""
        return self.gold_intent, self.gold_next_step

    def correct(self, decision: Mapping[str, Any], *, disputed_as: bool = False) -> bool:
        """Whether ``decision`` is right under this label; a disputed label gives
        ``disputed_as`` (``False``: never counted as correct)."""
        return disputed_as if self.disputed else is_correct(self.gold, decision)


@dataclass(frozen=True, slots=True)
class Labels:
    """The settled labels of the decisions a reader judges, and what was left out.

    Attributes
    ----------
    by_decision : mapping of str to Label
        One per labelled decision, in stream order.
    invalid : tuple of dict
        The outcomes left out: ``{"outcome_id", "decision_id", "source", "reason"}`` each.
    """

    by_decision: Mapping[str, Label]
    invalid: tuple[dict[str, Any], ...] = field(default=())

    def get(self, decision_id: str) -> Label | None:
        """The label of ``decision_id`` (``None``: unlabelled)."""
        return self.by_decision.get(decision_id)

    def ordered(self) -> list[Label]:
        """The labels in stream order."""
        return sorted(self.by_decision.values(), key=lambda label: label.position)

    def disputes(
        self,
        max_share: float = DEFAULT_MAX_DISPUTED_SHARE,
        decision_ids: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """The disputes among the labelled decisions (of ``decision_ids`` when given):
        ``{"labelled", "disputed", "adjudicated", "share", "max_share", "exceeded"}``."""
        max_share = check_max_disputed_share(max_share)
        labels: Iterable[Label] = self.by_decision.values()
        if decision_ids is not None:
            labels = [lb for d in decision_ids if (lb := self.by_decision.get(d)) is not None]
        labels = list(labels)
        disputed = sum(1 for lb in labels if lb.disputed)
        share = disputed / len(labels) if labels else 0.0
        return {
            "labelled": len(labels),
            "disputed": disputed,
            "adjudicated": sum(1 for lb in labels if lb.adjudicated),
            "share": share,
            "max_share": max_share,
            "exceeded": share > max_share,
        }

    def invalid_report(self) -> dict[str, Any]:
        """``{"count", "by_reason", "examples"}`` of the outcomes left out (the first few
        listed in full)."""
        by_reason: dict[str, int] = {}
        for x in self.invalid:
            by_reason[x["reason"]] = by_reason.get(x["reason"], 0) + 1
        return {
            "count": len(self.invalid),
            "by_reason": dict(sorted(by_reason.items())),
            "examples": [dict(x) for x in self.invalid[:_LISTED]],
        }


def _time(value: Any) -> datetime | None:
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _agree(golds: Sequence[Gold]) -> Gold | None:
    """The label outcomes agree on, or ``None`` when two of them disagree."""
    intents = {g[0] for g in golds if g[0] is not None}
    steps = {g[1] for g in golds if g[1] is not None}
    if len(intents) > 1 or len(steps) > 1:
        return None
    return next(iter(intents), None), next(iter(steps), None)


def _problem(outcome: Mapping[str, Any], row: Mapping[str, Any], vocab: Any) -> str | None:
    """Why a stored outcome cannot count for ``row`` (``None``: it counts)."""
    problem = None if vocab is None else vocab.gold_problem(outcome)
    if problem is not None:
        return problem
    observed, logged = _time(outcome.get("observed_at")), _time(row.get("logged_at"))
    if observed is None:
        return "observed_at is not a time"
    if logged is not None and observed < logged:
        return "observed before the decision was logged"
    return None


def settle_labels(
    outcomes: Iterable[Mapping[str, Any]],
    decisions: Mapping[str, Mapping[str, Any]],
    *,
    sources: Sequence[str],
    vocabularies: Mapping[tuple[str, str], Any],
) -> Labels:
    """Apply the module's rule to the outcomes of ``decisions``.

    Parameters
    ----------
    outcomes : iterable of mapping
        Stored outcomes in the order they were recorded (:meth:`DecisionLog.outcomes`).
    decisions : mapping of decision id to row
        The decisions judged, each with ``router``, ``router_version`` and ``logged_at``;
        outcomes of other decisions are ignored.
    sources : sequence of str
        The outcome sources read (besides ``adjudication``, always read).
    vocabularies : mapping
        ``(router, router_version)`` -> :class:`~hybridroute.records._vocabulary.RouterVocabulary`
        of the decisions' versions (see :func:`vocabularies_for`).

    Returns
    -------
    Labels
    """
    read = {*sources, ADJUDICATION}
    first: dict[str, tuple[int, str | None]] = {}
    golds: dict[str, dict[bool, list[Gold]]] = {}
    invalid: list[dict[str, Any]] = []
    for position, o in enumerate(outcomes):
        decision_id = o.get("decision_id")
        row = decisions.get(decision_id) if isinstance(decision_id, str) else None
        source = o.get("source")
        if row is None or source not in read:
            continue
        assert isinstance(decision_id, str)
        vocab = vocabularies.get((str(row.get("router")), str(row.get("router_version"))))
        problem = _problem(o, row, vocab)
        if problem is not None:
            invalid.append(
                {
                    "outcome_id": o.get("outcome_id"),
                    "decision_id": decision_id,
                    "source": source,
                    "reason": problem,
                }
            )
            continue
        first.setdefault(decision_id, (position, o.get("recorded_at")))
        held = golds.setdefault(decision_id, {True: [], False: []})
        held[source == ADJUDICATION].append((o.get("gold_intent"), o.get("gold_next_step")))
    labels: dict[str, Label] = {}
    for decision_id, (position, recorded_at) in sorted(first.items(), key=lambda kv: kv[1][0]):
        held = golds[decision_id]
        adjudicated = bool(held[True])
        gold = _agree(held[True] if adjudicated else held[False])
        labels[decision_id] = Label(
            decision_id=decision_id,
            gold_intent=None if gold is None else gold[0],
            gold_next_step=None if gold is None else gold[1],
            disputed=gold is None,
            adjudicated=adjudicated and gold is not None,
            position=position,
            recorded_at=recorded_at,
        )
    return Labels(labels, tuple(invalid))


def vocabularies_for(
    log: LogBase, keys: Iterable[tuple[str, str]], routers: Iterable[RouterLike] = ()
) -> dict[tuple[str, str], Any]:
    """The vocabulary of each ``(router, router_version)`` in ``keys``: registered in the
    log, else that of one of ``routers`` (HybridRouter values of that name and version).

    Raises
    ------
    ValueError
        A version neither registered nor given, naming how to register it.
    """
    from ..records._vocabulary import RouterVocabulary

    known = dict(log.router_vocabularies())
    for router in routers:
        vocab = RouterVocabulary.from_router(router)
        known.setdefault(vocab.key, vocab)
    missing = sorted(set(keys) - set(known))
    if missing:
        names = ", ".join(f"router {r!r} version {v!r}" for r, v in missing[:5])
        raise ValueError(
            f"the log knows no labels of {names}, so their outcomes cannot be checked: "
            "register the version (hybridroute outcomes add --router BUNDLE with that "
            "version's bundle), or give its bundle (--router)"
        )
    return {k: known[k] for k in set(keys)}
