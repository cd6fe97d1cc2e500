"""Issue 28, items 1 and 3, against the stand-in: the structured-output mode picked per
server, the request shapes each server takes, an out-of-range confidence repaired (not a
transport error), an answer cut off at ``max_tokens`` ending as a bounded, reported
failure, and the local model server's checks (no model is started here: the real-model
tests are in ``test_llm_real.py``)."""

from __future__ import annotations

import socket

import pytest

from hybridroute.classifiers import LLMClassifier, RetrySettings
from hybridroute.classifiers.llm import _local_server
from hybridroute.classifiers.llm._local_server import (
    LocalModelServer,
    check_gguf,
    check_port,
    default_threads,
)
from hybridroute.classifiers.llm._servers import (
    SERVERS,
    answer_token_bound,
    server_profile,
)
from hybridroute.cli._app import main
from hybridroute.exceptions import InputError, UserInputError
from hybridroute.testing import LabelMapPolicy, StandInLLM
from hybridroute.testing._standin_answers import StandInAnswer

LABELS = ["card_arrival", "refund", "top_up"]
TRAIN = {
    "where is my card": "card_arrival",
    "give my money back": "refund",
    "top up failed": "top_up",
}
FAST = RetrySettings(timeout=2.0, backoff_initial=0.001, backoff_max=0.005)


def fitted(standin: StandInLLM, **kw) -> LLMClassifier:
    kw.setdefault("retry", FAST)
    return LLMClassifier("openai/smol", api_base=standin.api_base, **kw).fit(
        list(TRAIN), list(TRAIN.values())
    )


# --------------------------------------------------------------------------- mode per server


@pytest.mark.parametrize(
    ("server", "confidence", "mode"),
    [
        ("openai", "verbalized", "tools"),
        ("openai", "self_consistency", "tools"),
        ("openai", "logprobs", "json_schema"),  # no log-probabilities for tool calls there
        ("llama_cpp", "verbalized", "tools"),
        ("llama_cpp", "logprobs", "tools"),  # its tool calls carry log-probabilities
    ],
)
def test_auto_picks_the_mode_per_server(server, confidence, mode):
    clf = LLMClassifier("openai/smol", server=server, confidence=confidence)
    assert clf.fit(["a", "b"], ["x", "y"]).mode_ == mode


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_an_explicit_mode_is_kept(mode):
    assert LLMClassifier("m", mode=mode, server="llama_cpp").fit(["a"], ["x"]).mode_ == mode


def test_llama_cpp_takes_logprobs_with_tools_openai_does_not():
    LLMClassifier("m", mode="tools", server="llama_cpp", confidence="logprobs").fit(["a"], ["x"])
    with pytest.raises(ValueError, match="server='llama_cpp' for llama-cpp-python"):
        LLMClassifier("m", mode="tools", confidence="logprobs").fit(["a"], ["x"])


def _schema_request():
    schema = {
        "type": "object",
        "properties": {
            "label": {"enum": LABELS, "type": "string"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
    }
    return {
        "response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": schema}},
        "tools": [{"type": "function", "function": {"name": "A", "parameters": schema}}],
    }


def test_openai_requests_are_left_in_openai_shapes():
    request = _schema_request()
    assert server_profile("openai").adapt(request) == request


def test_llama_cpp_gets_json_object_with_schema_and_listed_confidences():
    request = _schema_request()
    before = repr(request)
    adapted = server_profile("llama_cpp").adapt(request)
    assert repr(request) == before  # the input is left as it was
    response_format = adapted["response_format"]
    assert response_format["type"] == "json_object" and "json_schema" not in response_format
    for schema in (response_format["schema"], adapted["tools"][0]["function"]["parameters"]):
        values = schema["properties"]["confidence"]["enum"]
        assert values[0] == 0 and values[-1] == 1 and len(values) == 101
        assert all(0 <= v <= 1 for v in values)
        assert schema["properties"]["label"]["enum"] == LABELS


@pytest.mark.parametrize("name", [None, "", "OpenAI", "vllm"])
def test_unknown_servers_are_refused(name):
    with pytest.raises(ValueError, match="unknown server"):
        server_profile(name)
    assert set(SERVERS) == {"openai", "llama_cpp"}


def test_the_answer_bound_grows_with_the_longest_label():
    short, long = answer_token_bound(["a"]), answer_token_bound(["a", "x" * 200])
    assert long - short == 199 and short > len('{"label": "a", "confidence": 0.123}')


@pytest.mark.parametrize("mode", ["tools", "json_schema"])
def test_each_server_gets_its_request_shape_end_to_end(mode):
    with StandInLLM(LabelMapPolicy(TRAIN), labels=LABELS, record=4) as server:
        for name in ("openai", "llama_cpp"):
            item = fitted(server, mode=mode, server=name).classify(["give my money back"]).items[0]
            assert item.label == "refund"
        openai_body, llama_body = server.requests
    assert "max_tokens" not in openai_body
    assert llama_body["max_tokens"] == answer_token_bound(LABELS)
    if mode == "json_schema":
        assert openai_body["response_format"]["type"] == "json_schema"
        assert llama_body["response_format"]["type"] == "json_object"
        assert llama_body["response_format"]["schema"]["properties"]["label"]["enum"] == LABELS


def test_a_configured_max_tokens_wins():
    with StandInLLM(LabelMapPolicy(TRAIN), labels=LABELS, record=1) as server:
        fitted(server, server="llama_cpp", extra_params={"max_tokens": 77}).classify(["x"])
        assert server.requests[0]["max_tokens"] == 77


# --------------------------------------------------------------------------- out-of-range


class SaysTenFirst:
    """A model that first answers ``confidence=10`` (as SmolLM2 does), then 0.9."""

    def __init__(self, always: bool = False) -> None:
        self.seen: set[str] = set()
        self.always = always

    def __call__(self, text, labels):
        first = text not in self.seen
        self.seen.add(text)
        return StandInAnswer(TRAIN.get(text, labels[0]), 10.0 if first or self.always else 0.9)


@pytest.mark.parametrize("mode", ["tools", "json_schema", "json"])
def test_an_out_of_range_confidence_is_repaired(mode):
    with StandInLLM(SaysTenFirst(), labels=LABELS) as server:
        batch = fitted(server, mode=mode).classify(["give my money back", "top up failed"])
        assert server.stats().get("reask") == 2
    assert [i.label for i in batch.items] == ["refund", "top_up"]
    assert all(i.scores[0][1] == pytest.approx(0.9) for i in batch.items)
    assert batch.report.request_outcomes == {"invalid_label": 2, "answered": 2}


def test_an_answer_that_stays_out_of_range_abstains_as_invalid_not_provider_error():
    with StandInLLM(SaysTenFirst(always=True), labels=LABELS) as server:
        item = fitted(server).classify(["give my money back"]).items[0]
    assert item.abstain_reason == "invalid_label"
    assert "less than or equal to 1" in item.detail
    assert item.usage.requests == 1 + FAST.max_label_repairs


# --------------------------------------------------------------------------- cut off


@pytest.mark.parametrize("mode", ["json", "md_json", "tools"])
def test_an_answer_cut_off_at_max_tokens_is_one_bounded_reported_failure(mode):
    with StandInLLM(LabelMapPolicy(TRAIN), labels=LABELS) as server:
        batch = fitted(server, mode=mode, extra_params={"max_tokens": 3}).classify(
            ["give my money back", "top up failed"]
        )
        assert server.request_count == 2  # never re-asked: it would run on again
    assert [i.abstain_reason for i in batch.items] == ["invalid_label", "invalid_label"]
    assert all("cut off at max_tokens" in i.detail for i in batch.items)
    assert batch.report.request_outcomes == {"cut_off": 2}
    assert batch.report.abstentions == {"invalid_label": 2}


# --------------------------------------------------------------------------- the local server


def test_check_gguf(tmp_path):
    with pytest.raises(InputError, match="no such GGUF model file"):
        check_gguf(tmp_path / "missing.gguf")
    with pytest.raises(InputError, match="not a regular file"):
        check_gguf(tmp_path)
    for content in (b"", b"GGU", b"PK\x03\x04 a zip", b"gguf lower case"):
        bad = tmp_path / "bad.gguf"
        bad.write_bytes(content)
        with pytest.raises(InputError, match="not a GGUF model file"):
            check_gguf(bad)
    good = tmp_path / "m.gguf"
    good.write_bytes(b"GGUF\x03\x00")
    assert check_gguf(good) == good


def test_check_port():
    assert check_port("127.0.0.1", 0) > 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(UserInputError, match=f"port {port} on 127.0.0.1 is taken"):
            check_port("127.0.0.1", port)
    for bad in (-1, 65536):
        with pytest.raises(UserInputError, match=r"--port must be in 0\.\.65535"):
            check_port("127.0.0.1", bad)


def test_default_threads_leave_a_core(monkeypatch):
    for cores, want in ((None, 1), (1, 1), (2, 1), (16, 15)):
        monkeypatch.setattr(_local_server.os, "cpu_count", lambda c=cores: c)
        assert default_threads() == want


def test_the_command_line_of_the_server(tmp_path):
    model = tmp_path / "m.gguf"
    cmd = LocalModelServer(model, port=1234, threads=3, alias="x", n_ctx=512).command()
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    pairs = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert pairs == {
        "--model": str(model),
        "--model_alias": "x",
        "--host": "127.0.0.1",
        "--port": "1234",
        "--n_threads": "3",
        "--n_threads_batch": "3",
        "--n_ctx": "512",
    }
    settings = LocalModelServer(port=1234).classifier_settings()
    assert settings == {
        "model": "openai/smol",
        "api_base": "http://127.0.0.1:1234/v1",
        "server": "llama_cpp",
    }


def test_without_the_extra_the_server_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setattr(_local_server, "missing_parts", lambda model=True: ["llama_cpp"])
    with pytest.raises(UserInputError, match=r"llm-local extra \(llama_cpp missing\)"):
        LocalModelServer().start()
    assert main(["llm-server"]) == 2
    assert "pip install 'hybridroute[llm-local]'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--model", "{tmp}/none.gguf"], "no such GGUF model file"),
        (["--model", "{tmp}/bad.gguf"], "not a GGUF model file"),
        (["--model", "{tmp}/good.gguf", "--threads", "0"], "--threads must be a positive"),
        (["--model", "{tmp}/good.gguf", "--port", "70000"], "--port must be in 0..65535"),
    ],
)
def test_llm_server_refuses_bad_input_in_one_line(tmp_path, monkeypatch, capsys, args, match):
    monkeypatch.setattr(_local_server, "missing_parts", lambda model=True: [])
    (tmp_path / "bad.gguf").write_bytes(b"not gguf")
    (tmp_path / "good.gguf").write_bytes(b"GGUF\x03")
    assert main(["llm-server", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1


def test_fit_llm_takes_the_server_examples_and_temperature():
    from hybridroute.classifiers.llm import fit_llm

    clf = fit_llm(
        list(TRAIN),
        list(TRAIN.values()),
        model="openai/smol",
        server="llama_cpp",
        n_similar_examples=2,
        temperature=0.0,
    )
    assert (clf.server, clf.temperature, clf.mode_) == ("llama_cpp", 0.0, "tools")
    assert clf.similar_ is not None and clf.similar_.k == 2
