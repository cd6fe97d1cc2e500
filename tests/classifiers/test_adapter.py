"""The adapters: a scikit-learn estimator or a ``texts -> probabilities`` callable as a router
classifier, saved and loaded without pickle, by skops or by trusted reference, probe-checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hybridroute.classifiers import load_classifier
from hybridroute.classifiers.adapter import (
    PROBA_SUM_TOLERANCE,
    TRUSTED_CODE_ENV,
    FunctionAdapter,
    SklearnAdapter,
    trust,
    trusted,
)
from hybridroute.datasets import load_dataset
from hybridroute.exceptions import ArtifactError, ClassifierError, NotFittedError

TRAIN_MODEL = """
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from hybridroute.datasets import load_dataset

def train(C=10.0):
    train = load_dataset("support-tickets").split("train")
    # a new stop-word list each time: scikit-learn records its id(), which must not matter
    vec = TfidfVectorizer(sublinear_tf=True, stop_words=["the", "a"])
    clf = LogisticRegression(C=C, solver="newton-cg", max_iter=500)
    return make_pipeline(vec, clf).fit(train.texts, train.y)
"""


@pytest.fixture(autouse=True)
def _no_trust(monkeypatch):
    """Every test starts with nothing trusted (the allowlist is per process)."""
    from hybridroute.classifiers.adapter import _trust

    monkeypatch.setattr(_trust, "_TRUSTED", set())
    monkeypatch.delenv(TRUSTED_CODE_ENV, raising=False)


@pytest.fixture(scope="module")
def pipeline():
    namespace: dict = {}
    exec(TRAIN_MODEL, namespace)
    return namespace["train"]()


@pytest.fixture(scope="module")
def texts():
    return load_dataset("support-tickets").split("test").texts[:40]


@pytest.fixture
def user_package(tmp_path, monkeypatch, pipeline):
    """A module of the user's own on sys.path: a trained model, a scoring function, and a
    custom transformer type skops does not trust by default."""
    root = tmp_path / "userpkg"
    root.mkdir()
    (root / "byo_models.py").write_text(
        TRAIN_MODEL
        + textwrap.dedent(
            """
            import numpy as np
            from sklearn.base import BaseEstimator, TransformerMixin

            model = None  # set by the test (as the user's code would load it)

            def score(texts):
                return model.predict_proba(list(texts))

            class Lower(BaseEstimator, TransformerMixin):
                def fit(self, X, y=None):
                    return self

                def transform(self, X):
                    return [t.lower() for t in X]
            """
        )
    )
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop("byo_models", None)
    import byo_models

    byo_models.model = pipeline
    byo_models.CLASSES = [str(c) for c in pipeline.classes_]
    yield byo_models
    sys.modules.pop("byo_models", None)


# --------------------------------------------------------------------------- scikit-learn


def test_sklearn_adapter_scores_like_the_estimator(pipeline, texts):
    clf = SklearnAdapter(pipeline).fit()
    assert list(clf.classes_) == [str(c) for c in pipeline.classes_]
    np.testing.assert_array_equal(clf.predict_proba(texts), pipeline.predict_proba(texts))
    ranked = clf.rank(texts[:3], k=2)
    assert [r.top for r in ranked] == list(pipeline.predict(texts[:3]))
    assert clf.untrusted_types_ == [] and clf.storage_ == "skops"


def test_skops_round_trip_keeps_scores_and_fingerprint(pipeline, texts, tmp_path):
    clf = SklearnAdapter(pipeline, model_id="tickets-lr").fit()
    saved = clf.save(tmp_path / "model")
    assert sorted(p.name for p in saved.iterdir()) == ["estimator.npz", "manifest.json"]
    loaded = load_classifier(saved)
    assert isinstance(loaded, SklearnAdapter)
    np.testing.assert_array_equal(loaded.predict_proba(texts), clf.predict_proba(texts))
    assert loaded.fingerprint() == clf.fingerprint()
    # a loaded adapter saved again gives the same bytes (it keeps the archive it read)
    again = loaded.save(tmp_path / "again")
    for name in ("estimator.npz", "manifest.json"):
        assert (again / name).read_bytes() == (saved / name).read_bytes()


def test_the_same_training_gives_the_same_fingerprint(pipeline):
    """skops names objects by id(), and the vectoriser records one: the canonical archive
    depends on neither (two trainings are two sets of objects)."""
    namespace: dict = {}
    exec(TRAIN_MODEL, namespace)
    again = SklearnAdapter(namespace["train"]()).fit()
    assert again.payload_ == SklearnAdapter(pipeline).fit().payload_


@pytest.mark.slow
def test_the_same_training_gives_the_same_fingerprint_in_another_process(pipeline):
    """The same, across processes (object ids, hash seeds)."""
    code = TRAIN_MODEL + (
        "\nfrom hybridroute.classifiers.adapter import SklearnAdapter\n"
        "print(SklearnAdapter(train()).fit().fingerprint())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=True
    )
    assert out.stdout.strip() == SklearnAdapter(pipeline).fit().fingerprint()


@pytest.mark.parametrize(
    "change",
    [
        {"model_id": "another name"},
        {"probe_texts": ("a different probe",)},
        {"retrain": 0.5},
    ],
    ids=["model_id", "probe", "another-model"],
)
def test_what_changes_the_model_changes_its_fingerprint(pipeline, change):
    base = SklearnAdapter(pipeline, model_id="m").fit().fingerprint()
    if "retrain" in change:
        namespace: dict = {}
        exec(TRAIN_MODEL, namespace)
        other = SklearnAdapter(namespace["train"](C=change["retrain"]), model_id="m")
    else:
        other = SklearnAdapter(pipeline, **{"model_id": "m", **change})
    assert other.fit().fingerprint() != base


def test_a_type_skops_does_not_trust_is_built_only_when_trusted(user_package, tmp_path, texts):
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(user_package.Lower(), *[s for _, s in user_package.model.steps])
    clf = SklearnAdapter(model).fit()
    assert clf.untrusted_types_ == ["byo_models.Lower"]
    saved = clf.save(tmp_path / "model")
    with pytest.raises(ArtifactError, match=r"types skops does not trust.*byo_models\.Lower"):
        load_classifier(saved)
    # the saved directory cannot trust itself: its state lists the type, loading ignores it
    state = json.loads((saved / "manifest.json").read_text())["state"]
    assert state["untrusted_types"] == ["byo_models.Lower"]
    trust("byo_models.Lower")
    np.testing.assert_allclose(
        load_classifier(saved).predict_proba(texts), clf.predict_proba(texts)
    )


def test_a_changed_archive_is_refused_by_the_checksum(pipeline, tmp_path):
    saved = SklearnAdapter(pipeline).fit().save(tmp_path / "model")
    blob = bytearray((saved / "estimator.npz").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (saved / "estimator.npz").write_bytes(bytes(blob))
    with pytest.raises(ArtifactError, match="checksum does not match"):
        load_classifier(saved)


@pytest.mark.parametrize("how", ["trust()", "environment"])
def test_by_reference_loads_only_a_trusted_reference(
    user_package, tmp_path, texts, monkeypatch, how
):
    clf = SklearnAdapter(user_package.model, reference="byo_models:model").fit()
    saved = clf.save(tmp_path / "model")
    assert sorted(p.name for p in saved.iterdir()) == ["manifest.json"]  # nothing but a name
    with pytest.raises(ArtifactError, match=r"does not trust.*HYBRIDROUTE_TRUSTED_MODEL_CODE"):
        load_classifier(saved)
    if how == "trust()":
        trust("byo_models:model")
    else:
        monkeypatch.setenv(TRUSTED_CODE_ENV, "other.mod:thing, byo_models:model")
    assert "byo_models:model" in trusted()
    loaded = load_classifier(saved)
    assert loaded.estimator is user_package.model
    assert loaded.fingerprint() == clf.fingerprint()


def test_a_model_swapped_behind_its_reference_fails_the_probe(user_package, tmp_path, monkeypatch):
    saved = SklearnAdapter(user_package.model, reference="byo_models:model").fit()
    path = saved.save(tmp_path / "model")
    trust("byo_models:model")
    monkeypatch.setattr(user_package, "model", user_package.train(C=0.1))  # retrained
    with pytest.raises(ArtifactError, match="does not give the probe scores"):
        load_classifier(path)


@pytest.mark.parametrize(
    "reference",
    ["os:system", "subprocess:run", "builtins:eval"],
)
def test_an_edited_manifest_cannot_name_code_to_import(pipeline, tmp_path, reference):
    """Even with the seal recomputed, a reference nobody trusted is never imported."""
    from hybridroute._integrity import seal
    from hybridroute.classifiers._persistence import _fingerprint

    saved = SklearnAdapter(pipeline).fit().save(tmp_path / "model")
    doc = json.loads((saved / "manifest.json").read_text())
    doc["state"].update(storage="reference", reference=reference)
    doc["files"] = {}
    (saved / "estimator.npz").unlink()
    doc.pop("content_sha256")
    doc["fingerprint"] = _fingerprint(doc, saved)
    (saved / "manifest.json").write_text(json.dumps(seal(doc)))
    with pytest.raises(ArtifactError, match=f"reference to '{reference}'.*does not trust"):
        load_classifier(saved)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda p: object(), ValueError, "no predict_proba"),
        (
            lambda p: __import__("sklearn.linear_model").linear_model.LogisticRegression(),
            NotFittedError,
            "train it",
        ),
        (lambda p: p, ValueError, "does not import as this estimator"),
    ],
    ids=["no-predict-proba", "unfitted", "wrong-reference"],
)
def test_fit_refuses_what_is_not_a_trained_classifier(pipeline, make, error, match):
    reference = "json:dumps" if match.startswith("does not") else None
    with pytest.raises(error, match=match):
        SklearnAdapter(make(pipeline), reference=reference).fit()


# --------------------------------------------------------------------------- callables


def _uniform(texts):
    return np.full((len(texts), 3), 1 / 3)


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (lambda texts: np.ones((len(texts), 2)) / 2, r"shape \(2, 2\), expected \(2, 3\)"),
        (lambda texts: np.full((len(texts), 3), 0.3), "sum to 0.9"),
        (lambda texts: np.full((len(texts), 3), np.nan), "not a probability"),
        (lambda texts: [["a", "b", "c"]] * len(texts), "not numbers"),
        (lambda texts: np.array([[1.2, -0.1, -0.1]] * len(texts)), "not a probability"),
    ],
    ids=["shape", "sum", "nan", "strings", "negative"],
)
def test_a_callable_answer_that_is_not_probabilities_is_a_classifier_error(answer, match):
    clf = FunctionAdapter(answer, ["a", "b", "c"]).fit()
    with pytest.raises(ClassifierError, match=match):
        clf.predict_proba(["one", "two"])


def test_a_row_may_miss_1_by_the_tolerance_only():
    off = 1 - PROBA_SUM_TOLERANCE / 2
    clf = FunctionAdapter(lambda t: np.tile([off / 2, off / 2, 0.0], (len(t), 1)), ["a", "b", "c"])
    assert clf.fit().predict_proba(["x"]).shape == (1, 3)


def test_a_lambda_works_in_memory_and_is_refused_at_save(tmp_path):
    clf = FunctionAdapter(lambda t: _uniform(t), ["a", "b", "c"]).fit()
    assert clf.reference_ is None
    assert clf.predict(["x"]) == ["a"]
    with pytest.raises(ValueError, match="cannot be saved: a function is saved by reference"):
        clf.save(tmp_path / "model")


def test_a_module_function_is_saved_by_reference_and_probe_checked(user_package, tmp_path, texts):
    clf = FunctionAdapter(
        user_package.score, user_package.CLASSES, model_id="v1", probe_texts=texts[:3]
    ).fit()
    assert clf.reference_ == "byo_models:score"
    saved = clf.save(tmp_path / "model")
    with pytest.raises(ArtifactError, match="does not trust"):
        load_classifier(saved)
    trust("byo_models:score")
    loaded = load_classifier(saved)
    assert isinstance(loaded, FunctionAdapter) and loaded.function is user_package.score
    np.testing.assert_array_equal(loaded.predict_proba(texts), clf.predict_proba(texts))
    assert loaded.fingerprint() == clf.fingerprint()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"function": 3}, "must be callable"),
        ({"classes": "abc"}, "not one string"),
        ({"classes": ["a", "a"]}, "at least 2 distinct"),
        ({"reference": "json:dumps"}, "does not import as this function"),
        ({"reference": "no colon"}, "must be 'package.module:function'"),
        ({"model_id": ""}, "model_id must be a non-empty string"),
    ],
)
def test_function_adapter_fit_checks(kwargs, match):
    args = {"function": _uniform, "classes": ["a", "b", "c"], **kwargs}
    with pytest.raises(ValueError, match=match):
        FunctionAdapter(**args).fit()


@pytest.mark.parametrize("name", ["not a name", "os", "", "a:b:c"])
def test_trust_refuses_what_names_no_code(name, monkeypatch):
    with pytest.raises(ValueError, match="trusted model code is named"):
        trust(name)
    monkeypatch.setenv(TRUSTED_CODE_ENV, name + ",x.y:z")
    if name:
        with pytest.raises(ValueError, match="trusted model code is named"):
            trusted()


def test_importing_the_adapters_does_not_import_sklearn():
    code = "import sys, hybridroute.classifiers.adapter, hybridroute.scores; print('sklearn' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ},
    )
    assert out.stdout.strip() == "False"


def test_get_params_and_repr_follow_the_estimator_contract(pipeline):
    clf = SklearnAdapter(pipeline, model_id="m")
    assert clf.get_params(deep=False) == {
        "estimator": pipeline,
        "reference": None,
        "model_id": "m",
        "probe_texts": clf.probe_texts,
    }
    assert not hasattr(clf, "classes_")  # __init__ stores, fit checks
    assert "model_id='m'" in repr(clf)


def test_without_skops_saving_in_skops_format_is_refused_clearly(pipeline, tmp_path, monkeypatch):
    saved = SklearnAdapter(pipeline).fit().save(tmp_path / "model")
    monkeypatch.setitem(sys.modules, "skops", None)
    monkeypatch.setitem(sys.modules, "skops.io", None)
    with pytest.raises(ValueError, match=r"needs skops.*or save the estimator by reference"):
        SklearnAdapter(pipeline).fit()
    with pytest.raises(ArtifactError, match="needs skops, which is not installed"):
        load_classifier(saved)


def test_public_names_are_pinned():
    import hybridroute.classifiers.adapter as adapter

    assert sorted(adapter.__all__) == [
        "DEFAULT_PROBE_TEXTS",
        "FunctionAdapter",
        "PROBA_SUM_TOLERANCE",
        "PROBE_TOLERANCE",
        "SklearnAdapter",
        "TRUSTED_CODE_ENV",
        "check_scores",
        "trust",
        "trusted",
    ]
