"""MLflow tracking that never loses results.

:class:`Tracker` wraps the few MLflow calls hybridroute makes. The default store is MLflow's
embedded SQLite store in the working directory (``sqlite:///mlflow.db``), or whatever
``MLFLOW_TRACKING_URI`` / ``tracking_uri`` names. When the store cannot be reached (a
remote server down, a read-only directory), the tracker warns **once**, turns itself off,
and every later call is a no-op: the evaluation or experiment still finishes and its
results stay in the local report directory.

Everything a tracker sends passes through its :class:`~hybridroute._scrub.Scrubber` first
(run and experiment names, parameters, metric names, tags, dictionaries, tables and the
text files it logs), so credentials -- and the command's declared sensitive facts -- never
reach the tracking store or its artifacts, and its one warning never prints a URL's
password.

This is the only part of hybridroute that imports ``mlflow`` (DESIGN: tracking layer).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._offline import apply_offline_defaults
from .._scrub import Scrubber

__all__ = ["Tracker", "code_revision", "default_tracking_uri"]


def default_tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` if set, else the SQLite store ``mlflow.db`` in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


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


class Tracker:
    """Log runs to MLflow, or do nothing (after one warning) when MLflow is unreachable.

    Parameters
    ----------
    tracking_uri : str, optional
        Any MLflow tracking URI; default :func:`default_tracking_uri`.
    experiment : str
        Experiment name.
    enabled : bool
        ``False`` turns tracking off entirely (no MLflow import).
    probe_timeout_s : float
        How long to wait for an HTTP server's health check before giving up.
    scrubber : Scrubber, optional
        What everything logged passes through; default: a fresh one (credentials only).
        Pass the command's own to hash its declared sensitive facts too.
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
        self._ready = False
        self._mlflow: Any = None

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
        if not self.enabled:
            return False
        if self._ready:
            return True
        if self.tracking_uri.startswith(("http://", "https://")):
            problem = _probe_http(self.tracking_uri, self.probe_timeout_s)
            if problem is not None:
                self._disable("no answer", problem)
                return False
            # fail fast instead of MLflow's long default retry schedule
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        try:
            apply_offline_defaults()
            os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
            import logging

            import mlflow

            # MLflow's INFO lines ("Creating a new experiment") would interleave with our output.
            logging.getLogger("mlflow").setLevel(logging.WARNING)

            mlflow.set_tracking_uri(self.tracking_uri)
            mlflow.set_experiment(self.scrubber.name(self.experiment))
        except Exception as exc:
            self._disable("setup failed", exc)
            return False
        self._mlflow = mlflow
        self._ready = True
        return True

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._setup():
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self._disable(what, exc)
            return None

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
        """A run context; yields the run id (``None`` when tracking is off)."""
        if not self._setup():
            yield None
            return
        mlflow = self._mlflow
        try:
            active = mlflow.start_run(
                run_name=self.scrubber.name(name), nested=nested, tags=self._tags(tags or {})
            )
        except Exception as exc:
            self._disable("start_run", exc)
            yield None
            return
        status = "FINISHED"
        try:
            yield active.info.run_id
        except BaseException:
            status = "FAILED"
            raise
        finally:
            with contextlib.suppress(Exception):
                mlflow.end_run(status=status)

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log parameters (scrubbed; a nested value as its JSON; values cut at 5,000 characters)."""
        clean = self.scrubber.value(dict(params))
        flat = {
            self.scrubber.name(k): (json.dumps(v) if isinstance(v, (dict, list)) else str(v))[:5000]
            for k, v in clean.items()
        }
        self._call("log_params", lambda: self._mlflow.log_params(flat))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log metrics (their names scrubbed; ``@`` written ``_at_``)."""
        clean = {
            self.scrubber.name(k.replace("@", "_at_")): float(v)
            for k, v in metrics.items()
            if v is not None
        }
        self._call("log_metrics", lambda: self._mlflow.log_metrics(clean, step=step))

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set tags on the active run (scrubbed)."""
        clean = self._tags(tags)
        self._call("set_tags", lambda: self._mlflow.set_tags(clean))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Log a file: a text file goes as a scrubbed copy (under its own name)."""

        def log() -> None:
            with tempfile.TemporaryDirectory(prefix="hybridroute-artifact-") as tmp:
                copy = Path(tmp) / self.scrubber.text(Path(path).name).replace("/", "_")
                self.scrubber.copy_file(path, copy)
                self._mlflow.log_artifact(str(copy), self._artifact_path(artifact_path))

        self._call("log_artifact", log)

    def log_artifacts(self, directory: str | Path, artifact_path: str | None = None) -> None:
        """Log a directory: its text files go as scrubbed copies."""

        def log() -> None:
            with tempfile.TemporaryDirectory(prefix="hybridroute-artifacts-") as tmp:
                self.scrubber.copy_tree(directory, tmp)
                self._mlflow.log_artifacts(tmp, self._artifact_path(artifact_path))

        self._call("log_artifacts", log)

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        """Log a JSON-able object as a JSON (or YAML) artifact, scrubbed."""
        clean = self.scrubber.value(obj)
        name = self._artifact_path(artifact_file) or "artifact.json"
        self._call("log_dict", lambda: self._mlflow.log_dict(clean, name))

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        """Log rows as an MLflow table artifact, scrubbed."""
        import pandas as pd

        clean = self.scrubber.value(list(rows))
        name = self._artifact_path(artifact_file) or "table.json"
        self._call("log_table", lambda: self._mlflow.log_table(pd.DataFrame(clean), name))

    def _artifact_path(self, path: str | None) -> str | None:
        return None if path is None else self.scrubber.text(path)

    def run_url(self, run_id: str | None) -> str | None:
        """Where to look at a run (``mlflow ui`` URL hint for local stores)."""
        if run_id is None:
            return None
        if self.tracking_uri.startswith(("http://", "https://")):
            exp = self._call(
                "get_experiment",
                lambda: self._mlflow.get_experiment_by_name(self.scrubber.name(self.experiment)),
            )
            eid = getattr(exp, "experiment_id", "0")
            return f"{self.display_uri.rstrip('/')}/#/experiments/{eid}/runs/{run_id}"
        return f"run {run_id} in {self.display_uri}"
