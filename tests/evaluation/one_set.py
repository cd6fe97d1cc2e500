"""One small labelled set, with its answers fixed, that every evaluation path scores.

It is built so that the definitions the paths once disagreed on give different numbers:
two items are answered with ``spam``, a label no gold item has (macro-F1 over the gold
labels only ignores it; over gold ∪ answered labels it counts with F1 0), two are
abstentions (``None``: a miss for their gold class, not a label), one class of the
model is never predicted nor gold (``unused``), and in router mode some rows are decided
by rules, some deferred by the policy or the fallback, one deferred row completed by the
evidence check.

The classifier and the router are stand-ins with the answers written down, so the
numbers below are exact and each path can be compared with the others and with
scikit-learn.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from hybridroute.classifiers import IntentClassifier, RankedLabels

CLASSES = ("billing", "login", "refund", "spam", "unused")

#: The router metrics every path computes exactly (in memory, streamed, on Spark).
ROUTER_METRIC_KEYS = (
    "n",
    "n_classified",
    "n_auto_routed",
    "accuracy",
    "macro_f1",
    "coverage",
    "selective_precision",
    "next_step_accuracy",
    "n_next_step",
    "decisions_by_stage",
    "decisions_by_destination",
    "abstention_rate",
    "abstentions_by_reason",
    "fallbacks_by_cause",
    "n_with_confidence",
    "rules",
    "per_class",
    "confusion",
)

# text, gold, answer (None: abstained, with the reason), confidence
ITEMS: tuple[tuple[str, str, str | None, float | None], ...] = (
    ("charged twice this month", "billing", "billing", 0.91),
    ("invoice looks wrong", "billing", "billing", 0.82),
    ("why this fee", "billing", "spam", 0.71),
    ("bill question ???", "billing", None, None),
    ("want my money back", "refund", "refund", 0.95),
    ("return the parcel and refund", "refund", "billing", 0.62),
    ("refund not received", "refund", "refund", 0.86),
    ("cannot log in", "login", "login", 0.93),
    ("password reset mail never came", "login", "spam", 0.55),
    ("locked out of my account", "login", "login", 0.77),
    ("refund??", "refund", None, None),
    ("card charged wrong amount", "billing", "billing", 0.66),
)
ABSTAIN_REASON = "invalid_label"
#: The router-mode fallbacks (the abstained items) and what each is counted under: one
#: carries the cause the router records (a classifier that raised), one is a record from
#: before causes were recorded (counted under its reason code).
FALLBACKS = {
    "bill question ???": ("classifier_abstained", None),
    "refund??": ("classifier_error", "classifier_error (TypeError)"),
}
FALLBACKS_BY_CAUSE = {"classifier_abstained": 1, "classifier_error (TypeError)": 1}


class RankOnly(IntentClassifier):
    """A stand-in classifier that only ranks (never fitted, no probabilities)."""

    def __init__(self, classes) -> None:
        self.classes_ = np.array(classes)

    def fit(self, texts, labels):  # pragma: no cover - never fitted
        return self

    def predict_proba(self, texts):  # pragma: no cover - rank is used
        raise NotImplementedError

    def predict(self, texts):
        return [r.top for r in self.rank(texts)]


class FixedClassifier(RankOnly):
    """A classifier whose answer for each text of :data:`ITEMS` is written down."""

    kind = "fixed"

    def __init__(self) -> None:
        super().__init__(CLASSES)
        self._answers = {t: (a, c) for t, _, a, c in ITEMS}

    def rank(self, texts, k=2):
        out = []
        for t in texts:
            answer, conf = self._answers[t]
            if answer is None:
                out.append(RankedLabels(labels=(), scores=(), abstain_reason=ABSTAIN_REASON))
            else:
                out.append(RankedLabels(labels=(answer,), scores=(conf,)))
        return out


def texts_and_gold() -> tuple[list[str], list[str]]:
    return [t for t, *_ in ITEMS], [g for _, g, *_ in ITEMS]


#: What stands for an abstention when scikit-learn scores the answers (it is no label).
MARKER = "\x00abstained"


def sklearn_macro_f1(gold: list[str], pred: list[str | None]) -> float:
    """scikit-learn's macro-F1 over gold ∪ answered labels (its default label set), an
    abstention a wrong answer that is no label; rounded as evaluations report it."""
    from sklearn.metrics import f1_score

    labels = sorted(set(gold) | {p for p in pred if p is not None})
    marked = [MARKER if p is None else p for p in pred]
    return round(f1_score(gold, marked, labels=labels, average="macro", zero_division=0), 6)


def reference_macro_f1() -> float:
    """The macro-F1 of the classifier on :data:`ITEMS` (the rows a router's classifier
    sees), by :func:`sklearn_macro_f1`."""
    texts, gold = texts_and_gold()
    return sklearn_macro_f1(gold, FixedClassifier().predict(texts))


# ----------------------------------------------------------------------------- router mode

# rows a rule decides: text, gold, rule id (None: the rule set's default exit), destination
RULE_ROWS = (
    ("delete all my data now", "billing", "risk", "human_review"),
    ("no permission to do this", "login", "permission", "reject"),
    ("nothing matched at all", "refund", None, "human_review"),
)
# next steps given for some rows (by text)
NEXT_STEPS = {
    "charged twice this month": "team_billing",
    "why this fee": "team_billing",
    "want my money back": "team_refund",
    "cannot log in": "human_review",
    "refund??": "human_review",
    "delete all my data now": "human_review",
    "no permission to do this": "human_review",
}


def _decision(text: str) -> SimpleNamespace:
    rules = {t: (rid, dest) for t, _, rid, dest in RULE_ROWS}
    if text in rules:
        rid, dest = rules[text]
        return SimpleNamespace(
            stage="rule",
            label=None,
            confidence=None,
            selected_destination=dest,
            reason_code="rule_matched" if rid else "default_exit",
            rule_id=rid,
            detail={},
        )
    answer, conf = FixedClassifier()._answers[text]
    if answer is None:
        reason, cause = FALLBACKS[text]
        return SimpleNamespace(
            stage="fallback",
            label=None,
            confidence=None,
            selected_destination="human_review",
            reason_code=reason,
            rule_id=None,
            detail={"policy_action": None, **({"cause": cause} if cause else {})},
        )
    if conf >= 0.7:
        stage, reason, dest = "model", "confident", f"team_{answer}"
    elif text == "card charged wrong amount":  # deferred, then the evidence was complete
        stage, reason, dest = "policy", "evidence_complete", f"team_{answer}"
    else:
        stage, reason, dest = "policy", "low_confidence", "human_review"
    return SimpleNamespace(
        stage=stage,
        label=answer,
        confidence=conf,
        selected_destination=dest,
        reason_code=reason,
        rule_id=None,
        detail={"policy_action": "auto_route" if stage == "model" else "defer"},
    )


class FixedRouter:
    """A router whose decision for each text is written down (duck-typed)."""

    name = "fixed"
    version = "1"
    classes = CLASSES
    rules = SimpleNamespace(schema=SimpleNamespace(names=()))

    def route_many(self, items):
        return [_decision(it["text"]) for it in items]


def router_rows() -> list[dict[str, Any]]:
    """The router-mode rows: the items, then the rule-decided ones."""
    rows = [(t, g) for t, g, *_ in ITEMS] + [(t, g) for t, g, *_ in RULE_ROWS]
    return [{"text": t, "label": g, "facts": {}, "next_step": NEXT_STEPS.get(t)} for t, g in rows]


def router_dataset() -> SimpleNamespace:
    """What :func:`evaluate_router` reads of a labelled set, for :func:`router_rows`."""
    rows = router_rows()
    frame = pd.DataFrame({"next_step": [r["next_step"] for r in rows]})
    return SimpleNamespace(
        texts=[r["text"] for r in rows],
        y=[r["label"] for r in rows],
        frame=frame,
        facts=lambda i: {},
    )


def scored_rows() -> list[dict[str, Any]]:
    """The scored rows as :meth:`SparkRouter.score` gives them (the columns
    ``evaluate_scored`` reads; ``decision`` the record as JSON)."""
    import json

    out = []
    for r in router_rows():
        d = _decision(r["text"])
        record = {"stage": d.stage, "reason_code": d.reason_code, "detail": d.detail}
        out.append(
            {
                "decision": json.dumps(record),
                "stage": d.stage,
                "label": d.label,
                "confidence": d.confidence,
                "destination": d.selected_destination,
                "reason_code": d.reason_code,
                "rule_id": d.rule_id,
                "gold": r["label"],
                "gold_next_step": r["next_step"],
            }
        )
    return out
