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

This module holds the server; the answer policies, the fault draws, the wire format and
the child-process runner live in ``_standin_answers``, ``_standin_faults``,
``_standin_wire`` and ``_standin_process``, and every public name is importable from here
and from :mod:`hybridroute.testing`.

Example
-------
>>> from hybridroute.testing import StandInLLM, LabelMapPolicy
>>> with StandInLLM(LabelMapPolicy({"where is my card": "card_arrival"}),
...                 labels=["card_arrival", "refund"]) as server:   # doctest: +SKIP
...     server.api_base   # 'http://127.0.0.1:PORT/v1'
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiohttp import web

from .._safeio import parse_json
from ..exceptions import InputError
from ._standin_answers import (
    AnswerPolicy,
    ClassifierPolicy,
    HashPolicy,
    LabelMapPolicy,
    ObeyInjections,
    StandInAnswer,
    as_answer,
    unit,
)
from ._standin_faults import (
    EXCLUSIVE_FAULTS,
    FAULT_KINDS,
    OUT_OF_SET_LABEL,
    draw_fault,
    parse_fault_rates,
)
from ._standin_process import StandInProcess
from ._standin_wire import (
    LocalEndpoint,
    completion_payload,
    extract_labels,
    extract_text,
    request_mode,
)

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


# --------------------------------------------------------------------------- the server


class StandInLLM(LocalEndpoint):
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
    tool_logprobs : bool
        Send token log-probabilities for tool calls too when asked, as
        llama-cpp-python's server does (OpenAI sends them only for content).

    Notes
    -----
    A request whose ``temperature`` is above 0 is *sampled*: with probability
    ``1 - confidence`` the answer is another label (seeded), so self-consistency voting has
    something to count. When ``logprobs`` is requested in a JSON mode (and with
    ``tool_logprobs`` for tool calls), the content tokens carry log-probabilities whose sum
    over the label's tokens is ``log(confidence)``; with ``top_logprobs`` the label's first
    token lists the other labels' first tokens, sharing ``1 - confidence``. The
    confidence written in the answer is the policy's, unclamped (a policy may answer
    ``10``, as real models do); ``max_tokens`` is honoured (``finish_reason: "length"``).
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
        tool_logprobs: bool = False,
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
        self.tool_logprobs = bool(tool_logprobs)
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
        kind, slow = draw_fault(self.faults, seed=self.seed, key=key, occurrence=occurrence)
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
        mode = request_mode(body)
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
        labels = self.labels or extract_labels(body) or ("unknown",)
        text = extract_text(body["messages"])
        answer = as_answer(self.policy(text, labels))
        label, said = answer.label, float(answer.confidence)
        confidence = min(1.0, max(0.0, said))  # a probability; ``said`` is what is written
        temperature = body.get("temperature")
        if temperature and float(temperature) > 0 and len(labels) > 1:
            # Sampled answer: keep the policy's label with probability `confidence`.
            draw = unit("sample", self.seed, text, occurrence)
            if draw >= confidence:
                others = [x for x in labels if x != label] or list(labels)
                label = others[int(unit("other", self.seed, text, occurrence) * len(others))]
        if kind == "out_of_set":
            label = OUT_OF_SET_LABEL
        return completion_payload(
            body,
            mode=mode,
            label=label,
            confidence=said,
            probability=confidence,
            completion_id=f"chatcmpl-standin-{next(self._ids)}",
            malformed=kind == "malformed_json",
            empty=kind == "empty_choices",
            labels=labels,
            tool_logprobs=self.tool_logprobs,
        )
