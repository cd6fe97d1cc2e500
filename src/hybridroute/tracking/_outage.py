"""Which exceptions mean "the tracking store is unreachable or failed", and which are bugs.

The tracker turns itself off (after one warning) only for a store that is down, slow,
refusing us, or broken; anything else -- a ``TypeError`` from our code, a value MLflow
refuses (``INVALID_PARAMETER_VALUE``), a run already active in the host -- propagates, so
a bug is never mistaken for an outage.

An outage is, anywhere in the chain MLflow wraps it in:

* an ``OSError``: a refused or reset connection, a timeout, DNS, a read-only or full
  disk under a local store (``requests``' exceptions are ``OSError`` too);
* a ``urllib3`` transport error (``MaxRetryError``, ``ProtocolError``);
* a database driver's ``OperationalError``, ``InterfaceError`` or ``InternalError``
  (PEP 249: errors of the database's operation, not of the program), a database file
  that is not a database, a connection-pool timeout, through SQLAlchemy or ``sqlite3``;
* an ``MlflowException`` whose error code says the server is unavailable, overloaded, or
  refuses our credentials (``TEMPORARILY_UNAVAILABLE``, ``DEADLINE_EXCEEDED``,
  ``REQUEST_LIMIT_EXCEEDED``, ``RESOURCE_EXHAUSTED``, ``PERMISSION_DENIED``,
  ``UNAUTHENTICATED``, ``CUSTOMER_UNAUTHORIZED``, ``ENDPOINT_NOT_FOUND``); MLflow's SQL
  store raises ``TEMPORARILY_UNAVAILABLE`` for a driver's ``OperationalError``;
* a ``RestException`` (the server's own error answer) with an HTTP status of 500 or more;
* MLflow's REST client reporting a non-JSON error answer ("API request to endpoint ...
  failed with error code N"): a proxy, gateway or non-MLflow server answered.

While the store is being set up (resolving the URI, finding or creating the experiment),
where the only inputs are the user's URI and experiment name, any ``MlflowException``, a
missing database driver (``ImportError``) and any SQLAlchemy error also count: the store
named cannot be used.
"""

from __future__ import annotations

import re
import sqlite3

__all__ = ["is_outage", "is_setup_failure"]

_UNAVAILABLE_CODES = frozenset(
    {
        "TEMPORARILY_UNAVAILABLE",
        "DEADLINE_EXCEEDED",
        "REQUEST_LIMIT_EXCEEDED",
        "RESOURCE_EXHAUSTED",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "CUSTOMER_UNAUTHORIZED",
        "ENDPOINT_NOT_FOUND",
    }
)
# mlflow/utils/rest_utils.py verify_rest_response, for an answer that is not MLflow's JSON
_NON_JSON_ANSWER = re.compile(r"API request to endpoint \S+ failed with error code \d+")
_MAX_CHAIN = 16


def _transport_or_database(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, (sqlite3.OperationalError, sqlite3.InterfaceError, sqlite3.InternalError)):
        return True
    if type(exc) is sqlite3.DatabaseError:  # "file is not a database", a corrupt file
        return True
    module = type(exc).__module__
    if module.startswith("urllib3"):
        import urllib3.exceptions

        return isinstance(exc, urllib3.exceptions.HTTPError)
    if module.startswith("sqlalchemy"):
        import sqlalchemy.exc as sa

        return type(exc) is sa.DatabaseError or isinstance(
            exc,
            (
                sa.OperationalError,
                sa.InterfaceError,
                sa.InternalError,
                sa.DisconnectionError,
                sa.TimeoutError,
            ),
        )
    return False


def _server_failure(exc: BaseException) -> bool:
    from mlflow.exceptions import MlflowException, RestException

    if not isinstance(exc, MlflowException):
        return False
    if exc.error_code in _UNAVAILABLE_CODES:
        return True
    if isinstance(exc, RestException):
        return int(exc.get_http_status_code()) >= 500
    return bool(_NON_JSON_ANSWER.match(exc.message))


def is_outage(exc: BaseException) -> bool:
    """True when ``exc``, raised by an MLflow call, means the store is down or failed.

    MLflow wraps transport and database errors in ``MlflowException`` (sometimes with
    ``raise ... from``, sometimes only as the context), so the chain under an
    ``MlflowException`` is followed; a non-MLflow exception is judged on its own, never
    on what it was raised while handling.
    """
    seen = 0
    link: BaseException | None = exc
    while link is not None and seen < _MAX_CHAIN:
        if _transport_or_database(link) or _server_failure(link):
            return True
        from mlflow.exceptions import MlflowException

        if not isinstance(link, MlflowException):
            return False
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
        seen += 1
    return False


def is_setup_failure(exc: BaseException) -> bool:
    """True when ``exc``, raised while a store is set up, means it cannot be used."""
    if is_outage(exc) or isinstance(exc, ImportError):
        return True
    from mlflow.exceptions import MlflowException

    if isinstance(exc, MlflowException):
        return True
    module = type(exc).__module__
    if module.startswith("sqlalchemy"):
        import sqlalchemy.exc as sa

        return isinstance(exc, sa.SQLAlchemyError)
    return False
