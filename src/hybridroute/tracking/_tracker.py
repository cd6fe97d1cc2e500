"""MLflow tracking that never loses results, and never hides a bug.

:class:`Tracker` wraps the few MLflow calls hybridroute makes. The default store is MLflow's
embedded SQLite store in the working directory (``sqlite:///mlflow.db``), or whatever
``MLFLOW_TRACKING_URI`` / ``tracking_uri`` names. When the store cannot be reached or
fails (a remote server down or answering 5xx, a read-only directory, a locked or corrupt
database: see :mod:`._outage`), the tracker warns **once**, turns itself off, and every
later call is a no-op: the evaluation or experiment still finishes and its results stay in
the local report directory. Any other exception -- a ``TypeError`` from our code, a value
MLflow refuses -- propagates.

Everything a tracker sends passes through its :class:`~hybridroute._scrub.Scrubber` first
(run and experiment names, parameters, metric names, tags, dictionaries, tables and the
text files it logs), so credentials -- and the command's declared sensitive facts -- never
reach the tracking store or its artifacts, and its one warning never prints a URL's
password.

Each MLflow call runs inside :func:`._scope.mlflow_scope`, so the host's environment,
MLflow's global tracking URI and the logger levels are as they were after it.

This is the only part of hybridroute that imports ``mlflow`` (DESIGN: tracking layer).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._scrub import Scrubber
from ._outage import is_outage, is_setup_failure
from ._scope import mlflow_scope

__all__ = ["Tracker", "code_revision", "default_tracking_uri", "mlflow_command"]

#: Where ``mlflow ui`` serves by default.
UI_ADDRESS = "http://127.0.0.1:5000"
# MLflow 3's UI opens on its GenAI pages; this query selects its "Model training" view.
_UI_QUERY = "?workflowType=machine_learning"


def default_tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` if set, else the SQLite store ``mlflow.db`` in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def mlflow_command() -> str:
    """The MLflow command line of this interpreter's environment, quoted for a shell.

    The ``mlflow`` script beside the running Python (a virtual environment's
    ``bin/mlflow``) by its absolute path, else ``python -m mlflow``: either works
    without the environment being on ``PATH``.
    """
    python = Path(sys.executable)
    for name in ("mlflow", "mlflow.exe"):
        script = python.with_name(name)
        if script.is_file() and os.access(script, os.X_OK):
            return shlex.quote(str(script))
    return f"{shlex.quote(str(python))} -m mlflow"


def code_revision(start: str | Path | None = None) -> str:
    """The git commit of the code (``+dirty`` when the tree has changes), or ``unknown``."""
    here = Path(start or Path(__file__).resolve().parent)
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _probe_http(uri: str, timeout_s: float) -> str | None:
    """None when an HTTP tracking server answers its health check, else the reason."""
    import urllib.error
    import urllib.request

    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            if resp.status == 200:
                return None
            return f"health check answered HTTP {resp.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"


#: Database tracking stores, by URI scheme (before any ``+driver``), and their default port.
_DB_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}


def _probe_database(uri: str, timeout_s: float) -> str | None:
    """None when a database store's host accepts a TCP connection, else the reason.

    MLflow retries a database it cannot reach for well over a minute; a refused or
    silent port is found here in ``timeout_s``. A store reached through a unix socket
    (no host in the URI) is left to MLflow.
    """
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(uri)
        scheme = parts.scheme.split("+", 1)[0].lower()
        host, port = parts.hostname, parts.port or _DB_PORTS.get(scheme)
    except ValueError as exc:
        return f"ValueError: {exc}"
    if not host or port is None or "host=" in parts.query:
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


class Tracker:
    """Log runs to MLflow, or do nothing (after one warning) when the store is unreachable.

    Parameters
    ----------
    tracking_uri : str, optional
        Any MLflow tracking URI; default :func:`default_tracking_uri`.
    experiment : str
        Experiment name.
    enabled : bool
        ``False`` turns tracking off entirely (no MLflow import).
    probe_timeout_s : float
        How long to wait for an HTTP server's health check (or a database store's port)
        before giving up.
    scrubber : Scrubber, optional
        What everything logged passes through; default: a fresh one (credentials only).
        Pass the command's own to hash its declared sensitive facts too.

    Notes
    -----
    Only an outage of the store turns tracking off (see :mod:`hybridroute.tracking._outage`
    for the exceptions that count); any other exception of a tracked call propagates.
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        experiment: str = "hybridroute",
        enabled: bool = True,
        probe_timeout_s: float = 3.0,
        scrubber: Scrubber | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri or default_tracking_uri()
        self.experiment = experiment
        self.enabled = enabled
        self.probe_timeout_s = probe_timeout_s
        self.scrubber = scrubber if scrubber is not None else Scrubber()
        self.warning: str | None = None
        self._experiment_id: str | None = None

    # ------------------------------------------------------------------ plumbing
    def _disable(self, what: str, exc: BaseException | str) -> None:
        if self.enabled:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            reason = self.scrubber.text(reason)[:300]
            self.warning = (
                f"MLflow tracking at {self.display_uri} is unavailable ({what}: {reason}); "
                "results are kept locally only"
            )
            warnings.warn(self.warning, RuntimeWarning, stacklevel=3)
        self.enabled = False

    def _setup(self) -> bool:
        """Reach the store and find (or create) the experiment, once."""
        if not self.enabled:
            return False
        if self._experiment_id is not None:
            return True
        if self.tracking_uri.startswith(("http://", "https://")):
            problem = _probe_http(self.tracking_uri, self.probe_timeout_s)
            if problem is not None:
                self._disable("no answer", problem)
                return False
        elif self.tracking_uri.split(":", 1)[0].split("+", 1)[0].lower() in _DB_PORTS:
            problem = _probe_database(self.tracking_uri, self.probe_timeout_s)
            if problem is not None:
                self._disable("no answer", problem)
                return False
        elif self.tracking_uri.lower().startswith("sqlite:///"):
            # MLflow retries an unwritable SQLite store for about 100 s before it gives up
            store = self.tracking_uri[len("sqlite:///") :]
            if not os.path.isfile(store):
                from .._outpaths import output_problem

                problem = output_problem(store, kind="file", parents=False)
                if problem is not None:
                    self._disable("cannot write the store", f"{store}: {problem}")
                    return False
        name = self.scrubber.name(self.experiment)
        try:
            with mlflow_scope(self.tracking_uri):
                from mlflow.tracking import MlflowClient

                # the client names its store: no set_experiment, which would write
                # MLFLOW_EXPERIMENT_ID into the host's environment
                client = MlflowClient(self.tracking_uri)
                found = client.get_experiment_by_name(name)
                if found is not None and found.lifecycle_stage == "deleted":
                    self._disable(
                        "setup failed",
                        f"experiment {name!r} is deleted; restore it or choose another name",
                    )
                    return False
                eid = found.experiment_id if found is not None else client.create_experiment(name)
        except Exception as exc:
            if not is_setup_failure(exc):
                raise
            self._disable("setup failed", exc)
            return False
        self._experiment_id = str(eid)
        return True

    def _call(self, what: str, fn: Callable[[Any], Any]) -> Any:
        """``fn(mlflow)`` inside the tracker's scope; ``None`` once tracking is off."""
        if not self._setup():
            return None
        try:
            with mlflow_scope(self.tracking_uri) as mlflow:
                return fn(mlflow)
        except Exception as exc:
            if not is_outage(exc):
                raise
            self._disable(what, exc)
            return None

    def _end_run(self, run_id: str, status: str, failure: BaseException | None) -> None:
        """End our run (even after an outage, so MLflow's active-run stack is left clean)."""
        try:
            with mlflow_scope(self.tracking_uri) as mlflow:
                active = mlflow.active_run()
                if active is not None and active.info.run_id == run_id:
                    mlflow.end_run(status=status)
        except Exception as exc:
            if is_outage(exc):
                self._disable("end_run", exc)
            elif failure is not None:
                # the block's own exception is the one to see; say that this failed too
                failure.add_note(f"(ending MLflow run {run_id} also failed: {exc!r})")
            else:
                raise

    @property
    def display_uri(self) -> str:
        """The tracking URI as printed: a password in it is replaced."""
        return self.scrubber.text(self.tracking_uri)

    def _tags(self, tags: Mapping[str, Any]) -> dict[str, str]:
        clean = self.scrubber.value({str(k): str(v) for k, v in tags.items()})
        return {self.scrubber.name(k): str(v) for k, v in clean.items()}

    # ------------------------------------------------------------------ API
    @contextlib.contextmanager
    def run(
        self, name: str, *, nested: bool = False, tags: Mapping[str, str] | None = None
    ) -> Iterator[str | None]:
        """A run context; yields the run id (``None`` when tracking is off).

        The run ends ``FINISHED``, or ``FAILED`` when the block raises (the block's
        exception propagates).

        Parameters
        ----------
        name : str
            The run's name (scrubbed).
        nested : bool, default False
            Start the run nested under the active one (e.g. one run per configuration
            under an experiment's parent run).
        tags : mapping of str to str or None, default None
            Tags set on the run at its start (keys and values scrubbed).

        Yields
        ------
        str or None
            The MLflow run id; ``None`` when tracking is off or the store is unreachable
            (after the tracker's one warning), and then nothing is logged.
        """
        run_name = self.scrubber.name(name)
        clean_tags = self._tags(tags or {})
        run_id = self._call(
            "start_run",
            lambda mlflow: (
                mlflow.start_run(
                    experiment_id=self._experiment_id,
                    run_name=run_name,
                    nested=nested,
                    tags=clean_tags,
                ).info.run_id
            ),
        )
        if run_id is None:
            yield None
            return
        try:
            yield run_id
        except BaseException as exc:
            self._end_run(run_id, "FAILED", exc)
            raise
        self._end_run(run_id, "FINISHED", None)

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log parameters (scrubbed; a nested value as its JSON; values cut at 5,000 characters)."""
        clean = self.scrubber.value(dict(params))
        flat = {
            self.scrubber.name(k): (json.dumps(v) if isinstance(v, (dict, list)) else str(v))[:5000]
            for k, v in clean.items()
        }
        self._call("log_params", lambda mlflow: mlflow.log_params(flat))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log metrics (their names scrubbed; ``@`` written ``_at_``)."""
        clean = {
            self.scrubber.name(k.replace("@", "_at_")): float(v)
            for k, v in metrics.items()
            if v is not None
        }
        self._call("log_metrics", lambda mlflow: mlflow.log_metrics(clean, step=step))

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set tags on the active run (scrubbed)."""
        clean = self._tags(tags)
        self._call("set_tags", lambda mlflow: mlflow.set_tags(clean))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Log a file: a text file goes as a scrubbed copy (under its own name)."""
        if not self._setup():
            return
        where = self._artifact_path(artifact_path)
        with tempfile.TemporaryDirectory(prefix="hybridroute-artifact-") as tmp:
            copy = Path(tmp) / self.scrubber.text(Path(path).name).replace("/", "_")
            self.scrubber.copy_file(path, copy)  # ours: a missing file is an error, not an outage
            self._call("log_artifact", lambda mlflow: mlflow.log_artifact(str(copy), where))

    def log_artifacts(self, directory: str | Path, artifact_path: str | None = None) -> None:
        """Log a directory: its text files go as scrubbed copies."""
        if not self._setup():
            return
        where = self._artifact_path(artifact_path)
        with tempfile.TemporaryDirectory(prefix="hybridroute-artifacts-") as tmp:
            self.scrubber.copy_tree(directory, tmp)
            self._call("log_artifacts", lambda mlflow: mlflow.log_artifacts(tmp, where))

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        """Log a JSON-able object as a JSON (or YAML) artifact, scrubbed."""
        clean = self.scrubber.value(obj)
        name = self._artifact_path(artifact_file) or "artifact.json"
        self._call("log_dict", lambda mlflow: mlflow.log_dict(clean, name))

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        """Log rows as an MLflow table artifact, scrubbed."""
        import pandas as pd

        frame = pd.DataFrame(self.scrubber.value(list(rows)))
        name = self._artifact_path(artifact_file) or "table.json"
        self._call("log_table", lambda mlflow: mlflow.log_table(frame, name))

    def log_datasets(self, inputs: Sequence[tuple[str, Any, str | None]]) -> None:
        """Log labelled sets as the active run's dataset inputs ("Datasets used").

        Parameters
        ----------
        inputs : sequence of (context, LabelledSet, split name or None)
            Each set (or split) the run used, and how: ``training``, ``calibration`` or
            ``evaluation``. Its digest is its fingerprint; its source, schema and profile
            are described in :func:`hybridroute.tracking._datasets.dataset_record`. Only
            metadata is logged (scrubbed), never the rows.
        """
        from ._datasets import CONTEXTS, dataset_record

        records = []
        for context, ds, split in inputs:
            if context not in CONTEXTS:
                raise ValueError(f"context must be one of {', '.join(CONTEXTS)}, not {context!r}")
            record = {k: self.scrubber.text(v) for k, v in dataset_record(ds, split=split).items()}
            records.append((context, record))
        if not records:
            return

        def log(mlflow: Any) -> None:
            from mlflow.entities import Dataset, DatasetInput, InputTag
            from mlflow.tracking import MlflowClient
            from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

            run = mlflow.active_run()
            if run is None:
                raise RuntimeError("log_datasets needs an active run (inside Tracker.run)")
            MlflowClient(self.tracking_uri).log_inputs(
                run.info.run_id,
                datasets=[
                    DatasetInput(Dataset(**r), tags=[InputTag(MLFLOW_DATASET_CONTEXT, c)])
                    for c, r in records
                ],
            )

        self._call("log_inputs", log)

    def set_description(self, text: str) -> None:
        """Set the active run's description (MLflow's ``mlflow.note.content``; Markdown)."""
        self.set_tags({"mlflow.note.content": text})

    def log_router_model(self, bundle_dir: str | Path) -> Any:
        """Log a router bundle as a pyfunc model in the active run; returns the model info.

        The bundle is verified against its manifest first: a bad bundle raises
        :class:`~hybridroute.exceptions.ArtifactError` (with its path) instead of looking
        like an outage.
        """
        if not self._setup():
            return None
        from ..router import load_router

        router = load_router(bundle_dir)
        from ._pyfunc import _log_router_model

        return self._call(
            "log_router_model", lambda mlflow: _log_router_model(bundle_dir, router, name="router")
        )

    def _artifact_path(self, path: str | None) -> str | None:
        return None if path is None else self.scrubber.text(path)

    def run_url(self, run_id: str | None) -> str | None:
        """Where to look at a run: its page on an HTTP server, else ``run ID in URI``."""
        if run_id is None:
            return None
        if self.tracking_uri.startswith(("http://", "https://")):
            eid = self._experiment_id if self._setup() else None
            return f"{self.display_uri.rstrip('/')}/#/experiments/{eid or 0}/runs/{run_id}"
        return f"run {run_id} in {self.display_uri}"

    def ui_hint(self, run_id: str | None) -> list[str]:
        """Lines that say how to open a run in MLflow's UI (each one line, copy-pastable).

        For an HTTP server, the run's page. For any other store, the command that serves it
        (this environment's ``mlflow`` by absolute path, see :func:`mlflow_command`) and
        the run's page on it. Pages open in MLflow 3's "Model training" view.
        """
        if run_id is None:
            return []
        eid = self._experiment_id if self._setup() else None
        page = f"#/experiments/{eid or 0}/runs/{run_id}{_UI_QUERY}"
        if self.tracking_uri.startswith(("http://", "https://")):
            return [f"open {self.display_uri.rstrip('/')}/{page}"]
        return [
            f"serve it: {mlflow_command()} ui --backend-store-uri {shlex.quote(self.display_uri)}",
            f"then open {UI_ADDRESS}/{page}",
        ]
