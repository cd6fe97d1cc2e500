"""Every classifier speaks scikit-learn's public estimator API (issue 16, item 5e).

``get_params`` / ``set_params`` (nested ``stage__param`` keys included) and
:func:`sklearn.base.clone`, which gives an unfitted copy with equal parameters. No test
here needs torch: the fitted embedding classifier is a directory saved earlier.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

from hybridroute.classifiers import (
    CascadeClassifier,
    EmbeddingClassifier,
    IntentClassifier,
    LLMClassifier,
    LocalClassifier,
    PromptTemplate,
    RetrySettings,
    load_classifier,
)

TEXTS = ["where is my card", "card not arrived", "refund me", "money back please"] * 3
LABELS = ["card", "card", "refund", "refund"] * 3
EMBEDDING_DIR = Path(__file__).parent / "data" / "embedding_legacy" / "model"


def _local() -> LocalClassifier:
    return LocalClassifier(Cs=(3.0,), min_df=1, random_state=4)


def _llm() -> LLMClassifier:
    return LLMClassifier(
        "openai/gpt-4o-mini",
        api_base="http://127.0.0.1:9/v1",
        prompt=PromptTemplate(),
        retry=RetrySettings(timeout=1.0),
        n_samples=3,
        seed=2,
    )


def _cascade() -> CascadeClassifier:
    return CascadeClassifier(_local(), _llm(), threshold=0.5)


UNFITTED = {
    "local": _local,
    "embedding": lambda: EmbeddingClassifier(layers=(-1,), tfidf_Cs=(10.0,), batch_size=8),
    "llm": _llm,
    "cascade": _cascade,
}


def _fitted(kind: str) -> IntentClassifier:
    if kind == "embedding":
        return load_classifier(EMBEDDING_DIR)
    if kind == "cascade":
        local, llm = _local().fit(TEXTS, LABELS), _llm().fit(TEXTS, LABELS)
        return CascadeClassifier.from_fitted(local, llm, threshold=0.5)
    return UNFITTED[kind]().fit(TEXTS, LABELS)


def _same(a, b) -> bool:
    """Equal parameter values; estimators by type and parameters (clones are new objects)."""
    if isinstance(a, IntentClassifier):
        return type(a) is type(b) and _same_params(a, b)
    return a == b


def _same_params(a, b) -> bool:
    pa, pb = a.get_params(deep=False), b.get_params(deep=False)
    return pa.keys() == pb.keys() and all(_same(pa[k], pb[k]) for k in pa)


@pytest.mark.parametrize("kind", sorted(UNFITTED))
def test_params_are_the_init_arguments(kind):
    clf = UNFITTED[kind]()
    names = [p for p in inspect.signature(type(clf).__init__).parameters if p != "self"]
    params = clf.get_params(deep=False)
    assert sorted(params) == sorted(names)
    assert all(params[name] is getattr(clf, name) for name in names)
    assert not [k for k in vars(clf) if k.endswith("_")]  # __init__ learned nothing


@pytest.mark.parametrize("kind", sorted(UNFITTED))
def test_clone_is_unfitted_with_equal_params(kind):
    fitted = _fitted(kind)
    assert hasattr(fitted, "classes_")
    copy = clone(fitted)
    assert type(copy) is type(fitted) and copy is not fitted
    assert not hasattr(copy, "classes_") and not hasattr(copy, "manifest_")
    assert _same_params(copy, fitted)
    # nested stages are cloned too, never shared
    for name, value in fitted.get_params(deep=False).items():
        if isinstance(value, IntentClassifier):
            assert copy.get_params(deep=False)[name] is not value


@pytest.mark.parametrize("kind", sorted(UNFITTED))
def test_set_params_round_trip(kind):
    source, target = UNFITTED[kind](), UNFITTED[kind]()
    target.set_params(**dict.fromkeys(target.get_params(deep=False)))  # all None
    assert not _same_params(target, source)
    assert target.set_params(**source.get_params(deep=False)) is target
    assert _same_params(target, source)
    with pytest.raises(ValueError, match=f"unknown parameter 'alpha' of {type(source).__name__}"):
        source.set_params(alpha=1)


def test_a_refitted_clone_is_the_same_model():
    fitted = _fitted("local")
    again = clone(fitted).fit(TEXTS, LABELS)
    np.testing.assert_array_equal(again.predict_proba(TEXTS), fitted.predict_proba(TEXTS))


def test_nested_params_of_a_cascade():
    cascade = _cascade()
    deep = cascade.get_params()
    assert deep["local__Cs"] == (3.0,) and deep["llm__model"] == "openai/gpt-4o-mini"
    assert deep["local"] is cascade.local and "threshold" in deep
    cascade.set_params(local__Cs=(1.0, 10.0), llm__seed=7, threshold=0.25)
    assert cascade.local.Cs == (1.0, 10.0) and cascade.llm.seed == 7
    assert cascade.threshold == 0.25
    with pytest.raises(ValueError, match="unknown parameter 'nope' of LocalClassifier"):
        cascade.set_params(local__nope=1)
    with pytest.raises(ValueError, match="threshold has no parameters of its own"):
        cascade.set_params(threshold__x=1)


def test_sklearn_tools_read_the_params():
    """What a grid search does: clone with each candidate's parameters set."""
    from sklearn.model_selection import ParameterGrid

    base = _local()
    candidates = [clone(base).set_params(**p) for p in ParameterGrid({"Cs": [(1.0,), (10.0,)]})]
    assert [c.Cs for c in candidates] == [(1.0,), (10.0,)] and base.Cs == (3.0,)


@pytest.mark.parametrize(
    ("clf", "expected"),
    [
        (LocalClassifier(), "LocalClassifier()"),
        (LocalClassifier(min_df=2, Cs=(1.0,)), "LocalClassifier(Cs=(1.0,), min_df=2)"),
        (EmbeddingClassifier(layers=(-1,)), "EmbeddingClassifier(layers=(-1,))"),
        (LLMClassifier("openai/x", seed=3), "LLMClassifier(model='openai/x', seed=3)"),
    ],
)
def test_repr_names_the_changed_arguments(clf, expected):
    assert repr(clf) == expected


def test_repr_leaks_no_credential():
    key = "sk-proj-" + "a1B2c3D4e5" * 5
    text = repr(LLMClassifier("openai/x", extra_params={"user": key}))
    assert key not in text and "LLMClassifier(" in text


def test_the_protocol_needs_no_scikit_learn():
    """Parameters, clone-by-hand and repr work in a process that never imports sklearn."""
    code = (
        "import sys, json\n"
        "from hybridroute.classifiers import LocalClassifier\n"
        "c = LocalClassifier(Cs=(2.0,)).set_params(min_df=3)\n"
        "d = type(c)(**c.get_params(deep=False))\n"
        "print(json.dumps([repr(d), 'sklearn' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["LocalClassifier(Cs=(2.0,), min_df=3)", False]
