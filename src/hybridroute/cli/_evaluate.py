"""``hybridroute evaluate``: score a classifier or a router on a labelled set.

The report, the MLflow run and what is printed all go through one
:class:`~hybridroute._scrub.Scrubber`: credentials never reach them, and the facts named
with ``--sensitive`` are written as salted hashes wherever their values appear.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError

#: What ``--json`` prints: the headline metrics, the count each is over, and the breakdowns.
_JSON_KEYS = (
    "n",
    "n_classified",
    "n_auto_routed",
    "n_next_step",
    "n_with_confidence",
    "accuracy",
    "accuracy_ci",
    "macro_f1",
    "macro_f1_ci",
    "ece",
    "aurc",
    "coverage",
    "selective_precision",
    "next_step_accuracy",
    "next_step_accuracy_ci",
    "abstention_rate",
    "decisions_by_stage",
    "abstentions_by_reason",
    "fallbacks_by_cause",
    "bootstrap",
    "latency",
    "usage",
    "label_mix",
    "rule_coverage",
    "dataset",
    "split",
    "dataset_fingerprint",
    "mode",
)


def headline_lines(ev: dict[str, Any]) -> list[str]:
    """The metrics as the report's table names them, each count saying what it counts
    (:func:`hybridroute.evaluation._report._headline`: one definition of the labels), then
    decisions by stage with what each stage means, and fallbacks by cause."""
    from ..evaluation._report import STAGE_MEANING, _headline

    lines = [
        f"  {name:<22} {_fmt(value):>18}  {meaning}"
        for name, value, meaning in _headline(ev)
        if value is not None
    ]
    stages = ev.get("decisions_by_stage") or {}
    if stages:
        lines.append(f"  decisions by stage (of the {ev.get('n')} items):")
        names = [*STAGE_MEANING, *(k for k in stages if k not in STAGE_MEANING)]
        for stage in names:
            lines.append(
                f"    {stage:<10} {stages.get(stage, 0):>7}  {STAGE_MEANING.get(stage, '')}".rstrip()
            )
    causes = ev.get("fallbacks_by_cause") or {}
    if causes:
        lines.append("  fallbacks by cause (the fallback stage's decisions):")
        width = max(len(c) for c in causes)
        lines += [f"    {cause:<{width}} {count:>7}" for cause, count in causes.items()]
    if ev.get("rule_coverage"):
        from ..rules._coverage import coverage_lines

        lines += ["  " + x for x in coverage_lines(ev["rule_coverage"])]
    return lines


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if not math.isfinite(v) else f"{v:.4f}"
    if isinstance(v, list) and len(v) == 2:
        return f"[{_fmt(v[0])}, {_fmt(v[1])}]"
    return str(v)


def evaluate(
    dataset: str = typer.Option(
        ..., "--dataset", help="banking77, clinc150, support-tickets, csv:PATH, jsonl:PATH."
    ),
    split: str = typer.Option("test", "--split", help="Split to evaluate on."),
    model: Path | None = typer.Option(None, "--model", help="Saved classifier directory."),
    router: Path | None = typer.Option(None, "--router", help="Router bundle directory."),
    policy: Path | None = typer.Option(
        None, "--policy", help="Fitted policy (with --model): adds selective metrics."
    ),
    oos: str = typer.Option(
        "label", "--oos", help="clinc150: keep out-of-scope rows as a label, or drop them."
    ),
    report: Path | None = typer.Option(
        None, "--report", help="Write JSON, Markdown, HTML (with plots) and errors here."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap intervals."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the run to MLflow."),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI (default: ./mlflow.db)."
    ),
    experiment: str = typer.Option(
        "hybridroute-evaluate", "--experiment", help="MLflow experiment name."
    ),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Directory of public sets."),
    sensitive: list[str] = typer.Option(
        [],
        "--sensitive",
        help="A fact whose values are written as salted hashes wherever they appear "
        "(salt: HYBRIDROUTE_LOG_SALT); repeatable.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the headline metrics as JSON."),
) -> None:
    """Evaluate a classifier (--model, optionally with --policy) or a router (--router)."""
    import warnings

    from .._scrub import Scrubber
    from ..evaluation import evaluate_classifier, evaluate_router, write_report
    from ._datasets import load_set

    if (model is None) == (router is None):
        raise typer.BadParameter(
            "give exactly one of --model DIR or --router DIR", param_hint="--model/--router"
        )
    if oos not in ("label", "drop"):
        raise typer.BadParameter("must be 'label' or 'drop'", param_hint="--oos")
    scrub = Scrubber(sensitive)  # before any work: a missing salt is refused up front
    if report is not None:
        from ._outputs import check_output

        check_output(report, "--report", kind="dir")  # a directory, written into
    options: dict[str, Any] = {}
    if data_dir is not None:
        options["data_dir"] = data_dir
    if dataset == "clinc150":
        options["oos"] = oos
    r = None
    if router is not None:
        from ..router import load_router

        r = load_router(router)
    # with a router, every fact is checked against its schema before anything is routed
    # (datasets._registry.load_checked): a bad one is exit 2 naming row and column, not a
    # refusal in the middle of the batch
    ds = load_set(dataset, options, None if r is None else r.rules.schema)
    if split not in ds.splits:
        raise UserInputError(
            f"{ds.name} has no split {split!r} (splits: {', '.join(ds.splits) or 'none'})"
        )
    part = ds.split(split)
    scrub.learn(part.iter_facts())
    policy_obj = None
    params: dict[str, Any] = {"dataset": dataset, "split": split, "seed": seed, "n_boot": n_boot}
    tags: dict[str, Any] = {
        "hybridroute.dataset_fingerprint": ds.fingerprint,
        "hybridroute.split_fingerprint": part.fingerprint,
    }
    if r is not None:
        result = evaluate_router(r, part, n_boot=n_boot, seed=seed)
        policy_obj = r.policy
        params.update(router=str(router))
        tags.update({"hybridroute.router": r.name, "hybridroute.router_version": r.version})
        title = f"{r.name} {r.version} on {ds.name}/{split}"
    else:
        from ..calibration import Policy
        from ..classifiers import load_classifier

        clf = load_classifier(model)  # type: ignore[arg-type]
        if policy is not None:
            policy_obj = Policy.load(policy)
            from ..router._bundle import check_model_binding

            check_model_binding(
                policy_obj, clf, policy_source=str(policy), model_source=f"--model {model}"
            )
        result = evaluate_classifier(
            clf, part.texts, part.y, policy=policy_obj, n_boot=n_boot, seed=seed
        )
        params.update(
            model=str(model),
            classifier=getattr(clf, "kind", "?"),
            policy=str(policy) if policy else None,
        )
        tags.update(
            {"hybridroute.model_training_fingerprint": getattr(clf, "training_fingerprint_", None)}
        )
        title = f"{getattr(clf, 'kind', 'classifier')} classifier on {ds.name}/{split}"
    result["dataset"] = ds.name
    result["split"] = split
    result["dataset_fingerprint"] = ds.fingerprint
    if policy_obj is not None and (policy_obj.calibration_data or {}).get("label_counts"):
        mix = policy_obj.check_label_mix(part.y)
        result["label_mix"] = mix.to_dict() if hasattr(mix, "to_dict") else dict(vars(mix))
        if getattr(mix, "departs", False):
            warnings.warn(
                scrub.text(
                    f"the label mix of {ds.name}/{split} departs markedly from the policy's "
                    "calibration data; its certified threshold holds only for traffic like its "
                    "calibration data"
                ),
                RuntimeWarning,
                stacklevel=1,
            )
    files = None
    if report is not None:
        from ._outputs import output_errors

        with output_errors(report, "--report"):
            files = write_report(result, report, title=title, scrubber=scrub)
    run_id = None
    tracker = None
    if track:
        from ..tracking import Tracker, log_evaluation

        tracker = Tracker(tracking_uri, experiment=experiment, scrubber=scrub)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracker's own one-time warning is echoed below
            run_id = log_evaluation(
                tracker,
                result,
                run_name=title,
                params=params,
                tags=tags,
                report_dir=report,
                policy_path=policy if model is not None else None,
            )
        if tracker.warning:
            typer.echo(f"warning: {scrub.text(tracker.warning)}", err=True)
    out = {k: result.get(k) for k in _JSON_KEYS if k in result}
    out["report"] = {k: str(v) for k, v in files.items()} if files else None
    out["mlflow_run_id"] = run_id
    if as_json:
        typer.echo(scrub.json(out, indent=2))
        return
    typer.echo(scrub.text(title))
    for line in headline_lines(scrub.value(out)):
        typer.echo(line)
    if files:
        typer.echo(f"  report: {scrub.text(str(files['html']))}")
    if run_id and tracker is not None:
        typer.echo(f"  mlflow: run {run_id} in {tracker.display_uri}")
        for line in tracker.ui_hint(run_id):
            typer.echo(f"    {scrub.text(line)}")


def register(app: typer.Typer) -> None:
    """Register ``evaluate`` on ``app``."""
    app.command("evaluate")(evaluate)
