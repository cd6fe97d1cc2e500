"""MLflow pointed at one store for one block, and everything it changed put back after.

MLflow keeps its tracking URI in a process-wide global *and* in ``MLFLOW_TRACKING_URI``
(``mlflow.set_tracking_uri`` writes both), ``set_experiment`` writes
``MLFLOW_EXPERIMENT_ID``, ``start_run`` / ``end_run`` remove ``MLFLOW_RUN_ID``, and its INFO
lines ("Creating initial MLflow database tables") go to stderr. A toolkit imported into
someone else's process must not leave any of that behind: :func:`mlflow_scope` sets what
the tracking layer needs for one block and restores the host's state when the block ends,
so after a tracked run the environment and the logger levels are what they were.

The only process-wide settings hybridroute keeps are the documented offline defaults of
:mod:`hybridroute._offline`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from .._offline import apply_offline_defaults

__all__ = ["QUIET", "mlflow_scope"]

# What MLflow itself may write into the environment while we call it.
_MLFLOW_ENV = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_RUN_ID",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_EXPERIMENT_NAME",
)
# Defaults for the block only; a value the user set wins.
_BLOCK_ENV = {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
# An HTTP store fails fast instead of MLflow's long default retry schedule.
_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}

#: Loggers kept at this level inside a block: MLflow's INFO lines would interleave with
#: our own output.
QUIET: Mapping[str, int] = {"mlflow": logging.WARNING}


def _quiet(levels: Mapping[str, int]) -> dict[str, int]:
    """Raise each logger to its level for the block; return the levels to put back.

    A logger whose effective level is DEBUG is left alone: the host asked to see everything.
    """
    before = {}
    for name, level in levels.items():
        logger = logging.getLogger(name)
        effective = logger.getEffectiveLevel()
        if logging.DEBUG < effective < level:
            before[name] = logger.level
            logger.setLevel(level)
    return before


def _restore_env(before: Mapping[str, str | None]) -> None:
    for key, value in before.items():
        if os.environ.get(key) == value:
            continue
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def mlflow_scope(
    tracking_uri: str | None = None, *, quiet: Mapping[str, int] = QUIET
) -> Iterator[Any]:
    """Import mlflow and point it at ``tracking_uri`` for the block; yields the module.

    Parameters
    ----------
    tracking_uri : str, optional
        The store MLflow's fluent API (``start_run``, ``log_model``, ``load_model``...)
        uses inside the block; ``None`` leaves MLflow's current one.
    quiet : mapping of str to int
        Logger name -> level for the block (see :data:`QUIET`).

    Notes
    -----
    On exit the MLflow variables of the environment (``MLFLOW_TRACKING_URI``,
    ``MLFLOW_RUN_ID``, ``MLFLOW_EXPERIMENT_ID``, ``MLFLOW_EXPERIMENT_NAME``), the block's
    defaults, MLflow's global tracking URI and the logger levels are put back as they were.
    Blocks nest. Like MLflow's own globals, this is process-wide while the block runs.
    """
    apply_offline_defaults()  # before mlflow's first import (a no-op once hybridroute is in)
    defaults = dict(_BLOCK_ENV)
    if tracking_uri is not None and tracking_uri.startswith(("http://", "https://")):
        defaults.update(_HTTP_ENV)
    env_before = {key: os.environ.get(key) for key in (*_MLFLOW_ENV, *defaults)}
    for key, value in defaults.items():
        if env_before[key] is None:
            os.environ[key] = value
    levels: dict[str, int] = {}
    switched = False
    previous: str | None = None
    try:
        import mlflow  # configures its loggers on first import: quiet them after

        levels = _quiet(quiet)
        previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
        if tracking_uri is not None and previous != tracking_uri:
            # set_tracking_uri resets MLflow's tracing set-up: only when the store differs
            mlflow.set_tracking_uri(tracking_uri)
            switched = True
        yield mlflow
    finally:
        if switched:
            import mlflow

            if previous is not None and previous != env_before["MLFLOW_TRACKING_URI"]:
                mlflow.set_tracking_uri(previous)  # the host had set MLflow's global
            else:
                # None clears MLflow's global (its stub types the argument str); a URI the
                # host gave through the environment comes back with the environment below
                mlflow.set_tracking_uri(None)  # type: ignore[arg-type]
        _restore_env(env_before)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
