"""The Typer application and the one place where errors become exit codes.

Command modules are imported here to register their commands; each keeps its heavy
imports (pandas, scikit-learn, litellm, mlflow...) inside the command functions so that
``hybridroute --help`` stays fast.

Exit codes: 0 success, 1 a failure that is not the user's (a bug, a crashed service),
2 a user mistake (bad facts, bad rules file, bad dataset row, bad artifact, usage error,
a path that cannot be read or written), each with one line on stderr and no traceback.
Commands check the paths they write before any work (``cli/_outputs.py``); an OSError
naming a file that still reaches this level is printed as one line naming the file.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click
import typer

from .. import __version__
from ..exceptions import UserInputError

app = typer.Typer(
    name="hybridroute",
    help="Rule-plus-model hybrid routing: rules, intent classifiers, fitted thresholds, "
    "auditable decision records.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# One module per command or command group; each defines ``register(app)``.
_COMMAND_MODULES = (
    "_route",
    "_datasets",
    "_train",
    "_standin",
    "_llm_server",
    "_calibrate",
    "_router",
    "_records",
    "_outcomes",
    "_evaluate",
    "_experiment",
    "_spark",
    "_bench",
    "_demo",
    "_serve",
    "_promote",
    "_rules",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hybridroute {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Rule-plus-model hybrid routing."""


for _name in _COMMAND_MODULES:
    importlib.import_module(f"{__package__}.{_name}").register(app)


def _error_line(message: object) -> str:
    """One scrubbed line: an error may quote the value it refuses, which may be a key."""
    from .._redact import scrub_text

    return "error: " + scrub_text(" ".join(str(message).split()))


def _os_error_line(exc: OSError) -> str | None:
    """``PATH: reason`` for an OSError about a file (``None`` when it names none)."""
    import os

    from .._outpaths import os_reason

    if exc.filename is None:
        return None
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(os.fsdecode(n) if isinstance(n, bytes) else str(n) for n in names)
    return f"{where}: {os_reason(exc)}"


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as one line on stderr and return the Exit to raise."""
    typer.echo(_error_line(message), err=True)
    return typer.Exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybridroute`` console script."""
    command = typer.main.get_command(app)
    try:
        code = command.main(
            args=list(argv) if argv is not None else None,
            prog_name="hybridroute",
            standalone_mode=False,
        )
    except UserInputError as exc:
        typer.echo(_error_line(exc), err=True)
        return 2
    except (click.exceptions.Exit, typer.Exit) as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except (click.exceptions.Abort, typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        return 130
    except OSError as exc:
        # the last resort for a path no command checked: one line naming it (an OSError
        # without a file name says nothing a person can act on, so it stays a traceback)
        line = _os_error_line(exc)
        if line is None:
            raise
        typer.echo(_error_line(line), err=True)
        return 2
    except Exception as exc:
        # Usage errors: click's own, or the copy of click that typer vendors.
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(exit_code, int):
            exc.show()
            return int(exit_code)
        raise
    # standalone_mode=False: click returns the code of a typer.Exit(n) instead of raising it
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
