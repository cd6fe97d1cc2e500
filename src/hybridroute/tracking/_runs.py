"""What one evaluation run logs to MLflow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._tracker import Tracker, code_revision

__all__ = ["MONITOR_STATUS_CODES", "log_evaluation", "log_monitor"]


def log_evaluation(
    tracker: Tracker,
    evaluation: Mapping[str, Any],
    *,
    run_name: str,
    params: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
    report_dir: str | Path | None = None,
    policy_path: str | Path | None = None,
    router_bundle: str | Path | None = None,
    nested: bool = False,
    datasets: Sequence[tuple[str, Any, str | None]] = (),
    description: str | None = None,
    policy: Any = None,
) -> str | None:
    """Log an evaluation as one run: params, metrics, tags, report, plots, errors, policy,
    the labelled sets it used (dataset inputs) and a description.

    Tags always include the code revision; pass the dataset fingerprint and router
    version in ``tags``. With ``router_bundle`` the router is also logged as a pyfunc model.
    Returns the run id, or ``None`` when tracking is off or unreachable. Everything logged
    goes through the tracker's scrubber (see :class:`Tracker`); the router bundle is logged
    as it is, since its checksummed files are what the model loads.

    Parameters
    ----------
    tracker : Tracker
        Where the run goes.
    evaluation : mapping
        An :class:`~hybridroute.evaluation.Evaluation` (its :meth:`metrics` are logged;
        a plain mapping logs none) whose summary, without ``items`` and ``confusion``, is
        logged as ``evaluation/summary.json``.
    run_name : str
        The run's name.
    params : mapping or None, default None
        Run parameters (a nested value is logged as its JSON).
    tags : mapping or None, default None
        Extra tags (``None`` values left out), added to ``hybridroute.code_revision``.
    report_dir : str, path or None, default None
        A report directory (:func:`~hybridroute.evaluation.write_report`) logged under
        ``evaluation/``.
    policy_path : str, path or None, default None
        A policy file logged under ``policy/``.
    router_bundle : str, path or None, default None
        A router bundle logged as a pyfunc model (verified against its manifest first).
    nested : bool, default False
        Start the run nested under the active one.
    datasets : sequence of (context, LabelledSet, split name or None), default ()
        The labelled sets the run used -- ``("training", train, "train")``,
        ``("calibration", ...)``, ``("evaluation", test, "test")`` -- logged as MLflow
        dataset inputs with their fingerprint as digest, their source and schema
        (:meth:`Tracker.log_datasets`).
    description : str, optional
        The run's description (Markdown); default: one written from the evaluation, the
        parameters and the datasets (:func:`~hybridroute.tracking._datasets.describe_evaluation`).
    policy : Policy, optional
        The fitted policy the evaluation ran, for the description's promise (objective,
        target, δ, threshold, certified or not). Default: the evaluation's ``policy``
        summary, else the policy at ``policy_path``, else the one the report in
        ``report_dir`` states.

    Returns
    -------
    str or None
        The run id; ``None`` when tracking is off or unreachable.

    Raises
    ------
    ArtifactError
        If ``router_bundle`` does not verify. Errors other than an outage of the store
        propagate.
    """
    all_tags = {
        "hybridroute.code_revision": code_revision(),
        **{k: v for k, v in (tags or {}).items() if v is not None},
    }
    metrics = evaluation.metrics() if hasattr(evaluation, "metrics") else {}
    if description is None:
        from ._datasets import describe_evaluation

        described = dict(evaluation)
        summary = _policy_summary(evaluation, policy, policy_path, report_dir)
        if summary:
            described["policy"] = summary
        description = describe_evaluation(
            described,
            run_name=run_name,
            params=params,
            datasets=[(c, ds.name if s is None else f"{ds.name}/{s}", ds) for c, ds, s in datasets],
        )
    all_tags["mlflow.note.content"] = description
    with tracker.run(
        run_name, nested=nested, tags={k: str(v) for k, v in all_tags.items()}
    ) as run_id:
        if run_id is None:
            return None
        tracker.log_params(dict(params or {}))
        tracker.log_metrics(metrics)
        tracker.log_datasets(datasets)
        summary = {k: v for k, v in evaluation.items() if k not in ("items", "confusion")}
        tracker.log_dict(summary, "evaluation/summary.json")
        if report_dir is not None:
            tracker.log_artifacts(report_dir, "evaluation")
        if policy_path is not None:
            tracker.log_artifact(policy_path, "policy")
        if router_bundle is not None:
            tracker.log_router_model(router_bundle)
        return run_id


def _policy_summary(
    evaluation: Mapping[str, Any],
    policy: Any,
    policy_path: str | Path | None,
    report_dir: str | Path | None,
) -> dict[str, Any] | None:
    """What the run's description says of the policy: the first of the evaluation's own
    summary, ``policy``, the policy file, the report's (``evaluation.json``)."""
    from ..evaluation._report import policy_summary

    if evaluation.get("policy"):
        return dict(evaluation["policy"])
    if policy is not None:
        return policy_summary(policy)
    if policy_path is not None:
        from ..calibration import Policy

        return policy_summary(Policy.load(policy_path))
    report = Path(report_dir) / "evaluation.json" if report_dir is not None else None
    if report is not None and report.is_file():
        from .._safeio import read_json

        found = read_json(report, limit=1 << 26, what="the report's evaluation")
        if isinstance(found, dict) and isinstance(found.get("policy"), dict):
            return dict(found["policy"])
    return None


#: The monitor's states as numbers (a metric can be plotted over runs; a tag cannot).
MONITOR_STATUS_CODES = {"insufficient": 0, "holding": 1, "certified_online": 2, "breach": 3}


def log_monitor(
    tracker: Tracker, state: Mapping[str, Any], *, log: str | None = None
) -> str | None:
    """Log one reading of the live guarantee (:func:`hybridroute.monitoring.monitor_log`).

    One run per reading, named after the router version: metrics ``labels``,
    ``precision_estimate`` / ``precision_lower`` / ``precision_upper`` (the anytime-valid
    bounds), ``target``, ``delta``, ``audited``, ``pending``, ``status_code``
    (:data:`MONITOR_STATUS_CODES`) and, with a calibration mix, ``shift_total_variation`` and
    ``shift_oos_difference``; tags ``hybridroute.monitor.status`` and
    ``hybridroute.router_version``; the whole state as ``monitor/state.json``.

    Parameters
    ----------
    tracker : Tracker
        Where the run goes.
    state : mapping
        The monitor's state.
    log : str, optional
        The decision log it was read from (a display URL, without a password).

    Returns
    -------
    str or None
        The run id; ``None`` when tracking is off or unreachable.
    """
    p = state.get("precision") or {}
    metrics = {
        "labels": state.get("labels"),
        "precision_estimate": p.get("estimate"),
        "precision_lower": p.get("lower"),
        "precision_upper": p.get("upper"),
        "target": state.get("target"),
        "delta": state.get("delta"),
        "audited": state.get("audited"),
        "pending": state.get("pending"),
        "status_code": MONITOR_STATUS_CODES.get(str(state.get("status"))),
    }
    shift = state.get("shift")
    if shift:
        metrics["shift_total_variation"] = shift.get("total_variation")
        metrics["shift_oos_difference"] = shift.get("oos_difference")
    tags = {
        "hybridroute.code_revision": code_revision(),
        "hybridroute.monitor.status": str(state.get("status")),
        "hybridroute.router_version": str(state.get("router_version")),
        "mlflow.note.content": _describe_monitor(state, log),
    }
    name = f"monitor {state.get('router_version')}"
    with tracker.run(name, tags=tags) as run_id:
        if run_id is None:
            return None
        if log is not None:
            tracker.log_params({"log": log})
        tracker.log_metrics({k: float(v) for k, v in metrics.items() if v is not None})
        tracker.log_dict(dict(state), "monitor/state.json")
        return run_id


def _describe_monitor(state: Mapping[str, Any], log: str | None) -> str:
    """The description of a monitor reading: what was read, from where, and the verdict."""
    p = state.get("precision") or {}
    where = f" from `{log}`" if log else ""
    bounds = ""
    if p.get("lower") is not None and p.get("upper") is not None:
        bounds = f", precision in [{p['lower']:.4f}, {p['upper']:.4f}] (anytime-valid)"
    return (
        f"**Live-guarantee reading of router version {state.get('router_version')}**{where}: "
        f"status `{state.get('status')}` on {state.get('labels')} audit labels{bounds}; target "
        f"{state.get('target')} at δ {state.get('delta')}. The audited decisions and their "
        "outcomes are the only unbiased view of auto-routed precision."
    )
