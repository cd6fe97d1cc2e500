"""``open_log(url)``: a decision log behind a URL (SQLite file or PostgreSQL database).

=====================================  ==============================================
``sqlite:///relative/path.sqlite``     SQLite, a path relative to the working directory
``sqlite:////abs/path.sqlite``         SQLite, an absolute path
a bare path (``str`` or path-like)     SQLite (:class:`~hybridroute.records.DecisionLog`)
``postgresql://user:pw@host:port/db``  PostgreSQL (also ``postgres://``); libpq query
                                       parameters are allowed (``?host=/tmp/sock&port=5433``)
=====================================  ==============================================

The password of a URL never appears in an error, a ``repr`` or a log line: every message
names the log by :func:`display_url`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..exceptions import ArtifactError, InputError

if TYPE_CHECKING:
    from ._audit import AuditSampler
    from ._log import DecisionLog
    from ._logbase import LogBase

__all__ = [
    "check_sqlite_file",
    "display_url",
    "is_url",
    "open_log",
    "read_log_rows",
    "sqlite_path",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
_POSTGRES = ("postgresql", "postgres")
_KNOWN = ("sqlite", *_POSTGRES)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def display_url(url: str | os.PathLike[str]) -> str:
    """``url`` with its password (in the user info or a ``password=`` parameter) replaced
    by ``***``; a path is returned as it is."""
    text = os.fspath(url)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    scheme = _SCHEME.match(text)
    if scheme is None:
        return text
    rest = text[scheme.end() :]
    cut = scheme.end() + len(rest) - len(rest.lstrip("/"))
    head, rest = text[:cut], text[cut:]
    # the user info ends at the last '@' before the query: a raw '/' or '@' in a password
    # must not let any of it through
    end = min([i for i in (rest.find("?"), rest.find("#")) if i >= 0] or [len(rest)])
    at = rest.rfind("@", 0, end)
    if at >= 0 and ":" in rest[:at]:
        user = rest[:at].split(":", 1)[0]
        rest = f"{user}:***{rest[at:]}"
    return head + _QUERY_PASSWORD.sub(r"\1***", rest)


def is_url(target: str | os.PathLike[str]) -> bool:
    """True when ``target`` is a URL, not a bare path: a string with ``scheme://``, or one
    that starts with ``sqlite:`` / ``postgresql:`` / ``postgres:`` (a malformed log URL)."""
    if not isinstance(target, str):
        return False
    scheme = _SCHEME.match(target)
    if scheme is None:
        return False
    return target[scheme.end() :].startswith("//") or scheme.group(1).lower() in _KNOWN


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:///`` URL (refused with an InputError if malformed)."""
    rest = url.split(":", 1)[1]
    if not rest.startswith("///") or "?" in rest or "#" in rest:
        raise InputError(
            "not a SQLite log URL: write sqlite:///relative/path.sqlite or "
            "sqlite:////absolute/path.sqlite (no host, no query)",
            path=display_url(url),
        )
    path = rest[3:]
    if not path.strip() or path.startswith(":memory:") or path.endswith("/"):
        raise InputError(
            "a SQLite log URL needs a file path (a log in memory would be lost)",
            path=display_url(url),
        )
    return path


def check_sqlite_file(path: str | os.PathLike[str], *, create: bool) -> None:
    """Refuse a SQLite log path that cannot be opened as asked, before SQLite tries.

    The one rule of log paths: a reader (``create=False``) needs an existing log; a writer
    creates the log *file* when it is missing, in a directory that must exist (a typo in a
    path never grows a tree of directories), and the directory must take new files (the
    log and its ``-wal`` / ``-shm`` files). Either way the path must be a regular file when
    it exists: a directory, a FIFO or a device is refused, as are a parent that is a file,
    a symlink loop or a name too long.

    Raises
    ------
    ArtifactError
        Naming the path and the reason.
    """
    from .._outpaths import output_problem

    shown = os.fsdecode(os.fspath(path))
    problem = None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            problem = "is a symbolic link to a path that does not exist"
        elif not create:
            problem = "no such decision log"
        else:
            problem = output_problem(path, kind="file", parents=False)
            if problem is not None and "does not exist" in problem:
                problem += " (a decision log is created only in an existing directory)"
    except OSError:
        problem = output_problem(path, kind="file", parents=False)  # says which part
    else:
        if stat.S_ISDIR(info.st_mode):
            problem = "is a directory, not a decision log"
        elif not stat.S_ISREG(info.st_mode):
            problem = "is not a regular file (a FIFO, a device or a socket), not a decision log"
    if problem is not None:
        raise ArtifactError(problem, path=shown)


def _sqlite(
    path: str | os.PathLike[str], create: bool, common: dict[str, Any], options: dict[str, Any]
) -> DecisionLog:
    from ._log import DecisionLog

    if not create:
        check_sqlite_file(path, create=False)  # DecisionLog checks a writer's path
    return DecisionLog(path, **common, **options)


def open_log(
    url: str | os.PathLike[str],
    *,
    sensitive_fields: Iterable[str] = (),
    salt: str | None = None,
    batch_size: int = 500,
    on_duplicate: str = "skip",
    create: bool = True,
    audit: AuditSampler | None = None,
    **options: Any,
) -> LogBase:
    """Open (creating when missing) the decision log at ``url``.

    A SQLite log is created as a file in an existing directory; a missing directory is an
    error, never created (:func:`check_sqlite_file`). A reader (``create=False``) refuses
    a log that does not exist.

    Parameters
    ----------
    url : str or path-like
        ``sqlite:///PATH``, ``postgresql://...`` / ``postgres://...`` (libpq URL, query
        parameters allowed), or a bare file path (SQLite).
    sensitive_fields : iterable of str
        Fact names stored as salted hashes.
    salt : str, optional
        The salt for those hashes (default: ``HYBRIDROUTE_LOG_SALT``); never stored.
    batch_size : int
        Decisions buffered by ``append`` before one transaction writes them.
    on_duplicate : {"skip", "error"}
        What ``append`` / ``flush`` do with a request id already logged.
    create : bool, default True
        Create the log when there is none (a SQLite file: in a directory that exists);
        ``False`` (for readers): an :class:`~hybridroute.exceptions.ArtifactError` instead.
    audit : AuditSampler, optional
        Audit sampling of the live auto-routed decisions this log writes (each records
        its inclusion probability ``audit_p`` and ``audited``); see
        :class:`~hybridroute.records.AuditSampler`. ``None``: no audit.
    **options
        Backend options: ``busy_timeout_s`` (SQLite), ``connect_timeout_s``,
        ``statement_timeout_s`` (default 60 s, ``None``: no limit) and ``call_timeout_s``
        (the client-side deadline of every call, default the statement timeout + 2 s)
        (PostgreSQL).

    Returns
    -------
    DecisionLog or PostgresLog
        Both have the same API: ``log_many``, ``log_groups``, ``lookup``,
        ``check_writable``, ``append`` / ``extend`` / ``flush``, ``rows``, ``records``, ``count``, ``to_jsonl``,
        ``add_outcomes``, ``outcomes``, ``pending_audits``, ...

    Raises
    ------
    InputError
        ``url`` is not a decision-log URL (the message names it without its password).
    ArtifactError
        The log cannot be opened: not a decision log, a newer schema, a server that does
        not answer, the PostgreSQL driver not installed; a SQLite path whose directory
        does not exist or takes no new files, or that is not a regular file.
    """
    common: dict[str, Any] = dict(
        sensitive_fields=sensitive_fields,
        salt=salt,
        batch_size=batch_size,
        on_duplicate=on_duplicate,
        audit=audit,
    )
    if not is_url(url):
        return _sqlite(url, create, common, options)
    text = str(url)
    scheme = text.split(":", 1)[0].lower()
    if scheme == "sqlite":
        return _sqlite(sqlite_path(text), create, common, options)
    if scheme in _POSTGRES:
        if not text.split(":", 1)[1].startswith("//"):
            raise InputError("not a PostgreSQL URL: write postgresql://...", path=display_url(text))
        from ._postgres import PostgresLog

        return PostgresLog(text, create=create, **common, **options)
    raise InputError(
        f"not a decision-log URL (scheme {scheme!r}): use sqlite:///PATH, "
        "postgresql://USER@HOST/DB, or a file path",
        path=display_url(text),
    )


def read_log_rows(url: str | os.PathLike[str]) -> list[tuple[int, str | None, str]]:
    """``(seq, item_id, record)`` of every decision in the log at ``url``, in log order,
    ``record`` as JSON text -- read without writing anything.

    A SQLite log (a path or ``sqlite:///PATH``) is opened read-only: never created,
    switched to WAL or migrated (see :func:`hybridroute.records._log.read_rows`); a
    PostgreSQL log is read through :func:`open_log` with ``create=False``. For readers
    outside the records package (Spark) that need the rows without the log's table layout.

    Raises
    ------
    ArtifactError
        No such log, not a decision log, or a schema newer than this hybridroute reads.
    InputError
        ``url`` is not a decision-log URL.
    """
    text = os.fspath(url)
    scheme = text.split(":", 1)[0].lower() if isinstance(text, str) and is_url(text) else ""
    if scheme and scheme != "sqlite":  # PostgreSQL (open_log refuses any other URL)
        from ._logbase import dumps_record

        with open_log(text, create=False) as log:
            return [
                (int(row["seq"]), row["item_id"], dumps_record(row["record"])) for row in log.rows()
            ]
    path = sqlite_path(str(text)) if scheme == "sqlite" else url
    check_sqlite_file(path, create=False)
    from ._log import read_rows

    return read_rows(path)
