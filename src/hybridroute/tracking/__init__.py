"""MLflow tracking: runs with parameters, metrics, plots, reports, the policy artifact and
data fingerprints; routers as pyfunc models, logged, loaded back and applied on Spark. The
only part of hybridroute that imports mlflow, and it does so lazily: importing this package
does not import mlflow.
"""

from __future__ import annotations

from typing import Any

from ._logged import LoggedRouter, load_router_model, log_router_run, router_spark_udf
from ._runs import log_evaluation, log_monitor
from ._tracker import Tracker, code_revision, default_tracking_uri

__all__ = [
    "LoggedRouter",
    "RouterModel",
    "Tracker",
    "code_revision",
    "default_tracking_uri",
    "load_router_model",
    "log_evaluation",
    "log_monitor",
    "log_router_model",
    "log_router_run",
    "router_spark_udf",
]


def __getattr__(name: str) -> Any:
    if name in ("RouterModel", "log_router_model"):
        from . import _pyfunc

        value = getattr(_pyfunc, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
