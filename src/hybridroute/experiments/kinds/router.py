"""``router``: the full hybrid router (rules -> classifier -> fitted policy), per policy.

The local classifier is trained (seeded) on the ``train`` role and scores the
``calibration`` role once; for every policy configuration a policy is fitted there with
:func:`~hybridroute.calibration.fit_policy` (what ``hybridroute calibrate`` runs), a
:class:`~hybridroute.router.HybridRouter` is built with the rules file, and
:func:`~hybridroute.evaluation.evaluate_router` scores it on the ``test`` role. One row
per policy: intent accuracy with its bootstrap 95% interval (items the classifier saw),
coverage and selective precision of the auto-routed items, next-step accuracy against
the gold next steps (with its interval), and decisions by stage (rule / model / policy /
fallback, explained in a note under the table, as are the counts each rate is over and any
fallbacks by cause). The labelled set is loaded with its facts checked against the rules
file's facts schema, as ``hybridroute evaluate --router`` loads it: a fact the router
would refuse stops the run before anything is trained, naming its row and column.

Spec fields::

    rules: example:support_rules.yaml   # a bundled example, or a path (relative to the spec)
    policies:                           # required; each one row
      - {label: certified 0.9, objective: precision, target: 0.9, delta: 0.1}
      - {objective: three-way, target: 0.9, ask_target: 0.6}
    n_boot: 1000                        # bootstrap resamples of the intervals
    router: {name: support, version: "1"}

A policy takes the :func:`~hybridroute.calibration.fit_policy` arguments ``objective``,
``target``, ``delta``, ``calibrator``, ``calibrator_fraction``, ``margin``,
``per_class``, ``ask_target``, ``precision_target``, ``costs`` and ``fallback``; the
split seed is the spec's seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ...exceptions import UserInputError
from .._resplit import rounded
from ._base import Column, ExperimentKind, KindOutput, Progress

if TYPE_CHECKING:  # pragma: no cover
    from ...contracts import FactSchema
    from ...datasets import LabelledSet
    from .._spec import SpecReader

__all__ = ["RouterExperiment"]

EXAMPLE_PREFIX = "example:"
#: fit_policy's objectives, calibrators and fallbacks (checked again by fit_policy itself).
OBJECTIVES = ("precision", "empirical", "coverage", "cost", "three-way", "oos")
CALIBRATORS = ("temperature", "isotonic", "none")
FALLBACKS = ("human_review", "ask_user")
STAGES = ("rule", "model", "policy", "fallback")
#: One short line on what the stages are, under the table that shows them.
STAGES_NOTE = (
    "Decisions by stage (last column): rule = a rule decided from the facts; model = auto-routed; policy = held back "
    "(ask the user, human review, out of scope) or answered on complete evidence; fallback = "
    "the classifier failed or abstained."
)
_FRACTION_KEYS = ("target", "delta", "ask_target", "precision_target")
_POLICY_KEYS = (
    "label",
    "objective",
    "calibrator",
    "calibrator_fraction",
    "margin",
    "per_class",
    "costs",
    "fallback",
    *_FRACTION_KEYS,
)


class RouterExperiment(ExperimentKind):
    """The whole router evaluated on a labelled set with gold next steps, one row per policy."""

    name = "router"
    description = "the full hybrid router on a labelled set, one row per fitted policy"
    split_roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "train": ("train",),
        "calibration": ("calibration",),
        "test": ("test",),
    }
    fields = ("rules", "policies", "n_boot", "router")
    columns = (
        Column("policy", "policy", "config", "str", "the policy configuration (its label)"),
        Column("objective", "objective", "config", "str", "fit_policy objective"),
        Column("target", "target", "config", "float", "the objective's target"),
        Column(
            "threshold",
            "threshold",
            "metric",
            "float",
            "fitted auto-route threshold (none: routes nothing)",
        ),
        Column(
            "certified", "certified", "metric", "bool", "whether the policy's target is certified"
        ),
        Column(
            "accuracy",
            "accuracy [95% CI]",
            "metric",
            "ci",
            "intent accuracy on the items the classifier saw",
            ci=("accuracy_ci_low", "accuracy_ci_high"),
        ),
        Column("accuracy_ci_low", "", "metric", "float", show=False),
        Column("accuracy_ci_high", "", "metric", "float", show=False),
        Column("coverage", "coverage", "metric", "pct", "share of classified items auto-routed"),
        Column(
            "selective_precision",
            "sel. precision",
            "metric",
            "float",
            "accuracy of the auto-routed items",
        ),
        Column(
            "next_step_accuracy",
            "next-step acc. [95% CI]",
            "metric",
            "ci",
            "selected destination == gold next step",
            ci=("next_step_ci_low", "next_step_ci_high"),
        ),
        Column("next_step_ci_low", "", "metric", "float", show=False),
        Column("next_step_ci_high", "", "metric", "float", show=False),
        *(
            Column(f"stage_{s}", s, "metric", "int", f"decisions made by the {s} stage", show=False)
            for s in STAGES
        ),
        Column(
            "stages",
            " / ".join(STAGES),
            "metric",
            "parts",
            "decisions by stage: " + " / ".join(STAGES),
            parts=tuple(f"stage_{s}" for s in STAGES),
        ),
    )

    @classmethod
    def parse_settings(cls, doc: Mapping[str, Any], reader: SpecReader) -> dict[str, Any]:
        rules = reader.string(doc.get("rules", EXAMPLE_PREFIX + "support_rules.yaml"), "rules")
        if "policies" not in doc:
            raise reader.error(
                "missing: a list of policy configurations (fit_policy arguments)", "policies"
            )
        policies = []
        labels: set[str] = set()
        for i, item in enumerate(reader.sequence(doc["policies"], "policies")):
            where = f"policies[{i}]"
            entry = reader.mapping(item, where, keys=_POLICY_KEYS)
            p: dict[str, Any] = {
                "objective": reader.string(
                    entry.get("objective", "precision"), f"{where}.objective", choices=OBJECTIVES
                )
            }
            for key in _FRACTION_KEYS:
                if key in entry:
                    p[key] = reader.fraction(entry[key], f"{where}.{key}")
            if "calibrator" in entry:
                p["calibrator"] = reader.string(
                    entry["calibrator"], f"{where}.calibrator", choices=CALIBRATORS
                )
            if "calibrator_fraction" in entry:
                p["calibrator_fraction"] = reader.fraction(
                    entry["calibrator_fraction"], f"{where}.calibrator_fraction", closed_low=True
                )
            for key in ("margin", "per_class"):
                if key in entry:
                    p[key] = reader.boolean(entry[key], f"{where}.{key}")
            if "fallback" in entry:
                p["fallback"] = reader.string(
                    entry["fallback"], f"{where}.fallback", choices=FALLBACKS
                )
            if "costs" in entry:
                costs = reader.mapping(
                    entry["costs"], f"{where}.costs", keys=("misroute", "ask_user", "human_review")
                )
                p["costs"] = {
                    k: (None if v is None else reader.number(v, f"{where}.costs.{k}"))
                    for k, v in costs.items()
                }
            target = p.get("target")
            default = p["objective"] + (f" {target:g}" if target is not None else "")
            p["label"] = reader.string(entry.get("label", default), f"{where}.label")
            if p["label"] in labels:
                raise reader.error(
                    f"label {p['label']!r} is used twice; give each policy its own label",
                    f"{where}.label",
                )
            labels.add(p["label"])
            policies.append(p)
        router = reader.mapping(doc.get("router") or {}, "router", keys=("name", "version"))
        return {
            "rules": rules,
            "policies": tuple(policies),
            "n_boot": reader.integer(doc.get("n_boot", 1000), "n_boot", low=10, high=100_000),
            "router": {
                "name": reader.string(router.get("name", "router"), "router.name"),
                "version": reader.string(str(router.get("version", "1")), "router.version"),
            },
        }

    def rules_path(self) -> Path:
        """The rules file: a bundled example, or a path relative to the spec's directory."""
        ref = self.spec.settings["rules"]
        if ref.startswith(EXAMPLE_PREFIX):
            name = ref[len(EXAMPLE_PREFIX) :]
            examples = resources.files("hybridroute") / "examples"
            target = examples / name
            if "/" in name or "\\" in name or not target.is_file():
                have = sorted(
                    p.name for p in examples.iterdir() if p.name.endswith((".yaml", ".yml"))
                )
                raise self.error(
                    f"no bundled example {name!r}; bundled rules files: {', '.join(have)}", "rules"
                )
            return Path(str(target))
        p = Path(ref).expanduser()
        if not p.is_absolute() and self.spec.path is not None:
            p = Path(self.spec.path).resolve().parent / p
        return p

    def load_checked(self, schema: FactSchema) -> LabelledSet:
        """The spec's labelled set with every fact checked against the rules' schema
        (:func:`hybridroute.datasets._registry.load_checked`): a fact the router would
        refuse is a :class:`~hybridroute.exceptions.DatasetError` naming its row and column
        before anything is trained; an option the loader does not take names
        ``dataset.options`` (as :meth:`load_dataset`)."""
        from ...datasets._registry import load_checked

        try:
            return load_checked(self.spec.dataset, schema, **self.spec.dataset_options)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, UserInputError):
                raise
            raise self.error(str(exc), "dataset.options") from None

    def run(self, progress: Progress | None = None) -> KindOutput:
        from ...calibration import fit_policy
        from ...evaluation import evaluate_router
        from ...router import HybridRouter
        from ...rules import load_rules

        st = self.spec.settings
        rules = load_rules(self.rules_path())
        ds = self.load_checked(rules.schema)
        train = self.role(ds, "train")
        calibration = self.role(ds, "calibration")
        test = self.role(ds, "test")
        total = len(st["policies"]) + 1
        if progress:
            progress("training the classifier", 0, total)
        clf = self.train_classifier(train.texts, train.y)
        if progress:
            progress("training the classifier", 1, total)
        proba = clf.predict_proba(calibration.texts)
        classes = [str(c) for c in clf.classes_]
        oos_label = ds.oos_label if ds.oos_label in set(calibration.y) | set(classes) else None
        rows, labels, artifacts = [], [], []
        # rules read facts only: every policy's evaluation classifies the same test items
        counted: dict[str, Any] = {"n_classified": None, "n_next_step": 0}
        fallbacks: list[str] = []
        for i, pol in enumerate(st["policies"]):
            args = {k: v for k, v in pol.items() if k != "label"}
            provenance = {
                "dataset": ds.name,
                "dataset_fingerprint": ds.fingerprint,
                "experiment": self.spec.name,
                "experiment_policy": pol["label"],
            }
            try:
                policy = fit_policy(
                    proba,
                    calibration.y,
                    classes,
                    seed=self.spec.seed,
                    oos_label=oos_label,
                    provenance=provenance,
                    # the classifier was trained here, on the train rows only
                    training_fingerprint=train.fingerprint,
                    calibration_fingerprints={"the calibration rows": calibration.fingerprint},
                    **args,
                )
            except ValueError as exc:
                if isinstance(exc, UserInputError):
                    raise
                raise self.error(str(exc), f"policies[{i}]") from None
            router = HybridRouter(
                rules=rules,
                classifier=clf,
                policy=policy,
                name=st["router"]["name"],
                version=st["router"]["version"],
            )
            ev = evaluate_router(router, test, n_boot=st["n_boot"], seed=self.spec.seed)
            auto = policy.thresholds.get("auto")
            acc_ci = ev.get("accuracy_ci") or [None, None]
            ns_ci = ev.get("next_step_accuracy_ci") or [None, None]
            stages = ev.get("decisions_by_stage") or {}
            row = {
                "policy": pol["label"],
                "objective": pol["objective"],
                "target": pol.get("target"),
                "threshold": auto
                if isinstance(auto, (int, float)) and math.isfinite(auto)
                else None,
                "certified": bool(policy.certified),
                "accuracy": ev.get("accuracy"),
                "accuracy_ci_low": acc_ci[0],
                "accuracy_ci_high": acc_ci[1],
                "coverage": ev.get("coverage"),
                "selective_precision": ev.get("selective_precision"),
                "next_step_accuracy": ev.get("next_step_accuracy"),
                "next_step_ci_low": ns_ci[0],
                "next_step_ci_high": ns_ci[1],
                **{f"stage_{s}": int(stages.get(s, 0)) for s in STAGES},
            }
            rows.append({k: rounded(v) for k, v in row.items()})
            counted.update(
                n_classified=ev.get("n_classified"), n_next_step=ev.get("n_next_step") or 0
            )
            if ev.get("fallbacks_by_cause"):
                causes = ", ".join(f"{k} {v}" for k, v in ev["fallbacks_by_cause"].items())
                fallbacks.append(f"{pol['label']}: {causes}")
            labels.append(pol["label"])
            artifacts.append(
                {
                    "policy/policy.json": policy.to_dict(),
                    "evaluation/summary.json": _plain_summary(ev.summary()),
                }
            )
            if progress:
                progress(f"policy {pol['label']}", i + 2, total)
        notes = [
            f"Trained on {len(train)} {'+'.join(self.spec.splits['train'])} rows; policies fitted on "
            f"{len(calibration)} calibration rows (a share fits each policy's calibrator, the "
            f"rest its thresholds: sizes in its policy.json); evaluated on {len(test)} test rows "
            f"({st['n_boot']} bootstrap resamples for the intervals).",
            f"Accuracy, coverage and selective precision cover the {counted['n_classified']} test "
            "items no rule decided (the classifier ranked them); next-step accuracy covers the "
            f"{counted['n_next_step']} with a gold next step.",
            STAGES_NOTE,
        ]
        if fallbacks:
            notes.append("Fallbacks by cause: " + "; ".join(fallbacks) + ".")
        summary = {"n_train": len(train), "n_calibration": len(calibration), "n_test": len(test)}
        info = {
            "dataset": ds.name,
            "dataset_fingerprint": ds.fingerprint,
            "rules": str(self.rules_path()),
            "rules_name": rules.name,
            "rules_version": rules.version,
            "classifier": {
                "kind": "local",
                "C": float(getattr(clf, "C_", math.nan)),
                "classes": len(classes),
            },
        }
        return KindOutput(
            rows=rows,
            labels=labels,
            details=[{} for _ in rows],
            summary=summary,
            notes=notes,
            info=info,
            row_artifacts=artifacts,
        )


def _plain_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluation summary without timings (they differ run to run)."""
    return {k: v for k, v in summary.items() if k != "latency"}
