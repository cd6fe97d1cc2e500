"""Issue 28, item 5: the k most similar labelled examples in the prompt (stand-in only;
the real model's figures are in ``benchmarks/bench_llm.py --real``)."""

from __future__ import annotations

import pytest

from hybridroute.classifiers import LLMClassifier, RetrySettings, load_classifier
from hybridroute.classifiers.llm._similar import SimilarExamples
from hybridroute.testing import LabelMapPolicy, StandInLLM

TRAIN = {
    "where is my card": "card_arrival",
    "my card has not arrived yet": "card_arrival",
    "give my money back": "refund",
    "I want a refund for the order": "refund",
    "add money to my account": "top_up",
    "top up failed again": "top_up",
}
FAST = RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005)


def pool(k: int) -> SimilarExamples:
    return SimilarExamples(list(TRAIN), list(TRAIN.values()), k=k)


def test_the_nearest_come_last_with_their_labels():
    card, refund = pool(2).nearest(["has my card arrived", "a refund for my order please"])
    assert card[-1] == ("my card has not arrived yet", "card_arrival")
    assert refund[-1] == ("I want a refund for the order", "refund")
    assert len(card) == len(refund) == 2
    assert pool(2).nearest(["has my card arrived"]) == [card]  # deterministic
    assert pool(50).k == len(TRAIN) and pool(1).nearest([]) == []


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((["a"], ["x", "y"], 1), "differ in length"),
        (([], [], 1), "pool of examples is empty"),
        ((["a"], ["x"], 0), "k must be a positive integer"),
        ((["a"], ["x"], True), "k must be a positive integer"),
    ],
)
def test_bad_pools_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        SimilarExamples(*args)


@pytest.mark.parametrize(
    "state",
    [None, {"pool": "x"}, {"pool": [["a"]], "k": 1}, {"pool": [["a", 1]], "k": 1}, {"pool": []}],
)
def test_malformed_states_are_refused(state):
    with pytest.raises(ValueError, match=r"similar-examples (state|pool entry)"):
        SimilarExamples.from_state(state)


def fitted(server, **kw) -> LLMClassifier:
    return LLMClassifier("openai/m", api_base=server.api_base, retry=FAST, **kw).fit(
        list(TRAIN), list(TRAIN.values())
    )


def system_message(body) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def test_each_text_is_shown_its_own_nearest_examples():
    with StandInLLM(LabelMapPolicy(TRAIN), record=2) as server:
        clf = fitted(server, n_similar_examples=1)
        clf.classify(["has my card arrived", "a refund for my order please"])
        systems = sorted(system_message(b) for b in server.requests)
    card = next(s for s in systems if "my card has not arrived yet" in s)
    refund = next(s for s in systems if "I want a refund for the order" in s)
    assert "I want a refund" not in card and "my card has not arrived" not in refund
    assert "label: card_arrival" in card and "label: refund" in refund


def test_without_the_option_no_example_is_shown():
    with StandInLLM(LabelMapPolicy(TRAIN), record=1) as server:
        fitted(server).classify(["has my card arrived"])
        assert "Examples:" not in system_message(server.requests[0])


def test_the_examples_are_part_of_the_cache_key(tmp_path):
    with StandInLLM(LabelMapPolicy(TRAIN)) as server:
        fitted(server, cache_dir=tmp_path).classify(["has my card arrived"])
        fitted(server, cache_dir=tmp_path, n_similar_examples=2).classify(["has my card arrived"])
        fitted(server, cache_dir=tmp_path, n_similar_examples=3).classify(["has my card arrived"])
        assert server.request_count == 3
        fitted(server, cache_dir=tmp_path, n_similar_examples=2).classify(["has my card arrived"])
        assert server.request_count == 3


def test_saved_and_loaded_with_the_same_examples(tmp_path):
    clf = LLMClassifier("openai/m", n_similar_examples=2).fit(list(TRAIN), list(TRAIN.values()))
    clf.save(tmp_path / "m")
    loaded = load_classifier(tmp_path / "m")
    texts = ["has my card arrived", "top up please"]
    assert loaded.similar_.nearest(texts) == clf.similar_.nearest(texts)
    assert loaded.similar_.fingerprint() == clf.similar_.fingerprint()
