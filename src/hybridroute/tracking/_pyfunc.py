"""A router as an MLflow pyfunc model.

``mlflow.pyfunc.load_model(uri).predict(frame)`` routes a pandas DataFrame: one row per
item, a ``text`` column, and the facts either in a ``facts`` column (a mapping or a JSON
string per row) or as one column per fact. It returns one row per item with the selected
destination, reason code, stage, label, confidence, snapshot hash and the full decision
record as JSON. The router bundle travels as the model's artifact and is verified against
its manifest when the model loads. The same model can be applied at scale with
``mlflow.pyfunc.spark_udf``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import mlflow.pyfunc
from mlflow.pyfunc import PythonModel

from .._version import __version__

__all__ = ["OUTPUT_COLUMNS", "RouterModel", "frame_to_items", "log_router_model"]

OUTPUT_COLUMNS = (
    "destination",
    "reason_code",
    "stage",
    "label",
    "confidence",
    "snapshot_hash",
    "decision",
)
_RESERVED = {"text", "facts", "id", "evidence"}


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def frame_to_items(frame: Any, fact_names: Any = None) -> list[dict[str, Any]]:
    """Route items from a DataFrame (``text`` plus a ``facts`` column or fact columns)."""
    columns = list(frame.columns)
    fact_cols = [
        c for c in columns if c not in _RESERVED and (fact_names is None or c in fact_names)
    ]
    items = []
    for rec in frame.to_dict(orient="records"):
        if "facts" in rec and not _is_missing(rec["facts"]):
            facts = rec["facts"]
            if isinstance(facts, str):
                facts = json.loads(facts)
            facts = dict(facts)
        else:
            facts = {c: rec[c] for c in fact_cols if not _is_missing(rec[c])}
        facts = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in facts.items()}
        text = rec.get("text")
        items.append({"facts": facts, "text": None if _is_missing(text) else str(text)})
    return items


# The base is imported by name: mlflow/__init__ types ``mlflow.pyfunc`` as a LazyLoader, so
# mypy cannot see ``mlflow.pyfunc.PythonModel`` (the very same class at runtime).
class RouterModel(PythonModel):
    """pyfunc wrapper: loads the router bundle artifact and routes DataFrames."""

    def load_context(self, context: Any) -> None:
        from ..router import load_router

        self._router = load_router(context.artifacts["router"])

    # No type hints here on purpose: MLflow derives a schema from them and warns on Any.
    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        """Route every row of ``model_input``; one output row per input row."""
        import pandas as pd

        router = self._router
        items = frame_to_items(model_input, set(router.rules.schema.names))
        decisions = router.route_many(items)
        return pd.DataFrame(
            {
                "destination": [d.selected_destination for d in decisions],
                "reason_code": [d.reason_code for d in decisions],
                "stage": [d.stage for d in decisions],
                "label": [d.label for d in decisions],
                "confidence": [
                    float("nan") if d.confidence is None else d.confidence for d in decisions
                ],
                "snapshot_hash": [d.snapshot_hash for d in decisions],
                "decision": [d.to_json() for d in decisions],
            },
            columns=list(OUTPUT_COLUMNS),
        )


def log_router_model(bundle_dir: str | Path, *, name: str = "router") -> Any:
    """Log a router bundle as a pyfunc model in the active MLflow run; returns the model info."""
    # "models from code": MLflow loads the model by running _router_model.py, so nothing
    # pickled travels with it.
    code = Path(__file__).with_name("_router_model.py")
    return mlflow.pyfunc.log_model(
        name=name,
        python_model=str(code),
        artifacts={"router": str(bundle_dir)},
        pip_requirements=[f"hybridroute=={__version__}"],
    )
