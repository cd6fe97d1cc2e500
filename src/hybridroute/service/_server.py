"""Running the service: uvicorn, with hybridroute's protocol and logging.

:func:`run` is what ``hybridroute serve`` calls once everything that can be refused has
been checked: it serves until the server stops, in one process (the app given) or in
``workers`` processes (uvicorn's multi-process mode: each worker builds its app from the
configuration in :data:`~hybridroute.service._worker.CONFIG_ENV`). Either way uvicorn runs
with :class:`~hybridroute.service._protocol.HttpProtocol`, which bounds the time and size
of request headers, and an access log that prints no query string and no credential. The
service is the only part of hybridroute that imports uvicorn (the command line calls
this function).
"""

from __future__ import annotations

import copy
import os
from typing import Any

from ._config import ServiceConfig

__all__ = ["log_config", "run", "settle_heap"]


#: Allocations (net) between two collections of the youngest generation; Python's
#: default is 700, which a request's short-lived dicts and lists reach several times over.
GC_YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Tune the garbage collector of a serving process, once its app is made.

    Everything made so far -- the routers with their vocabularies and weights, the app,
    the imported modules -- lives as long as the process, yet every full collection
    walked all of it: on the 2-core reference machine a single-item load at 32 clients
    saw p99 latencies of 90-125 ms from those pauses. :func:`gc.freeze` moves it out of
    the collector's sight (p99 20-30 ms in the same runs), and a higher threshold for the
    youngest generation (:data:`GC_YOUNG_THRESHOLD`) collects requests' garbage in fewer,
    larger passes. Only ``hybridroute serve`` calls this: the process is the service's
    own, whereas an app embedded elsewhere leaves its host's collector alone.
    """
    import gc

    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def log_config(level: str) -> dict[str, object]:
    """uvicorn's logging configuration, with hybridroute's loggers on its handler and the
    access log's records rewritten (no query string, no credential: see
    :class:`hybridroute.service._edges.AccessLogFilter`)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    loggers = config.setdefault("loggers", {})
    assert isinstance(loggers, dict)
    loggers["hybridroute"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    filters = config.setdefault("filters", {})
    assert isinstance(filters, dict)
    filters["hybridroute_access"] = {"()": "hybridroute.service._edges.AccessLogFilter"}
    handlers = config.get("handlers", {})
    assert isinstance(handlers, dict)
    for name in ("access",):
        if isinstance(handlers.get(name), dict):
            handlers[name]["filters"] = [*handlers[name].get("filters", []), "hybridroute_access"]
    return config


def run(
    config: ServiceConfig,
    *,
    host: str,
    port: int,
    app: Any = None,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Serve ``config`` on ``host:port`` with uvicorn until the server stops.

    Parameters
    ----------
    config : ServiceConfig
        What is served. With ``workers > 1`` it must turn the admin endpoints off (each
        worker holds its own routers).
    host : str
        The address to bind.
    port : int
        The port to listen on.
    app : ASGI app, optional
        The app of ``config`` when the caller already made it (one process); made here
        otherwise. Dropped with ``workers > 1``: each worker makes its own.
    workers : int, default 1
        Server processes.
    log_level : str, default "info"
        The server's log level (``critical``, ``error``, ``warning``, ``info``,
        ``debug``).
    access_log : bool, default True
        Log one line per request (no bodies, no query strings).
    """
    import uvicorn

    from ._protocol import HttpProtocol
    from ._worker import CONFIG_ENV, IMPORT_STRING

    common: dict[str, Any] = dict(
        host=host,
        port=port,
        http=HttpProtocol,
        log_config=log_config(log_level),
        log_level=log_level.lower(),
        access_log=access_log,
        server_header=False,
        proxy_headers=False,
    )
    if workers == 1:
        if app is None:
            from ._app import create_app

            app = create_app(config)
        settle_heap()
        uvicorn.run(app, **common)
        return
    del app
    os.environ[CONFIG_ENV] = config.to_json()
    uvicorn.run(IMPORT_STRING, factory=True, workers=workers, **common)
