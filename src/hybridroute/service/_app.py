"""The app factory: :func:`create_app` builds the FastAPI application of a config.

Bundles are loaded (and verified) when the app is made, so a tampered or missing bundle
fails at once, naming the file; the log is opened by the app's lifespan (on start-up)
and closed on shutdown after pending shadow work and commits are done.

Errors: every refusal is ``{"error": {"code", "field", "message"}}`` with a 4xx status --
including an unknown path (404) or method (405). Anything else is a bug: a 500 with the
same shape and a generic message; the server's log gets the exception's type and where
it was raised, never its message (which may quote a request) and never a body.

The app's outermost layer (:class:`_Guard`) checks every request at the door
(:mod:`._edges`: cross-site browser requests 403, bodies not declared JSON 415), bounds
the time a body may take to arrive (``body_timeout_s``: 408, connection closed), and
treats a client that goes away mid-request as what it is -- not an internal error: one
debug line, nothing routed, counted in ``hybridroute_requests_total`` as status 499.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.telemetry import TelemetryConfig
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._redact import scrub_text
from .._version import __version__
from ..exceptions import UserInputError
from ._config import ServiceConfig
from ._edges import check_door, install_access_log_filter
from ._input import RequestProblem
from ._routers import LIVE, SHADOW, RouterSet, load_bundle
from ._state import ServiceState

__all__ = ["create_app"]

#: FastAPI's own telemetry, all of it off (see create_app).
_NO_TELEMETRY: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
    "auto_configure": False,
}

logger = logging.getLogger("hybridroute.service")

#: Paths counted under their own name in ``hybridroute_requests_total`` (others: "other").
_ENDPOINTS = frozenset(
    {
        "/",
        "/v1/route",
        "/v1/route/batch",
        "/healthz",
        "/readyz",
        "/v1/routers",
        "/v1/shadow",
        "/metrics",
        "/v1/admin/reload",
        "/v1/admin/promote",
        "/v1/outcomes",
        "/v1/audits",
    }
)
_SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
#: Methods named as such in the server's log (anything else: "other").
_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
#: The status counted for a request whose client went away before its answer (nginx's).
CLIENT_GONE = 499


def _problem_response(problem: RequestProblem) -> JSONResponse:
    headers = {"www-authenticate": "Bearer"} if problem.status == 401 else None
    return JSONResponse(problem.body(), status_code=problem.status, headers=headers)


async def _on_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestProblem)
    return _problem_response(exc)


def _shown_path(request: Request) -> str:
    # scrubbed before it is cut: a key cut in two no longer looks like one
    path = scrub_text(request.url.path)
    return path if len(path) <= 200 else path[:199] + "…"


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        problem = RequestProblem(
            404, "not_found", f"no such endpoint: {_shown_path(request)}; see GET /"
        )
    elif exc.status_code == 405:
        method = request.method if request.method in _METHODS else "(another method)"
        problem = RequestProblem(
            405,
            "invalid_input",
            f"method {method} is not allowed on {_shown_path(request)}",
        )
    else:
        problem = RequestProblem(exc.status_code, "invalid_input", str(exc.detail))
    return _problem_response(problem)


def _body_timeout(seconds: float) -> RequestProblem:
    return RequestProblem(
        408,
        "timeout",
        f"the request body did not arrive within {seconds:g} s (body_timeout_s); the "
        "connection is closed",
    )


Endpoint = Callable[[Request], Awaitable[Response]]


class _Endpoints:
    """The routing endpoints as a bare ASGI app (the app's fast lane, see :class:`_App`).

    They read their bodies by hand and raise only :class:`RequestProblem` for a refusal,
    so this is all FastAPI's stack would do for them: a refusal becomes its JSON answer,
    anything else reaches the guard around this app as an internal error.
    """

    def __init__(self, endpoints: dict[str, Endpoint]) -> None:
        self.endpoints = endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoints[scope["path"]]
        try:
            response = await endpoint(Request(scope, receive))
        except RequestProblem as problem:
            response = _problem_response(problem)
        await response(scope, receive, send)


class _Lanes:
    """Sends ``POST`` to a routing endpoint down the fast lane, everything else down
    FastAPI's whole stack (both behind a :class:`_Guard` of the same state)."""

    def __init__(self, stack: ASGIApp, fast: ASGIApp, paths: frozenset[str]) -> None:
        self.stack = stack
        self.fast = fast
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.paths:
            await self.fast(scope, receive, send)
        else:
            await self.stack(scope, receive, send)


class _App(FastAPI):
    """The service's FastAPI app, with a fast lane for the routing endpoints.

    Between the server and an endpoint FastAPI puts three middlewares of its own, the
    app's, an exception middleware, an exit stack, route matching over every path and
    dependency solving: for a single-item route that is about a fifth of the service's
    CPU, and none of it does anything for an endpoint that reads its own body. So a
    ``POST`` to ``/v1/route`` or ``/v1/route/batch`` goes from the guard straight to its
    endpoint; every other request, and every request when CORS is configured (its
    middleware must see them), takes the whole stack.
    """

    hybridroute_fast: dict[str, Endpoint]
    hybridroute_holder: dict[str, Any]

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        fast = getattr(self, "hybridroute_fast", None)
        if not fast:
            return stack
        lane = _Guard(_Endpoints(fast), self.hybridroute_holder)
        return _Lanes(stack, lane, frozenset(fast))


class _Guard:
    """The outermost layer of the app's own stack: checks every request at the door
    (origin, media type), bounds the time its body may take, counts and times it, adds
    security headers, and turns an unhandled exception into a JSON 500 (logged by type
    and place only, never re-raised to the server, whose log would quote its message).
    A client that goes away is not an error: nothing is answered, one debug line."""

    def __init__(self, app: ASGIApp, holder: dict[str, ServiceState]) -> None:
        self.app = app
        self.holder = holder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = self.holder["state"]
        config = state.config
        start = time.perf_counter()
        path = scope.get("path", "")
        endpoint = path if path in _ENDPOINTS else "other"
        method = scope.get("method") if scope.get("method") in _METHODS else "other"
        status = [0]
        done = [False]
        # the body's deadline runs from the moment the headers are in (this call)
        deadline = asyncio.get_running_loop().time() + config.body_timeout_s
        body_in = [False]
        timed_out = [False]
        gone = [False]

        def count(code: int) -> None:
            if not done[0]:
                done[0] = True
                state.metrics.on_request(endpoint, code, time.perf_counter() - start)

        async def receive_wrapper() -> Message:
            if body_in[0]:
                message = await receive()
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        message = await receive()
                except TimeoutError:
                    timed_out[0] = True
                    raise _body_timeout(config.body_timeout_s) from None
                if message["type"] != "http.request" or not message.get("more_body"):
                    body_in[0] = True
            if message["type"] == "http.disconnect":
                gone[0] = True
            return message

        async def send_wrapper(message: Message) -> None:
            if gone[0]:
                return  # nobody to answer (the server would drop it too)
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [*message.get("headers", []), *_SECURITY_HEADERS]
                if timed_out[0]:  # the rest of a late body is not waited for
                    headers.append((b"connection", b"close"))
                message["headers"] = headers
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                count(status[0])
            await send(message)

        problem = check_door(scope, config.cors_origins)
        if problem is not None:
            await _problem_response(problem)(scope, receive, send_wrapper)
            return
        try:
            await self.app(scope, receive_wrapper, send_wrapper)
        except Exception as exc:
            if isinstance(exc, ClientDisconnect):  # read from a client that went away
                gone[0] = True
            else:  # a bug, whether or not the client is still there
                where = traceback.extract_tb(exc.__traceback__)[-3:]
                logger.error(
                    "internal error on %s %s: %s at %s",
                    method,
                    endpoint,
                    type(exc).__name__,
                    " <- ".join(
                        f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in reversed(where)
                    ),
                )
                if status[0] == 0:
                    body = RequestProblem(500, "internal", "internal error (logged by the server)")
                    await JSONResponse(body.body(), status_code=500)(scope, receive, send_wrapper)
        if gone[0] and not done[0]:
            logger.debug("%s %s: the client went away before its answer", method, endpoint)
            count(CLIENT_GONE)


def create_app(config: ServiceConfig) -> FastAPI:
    """The FastAPI application serving ``config``.

    Parameters
    ----------
    config : ServiceConfig
        The live bundle, the shadows, the log URL and the limits.

    Returns
    -------
    fastapi.FastAPI
        Serve it with any ASGI server (``uvicorn.run(app)``); its lifespan opens the log
        and must run (uvicorn and ``fastapi.testclient.TestClient`` used as a context
        manager both run it).

    Raises
    ------
    ArtifactError
        A bundle fails to load (missing, changed or unsigned file...), naming it.
    UserInputError
        The segment fact is not a fact of the live router's schema, or an audit rate is
        set without ``HYBRIDROUTE_AUDIT_KEY``.

    Notes
    -----
    Admin endpoints are on only when the environment variable
    ``config.admin_token_env`` holds a token when the app is made (and ``config.admin``
    is true); the app logs one line saying which.
    """
    if not isinstance(config, ServiceConfig):
        raise TypeError(f"config must be a ServiceConfig, got {type(config).__name__}")
    live = load_bundle(config.router, LIVE, config.redact_pii)
    shadows = tuple(load_bundle(path, SHADOW, config.redact_pii) for path in config.shadows)
    routers = RouterSet(live)
    for shadow in shadows:
        try:
            routers.add_shadow(shadow)
        except ValueError as exc:
            raise UserInputError(f"shadow bundle {shadow.path}: {exc}") from None
    if config.segment_fact is not None:
        declared = {spec.name for spec in live.router.rules.schema.specs}
        if config.segment_fact not in declared:
            raise UserInputError(
                f"service config field 'segment_fact': {config.segment_fact!r} is not a fact "
                f"of router {live.name} {live.version} (its facts: {sorted(declared)})"
            )
    install_access_log_filter()  # uvicorn's access log: no query strings, no credentials
    token = config.admin_token()
    audit = config.audit_sampler()  # a rate without its key fails here, naming the variable
    state = ServiceState(config, routers, token, audit)
    holder: dict[str, Any] = {"state": state}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.start()
        if token is None:
            why = (
                "multi-worker serving: each worker holds its own routers"
                if not config.admin
                else f"{config.admin_token_env} is not set"
            )
            logger.warning("admin endpoints are off (%s)", why)
        else:
            logger.info("admin endpoints are on (bearer token from %s)", config.admin_token_env)
        try:
            yield
        finally:
            await state.stop()

    app = _App(
        title="hybridroute",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # FastAPI's OpenTelemetry integration records exception messages and request
        # spans whenever the host has a provider configured; a message can quote a
        # request's content, so it is off (the service's own metrics are on /metrics)
        telemetry=_NO_TELEMETRY,
    )
    app.state.hybridroute = state
    app.add_exception_handler(RequestProblem, _on_problem)
    app.add_exception_handler(StarletteHTTPException, _on_http)

    from ._admin import admin
    from ._outcomes import review
    from ._routes import api
    from ._status_page import page

    app.include_router(api)
    app.include_router(admin)
    app.include_router(review)
    app.include_router(page)
    if config.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    app.add_middleware(_Guard, holder=holder)
    if not config.cors_origins:
        from ._routes import route, route_batch

        app.hybridroute_fast = {"/v1/route": route, "/v1/route/batch": route_batch}
        app.hybridroute_holder = holder
    return app
