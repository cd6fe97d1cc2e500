"""The seam's response byte limit (the capping hook and body stream, which providers it
reaches, how a refusal is mapped), and the strict reading of the model's answer JSON.

The hook is exercised on a plain ``httpx.AsyncClient`` over ``httpx.MockTransport`` (bodies
of every shape, including endless ones), and end to end through litellm for the providers
that are not OpenAI-compatible (anthropic, ollama) against a small server on 127.0.0.1
that speaks just enough of their formats. The OpenAI route is tested against the stand-in
in ``test_llm.py``."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web

from hybridroute.classifiers.llm._cap import (
    DEFAULT_MAX_RESPONSE_BYTES,
    ResponseBodyRefused,
    ask_for_decodable,
    capping_hook,
)
from hybridroute.classifiers.llm._clients import ClientCache
from hybridroute.classifiers.llm._errors import map_exception
from hybridroute.classifiers.llm._response import strict_json_problem
from hybridroute.classifiers.llm._retry import Answered, LabelFailure, TransportFailure
from hybridroute.classifiers.llm._seam import LiteLLMLabelAsker

LABELS = ("card_arrival", "refund", "top_up")
LIMIT = 10_000


# --------------------------------------------------------------------------- the hook


class Endless(httpx.AsyncByteStream):
    """A body that never ends (counts what it was asked for)."""

    def __init__(self, piece: bytes = b" " * 1000) -> None:
        self.piece = piece
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.sent += len(self.piece)
            yield self.piece
            await asyncio.sleep(0)


class Chunks(httpx.AsyncByteStream):
    def __init__(self, data: bytes, size: int = 997) -> None:
        self.data, self.size, self.sent = data, size, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self.data), self.size):
            self.sent += len(self.data[i : i + self.size])
            yield self.data[i : i + self.size]


def fetch(
    stream: httpx.AsyncByteStream,
    headers: dict[str, str] | None = None,
    limit: int = LIMIT,
    status: int = 200,
):
    """GET through a client with the capping hook; the body, or the exception."""
    seen: dict[str, str] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(request.headers)
        return httpx.Response(status, headers=headers or {}, stream=stream)

    async def go() -> bytes:
        hooks: dict[str, list[Callable[..., Any]]] = {
            "request": [ask_for_decodable],
            "response": [capping_hook(limit)],
        }
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(handler), event_hooks=hooks
        ) as client:
            response = await client.get("http://test/")
            return response.content

    async def bounded() -> bytes:
        return await asyncio.wait_for(go(), timeout=10)

    try:
        return asyncio.run(bounded()), seen
    except ResponseBodyRefused as exc:
        return exc, seen


def deflate_raw(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("size", "headers", "encode"),
    [
        (LIMIT, {}, None),
        (LIMIT - 1, {}, None),
        (0, {}, None),
        (LIMIT, {"Content-Encoding": "gzip"}, gzip.compress),
        (LIMIT, {"Content-Encoding": "x-gzip"}, gzip.compress),
        (LIMIT, {"Content-Encoding": "deflate"}, zlib.compress),
        (LIMIT, {"Content-Encoding": "deflate"}, deflate_raw),
        (LIMIT, {"Content-Encoding": "identity"}, None),
        (LIMIT, {"Content-Encoding": "gzip, identity"}, gzip.compress),
    ],
    ids=[
        "at-limit",
        "under",
        "empty",
        "gzip",
        "x-gzip",
        "zlib",
        "raw-deflate",
        "identity",
        "gzip+identity",
    ],
)
def test_bodies_within_the_limit_pass_whole_and_decoded(size, headers, encode):
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    wire = encode(body) if encode else body
    got, _ = fetch(Chunks(wire), {**headers, "Content-Length": str(len(wire))})
    assert got == body


@pytest.mark.parametrize(
    ("stream", "headers", "match"),
    [
        (Chunks(b"a" * (LIMIT + 1)), {}, "received more than the limit of 10,000 bytes"),
        (Chunks(b"a" * 30_000_000, size=65536), {}, "received more than"),
        (Endless(), {}, "received more than"),
        (Endless(b"x"), {}, "received more than"),
        (Chunks(gzip.compress(b" " * 30_000_000)), {"Content-Encoding": "gzip"}, "decodes to"),
        (Chunks(gzip.compress(b" " * (LIMIT + 1))), {"Content-Encoding": "gzip"}, "decodes to"),
        (Chunks(zlib.compress(b"{" * 5_000_000)), {"Content-Encoding": "deflate"}, "decodes to"),
        (Chunks(deflate_raw(b"0" * 5_000_000)), {"Content-Encoding": "deflate"}, "decodes to"),
    ],
    ids=[
        "one-over",
        "30MB",
        "endless",
        "endless-bytewise",
        "gzip-bomb",
        "gzip-one-over",
        "zlib-bomb",
        "raw-deflate-bomb",
    ],
)
def test_bodies_over_the_limit_are_refused_while_arriving(stream, headers, match):
    started = time.perf_counter()
    got, _ = fetch(stream, headers)
    assert isinstance(got, ResponseBodyRefused) and got.kind == "response_too_large"
    assert match in str(got) and got.limit == LIMIT
    assert time.perf_counter() - started < 5
    assert stream.sent <= LIMIT + 65536  # stopped at the limit, not at the end


@pytest.mark.parametrize("status", [429, 500, 503, 400])
def test_error_bodies_are_capped_too(status):
    stream = Endless()
    got, _ = fetch(stream, status=status)
    assert isinstance(got, ResponseBodyRefused) and stream.sent <= LIMIT + 1000


@pytest.mark.parametrize("declared", [LIMIT + 1, 30_000_000, 10**30])
def test_a_declared_length_over_the_limit_is_refused_before_reading(declared):
    stream = Endless()
    got, _ = fetch(stream, {"Content-Length": str(declared)})
    assert isinstance(got, ResponseBodyRefused) and "declared as" in str(got)
    assert stream.sent == 0


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "deflate, gzip", "compress"])
def test_codings_that_cannot_be_bounded_are_refused(coding):
    stream = Chunks(b"whatever")
    got, _ = fetch(stream, {"Content-Encoding": coding})
    assert isinstance(got, ResponseBodyRefused) and got.kind == "bad_response"
    assert "cannot be decoded" in str(got) or "can be decoded" in str(got)
    assert stream.sent == 0


def test_only_boundable_codings_are_asked_for():
    _, sent = fetch(Chunks(b"{}"))
    assert sent["accept-encoding"] == "gzip, deflate"


def test_corrupt_compressed_data_is_a_decoding_error():
    with pytest.raises(httpx.DecodingError, match="not valid compressed data"):
        fetch(Chunks(b"\x1f\x8b" + b"garbage" * 10), {"Content-Encoding": "gzip"})


# --------------------------------------------------------------------------- mapping


def chain(inner: BaseException, *outer_types: type[BaseException]) -> BaseException:
    """``inner`` wrapped as the SDK and litellm wrap it (``raise ... from`` / context)."""
    current = inner
    for i, cls in enumerate(outer_types):
        try:
            try:
                raise current
            except BaseException as exc:
                if i % 2:
                    raise cls("wrapped") from exc
                raise cls("wrapped")  # noqa: B904 - an implicit context, as litellm has
        except BaseException as wrapped:
            current = wrapped
    return current


@pytest.mark.parametrize(
    "outer",
    [(), (RuntimeError,), (RuntimeError, ValueError), (ValueError, RuntimeError, OSError)],
)
@pytest.mark.parametrize("kind", ["response_too_large", "bad_response"])
def test_a_refusal_anywhere_on_the_chain_is_mapped_and_not_retried(outer, kind):
    refused = ResponseBodyRefused("body too big", limit=5, kind=kind)
    failure = map_exception(chain(refused, *outer))
    assert failure == TransportFailure(kind=kind, retryable=False, detail="body too big")


def test_the_chain_walk_survives_cycles():
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a
    with pytest.raises(TypeError, match="not a transport error"):
        map_exception(a)


# --------------------------------------------------------------------------- which providers


@pytest.mark.parametrize(
    ("model", "api_base", "route"),
    [
        ("openai/gpt-4o-mini", None, "sdk"),
        ("openai/anything", "http://127.0.0.1:9/v1", "sdk"),
        ("gpt-4o-mini", None, "sdk"),
        ("custom_openai/x", "http://127.0.0.1:9/v1", "sdk"),
        ("anthropic/claude-3-5-sonnet", None, "handler"),
        ("ollama/llama3", None, "handler"),
        ("ollama_chat/llama3", None, "handler"),
        ("hosted_vllm/x", "http://127.0.0.1:9/v1", "handler"),
        ("groq/llama3", None, "litellm"),
        ("bedrock/anthropic.claude-3", None, "litellm"),
        ("gemini/gemini-1.5-flash", None, "litellm"),
        ("no-such-provider/x", None, "litellm"),
    ],
)
def test_which_providers_are_capped(model, api_base, route):
    asker = LiteLLMLabelAsker(model=model, labels=LABELS, api_base=api_base)
    assert asker.route == route
    assert asker.capped is (route != "litellm")
    assert asker.max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES == 1 << 20
    off = LiteLLMLabelAsker(model=model, labels=LABELS, api_base=api_base, max_response_bytes=None)
    assert off.capped is False and off._client() is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1MB"])
def test_the_limit_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_response_bytes must be a positive integer"):
        LiteLLMLabelAsker(model="openai/x", labels=LABELS, max_response_bytes=bad)


def test_the_asker_owns_and_closes_its_clients():
    async def go():
        asker = LiteLLMLabelAsker(
            model="openai/x", labels=LABELS, api_base="http://127.0.0.1:9/v1", api_key="k"
        )
        client = asker._client()
        assert client is asker._client()  # built once
        http = client._client
        assert http.event_hooks["response"] and not http.is_closed
        await asker.aclose()
        assert http.is_closed and len(asker._own) == 0

    asyncio.run(go())


def test_askers_sharing_a_cache_share_clients_and_leave_them_open():
    async def go():
        shared = ClientCache()
        make = lambda model, **kw: LiteLLMLabelAsker(  # noqa: E731
            model=model, labels=LABELS, api_base="http://127.0.0.1:9/v1", clients=shared, **kw
        )
        a, b = make("openai/x", api_key="k"), make("openai/y", api_key="k")
        other_key = make("openai/x", api_key="k2")
        vllm = make("hosted_vllm/x")
        assert a._client() is b._client()  # same endpoint and key: one client
        assert other_key._client() is not a._client()  # another key: another client
        assert a._client()._client is vllm._client().client  # the SDK over the handler
        assert len(shared) == 3  # one handler, two SDK clients over it
        assert all("k2" not in repr(key) for key in shared._clients)  # keys hold digests
        http = a._client()._client
        await a.aclose()
        assert not http.is_closed  # shared: left open for the next batch
        await shared.aclose()
        assert http.is_closed and len(shared) == 0

    asyncio.run(go())


def test_building_a_client_sets_no_litellm_global():
    import litellm  # after hybridroute (its offline defaults); a top-level import runs first

    before = {
        name: getattr(litellm, name)
        for name in ("aclient_session", "client_session", "api_base", "api_key", "headers")
    }

    async def go():
        asker = LiteLLMLabelAsker(model="openai/x", labels=LABELS, api_key="k")
        asker._client()
        await asker.aclose()

    asyncio.run(go())
    after = {name: getattr(litellm, name) for name in before}
    assert after == before


# --------------------------------------------------------------------------- other providers


ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "LabelAnswer",
            "input": {"label": "refund", "confidence": 0.7},
        }
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
ANSWER = json.dumps({"label": "refund", "confidence": 0.7})
OLLAMA_CHAT = {
    "model": "llama3",
    "created_at": "2024-01-01T00:00:00Z",
    "message": {"role": "assistant", "content": ANSWER},
    "done": True,
    "prompt_eval_count": 3,
    "eval_count": 4,
}
OLLAMA = {**{k: v for k, v in OLLAMA_CHAT.items() if k != "message"}, "response": ANSWER}


class RawServer:
    """A tiny server on 127.0.0.1 answering every POST with one fixed JSON body, optionally
    preceded by ``pad`` bytes of whitespace (sent in chunks, no Content-Length)."""

    def __init__(self, body: dict, pad: int = 0) -> None:
        self.body, self.pad = json.dumps(body).encode(), pad
        self.paths: list[str] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            left = self.pad
            while left > 0:
                await response.write(b" " * min(left, 65536))
                left -= 65536
            await response.write(self.body)
        return response

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._runner = runner
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def __enter__(self) -> RawServer:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def ask(model: str, server: RawServer, mode: str, **kw):
    async def go():
        asker = LiteLLMLabelAsker(
            model=model,
            labels=LABELS,
            mode=mode,
            api_base=server.url,
            api_key="k",
            timeout=10,
            **kw,
        )
        try:
            return await asyncio.wait_for(
                asker.attempt([{"role": "user", "content": "give my money back"}]), 20
            )
        finally:
            await asker.aclose()

    return asyncio.run(go())


PROVIDERS = [
    ("anthropic/claude-x", ANTHROPIC, "tools", "/v1/messages"),
    ("ollama_chat/llama3", OLLAMA_CHAT, "json", "/api/chat"),
    ("ollama/llama3", OLLAMA, "json", "/api/generate"),
]


@pytest.mark.parametrize(("model", "body", "mode", "path"), PROVIDERS)
def test_litellm_handler_providers_answer_through_the_seams_client(model, body, mode, path):
    with RawServer(body, pad=DEFAULT_MAX_RESPONSE_BYTES - 2000) as server:
        result = ask(model, server, mode)
    assert isinstance(result, Answered) and result.label == "refund"
    assert server.paths == [path]


@pytest.mark.parametrize(("model", "body", "mode", "path"), PROVIDERS)
@pytest.mark.parametrize("pad", [DEFAULT_MAX_RESPONSE_BYTES + 1, 30 * 1024 * 1024])
def test_litellm_handler_providers_are_capped(model, body, mode, path, pad):
    started = time.perf_counter()
    with RawServer(body, pad=pad) as server:
        result = ask(model, server, mode)
    assert isinstance(result, TransportFailure), result
    assert (result.kind, result.retryable) == ("response_too_large", False)
    assert time.perf_counter() - started < 10


# --------------------------------------------------------------------------- the answer's JSON


@pytest.mark.parametrize(
    ("raw", "tools", "match"),
    [
        ('{"label": "refund", "label": "top_up"}', True, "duplicate key 'label'"),
        ('{"label": "refund", "confidence": 0.5, "confidence": 1}', True, "duplicate key"),
        ('```json\n{"label": "refund", "label": "top_up"}\n```', False, "duplicate key"),
        ('{"label": "refund", "confidence": NaN}', True, "NaN"),
        ('{"label": "refund", "confidence": 1e999}', True, "too large for a float"),
        ('{"label": "refund", "n": ' + "9" * 100 + "}", True, "100 digits"),
        ('{"label": "refund", "x": ' + "[" * 100 + "]" * 100 + "}", True, "nested too deeply"),
        ('{"label": "refund", "x": ' + "[" * 50_000 + "]" * 50_000 + "}", True, "too deeply"),
        ('{"label": "\\ud800"}', True, "lone surrogate"),
    ],
)
def test_answers_the_hardened_reader_refuses_are_label_failures(raw, tools, match):
    problem = strict_json_problem(raw, tools=tools)
    assert problem is not None and match in problem
    assert problem.startswith("the answer is not acceptable JSON")


@pytest.mark.parametrize(
    ("raw", "tools"),
    [
        ('{"label": "refund", "confidence": 0.5}', True),
        ('```json\n{"label": "refund"}\n```', False),
        ('{"label": "refund", ', True),  # not JSON at all: instructor describes it
        ("", True),
        ("no json here", False),
    ],
)
def test_other_answers_are_left_to_instructor(raw, tools):
    assert strict_json_problem(raw, tools=tools) is None


def test_a_duplicate_key_answer_is_refused_end_to_end():
    body = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "LabelAnswer",
                                "arguments": '{"label": "refund", "label": "top_up", '
                                '"confidence": 0.9}',
                            },
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    with RawServer(body) as server:
        result = ask("openai/m", server, "tools")
    assert isinstance(result, LabelFailure)
    assert "duplicate key 'label'" in result.error
