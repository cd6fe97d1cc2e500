"""Input frames for the router UDF: one row per item, ``text`` plus ``facts`` as JSON.

Facts travel as one JSON string column: a struct would need one Spark schema for every
rule set, while a JSON string carries any declared facts (lists included) unchanged and
the router validates them on the executor exactly as it does on one machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..exceptions import UserInputError

__all__ = ["ITEM_COLUMNS", "dataset_items", "prepare_items"]

#: Columns of a prepared item frame (``id``, ``gold`` and ``gold_next_step`` when known).
ITEM_COLUMNS = ("row", "id", "text", "facts", "gold", "gold_next_step")

_SCHEMA = "row long, id string, text string, facts string, gold string, gold_next_step string"


def _facts_json(facts: dict[str, Any], names: set[str]) -> str:
    # Same selection as evaluate_router: declared facts only; a null is the schema's to read
    # (absent, so the default applies, for a fact not declared nullable).
    kept = {k: v for k, v in facts.items() if k in names}
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dataset_items(
    spark: Any,
    dataset: Any,
    fact_names: Iterable[str],
    *,
    num_partitions: int | None = None,
) -> Any:
    """A labelled set (:class:`~hybridroute.datasets.LabelledSet`) as a Spark item frame.

    Columns: ``row`` (position in the set), ``id``, ``text``, ``facts`` (JSON),
    ``gold`` (the label) and ``gold_next_step`` (null where the set has none).

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session the frame is created in (the set is shipped from the driver).
    dataset : LabelledSet
        The rows to route.
    fact_names : iterable of str
        The facts the router declares; only these go into ``facts``, and absent (null)
        values are left out so the rule set's defaults apply, as in
        :func:`~hybridroute.evaluation.evaluate_router`.
    num_partitions : int or None, default None
        Repartition the frame into this many partitions; ``None`` keeps Spark's choice.

    Returns
    -------
    pyspark.sql.DataFrame
    """
    import pandas as pd

    names = set(fact_names)
    frame = dataset.frame
    if "next_step" in frame.columns:
        next_steps = [s if isinstance(s, str) and s else None for s in frame["next_step"]]
    else:
        next_steps = [None] * len(dataset)
    rows = pd.DataFrame(
        {
            "row": range(len(dataset)),
            "id": [None if i is None else str(i) for i in dataset.ids],
            "text": dataset.texts,
            "facts": [_facts_json(f, names) for f in dataset.iter_facts()],
            "gold": [str(g) for g in dataset.y],
            "gold_next_step": next_steps,
        },
        dtype=object,
    )
    out = spark.createDataFrame(rows, schema=_SCHEMA)
    if num_partitions is not None:
        out = out.repartition(int(num_partitions))
    return out


def prepare_items(frame: Any, fact_names: Iterable[str]) -> Any:
    """Normalise a Spark DataFrame of items to the columns of :data:`ITEM_COLUMNS`.

    ``text`` is required. Facts come from a ``facts`` column (a JSON string, or a
    struct / map that is written as JSON) or else from columns named like the declared
    facts (nulls left out). ``label`` is read as ``gold`` and ``next_step`` as
    ``gold_next_step``; a missing ``row`` is numbered with increasing ids. Other columns
    are dropped (join back on ``row`` or ``id``): the scored frame adds columns named
    ``destination``, ``stage``, ``label``... that would clash with annotations.
    """
    from pyspark.sql import functions as F

    cols = list(frame.columns)
    types = dict(frame.dtypes)
    if "text" not in cols:
        raise UserInputError(
            "the item frame has no 'text' column (columns: " + ", ".join(cols) + ")"
        )
    if "facts" in cols:
        facts = F.col("facts") if types["facts"] == "string" else F.to_json(F.col("facts"))
    else:
        present = [c for c in fact_names if c in cols]
        # to_json leaves null fields out, which is what evaluate_router does with None
        facts = F.to_json(F.struct(*[F.col(c) for c in present])) if present else F.lit("{}")
    select = [
        (F.col("row").cast("long") if "row" in cols else F.monotonically_increasing_id()).alias(
            "row"
        )
    ]
    if "id" in cols:
        select.append(F.col("id").cast("string").alias("id"))
    select.append(F.col("text").cast("string").alias("text"))
    select.append(facts.alias("facts"))
    for target, sources in (
        ("gold", ("gold", "label")),
        ("gold_next_step", ("gold_next_step", "next_step")),
    ):
        src = next((s for s in sources if s in cols), None)
        if src is not None:
            col = F.col(src).cast("string")
            if target == "gold_next_step":
                col = F.when(col != "", col)  # an empty next step is "none given"
            select.append(col.alias(target))
    return frame.select(*select)
