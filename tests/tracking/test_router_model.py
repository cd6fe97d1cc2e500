"""The router as a pyfunc model: logged without a warning, routing the frames it always took."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from hybridroute.tracking import Tracker, load_router_model
from hybridroute.tracking._pyfunc import OUTPUT_COLUMNS, frame_to_items
from hybridroute.tracking._scope import mlflow_scope


@pytest.fixture(scope="module")
def logged(sqlite_store, support_router):
    """The router logged once, and the warnings and MLflow log lines that logging produced."""
    _, bundle, _ = support_router
    tracker = Tracker(sqlite_store, experiment="router-model")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.WARNING)
    logging.getLogger("mlflow").addHandler(handler)
    try:
        with tracker.run("warm-up"):  # the store's first use has warnings of its own
            pass
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tracker.run("router model"):
                info = tracker.log_router_model(bundle)
    finally:
        logging.getLogger("mlflow").removeHandler(handler)
    assert info is not None and tracker.warning is None
    return info, list(caught), records, sqlite_store


def test_logging_the_router_model_emits_no_warning(logged):
    _, caught, records, _ = logged
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in records] == []


def test_defining_the_model_class_emits_no_warning():
    # MLflow inspects predict's type hints when the class is defined, once per process
    code = "import hybridroute.tracking._pyfunc"
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "type hints" not in done.stderr


def test_the_logged_model_declares_the_router_facts_as_optional_inputs(logged, support_router):
    router, _, _ = support_router
    info, _, _, store = logged
    with mlflow_scope(store) as mlflow:
        signature = mlflow.models.get_model_info(info.model_uri).signature
    inputs = {c.name: c for c in signature.inputs.inputs}
    assert {"text", "facts", *router.rules.schema.names} <= set(inputs)
    assert not any(c.required for c in inputs.values())
    assert [c.name for c in signature.outputs.inputs] == list(OUTPUT_COLUMNS)


def _frames(ds) -> dict[str, pd.DataFrame]:
    test = ds.split("test")
    n = 30
    facts = [{k: v for k, v in test.facts(i).items() if v is not None} for i in range(n)]
    texts = list(test.texts[:n])
    texts[3] = None  # an item without text
    names = sorted({k for f in facts for k in f})
    per_fact = pd.DataFrame({"text": texts, **{k: [f.get(k) for f in facts] for k in names}})
    return {
        "facts as mappings": pd.DataFrame({"text": texts, "facts": facts}),
        "facts as JSON strings": pd.DataFrame(
            {"text": texts, "facts": [json.dumps(f) for f in facts]}
        ),
        "one column per fact": per_fact,
        "with columns the router ignores": per_fact.assign(label=test.y[:n], id=range(n)),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "facts as mappings",
        "facts as JSON strings",
        "one column per fact",
        "with columns the router ignores",
    ],
)
def test_the_loaded_model_routes_every_accepted_frame_as_the_router_does(
    logged, support_router, kind
):
    router, _, ds = support_router
    info, _, _, store = logged
    frame = _frames(ds)[kind]
    with mlflow_scope(store) as mlflow:
        model = mlflow.pyfunc.load_model(info.model_uri)
    out = model.predict(frame)
    expected = router.route_many(frame_to_items(frame, set(router.rules.schema.names)))
    assert list(out["destination"]) == [d.selected_destination for d in expected]
    assert list(out["reason_code"]) == [d.reason_code for d in expected]
    assert list(out["snapshot_hash"]) == [d.snapshot_hash for d in expected]
    assert list(out["decision"]) == [d.to_json() for d in expected]
    conf = [np.nan if d.confidence is None else d.confidence for d in expected]
    np.testing.assert_array_equal(out["confidence"].to_numpy(dtype=float), conf)


def test_load_router_model_gives_back_the_router(logged, support_router):
    router, _, ds = support_router
    info, _, _, store = logged
    loaded = load_router_model(info.model_uri, tracking_uri=store)
    assert (loaded.name, loaded.version) == (router.name, router.version)
    test = ds.split("test")
    items = [
        {"facts": {k: v for k, v in test.facts(i).items() if v is not None}, "text": test.texts[i]}
        for i in range(10)
    ]
    assert [d.snapshot_hash for d in loaded.route_many(items)] == [
        d.snapshot_hash for d in router.route_many(items)
    ]
