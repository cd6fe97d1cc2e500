"""What the service accepts: request bodies read, parsed and checked as the CLI checks them.

A body is read under a byte limit enforced while it arrives (a ``Content-Length`` over it
is refused before a byte is read, and so is a chunked body once it passes it), decoded as
strict UTF-8 and parsed by :func:`hybridroute._safeio.parse_json` -- duplicate keys, JSON
nested deeper than 64 levels, huge integers and ``NaN`` are refused as the command line
refuses them. An item's shape (its keys, the type of ``text`` and ``request_id``) is
checked here and the item becomes a :class:`~hybridroute.contracts.RouteRequest`; its
facts, text and evidence are checked by the router itself
(:meth:`~hybridroute.router.HybridRouter.check`), so the service accepts exactly what
the library accepts.

Every refusal is a :class:`RequestProblem`: an HTTP status, an error code, the field it
names (``facts.amount``, ``items[2].text``) and the library's own message, scrubbed of
credentials, with the value of a sensitive fact never shown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from .._csv import json_kind
from .._redact import scrub_text
from .._safeio import check_text, parse_json
from ..contracts import MAX_REQUEST_ID_CHARS, RouteRequest
from ..exceptions import FactsError, InputError, UserInputError

__all__ = [
    "ITEM_KEYS",
    "MAX_REQUEST_ID_CHARS",
    "RequestProblem",
    "check_batch",
    "check_item",
    "parse_body",
    "read_limited",
    "route_problem",
]

#: The keys of one item (``POST /v1/route`` body, or an element of a batch's ``items``).
ITEM_KEYS = ("evidence", "facts", "request_id", "text")
#: Longest field name and message echoed in an error answer, in characters (a field names
#: what the client sent -- an unknown key may be a megabyte long).
MAX_FIELD_CHARS = 200
MAX_MESSAGE_CHARS = 4000
_MASKED = "not a valid value (not shown: a sensitive fact)"


class RequestProblem(UserInputError):
    """A request the service refuses: its HTTP status, error code and field.

    Parameters
    ----------
    status : int
        400 (malformed JSON), 401 / 403 (admin), 403 (a cross-site browser request), 404,
        408 (the body or headers did not arrive in time), 413 (too large), 415 (a body not
        declared JSON), 422 (a field), 503 (the log is not writable).
    code : str
        ``invalid_input``, ``too_large``, ``not_found``, ``unauthorized``,
        ``admin_disabled``, ``forbidden_origin``, ``timeout`` or ``unavailable``.
    message : str
        What is wrong, in the command line's words (scrubbed of credentials, cut at
        4,000 characters).
    field : str, optional
        The field at fault (``facts.amount``, ``items[3].text``), scrubbed of
        credentials as the message is and cut at 200 characters: it may name a key the
        client sent.
    """

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        self.status = status
        self.code = code
        self.field = None if field is None else _echo(str(field), MAX_FIELD_CHARS)
        self.message = _echo(" ".join(str(message).split()), MAX_MESSAGE_CHARS)
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        """The JSON error answer: ``{"error": {"code", "field", "message"}}``."""
        return {"error": {"code": self.code, "field": self.field, "message": self.message}}


def _echo(text: str, limit: int) -> str:
    """``text`` as an answer may repeat it: credentials scrubbed first (a key cut in two
    would no longer look like one), then cut at ``limit`` characters."""
    text = scrub_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def invalid(message: str, field: str | None = None) -> RequestProblem:
    """A 422 ``invalid_input`` naming ``field``."""
    return RequestProblem(422, "invalid_input", message, field)


# --------------------------------------------------------------------------- the body


async def read_limited(
    headers: Mapping[str, str], chunks: AsyncIterator[bytes], limit: int
) -> bytes:
    """The request body, refused (413) as soon as it passes ``limit`` bytes.

    A ``Content-Length`` over the limit is refused before anything is read; the limit is
    then enforced on the bytes as they arrive, since a client may send more than it
    announced (or announce nothing, with a chunked body).
    """
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise RequestProblem(400, "invalid_input", "the Content-Length header is not a number")
        if int(declared) > limit:
            raise _too_large(limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        parts.append(chunk)
    return b"".join(parts)


def _too_large(limit: int) -> RequestProblem:
    return RequestProblem(
        413,
        "too_large",
        f"the request body is over the limit of {limit:,} bytes (max_body_bytes); split "
        "the batch or send less",
    )


def parse_body(data: bytes) -> dict[str, Any]:
    """The JSON object of a request body (400 for bytes that are not strict JSON)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestProblem(
            400, "invalid_input", f"request body: not UTF-8 text (byte {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise RequestProblem(400, "invalid_input", "request body: empty; send a JSON object")
    try:
        doc = parse_json(text, source="request body", what="JSON")
    except InputError as exc:
        raise RequestProblem(400, "invalid_input", str(exc)) from None
    if not isinstance(doc, dict):
        raise RequestProblem(
            422, "invalid_input", f"the request body must be a JSON object, got {json_kind(doc)}"
        )
    return doc


# --------------------------------------------------------------------------- items


def check_request_id(value: Any, field: str) -> str:
    """A request id: a non-empty string of valid text, at most 256 characters, that the
    credential scrubber leaves as it is.

    A request id is stored (the log's ``item_id``) and echoed (answers, error messages),
    so one that looks like a credential (``sk-proj-...``, ``token=...``, the value of a
    credential-like environment variable) is refused, without repeating it.
    """
    if not isinstance(value, str):
        raise invalid(f"request_id must be a string, got {json_kind(value)}", field)
    if not value.strip():
        raise invalid("request_id is empty", field)
    if len(value) > MAX_REQUEST_ID_CHARS:
        raise invalid(f"request_id is longer than {MAX_REQUEST_ID_CHARS} characters", field)
    try:
        check_text(value, what="request_id")
    except InputError as exc:
        raise invalid(exc.reason, field) from None
    if scrub_text(value) != value:
        raise invalid(
            "request_id looks like a credential (not shown); use an opaque id such as a "
            "UUID or a ticket number",
            field,
        )
    return value


def check_item(doc: Any, prefix: str = "") -> RouteRequest:
    """The :class:`~hybridroute.contracts.RouteRequest` of one item, its shape checked.

    ``prefix`` locates the item in its request (``"items[3]."`` in a batch): it leads the
    field named and the message. Facts or evidence that are not JSON objects are refused
    here; what they hold, and the text, are checked by the router (see
    :func:`route_problem`).
    """
    where = prefix.rstrip(".") or None
    lead = f"{where}: " if where else ""
    if not isinstance(doc, dict):
        what = where or "the request body"
        raise invalid(f"{what} must be a JSON object, got {json_kind(doc)}", where)
    unknown = sorted(set(doc) - set(ITEM_KEYS))
    if unknown:
        raise invalid(
            f"{lead}unknown key(s) {unknown}; an item holds {list(ITEM_KEYS)}",
            prefix + unknown[0],
        )
    text = doc.get("text")
    if text is not None and not isinstance(text, str):
        raise invalid(
            f"{lead}text must be a string or null, got {json_kind(text)}", prefix + "text"
        )
    request_id = None
    if doc.get("request_id") is not None:
        try:
            request_id = check_request_id(doc["request_id"], prefix + "request_id")
        except RequestProblem as exc:
            raise invalid(lead + exc.message, exc.field) from None
    facts = doc.get("facts")
    try:
        return RouteRequest(
            text=text,
            facts={} if facts is None else facts,
            evidence=doc.get("evidence"),
            request_id=request_id,
        )
    except UserInputError as exc:  # facts or evidence that are not objects
        raise route_problem(exc, prefix, frozenset()) from None


def check_batch(doc: Mapping[str, Any], max_batch: int) -> list[RouteRequest]:
    """The items of a batch body, each checked, all or nothing (the first problem refuses
    the batch); a request id repeated within the batch is refused."""
    unknown = sorted(set(doc) - {"items"})
    if unknown:
        raise invalid(f"unknown key(s) {unknown}; a batch holds ['items']", unknown[0])
    items = doc.get("items")
    if not isinstance(items, list):
        raise invalid(f"items must be a list of items, got {json_kind(items)}", "items")
    if len(items) > max_batch:
        raise RequestProblem(
            413,
            "too_large",
            f"the batch holds {len(items):,} items; the limit is {max_batch:,} (max_batch): "
            "split it",
            "items",
        )
    out = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(items):
        request = check_item(raw, f"items[{i}].")
        if request.request_id is not None:
            first = seen.setdefault(request.request_id, i)
            if first != i:
                raise invalid(
                    f"items[{i}]: duplicate request_id {request.request_id!r} (first at "
                    f"items[{first}])",
                    f"items[{i}].request_id",
                )
        out.append(request)
    return out


def route_problem(exc: UserInputError, prefix: str, sensitive: frozenset[str]) -> RequestProblem:
    """A refusal of the router (bad facts, text or evidence) as a 422 naming the field.

    The message is the library's (what ``hybridroute route`` prints), except that the
    value of a sensitive fact is never repeated.
    """
    where = prefix.rstrip(".")
    lead = f"{where}: " if where else ""
    message = str(exc)
    if isinstance(exc, FactsError):
        if exc.field is not None:
            if exc.field in sensitive:
                message = f"fact {exc.field!r}: {_MASKED}"
            return invalid(lead + message, f"{prefix}facts.{exc.field}")
        part = "evidence" if message.startswith("facts: evidence") else "facts"
        return invalid(lead + message, prefix + part)
    if isinstance(exc, InputError):
        part = "evidence" if exc.reason.startswith("evidence") else "text"
        return invalid(lead + message, prefix + part)
    return invalid(lead + message, where or None)
