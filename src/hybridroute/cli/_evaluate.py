"""``hybridroute evaluate``: score a classifier or a router on a labelled set.

The report, the MLflow run and what is printed all go through one
:class:`~hybridroute._scrub.Scrubber`: credentials never reach them, and the facts named
with ``--sensitive`` are written as salted hashes wherever their values appear.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..exceptions import UserInputError
from ._datasets import _ID, _LABEL, _OOS_LABEL, _SPLIT, _TEXT, _options

if TYPE_CHECKING:
    from .._scrub import Scrubber
    from ..calibration import Policy
    from ..datasets import LabelledSet
    from ..router import HybridRouter
    from ..tracking import Tracker

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


#: The options of ``evaluate``, by parameter (declared here to keep the command short).
_OPTIONS: dict[str, Any] = {
    "dataset": typer.Option(
        ..., "--dataset", help="banking77, clinc150, support-tickets, csv:PATH, jsonl:PATH."
    ),
    "split": typer.Option("test", "--split", help="Split to evaluate on."),
    "model": typer.Option(None, "--model", help="Saved classifier directory."),
    "router": typer.Option(None, "--router", help="Router bundle directory."),
    "policy": typer.Option(
        None, "--policy", help="Fitted policy (with --model): adds selective metrics."
    ),
    "oos": typer.Option(
        "label", "--oos", help="clinc150: keep out-of-scope rows as a label, or drop them."
    ),
    "report": typer.Option(
        None, "--report", help="Write JSON, Markdown, HTML (with plots) and errors here."
    ),
    "seed": typer.Option(0, "--seed", help="Seed of the bootstrap intervals."),
    "n_boot": typer.Option(1000, "--n-boot", help="Bootstrap resamples."),
    "track": typer.Option(True, "--track/--no-track", help="Log the run to MLflow."),
    "tracking_uri": typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI (default: ./mlflow.db)."
    ),
    "experiment": typer.Option(
        "hybridroute-evaluate", "--experiment", help="MLflow experiment name."
    ),
    "data_dir": typer.Option(None, "--data-dir", help="Directory of public sets."),
    "sensitive": typer.Option(
        [],
        "--sensitive",
        help="A fact whose values are written as salted hashes wherever they appear "
        "(salt: HYBRIDROUTE_LOG_SALT); repeatable.",
    ),
    "as_json": typer.Option(False, "--json", help="Print the headline metrics as JSON."),
}


@dataclass(frozen=True, slots=True)
class _On:
    """What an evaluation runs on: the split, its name (``set/split``), the bootstrap's
    resamples and seed."""

    part: LabelledSet
    where: str
    n_boot: int
    seed: int


@dataclass(slots=True)
class _Run:
    """One evaluation: its result, the policy it used, what MLflow records, its title."""

    result: dict[str, Any]
    policy: Policy | None
    params: dict[str, Any]
    tags: dict[str, Any]
    title: str


def evaluate(
    dataset: str = _OPTIONS["dataset"],
    split: str = _OPTIONS["split"],
    model: Path | None = _OPTIONS["model"],
    router: Path | None = _OPTIONS["router"],
    policy: Path | None = _OPTIONS["policy"],
    oos: str = _OPTIONS["oos"],
    report: Path | None = _OPTIONS["report"],
    seed: int = _OPTIONS["seed"],
    n_boot: int = _OPTIONS["n_boot"],
    track: bool = _OPTIONS["track"],
    tracking_uri: str | None = _OPTIONS["tracking_uri"],
    experiment: str = _OPTIONS["experiment"],
    data_dir: Path | None = _OPTIONS["data_dir"],
    sensitive: list[str] = _OPTIONS["sensitive"],
    as_json: bool = _OPTIONS["as_json"],
    text_column: str | None = _TEXT,
    label_column: str | None = _LABEL,
    split_column: str | None = _SPLIT,
    id_column: str | None = _ID,
    oos_label: str | None = _OOS_LABEL,
) -> None:
    """Evaluate a classifier (--model, optionally with --policy) or a router (--router)."""
    from .._scrub import Scrubber
    from ..evaluation import write_report
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
    options = _options(
        data_dir=data_dir,
        text_column=text_column,
        label_column=label_column,
        split_column=split_column,
        id_column=id_column,
        oos_label=oos_label,
    )
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
    params: dict[str, Any] = {"dataset": dataset, "split": split, "seed": seed, "n_boot": n_boot}
    tags: dict[str, Any] = {
        "hybridroute.dataset_fingerprint": ds.fingerprint,
        "hybridroute.split_fingerprint": part.fingerprint,
    }
    on = _On(part, f"{ds.name}/{split}", n_boot, seed)
    run = _evaluate_router(r, router, on) if r is not None else _evaluate_model(model, policy, on)
    run.params = {**params, **run.params}
    run.tags = {**tags, **run.tags}
    result = run.result
    result["dataset"] = ds.name
    result["split"] = split
    result["dataset_fingerprint"] = ds.fingerprint
    _check_label_mix(result, run.policy, on, scrub)
    files = None
    if report is not None:
        from ._outputs import output_errors

        with output_errors(report, "--report"):
            files = write_report(result, report, title=run.title, scrubber=scrub, policy=run.policy)
    run_id = tracker = None
    if track:
        from ..tracking import Tracker

        tracker = Tracker(tracking_uri, experiment=experiment, scrubber=scrub)
        run_id = _track(
            tracker, run, report, policy if model is not None else None, scrub,
            datasets=[("evaluation", part, split)],
        )  # fmt: skip
    out = {k: result.get(k) for k in _JSON_KEYS if k in result}
    out["report"] = {k: str(v) for k, v in files.items()} if files else None
    out["mlflow_run_id"] = run_id
    if as_json:
        typer.echo(scrub.json(out, indent=2))
        return
    _print_summary(run.title, out, files, run_id, tracker, scrub)


def _evaluate_router(r: HybridRouter, router: Path | None, on: _On) -> _Run:
    """Route the split through the bundle ``r`` (loaded from ``router``) and score it."""
    from ..evaluation import evaluate_router

    result = evaluate_router(r, on.part, n_boot=on.n_boot, seed=on.seed)
    params = {"router": str(router)}
    tags = {"hybridroute.router": r.name, "hybridroute.router_version": r.version}
    return _Run(result, r.policy, params, tags, f"{r.name} {r.version} on {on.where}")


def _evaluate_model(model: Path | None, policy: Path | None, on: _On) -> _Run:
    """Score the saved classifier ``model`` on the split, with the policy ``policy`` if
    given (refused unless it is bound to that model)."""
    from ..calibration import Policy
    from ..classifiers import load_classifier
    from ..evaluation import evaluate_classifier

    clf = load_classifier(model)  # type: ignore[arg-type]
    policy_obj = None
    if policy is not None:
        policy_obj = Policy.load(policy)
        from ..router._bundle import check_model_binding

        check_model_binding(
            policy_obj, clf, policy_source=str(policy), model_source=f"--model {model}"
        )
    result = evaluate_classifier(
        clf, on.part.texts, on.part.y, policy=policy_obj, n_boot=on.n_boot, seed=on.seed
    )
    params = {
        "model": str(model),
        "classifier": getattr(clf, "kind", "?"),
        "policy": str(policy) if policy else None,
    }
    tags = {"hybridroute.model_training_fingerprint": getattr(clf, "training_fingerprint_", None)}
    title = f"{getattr(clf, 'kind', 'classifier')} classifier on {on.where}"
    return _Run(result, policy_obj, params, tags, title)


def _check_label_mix(
    result: dict[str, Any], policy: Policy | None, on: _On, scrub: Scrubber
) -> None:
    """Record how the split's label mix compares with the policy's calibration data, and
    warn when it departs markedly (the certificate holds only for traffic like it)."""
    import warnings

    if policy is None or not (policy.calibration_data or {}).get("label_counts"):
        return
    mix = policy.check_label_mix(on.part.y)
    result["label_mix"] = mix.to_dict() if hasattr(mix, "to_dict") else dict(vars(mix))
    if getattr(mix, "departs", False):
        warnings.warn(
            scrub.text(
                f"the label mix of {on.where} departs markedly from the policy's "
                "calibration data; its certified threshold holds only for traffic like its "
                "calibration data"
            ),
            RuntimeWarning,
            stacklevel=1,
        )


def _track(
    tracker: Tracker,
    run: _Run,
    report: Path | None,
    policy_path: Path | None,
    scrub: Scrubber,
    datasets: Sequence[tuple[str, LabelledSet, str]] = (),
) -> str | None:
    """Log the evaluation as one MLflow run (with the set it evaluated on as a dataset
    input); echo the tracker's warning, if any."""
    import warnings

    from ..tracking import log_evaluation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracker's own one-time warning is echoed below
        run_id = log_evaluation(
            tracker,
            run.result,
            run_name=run.title,
            params=run.params,
            tags=run.tags,
            report_dir=report,
            policy_path=policy_path,
            datasets=datasets,
            policy=run.policy,
        )
    if tracker.warning:
        typer.echo(f"warning: {scrub.text(tracker.warning)}", err=True)
    return run_id


def _print_summary(
    title: str,
    out: dict[str, Any],
    files: Mapping[str, Any] | None,
    run_id: str | None,
    tracker: Tracker | None,
    scrub: Scrubber,
) -> None:
    """Print the title, the headline metrics, the report's path and the MLflow run."""
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
