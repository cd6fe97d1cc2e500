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
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mlflow.pyfunc
import pandas as pd
from mlflow.pyfunc import PythonModel, PythonModelContext

from .._version import __version__

if TYPE_CHECKING:
    from ..router import HybridRouter

__all__ = [
    "OUTPUT_COLUMNS",
    "RouterModel",
    "frame_to_items",
    "input_example",
    "log_router_model",
    "router_signature",
]

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


def input_example() -> pd.DataFrame:
    """The input example logged with a router model: one item, no facts.

    MLflow checks it against the signature and routes it through the logged model (loaded
    as a model server would load it) while logging, so a model that cannot load or route
    is reported then.
    """
    # The column index is built with object dtype: MLflow compares it with a ``range``,
    # which pandas 3 deprecates (and warns about) for its default string index.
    return pd.DataFrame(
        {"text": ["hello"], "facts": ["{}"]}, columns=pd.Index(["text", "facts"], dtype=object)
    )


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

    def load_context(self, context: PythonModelContext) -> None:
        from ..router import load_router

        self._router = load_router(context.artifacts["router"])

    @property
    def router(self) -> Any:
        """The :class:`~hybridroute.router.HybridRouter` this model loaded from its bundle."""
        return self._router

    # The input is hinted ``pd.DataFrame``: MLflow reads the hint when the class is
    # defined, and a DataFrame is a hint it validates nothing against and infers no
    # signature from (mlflow.types.type_hints.type_hints_no_signature_inference), so the
    # frame reaches predict as it was given -- a ``facts`` column or one column per fact,
    # whatever the router declares. Without a hint MLflow warns on every import.
    def predict(
        self,
        context: PythonModelContext,
        model_input: pd.DataFrame,
        params: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Route every row of ``model_input``; one output row per input row.

        Parameters
        ----------
        context : PythonModelContext
            MLflow's model context (unused here: the bundle was loaded by
            :meth:`load_context`).
        model_input : pandas.DataFrame
            One row per item: ``text`` (a missing text leaves the item to the rules) and
            the facts, either in a ``facts`` column (a mapping or a JSON string per row)
            or as one column per fact the router declares; missing values are left out,
            so the rule set's defaults apply. Other columns are ignored.
        params : dict or None, default None
            MLflow inference parameters; none are used.

        Returns
        -------
        pandas.DataFrame
            The :data:`OUTPUT_COLUMNS`: ``destination``, ``reason_code``, ``stage``,
            ``label``, ``confidence`` (``NaN`` where none), ``snapshot_hash`` and
            ``decision`` (the full decision record as JSON).

        Raises
        ------
        FactsError, InputError
            For a row whose facts break the router's schema or whose text is refused (see
            :meth:`HybridRouter.route`); the whole batch fails.
        json.JSONDecodeError
            For a ``facts`` string that is not JSON.
        """
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


def router_signature(router: HybridRouter) -> Any:
    """The model signature of a logged router: what :meth:`RouterModel.predict` takes.

    Every input column is optional and of MLflow's ``any`` type, so the signature accepts
    what ``predict`` always accepted -- ``text`` with a ``facts`` column (mappings or JSON
    strings) or with one column per fact the router declares (all listed here, by name),
    plus ``id`` / ``evidence`` -- and checks nothing MLflow cannot check about a fact's
    value (the router's own fact schema does that). A column not listed is dropped by
    MLflow, with its warning, as ``predict`` would ignore it. The outputs are the
    :data:`OUTPUT_COLUMNS`.
    """
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, DataType, Schema
    from mlflow.types.schema import AnyType

    names = ["text", "facts", "id", "evidence", *router.rules.schema.names]
    inputs = Schema([ColSpec(AnyType(), name, required=False) for name in dict.fromkeys(names)])
    types = {"confidence": DataType.double}
    outputs = Schema(
        [
            ColSpec(types.get(col, DataType.string), col, required=col not in ("label",))
            for col in OUTPUT_COLUMNS
        ]
    )
    return ModelSignature(inputs=inputs, outputs=outputs)


def log_router_model(bundle_dir: str | os.PathLike[str], *, name: str = "router") -> Any:
    """Log a router bundle as a pyfunc model in the active MLflow run; returns the model info.

    The bundle is verified against its manifest first (a bad one raises
    :class:`~hybridroute.exceptions.ArtifactError`); the model's signature is
    :func:`router_signature`.
    """
    from ..router import load_router

    return _log_router_model(bundle_dir, load_router(bundle_dir), name=name)


def _log_router_model(
    bundle_dir: str | os.PathLike[str], router: HybridRouter, *, name: str
) -> Any:
    # "models from code": MLflow loads the model by running _router_model.py, so nothing
    # pickled travels with it. The signature is declared because MLflow cannot infer one
    # from a DataFrame hint (and warns when it has none).
    code = Path(__file__).with_name("_router_model.py")
    return mlflow.pyfunc.log_model(
        name=name,
        python_model=str(code),
        artifacts={"router": str(bundle_dir)},
        pip_requirements=[f"hybridroute=={__version__}"],
        signature=router_signature(router),
        input_example=input_example(),
    )
