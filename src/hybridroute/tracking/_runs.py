"""What one evaluation run logs to MLflow."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._tracker import Tracker, code_revision

__all__ = ["log_evaluation"]


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
) -> str | None:
    """Log an evaluation as one run: params, metrics, tags, report, plots, errors, policy.

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
    with tracker.run(
        run_name, nested=nested, tags={k: str(v) for k, v in all_tags.items()}
    ) as run_id:
        if run_id is None:
            return None
        tracker.log_params(dict(params or {}))
        tracker.log_metrics(metrics)
        summary = {k: v for k, v in evaluation.items() if k not in ("items", "confusion")}
        tracker.log_dict(summary, "evaluation/summary.json")
        if report_dir is not None:
            tracker.log_artifacts(report_dir, "evaluation")
        if policy_path is not None:
            tracker.log_artifact(policy_path, "policy")
        if router_bundle is not None:
            tracker.log_router_model(router_bundle)
        return run_id
