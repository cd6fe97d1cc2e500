"""The HTTP client of the routing service (``hybridroute serve``), over httpx.

::

    from hybridroute.client import RouterClient

    with RouterClient("http://127.0.0.1:8080") as client:
        result = client.route("where is my parcel", {"amount": 20}, request_id="t-1")
        result.decision.selected_destination, result.decision_id, result.duplicate
        # or a RouteRequest (hybridroute.contracts), one or a batch of them
        results = client.route_batch([RouteRequest(text="refund please", request_id="t-2")])

:class:`RouterClient` is synchronous (and safe to share between threads);
:class:`AsyncRouterClient` is the same over ``httpx.AsyncClient``. Every result carries the
:class:`~hybridroute.contracts.Decision` the service logged, rebuilt from the stored
record with its snapshot hash verified, its ``decision_id`` and whether the request id was
already logged (``duplicate``).

Retries (:class:`RetrySettings`) are made only when repeating the request cannot route an
item twice:

* ``GET`` requests (``health``, ``routers``) are always safe;
* a ``POST`` is safe only when it carries a request id -- every item of a batch -- because
  the service logs one decision per request id and router version and answers a repeat
  with the stored decision. A ``POST`` without one is sent once, whatever happens;
* they are retried on a connection error, a timeout, a connection the server dropped, and
  on 502 / 503 / 504, after ``backoff_s``, doubled each time, at most ``max_backoff_s``
  (a ``Retry-After`` of a few seconds is honoured within that bound).

A 4xx answer raises :class:`~hybridroute.exceptions.ServiceError` (a user mistake: status,
the server's code, the field it names and its message); anything else that keeps a
result from arriving raises :class:`~hybridroute.exceptions.ServiceUnavailableError`,
never an httpx exception. Error messages name the URL (without credentials), never the
request body.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ._retry_settings import RetrySettings as _RetrySettings
from .contracts import Decision, RouteRequest
from .exceptions import InputError, ServiceError, ServiceUnavailableError

__all__ = ["AsyncRouterClient", "RetrySettings", "RouteResult", "RouterClient"]

#: Answers that say "try again": the service (or a proxy before it) is not ready.
RETRY_STATUSES = frozenset({502, 503, 504})
#: Transport errors after which a safe request is sent again.
_RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
#: Longest server message quoted in an error, in characters.
_MAX_MESSAGE = 500


# The client's defaults: a local service answers fast, so two quick retries, no jitter.
_CLIENT_DEFAULTS: dict[str, Any] = {
    "max_transport_retries": 2,
    "backoff_initial": 0.05,
    "backoff_max": 1.0,
    "jitter": 0.0,
}
# The client's older keyword names for the shared fields.
_OLD_NAMES = {
    "retries": "max_transport_retries",
    "backoff_s": "backoff_initial",
    "max_backoff_s": "backoff_max",
}


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class RetrySettings(_RetrySettings):
    """How often, and how long apart, a safe request is sent again.

    The one retry-settings value of hybridroute (the LLM seam reads the same one,
    ``hybridroute.classifiers.RetrySettings``) with the client's defaults: two retries,
    0.05 s apart and doubled each time, at most 1 s, no jitter. The keywords ``retries``,
    ``backoff_s`` and ``max_backoff_s`` are the client's names for
    ``max_transport_retries``, ``backoff_initial`` and ``backoff_max`` (either spelling,
    not both).

    Attributes
    ----------
    retries : int, default 2
        Retries after the first attempt (``0``: none), at most 10.
    backoff_s : float, default 0.05
        The wait before the first retry; doubled before each next one.
    max_backoff_s : float, default 1.0
        The longest wait between two attempts (a ``Retry-After`` header included).
    """

    def __init__(self, **settings: Any) -> None:
        values = dict(_CLIENT_DEFAULTS)
        for name, value in settings.items():
            field = _OLD_NAMES.get(name, name)
            if field != name and field in settings:
                raise TypeError(f"give {name} or {field}, not both")
            values[field] = value
        retries = values["max_transport_retries"]
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise TypeError(f"retries must be an integer, got {retries!r}")
        if not 0 <= retries <= 10:
            raise ValueError(f"retries must be between 0 and 10, got {retries}")
        _RetrySettings.__init__(self, **values)

    @property
    def retries(self) -> int:
        """Retries after the first attempt (``max_transport_retries``)."""
        return self.max_transport_retries

    @property
    def backoff_s(self) -> float:
        """The wait before the first retry (``backoff_initial``)."""
        return self.backoff_initial

    @property
    def max_backoff_s(self) -> float:
        """The longest wait between two attempts (``backoff_max``)."""
        return self.backoff_max

    def wait(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        Parameters
        ----------
        retry : int
            Which retry this is (1 for the first).
        retry_after : str, optional
            The answer's ``Retry-After`` header (seconds), honoured up to
            :attr:`max_backoff_s`; an HTTP date or a non-number keeps the backoff.
        """
        try:
            asked: float | None = float(retry_after) if retry_after is not None else None
        except ValueError:  # an HTTP date: keep the backoff
            asked = None
        if asked is not None and not math.isfinite(asked):
            asked = None
        return min(self.delay(retry, retry_after=asked), self.backoff_max)


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteResult:
    """One routed item, as the service logged it.

    Attributes
    ----------
    decision : Decision
        The decision rebuilt from the stored (redacted) record; its snapshot hash is
        verified (a redacted record carries the hash of its redacted snapshot).
    decision_id : str
        The id the log gave the decision when it was first logged.
    duplicate : bool
        ``True`` when the request id was already logged for that router version: this is
        the stored decision, and no new row was written.
    """

    decision: Decision
    decision_id: str
    duplicate: bool


# --------------------------------------------------------------------------- the shared core


def _shown_url(url: httpx.URL) -> str:
    """``url`` without user name or password (for error messages)."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def _encode(body: Mapping[str, Any]) -> bytes:
    """The request body as strict JSON (no NaN / Infinity, JSON types only)."""
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise InputError(f"the request is not valid JSON ({exc})") from None
    except TypeError as exc:
        raise InputError(f"the request holds a value JSON cannot carry ({exc})") from None


def _item(
    text: str | RouteRequest | None,
    facts: Mapping[str, Any] | None,
    request_id: str | None,
    evidence: Mapping[str, Any] | None,
) -> dict[str, Any]:
    if isinstance(text, RouteRequest):
        if facts is not None or request_id is not None or evidence is not None:
            raise TypeError(
                "a RouteRequest holds its own facts, request id and evidence; pass them in it"
            )
        return text.to_dict()
    item: dict[str, Any] = {"text": text, "facts": dict(facts or {})}
    if request_id is not None:
        item["request_id"] = request_id
    if evidence is not None:
        item["evidence"] = dict(evidence)
    return item


def _batch_items(items: Iterable[RouteRequest | Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(items):
        if isinstance(item, RouteRequest):
            out.append(item.to_dict())
        elif isinstance(item, Mapping):
            out.append(dict(item))
        else:
            raise InputError(
                f"items[{i}] must be a RouteRequest or a mapping, got {type(item).__name__}"
            )
    return out


class _Core:
    """What both clients share: the URL, the retry rules, answers turned into results."""

    def __init__(self, base_url: str, timeout: float, retry: RetrySettings) -> None:
        if not isinstance(base_url, str):
            raise TypeError(f"base_url must be a string, got {type(base_url).__name__}")
        try:
            url = httpx.URL(base_url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"base_url is not a URL ({exc})") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.base_url = url
        self.timeout = float(timeout)
        self.retry = retry

    def url(self, path: str) -> str:
        return _shown_url(self.base_url.join(path))

    def after_error(self, exc: Exception, path: str, attempt: int, safe: bool) -> float:
        """The wait before the next attempt after a transport error, or raise."""
        retryable = isinstance(exc, _RETRY_ERRORS)
        if safe and retryable and attempt <= self.retry.retries:
            return self.retry.wait(attempt)
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        tries = f" after {attempt} attempts" if attempt > 1 else ""
        note = "" if safe or not retryable else " (not retried: the request has no request id)"
        raise ServiceUnavailableError(
            f"{self.url(path)} {kind}{tries} ({why}){note}", attempts=attempt
        ) from None

    def after_response(
        self, response: httpx.Response, path: str, attempt: int, safe: bool
    ) -> tuple[Any, float | None]:
        """``(payload, None)`` for a 2xx answer, ``(None, wait)`` to retry, or raise."""
        status = response.status_code
        if 200 <= status < 300:
            try:
                return json.loads(response.content), None
            except ValueError:
                raise ServiceUnavailableError(
                    f"{self.url(path)} answered {status} with something that is not JSON",
                    status=status,
                    attempts=attempt,
                ) from None
        if status in RETRY_STATUSES and safe and attempt <= self.retry.retries:
            return None, self.retry.wait(attempt, response.headers.get("retry-after"))
        code, field, message = self._error_of(response)
        if 400 <= status < 500:
            raise ServiceError(message, status=status, code=code, field=field)
        tries = f" after {attempt} attempts" if attempt > 1 else ""
        note = (
            " (not retried: the request has no request id)"
            if status in RETRY_STATUSES and not safe
            else ""
        )
        raise ServiceUnavailableError(
            f"{self.url(path)} answered {status}{tries}: {message}{note}",
            status=status,
            attempts=attempt,
        )

    def _error_of(self, response: httpx.Response) -> tuple[str, str | None, str]:
        """``(code, field, message)`` of an error answer (the service's JSON, or the
        status when the answer is not the service's)."""
        status = response.status_code
        try:
            body = json.loads(response.content)
            err = body["error"]
            code, message = err["code"], err["message"]
            field = err.get("field")
            if not isinstance(code, str) or not isinstance(message, str):
                raise TypeError
            if field is not None and not isinstance(field, str):
                field = None
        except (ValueError, TypeError, KeyError):
            phrase = response.reason_phrase or "error"
            return f"http_{status}", None, f"HTTP {status} {phrase} (not an answer of the service)"
        return code, field, " ".join(message.split())[:_MAX_MESSAGE]

    def result(self, payload: Any, where: str) -> RouteResult:
        """A :class:`RouteResult` from one ``{"decision_id", "duplicate", "decision"}``."""
        try:
            decision_id, duplicate, record = (
                payload["decision_id"],
                payload["duplicate"],
                payload["decision"],
            )
            if not isinstance(decision_id, str) or not decision_id:
                raise ValueError("decision_id is not a non-empty string")
            if not isinstance(duplicate, bool):
                raise ValueError("duplicate is not true or false")
            decision = Decision.from_dict(record, verify_hash=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise ServiceUnavailableError(
                f"{where} answered with something that is not a routing result ({exc})",
                status=200,
            ) from None
        return RouteResult(decision=decision, decision_id=decision_id, duplicate=duplicate)

    def results(self, payload: Any, n: int, where: str) -> list[RouteResult]:
        rows = payload.get("results") if isinstance(payload, Mapping) else None
        if not isinstance(rows, list) or len(rows) != n:
            got = len(rows) if isinstance(rows, list) else "no"
            raise ServiceUnavailableError(
                f"{where} answered with {got} results for {n} items", status=200
            )
        return [self.result(row, where) for row in rows]

    def mapping(self, payload: Any, key: str | None, where: str) -> Any:
        value = payload.get(key) if key is not None and isinstance(payload, Mapping) else payload
        if key is not None and not isinstance(value, list):
            raise ServiceUnavailableError(f"{where} answered without a {key!r} list", status=200)
        if key is None and not isinstance(value, Mapping):
            raise ServiceUnavailableError(f"{where} answered with no JSON object", status=200)
        return value


def _settings(retries: int | _RetrySettings) -> RetrySettings:
    if isinstance(retries, RetrySettings):
        return retries
    if isinstance(retries, _RetrySettings):  # the shared value, e.g. the LLM seam's
        return RetrySettings(**retries.to_dict())
    return RetrySettings(retries=retries)


# --------------------------------------------------------------------------- the clients


class RouterClient:
    """A synchronous client of the routing service.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``"http://127.0.0.1:8080"``.
    timeout : float, default 10.0
        Seconds allowed for each attempt (connect, write, read).
    retries : int or RetrySettings, default 2
        Retries of a request that is safe to repeat (see the module docstring).
    transport : httpx.BaseTransport, optional
        The httpx transport (e.g. ``httpx.MockTransport`` in tests).

    Notes
    -----
    Nothing is sent when the client is made. Use it as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        retries: int | RetrySettings = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._core = _Core(base_url, timeout, _settings(retries))
        self._http = httpx.Client(
            base_url=self._core.base_url,
            timeout=self._core.timeout,
            transport=transport,
            headers={"accept": "application/json"},
        )

    @property
    def retry(self) -> RetrySettings:
        """The retry settings in force."""
        return self._core.retry

    def _call(self, method: str, path: str, body: Any = None, *, safe: bool) -> Any:
        content = None if body is None else _encode(body)
        headers = {} if content is None else {"content-type": "application/json"}
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(method, path, content=content, headers=headers)
            except httpx.HTTPError as exc:
                wait = self._core.after_error(exc, path, attempt, safe)
            else:
                payload, wait_or_none = self._core.after_response(response, path, attempt, safe)
                if wait_or_none is None:
                    return payload
                wait = wait_or_none
            time.sleep(wait)

    def route(
        self,
        text: str | RouteRequest | None,
        facts: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        *,
        evidence: Mapping[str, Any] | None = None,
    ) -> RouteResult:
        """Route one item (``POST /v1/route``).

        Parameters
        ----------
        text : str, RouteRequest or None
            The text to classify when no rule fires; or the whole item as a
            :class:`~hybridroute.contracts.RouteRequest` (then nothing else is given).
        facts : mapping or None, default None
            The item's facts, checked by the service against the router's schema.
        request_id : str, optional
            The item's request id: the service logs one decision per id and router
            version, so the request is retried when that is safe (see the module
            docstring), and a repeat returns the stored decision (``duplicate``).
        evidence : mapping, optional
            ``{"required_points": [...], "items": [...]}`` (see ``HybridRouter.route``).

        Returns
        -------
        RouteResult

        Raises
        ------
        ServiceError
            The service refused the item (bad fact, unknown field, too large...).
        ServiceUnavailableError
            No decision arrived (connection, timeout, 5xx, a malformed answer).
        TypeError
            A RouteRequest given with ``facts``, ``request_id`` or ``evidence`` beside it.
        """
        body = _item(text, facts, request_id, evidence)
        payload = self._call("POST", "/v1/route", body, safe="request_id" in body)
        return self._core.result(payload, self._core.url("/v1/route"))

    def route_batch(self, items: Iterable[RouteRequest | Mapping[str, Any]]) -> list[RouteResult]:
        """Route a batch (``POST /v1/route/batch``): all items or none.

        Parameters
        ----------
        items : iterable of RouteRequest or mappings
            :class:`~hybridroute.contracts.RouteRequest` values, or mappings
            ``{"text", "facts", "request_id"?, "evidence"?}`` (sent as they are: the
            service checks them). Retried only when every item has a request id.

        Returns
        -------
        list of RouteResult
            In the order of ``items``.

        Raises
        ------
        ServiceError
            The service refused the batch; ``field`` names the item (``items[3].facts``).
        ServiceUnavailableError
            No results arrived.
        """
        body = _batch_items(items)
        safe = bool(body) and all(item.get("request_id") is not None for item in body)
        payload = self._call("POST", "/v1/route/batch", {"items": body}, safe=safe)
        return self._core.results(payload, len(body), self._core.url("/v1/route/batch"))

    def routers(self) -> list[dict[str, Any]]:
        """The routers the service holds (``GET /v1/routers``): name, version, role,
        manifest hash and the policy's provenance summary, one dict each."""
        payload = self._call("GET", "/v1/routers", safe=True)
        return list(self._core.mapping(payload, "routers", self._core.url("/v1/routers")))

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"}`` while the service is up."""
        payload = self._call("GET", "/healthz", safe=True)
        return dict(self._core.mapping(payload, None, self._core.url("/healthz")))

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> RouterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RouterClient({_shown_url(self._core.base_url)!r})"


class AsyncRouterClient:
    """The asynchronous :class:`RouterClient` (``httpx.AsyncClient``); same rules.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``"http://127.0.0.1:8080"``.
    timeout : float, default 10.0
        Seconds allowed for each attempt.
    retries : int or RetrySettings, default 2
        Retries of a request that is safe to repeat.
    transport : httpx.AsyncBaseTransport, optional
        The httpx transport (e.g. ``httpx.MockTransport`` in tests).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        retries: int | RetrySettings = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._core = _Core(base_url, timeout, _settings(retries))
        self._http = httpx.AsyncClient(
            base_url=self._core.base_url,
            timeout=self._core.timeout,
            transport=transport,
            headers={"accept": "application/json"},
        )

    @property
    def retry(self) -> RetrySettings:
        """The retry settings in force."""
        return self._core.retry

    async def _call(self, method: str, path: str, body: Any = None, *, safe: bool) -> Any:
        content = None if body is None else _encode(body)
        headers = {} if content is None else {"content-type": "application/json"}
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(method, path, content=content, headers=headers)
            except httpx.HTTPError as exc:
                wait = self._core.after_error(exc, path, attempt, safe)
            else:
                payload, wait_or_none = self._core.after_response(response, path, attempt, safe)
                if wait_or_none is None:
                    return payload
                wait = wait_or_none
            await asyncio.sleep(wait)

    async def route(
        self,
        text: str | RouteRequest | None,
        facts: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        *,
        evidence: Mapping[str, Any] | None = None,
    ) -> RouteResult:
        """Route one item; see :meth:`RouterClient.route`.

        Parameters
        ----------
        text : str, RouteRequest or None
            The text to classify when no rule fires, or the whole item as a RouteRequest.
        facts : mapping or None, default None
            The item's facts.
        request_id : str, optional
            The item's request id (makes the request safe to retry).
        evidence : mapping, optional
            The item's evidence.
        """
        body = _item(text, facts, request_id, evidence)
        payload = await self._call("POST", "/v1/route", body, safe="request_id" in body)
        return self._core.result(payload, self._core.url("/v1/route"))

    async def route_batch(
        self, items: Iterable[RouteRequest | Mapping[str, Any]]
    ) -> list[RouteResult]:
        """Route a batch, all or nothing; see :meth:`RouterClient.route_batch`."""
        body = _batch_items(items)
        safe = bool(body) and all(item.get("request_id") is not None for item in body)
        payload = await self._call("POST", "/v1/route/batch", {"items": body}, safe=safe)
        return self._core.results(payload, len(body), self._core.url("/v1/route/batch"))

    async def routers(self) -> list[dict[str, Any]]:
        """The routers the service holds (``GET /v1/routers``)."""
        payload = await self._call("GET", "/v1/routers", safe=True)
        return list(self._core.mapping(payload, "routers", self._core.url("/v1/routers")))

    async def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        payload = await self._call("GET", "/healthz", safe=True)
        return dict(self._core.mapping(payload, None, self._core.url("/healthz")))

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRouterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncRouterClient({_shown_url(self._core.base_url)!r})"
