"""``GET /``: the status page, server-rendered HTML with no build step and no assets.

One self-contained document (inline CSS, no script, no font or image fetched), every
value HTML-escaped, served with a ``Content-Security-Policy`` that allows nothing but
its own inline style. It shows the live and shadow routers (version, manifest hash,
policy), the recent window of this process's live decisions by destination, reason code
and stage, fallbacks by cause, ask-user and human-review rates by the segment fact, each
shadow's disagreement with live over the same requests, and links to ``/metrics`` and
the JSON endpoints. Elements carry ``id`` / ``data-*`` attributes so tests (and scrapers)
can read the numbers without parsing prose.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from ..exceptions import UserInputError
from ._routers import LoadedRouter
from ._routes import state_of
from ._state import ServiceState
from ._window import ShadowSummary, WindowSummary

__all__ = ["CSP", "page", "render_status"]

page = APIRouter()

#: The page's Content-Security-Policy: nothing may load, no script may run.
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
#: Most segment rows shown (the window may hold more distinct values).
MAX_SEGMENT_ROWS = 50

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem auto;
max-width:70rem;padding:0 1rem;color:#1d2330;background:#fbfbfd}
h1{font-size:1.35rem;margin:0 0 .25rem}h2{font-size:1.05rem;margin:1.6rem 0 .5rem;
border-bottom:1px solid #dde1ea;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.25rem 0 .75rem;min-width:22rem}
th,td{padding:.22rem .7rem;border-bottom:1px solid #e6e9f0;text-align:left;vertical-align:top}
th{font-weight:600;background:#f0f2f7}td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#636b7c}.tag{display:inline-block;padding:0 .45rem;border-radius:.6rem;
font-size:.8rem;background:#e7ecf7}.live{background:#d7f2dd}.shadow{background:#efe6fa}
code{font-size:.85rem}.grid{display:flex;flex-wrap:wrap;gap:0 2.2rem}nav a{margin-right:1rem}
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _pct(part: int, whole: int) -> str:
    return "–" if whole == 0 else f"{100.0 * part / whole:.1f}%"


def _count_table(
    table_id: str, head: str, rows: Sequence[tuple[str, int]], total: int, attr: str
) -> str:
    if not rows:
        return f'<p class="muted" id="{_e(table_id)}">none in the window</p>'
    body = "".join(
        f'<tr data-{attr}="{_e(k)}"><td>{_e(k)}</td>'
        f'<td class="n" data-count="{n}">{n}</td><td class="n">{_pct(n, total)}</td></tr>'
        for k, n in rows
    )
    return (
        f'<table id="{_e(table_id)}"><thead><tr><th>{_e(head)}</th><th>decisions</th>'
        f"<th>share</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _router_rows(routers: Iterable[LoadedRouter]) -> str:
    rows = []
    for r in routers:
        p = r.policy
        certified = "certified" if p.get("certified") else "not certified"
        target = p.get("target")
        target_s = "" if target is None else f" · target {_e(target)} (δ {_e(p.get('delta'))})"
        thr = p.get("threshold")
        thr_s = "" if not isinstance(thr, (int, float)) else f" · threshold {thr:.4f}"
        rows.append(
            f'<tr data-role="{_e(r.role)}" data-version="{_e(r.version)}">'
            f'<td><span class="tag {_e(r.role)}">{_e(r.role)}</span></td>'
            f'<td class="router-name">{_e(r.name)}</td>'
            f'<td class="router-version">{_e(r.version)}</td>'
            f"<td><code>{_e(r.manifest_sha256[:16])}</code></td>"
            f"<td>{_e(certified)}{target_s}{thr_s}</td></tr>"
        )
    return (
        '<table id="routers"><thead><tr><th>role</th><th>name</th><th>version</th>'
        "<th>manifest</th><th>policy</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _shadow_section(shadows: Sequence[ShadowSummary]) -> str:
    if not shadows:
        return '<p class="muted" id="shadows">no shadow routers</p>'
    parts = []
    head = (
        '<table id="shadows"><thead><tr><th>shadow version</th><th>requests compared</th>'
        "<th>destination agrees</th><th>stage agrees</th><th>reason code agrees</th>"
        "</tr></thead><tbody>"
    )
    rows = "".join(
        f'<tr data-shadow="{_e(s.version)}"><td>{_e(s.version)}</td>'
        f'<td class="n" data-compared="{s.compared}">{s.compared}</td>'
        f'<td class="n" data-agree="{s.destination_agree}">{_pct(s.destination_agree, s.compared)}</td>'
        f'<td class="n">{_pct(s.stage_agree, s.compared)}</td>'
        f'<td class="n">{_pct(s.reason_agree, s.compared)}</td></tr>'
        for s in shadows
    )
    parts.append(head + rows + "</tbody></table>")
    for s in shadows:
        if not s.disagree_by:
            continue
        body = "".join(
            f'<tr><td>{_e(st)}</td><td>{_e(rc)}</td><td class="n">{n}</td></tr>'
            for st, rc, n in s.disagree_by[:20]
        )
        parts.append(
            f'<table class="disagree" data-shadow="{_e(s.version)}"><thead><tr>'
            f"<th>live stage</th><th>live reason code</th><th>destination differs "
            f"(shadow {_e(s.version)})</th></tr></thead><tbody>{body}</tbody></table>"
        )
    return "".join(parts)


def _segments(summary: WindowSummary, fact: str | None) -> str:
    if fact is None:
        return (
            '<p class="muted" id="segments">no segment fact configured '
            "(<code>--segment-fact NAME</code>)</p>"
        )
    if not summary.segments:
        return '<p class="muted" id="segments">none in the window</p>'
    body = "".join(
        f'<tr data-segment="{_e(seg)}"><td>{_e(seg)}</td><td class="n">{n}</td>'
        f'<td class="n">{_pct(ask, n)}</td><td class="n">{_pct(review, n)}</td></tr>'
        for seg, n, ask, review in summary.segments[:MAX_SEGMENT_ROWS]
    )
    return (
        f'<table id="segments"><thead><tr><th>{_e(fact)}</th><th>decisions</th>'
        f"<th>ask user</th><th>human review</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _when(ts: float | None) -> str:
    if ts is None:
        return "–"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def render_status(state: ServiceState) -> str:
    """The status page of ``state`` as one HTML document."""
    current = state.routers.current
    summary = state.window.summary([s.version for s in current.shadows])
    live = current.live
    total = summary.size
    fallbacks = sum(n for _, n in summary.fallbacks)
    uptime = int(time.time() - state.started_at)
    admin = "on" if state.admin_token is not None else "off"
    title = f"hybridroute · {live.name} {live.version}"
    return (
        "<!doctype html>"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="refresh" content="15">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f'<h1>hybridroute <span id="live-name">{_e(live.name)}</span> '
        f'<span class="tag live" id="live-version">{_e(live.version)}</span></h1>'
        f'<p class="muted">log <code id="log-url">{_e(state.log_shown)}</code> · admin '
        f'<span id="admin">{admin}</span> · up {uptime // 3600}h {uptime // 60 % 60}m '
        f"{uptime % 60}s · this page refreshes every 15 s</p>"
        '<nav><a href="/metrics">/metrics</a><a href="/v1/routers">/v1/routers</a>'
        '<a href="/v1/shadow">/v1/shadow</a><a href="/readyz">/readyz</a>'
        '<a href="/healthz">/healthz</a></nav>'
        "<h2>Routers</h2>" + _router_rows(current.all()) + "<h2>Recent decisions</h2>"
        f'<p>The last <span id="window-size" data-count="{total}">{total}</span> live '
        f"decisions of this process (window of {summary.capacity:,}; since "
        f"{_e(_when(summary.since))}); fallbacks: "
        f'<span id="fallback-count" data-count="{fallbacks}">{fallbacks}</span> '
        f"({_pct(fallbacks, total)}).</p>"
        '<div class="grid"><div><h3>By destination</h3>'
        + _count_table(
            "by-destination", "destination", summary.by_destination, total, "destination"
        )
        + "</div><div><h3>By reason code</h3>"
        + _count_table("by-reason", "reason code", summary.by_reason, total, "reason")
        + "</div><div><h3>By stage</h3>"
        + _count_table("by-stage", "stage", summary.by_stage, total, "stage")
        + "</div><div><h3>By router version</h3>"
        + _count_table("by-version", "version", summary.by_version, total, "version")
        + "</div></div><h2>Fallbacks by cause</h2>"
        + _count_table("fallbacks", "cause", summary.fallbacks, total, "cause")
        + "<h2>Ask user and human review by segment</h2>"
        + _segments(summary, state.config.segment_fact)
        + "<h2>Disagreement with shadows</h2>"
        '<p class="muted">Each shadow routes the same requests after the live answer is '
        "sent; compared here over the same window (the whole log: "
        '<a href="/v1/shadow">/v1/shadow</a>).</p>'
        + _shadow_section(summary.shadows)
        + "<h2>Live guarantee (audits)</h2>"
        + _monitor_section(state.monitor.last)
        + "</body></html>"
    )


def _monitor_section(m: dict[str, Any] | None) -> str:
    if m is None:
        return '<p class="muted" id="monitor-status">not computed yet</p>'
    if m.get("status") == "unavailable":
        return (
            '<p class="muted">status <span id="monitor-status">unavailable</span>: '
            f"{_e(str(m.get('reason', '')))}</p>"
        )
    p = m.get("precision") or {}

    def num(v: Any) -> str:
        return "–" if v is None else f"{v:.4f}"

    breach = m.get("breach")
    detected = (
        ""
        if not breach
        else f" · breach detected at label {breach['labels']} ({_e(str(breach.get('at')))})"
    )
    return (
        f'<p>status <span id="monitor-status">{_e(str(m["status"]))}</span> · target '
        f"{m['target']:g} (δ {m['delta']:g}) · "
        f'<span id="monitor-labels" data-count="{m["labels"]}">{m["labels"]}</span> audit '
        f"labels of {m['audited']} audited decisions ({m['pending']} pending) · precision "
        f"{num(p.get('estimate'))}, anytime-valid bounds [{num(p.get('lower'))}, "
        f'{num(p.get("upper"))}]{detected} (<a href="/v1/monitor">/v1/monitor</a>)</p>'
    )


@page.get("/")
async def status_page(request: Request) -> Response:
    """The status page (HTML)."""
    state = state_of(request)
    try:
        await state.monitor.get(state)
    except UserInputError:  # the log cannot be read now: the page shows the rest
        pass
    html = render_status(state)
    return HTMLResponse(
        html,
        headers={"content-security-policy": CSP, "cache-control": "no-store"},
    )
