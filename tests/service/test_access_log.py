"""The access log: each record rewritten once (no query string, no credential).

:class:`~hybridroute.service._edges.AccessLogFilter` sits on the ``uvicorn.access``
logger and on the access handler of :func:`~hybridroute.service._server.log_config`; the
second to see a record lets it pass as the first wrote it, and the served logging
configuration prints what the filter wrote.
"""

from __future__ import annotations

import io
import logging
import logging.config
import sys
from collections.abc import Callable, Iterator

import pytest

from hybridroute.service._edges import AccessLogFilter, install_access_log_filter

pytestmark = pytest.mark.service

KEY = "sk-proj-" + "Ab1" * 8  # shaped like a provider key: the scrubber knows it
FORMAT = '%s - "%s %s HTTP/%s" %d'  # uvicorn's access-log message


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, message, args, None)


# --------------------------------------------------------------------------- the filter


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/v1/route", "/v1/route"),
        ("/x?token=abc", "/x?[query not logged]"),
        (f"/healthz?api_key={KEY}", "/healthz?[query not logged]"),
        (f"/v1/{KEY}", "/v1/[REDACTED]"),
        ("/v1/api_key%3Dsecretvalue123", "/v1/api_key%3D[REDACTED]"),
        ("/" + "a" * 300 + "?q=1", "/" + "a" * 198 + "…?[query not logged]"),
    ],
)
@pytest.mark.parametrize("logger_first", [True, False])
def test_the_filter_rewrites_a_record_once(path, shown, logger_first):
    filters = [AccessLogFilter(), AccessLogFilter()]  # the logger's and the handler's
    calls: list[str] = []

    def counted(scrub: Callable[[str], str]) -> Callable[[str], str]:
        def scrub_counted(text: str) -> str:
            calls.append(text)
            return scrub(text)

        return scrub_counted

    for f in filters:
        f._scrub = counted(f._scrub)
    record = _record(FORMAT, "127.0.0.1:5555", "POST", path, "1.1", 200)
    for f in filters if logger_first else filters[::-1]:
        assert f.filter(record)
    assert record.getMessage() == f'127.0.0.1:5555 - "POST {shown} HTTP/1.1" 200'
    assert len(calls) == 2  # the method and the path, once
    # arguments replaced after the rewrite are rewritten again
    record.args = ("127.0.0.1:5555", "GET", path, "1.1", 404)
    assert filters[0].filter(record)
    assert record.getMessage() == f'127.0.0.1:5555 - "GET {shown} HTTP/1.1" 404'


@pytest.fixture
def uvicorn_logging() -> Iterator[None]:
    """Put back the uvicorn and hybridroute loggers as they were after the test."""
    names = ("uvicorn", "uvicorn.access", "uvicorn.error", "hybridroute")
    saved = {}
    for name in names:
        logger = logging.getLogger(name)
        saved[name] = (logger.handlers[:], logger.filters[:], logger.level, logger.propagate)
    try:
        yield
    finally:
        for name, (handlers, filters, level, propagate) in saved.items():
            logger = logging.getLogger(name)
            for handler in logger.handlers:
                if handler not in handlers:
                    handler.close()
            logger.handlers[:] = handlers
            logger.filters[:] = filters
            logger.setLevel(level)
            logger.propagate = propagate


def test_the_served_logging_config_writes_the_access_log_scrubbed(monkeypatch, uvicorn_logging):
    from hybridroute.service._server import log_config

    # importing litellm (an LLM test in the same process) puts litellm's own redaction
    # filters on uvicorn.access, which write its marker first: this checks ours alone
    logging.getLogger("uvicorn.access").filters.clear()
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)  # the config's ext://sys.stdout
    logging.config.dictConfig(log_config("info"))
    install_access_log_filter()  # as create_app does
    access = logging.getLogger("uvicorn.access")
    [handler] = access.handlers
    assert handler.stream is out  # type: ignore[attr-defined]
    access.info(FORMAT, "127.0.0.1:5555", "GET", "/x?token=abc", "1.1", 200)
    access.info(FORMAT, "127.0.0.1:5555", "POST", f"/v1/route/{KEY}", "1.1", 404)
    handler.flush()
    assert out.getvalue() == (
        'INFO:     127.0.0.1:5555 - "GET /x?[query not logged] HTTP/1.1" 200 OK\n'
        'INFO:     127.0.0.1:5555 - "POST /v1/route/[REDACTED] HTTP/1.1" 404 Not Found\n'
    )
