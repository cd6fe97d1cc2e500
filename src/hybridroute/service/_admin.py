"""Admin endpoints: load a bundle (``POST /v1/admin/reload``) and promote a shadow
(``POST /v1/admin/promote``).

Both need ``Authorization: Bearer <token>``, the token read from the environment
variable named by ``ServiceConfig.admin_token_env`` (``HYBRIDROUTE_ADMIN_TOKEN``) when
the app is made, compared in constant time (:func:`hmac.compare_digest`). Without a
token the endpoints are off: 403 ``admin_disabled``, whatever the request holds.

A reloaded bundle is loaded and verified exactly as at start-up
(:func:`hybridroute.router.load_router`: every checksum, seal and signature, the policy's
model); a bundle that fails is refused with the loader's words and changes nothing. Its
version's labels and destinations are registered in the decision log (outcomes of its
decisions are checked against them); a bundle whose version the log holds with other
labels or destinations is refused too (a changed router needs a new version). A
promotion replaces the router set in one assignment: requests in flight finish on the
router they started with.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .._csv import json_kind
from .._redact import scrub_text
from ..exceptions import UserInputError
from ._input import RequestProblem, invalid
from ._routers import LIVE, SHADOW, load_bundle
from ._routes import read_json, state_of
from ._state import ServiceState

if TYPE_CHECKING:
    from ..router import HybridRouter

__all__ = ["admin", "authorize"]

logger = logging.getLogger(__name__)

admin = APIRouter()

#: Largest admin request body, in bytes.
MAX_ADMIN_BODY = 64 * 1024


def authorize(request: Request, state: ServiceState, *, log_access: bool = False) -> None:
    """Refuse the request unless it carries the admin bearer token.

    ``log_access``: for the endpoints that read or write the log's review data
    (``/v1/outcomes``, ``/v1/audits``), which stay on with several workers (nothing there
    is held per worker); they need the same token.

    Raises
    ------
    RequestProblem
        403 ``admin_disabled`` when no token is configured; 401 ``unauthorized`` when the
        request's token is missing or wrong.
    """
    token = state.review_token if log_access else state.admin_token
    if token is None:
        why = (
            "turned off for multi-worker serving (each worker holds its own routers)"
            if not state.config.admin and not log_access
            else f"set {state.config.admin_token_env} before starting the server to enable them"
        )
        raise RequestProblem(403, "admin_disabled", f"admin endpoints are off: {why}")
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("utf-8", "surrogateescape"), token.encode("utf-8", "surrogateescape")
    )
    if not ok:
        raise RequestProblem(
            401,
            "unauthorized",
            "admin endpoints need the header 'Authorization: Bearer <token>' with the token "
            f"of {state.config.admin_token_env}",
        )


def _fields(doc: dict[str, Any], allowed: tuple[str, ...], required: tuple[str, ...]) -> None:
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise invalid(f"unknown key(s) {unknown}; this request holds {list(allowed)}", unknown[0])
    for name in required:
        if name not in doc:
            raise invalid(f"{name} is missing", name)
        if not isinstance(doc[name], str) or not doc[name]:
            raise invalid(f"{name} must be a non-empty string, got {json_kind(doc[name])}", name)


def _routers_answer(state: ServiceState, **extra: Any) -> JSONResponse:
    current = state.routers.current
    state.metrics.set_routers(current.all())
    return JSONResponse({**extra, "routers": [r.describe() for r in current.all()]})


async def _register(state: ServiceState, router: HybridRouter) -> None:
    """Register ``router``'s version in the log (on the committer thread).

    Raises
    ------
    RequestProblem
        422 naming ``path`` when the log holds the version with other labels or
        destinations; 503 when the log cannot be written now.
    """
    from ..records._vocabulary import VocabularyConflictError

    if state.log is None or state.committer is None:
        raise RequestProblem(503, "unavailable", "the service is not started (no lifespan)")
    try:
        await state.committer.call(state.log.register_router, router)
    except VocabularyConflictError as exc:
        raise invalid(f"bundle refused: {exc}", "path") from None
    except UserInputError as exc:  # the log cannot be written now (ArtifactError)
        raise RequestProblem(503, "unavailable", str(exc)) from None


@admin.post("/v1/admin/reload")
async def reload(request: Request) -> Response:
    """Load ``{"path": BUNDLE, "role": "shadow" | "live"}`` (``shadow`` by default)."""
    state = state_of(request)
    authorize(request, state)
    doc = await read_json(request, MAX_ADMIN_BODY)
    _fields(doc, ("path", "role"), ("path",))
    role = doc.get("role", SHADOW)
    if role not in (SHADOW, LIVE):
        raise invalid(f"role must be 'shadow' or 'live', got {role!r}", "role")
    path = doc["path"]
    try:
        loaded = await asyncio.to_thread(load_bundle, path, SHADOW, state.config.redact_pii)
    except UserInputError as exc:
        raise invalid(f"bundle refused: {exc}", "path") from None
    except OSError as exc:
        raise invalid(f"bundle refused: {path}: {exc.strerror or exc}", "path") from None
    await _register(state, loaded.router)
    try:
        state.routers.add_shadow(loaded)
        if role == LIVE:
            state.routers.promote(loaded.version)
    except ValueError as exc:
        raise invalid(str(exc), "path") from None
    logger.info(
        "admin: loaded router %s %s as %s (manifest %s)",
        loaded.name,
        loaded.version,
        role,
        loaded.manifest_sha256[:12],
    )
    described = state.routers.current.find(loaded.version)
    assert described is not None
    return _routers_answer(state, loaded=described.describe())


@admin.post("/v1/admin/promote")
async def promote(request: Request) -> Response:
    """Make the shadow of ``{"version": V}`` live (the live router becomes a shadow)."""
    state = state_of(request)
    authorize(request, state)
    doc = await read_json(request, MAX_ADMIN_BODY)
    _fields(doc, ("version",), ("version",))
    version = doc["version"]
    current = state.routers.current
    if current.live.version == version:
        raise invalid(f"version {version!r} is already live", "version")
    try:
        _, old = state.routers.promote(version)
    except KeyError:
        shadows = [s.version for s in current.shadows]
        raise RequestProblem(
            404,
            "not_found",
            f"no shadow router has version {scrub_text(version)[:100]!r} (shadows: {shadows}); "
            "load it first with POST /v1/admin/reload",
            "version",
        ) from None
    live = state.routers.current.live
    logger.info("admin: promoted %s %s to live (was %s)", live.name, live.version, old.version)
    return _routers_answer(state, live=live.describe(), previous=old.describe())
