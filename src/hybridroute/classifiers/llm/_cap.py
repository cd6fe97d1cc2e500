"""The response byte limit: an httpx hook that bounds every body the seam receives.

A hostile or broken endpoint must not make the process receive, hold and parse an
unbounded body. The seam owns the HTTP clients its requests go through and gives them an
httpx **response event hook** (:func:`capping_hook`): httpx calls it once the status and
headers are in and before a byte of the body is read, and the hook replaces the body
stream with one that counts bytes *while they arrive* (:class:`CappedBody`). Past
``max_response_bytes`` the read stops with :class:`ResponseBodyRefused`; the connection
is closed and the rest is never received. A declared ``Content-Length`` over the limit
is refused before reading. Compressed bodies are decoded here, under the same limit on
the decoded bytes (a 30 KB gzip "bomb" that inflates to 30 MB is refused at the limit);
only ``gzip`` and ``deflate`` are asked for (:func:`ask_for_decodable`), and a body in
any other coding (``br``, ``zstd``, stacked codings) is refused, since its decoded size
could not be bounded. The cap sits in front of every parser: the OpenAI SDK, litellm and
instructor only ever see a body within the limit. An endless or trickling body ends at
the limit or at the request timeout, whichever comes first.

A refused body is a :class:`~._retry.TransportFailure` of kind ``response_too_large``
(``bad_response`` for an unboundable coding), **not retried** -- the same endpoint would
send the same body -- so the item abstains with ``provider_error`` after one request
(:func:`~._errors.map_exception` finds the refusal with :func:`refusal_in`).

This module needs httpx only; which providers' requests get the hook is the clients'
business (:mod:`._clients`).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from ._options import DEFAULT_MAX_RESPONSE_BYTES

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "CappedBody",
    "ResponseBodyRefused",
    "ask_for_decodable",
    "capping_hook",
    "refusal_in",
]

#: The content codings the seam asks for, and the only ones it accepts: it decodes them
#: itself, under the limit.
ACCEPT_ENCODING = "gzip, deflate"
_DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})


class ResponseBodyRefused(Exception):
    """A response body the seam refused while receiving it; it never leaves the seam.

    It is raised inside httpx's read of the body, so it reaches
    :func:`~._errors.map_exception` wrapped by the OpenAI SDK and by litellm; it is
    found on the exception chain (:func:`refusal_in`).

    Attributes
    ----------
    kind : str
        The :class:`~._retry.TransportFailure` kind: ``response_too_large``, or ``bad_response``
        for a content coding whose decoded size cannot be bounded.
    limit : int
        The byte limit in force.
    """

    def __init__(self, message: str, *, limit: int, kind: str = "response_too_large") -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit


def _too_large(limit: int, what: str) -> ResponseBodyRefused:
    return ResponseBodyRefused(
        f"response body {what} more than the limit of {limit:,} bytes (max_response_bytes); "
        "the rest was not read",
        limit=limit,
    )


class _Inflater:
    """zlib / gzip decoding whose output never exceeds a budget (no decompression bomb)."""

    def __init__(self, encoding: str) -> None:
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip, by its header
        # Some servers send "deflate" without the zlib wrapper: until the first output,
        # the input is kept so that it can be decoded again as raw deflate.
        self._pending: bytes | None = b"" if encoding == "deflate" else None

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode ``data``; the result is longer than ``budget`` only when over it."""
        try:
            out = self._obj.decompress(data, budget + 1)
        except zlib.error as exc:
            if self._pending is None:
                raise httpx.DecodingError(
                    f"response body is not valid compressed data: {exc}"
                ) from None
            data, self._pending = self._pending + data, None
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data, budget)
        if self._pending is not None:
            self._pending = None if out else self._pending + data
        return out

    def finish(self) -> bytes:
        """What the decoder still holds (input was consumed in full: little or nothing)."""
        try:
            return self._obj.flush()
        except zlib.error as exc:  # pragma: no cover - flush after decompress rarely fails
            raise httpx.DecodingError(
                f"response body is not valid compressed data: {exc}"
            ) from None


class CappedBody(httpx.AsyncByteStream):
    """A response body stream that stops once more than ``limit`` bytes arrive.

    With ``encoding`` (``gzip`` / ``deflate``) the body is decoded here and the limit
    holds for the received and for the decoded bytes; at most ``limit + 1`` decoded bytes
    exist at any time beyond what was already passed on.
    """

    def __init__(
        self, inner: httpx.AsyncByteStream, *, limit: int, encoding: str | None = None
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = self._limit
        inflater = _Inflater(self._encoding) if self._encoding else None
        received = produced = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > limit:
                raise _too_large(limit, "received")
            if inflater is None:
                yield chunk
                continue
            out = inflater.feed(chunk, limit - produced)
            produced += len(out)
            if produced > limit:
                raise _too_large(limit, "decodes to")
            if out:
                yield out
        if inflater is not None:
            out = inflater.finish()
            if produced + len(out) > limit:
                raise _too_large(limit, "decodes to")
            if out:
                yield out

    async def aclose(self) -> None:
        await self._inner.aclose()


def capping_hook(limit: int) -> Callable[[httpx.Response], Awaitable[None]]:
    """An httpx ``response`` event hook that puts every body under ``limit`` bytes.

    httpx calls response hooks after the headers arrive and before the body is read
    (https://www.python-httpx.org/advanced/event-hooks/; hooks may modify the response).
    The hook refuses a declared ``Content-Length`` over the limit and a content coding it
    cannot decode within the limit, and replaces the body stream with a
    :class:`CappedBody`; a compressed body is decoded there (its ``Content-Encoding``
    header is removed so that httpx does not decode it again).
    """

    async def cap(response: httpx.Response) -> None:
        declared = response.headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise _too_large(limit, f"declared as {int(declared):,} bytes,")
        codings = [
            c.strip().lower()
            for c in response.headers.get_list("content-encoding", split_commas=True)
        ]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in _DECODABLE):
            raise ResponseBodyRefused(
                f"response body in content-encoding {', '.join(codings)!r}: only one of "
                f"{ACCEPT_ENCODING} can be decoded within the byte limit",
                limit=limit,
                kind="bad_response",
            )
        if codings:
            del response.headers["content-encoding"]
        response.stream = CappedBody(
            response.stream,  # type: ignore[arg-type]  # httpx's async body stream
            limit=limit,
            encoding=codings[0] if codings else None,
        )

    return cap


async def ask_for_decodable(request: httpx.Request) -> None:
    """Request hook: ask only for the codings :class:`CappedBody` decodes."""
    request.headers["Accept-Encoding"] = ACCEPT_ENCODING


def refusal_in(exc: BaseException) -> ResponseBodyRefused | None:
    """The :class:`ResponseBodyRefused` on ``exc``'s cause / context chain, if any."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ResponseBodyRefused):
            return current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None
