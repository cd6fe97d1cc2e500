"""The HTTP/1.1 protocol ``hybridroute serve`` runs uvicorn with: uvicorn's own, plus a
deadline on request headers and a cap on their size.

uvicorn bounds neither: a connection that sends a request's headers a byte every few
seconds is held open for ever (its keep-alive timer is cancelled by every byte that
arrives, and none is armed before the first request), and with httptools (uvicorn's
choice when it is installed) the header section may grow without limit. Here:

* a connection must deliver a request's complete headers within ``header_timeout_s`` of
  opening, and of each answer when it is kept alive; otherwise it gets a 408 (when part
  of a request arrived) and is closed. Once the headers are in, the app bounds the body
  (``body_timeout_s``, see :class:`hybridroute.service._app._Guard`);
* the request line and headers may hold at most :data:`MAX_HEADER_BYTES` (431 and closed
  beyond; h11, uvicorn's other parser, refuses beyond 16 KiB by itself).

The deadline is the ``header_timeout_s`` of the :class:`~hybridroute.service.ServiceConfig`
of the app served (found through uvicorn's wrappers), :data:`DEFAULT_HEADER_TIMEOUT_S`
for another app. Use it with any uvicorn server: ``uvicorn.run(app, http=HttpProtocol)``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from ._config import DEFAULT_HEADER_TIMEOUT_S

try:  # the parser uvicorn's "auto" protocol picks
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base

    _ParserError: type[Exception] = httptools.HttpParserError
except ImportError:  # pragma: no cover - h11 only
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

    _ParserError = ValueError

__all__ = ["MAX_HEADER_BYTES", "HttpProtocol", "header_timeout_of"]

logger = logging.getLogger("hybridroute.service")

#: Most bytes of one request's line and headers (names and values).
MAX_HEADER_BYTES = 64 * 1024


def header_timeout_of(app: Any) -> float:
    """The ``header_timeout_s`` of the hybridroute app inside uvicorn's ``app`` wrappers."""
    for _ in range(16):
        state = getattr(getattr(app, "state", None), "hybridroute", None)
        if state is not None:
            return float(state.config.header_timeout_s)
        app = getattr(app, "app", None)
        if app is None:
            break
    return DEFAULT_HEADER_TIMEOUT_S


def _answer(status: int, reason: str, message: str) -> bytes:
    code = "timeout" if status == 408 else "too_large"
    doc = {"error": {"code": code, "field": None, "message": message}}
    body = json.dumps(doc, separators=(",", ":")).encode("ascii")
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii") + body


class HttpProtocol(_Base):
    """uvicorn's HTTP/1.1 protocol with a header deadline and a header size cap."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hr_timeout = header_timeout_of(self.app)
        self._hr_timer: asyncio.TimerHandle | None = None
        self._hr_cycle: Any = None
        self._hr_partial = False
        self._hr_header_bytes = 0
        self._hr_too_large = False

    # ------------------------------------------------------------------ the deadline
    def _hr_arm(self) -> None:
        self._hr_disarm()
        if self.transport is None or self.transport.is_closing():
            return
        self._hr_cycle = self.cycle
        self._hr_partial = False
        self._hr_timer = self.loop.call_later(self._hr_timeout, self._hr_expire)

    def _hr_disarm(self) -> None:
        if self._hr_timer is not None:
            self._hr_timer.cancel()
            self._hr_timer = None

    def _hr_idle(self) -> bool:
        """No request is in progress (none yet, or the last one is answered)."""
        return self.cycle is None or self.cycle.response_complete

    def _hr_waiting(self) -> bool:
        """Whether the connection still owes the headers of a request since the deadline
        was armed (no request began since, none is in progress)."""
        return self.cycle is self._hr_cycle and self._hr_idle()

    def _hr_expire(self) -> None:
        self._hr_timer = None
        if not self._hr_waiting() or self.transport.is_closing():
            return  # a request's headers came in: the app bounds its body
        logger.debug(
            "closed a connection: no complete request headers within %g s (header_timeout_s)",
            self._hr_timeout,
        )
        if self._hr_partial:
            self.transport.write(
                _answer(
                    408,
                    "Request Timeout",
                    f"the request headers did not arrive within {self._hr_timeout:g} s "
                    "(header_timeout_s); the connection is closed",
                )
            )
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._hr_arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._hr_disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._hr_timer is not None:
            self._hr_partial = True
        super().data_received(data)
        if self._hr_timer is not None and not self._hr_waiting():
            self._hr_disarm()  # the headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._hr_idle():  # (a pipelined request may have started already)
            self._hr_arm()

    # ------------------------------------------------------------------ the size cap
    def on_message_begin(self) -> None:
        self._hr_header_bytes = 0
        super().on_message_begin()

    def _hr_count(self, n: int) -> None:
        self._hr_header_bytes += n
        if self._hr_header_bytes > MAX_HEADER_BYTES:
            self._hr_too_large = True
            # an exception in a parser callback stops the parser: uvicorn answers it
            # through send_400_response, which answers 431 instead (below)
            raise _ParserError("request headers too large")

    def on_url(self, url: bytes) -> None:
        self._hr_count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._hr_count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if not self._hr_too_large:
            super().send_400_response(msg)
            return
        self._hr_disarm()
        self.transport.write(
            _answer(
                431,
                "Request Header Fields Too Large",
                f"the request line and headers are over {MAX_HEADER_BYTES:,} bytes",
            )
        )
        self.transport.close()
