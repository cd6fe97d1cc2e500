"""The API endpoints: routing, health, the routers held, shadows and metrics.

Bodies are read by hand (not by FastAPI's model binding) so that every refusal is the
command line's: :mod:`hybridroute.service._input` reads under the byte limit, parses
strict JSON and makes each item a :class:`~hybridroute.contracts.RouteRequest`, the
router checks its facts, text and evidence, and each problem becomes a 4xx JSON error
naming its field. Every answer that carries a decision is sent only after the decision
is committed to the log. Concurrent single-item requests are routed together
(:mod:`hybridroute.service._batcher`: one classifier call, one log transaction).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.background import BackgroundTask

from .._jsontext import fast_dumps
from ..exceptions import UserInputError
from ._input import RequestProblem, check_batch, check_item, parse_body, read_limited
from ._metrics import CONTENT_TYPE
from ._state import ServiceState

__all__ = ["api", "read_json", "state_of"]

api = APIRouter()

#: Media types accepted for a JSON body (a body must declare one). Anything else -- what
#: an HTML form sends, or no type at all, as a ``no-cors`` fetch of a Blob sends -- is
#: refused, so a web page on another origin cannot route through the service with a
#: "simple" cross-site request (the app's door refuses cross-site requests as well).
_JSON_TYPES = ("application/json",)
#: Bodies larger than this are parsed on a thread (bytes), answers of more items than
#: this are encoded on one: either would hold the event loop for milliseconds.
OFF_LOOP_BYTES = 64 * 1024
OFF_LOOP_ITEMS = 32


def state_of(request: Request) -> ServiceState:
    """The :class:`ServiceState` of the app that received ``request``."""
    state: ServiceState = request.app.state.hybridroute
    return state


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request's JSON object, read under ``limit`` bytes (400 / 413 / 415 / 422).

    The body must be declared ``Content-Type: application/json`` (415 otherwise, a
    missing header included).
    """
    ctypes = request.headers.getlist("content-type")
    medias = [c.split(";", 1)[0].strip().lower() for c in ctypes]
    if not medias or any(m not in _JSON_TYPES for m in medias):
        got = f"{medias[0][:80]!r}" if medias else "no Content-Type"
        raise RequestProblem(
            415,
            "invalid_input",
            f"the request body must be declared JSON (Content-Type: application/json), got {got}",
        )
    data = await read_limited(request.headers, request.stream(), limit)
    if len(data) > OFF_LOOP_BYTES:  # a large body is parsed off the event loop
        return await asyncio.to_thread(parse_body, data)
    return parse_body(data)


def _json_bytes(payload: Any) -> bytes:
    """The answer's JSON (a NaN refused, as JSON has none: see :mod:`hybridroute._jsontext`)."""
    raw = fast_dumps(payload)
    if raw is not None:
        return raw
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
        "utf-8"
    )


async def _answer(
    payload: dict[str, Any], state: ServiceState, job: Any, items: int = 1
) -> Response:
    """The answer; the shadows get ``job`` once it is sent (a background task)."""
    task = None if job is None else BackgroundTask(state.queue_shadows, job)
    if items > OFF_LOOP_ITEMS:  # a large answer is encoded off the event loop
        body = await asyncio.to_thread(_json_bytes, payload)
    else:
        body = _json_bytes(payload)
    return Response(body, media_type="application/json", background=task)


@api.post("/v1/route")
async def route(request: Request) -> Response:
    """Route one item: ``{"text", "facts", "request_id"?, "evidence"?}``."""
    state = state_of(request)
    with state.serving() as ticket:  # concurrent single items share one classifier call
        doc = await read_json(request, state.config.max_body_bytes)
        item = check_item(doc)
        routers = state.routers.current  # this request routes and shadows with these
        decision = await state.route_one(routers.live, item, ticket)
        answers, job = await state.log_live(routers, [item], [decision])
    return await _answer(answers[0], state, job)


@api.post("/v1/route/batch")
async def route_batch(request: Request) -> Response:
    """Route ``{"items": [...]}``: all items or none, answered in order."""
    state = state_of(request)
    doc = await read_json(request, state.config.max_body_bytes)
    requests = check_batch(doc, state.config.max_batch)
    routers = state.routers.current
    if not requests:
        return JSONResponse({"results": []})
    decisions = await state.route(routers.live, requests, batch=True)
    answers, job = await state.log_live(routers, requests, decisions, batch=True)
    return await _answer({"results": answers}, state, job, items=len(answers))


@api.get("/healthz")
async def healthz() -> Response:
    """The process is up."""
    return JSONResponse({"status": "ok"})


@api.get("/readyz")
async def readyz(request: Request) -> Response:
    """Ready: the live bundle is loaded and the log is writable (else 503 and why)."""
    state = state_of(request)
    problem = await state.check_log()
    if problem is not None:
        raise RequestProblem(503, "unavailable", f"not ready: {problem}")
    live = state.routers.current.live
    return JSONResponse({"status": "ready", "live": {"name": live.name, "version": live.version}})


@api.get("/v1/routers")
async def routers(request: Request) -> Response:
    """The routers held: name, version, role, manifest hash, policy provenance."""
    state = state_of(request)
    return JSONResponse({"routers": [r.describe() for r in state.routers.current.all()]})


@api.get("/v1/shadow")
async def shadow(request: Request) -> Response:
    """Live-vs-shadow disagreement in the log, per shadow, by stage and reason code."""
    state = state_of(request)
    unknown = sorted(set(request.query_params) - {"live_version", "shadow_version"})
    if unknown:
        raise RequestProblem(
            422,
            "invalid_input",
            f"unknown query parameter(s) {unknown}; use live_version and shadow_version",
            unknown[0],
        )
    versions = {}
    for name in ("live_version", "shadow_version"):
        value = request.query_params.get(name)
        if value is not None and (not value or len(value) > 256):
            raise RequestProblem(
                422, "invalid_input", f"{name} must be a version of 1 to 256 characters", name
            )
        versions[name] = value
    current = state.routers.current
    try:
        report = await asyncio.to_thread(
            state.shadow_report, current, versions["live_version"], versions["shadow_version"]
        )
    except UserInputError as exc:  # the log cannot be read now
        raise RequestProblem(503, "unavailable", str(exc)) from None
    return JSONResponse(report)


@api.get("/v1/monitor")
async def monitor(request: Request) -> Response:
    """The live guarantee from audits: status, labels, precision and its bounds, breach."""
    state = state_of(request)
    try:
        return JSONResponse(await state.monitor.get(state))
    except UserInputError as exc:  # the log cannot be read now
        raise RequestProblem(503, "unavailable", str(exc)) from None


@api.get("/metrics")
async def metrics(request: Request) -> Response:
    """The Prometheus text exposition of this app's registry."""
    state = state_of(request)
    try:
        await state.monitor.get(state)  # the monitor gauges, recomputed when stale
    except UserInputError:
        pass  # the log cannot be read now: the other metrics still answer
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
