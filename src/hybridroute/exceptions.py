"""The one exception hierarchy of hybridroute.

Every error the toolkit raises on purpose derives from :class:`HybridRouteError`.
Errors that are the *user's* to fix (a bad rules file, a malformed fact, a broken
dataset row) derive from :class:`UserInputError`; the command line turns those into a
one-line message and exit code 2, never a traceback. Errors carry the data that
locates the problem (file, row, column, rule, field) as attributes, not only in the
message.

::

    HybridRouteError
    ├── UserInputError                 user-fixable input; CLI exit code 2
    │   ├── UndeclaredValueError       destination / reason code / stage not declared
    │   ├── FactsError                 a fact does not match the declared schema (.field)
    │   ├── RuleSetError               an ordered rule set is inconsistent (.rule_id)
    │   ├── ConditionError             a rule condition cannot be parsed or evaluated
    │   │                              (message says where)
    │   ├── RulesFileError             a rules file is unsafe or malformed (.path, .rule_id)
    │   ├── DatasetError               a labelled set is malformed (.path, .row, .column)
    │   │   └── DatasetUnavailableError  a public set is neither cached nor reachable
    │   ├── ArtifactError              a saved model / policy / bundle is tampered,
    │   │                              incompatible or incomplete (.path)
    │   ├── DuplicateDecisionError     a decision log already holds a request id for that
    │   │   │                          router version (.path, .item_ids)
    │   │   └── RequestIdConflictError a request id already names another request (its
    │   │                              text, facts or evidence differ) (.positions)
    │   ├── InputError                 a file or text is unsafe to read: not a regular file,
    │   │                              over its byte limit, not UTF-8, duplicate keys, too
    │   │                              deep (.path, .line)
    │   ├── SpecError                  an experiment spec is malformed (.path, .field)
    │   └── ServiceError               the routing service refused a request: a 4xx answer
    │                                  (.status, .code, .field)
    ├── NotFittedError                 an estimator was used before ``fit``
    ├── ClassifierError                a classifier could not produce scores
    │   └── LLMError                   the LLM seam gave up (.attempts, .last_response, .usage)
    │       ├── LLMTransportError      transport budget spent (429 / 5xx / connection)
    │       ├── LLMTimeoutError        timeouts spent the transport budget
    │       └── LLMLabelError          repair budget spent: no valid label
    ├── TrackingError                  MLflow tracking failed (results are kept locally)
    └── ServiceUnavailableError        the routing service could not be reached or failed:
                                       connection, timeout, 5xx, a malformed answer
                                       (.status, .attempts)

Names are chosen not to clash with those of dependencies (no ``ValidationError``,
``APIError`` or ``RateLimitError`` here).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ArtifactError",
    "ClassifierError",
    "ConditionError",
    "DatasetError",
    "DatasetUnavailableError",
    "DuplicateDecisionError",
    "FactsError",
    "HybridRouteError",
    "InputError",
    "LLMError",
    "LLMLabelError",
    "LLMTimeoutError",
    "LLMTransportError",
    "NotFittedError",
    "RequestIdConflictError",
    "RuleSetError",
    "RulesFileError",
    "ServiceError",
    "ServiceUnavailableError",
    "SpecError",
    "TrackingError",
    "UndeclaredValueError",
    "UserInputError",
]


class HybridRouteError(Exception):
    """Base class of every error raised by hybridroute."""


class UserInputError(HybridRouteError):
    """An input the user can fix: a file, a fact, a dataset row, an artifact."""


class UndeclaredValueError(UserInputError, ValueError):
    """A destination, reason code or stage outside its declared finite set.

    Parameters
    ----------
    kind : str
        What was undeclared (``"destination"``, ``"reason code"``, ``"stage"``).
    value : object
        The value given.
    allowed : sequence of str
        The declared values (the message shows up to 20 of them).
    """

    def __init__(self, kind: str, value: object, allowed: tuple[str, ...] | list[str]) -> None:
        self.kind = kind
        self.value = value
        self.allowed = tuple(allowed)
        shown = ", ".join(sorted(self.allowed)[:20])
        more = "" if len(self.allowed) <= 20 else f", ... ({len(self.allowed)} in all)"
        super().__init__(f"undeclared {kind} {value!r}; declared: {shown}{more}")


class FactsError(UserInputError, ValueError):
    """A fact is missing, of the wrong type, or not declared in the facts schema."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        prefix = f"fact {field!r}: " if field is not None else "facts: "
        super().__init__(prefix + message)


class RuleSetError(UserInputError, ValueError):
    """An ordered rule set is inconsistent (names the offending rule)."""

    def __init__(self, message: str, *, rule_id: str | None = None) -> None:
        self.rule_id = rule_id
        prefix = f"rule {rule_id!r}: " if rule_id is not None else "rule set: "
        super().__init__(prefix + message)


class ConditionError(UserInputError, ValueError):
    """A rule condition cannot be parsed, refers to something undeclared, or cannot be
    evaluated on the facts given (the message says where, e.g. ``at position 7``).

    Raised by :func:`hybridroute.rules.compile_condition`; a rule set re-raises it as a
    :class:`RuleSetError` naming the rule (or, while routing, a :class:`FactsError`).
    """


class RulesFileError(UserInputError, ValueError):
    """A rules file is unsafe, too large, or malformed (names file and rule).

    Parameters
    ----------
    message : str
        What is wrong, without the location.
    path : str, optional
        The rules file.
    rule_id : str, optional
        The rule the problem is in.
    """

    def __init__(
        self, message: str, *, path: str | None = None, rule_id: str | None = None
    ) -> None:
        self.path = path
        self.rule_id = rule_id
        where = []
        if path is not None:
            where.append(str(path))
        if rule_id is not None:
            where.append(f"rule {rule_id!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class DatasetError(UserInputError, ValueError):
    """A labelled set is malformed (names file, row and column where known).

    Parameters
    ----------
    message : str
        What is wrong, without the location.
    path : str, optional
        The file (or dataset name).
    row : int, optional
        The 1-based data row number as a user sees it in the file (for CSV, the header is
        row 0; for JSONL, the first line is row 1).
    column : str, optional
        The column (or JSON key).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        self.path = path
        self.row = row
        self.column = column
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class DatasetUnavailableError(DatasetError):
    """A public labelled set is neither in the data directory, nor cached, nor reachable."""


class ArtifactError(UserInputError, ValueError):
    """A saved classifier, policy or router bundle is tampered, incompatible or incomplete."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        prefix = f"{path}: " if path is not None else ""
        super().__init__(prefix + message)


class InputError(UserInputError, ValueError):
    """A file or text is unsafe to read (names the source and line where known).

    Raised by the hardened readers: a path that is not a regular file, input over its byte
    limit, text that is not UTF-8 (or holds NUL / lone surrogates), JSON or YAML with
    duplicate keys, nesting too deep, huge integers or non-finite numbers. ``reason`` is
    the message without the location, for callers that re-raise it as their own type.

    Parameters
    ----------
    message : str
        What is wrong, without the location.
    path : str, optional
        The file or source read.
    line : int, optional
        The 1-based line the problem is on.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class SpecError(UserInputError, ValueError):
    """An experiment spec is malformed (names file and field).

    Parameters
    ----------
    message : str
        What is wrong, without the location.
    path : str, optional
        The spec (or prompt template) file.
    field : str, optional
        The field the problem is in.
    """

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None) -> None:
        self.path = path
        self.field = field
        where = [str(p) for p in (path,) if p is not None]
        if field is not None:
            where.append(f"field {field!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class NotFittedError(HybridRouteError, AttributeError):
    """An estimator (classifier, calibrator, threshold) was used before ``fit``."""


class ClassifierError(HybridRouteError):
    """A classifier could not produce scores for an input."""


class LLMError(ClassifierError):
    """The LLM seam gave up on one item.

    Parameters
    ----------
    message : str
        Why it gave up.
    attempts : int
        Requests made for this item.
    last_response : object
        The last raw answer or error seen, for diagnosis (never sent back to the model).
    usage : dict, optional
        Token counts accumulated over the attempts.

    Attributes
    ----------
    reason_code : str
        The abstention reason code (``provider_error``, ``timeout``, ``invalid_label``...).
    attempts, last_response, usage
        As given.
    """

    reason_code = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 0,
        last_response: Any = None,
        usage: dict[str, int] | None = None,
    ) -> None:
        self.attempts = attempts
        self.last_response = last_response
        self.usage = dict(usage or {})
        super().__init__(message)


class LLMTransportError(LLMError):
    """The transport retry budget was spent on 429s, 5xx answers or connection errors."""

    reason_code = "provider_error"


class LLMTimeoutError(LLMError):
    """The transport retry budget was spent on timeouts."""

    reason_code = "timeout"


class LLMLabelError(LLMError):
    """The repair budget was spent: the model never gave a label from the label set."""

    reason_code = "invalid_label"


class TrackingError(HybridRouteError):
    """MLflow tracking failed; the results it was given are kept locally."""


class DuplicateDecisionError(UserInputError, ValueError):
    """A decision log refused decisions whose request id it already holds for the same
    router and router version (``on_duplicate="error"``); ``item_ids`` lists them.

    Parameters
    ----------
    message : str
        What was refused.
    path : str, optional
        The decision log.
    item_ids : tuple of str
        The request ids already held.
    """

    def __init__(
        self, message: str, *, path: str | None = None, item_ids: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        self.item_ids = tuple(item_ids)
        prefix = f"{path}: " if path is not None else ""
        super().__init__(prefix + message)


class RequestIdConflictError(DuplicateDecisionError):
    """A request id the log already holds for that router version came with another
    request: its text, facts or evidence differ from those of the logged decision.

    A request id is an idempotency key bound to one request: the same id with the same
    request returns the logged decision, the same id with another request is refused and
    nothing of that request (or batch) is written. The service answers it with 409.

    Parameters
    ----------
    message : str
        What was refused (names the request ids).
    path : str, optional
        The decision log.
    item_ids : tuple of str
        The conflicting request ids.
    positions : tuple of int
        Their positions in the refused request (a batch's items), from 0.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        item_ids: tuple[str, ...] = (),
        positions: tuple[int, ...] = (),
    ) -> None:
        self.positions = tuple(positions)
        super().__init__(message, path=path, item_ids=item_ids)


class ServiceError(UserInputError, ValueError):
    """The routing service refused a request (a 4xx answer), in the server's words.

    Parameters
    ----------
    message : str
        The server's message (the words the command line uses for the same mistake).
    status : int
        The HTTP status (400, 413, 422, 401, 403, 404...).
    code : str
        The server's error code (``invalid_input``, ``too_large``, ``not_found``...), or
        ``http_<status>`` when the answer was not the service's JSON error.
    field : str, optional
        The field the server names (``facts.amount``, ``items[3].text``).
    """

    def __init__(self, message: str, *, status: int, code: str, field: str | None = None) -> None:
        self.status = status
        self.code = code
        self.field = field
        super().__init__(message)


class ServiceUnavailableError(HybridRouteError):
    """The routing service could not be reached, timed out, failed (5xx) or answered with
    something that is not its API's answer, after the retries that were safe to make.

    Parameters
    ----------
    message : str
        What went wrong (names the URL; never the request body).
    status : int, optional
        The HTTP status of the last answer, ``None`` when there was none.
    attempts : int
        Requests made.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        self.status = status
        self.attempts = attempts
        super().__init__(message)
