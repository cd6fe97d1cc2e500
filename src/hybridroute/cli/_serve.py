"""``hybridroute serve``: the routing service (FastAPI on uvicorn).

Everything that can be refused is refused before the server starts, as one line with
exit code 2: the options are checked, the host is resolved and its port bound for a
moment (taken, not an address of this machine, ...) before anything is created, the
bundles are loaded and verified, the log is opened and checked writable (its password
never shown). Then one line says where the service listens, what is live and where
decisions go, and the service runs (:func:`hybridroute.service._server.run`: uvicorn with
a protocol that bounds the time and size of request headers, and an access log that
prints no query string and no credential).

``--workers N`` (N > 1) runs N processes with uvicorn's multi-process mode, each loading
the routers and opening the log itself (the configuration travels in an environment
variable); admin endpoints are then off, since a reload or promotion would reach only
one worker.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ..service import ServiceConfig

#: What to install when the service's dependencies are missing.
INSTALL_HINT = "pip install 'hybridroute[service]'"


def _check_extra() -> None:
    import importlib.util

    from ..exceptions import UserInputError

    missing = [
        m
        for m in ("fastapi", "uvicorn", "prometheus_client")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise UserInputError(
            f"hybridroute serve needs the 'service' extra ({', '.join(missing)} not "
            f"installed): {INSTALL_HINT}"
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_address(host: str, port: int) -> None:
    """Refuse (one line naming host and port) an address the server could not listen on:
    a host that does not resolve, a port taken, an address not of this machine.

    Each address the host resolves to is bound for a moment, as uvicorn binds it (address
    reuse on, IPv6 sockets IPv6-only), and released. Another process may still take the
    port between this check and the server's start; the server then stops with uvicorn's
    message.
    """
    from ..exceptions import UserInputError

    where = f"--host {host} --port {port}"
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else "not a valid host name"
        raise UserInputError(
            f"cannot serve on {where}: the host does not resolve ({why})"
        ) from None
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as exc:
            shown = f"[{address[0]}]" if family == socket.AF_INET6 else address[0]
            raise UserInputError(
                f"cannot serve on {where}: {shown}:{port}: {exc.strerror or exc}"
            ) from None


#: The options of ``serve``, by parameter (declared here to keep the command short).
_OPTIONS: dict[str, Any] = {
    "router": typer.Option(..., "--router", help="The live router bundle directory."),
    "shadow": typer.Option(
        [],
        "--shadow",
        help="A candidate bundle that routes every request after its answer is sent "
        "(logged with role 'shadow'); repeatable.",
    ),
    "log": typer.Option(
        ...,
        "--log",
        help="The decision log: sqlite:///PATH, a file path, or postgresql://USER@HOST/DB; a "
        "SQLite file is created when missing, in a directory that must exist.",
    ),
    "host": typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
    "port": typer.Option(8080, "--port", min=1, max=65535, help="Port to listen on."),
    "workers": typer.Option(
        1,
        "--workers",
        min=1,
        max=64,
        help="Server processes. More than 1 turns the admin endpoints off (each worker "
        "holds its own routers).",
    ),
    "segment_fact": typer.Option(
        None,
        "--segment-fact",
        help="A fact that /metrics and the status page break ask-user and human-review "
        "rates down by (not a --sensitive one).",
    ),
    "sensitive": typer.Option(
        [],
        "--sensitive",
        help="A fact stored in the log (and answered) as a salted hash (salt: "
        "HYBRIDROUTE_LOG_SALT); repeatable.",
    ),
    "max_batch": typer.Option(
        1000, "--max-batch", min=1, help="Most items in one POST /v1/route/batch."
    ),
    "max_body_bytes": typer.Option(
        4 << 20, "--max-body-bytes", min=1024, help="Largest request body, in bytes."
    ),
    "cors_origin": typer.Option(
        [],
        "--cors-origin",
        help="An origin (scheme://host[:port]) allowed to call the API from a browser (none "
        "by default: cross-site browser requests are refused); repeatable.",
    ),
    "body_timeout": typer.Option(
        15.0,
        "--body-timeout",
        help="Seconds a request's body may take to arrive once its headers are in (then 408 "
        "and the connection is closed).",
    ),
    "header_timeout": typer.Option(
        10.0,
        "--header-timeout",
        help="Seconds a connection may take to send a request's headers (then 408 and closed).",
    ),
    "log_timeout": typer.Option(
        60.0,
        "--log-timeout",
        help="Seconds one decision-log call may take (SQLite's lock wait; PostgreSQL's "
        "statement timeout, and a client-side deadline 2 s later) before the requests "
        "waiting for it get 503.",
    ),
    "redact_pii": typer.Option(
        None,
        "--redact-pii",
        help="Redact personal data from ticket texts before routing, for the live router and "
        "every shadow: 'all' or kinds from email,card,iban,phone (the bundles may also "
        "record their own).",
    ),
    "log_level": typer.Option(
        "info", "--log-level", help="Server log level: debug, info, warning, error."
    ),
    "access_log": typer.Option(
        True, "--access-log/--no-access-log", help="Log one line per request (no bodies)."
    ),
    "batch_window_ms": typer.Option(
        None,
        "--batch-window-ms",
        help="Micro-batching: the longest a single-item request waits for others while "
        "others are being served (0 to 50 ms, default 1; 0 turns it off). Sets "
        "HYBRIDROUTE_BATCH_WINDOW_MS for every worker.",
    ),
    "batch_max": typer.Option(
        None,
        "--batch-max",
        help="Micro-batching: the most items routed in one batch (1 to 4096, default 64). "
        "Sets HYBRIDROUTE_BATCH_MAX for every worker.",
    ),
    "audit_rate": typer.Option(
        0.0,
        "--audit-rate",
        min=0.0,
        max=1.0,
        help="Audit this share of auto-routed decisions (e.g. 0.02), selected by a keyed "
        "hash of the decision id (key: HYBRIDROUTE_AUDIT_KEY); GET /v1/audits lists them.",
    ),
}


def _batch_settings(window_ms: float | None, most: int | None) -> None:
    """Put the micro-batching options where every worker reads them (the environment),
    checked now: a bad value is one line and exit 2 before anything starts."""
    from ..exceptions import UserInputError
    from ..service._batcher import MAX_ENV, WINDOW_ENV, settings_from_env

    before = {name: os.environ.get(name) for name in (WINDOW_ENV, MAX_ENV)}
    for name, value in ((WINDOW_ENV, window_ms), (MAX_ENV, most)):
        if value is not None:
            os.environ[name] = f"{value:g}"
    try:
        settings_from_env()
    except UserInputError as exc:
        for name, old in before.items():  # a refused value is not left behind
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        option = "--batch-window-ms" if WINDOW_ENV in str(exc) else "--batch-max"
        raise typer.BadParameter(str(exc), param_hint=option) from None


def serve(
    router: Path = _OPTIONS["router"],
    shadow: list[Path] = _OPTIONS["shadow"],
    log: str = _OPTIONS["log"],
    host: str = _OPTIONS["host"],
    port: int = _OPTIONS["port"],
    workers: int = _OPTIONS["workers"],
    segment_fact: str | None = _OPTIONS["segment_fact"],
    sensitive: list[str] = _OPTIONS["sensitive"],
    max_batch: int = _OPTIONS["max_batch"],
    max_body_bytes: int = _OPTIONS["max_body_bytes"],
    cors_origin: list[str] = _OPTIONS["cors_origin"],
    body_timeout: float = _OPTIONS["body_timeout"],
    header_timeout: float = _OPTIONS["header_timeout"],
    log_timeout: float = _OPTIONS["log_timeout"],
    redact_pii: str | None = _OPTIONS["redact_pii"],
    log_level: str = _OPTIONS["log_level"],
    access_log: bool = _OPTIONS["access_log"],
    audit_rate: float = _OPTIONS["audit_rate"],
    batch_window_ms: float | None = _OPTIONS["batch_window_ms"],
    batch_max: int | None = _OPTIONS["batch_max"],
) -> None:
    """Serve a router over HTTP: POST /v1/route, /v1/route/batch; GET /, /metrics, ..."""
    _check_extra()
    _batch_settings(batch_window_ms, batch_max)
    from ..service import ServiceConfig

    if log_level.lower() not in ("critical", "error", "warning", "info", "debug"):
        raise typer.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    config = ServiceConfig(
        router=router,
        shadows=tuple(shadow),
        log=log,
        max_batch=max_batch,
        max_body_bytes=max_body_bytes,
        segment_fact=segment_fact,
        sensitive_facts=tuple(sensitive),
        cors_origins=tuple(cors_origin),
        admin=workers == 1,
        audit_rate=audit_rate,
        body_timeout_s=body_timeout,
        header_timeout_s=header_timeout,
        log_timeout_s=log_timeout,
        redact_pii=() if redact_pii is None else tuple(k.strip() for k in redact_pii.split(",")),
    )
    config.audit_sampler()  # a rate without HYBRIDROUTE_AUDIT_KEY fails here, naming it
    # the address before anything is created (the log) or printed (the banner)
    _check_address(host, port)
    # the log first: a wrong URL, an unreachable server, a missing salt fail here
    probe = config.open_log()
    try:
        probe.check_writable()
    finally:
        probe.close()

    from ..service._app import create_app

    app = create_app(config)  # loads and verifies every bundle (again in each worker)
    _announce(app, config, host, port, workers)

    from ..service._server import run

    served = app if workers == 1 else None
    del app  # with workers, each builds its own: this one is not kept alive meanwhile
    run(
        config,
        host=host,
        port=port,
        app=served,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
    )


def _announce(app: Any, config: ServiceConfig, host: str, port: int, workers: int) -> None:
    """Print the one line that says where the service listens, what is live and where
    decisions go (credentials scrubbed); warn when it listens beyond this machine."""
    from .._redact import scrub_text
    from ..records._url import display_url

    current = app.state.hybridroute.routers.current
    live = current.live
    shadows = ", ".join(f"{s.name} {s.version}" for s in current.shadows) or "none"
    token_env = config.admin_token_env
    if workers > 1:
        admin_note = f"admin endpoints off ({workers} workers: each holds its own routers)"
    elif os.environ.get(token_env):
        admin_note = f"admin endpoints on (token from {token_env})"
    else:
        admin_note = f"admin endpoints off ({token_env} not set)"
    shown_host = f"[{host}]" if ":" in host else host
    typer.echo(
        scrub_text(
            f"hybridroute serve: http://{shown_host}:{port} · live {live.name} {live.version} "
            f"· shadows: {shadows} · log {display_url(config.log)} · {admin_note}"
            + (f" · audit rate {config.audit_rate:g}" if config.audit_rate else "")
        )
    )
    if not _loopback(host):
        typer.echo(
            f"warning: listening on {host}, reachable from other machines; put the service "
            "behind a proxy that terminates TLS",
            err=True,
        )


def register(app: typer.Typer) -> None:
    """Add ``hybridroute serve`` to ``app``."""
    app.command("serve")(serve)
