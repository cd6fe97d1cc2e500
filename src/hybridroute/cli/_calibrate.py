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
from enum import StrEnum
from pathlib import Path
from typing import Any

import click
import typer

from ..exceptions import UserInputError
from ._outputs import check_output, output_errors


class Objective(StrEnum):
    precision = "precision"
    empirical = "empirical"
    coverage = "coverage"
    cost = "cost"
    three_way = "three-way"
    oos = "oos"


class Calibrator(StrEnum):
    temperature = "temperature"
    isotonic = "isotonic"
    none = "none"


class Fallback(StrEnum):
    human_review = "human_review"
    ask_user = "ask_user"


_OBJECTIVE_HELP = (
    "precision: certified precision >= target with probability 1-delta; "
    "empirical: calibration precision >= target, no guarantee; "
    "coverage: auto-route a target share (guaranteed at 1-delta); "
    "cost: minimise declared costs (--cost-*); "
    "three-way: auto-route at target, ask the user at --ask-target, else human review; "
    "oos: out-of-scope recall >= target plus certified --precision-target on the rest."
)


def register(app: typer.Typer) -> None:
    """Register ``calibrate`` on ``app``."""
    app.command(
        "calibrate",
        help="Fit a routing policy (calibrator, thresholds, provenance) and write it as JSON.",
    )(calibrate)


def calibrate(
    dataset: str | None = typer.Option(
        None, "--dataset", help="banking77, clinc150, support-tickets, csv:PATH, jsonl:PATH."
    ),
    model: Path | None = typer.Option(None, "--model", help="A saved classifier directory."),
    out: Path = typer.Option(
        ..., "--out", help="Where to write the policy JSON (with --from-log: the new bundle)."
    ),
    from_log: str | None = typer.Option(
        None,
        "--from-log",
        help="Refit the --router bundle's threshold on its audited decisions in this "
        "decision log (sqlite:///PATH, a path, postgresql://...) instead of a dataset.",
    ),
    router: Path | None = typer.Option(
        None, "--router", help="--from-log: the incumbent bundle that logged the decisions."
    ),
    router_version: str | None = typer.Option(
        None, "--router-version", help="--from-log: the logged version (the bundle's own)."
    ),
    version: str | None = typer.Option(
        None, "--version", help="--from-log: the new bundle's version (default VERSION-logSEQ)."
    ),
    since: str | None = typer.Option(
        None,
        "--since",
        help="--from-log: decisions logged at or after this time (ISO 8601 with a UTC "
        "offset, e.g. 2026-05-01T00:00:00Z).",
    ),
    until: str | None = typer.Option(
        None,
        "--until",
        help="--from-log: decisions logged before this time (ISO 8601 with a UTC offset).",
    ),
    max_disputed_share: float | None = typer.Option(
        None,
        "--max-disputed-share",
        help="--from-log: refuse when more than this share of the labelled audits is "
        "disputed (their labels disagree, no adjudication settles them; default 0.05).",
    ),
    objective: Objective = typer.Option(
        Objective.precision, "--objective", help=_OBJECTIVE_HELP, case_sensitive=False
    ),
    target: float | None = typer.Option(
        None,
        "--target",
        help="The objective's target: precision (precision, empirical, three-way), share "
        "auto-routed (coverage) or out-of-scope recall (oos). Default 0.95, coverage 0.8.",
    ),
    delta: float | None = typer.Option(
        None,
        "--delta",
        help="Allowed probability of a wrong certificate (default 0.05; with --from-log "
        "the bundle's).",
    ),
    ask_target: float = typer.Option(
        0.8, "--ask-target", help="three-way: precision certified for the ask-the-user zone."
    ),
    precision_target: float = typer.Option(
        0.95, "--precision-target", help="oos: precision certified for routed items."
    ),
    cost_misroute: float = typer.Option(10.0, "--cost-misroute", help="cost: one misroute."),
    cost_ask_user: float | None = typer.Option(
        1.0, "--cost-ask-user", help="cost: asking the user (omit the zone with --no-ask)."
    ),
    no_ask: bool = typer.Option(False, "--no-ask", help="cost: two zones only (no ask-the-user)."),
    cost_human_review: float = typer.Option(3.0, "--cost-human-review", help="cost: one review."),
    margin: bool = typer.Option(
        False, "--margin", help="Also certify a top-1/top-2 margin gate (same target, delta)."
    ),
    per_class: bool = typer.Option(
        False, "--per-class", help="Per-class thresholds (small classes pooled)."
    ),
    calibrator: Calibrator = typer.Option(
        Calibrator.temperature, "--calibrator", case_sensitive=False, help="Probability calibrator."
    ),
    calibrator_fraction: float = typer.Option(
        0.3, "--calibrator-fraction", help="Share of calibration rows that fit the calibrator."
    ),
    calibration_fraction: float = typer.Option(
        0.2,
        "--calibration-fraction",
        help="Share of train carved into a calibration split when the set has none.",
    ),
    split: str = typer.Option(
        "calibration",
        "--split",
        help="Split holding the calibration rows (e.g. val for clinc150); carved from "
        "train when it is 'calibration' and the set has none.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of every split made here."),
    fallback: Fallback = typer.Option(
        Fallback.human_review, "--fallback", help="Action below the threshold without an ask zone."
    ),
    evidence: Path | None = typer.Option(
        None, "--evidence", help="Labelled evidence JSONL: fit per-source evidence thresholds."
    ),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Directory of public sets."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Fit a policy on a labelled set's calibration split and write it to ``--out``."""
    if from_log is not None:
        from ._recalibrate import recalibrate_cmd

        # options of fitting from a dataset, given with values other than their defaults
        dataset_only = {
            "--dataset": dataset is not None,
            "--model": model is not None,
            "--objective": objective is not Objective.precision,
            "--calibrator": calibrator is not Calibrator.temperature,
            "--margin": margin,
            "--per-class": per_class,
            "--evidence": evidence is not None,
            "--split": split != "calibration",
        }
        given = [flag for flag, set_ in dataset_only.items() if set_]
        if given:
            raise click.BadParameter(
                f"--from-log refits the --router bundle's own threshold; {', '.join(given)} "
                "apply to fitting from a dataset",
                param_hint="--from-log",
            )
        _check_window(since, until)
        # a new router bundle: a directory that is absent or empty (there is no --force)
        check_output(out, "--out", kind="dir", new_dir=True)
        recalibrate_cmd(
            log_url=from_log,
            router=router,
            out=out,
            router_version=router_version,
            version=version,
            target=target,
            delta=delta,
            since=since,
            until=until,
            seed=seed,
            as_json=as_json,
            **({} if max_disputed_share is None else {"max_disputed_share": max_disputed_share}),
        )
        return
    for flag, needed in (("--dataset", dataset), ("--model", model)):
        if needed is None:
            raise click.BadParameter(
                "is required (or --from-log with --router to refit from a decision log)",
                param_hint=flag,
            )
    assert dataset is not None and model is not None
    check_output(out, "--out")  # the policy file: before the set and the model are loaded
    if delta is None:
        delta = 0.05
    for flag, log_only in (
        ("--router", router),
        ("--router-version", router_version),
        ("--version", version),
        ("--since", since),
        ("--until", until),
        ("--max-disputed-share", max_disputed_share),
    ):
        if log_only is not None:
            raise click.BadParameter("only goes with --from-log", param_hint=flag)
    from ..calibration import fit_policy, load_evidence_labels
    from ..classifiers import load_classifier
    from ..datasets import load_dataset
    from ..exceptions import DatasetError

    if target is None:
        target = 0.8 if objective is Objective.coverage else 0.95
    for name, value in (
        ("--target", target),
        ("--delta", delta),
        ("--ask-target", ask_target),
        ("--precision-target", precision_target),
    ):
        if not 0.0 < value < 1.0:
            raise click.BadParameter(f"must be between 0 and 1, got {value}", param_hint=name)
    if not 0.0 <= calibrator_fraction < 1.0:
        raise click.BadParameter("must be in [0, 1)", param_hint="--calibrator-fraction")
    if per_class and objective is Objective.cost:
        raise click.BadParameter(
            "--per-class works with the precision, empirical, coverage, three-way "
            "and oos objectives",
            param_hint="--per-class",
        )

    options: dict[str, Any] = {}
    if data_dir is not None:
        options["data_dir"] = data_dir
    ds = load_dataset(dataset, **options)
    clf = load_classifier(model)
    classes = [str(c) for c in clf.classes_]  # type: ignore[attr-defined]
    # the policy is bound to exactly this model (its verified manifest's fingerprint)
    model_fingerprint = clf.fingerprint()

    carved = False
    if split != "calibration" and split not in ds.splits:
        raise DatasetError(
            f"{ds.name} has no split {split!r}; its splits are {', '.join(ds.splits)}",
            column="split",
        )
    if split == "calibration" and "calibration" not in ds.splits:
        if "train" not in ds.splits:
            raise DatasetError(
                f"{ds.name} has neither a calibration nor a train split to carve one from",
                column="split",
            )
        train_fp = ds.split("train").fingerprint
        if getattr(clf, "training_fingerprint_", None) in (train_fp, ds.fingerprint):
            raise DatasetError(
                f"{model} was trained on the whole train split of {ds.name}, which would "
                "include the calibration rows; train it on a set with a calibration split "
                f"carved out (fraction {calibration_fraction}, seed {seed})",
                column="split",
            )
        ds = ds.with_calibration_split(calibration_fraction, seed=seed)
        carved = True
    cal = ds.split(split)
    gold = [str(v) for v in cal.y]
    oos_label = ds.oos_label
    if objective is Objective.oos and (oos_label is None or oos_label not in gold):
        raise DatasetError(
            f"{ds.name} has no out-of-scope rows in its {split} split; "
            "the oos objective needs some",
            column="label",
        )
    records = load_evidence_labels(evidence) if evidence is not None else None
    proba = clf.predict_proba(list(cal.texts))

    policy = fit_policy(
        proba,
        gold,
        classes,
        objective=objective.value,
        target=target,
        delta=delta,
        calibrator=calibrator.value,
        calibrator_fraction=calibrator_fraction,
        seed=seed,
        oos_label=oos_label,
        margin=margin,
        per_class=per_class,
        ask_target=ask_target,
        precision_target=precision_target,
        costs={
            "misroute": cost_misroute,
            "ask_user": None if no_ask else cost_ask_user,
            "human_review": cost_human_review,
        },
        fallback=fallback.value,
        evidence_records=records,
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
            "model_training_fingerprint": getattr(clf, "training_fingerprint_", None),
        },
        model_fingerprint=model_fingerprint,
    )
    with output_errors(out, "--out"):
        policy.save(out)
    summary = _summary(policy, out)
    if as_json:
        from .._scrub import Scrubber

        typer.echo(Scrubber().json(summary, sort_keys=True, indent=2))
    else:
        _print(summary)


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


def _summary(policy: Any, out: Path) -> dict[str, Any]:
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


def _print(s: dict[str, Any]) -> None:
    lines = [
        f"policy written to {s['out']} (sha256 {s['content_sha256'][:12]}, "
        f"{'signed' if s['signed'] else 'not signed'})",
        f"model            {s['model_fingerprint'][:12]} (the policy is bound to it)",
        f"objective        {s['objective']}"
        + (f" (target {_fmt(s['target'])}, delta {_fmt(s['delta'])})" if s["target"] else ""),
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
