"""A local stand-in LLM server: OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1.

The stand-in lets the real client stack (instructor over litellm over the OpenAI SDK over
httpx) be exercised with no provider at all. It answers the request shapes instructor sends
for the label-set response model of :class:`hybridroute.classifiers.LLMClassifier`:

* ``TOOLS`` mode (a request with ``tools``): a forced tool call whose arguments are
  ``{"label": ..., "confidence": ...}``;
* ``JSON`` mode (``response_format={"type": "json_object"}``): the same object as content;
* ``MD_JSON`` mode (neither): the object inside a ```` ```json ```` code block.

What it answers comes from a pluggable **answer policy** (:class:`HashPolicy`,
:class:`LabelMapPolicy`, :class:`ClassifierPolicy`, any callable, optionally wrapped in
:class:`ObeyInjections`), and it injects **faults** at seeded rates:

==================  =======================================================================
kind                what the client sees
==================  =======================================================================
``slow``            the answer comes ``slow_seconds`` later (a modifier, drawn separately)
``rate_limit``      HTTP 429 with ``Retry-After`` and ``retry-after-ms`` headers
``server_error``    HTTP 500
``hang``            no answer until ``hang_seconds`` have passed (past any sane client timeout)
``malformed_json``  HTTP 200 whose tool arguments / content are not valid JSON
``out_of_set``      HTTP 200 with a label outside the label set
``empty_choices``   HTTP 200 with ``"choices": []``
``truncated``       HTTP 200 whose body stops half-way (the connection is dropped)
``huge_body``       HTTP 200 with a valid answer preceded by whitespace, ``huge_body_bytes``
                    in all (30 MiB by default), sent in chunks without a ``Content-Length``
                    (or with one, ``huge_body_declared``), optionally gzip-compressed
                    (``huge_body_encoding="gzip"``: a few KB on the wire that inflate to the
                    full size); sending stops when the client hangs up
==================  =======================================================================

The exclusive kinds (all but ``slow``) partition one uniform draw, so their rates must sum
to at most 1. Draws are seeded and keyed by the request's messages and how many times the
same messages have been seen, so *which* request fails does not depend on arrival order
under concurrency. The server counts requests by mode and by outcome (:meth:`StandInLLM.stats`).

**Its answers are not an LLM's answers**: figures measured against it are throughput,
robustness and accounting figures of the client stack, never a model's accuracy.

Example
-------
>>> from hybridroute.testing import StandInLLM, LabelMapPolicy
>>> with StandInLLM(LabelMapPolicy({"where is my card": "card_arrival"}),
...                 labels=["card_arrival", "refund"]) as server:   # doctest: +SKIP
...     server.api_base   # 'http://127.0.0.1:PORT/v1'
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import math
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .._safeio import parse_json
from ..exceptions import InputError

__all__ = [
    "EXCLUSIVE_FAULTS",
    "FAULT_KINDS",
    "AnswerPolicy",
    "ClassifierPolicy",
    "HashPolicy",
    "LabelMapPolicy",
    "ObeyInjections",
    "StandInAnswer",
    "StandInLLM",
    "StandInProcess",
    "parse_fault_rates",
]

#: Faults that replace the answer; one uniform draw is partitioned among them.
EXCLUSIVE_FAULTS: tuple[str, ...] = (
    "rate_limit",
    "server_error",
    "hang",
    "malformed_json",
    "out_of_set",
    "empty_choices",
    "truncated",
    "huge_body",  # last, so that adding it left the draws of the kinds above unchanged
)
#: Every fault kind the stand-in knows (``slow`` is a modifier drawn on its own).
FAULT_KINDS: tuple[str, ...] = ("slow", *EXCLUSIVE_FAULTS)

#: The label the ``out_of_set`` fault answers with (never a member of a sane label set).
OUT_OF_SET_LABEL = "not_a_declared_label"

_TEXT_RE = re.compile(r"<text>\n(.*)\n</text>", re.DOTALL)
_ENUM_RE = re.compile(r'"enum"\s*:\s*(\[[^\]]*\])')
_INJECTION_RE = re.compile(
    r"\broute\s+(?:this\s+|me\s+|it\s+)?(?:to|into)\s+[`'\"]?([A-Za-z][A-Za-z0-9_.:/-]*)",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- answer policies


@dataclass(frozen=True, slots=True)
class StandInAnswer:
    """What an answer policy says for one text: a label and a confidence in [0, 1]."""

    label: str
    confidence: float = 0.9


#: ``policy(text, labels) -> StandInAnswer | str | (label, confidence)``
AnswerPolicy = Callable[[str, tuple[str, ...]], Any]


def _unit(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from ``parts`` (SHA-256 based)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class HashPolicy:
    """Answer a label chosen by hashing the text: deterministic, content-free.

    Parameters
    ----------
    confidence : float
        The confidence reported with every answer.
    seed : int
        Changes which label each text hashes to.
    """

    def __init__(self, confidence: float = 0.9, seed: int = 0) -> None:
        self.confidence = float(confidence)
        self.seed = int(seed)

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        index = int(_unit("hash-policy", self.seed, text) * len(labels))
        return StandInAnswer(labels[index], self.confidence)


class LabelMapPolicy:
    """Answer from a fixed ``text -> label`` map.

    Parameters
    ----------
    mapping : mapping of str to str
        The label for each known text (matched after stripping surrounding whitespace).
    default : str or None
        The label for unknown texts; ``None`` hashes unknown texts onto the label set.
    confidence : float
        The confidence reported with every answer.
    """

    def __init__(
        self, mapping: Mapping[str, str], default: str | None = None, confidence: float = 0.9
    ) -> None:
        self.mapping = {str(k).strip(): str(v) for k, v in mapping.items()}
        self.default = default
        self.confidence = float(confidence)
        self._fallback = HashPolicy(confidence=confidence)

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        label = self.mapping.get(text.strip(), self.default)
        if label is None:
            return self._fallback(text, labels)
        return StandInAnswer(label, self.confidence)


class ClassifierPolicy:
    """Answer with a fitted local classifier's best label and its score.

    Parameters
    ----------
    classifier : IntentClassifier
        Any fitted hybridroute classifier (for example a ``LocalClassifier``).
    """

    def __init__(self, classifier: Any) -> None:
        self.classifier = classifier
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # picklable for StandInProcess
        return {"classifier": self.classifier}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.classifier = state["classifier"]
        self._lock = threading.Lock()

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        with self._lock:  # scikit-learn estimators are not promised to be thread-safe
            ranked = self.classifier.rank([text], k=1)[0]
        if ranked.top is None:
            return StandInAnswer(labels[0], 0.0)
        return StandInAnswer(str(ranked.top), float(ranked.confidence or 0.0))


class ObeyInjections:
    """Wrap a policy so that a text saying "route (this) to X" is answered with ``X``.

    This models a model that follows prompt injections; ``X`` is answered even when it is
    not in the label set (the classifier's label constraint must then catch it). Router
    tests use it to check that nothing a model says can outrank a rule.
    """

    def __init__(self, inner: AnswerPolicy, confidence: float = 0.99) -> None:
        self.inner = inner
        self.confidence = float(confidence)

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        match = _INJECTION_RE.search(text)
        if match:
            return StandInAnswer(match.group(1).rstrip(".,;:!?"), self.confidence)
        return _as_answer(self.inner(text, labels))


def _as_answer(value: Any) -> StandInAnswer:
    if isinstance(value, StandInAnswer):
        return value
    if isinstance(value, str):
        return StandInAnswer(value)
    label, confidence = value
    return StandInAnswer(str(label), float(confidence))


# --------------------------------------------------------------------------- fault rates


def parse_fault_rates(items: Iterable[str] | Mapping[str, float] | None) -> dict[str, float]:
    """Validate fault rates given as a mapping or as ``KIND=RATE`` strings.

    Raises
    ------
    ValueError
        For an unknown kind, a rate outside [0, 1], or exclusive rates summing above 1.
    """
    if items is None:
        return {}
    pairs: list[tuple[str, Any]] = []
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        for item in items:
            kind, sep, text = str(item).partition("=")
            if not sep:
                raise ValueError(f"fault rate {item!r}: expected KIND=RATE, e.g. rate_limit=0.1")
            pairs.append((kind.strip(), text.strip()))
    rates: dict[str, float] = {}
    for kind, raw in pairs:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
        try:
            rate = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"fault rate for {kind!r} is not a number: {raw!r}") from None
        if not 0.0 <= rate <= 1.0:  # also rejects NaN
            raise ValueError(f"fault rate for {kind!r} must be in [0, 1], got {rate}")
        rates[kind] = rate
    total = sum(r for k, r in rates.items() if k in EXCLUSIVE_FAULTS)
    if total > 1.0 + 1e-12:
        raise ValueError(f"exclusive fault rates sum to {total:.3f} > 1")
    return rates


# --------------------------------------------------------------------------- request parsing


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _extract_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text to classify: inside ``<text>`` markers of the first user message."""
    for message in messages:
        if message.get("role") == "user":
            content = _content_text(message.get("content"))
            match = _TEXT_RE.search(content)
            return match.group(1) if match else content
    return ""


def _extract_labels(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The label set from the request's schema (tool parameters or the JSON-mode prompt)."""
    for tool in body.get("tools") or ():
        props = ((tool.get("function") or {}).get("parameters") or {}).get("properties") or {}
        enum = (props.get("label") or {}).get("enum")
        if enum:
            return tuple(str(v) for v in enum)
    for message in body.get("messages") or ():
        match = _ENUM_RE.search(_content_text(message.get("content")))
        if match:
            try:
                values = parse_json(match.group(1), what="label enum")
            except InputError:
                continue
            if isinstance(values, list):
                return tuple(str(v) for v in values)
    return ()


def _approx_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


# --------------------------------------------------------------------------- the server


class StandInLLM:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 with fault injection.

    Parameters
    ----------
    policy : callable or None
        ``policy(text, labels)`` returning a :class:`StandInAnswer`, a label, or a
        ``(label, confidence)`` pair. ``None`` means :class:`HashPolicy`.
    labels : sequence of str or None
        The label set. ``None`` reads it from each request's schema.
    latency : float
        Seconds added before every answer.
    faults : mapping or iterable of ``KIND=RATE`` strings
        Fault rates (see the module docstring).
    seed : int
        Seeds every fault and sampling draw.
    retry_after : float
        Seconds announced by 429 answers (``Retry-After`` and ``retry-after-ms``).
    slow_seconds : float
        Extra seconds of a ``slow`` request.
    hang_seconds : float
        How long a ``hang`` request stays silent (it ends early when the server stops).
    port : int
        Port to bind on 127.0.0.1; 0 picks a free one.
    record : int
        Keep the bodies of the last ``record`` requests (:attr:`requests`), for tests.
    huge_body_bytes : int
        Size of a ``huge_body`` answer before any compression (whitespace, then the
        answer); an answer longer than this is sent as it is.
    huge_body_encoding : {None, "gzip"}
        Compress ``huge_body`` answers (``Content-Encoding: gzip``).
    huge_body_declared : bool
        Send a ``Content-Length`` with ``huge_body`` answers (default: chunked, so the
        client learns the size only by reading).

    Notes
    -----
    A request whose ``temperature`` is above 0 is *sampled*: with probability
    ``1 - confidence`` the answer is another label (seeded), so self-consistency voting has
    something to count. When ``logprobs`` is requested in a JSON mode, the content tokens
    carry log-probabilities whose sum over the label's tokens is ``log(confidence)``.
    """

    def __init__(
        self,
        policy: AnswerPolicy | None = None,
        *,
        labels: Sequence[str] | None = None,
        latency: float = 0.0,
        faults: Mapping[str, float] | Iterable[str] | None = None,
        seed: int = 0,
        retry_after: float = 0.05,
        slow_seconds: float = 0.2,
        hang_seconds: float = 30.0,
        port: int = 0,
        record: int = 0,
        huge_body_bytes: int = 30 * 1024 * 1024,
        huge_body_encoding: str | None = None,
        huge_body_declared: bool = False,
    ) -> None:
        if huge_body_encoding not in (None, "gzip"):
            raise ValueError(
                f"huge_body_encoding must be None or 'gzip', not {huge_body_encoding!r}"
            )
        if isinstance(huge_body_bytes, bool) or not isinstance(huge_body_bytes, int):
            raise ValueError(f"huge_body_bytes must be an integer, got {huge_body_bytes!r}")
        if huge_body_bytes < 0:
            raise ValueError(f"huge_body_bytes must be >= 0, got {huge_body_bytes}")
        self.huge_body_bytes = huge_body_bytes
        self.huge_body_encoding = huge_body_encoding
        self.huge_body_declared = bool(huge_body_declared)
        self.policy = policy if policy is not None else HashPolicy(seed=seed)
        self.labels = tuple(labels) if labels is not None else None
        self.latency = float(latency)
        self.faults = parse_fault_rates(faults)
        self.seed = int(seed)
        self.retry_after = float(retry_after)
        self.slow_seconds = float(slow_seconds)
        self.hang_seconds = float(hang_seconds)
        self.port = int(port)
        self.record = int(record)
        self._counts: Counter[str] = Counter()
        self._seen: Counter[str] = Counter()
        self._recorded: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._in_flight = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """The ``api_base`` to give litellm / the OpenAI SDK: ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    def start(self) -> StandInLLM:
        """Start serving in a background thread; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("stand-in LLM already started")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name="hybridroute-standin-llm", daemon=True
        )
        self._thread.start()
        ready.wait(timeout=30)
        if self._error is not None:
            self._thread.join(timeout=5)
            self._thread = None
            raise RuntimeError(f"stand-in LLM failed to start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        """Stop serving (pending ``hang`` requests end at once) and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        try:
            future.result(timeout=30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            self._thread = None
            self._loop = None

    def __enter__(self) -> StandInLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # reported to start()
            self._error = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _startup(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port, backlog=1024)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = int(server.sockets[0].getsockname()[1])
        self._runner = runner

    async def _shutdown(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ accounting

    def stats(self) -> dict[str, int]:
        """Counts so far: ``requests``, one key per outcome (``ok``, ``rate_limit``, ...),
        ``slow``, ``reask`` (requests carrying a previous answer), ``mode:<mode>`` and
        ``max_in_flight`` (most requests being answered at once)."""
        with self._lock:
            return dict(self._counts)

    @property
    def request_count(self) -> int:
        """Chat-completion requests received so far."""
        with self._lock:
            return self._counts["requests"]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The last ``record`` request bodies (oldest first)."""
        with self._lock:
            return list(self._recorded)

    def reset_stats(self) -> None:
        """Zero the counts and forget recorded bodies (fault draws are not reset)."""
        with self._lock:
            self._counts.clear()
            self._recorded.clear()

    def _count(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._counts[key] += 1

    # ------------------------------------------------------------------ handlers

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "standin", "object": "model"}]})

    def _draw(self, body: Mapping[str, Any]) -> tuple[str | None, bool, int]:
        """Which fault (if any) this request gets, whether it is slow, and its occurrence."""
        key = hashlib.sha256(
            json.dumps(body.get("messages"), sort_keys=True, default=str).encode("utf-8")
        ).hexdigest()
        with self._lock:
            self._seen[key] += 1
            occurrence = self._seen[key]
        u = _unit("fault", self.seed, key, occurrence)
        kind: str | None = None
        edge = 0.0
        for name in EXCLUSIVE_FAULTS:
            edge += self.faults.get(name, 0.0)
            if u < edge:
                kind = name
                break
        slow = _unit("slow", self.seed, key, occurrence) < self.faults.get("slow", 0.0)
        return kind, slow, occurrence

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self._in_flight += 1
            if self._in_flight > self._counts["max_in_flight"]:
                self._counts["max_in_flight"] = self._in_flight
        try:
            return await self._respond(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = parse_json(raw.decode("utf-8"), what="request body")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("no messages")
        except (ValueError, InputError):  # also UnicodeDecodeError
            self._count("requests", "bad_request")
            return web.json_response(
                {"error": {"message": "request body is not a chat completion request"}},
                status=400,
            )
        messages = body["messages"]
        mode = (
            "tools" if body.get("tools") else ("json" if body.get("response_format") else "md_json")
        )
        reask = any(m.get("role") == "assistant" for m in messages)
        kind, slow, occurrence = self._draw(body)
        keys = ["requests", f"mode:{mode}", kind or "ok"]
        if slow:
            keys.append("slow")
        if reask:
            keys.append("reask")
        self._count(*keys)
        if self.record:
            with self._lock:
                self._recorded.append(body)
                del self._recorded[: -self.record]

        delay = self.latency + (self.slow_seconds if slow else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)

        if kind == "hang":
            assert self._stopping is not None
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=self.hang_seconds)
            except TimeoutError:
                pass
            kind = None  # a late, otherwise normal answer (usually nobody is listening)
        if kind == "rate_limit":
            ms = max(0, round(self.retry_after * 1000))
            return web.json_response(
                {
                    "error": {
                        "message": "Rate limit reached (stand-in)",
                        "type": "rate_limit_error",
                        "code": "rate_limit_exceeded",
                    }
                },
                status=429,
                headers={"Retry-After": f"{self.retry_after:g}", "retry-after-ms": str(ms)},
            )
        if kind == "server_error":
            return web.json_response(
                {"error": {"message": "Internal server error (stand-in)", "type": "server_error"}},
                status=500,
            )

        payload = self._completion(body, mode, kind, occurrence)
        data = json.dumps(payload).encode("utf-8")
        if kind == "truncated":
            response = web.StreamResponse(
                status=200,
                headers={"Content-Type": "application/json", "Content-Length": str(len(data))},
            )
            await response.prepare(request)
            await response.write(data[: len(data) // 2])
            if request.transport is not None:
                request.transport.close()
            return response
        if kind == "huge_body":
            return await self._huge(request, data)
        return web.Response(body=data, content_type="application/json")

    async def _huge(self, request: web.Request, data: bytes) -> web.StreamResponse:
        """Whitespace then ``data``, ``huge_body_bytes`` in all, in 64 KiB chunks."""
        pad = max(0, self.huge_body_bytes - len(data))
        block = b" " * (1 << 16)
        plain = [block] * (pad // len(block)) + [block[: pad % len(block)], data]
        headers = {"Content-Type": "application/json"}
        pieces: list[bytes] = plain
        if self.huge_body_encoding == "gzip":
            headers["Content-Encoding"] = "gzip"
            packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing
            pieces = [packer.compress(p) for p in plain] + [packer.flush()]
        if self.huge_body_declared:
            headers["Content-Length"] = str(sum(len(p) for p in pieces))
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        try:
            for piece in pieces:
                if piece:
                    await response.write(piece)
            await response.write_eof()
        except ConnectionError:  # the client hung up mid-body: what a capped client does
            if request.transport is not None:
                request.transport.close()
        return response

    def _completion(
        self, body: Mapping[str, Any], mode: str, kind: str | None, occurrence: int
    ) -> dict[str, Any]:
        messages = body["messages"]
        labels = self.labels or _extract_labels(body) or ("unknown",)
        text = _extract_text(messages)
        answer = _as_answer(self.policy(text, labels))
        label, confidence = answer.label, min(1.0, max(0.0, float(answer.confidence)))
        temperature = body.get("temperature")
        if temperature and float(temperature) > 0 and len(labels) > 1:
            # Sampled answer: keep the policy's label with probability `confidence`.
            draw = _unit("sample", self.seed, text, occurrence)
            if draw >= confidence:
                others = [x for x in labels if x != label] or list(labels)
                label = others[int(_unit("other", self.seed, text, occurrence) * len(others))]
        if kind == "out_of_set":
            label = OUT_OF_SET_LABEL
        obj = {"label": label, "confidence": round(confidence, 4)}
        arguments = json.dumps(obj)
        if kind == "malformed_json":
            arguments = arguments[: max(1, len(arguments) // 2)]  # cut mid-object
        created = int(time.time())
        completion_id = f"chatcmpl-standin-{next(self._ids)}"
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
        if mode == "tools":
            tool = (body["tools"][0].get("function") or {}).get("name", "answer")
            choice["message"] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{completion_id}",
                        "type": "function",
                        "function": {"name": tool, "arguments": arguments},
                    }
                ],
            }
            content = arguments
        else:
            content = arguments if mode == "json" else f"```json\n{arguments}\n```"
            choice["message"] = {"role": "assistant", "content": content}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": _token_logprobs(content, label, confidence)}
        prompt_chars = sum(len(_content_text(m.get("content"))) for m in messages)
        prompt_tokens = max(1, prompt_chars // 4)
        completion_tokens = _approx_tokens(content)
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": str(body.get("model", "standin")),
            "system_fingerprint": "hybridroute-standin",
            "choices": [] if kind == "empty_choices" else [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _token_logprobs(content: str, label: str, confidence: float) -> list[dict[str, Any]]:
    """Split ``content`` into tokens; the label's tokens share ``log(confidence)``."""
    logp = math.log(confidence) if confidence > 0 else -1e4
    needle = json.dumps(label)[1:-1]
    start = content.find(f'"label": "{needle}"')
    start = start + len('"label": "') if start >= 0 else -1
    pieces: list[tuple[str, float]] = []
    if start < 0:
        pieces = [(content, 0.0)]
    else:
        end = start + len(needle)
        label_pieces = [needle[i : i + 4] for i in range(0, len(needle), 4)] or [""]
        share = logp / len(label_pieces)
        pieces = [(content[:start], 0.0)]
        pieces += [(p, share) for p in label_pieces]
        pieces.append((content[end:], 0.0))
    return [
        {"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8")), "top_logprobs": []}
        for tok, lp in pieces
        if tok
    ]


# --------------------------------------------------------------------------- in a child process


def _child_main(conn: Any, policy: AnswerPolicy | None, kwargs: dict[str, Any]) -> None:
    """Serve a :class:`StandInLLM` in this (child) process; obey commands from ``conn``."""
    try:
        server = StandInLLM(policy, **kwargs).start()
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("port", server.port))
    try:
        while True:
            try:
                command = conn.recv()
            except EOFError:  # the parent went away
                break
            if command == "stats":
                conn.send(server.stats())
            elif command == "reset":
                server.reset_stats()
                conn.send(True)
            else:  # "stop"
                break
    finally:
        server.stop()
        with contextlib.suppress(OSError, BrokenPipeError):
            conn.send(True)


class StandInProcess:
    """A :class:`StandInLLM` served from a child process (its own interpreter and GIL).

    Same arguments and the same ``api_base`` / :meth:`stats` / :meth:`reset_stats` API as
    :class:`StandInLLM`; use it when the client under test should not share a CPU with the
    server (throughput benchmarks, large fault runs). ``policy`` must be picklable.
    """

    def __init__(self, policy: AnswerPolicy | None = None, **kwargs: Any) -> None:
        parse_fault_rates(kwargs.get("faults"))  # fail here, not in the child
        self.policy = policy
        self.kwargs = kwargs
        self.port = int(kwargs.get("port", 0))
        self._proc: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return self.url + "/v1"

    def start(self) -> StandInProcess:
        """Start the child and wait until it listens."""
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_child_main,
            args=(child, self.policy, self.kwargs),
            name="hybridroute-standin-llm",
            daemon=True,
        )
        proc.start()
        child.close()
        if not parent.poll(60):
            proc.kill()
            raise RuntimeError("stand-in LLM child process did not start within 60 s")
        kind, value = parent.recv()
        if kind != "port":
            proc.join(5)
            raise RuntimeError(f"stand-in LLM child process failed to start: {value}")
        self.port = int(value)
        self._proc, self._conn = proc, parent
        return self

    def _ask(self, command: str) -> Any:
        with self._lock:
            if self._conn is None:
                raise RuntimeError("stand-in LLM process is not running")
            self._conn.send(command)
            return self._conn.recv()

    def stats(self) -> dict[str, int]:
        """Counts so far (see :meth:`StandInLLM.stats`)."""
        return dict(self._ask("stats"))

    @property
    def request_count(self) -> int:
        return int(self.stats().get("requests", 0))

    def reset_stats(self) -> None:
        self._ask("reset")

    def stop(self) -> None:
        """Stop the child process."""
        proc, conn = self._proc, self._conn
        if proc is None:
            return
        try:
            with self._lock:
                conn.send("stop")
                if conn.poll(30):
                    conn.recv()
        except (OSError, EOFError, BrokenPipeError):
            pass
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()
        self._proc = self._conn = None

    def __enter__(self) -> StandInProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
