"""``hybridroute demo``: the main job, end to end on the bundled support-tickets set.

train the local classifier -> fit a certified policy on the calibration split -> build the
router bundle -> route the test split into a decision log -> evaluate -> log everything
to MLflow (the embedded store ``./mlflow.db`` by default) -> print a summary.
"""

from __future__ import annotations

import math
import time
import warnings
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._outputs import check_output

if TYPE_CHECKING:
    from ..calibration import Policy
    from ..classifiers import LocalClassifier
    from ..datasets import LabelledSet
    from ..router import HybridRouter
    from ..tracking import Tracker


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return f"[{_fmt(v[0], pct)}, {_fmt(v[1], pct)}]"
    if isinstance(v, float):
        return f"{v:.1%}" if pct else f"{v:.4f}"
    return str(v)


#: The options of ``demo``, by parameter (declared here to keep the command short).
_OPTIONS: dict[str, Any] = {
    "out": typer.Option(
        Path("hybridroute-demo"),
        "--out",
        help="Directory for the model, policy, router, log and report.",
    ),
    "target": typer.Option(0.9, "--target", help="Precision to certify for auto-routed tickets."),
    "delta": typer.Option(
        0.1, "--delta", help="Allowed probability that the certificate is wrong."
    ),
    "seed": typer.Option(0, "--seed", help="Seed of every random step."),
    "track": typer.Option(True, "--track/--no-track", help="Log the run to MLflow."),
    "tracking_uri": typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI (default: ./mlflow.db)."
    ),
    "experiment": typer.Option("hybridroute-demo", "--experiment", help="MLflow experiment name."),
}

#: The demo's steps, in order, as the progress bar names them.
_STEPS = (
    "load data",
    "train classifier",
    "calibrate policy",
    "build router",
    "route + log test split",
    "evaluate + report",
    "track in MLflow",
)

#: The evaluation's figures that ``summary.json`` keeps.
_SUMMARY_KEYS = (
    "n",
    "accuracy",
    "accuracy_ci",
    "coverage",
    "selective_precision",
    "next_step_accuracy",
    "next_step_accuracy_ci",
    "n_classified",
    "n_auto_routed",
    "n_next_step",
    "decisions_by_stage",
    "fallbacks_by_cause",
)


def demo(
    out: Path = _OPTIONS["out"],
    target: float = _OPTIONS["target"],
    delta: float = _OPTIONS["delta"],
    seed: int = _OPTIONS["seed"],
    track: bool = _OPTIONS["track"],
    tracking_uri: str | None = _OPTIONS["tracking_uri"],
    experiment: str = _OPTIONS["experiment"],
) -> None:
    """Train, calibrate, build, route, evaluate and track a support-ticket router (offline)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(width=110)
    started = time.perf_counter()
    check_output(out, "--out", kind="dir")  # before any work: one line, exit 2
    out.mkdir(parents=True, exist_ok=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("demo", total=len(_STEPS))

        def step(i: int) -> None:
            progress.update(task, description=f"[{i + 1}/{len(_STEPS)}] {_STEPS[i]}", completed=i)

        step(0)
        from ..datasets import load_dataset

        ds = load_dataset("support-tickets")
        train, cal, test = ds.split("train"), ds.split("calibration"), ds.split("test")
        step(1)
        clf, model_fingerprint = _train(train, out, seed)
        step(2)
        policy = _calibrate(ds, train, cal, clf, model_fingerprint, out, target, delta, seed)
        step(3)
        router, bundle = _build_router(clf, policy, out)
        step(4)
        log_path = _route_and_log(router, test, out)
        step(5)
        from ..evaluation import evaluate_router, write_report

        ev = evaluate_router(router, test, seed=seed)
        ev["dataset"] = ds.name
        files = write_report(
            ev, out / "report", title="support-demo router on support-tickets/test", policy=policy
        )
        step(6)
        run_id = tracker = None
        if track:
            from ..tracking import Tracker

            tracker = Tracker(tracking_uri, experiment=experiment)
            run_id = _track(tracker, ev, ds, clf, router, bundle, out, target, delta, seed)
        progress.update(task, completed=len(_STEPS), description="done")

    console.print(_summary_table(ev, policy, target, delta))
    if not policy.guarantee["certified"]:
        console.print(
            f"[yellow]note:[/yellow] the target was not certified: {policy.guarantee['reason']}"
        )
    console.print(f"report      : {files['html']}")
    console.print(f"decision log: {log_path}")
    console.print(f"router      : {bundle}")
    if run_id is not None and tracker is not None:
        # plain lines, never wrapped: the command must copy-paste as one line
        typer.echo(f"mlflow run  : {run_id} in {tracker.display_uri}")
        for line in tracker.ui_hint(run_id):
            typer.echo(f"  {line}")
    elif track and tracker is not None and tracker.warning:
        console.print(f"[yellow]warning:[/yellow] {tracker.warning}")
    console.print(f"finished in {time.perf_counter() - started:.1f} s")
    _write_summary(out, ev, policy, run_id)


def _train(train: LabelledSet, out: Path, seed: int) -> tuple[LocalClassifier, str]:
    """Fit the local classifier on the train split and save it under ``out/model``.

    Returns the classifier and the saved model's fingerprint (the policy is bound to it,
    as ``hybridroute calibrate`` binds it).
    """
    from ..classifiers import LocalClassifier
    from ..classifiers._persistence import classifier_fingerprint

    clf = LocalClassifier(random_state=seed).fit(train.texts, train.y)
    model_dir = clf.save(out / "model", training_fingerprint=train.fingerprint, overwrite=True)
    return clf, classifier_fingerprint(model_dir)


def _calibrate(
    ds: LabelledSet,
    train: LabelledSet,
    cal: LabelledSet,
    clf: LocalClassifier,
    model_fingerprint: str,
    out: Path,
    target: float,
    delta: float,
    seed: int,
) -> Policy:
    """Fit a certified precision policy on the calibration split; save it as ``policy.json``."""
    from ..calibration import fit_policy

    policy = fit_policy(
        clf.predict_proba(cal.texts),
        cal.y,
        [str(c) for c in clf.classes_],
        objective="precision",
        target=target,
        delta=delta,
        calibrator="temperature",
        seed=seed,
        oos_label=ds.oos_label,
        provenance={
            "command": "hybridroute demo",
            "dataset": "support-tickets",
            "dataset_fingerprint": ds.fingerprint,
            "calibration_split_fingerprint": cal.fingerprint,
            "model_training_fingerprint": train.fingerprint,
        },
        model_fingerprint=model_fingerprint,
        # the model must not have been trained on the calibration rows
        training_fingerprint=train.fingerprint,
        calibration_fingerprints={
            "the calibration split of support-tickets": cal.fingerprint,
            "the whole of support-tickets": ds.fingerprint,
        },
    )
    policy.save(out / "policy.json")
    return policy


def _build_router(clf: LocalClassifier, policy: Policy, out: Path) -> tuple[HybridRouter, Path]:
    """Compose the bundled support rules, the classifier and the policy; save the bundle."""
    from ..router import HybridRouter
    from ..rules import load_rules

    rules_path = Path(str(resources.files("hybridroute") / "examples" / "support_rules.yaml"))
    router = HybridRouter(
        rules=load_rules(rules_path),
        classifier=clf,
        policy=policy,
        name="support-demo",
        version="1",
    )
    return router, router.save(out / "router", overwrite=True)


def _route_and_log(router: HybridRouter, test: LabelledSet, out: Path) -> Path:
    """Route the test split into a fresh decision log ``out/decisions.sqlite``; return its path."""
    from ..records import DecisionLog

    log_path = out / "decisions.sqlite"
    for stale in out.glob("decisions.sqlite*"):
        stale.unlink()
    items = [{"facts": dict(test.facts(i)), "text": test.texts[i]} for i in range(len(test))]
    decisions = router.route_many(items)
    with DecisionLog(log_path) as log:
        log.register_router(router)  # the labels its outcomes may name
        log.extend(decisions, item_ids=test.ids)
    return log_path


def _track(
    tracker: Tracker,
    ev: dict[str, Any],
    ds: LabelledSet,
    clf: LocalClassifier,
    router: HybridRouter,
    bundle: Path,
    out: Path,
    target: float,
    delta: float,
    seed: int,
) -> str | None:
    """Log the evaluation, its parameters, the report, the policy and the bundle to MLflow."""
    from ..tracking import log_evaluation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return log_evaluation(
            tracker,
            ev,
            run_name="demo: support-tickets router",
            params={
                "dataset": "support-tickets",
                "classifier": "local",
                "C": clf.C_,
                "objective": "precision",
                "target": target,
                "delta": delta,
                "seed": seed,
                "calibrator": "temperature",
            },
            tags={
                "hybridroute.dataset_fingerprint": ds.fingerprint,
                "hybridroute.router": router.name,
                "hybridroute.router_version": router.version,
            },
            report_dir=out / "report",
            policy_path=out / "policy.json",
            router_bundle=bundle,
            datasets=[
                (context, ds.split(split), split)
                for context, split in (
                    ("training", "train"),
                    ("calibration", "calibration"),
                    ("evaluation", "test"),
                )
            ],
        )


def _write_summary(out: Path, ev: dict[str, Any], policy: Policy, run_id: str | None) -> None:
    """Write ``out/summary.json``: the headline figures, the run id, the certificate."""
    from .._scrub import Scrubber

    summary = {k: ev.get(k) for k in _SUMMARY_KEYS}
    summary.update(
        mlflow_run_id=run_id,
        certified=policy.guarantee["certified"],
        threshold=policy.thresholds["auto"],
    )
    (out / "summary.json").write_text(Scrubber().json(summary, indent=2) + "\n", encoding="utf-8")


#: What each stage of a decision means, as the summary shows it (label, stage).
_STAGE_ROWS = (
    ("decided by a rule, from the facts", "rule"),
    ("auto-routed by the model", "model"),
    ("held back: ask the user / human review", "policy"),
    ("fallback: the classifier failed or abstained", "fallback"),
)


def _summary_table(ev: dict[str, Any], policy: Policy, target: float, delta: float) -> Any:
    """The demo's summary: every count says what it counts, every rate what it is out of."""
    from rich.markup import escape
    from rich.table import Table

    from ..calibration._metrics import DEFAULT_ECE_BINS

    n_cls = ev.get("n_classified", 0)
    n_auto = ev.get("n_auto_routed", 0)
    n_next = ev.get("n_next_step", 0)
    stages = ev.get("decisions_by_stage") or {}
    table = Table(
        title="hybridroute demo: support-tickets test split",
        caption=f"classified = no rule decided, so the classifier ranked the intents ({n_cls} tickets)",
        caption_justify="left",
        show_header=True,
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [("tickets routed (the whole test split)", str(ev["n"]))]
    for label, stage in _STAGE_ROWS:
        rows.append((f"  {label} (stage '{stage}')", str(stages.get(stage, 0))))
        if stage == "fallback":
            # a rich label: a cause such as "classifier_error (TypeError)" is text, not markup
            rows += [
                (f"    cause {escape(k)}", str(v)) for k, v in ev["fallbacks_by_cause"].items()
            ]
    rows += [
        (f"intent accuracy (of {n_cls} classified)", _fmt(ev["accuracy"], True)),
        ("  95% CI", _fmt(ev["accuracy_ci"], True)),
        (f"coverage ({n_auto} auto-routed / {n_cls} classified)", _fmt(ev["coverage"], True)),
        (f"selective precision (of {n_auto} auto-routed)", _fmt(ev["selective_precision"], True)),
        (
            f"next-step accuracy (of {n_next} with a gold next step)",
            _fmt(ev["next_step_accuracy"], True),
        ),
        ("  95% CI", _fmt(ev["next_step_accuracy_ci"], True)),
        ("policy threshold (calibrated confidence)", _fmt(policy.thresholds["auto"])),
        (
            "certified",
            f"{'yes' if policy.guarantee['certified'] else 'no'} "
            f"(precision ≥ {target:g} w.p. ≥ {1 - delta:g})",
        ),
        (
            f"ECE (of {ev.get('n_with_confidence', 0)} with a confidence, {DEFAULT_ECE_BINS} bins)",
            _fmt(ev.get("ece")),
        ),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


def register(app: typer.Typer) -> None:
    """Register ``demo`` on ``app``."""
    app.command("demo")(demo)
