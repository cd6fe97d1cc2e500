"""What the service checks at its door, before any endpoint sees a request.

* **Cross-site browser requests.** A request that changes state (any method but ``GET``,
  ``HEAD`` and ``OPTIONS``) sent by a browser on behalf of a page of another origin is
  refused (403 ``forbidden_origin``), unless that origin is one of the configured CORS
  origins. Browsers say where a request comes from in two headers no page can set:
  ``Sec-Fetch-Site`` (``same-origin``, ``same-site``, ``cross-site``, ``none``) and
  ``Origin``. A request carrying neither is not a browser's (curl, httpx,
  :class:`~hybridroute.client.RouterClient`) and passes.
* **Bodies declared JSON.** A state-changing request with a body must declare it
  ``Content-Type: application/json`` (415 otherwise, a missing header included): an HTML
  form or a ``no-cors`` ``fetch`` can only send ``text/plain``, form encodings or no type
  at all, so no page can get a "simple" request through.
* **The access log** (uvicorn's ``uvicorn.access`` logger) never prints a query string
  (it may carry ``?api_key=...``) and prints a path only scrubbed of credentials.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from .._redact import Redactor, scrub_text
from ._input import RequestProblem

__all__ = [
    "SAFE_METHODS",
    "AccessLogFilter",
    "check_door",
    "install_access_log_filter",
    "log_path",
]

#: Methods that never change state: no origin or media-type check.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values that say the request is not cross-site.
_SAME = frozenset({"same-origin", "none"})
_DEFAULT_PORT = {"http": "80", "https": "443"}
#: Longest path the access log prints (after scrubbing).
_MAX_LOGGED_PATH = 200
#: The record attribute that holds the arguments :class:`AccessLogFilter` wrote: a record
#: whose arguments are those is not rewritten again.
_REWRITTEN = "_hybridroute_access_args"


def _header_values(scope: Mapping[str, Any], name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == name]


def _own_origins(scope: Mapping[str, Any]) -> set[str]:
    """The origins of the service as the request addressed it (its ``Host``): the scheme
    it arrived on, and https (the service behind a proxy that terminates TLS)."""
    hosts = _header_values(scope, b"host")
    if len(hosts) != 1 or not hosts[0]:
        return set()
    host = hosts[0].strip().lower()
    out = set()
    for scheme in {str(scope.get("scheme", "http")), "https"}:
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if name and port == _DEFAULT_PORT.get(scheme):
            out.add(f"{scheme}://{name}")
        else:
            out.add(f"{scheme}://{host}")
    return out


def _origin_problem(scope: Mapping[str, Any], cors_origins: Iterable[str]) -> RequestProblem | None:
    origins = _header_values(scope, b"origin")
    sites = _header_values(scope, b"sec-fetch-site")
    if not origins and not sites:
        return None  # not a browser's request
    origin = origins[0].strip().lower() if len(origins) == 1 else None
    site = sites[0].strip().lower() if len(sites) == 1 else None
    if origin is not None and origin in cors_origins:
        return None  # a configured CORS origin (the CORS middleware answers its preflights)
    if sites:
        if site in _SAME:
            return None  # the browser says the page is the service's own
    elif origin is not None and origin in _own_origins(scope):
        return None
    shown = repr(origins[0][:100]) if origins else "(none)"
    said = f"; Sec-Fetch-Site: {sites[0][:30]!r}" if sites else ""
    return RequestProblem(
        403,
        "forbidden_origin",
        f"origin check: refused a cross-site browser request from origin {shown}{said}; "
        "only the service's own pages and the configured CORS origins (--cors-origin) may "
        "send requests that change state",
    )


def _has_body(scope: Mapping[str, Any]) -> bool:
    if _header_values(scope, b"transfer-encoding"):
        return True
    return any(v.strip() not in ("", "0") for v in _header_values(scope, b"content-length"))


def _media_problem(scope: Mapping[str, Any]) -> RequestProblem | None:
    types = _header_values(scope, b"content-type")
    if not _has_body(scope):
        return None  # nothing to read (an endpoint that reads a body refuses it itself)
    medias = [t.split(";", 1)[0].strip().lower() for t in types]
    if medias and all(m == "application/json" for m in medias):
        return None
    got = "no Content-Type" if not types else f"Content-Type {types[0][:80]!r}"
    return RequestProblem(
        415,
        "invalid_input",
        f"the request body must be declared JSON (Content-Type: application/json), got {got}",
    )


def check_door(scope: Mapping[str, Any], cors_origins: Iterable[str]) -> RequestProblem | None:
    """The refusal of a request at the door (403 cross-site, 415 not JSON), or ``None``.

    Only state-changing methods are checked; the origin first, so a cross-site request is
    refused as such whatever it carries.
    """
    if str(scope.get("method", "")).upper() in SAFE_METHODS:
        return None
    return _origin_problem(scope, cors_origins) or _media_problem(scope)


# --------------------------------------------------------------------------- access log


def log_path(path: str, scrub: Callable[[str], str] = scrub_text) -> str:
    """``path`` as the access log may print it: no query string, credentials scrubbed
    (from the decoded path: ``%3D`` must not hide ``api_key=...``), at most 200 chars."""
    bare, sep, _ = path.partition("?")
    decoded = unquote(bare)
    scrubbed = scrub(decoded)
    shown = bare if scrubbed == decoded else quote(scrubbed, safe="/[]")
    if len(shown) > _MAX_LOGGED_PATH:
        shown = shown[: _MAX_LOGGED_PATH - 1] + "…"
    return shown + ("?[query not logged]" if sep else "")


class AccessLogFilter(logging.Filter):
    """Rewrites uvicorn's access-log records (``client - "METHOD PATH HTTP/v" status``)
    so that they print no query string and no credential in the path or method.

    One :class:`~hybridroute._redact.Redactor` serves every line (making one reads the
    environment: ~0.14 ms, against ~1 µs to scrub a path with it).

    A record is rewritten once: the filter sits both on the ``uvicorn.access`` logger
    (:func:`install_access_log_filter`) and on the access handler (:func:`log_config
    <hybridroute.service._server.log_config>`), and the second to see a record finds the
    arguments it left there (kept on the record) and lets it pass as it is.
    """

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._scrub = Redactor().scrub_text

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if args is None or record.__dict__.get(_REWRITTEN) is args:
            return True  # already rewritten (by the other installation)
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (
                args[0],
                self._scrub(str(args[1]))[:20],
                log_path(args[2], self._scrub),
                args[3],
                args[4],
            )
            record.__dict__[_REWRITTEN] = record.args
        return True


def install_access_log_filter() -> None:
    """Put :class:`AccessLogFilter` on the ``uvicorn.access`` logger (once): whichever
    way the app is served by uvicorn, and whatever logging configuration it is given
    (``logging.config.dictConfig`` keeps a logger's filters)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogFilter) for f in access.filters):
        access.addFilter(AccessLogFilter())
