"""``hybridroute calibrate``: fit a policy (calibrator + thresholds) from labelled data.

The dataset's ``calibration`` split is used; a set without one gets it carved from its
``train`` split (``--calibration-fraction``, ``--seed``), and the model must not have been
trained on those rows. The calibration rows are divided once more (seeded): a share
(``--calibrator-fraction``) fits the probability calibrator, the rest fits the thresholds,
so a certificate is computed on data the calibrator never saw. The fitting itself is
:func:`hybridroute.calibration.fit_policy`; this command loads the set and the model,
carves the split, checks the model was not trained on it, and prints the summary.

The policy records the fingerprint of ``--model`` (``model_fingerprint``), so that
``hybridroute router build`` and every bundle load refuse to pair it with another model. It
is sealed, and signed when ``HYBRIDROUTE_SIGNING_KEY`` is set (the model must then be
signed too, or it is refused when loaded).

numpy, pandas and scikit-learn come in with the dataset and classifier packages, so those
imports stay inside the command function.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer

# the registries and the defaults fit_policy reads too (numpy only: scipy and scikit-learn
# come in with the fit)
from ..calibration import FitOptions
from ..calibration.techniques import OBJECTIVES
from ..exceptions import UserInputError
from ._datasets import _ID, _LABEL, _SPLIT, _TEXT, _options
from ._outputs import check_output, output_errors

if TYPE_CHECKING:
    from ..calibration import Policy

#: The choices of --objective, --calibrator and --fallback: the registries' names.
DEFAULTS = FitOptions()
Objective = StrEnum("Objective", {n.replace("-", "_"): n for n in FitOptions.CHOICES["objective"]})  # type: ignore[misc]
Calibrator = StrEnum("Calibrator", {n: n for n in FitOptions.CHOICES["calibrator"]})  # type: ignore[misc]
Fallback = StrEnum("Fallback", {n: n for n in FitOptions.CHOICES["fallback"]})  # type: ignore[misc]

_OBJECTIVE_HELP = "; ".join(f"{name}: {t.objective_help}" for name, t in OBJECTIVES.items()) + "."
_TARGET_DEFAULTS = f"Default {DEFAULTS.target:g}" + "".join(
    f", {name} {t.default_target:g}"
    for name, t in OBJECTIVES.items()
    if t.default_target != DEFAULTS.target
)


def register(app: typer.Typer) -> None:
    """Register ``calibrate`` on ``app``."""
    app.command(
        "calibrate",
        help="Fit a routing policy (calibrator, thresholds, provenance) and write it as JSON.",
    )(calibrate)


#: Share of train carved into a calibration split when a set has none (--calibration-fraction).
_CALIBRATION_FRACTION = 0.2

#: The options of ``calibrate``, by parameter (declared here to keep the command short).
_OPTIONS: dict[str, Any] = {
    "dataset": typer.Option(
        None, "--dataset", help="banking77, clinc150, support-tickets, csv:PATH, jsonl:PATH."
    ),
    "model": typer.Option(
        None,
        "--model",
        help="A saved classifier directory (with --scores: the model the scores come from; "
        "the policy is bound to it).",
    ),
    "scores": typer.Option(
        None,
        "--scores",
        help="Fit on a model's scores read from this file (CSV, JSONL, or Parquet with "
        "pyarrow) instead of scoring --dataset with --model: score:<label> columns (or "
        "predicted + confidence) and the gold label; see hybridroute.scores.",
    ),
    "test_scores": typer.Option(
        None,
        "--test-scores",
        help="--scores: evaluate the policy on these other rows' scores (same format and "
        "classes) instead of a held-out share.",
    ),
    "test_fraction": typer.Option(
        None,
        "--test-fraction",
        help="--scores without --test-scores: share of the rows held out (seeded by --seed) "
        "to evaluate the policy (default 0.25); 0 evaluates nothing.",
    ),
    "oos_label": typer.Option(
        None,
        "--oos-label",
        help="The gold label of out-of-scope rows: of a --scores file (may be outside the "
        "classes), or of a --dataset file (default: 'out_of_scope' or 'oos' when the file uses "
        "one; 'none' for none). Give what `train` was given.",
    ),
    "out": typer.Option(
        ..., "--out", help="Where to write the policy JSON (with --from-log: the new bundle)."
    ),
    "from_log": typer.Option(
        None,
        "--from-log",
        help="Refit the --router bundle's threshold on its audited decisions in this "
        "decision log (sqlite:///PATH, a path, postgresql://...) instead of a dataset.",
    ),
    "router": typer.Option(
        None, "--router", help="--from-log: the incumbent bundle that logged the decisions."
    ),
    "router_version": typer.Option(
        None, "--router-version", help="--from-log: the logged version (the bundle's own)."
    ),
    "version": typer.Option(
        None, "--version", help="--from-log: the new bundle's version (default VERSION-logSEQ)."
    ),
    "since": typer.Option(
        None,
        "--since",
        help="--from-log: decisions logged at or after this time (ISO 8601 with a UTC "
        "offset, e.g. 2026-05-01T00:00:00Z).",
    ),
    "until": typer.Option(
        None,
        "--until",
        help="--from-log: decisions logged before this time (ISO 8601 with a UTC offset).",
    ),
    "max_disputed_share": typer.Option(
        None,
        "--max-disputed-share",
        help="--from-log: refuse when more than this share of the labelled audits is "
        "disputed (their labels disagree, no adjudication settles them; default 0.05).",
    ),
    "objective": typer.Option(
        Objective(DEFAULTS.objective), "--objective", help=_OBJECTIVE_HELP, case_sensitive=False
    ),
    "target": typer.Option(
        None,
        "--target",
        help="The objective's target: precision (precision, empirical, three-way), share "
        f"auto-routed (coverage) or out-of-scope recall (oos). {_TARGET_DEFAULTS}.",
    ),
    "delta": typer.Option(
        None,
        "--delta",
        help=f"Allowed probability of a wrong certificate (default {DEFAULTS.delta:g}; with "
        "--from-log the bundle's).",
    ),
    "ask_target": typer.Option(
        DEFAULTS.ask_target,
        "--ask-target",
        help="three-way: precision certified for the ask-the-user zone.",
    ),
    "precision_target": typer.Option(
        DEFAULTS.precision_target,
        "--precision-target",
        help="oos: precision certified for routed items.",
    ),
    "cost_misroute": typer.Option(
        DEFAULTS.cost_misroute, "--cost-misroute", help="cost: one misroute."
    ),
    "cost_ask_user": typer.Option(
        DEFAULTS.cost_ask_user,
        "--cost-ask-user",
        help="cost: asking the user (omit the zone with --no-ask).",
    ),
    "no_ask": typer.Option(False, "--no-ask", help="cost: two zones only (no ask-the-user)."),
    "cost_human_review": typer.Option(
        DEFAULTS.cost_human_review, "--cost-human-review", help="cost: one review."
    ),
    "margin": typer.Option(
        False, "--margin", help="Also certify a top-1/top-2 margin gate (same target, delta)."
    ),
    "per_class": typer.Option(
        False, "--per-class", help="Per-class thresholds (small classes pooled)."
    ),
    "calibrator": typer.Option(
        Calibrator(DEFAULTS.calibrator),
        "--calibrator",
        case_sensitive=False,
        help="Probability calibrator.",
    ),
    "calibrator_fraction": typer.Option(
        DEFAULTS.calibrator_fraction,
        "--calibrator-fraction",
        help="Share of calibration rows that fit the calibrator.",
    ),
    "calibration_fraction": typer.Option(
        _CALIBRATION_FRACTION,
        "--calibration-fraction",
        help="Share of train carved into a calibration split when the set has none.",
    ),
    "split": typer.Option(
        "calibration",
        "--split",
        help="Split holding the calibration rows (e.g. val for clinc150); carved from "
        "train when it is 'calibration' and the set has none.",
    ),
    "seed": typer.Option(DEFAULTS.seed, "--seed", help="Seed of every split made here."),
    "fallback": typer.Option(
        Fallback(DEFAULTS.fallback),
        "--fallback",
        help="Action below the threshold without an ask zone.",
    ),
    "evidence": typer.Option(
        None, "--evidence", help="Labelled evidence JSONL: fit per-source evidence thresholds."
    ),
    "data_dir": typer.Option(None, "--data-dir", help="Directory of public sets."),
    "as_json": typer.Option(False, "--json", help="Print the summary as JSON."),
}


def calibrate(
    dataset: str | None = _OPTIONS["dataset"],
    model: Path | None = _OPTIONS["model"],
    out: Path = _OPTIONS["out"],
    scores: Path | None = _OPTIONS["scores"],
    test_scores: Path | None = _OPTIONS["test_scores"],
    test_fraction: float | None = _OPTIONS["test_fraction"],
    oos_label: str | None = _OPTIONS["oos_label"],
    from_log: str | None = _OPTIONS["from_log"],
    router: Path | None = _OPTIONS["router"],
    router_version: str | None = _OPTIONS["router_version"],
    version: str | None = _OPTIONS["version"],
    since: str | None = _OPTIONS["since"],
    until: str | None = _OPTIONS["until"],
    max_disputed_share: float | None = _OPTIONS["max_disputed_share"],
    objective: Objective = _OPTIONS["objective"],
    target: float | None = _OPTIONS["target"],
    delta: float | None = _OPTIONS["delta"],
    ask_target: float = _OPTIONS["ask_target"],
    precision_target: float = _OPTIONS["precision_target"],
    cost_misroute: float = _OPTIONS["cost_misroute"],
    cost_ask_user: float | None = _OPTIONS["cost_ask_user"],
    no_ask: bool = _OPTIONS["no_ask"],
    cost_human_review: float = _OPTIONS["cost_human_review"],
    margin: bool = _OPTIONS["margin"],
    per_class: bool = _OPTIONS["per_class"],
    calibrator: Calibrator = _OPTIONS["calibrator"],
    calibrator_fraction: float = _OPTIONS["calibrator_fraction"],
    calibration_fraction: float = _OPTIONS["calibration_fraction"],
    split: str = _OPTIONS["split"],
    seed: int = _OPTIONS["seed"],
    fallback: Fallback = _OPTIONS["fallback"],
    evidence: Path | None = _OPTIONS["evidence"],
    data_dir: Path | None = _OPTIONS["data_dir"],
    as_json: bool = _OPTIONS["as_json"],
    text_column: str | None = _TEXT,
    label_column: str | None = _LABEL,
    split_column: str | None = _SPLIT,
    id_column: str | None = _ID,
) -> None:
    """Fit a policy on a labelled set's calibration split and write it to ``--out``."""
    scores_only = {
        "--test-scores": test_scores is not None,
        "--test-fraction": test_fraction is not None,
    }
    file_options = _options(
        data_dir=data_dir,
        text_column=text_column,
        label_column=label_column,
        split_column=split_column,
        id_column=id_column,
        oos_label=None if scores is not None else oos_label,
    )
    # the file options given: they apply to fitting from a --dataset file only
    columns_given = {
        f"--{name}-column": value is not None
        for name, value in (
            ("text", text_column), ("label", label_column), ("split", split_column),
            ("id", id_column),
        )
    }  # fmt: skip
    if scores is None:
        _refuse_first(scores_only, "only goes with --scores")
    if from_log is not None and scores is not None:
        raise click.BadParameter(
            "fits from a decision log; leave out --scores", param_hint="--from-log"
        )
    if from_log is not None:
        _from_log(
            from_log, router, out,
            given={
                "--dataset": dataset is not None,
                "--model": model is not None,
                "--objective": objective != DEFAULTS.objective,
                "--calibrator": calibrator != DEFAULTS.calibrator,
                "--margin": margin,
                "--per-class": per_class,
                "--evidence": evidence is not None,
                "--split": split != "calibration",
                "--oos-label": oos_label is not None,
                **columns_given,
            },
            router_version=router_version, version=version, target=target, delta=delta,
            since=since, until=until, seed=seed, as_json=as_json,
            max_disputed_share=max_disputed_share,
        )  # fmt: skip
        return
    log_only = {
        "--router": router,
        "--router-version": router_version,
        "--version": version,
        "--since": since,
        "--until": until,
        "--max-disputed-share": max_disputed_share,
    }
    _refuse_first({f: v is not None for f, v in log_only.items()}, "only goes with --from-log")
    fit_args = _fit_args(
        objective, target, delta, calibrator, calibrator_fraction, seed, margin, per_class,
        ask_target, precision_target, cost_misroute, cost_ask_user, no_ask, cost_human_review,
        fallback,
    )  # fmt: skip
    if scores is not None:
        dataset_only = {
            "--dataset": dataset is not None,
            "--split": split != "calibration",
            "--data-dir": data_dir is not None,
            "--calibration-fraction": calibration_fraction != _CALIBRATION_FRACTION,
            **columns_given,
        }
        _refuse_given(
            dataset_only, "--scores fits on the file's rows; {} apply to --dataset", "--scores"
        )
        check_output(out, "--out", inputs=[scores, test_scores])
        _check_options(fit_args)
        from ._scores import calibrate_from_scores

        calibrate_from_scores(
            scores=scores,
            out=out,
            test_scores=test_scores,
            test_fraction=0.25 if test_fraction is None else test_fraction,
            model=model,
            oos_label=oos_label,
            evidence=evidence,
            as_json=as_json,
            **fit_args,
        )
        return
    _refuse_first(
        {"--dataset": dataset is None, "--model": model is None},
        "is required (or --from-log with --router to refit from a decision log)",
    )
    assert dataset is not None and model is not None
    check_output(out, "--out")  # the policy file: before the set and the model are loaded
    _check_options(fit_args)  # before the set and the model are loaded
    _from_dataset(
        dataset,
        model,
        out,
        fit_args,
        split=split,
        calibration_fraction=calibration_fraction,
        seed=seed,
        evidence=evidence,
        file_options=file_options,
        as_json=as_json,
    )


def _from_log(
    from_log: str,
    router: Path | None,
    out: Path,
    *,
    given: Mapping[str, bool],
    max_disputed_share: float | None,
    **options: Any,
) -> None:
    """``calibrate --from-log``: refit the bundle's threshold from its audited decisions
    (``given``: the options of fitting from a dataset the user set; each is refused)."""
    from ._recalibrate import recalibrate_cmd

    _refuse_given(
        given,
        "--from-log refits the --router bundle's own threshold; {} apply to fitting from a dataset",
        "--from-log",
    )
    _check_window(options["since"], options["until"])
    # a new router bundle: a directory that is absent or empty (there is no --force)
    check_output(out, "--out", kind="dir", new_dir=True)
    if max_disputed_share is not None:
        options["max_disputed_share"] = max_disputed_share
    recalibrate_cmd(log_url=from_log, router=router, out=out, **options)


def _refuse_first(options: Mapping[str, bool], why: str) -> None:
    """Refuse the first option of ``{flag: refused}`` that is refused, saying ``why``."""
    for flag, refused in options.items():
        if refused:
            raise click.BadParameter(why, param_hint=flag)


def _refuse_given(options: Mapping[str, bool], why: str, hint: str) -> None:
    """Refuse the options given (``{flag: given}``) that do not go with ``hint``'s way of
    fitting: ``why`` says so, its ``{}`` standing for the flags."""
    given = [flag for flag, set_ in options.items() if set_]
    if given:
        raise click.BadParameter(why.format(", ".join(given)), param_hint=hint)


def _fit_args(
    objective: Objective,
    target: float | None,
    delta: float | None,
    calibrator: Calibrator,
    calibrator_fraction: float,
    seed: int,
    margin: bool,
    per_class: bool,
    ask_target: float,
    precision_target: float,
    cost_misroute: float,
    cost_ask_user: float | None,
    no_ask: bool,
    cost_human_review: float,
    fallback: Fallback,
) -> dict[str, Any]:
    """The options of fitting a policy (from a dataset's or a file's scores)."""
    return {
        "objective": objective.value,
        "target": target,
        "delta": DEFAULTS.delta if delta is None else delta,
        "calibrator": calibrator.value,
        "calibrator_fraction": calibrator_fraction,
        "seed": seed,
        "margin": margin,
        "per_class": per_class,
        "ask_target": ask_target,
        "precision_target": precision_target,
        "costs": {
            "misroute": cost_misroute,
            "ask_user": None if no_ask else cost_ask_user,
            "human_review": cost_human_review,
        },
        "fallback": fallback.value,
    }


def _from_dataset(
    dataset: str,
    model: Path,
    out: Path,
    fit_args: dict[str, Any],
    *,
    split: str,
    calibration_fraction: float,
    seed: int,
    evidence: Path | None,
    file_options: dict[str, Any],
    as_json: bool,
) -> None:
    """Score the set's calibration rows with the model (none it was trained on), then fit
    and write the policy (:func:`fit_and_write`)."""
    from ..calibration import check_leakage, load_evidence_labels
    from ..classifiers import load_classifier
    from ..datasets import load_dataset
    from ..exceptions import DatasetError

    try:
        ds = load_dataset(dataset, **file_options)
    except TypeError as exc:  # a file option given for a public set
        raise click.UsageError(str(exc)) from None
    clf = load_classifier(model)
    classes = [str(c) for c in clf.classes_]  # type: ignore[attr-defined]
    # the policy is bound to exactly this model (its verified manifest's fingerprint)
    model_fingerprint = clf.fingerprint()
    training_fingerprint = getattr(clf, "training_fingerprint_", None)

    carved = False
    if split != "calibration" and split not in ds.splits:
        raise DatasetError(
            f"{ds.name} has no split {split!r}; its splits are {', '.join(ds.splits)}",
            column="split",
        )
    # the sets that hold the calibration rows: a model trained on one of them is refused
    holders = {f"the whole of {ds.name}": ds.fingerprint}
    if split == "calibration" and "calibration" not in ds.splits:
        if "train" not in ds.splits:
            raise DatasetError(
                f"{ds.name} has neither a calibration nor a train split to carve one from",
                column="split",
            )
        holders[
            f"the whole train split of {ds.name}, from which the calibration rows are carved "
            f"(train it on a set with them carved out: fraction {calibration_fraction}, "
            f"seed {seed})"
        ] = ds.split("train").fingerprint
        check_leakage(training_fingerprint, holders)  # before the carving
        ds = ds.with_calibration_split(calibration_fraction, seed=seed)
        carved = True
    cal = ds.split(split)
    holders[f"the {split} split of {ds.name}"] = cal.fingerprint
    check_leakage(training_fingerprint, holders)  # before the model scores the rows
    gold = [str(v) for v in cal.y]
    oos_label = ds.oos_label
    if OBJECTIVES[fit_args["objective"]].needs_oos_label and (
        oos_label is None or oos_label not in gold
    ):
        raise DatasetError(
            f"{ds.name} has no out-of-scope rows in its {split} split; "
            f"the {fit_args['objective']} objective needs some",
            column="label",
        )
    fit_and_write(
        clf.predict_proba(list(cal.texts)),
        gold,
        classes,
        fit_args={**fit_args, "oos_label": oos_label},
        evidence_records=load_evidence_labels(evidence) if evidence is not None else None,
        provenance={
            "command": "hybridroute calibrate",
            "dataset": dataset,
            "dataset_name": ds.name,
            "dataset_fingerprint": ds.fingerprint,
            "calibration_split": split,
            "calibration_split_fingerprint": cal.fingerprint,
            "calibration_split_carved": carved,
            "calibration_fraction": calibration_fraction if carved else None,
            "model_kind": getattr(clf, "kind", type(clf).__name__),
            "model_training_fingerprint": training_fingerprint,
        },
        model_fingerprint=model_fingerprint,
        training_fingerprint=training_fingerprint,
        calibration_fingerprints=holders,
        out=out,
        as_json=as_json,
    )


def fit_and_write(
    proba: Any,
    gold: list[str],
    classes: list[str],
    *,
    fit_args: Mapping[str, Any],
    evidence_records: Any,
    provenance: Mapping[str, Any],
    model_fingerprint: str | None,
    out: Path,
    as_json: bool,
    training_fingerprint: str | None = None,
    calibration_fingerprints: Mapping[str, str] | None = None,
) -> None:
    """Fit a policy on a model's scores of labelled rows, write it to ``out``, print its summary.

    The half of ``calibrate`` that starts from scores: ``--dataset``/``--model`` has the
    model score the calibration split and calls this; a mode that reads the scores from a
    file (``--scores FILE``: per-class scores and the gold label of each row) calls it with
    what it read.

    Parameters
    ----------
    proba : array-like of shape (n_rows, n_classes)
        The scores, columns in ``classes`` order.
    gold : list of str
        Each row's true label.
    classes : list of str
        The model's label set.
    fit_args : mapping
        :func:`~hybridroute.calibration.fit_policy`'s options (checked by it).
    evidence_records, provenance, model_fingerprint, training_fingerprint, calibration_fingerprints
        As :func:`~hybridroute.calibration.fit_policy` takes them.
    out : Path
        The policy file to write (atomically).
    as_json : bool
        Print the summary as JSON.
    """
    from ..calibration import fit_policy

    policy = fit_policy(
        proba,
        gold,
        classes,
        **fit_args,
        evidence_records=evidence_records,
        provenance=provenance,
        model_fingerprint=model_fingerprint,
        training_fingerprint=training_fingerprint,
        calibration_fingerprints=calibration_fingerprints,
    )
    with output_errors(out, "--out"):
        policy.save(out)
    summary = _summary(policy, out)
    if as_json:
        from .._scrub import Scrubber

        typer.echo(Scrubber().json(summary, sort_keys=True, indent=2))
    else:
        _print(summary)


def _check_options(fit_args: Mapping[str, Any]) -> None:
    """The options' checks (fit_policy's own), as a message naming the ``--option``."""
    try:
        FitOptions.check(**fit_args)
    except ValueError as exc:
        option = getattr(exc, "option", None)
        if option is None:
            raise
        raise click.BadParameter(str(exc), param_hint="--" + option.replace("_", "-")) from None


def _check_window(since: str | None, until: str | None) -> None:
    """``--since`` / ``--until``: ISO 8601 times with a UTC offset, since before until."""
    from .._time import parse_utc_time

    times = {}
    for option, value in (("--since", since), ("--until", until)):
        if value is not None:
            try:
                times[option] = parse_utc_time(value)
            except ValueError as exc:
                raise UserInputError(f"{option}: {exc}") from None
    if len(times) == 2 and times["--since"] >= times["--until"]:
        raise UserInputError(f"--since ({since}) must be before --until ({until})")


def _summary(policy: Policy, out: Path) -> dict[str, Any]:
    doc = policy.to_dict()
    t = doc["thresholds"]
    g = doc["guarantee"]
    prov = doc.get("provenance") or {}
    return {
        "out": str(out),
        "objective": doc["objective"]["name"],
        "calibrator": doc["calibrator"]["method"],
        "temperature": doc["calibrator"].get("temperature"),
        "threshold": t["auto"],
        "ask_threshold": t["ask"],
        "margin_threshold": t["margin"],
        "oos_cutoff": None if t["oos"] is None else t["oos"]["cutoff"],
        "per_class": t["per_class"] is not None,
        "certified": g["certified"],
        "target": g["target"],
        "delta": g["delta"],
        "bound": g["bound"],
        "reason": g["reason"],
        "required_calibration_size": g["required_calibration_size"],
        "expected_coverage": doc["expected"]["coverage"],
        "expected_precision": doc["expected"]["precision"],
        # the thresholds' rows (the certificate's n); the rest of the split fit the calibrator
        "calibration_size": doc["calibration_data"]["size"],
        "calibration_split": prov.get("calibration_split"),
        "objective_args": prov.get("objective_args"),
        "calibration_split_carved": prov.get("calibration_split_carved"),
        "calibrator_size": prov.get("calibrator_size"),
        "threshold_size": prov.get("threshold_size"),
        "out_of_scope_share": doc["calibration_data"].get("out_of_scope_share"),
        "evidence_thresholds": None
        if not doc["evidence"]
        else {k: v["threshold"] for k, v in doc["evidence"]["sources"].items()},
        "content_sha256": doc["content_sha256"],
        "signed": "signature" in doc,
        "model_fingerprint": doc["model_fingerprint"],
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4f}"
    return str(v)


def _rows_line(s: dict[str, Any]) -> str:
    """Which calibration rows fit what: the calibrator's share and the thresholds' rest."""
    n_cal, n_thr = s["calibrator_size"], s["threshold_size"]
    if n_cal is None or n_thr is None:  # a policy fitted without fit_policy's provenance
        return f"calibration size {s['calibration_size']} (rows the thresholds were fitted on)"
    split = f" of split {s['calibration_split']!r}" if s["calibration_split"] else ""
    if s["calibration_split_carved"]:
        split += " (carved from train)"
    head = f"calibration rows {n_cal + n_thr}{split}: "
    if not n_cal:
        return head + f"all {n_thr} fit the thresholds (no calibrator fitted)"
    return head + f"{n_cal} fit the {s['calibrator']} calibrator, the other {n_thr} the thresholds"


def _targets(s: dict[str, Any]) -> str:
    """The objective's targets and delta as asked; where the objective certifies two things
    (oos, three-way), how the delta was split between them (the guarantee records one)."""
    asked = s.get("objective_args") or {}
    if not s["target"]:
        return ""
    if s["objective"] == "oos" and asked.get("target") is not None:
        return (
            f" (out-of-scope recall target {_fmt(asked['target'])}, routed precision target "
            f"{_fmt(s['target'])}; delta {_fmt(asked.get('delta'))} split: "
            f"{_fmt(s['delta'])} each)"
        )
    if s["objective"] == "three-way" and asked.get("delta") not in (None, s["delta"]):
        return (
            f" (target {_fmt(s['target'])}, ask-zone target {_fmt(asked.get('ask_target'))}; "
            f"delta {_fmt(asked.get('delta'))} split: {_fmt(s['delta'])} each)"
        )
    return f" (target {_fmt(s['target'])}, delta {_fmt(s['delta'])})"


def _print(s: dict[str, Any]) -> None:
    lines = [
        f"policy written to {s['out']} (sha256 {s['content_sha256'][:12]}, "
        f"{'signed' if s['signed'] else 'not signed'})",
        f"model            {s['model_fingerprint'][:12]} (the policy is bound to it)",
        f"objective        {s['objective']}" + _targets(s),
        f"calibrator       {s['calibrator']}"
        + (f" (T = {_fmt(s['temperature'])})" if s["temperature"] is not None else ""),
        _rows_line(s),
        f"threshold        {_fmt(s['threshold'])}"
        + ("  (nothing is auto-routed)" if s["threshold"] is None else ""),
    ]
    if s["ask_threshold"] is not None:
        lines.append(f"ask threshold    {_fmt(s['ask_threshold'])}")
    if s["margin_threshold"] is not None:
        lines.append(f"margin           {_fmt(s['margin_threshold'])}")
    if s["oos_cutoff"] is not None or s["objective"] == "oos":
        lines.append(f"oos cut-off      {_fmt(s['oos_cutoff'])}")
    if s["per_class"]:
        lines.append("per-class        yes")
    if s["certified"]:
        lines.append(f"certified        yes (precision lower bound {_fmt(s['bound'])})")
    elif s["target"] is None or s["objective"] in ("empirical", "coverage", "cost"):
        lines.append("certified        no (this objective carries no precision guarantee)")
    else:
        lines.append("certified        NO")
    if s["reason"]:
        lines.append(f"reason           {s['reason']}")
    n_thr = s["threshold_size"] if s["threshold_size"] is not None else s["calibration_size"]
    if s["required_calibration_size"]:
        lines.append(
            f"would need       about {s['required_calibration_size']} rows fitting the "
            f"thresholds (has {n_thr})"
        )
    lines.append(
        f"expected coverage {_fmt(s['expected_coverage'])} "
        f"(share of the {n_thr} threshold rows auto-routed)"
    )
    if s["evidence_thresholds"]:
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in s["evidence_thresholds"].items())
        lines.append(f"evidence         {shown}")
    typer.echo("\n".join(lines))
    sys.stdout.flush()
