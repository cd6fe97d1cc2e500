"""What every command that writes checks first, in the command line's words.

One rule for every path a command writes (``--out``, ``--report``, ``--rejects``, ``--json
FILE``, ``--cache-dir``...): it is checked before any work is done, and a failure while
writing is one line naming the option and the path, exit 2, never a traceback.

* :func:`check_output` -- before the work: a file's directory must exist and take new
  files; a directory is created with the missing directories above it; a parent that is a
  file, a symlink loop, a name too long, ``/proc``, a directory where a file goes (or the
  reverse) are refused (:func:`hybridroute._outpaths.output_problem`).
* :func:`output_errors` -- around the write: an :class:`OSError` becomes a
  :class:`~hybridroute.exceptions.UserInputError` naming the option and the path.

The library's savers (:func:`hybridroute.router.save_router`, ``classifier.save``) refuse
a non-empty directory and name their Python parameter (``overwrite=True``); a command
checks before doing any work and names its own options (``--out``, ``--force``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .._outpaths import os_reason, output_problem
from ..exceptions import UserInputError

__all__ = [
    "REFIT_ON_THE_COMMAND_LINE",
    "check_output",
    "output_errors",
    "refuse_existing_output",
]

#: How to fit a policy bound to a model, from the command line.
REFIT_ON_THE_COMMAND_LINE = "`hybridroute calibrate --model DIR`"


def refuse_existing_output(path: Path, *, force: bool | None, option: str = "--out") -> None:
    """Refuse ``path`` unless it is absent, an empty directory, or ``--force`` is given.

    ``force=None``: the command has no ``--force`` (the message does not offer it).

    Raises
    ------
    UserInputError
        Naming ``option`` and ``path``: a file is there, or a directory that is not empty
        (without ``--force``).
    """
    try:
        if not path.exists():
            return
        occupied = path.is_dir() and any(path.iterdir())
    except OSError:
        return  # check_output says what is wrong with the path
    if not path.is_dir():
        raise UserInputError(f"{option} {path}: exists and is not a directory")
    if not force and occupied:
        offer = "" if force is None else ", or pass --force to replace it"
        raise UserInputError(
            f"{option} {path}: exists and is not empty; choose a new directory{offer}"
        )


def _same_file(path: Path, other: str | os.PathLike[str]) -> bool:
    try:
        return os.path.exists(other) and os.path.samefile(path, other)
    except (OSError, ValueError):
        return False


def check_output(
    path: Path,
    option: str,
    *,
    kind: str = "file",
    new_dir: bool = False,
    force: bool | None = None,
    inputs: Sequence[str | os.PathLike[str] | None] = (),
) -> None:
    """Refuse ``path`` before any work when the command could not write it there.

    Parameters
    ----------
    path : Path
        What the command will write.
    option : str
        The option that named it (``--out``); every message starts with it and the path.
    kind : {"file", "dir"}
        A file goes into an existing directory (an existing regular file is replaced); a
        directory is created with the missing directories above it.
    new_dir : bool
        ``kind="dir"`` only: the directory must be absent or empty, or ``force`` given
        (a saved model, a router bundle). Otherwise an existing directory is written into
        (a report, a cache).
    force : bool, optional
        With ``new_dir``: whether ``--force`` was given (``None``: the command has none).
    inputs : sequence of path-like
        Files the command reads (the log, the input): the output may not be one of them.

    Raises
    ------
    UserInputError
        ``"{option} {path}: {reason}"``.
    """
    if kind == "dir" and new_dir:
        refuse_existing_output(path, force=force, option=option)
    problem = output_problem(path, kind=kind, parents=kind == "dir")
    if problem is not None:
        raise UserInputError(f"{option} {path}: {problem}")
    if kind == "file":
        for other in inputs:
            if other is not None and _same_file(path, other):
                raise UserInputError(
                    f"{option} {path}: is also an input or the log; give another file"
                )


@contextmanager
def output_errors(path: Path | str, option: str) -> Iterator[None]:
    """Turn an :class:`OSError` raised inside the block into one line naming the output.

    For what no early check sees: the disk filling up, a directory removed half-way, a
    temporary file name over the limit.
    """
    try:
        yield
    except OSError as exc:
        inner = exc.filename
        where = ""
        if inner is not None and os.fspath(inner) != os.fspath(path):
            where = f" {os.fsdecode(inner)}"
        raise UserInputError(f"{option} {path}: cannot write{where} ({os_reason(exc)})") from None
