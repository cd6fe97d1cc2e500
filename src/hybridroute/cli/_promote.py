"""``hybridroute promote``: may a candidate router bundle replace the incumbent?

Runs :func:`hybridroute.monitoring.promotion_gate` on a decision log the incumbent routed
(with an audit rate) and, with ``--dataset``, a labelled split; prints pass / fail with the
reason of every check (``--json``: one object), logs the run to MLflow (parameters, metrics,
the report as ``promotion/report.json``, the tag ``hybridroute.promotion`` = pass / fail) and
exits 0 on pass, 1 on fail, 2 on a user mistake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError
from ._outcomes import _LOG_HELP


def promote_cmd(
    incumbent: Path = typer.Option(..., "--incumbent", help="The live router's bundle (A)."),
    candidate: Path = typer.Option(..., "--candidate", help="The proposed router's bundle (B)."),
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    dataset: str | None = typer.Option(
        None,
        "--dataset",
        help="A labelled set for the paired test (banking77, clinc150, support-tickets, "
        "csv:PATH, jsonl:PATH); held out from both policies' calibration.",
    ),
    split: str = typer.Option("test", "--split", help="Split of --dataset to test on."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Directory of public sets."),
    oos: str = typer.Option(
        "label", "--oos", help="clinc150: keep out-of-scope rows as a label, or drop them."
    ),
    target: float | None = typer.Option(
        None,
        "--target",
        help="The precision the candidate must certify (default: the higher of the two "
        "policies' targets).",
    ),
    delta: float | None = typer.Option(
        None, "--delta", help="Error probability of every bound (default: the policies' smaller)."
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the paired test."),
    max_disagreement: float | None = typer.Option(
        None,
        "--max-disagreement",
        help="Fail when more than this share of inputs change destination (default: report only).",
    ),
    allow_rule_changes: bool = typer.Option(
        False,
        "--allow-rule-changes",
        help="Accept decisions that change because the candidate's rules file differs.",
    ),
    include_calibration_audits: bool = typer.Option(
        False,
        "--include-calibration-audits",
        help="Also judge the candidate on the audits its policy was refitted on (by "
        "default a candidate from `calibrate --from-log` on this log is judged on the "
        "decisions outside that window only).",
    ),
    max_disputed_share: float = typer.Option(
        0.05,
        "--max-disputed-share",
        help="Fail the precision check when more than this share of the labelled inputs is "
        "disputed (their labels disagree and no adjudication settles them).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstraps."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples of the paired test."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the run to MLflow."),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI (default: ./mlflow.db)."
    ),
    experiment: str = typer.Option(
        "hybridroute-promote", "--experiment", help="MLflow experiment name."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Decide whether --candidate may replace --incumbent: exit 0 pass, 1 fail."""
    from .._scrub import Scrubber
    from ..monitoring import promotion_gate
    from ..records import open_log
    from ..router import load_router

    if oos not in ("label", "drop"):
        raise UserInputError(f"--oos must be 'label' or 'drop', got {oos!r}")
    if n_boot < 1:
        raise UserInputError(f"--n-boot must be at least 1, got {n_boot}")
    a = load_router(incumbent)
    b = load_router(candidate)
    part = None if dataset is None else _labelled_split(dataset, split, data_dir, oos, a, b)
    with open_log(log, create=False) as dl:
        where = dl.where
        report = promotion_gate(
            dl,
            a,
            b,
            dataset=part,
            target=target,
            delta=delta,
            allow_rule_changes=allow_rule_changes,
            max_disagreement=max_disagreement,
            alpha=alpha,
            n_boot=n_boot,
            seed=seed,
            include_calibration_audits=include_calibration_audits,
            max_disputed_share=max_disputed_share,
        )
    scrub = Scrubber()
    run_id = None
    if track:
        params = {
            "incumbent": str(incumbent),
            "candidate": str(candidate),
            "log": where,
            "dataset": dataset,
            "split": split if dataset else None,
            "target": target,
            "delta": delta,
            "alpha": alpha,
            "max_disagreement": max_disagreement,
            "allow_rule_changes": allow_rule_changes,
            "include_calibration_audits": include_calibration_audits,
            "max_disputed_share": max_disputed_share,
            "seed": seed,
            "n_boot": n_boot,
        }
        run_id = _track(report, params, tracking_uri, experiment, scrub)
    if as_json:
        typer.echo(scrub.json({**report.to_dict(), "mlflow_run_id": run_id}, indent=2))
    else:
        for line in report.summary_lines():
            typer.echo(scrub.text(line))
        if run_id:
            typer.echo(f"  mlflow: run {run_id}")
    raise typer.Exit(0 if report.passed else 1)


def _labelled_split(ref: str, split: str, data_dir: Path | None, oos: str, a: Any, b: Any) -> Any:
    """The split of ``ref``, every fact checked against both routers' schemas first."""
    from ._datasets import load_set

    options: dict[str, Any] = {}
    if data_dir is not None:
        options["data_dir"] = data_dir
    if ref == "clinc150":
        options["oos"] = oos
    ds = load_set(ref, options, a.rules.schema)
    if b.rules.schema.to_dict() != a.rules.schema.to_dict():
        ds = load_set(ref, options, b.rules.schema)
    if split not in ds.splits:
        raise UserInputError(
            f"{ds.name} has no split {split!r} (splits: {', '.join(ds.splits) or 'none'})"
        )
    return ds.split(split)


def _track(
    report: Any, params: dict[str, Any], tracking_uri: str | None, experiment: str, scrub: Any
) -> str | None:
    """Log the gate as one MLflow run; the run id, or ``None`` when tracking is unavailable."""
    import warnings

    from ..tracking import Tracker, code_revision

    tracker = Tracker(tracking_uri, experiment=experiment, scrubber=scrub)
    a, b = report.incumbent, report.candidate
    tags = {
        "hybridroute.code_revision": code_revision(),
        "hybridroute.promotion": "pass" if report.passed else "fail",
        "hybridroute.incumbent": f"{a['name']} {a['version']}",
        "hybridroute.candidate": f"{b['name']} {b['version']}",
        "hybridroute.router": b["name"],
        "hybridroute.router_version": b["version"],
    }
    fingerprint = report.check("paired_test").figures.get("dataset_fingerprint")
    if fingerprint:
        tags["hybridroute.dataset_fingerprint"] = fingerprint
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracker's one warning is echoed below
        with tracker.run(f"promote {b['name']} {b['version']}", tags=tags) as run_id:
            if run_id is not None:
                tracker.log_params({k: v for k, v in params.items() if v is not None})
                tracker.log_metrics(report.metrics())
                tracker.log_dict(report.to_dict(), "promotion/report.json")
    if tracker.warning:
        typer.echo(f"warning: {scrub.text(tracker.warning)}", err=True)
    return run_id


def register(app: typer.Typer) -> None:
    """Register ``promote`` on ``app``."""
    app.command("promote")(promote_cmd)
