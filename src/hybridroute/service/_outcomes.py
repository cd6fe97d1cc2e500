"""The review endpoints: attach outcomes (``POST /v1/outcomes``), list pending audits
(``GET /v1/audits``).

Both carry what no requester should see or forge -- other people's ticket texts, the gold
labels the monitor and recalibration learn from -- so both need the admin bearer token
(``Authorization: Bearer <token>``, the token of ``HYBRIDROUTE_ADMIN_TOKEN``); unlike the
reload and promotion endpoints they stay on with several workers (nothing there is held
per worker). Outcomes are written on the committer thread, all or nothing, exactly as
:meth:`~hybridroute.records.DecisionLog.add_outcomes` writes them: a bad outcome is a 422
naming ``outcomes[i].<field>`` and nothing is written.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..exceptions import UserInputError
from ..records import OutcomeError
from ._admin import authorize
from ._input import RequestProblem, invalid
from ._routes import read_json, state_of

__all__ = ["review"]

review = APIRouter()

#: Pending audits answered by default, and at most (``?limit=``).
DEFAULT_AUDITS = 1000
MAX_AUDITS = 10_000


@review.post("/v1/outcomes")
async def outcomes(request: Request) -> Response:
    """Attach ``{"outcomes": [...]}`` to logged decisions; answer the report."""
    state = state_of(request)
    authorize(request, state, log_access=True)
    doc = await read_json(request, state.config.max_body_bytes)
    unknown = sorted(set(doc) - {"outcomes"})
    if unknown:
        raise invalid(f"unknown key(s) {unknown}; the body holds 'outcomes'", unknown[0])
    items = doc.get("outcomes")
    if not isinstance(items, list):
        raise invalid("'outcomes' must be a list of outcome objects", "outcomes")
    if len(items) > state.config.max_batch:
        raise RequestProblem(
            413,
            "too_large",
            f"{len(items):,} outcomes in one request; at most {state.config.max_batch:,}",
            "outcomes",
        )
    try:
        report = await state.add_outcomes(items)
    except OutcomeError as exc:
        where = f"outcomes[{(exc.row or 1) - 1}]"
        field = where if exc.column is None else f"{where}.{exc.column}"
        raise invalid(f"{field}: {exc.reason}", field) from None
    return JSONResponse(report.to_dict())


@review.get("/v1/audits")
async def audits(request: Request) -> Response:
    """Audited decisions without an audit outcome: ``?router_version=V&limit=N``."""
    state = state_of(request)
    authorize(request, state, log_access=True)
    params = request.query_params
    unknown = sorted(set(params) - {"router_version", "limit"})
    if unknown:
        raise invalid(
            f"unknown query parameter(s) {unknown}; use router_version and limit", unknown[0]
        )
    version = params.get("router_version")
    if version is not None and (not version or len(version) > 256):
        raise invalid("router_version must be 1 to 256 characters", "router_version")
    raw = params.get("limit")
    limit = DEFAULT_AUDITS
    if raw is not None:
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_AUDITS:
            raise invalid(f"limit must be a whole number from 1 to {MAX_AUDITS:,}", "limit")
        limit = int(raw)
    try:
        pending = await asyncio.to_thread(state.pending_audits, version, limit)
    except UserInputError as exc:  # the log cannot be read now
        raise RequestProblem(503, "unavailable", str(exc)) from None
    return JSONResponse({"count": len(pending), "pending": pending})
