"""Public callables with several parameters document them (numpydoc ``Parameters``).

The public callables are those a subpackage lists in ``__all__``: functions, classes
(their constructor's parameters belong in the class docstring, as numpydoc puts them, or in
``__init__``'s) and the public methods of those classes, inherited ones included when they
are defined in hybridroute. One with :data:`MIN_PARAMETERS` or more parameters (``self``,
``cls``, ``*args`` and ``**kwargs`` not counted) needs a ``Parameters`` section.

Run ``.venv/bin/python tests/test_docstrings.py`` to print the callables that lack one.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: The public modules whose ``__all__`` is scanned.
MODULES = (
    "hybridroute",
    "hybridroute.calibration",
    "hybridroute.classifiers",
    "hybridroute.contracts",
    "hybridroute.datasets",
    "hybridroute.evaluation",
    "hybridroute.exceptions",
    "hybridroute.experiments",
    "hybridroute.records",
    "hybridroute.router",
    "hybridroute.rules",
    "hybridroute.spark",
    "hybridroute.testing",
    "hybridroute.tracking",
)
#: Fewest parameters that call for a ``Parameters`` section.
MIN_PARAMETERS = 3

_SECTION = re.compile(r"^\s*Parameters\s*\n\s*-{3,}\s*$", re.MULTILINE)
_NOT_COUNTED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def has_parameters_section(obj: Any) -> bool:
    """Whether ``obj``'s docstring (or the one it inherits) has a numpydoc Parameters section."""
    return bool(_SECTION.search(inspect.getdoc(obj) or ""))


def count_parameters(func: Callable[..., Any]) -> int:
    """Parameters of ``func`` a caller names: ``self``, ``cls``, ``*args``, ``**kwargs`` left out."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return 0
    return sum(1 for p in params if p.kind not in _NOT_COUNTED and p.name not in ("self", "cls"))


def _ours(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "hybridroute"


def _methods(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """Public methods of ``cls`` defined in hybridroute (its own and inherited ones)."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if inspect.isfunction(raw) and _ours(raw):
            yield name, getattr(cls, name)


def public_callables() -> Iterator[tuple[str, Callable[..., Any], Any]]:
    """``(qualified name, callable whose parameters count, object whose docstring counts)``."""
    seen: set[int] = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen or not _ours(obj):
                continue
            seen.add(id(obj))
            where = f"{obj.__module__}.{obj.__qualname__}" if hasattr(obj, "__qualname__") else name
            if inspect.isclass(obj):
                init = obj.__init__
                if _ours(init) and id(init) not in seen:  # an inherited one is listed once
                    seen.add(id(init))
                    # documented on the class (numpydoc) or on __init__
                    doc_owner = obj if has_parameters_section(obj) else init
                    yield where, init, doc_owner
                for _name, method in _methods(obj):
                    func = getattr(method, "__func__", method)
                    if id(func) in seen:
                        continue
                    seen.add(id(func))
                    yield f"{func.__module__}.{func.__qualname__}", method, method
            elif inspect.isfunction(obj):
                yield where, obj, obj


def undocumented(min_parameters: int = MIN_PARAMETERS) -> list[tuple[str, int]]:
    """Public callables with ``min_parameters`` or more parameters and no Parameters section."""
    found = []
    for where, func, doc_owner in public_callables():
        n = count_parameters(func)
        if n >= min_parameters and not has_parameters_section(doc_owner):
            found.append((where, n))
    return sorted(set(found))


def _documented_example(alpha: int, beta: int, gamma: int) -> int:
    """Add three numbers.

    Parameters
    ----------
    alpha, beta, gamma : int
        The numbers.
    """
    return alpha + beta + gamma


def _undocumented_example(alpha: int, beta: int, gamma: int, *args: int, **kw: int) -> int:
    """Add three numbers (no section)."""
    return alpha + beta + gamma


class _Example:
    """A class documenting its constructor numpydoc-style.

    Parameters
    ----------
    a, b, c : int
        Three numbers.
    """

    def __init__(self, a: int, b: int, c: int) -> None:
        self.a, self.b, self.c = a, b, c

    @classmethod
    def make(cls, a: int, b: int) -> _Example:
        """Two parameters: no section needed."""
        return cls(a, b, 0)


@pytest.mark.parametrize(
    ("obj", "count", "documented"),
    [
        (_documented_example, 3, True),
        (_undocumented_example, 3, False),
        (_Example.__init__, 3, False),
        (_Example, 3, True),
        (_Example.make, 2, False),
        (len, 1, False),
    ],
)
def test_the_scanner_counts_parameters_and_finds_sections(obj, count, documented):
    assert count_parameters(obj) == count
    assert has_parameters_section(obj) is documented


def test_the_scanner_sees_the_public_surface():
    names = {where for where, _, _ in public_callables()}
    # a function, a class constructor, a method of a public class, one from a subpackage
    for expected in (
        "hybridroute.rules._loader.load_rules",
        "hybridroute.contracts.Decision",
        "hybridroute._facts.FactSchema.validate",
        "hybridroute.calibration._fit.fit_policy",
    ):
        assert expected in names, expected
    assert len(names) > 100


def test_public_callables_with_several_parameters_document_them():
    missing = undocumented()
    # The list is printed (pytest -rP shows it) until every public callable is documented;
    # then this becomes `assert not missing`.
    print(f"{len(missing)} public callables with >= {MIN_PARAMETERS} parameters lack a")
    print("numpydoc Parameters section:")
    for where, n in missing:
        print(f"  {where} ({n} parameters)")


if __name__ == "__main__":  # pragma: no cover
    rows = undocumented(int(sys.argv[1]) if len(sys.argv) > 1 else MIN_PARAMETERS)
    for where, n in rows:
        print(f"{where} ({n})")
    print(f"{len(rows)} undocumented", file=sys.stderr)
