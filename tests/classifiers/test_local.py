"""LocalClassifier: estimator contract, the TF-IDF recipe, validation-only tuning, errors."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.classifiers import IntentClassifier, LocalClassifier, RankedLabels
from hybridroute.exceptions import DatasetError, NotFittedError, UserInputError

# --------------------------------------------------------------------------- data

_INTENTS = {
    "refund": ["refund", "money back", "reimburse", "return my payment"],
    "shipping": ["delivery", "shipping", "parcel", "courier"],
    "password": ["password", "log in", "locked out", "reset my login"],
    "cancel": ["cancel", "unsubscribe", "end my plan", "stop the subscription"],
    "invoice": ["invoice", "receipt", "bill", "tax document"],
}
_FILLER = (
    "please i need help with my the order account today asap thanks hello can you "
    "tell me about how why when where what is going on again"
).split()


def make_data(n_per_label: int, seed: int) -> tuple[list[str], list[str]]:
    """Seeded synthetic intents: filler words around one or two intent phrases."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for label, phrases in _INTENTS.items():
        for _ in range(n_per_label):
            words = list(rng.choice(_FILLER, size=int(rng.integers(3, 8))))
            for phrase in rng.choice(phrases, size=int(rng.integers(1, 3)), replace=False):
                words.insert(int(rng.integers(0, len(words) + 1)), str(phrase))
            texts.append(" ".join(words).capitalize() + rng.choice(["", "?", "!", "."]))
            labels.append(label)
    order = rng.permutation(len(texts))
    return [texts[i] for i in order], [labels[i] for i in order]


@pytest.fixture(scope="module")
def data() -> dict[str, tuple[list[str], list[str]]]:
    return {"train": make_data(30, seed=1), "test": make_data(10, seed=2)}


@pytest.fixture(scope="module")
def fitted(data) -> LocalClassifier:
    return LocalClassifier(Cs=(1.0, 10.0), random_state=0).fit(*data["train"])


# --------------------------------------------------------------------------- contract


def test_init_stores_arguments_only() -> None:
    clf = LocalClassifier(Cs=(2.0,), min_df=2, random_state=7)
    assert isinstance(clf, IntentClassifier)
    assert clf.kind == "local"
    assert clf.get_params()["Cs"] == (2.0,)
    assert clf.get_params()["random_state"] == 7
    assert not [k for k in vars(clf) if k.endswith("_")]
    assert "min_df=2" in repr(clf)


def test_set_params_round_trip_and_unknown() -> None:
    clf = LocalClassifier().set_params(min_df=3)
    assert clf.min_df == 3
    with pytest.raises(ValueError, match="unknown parameter 'alpha'"):
        clf.set_params(alpha=1)


def test_not_fitted() -> None:
    with pytest.raises(NotFittedError, match="not fitted yet"):
        LocalClassifier().predict_proba(["hello"])


def test_fit_returns_self_and_learned_state(fitted, data) -> None:
    texts, labels = data["train"]
    assert list(fitted.classes_) == sorted(set(labels))
    assert fitted.n_features_ == len(fitted.word_vocabulary_) + len(fitted.char_vocabulary_)
    assert fitted.weights_.shape == (fitted.n_features_, len(fitted.classes_))
    assert fitted.intercept_.shape == (len(fitted.classes_),)
    assert fitted.idf_.shape == (fitted.n_features_,)
    assert fitted.C_ in (1.0, 10.0)
    assert fitted.cv_results_["validation_source"] == "carved"
    # A carved validation share goes back into training for the final model.
    assert fitted.n_train_ == len(texts)


def test_predict_proba_rows_sum_to_one_and_accuracy(fitted, data) -> None:
    texts, labels = data["test"]
    proba = fitted.predict_proba(texts)
    assert proba.shape == (len(texts), len(fitted.classes_))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (proba >= 0).all()
    predicted = fitted.predict(texts)
    assert np.mean(np.array(predicted) == np.array(labels)) >= 0.9


@pytest.mark.parametrize("k", [1, 2, 3, 99])
def test_rank_is_sorted_top_k(fitted, data, k) -> None:
    texts = data["test"][0][:5]
    ranked = fitted.rank(texts, k=k)
    proba = fitted.predict_proba(texts)
    for row, r in zip(proba, ranked, strict=True):
        assert isinstance(r, RankedLabels)
        assert len(r.labels) == min(k, len(fitted.classes_))
        assert list(r.scores) == sorted(r.scores, reverse=True)
        assert r.top == fitted.classes_[np.argmax(row)]
        assert r.confidence == pytest.approx(row.max())
        assert not r.abstained


def test_single_text_equals_batch_row(fitted, data) -> None:
    texts = data["test"][0][:20]
    batch = fitted.predict_proba(texts)
    for i, text in enumerate(texts):
        np.testing.assert_array_equal(fitted.predict_proba([text])[0], batch[i])


@pytest.mark.parametrize("text", ["", "   ", "zzzz qqqq", "🙂🙂", "REFUND!!! refund refund"])
def test_odd_texts_get_a_distribution(fitted, text) -> None:
    proba = fitted.predict_proba([text])
    assert np.isfinite(proba).all()
    assert proba.sum() == pytest.approx(1.0)


def test_empty_batch(fitted) -> None:
    assert fitted.predict_proba([]).shape == (0, len(fitted.classes_))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=5))
def test_any_text_gives_probabilities(fitted, texts) -> None:
    proba = fitted.predict_proba(texts)
    assert proba.shape == (len(texts), len(fitted.classes_))
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)


# --------------------------------------------------------------------------- the recipe


@pytest.mark.parametrize("sublinear_tf", [True, False])
def test_features_match_scikit_learn_tfidf(data, sublinear_tf) -> None:
    """Our lean featurizer is exactly word 1-2 + char_wb 2-5 TF-IDF, each block L2-normed."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer

    from hybridroute.classifiers._tfidf import TfidfFeaturizer

    train, test = data["train"][0], data["test"][0] + ["", "Tab\tand  spaces\nnewline"]
    ours = TfidfFeaturizer.fit(
        train,
        word_ngram_range=(1, 2),
        char_ngram_range=(2, 5),
        lowercase=True,
        sublinear_tf=sublinear_tf,
        min_df=1,
    )
    word = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=sublinear_tf).fit(train)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=sublinear_tf).fit(
        train
    )
    assert ours.word_vocabulary == word.vocabulary_
    assert ours.char_vocabulary == char.vocabulary_
    expected = sp.hstack([word.transform(test), char.transform(test)]).toarray()
    np.testing.assert_allclose(ours.transform(test).toarray(), expected, rtol=1e-12, atol=1e-15)
    # again, with the vocabulary words' columns kept from the first call, and one by one
    assert ours._known_words
    np.testing.assert_allclose(ours.transform(test).toarray(), expected, rtol=1e-12, atol=1e-15)
    one_by_one = sp.vstack([ours.transform([t]) for t in test]).toarray()
    np.testing.assert_allclose(one_by_one, expected, rtol=1e-12, atol=1e-15)


def test_only_the_vocabularys_own_words_are_kept_between_calls(data) -> None:
    """A client's words (a name, an address) are not held by the featurizer after a call:
    only words of its fitted word vocabulary are."""
    from hybridroute.classifiers._tfidf import TfidfFeaturizer

    ours = TfidfFeaturizer.fit(
        data["train"][0],
        word_ngram_range=(1, 2),
        char_ngram_range=(2, 5),
        lowercase=True,
        sublinear_tf=True,
        min_df=1,
    )
    texts = ["my parcel for zyxwvu.quist@example.org", "Refund to Ms Zyxwvuquist please"]
    first = ours.transform(texts).toarray()
    assert ours._known_words and set(ours._known_words) <= set(ours.word_vocabulary)
    assert not [w for w in ours._known_words if "zyxwvu" in w]
    np.testing.assert_array_equal(ours.transform(texts).toarray(), first)


def test_probabilities_match_logistic_regression(data) -> None:
    """Scoring by our own dot product gives scikit-learn's multinomial probabilities (up to
    the single-precision weights)."""
    from sklearn.linear_model import LogisticRegression

    clf = LocalClassifier(Cs=(10.0,)).fit(*data["train"])
    texts = data["test"][0]
    x_train = clf._featurizer.transform(data["train"][0])
    lr = LogisticRegression(C=10.0, tol=clf.tol, max_iter=clf.max_iter).fit(
        x_train, data["train"][1]
    )
    np.testing.assert_allclose(
        clf.predict_proba(texts), lr.predict_proba(clf._featurizer.transform(texts)), atol=1e-5
    )


def test_binary_problem(data) -> None:
    texts, labels = data["train"]
    keep = [i for i, y in enumerate(labels) if y in ("refund", "shipping")]
    clf = LocalClassifier(Cs=(10.0,)).fit([texts[i] for i in keep], [labels[i] for i in keep])
    assert list(clf.classes_) == ["refund", "shipping"]
    assert clf.predict(["where is my parcel courier", "i want my money back refund"]) == [
        "shipping",
        "refund",
    ]
    np.testing.assert_allclose(clf.predict_proba(["parcel"]).sum(), 1.0)


# --------------------------------------------------------------------------- tuning


def test_given_validation_is_used_and_not_trained_on(data) -> None:
    train, val = data["train"], data["test"]
    clf = LocalClassifier(Cs=(0.01, 10.0)).fit(*train, validation=val)
    cv = clf.cv_results_
    assert cv["validation_source"] == "given"
    assert cv["n_validation"] == len(val[0])
    assert cv["C"] == [0.01, 10.0]
    assert len(cv["validation_accuracy"]) == 2
    best = cv["C"][int(np.argmax(cv["validation_accuracy"]))]
    assert clf.C_ == best
    assert clf.n_train_ == len(train[0])
    # Trained on the training rows only: the same as a fit with that C and no search (up
    # to the solver tolerance, as the search warm-starts along the grid).
    alone = LocalClassifier(Cs=(best,)).fit(*train)
    np.testing.assert_allclose(
        clf.predict_proba(val[0]), alone.predict_proba(val[0]), rtol=0, atol=1e-4
    )


def test_single_c_needs_no_validation(data) -> None:
    clf = LocalClassifier(Cs=(3.0,)).fit(*data["train"])
    assert clf.C_ == 3.0
    assert clf.cv_results_ == {
        "C": [3.0],
        "validation_accuracy": [],
        "n_iter": [clf.n_iter_],
        "n_validation": 0,
        "validation_source": "none",
    }
    assert 0 < clf.n_iter_ < clf.max_iter


def test_unconverged_final_model_warns(data) -> None:
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="stopped at max_iter=2"):
        LocalClassifier(Cs=(1.0, 10.0), max_iter=2).fit(*data["train"])


def test_ties_go_to_the_smaller_c(data) -> None:
    train = data["train"]
    clf = LocalClassifier(Cs=(10.0, 30.0)).fit(*train, validation=train)
    accuracies = clf.cv_results_["validation_accuracy"]
    assert accuracies[0] == accuracies[1] == 1.0
    assert clf.C_ == 10.0


def test_seeded_and_deterministic(data) -> None:
    texts = data["test"][0]
    a = LocalClassifier(Cs=(1.0, 10.0), random_state=3).fit(*data["train"])
    b = LocalClassifier(Cs=(1.0, 10.0), random_state=3).fit(*data["train"])
    np.testing.assert_array_equal(a.predict_proba(texts), b.predict_proba(texts))
    assert a.cv_results_ == b.cv_results_


def test_carved_split_is_stratified_and_seeded() -> None:
    from hybridroute.classifiers._training_data import stratified_holdout

    labels = ["a"] * 50 + ["b"] * 20 + ["c"] * 1
    m1 = stratified_holdout(labels, 0.1, seed=0)
    m2 = stratified_holdout(labels, 0.1, seed=0)
    m3 = stratified_holdout(labels, 0.1, seed=1)
    np.testing.assert_array_equal(m1, m2)
    assert not np.array_equal(m1, m3)
    y = np.array(labels)
    assert (m1[y == "a"].sum(), m1[y == "b"].sum(), m1[y == "c"].sum()) == (5, 2, 0)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("texts", "labels", "match"),
    [
        (["a b", "c d"], ["x", "x"], "at least two labels"),
        (["a b", "c d"], ["x"], "labels has 1 items but there are 2 texts"),
        (["a b", 3], ["x", "y"], r"texts\[1\] is a int"),
        (["a b", "c d"], ["x", None], r"labels\[1\] is a NoneType"),
        (["a b", "c d"], ["x", " "], r"labels\[1\] is empty"),
        ("just one text", ["x"], "not a single str"),
    ],
)
def test_fit_input_errors(texts, labels, match) -> None:
    with pytest.raises(DatasetError, match=match) as info:
        LocalClassifier(Cs=(1.0,)).fit(texts, labels)
    assert isinstance(info.value, UserInputError)


def test_predict_refuses_a_bare_string(fitted) -> None:
    with pytest.raises(DatasetError, match="wrap one text in a list"):
        fitted.predict_proba("where is my parcel")


def test_validation_errors(data) -> None:
    train = data["train"]
    with pytest.raises(DatasetError, match="not among the training labels"):
        LocalClassifier(Cs=(1.0, 3.0)).fit(*train, validation=(["x"], ["nope"]))
    with pytest.raises(DatasetError, match="validation must be a pair"):
        LocalClassifier(Cs=(1.0, 3.0)).fit(*train, validation=(["x"],))  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="too few rows"):
        LocalClassifier(Cs=(1.0, 3.0)).fit(["a b", "c d"], ["x", "y"])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"Cs": ()}, "Cs must hold one or more positive numbers"),
        ({"Cs": (1.0, -2.0)}, "Cs must hold one or more positive numbers"),
        ({"Cs": "abc"}, "Cs must be a sequence of numbers"),
        ({"validation_fraction": 1.5}, "validation_fraction must lie in"),
        ({"min_df": 0}, "min_df must be >= 1"),
        ({"max_iter": 0}, "max_iter must be >= 1"),
        ({"char_ngram_range": (4, 6)}, "char_ngram_range must satisfy"),
        ({"word_ngram_range": (2, 1)}, "word_ngram_range must satisfy"),
        ({"word_ngram_range": 3}, "word_ngram_range must be a pair of ints"),
    ],
)
def test_bad_parameters_fail_in_fit(data, params, match) -> None:
    clf = LocalClassifier(**params)  # __init__ validates nothing
    with pytest.raises(ValueError, match=match):
        clf.fit(*data["train"])


# --------------------------------------------------------------------------- public sets


def _public(name: str, **options):
    from hybridroute.datasets import load_dataset

    return load_dataset(name, download=False, **options)


def _latency_and_throughput(clf: LocalClassifier, texts: list[str]) -> tuple[float, float]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        clf.predict_proba(texts[:50])  # warm up
        times = []
        for text in texts[:500]:
            t0 = time.perf_counter()
            clf.predict_proba([text])
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        clf.predict_proba(texts)
        throughput = len(texts) / (time.perf_counter() - t0)
    return float(np.median(times)), throughput


@pytest.mark.slow
def test_banking77_target() -> None:
    ds = _public("banking77")
    train, test = ds.split("train"), ds.split("test")
    clf = LocalClassifier(random_state=0).fit(train.texts, train.y)
    accuracy = np.mean(np.array(clf.predict(test.texts)) == np.array(test.y))
    assert accuracy >= 0.91, accuracy
    p50, throughput = _latency_and_throughput(clf, test.texts)
    assert p50 <= 1.5e-3, p50
    assert throughput >= 10_000, throughput


@pytest.mark.slow
def test_clinc150_in_scope_target() -> None:
    ds = _public("clinc150", oos="drop")
    train, val, test = ds.split("train"), ds.split("validation"), ds.split("test")
    clf = LocalClassifier(random_state=0).fit(train.texts, train.y, validation=(val.texts, val.y))
    accuracy = np.mean(np.array(clf.predict(test.texts)) == np.array(test.y))
    assert accuracy >= 0.92, accuracy
