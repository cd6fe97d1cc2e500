"""Run a spec: compute the table, then log it to MLflow as a parent run with nested runs.

The computation never touches MLflow, so the table is the same whether tracking is on,
off or unreachable (the tracker then warns once and the results stay local). The table
that is printed, the JSON / CSV artifacts of the parent run and the metrics of the
nested runs all come from the same rounded rows.

Everything written -- the printed table, ``table.json`` / ``table.csv``, the parent run's
spec, parameters, tags and table artifacts, the nested runs' parameters, metrics and
detail -- goes through the result's :class:`~hybridroute._scrub.Scrubber` (the renderers of
:mod:`._table`, and the tracker, which holds the same scrubber).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._scrub import Scrubber
from .._version import __version__
from ._spec import ExperimentSpec, load_spec
from ._table import render_table, table_csv, table_document
from .kinds import KINDS, Column, Progress

__all__ = ["ExperimentResult", "run_experiment"]

TABLE_JSON = "results/table.json"
TABLE_CSV = "results/table.csv"


@dataclass
class ExperimentResult:
    """What a run returns: the table and where it was logged.

    Attributes
    ----------
    spec : ExperimentSpec
        The effective spec (after any ``resplits`` override).
    columns : tuple of Column
    rows : list of dict
        The comparison table, one dict per configuration (rounded numbers, ``None`` for
        undefined values). The same values are the nested runs' metrics.
    labels : list of str
        The nested run name of each row.
    notes : list of str
    summary : dict
        Parent-run metrics (sizes, overall accuracy...).
    info : dict
        Plain facts about the run (dataset fingerprint, classifier...).
    details : list of dict
        Per-row detail (per-resplit values), logged on the nested runs.
    row_artifacts : list of dict
        Per row, ``{artifact_file: JSON object}`` logged on its nested run (policies...).
    parent_run_id : str or None
    run_ids : list of str or None
        The nested run of each row (``None`` when tracking is off or failed).
    tracking_uri, mlflow_experiment : str or None
    tracking_warning : str or None
        Why tracking was turned off, when it was.
    files : dict of str to Path
        Local copies written with ``out_dir``.
    scrubber : Scrubber
        What every rendering and everything logged passes through.
    datasets : list of (context, LabelledSet, split name)
        The labelled sets the run used, logged as the parent run's dataset inputs.
    """

    spec: ExperimentSpec
    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]
    labels: list[str]
    notes: list[str]
    summary: dict[str, Any]
    info: dict[str, Any]
    details: list[dict[str, Any]]
    row_artifacts: list[dict[str, Any]] = field(default_factory=list)
    parent_run_id: str | None = None
    run_ids: list[str | None] = field(default_factory=list)
    tracking_uri: str | None = None
    mlflow_experiment: str | None = None
    tracking_warning: str | None = None
    files: dict[str, Path] = field(default_factory=dict)
    scrubber: Scrubber = field(default_factory=Scrubber, repr=False)
    datasets: list[tuple[str, Any, str | None]] = field(default_factory=list, repr=False)

    @property
    def title(self) -> str:
        """The table's title."""
        return f"{self.spec.name} ({self.spec.kind})"

    def metric_columns(self) -> list[Column]:
        """Columns logged as nested-run metrics."""
        return [c for c in self.columns if c.role == "metric" and c.in_rows]

    def config_columns(self) -> list[Column]:
        """Columns logged as nested-run parameters."""
        return [c for c in self.columns if c.role == "config"]

    def row_metrics(self, i: int) -> dict[str, float]:
        """The metrics row ``i`` logs (undefined values left out; booleans as 0 / 1)."""
        row = self.rows[i]
        return {
            c.key: float(row[c.key]) for c in self.metric_columns() if row.get(c.key) is not None
        }

    def row_params(self, i: int) -> dict[str, str]:
        """The parameters row ``i`` logs."""
        row = self.rows[i]
        return {c.key: str(row[c.key]) for c in self.config_columns()}

    def table(self) -> Any:
        """The comparison table as a :class:`rich.table.Table`."""
        return render_table(self.title, self.columns, self.rows, self.notes, scrubber=self.scrubber)

    def to_dict(self) -> dict[str, Any]:
        """Table, notes, summary and run ids as plain JSON values."""
        return table_document(
            self.columns,
            self.rows,
            scrubber=self.scrubber,
            name=self.spec.name,
            kind=self.spec.kind,
            seed=self.spec.seed,
            spec_sha256=self.spec.sha256,
            settings=json.loads(json.dumps(self.spec.settings, default=list)),
            labels=list(self.labels),
            notes=list(self.notes),
            summary=dict(self.summary),
            info=self.info,
            mlflow={
                "tracking_uri": self.tracking_uri,
                "experiment": self.mlflow_experiment,
                "parent_run_id": self.parent_run_id,
                "run_ids": list(self.run_ids),
                "warning": self.tracking_warning,
            },
        )

    def table_json(self) -> dict[str, Any]:
        """The logged table artifact: everything but where it was logged (same on every run)."""
        doc = self.to_dict()
        doc.pop("mlflow")
        return doc

    def to_csv(self) -> str:
        """The rows as CSV."""
        return table_csv(self.columns, self.rows, scrubber=self.scrubber)


def run_experiment(
    spec: ExperimentSpec | str | os.PathLike[str],
    *,
    tracking_uri: str | None = None,
    track: bool = True,
    resplits: int | None = None,
    progress: Progress | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    scrubber: Scrubber | None = None,
) -> ExperimentResult:
    """Run an experiment spec and log it to MLflow.

    Parameters
    ----------
    spec : ExperimentSpec or path
        A validated spec, or a spec file to load.
    tracking_uri : str, optional
        MLflow tracking URI (default: ``MLFLOW_TRACKING_URI`` or ``./mlflow.db``).
    track : bool, default True
        ``False`` logs nothing.
    resplits : int, optional
        Override the spec's number of resplits (for a quick run); only for kinds that
        resplit.
    progress : callable, optional
        ``progress(description, done, total)`` as long steps advance.
    out_dir : path, optional
        Also write ``table.json`` and ``table.csv`` here.
    scrubber : Scrubber, optional
        What everything written and logged passes through; default: a fresh one
        (credentials only).

    Returns
    -------
    ExperimentResult
        The rows (same spec and seed give identical rows), the nested run ids and the
        parent run id.

    Raises
    ------
    SpecError
        A malformed spec, or a spec value the data or the fitting refuses.
    """
    from ..tracking import Tracker, code_revision

    if not isinstance(spec, ExperimentSpec):
        spec = load_spec(spec)
    kind_cls = KINDS[spec.kind]
    overridden = False
    if resplits is not None:
        if not kind_cls.has_resplits:
            from ..exceptions import SpecError

            raise SpecError(
                f"a {spec.kind!r} experiment has no resplits to override",
                path=spec.path,
                field="resplits",
            )
        if isinstance(resplits, bool) or not isinstance(resplits, int) or resplits < 1:
            from ..exceptions import SpecError

            raise SpecError(
                f"resplits must be a positive integer, got {resplits!r}",
                path=spec.path,
                field="resplits",
            )
        spec = spec.with_settings(resplits=resplits)
        overridden = True

    kind = kind_cls(spec)
    output = kind.run(progress)
    result = ExperimentResult(
        spec=spec,
        columns=kind_cls.columns,
        rows=output.rows,
        labels=output.labels,
        notes=output.notes,
        summary=output.summary,
        info=output.info,
        details=output.details,
        row_artifacts=output.row_artifacts,
        scrubber=scrubber if scrubber is not None else Scrubber(),
        datasets=list(kind.used),
    )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        result.files["json"] = out / "table.json"
        result.files["csv"] = out / "table.csv"
        result.files["json"].write_text(
            result.scrubber.json(result.table_json(), indent=2) + "\n", encoding="utf-8"
        )
        result.files["csv"].write_text(result.to_csv(), encoding="utf-8")

    tracker = Tracker(
        tracking_uri, experiment=spec.mlflow_experiment, enabled=track, scrubber=result.scrubber
    )
    result.tracking_uri = tracker.tracking_uri if track else None
    result.mlflow_experiment = spec.mlflow_experiment if track else None
    if track:
        _log(tracker, result, code_revision(), overridden)
        result.tracking_warning = tracker.warning
    return result


def _log(tracker: Any, result: ExperimentResult, revision: str, overridden: bool) -> None:
    spec = result.spec
    tags = {
        "hybridroute.experiment": spec.name,
        "hybridroute.experiment_kind": spec.kind,
        "hybridroute.spec_sha256": spec.sha256,
        "hybridroute.dataset_fingerprint": result.info.get("dataset_fingerprint", ""),
        "hybridroute.code_revision": revision,
        "hybridroute.version": __version__,
    }
    if overridden:
        tags["hybridroute.resplits_override"] = str(spec.settings["resplits"])
    if spec.description:
        tags["mlflow.note.content"] = spec.description
    with tracker.run(spec.name, tags=tags) as parent_id:
        result.parent_run_id = parent_id
        if parent_id is None:
            result.run_ids = [None] * len(result.rows)
            return
        tracker.log_params(spec.flat_params())
        tracker.log_datasets(result.datasets)
        tracker.log_metrics(
            {k: v for k, v in result.summary.items() if isinstance(v, (int, float))}
        )
        tracker.log_dict(spec.document, "spec/spec.json")
        if spec.path is not None and Path(spec.path).is_file():
            tracker.log_artifact(spec.path, "spec")
        tracker.log_dict(result.table_json(), TABLE_JSON)
        with tempfile.TemporaryDirectory(prefix="hybridroute-exp-") as tmp:
            path = Path(tmp) / Path(TABLE_CSV).name
            path.write_text(result.to_csv(), encoding="utf-8")
            tracker.log_artifact(path, str(Path(TABLE_CSV).parent))
        run_ids: list[str | None] = []
        for i, label in enumerate(result.labels):
            row_tags = {
                "hybridroute.experiment": spec.name,
                "hybridroute.experiment_kind": spec.kind,
                "hybridroute.row": str(i),
            }
            with tracker.run(label, nested=True, tags=row_tags) as run_id:
                run_ids.append(run_id)
                if run_id is None:
                    continue
                tracker.log_params(result.row_params(i))
                tracker.log_metrics(result.row_metrics(i))
                if i < len(result.details) and result.details[i]:
                    tracker.log_dict(result.details[i], "detail.json")
                if i < len(result.row_artifacts):
                    for name, obj in result.row_artifacts[i].items():
                        tracker.log_dict(obj, name)
        result.run_ids = run_ids
