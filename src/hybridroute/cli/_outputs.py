"""What the commands that write an output directory check first, in the command line's words.

The library's savers (:func:`hybridroute.router.save_router`, ``classifier.save``) refuse
a non-empty directory and name their Python parameter (``overwrite=True``); a command
checks before doing any work and names its own options (``--out``, ``--force``).
"""

from __future__ import annotations

from pathlib import Path

from ..exceptions import UserInputError

__all__ = ["REFIT_ON_THE_COMMAND_LINE", "refuse_existing_output"]

#: How to fit a policy bound to a model, from the command line.
REFIT_ON_THE_COMMAND_LINE = "`hybridroute calibrate --model DIR`"


def refuse_existing_output(path: Path, *, force: bool, option: str = "--out") -> None:
    """Refuse ``path`` unless it is absent, an empty directory, or ``--force`` is given.

    Raises
    ------
    UserInputError
        Naming ``option`` and ``path``: a file is there, or a directory that is not empty
        (without ``--force``).
    """
    if not path.exists():
        return
    if not path.is_dir():
        raise UserInputError(f"{option} {path}: exists and is not a directory")
    if not force and any(path.iterdir()):
        raise UserInputError(
            f"{option} {path}: exists and is not empty; choose a new directory, or pass "
            "--force to replace it"
        )
