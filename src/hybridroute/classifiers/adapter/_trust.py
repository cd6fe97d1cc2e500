"""The allowlist of model code a saved adapter may make this process import or build.

A saved adapter never makes hybridroute run code the person loading it did not choose:

* a model saved **by reference** names an import path (``"package.module:attribute"``);
  it is imported only when that exact string is trusted;
* a scikit-learn model saved in **skops** format is rebuilt by skops, which constructs only
  the types it trusts by default (scikit-learn estimators, numpy and scipy containers,
  builtins); any other type it holds (a custom transformer, a function) must be trusted
  by its full name (``"package.module.Type"``).

What is trusted comes from this process: names passed to :func:`trust`, plus the
comma-separated names in the environment variable :data:`TRUSTED_CODE_ENV`
(``HYBRIDROUTE_TRUSTED_MODEL_CODE``, for ``hybridroute serve`` and other commands). Nothing
in a saved directory can add to it.
"""

from __future__ import annotations

import os
import re

__all__ = ["TRUSTED_CODE_ENV", "check_name", "is_trusted", "trust", "trusted"]

#: Environment variable holding trusted references and type names, comma-separated.
TRUSTED_CODE_ENV = "HYBRIDROUTE_TRUSTED_MODEL_CODE"

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
#: ``package.module:attribute`` (the attribute may be dotted: ``module:Class.factory``).
REFERENCE_RE = re.compile(rf"{_DOTTED}:{_DOTTED}")
#: ``package.module.Type``: a type name as skops writes it.
TYPE_NAME_RE = re.compile(rf"{_DOTTED}\.[A-Za-z_][A-Za-z0-9_]*")

_TRUSTED: set[str] = set()


def check_name(name: object) -> str:
    """``name`` if it is a reference (``pkg.mod:attr``) or a type name (``pkg.mod.Type``)."""
    if not isinstance(name, str) or not (
        REFERENCE_RE.fullmatch(name) or TYPE_NAME_RE.fullmatch(name)
    ):
        raise ValueError(
            "trusted model code is named 'package.module:attribute' (a model saved by "
            f"reference) or 'package.module.Type' (a type in a skops file), got {name!r}"
        )
    return name


def trust(*names: str) -> None:
    """Trust model code for this process: references and skops type names.

    Parameters
    ----------
    *names : str
        ``"package.module:attribute"`` -- a model saved by reference that loading may
        import -- or ``"package.module.Type"`` -- a type beyond skops's default trusted set
        that loading a skops-saved estimator may build.

    Raises
    ------
    ValueError
        A name of neither form.
    """
    checked = [check_name(n) for n in names]
    _TRUSTED.update(checked)


def trusted() -> frozenset[str]:
    """The names trusted now: those given to :func:`trust` and those in the environment.

    Raises
    ------
    ValueError
        :data:`TRUSTED_CODE_ENV` holds an entry of neither form.
    """
    from_env = [part.strip() for part in os.environ.get(TRUSTED_CODE_ENV, "").split(",")]
    return frozenset(_TRUSTED | {check_name(p) for p in from_env if p})


def is_trusted(name: str) -> bool:
    """Whether ``name`` is trusted now (see :func:`trusted`)."""
    return name in trusted()
