"""Public callables with several parameters document them (numpydoc ``Parameters``).

The public callables are those a subpackage lists in ``__all__``: functions, classes
(their constructor's parameters belong in the class docstring, as numpydoc puts them, or in
``__init__``'s) and the public methods of those classes, inherited ones included when they
are defined in hybridroute. One with :data:`MIN_PARAMETERS` or more parameters (``self``,
``cls``, ``*args`` and ``**kwargs`` not counted) needs a ``Parameters`` section.

A dataclass or NamedTuple whose constructor takes exactly its fields may document them in an
``Attributes`` section of the class docstring instead: there the fields are both the
constructor's parameters and the attributes, and numpydoc allows either heading. A NamedTuple's
constructor is its generated ``__new__``.

Run ``.venv/bin/python tests/test_docstrings.py`` to print the callables that lack one;
the test fails while any does.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest

#: The public modules whose ``__all__`` is scanned.
MODULES = (
    "hybridroute",
    "hybridroute.calibration",
    "hybridroute.classifiers",
    "hybridroute.classifiers.adapter",
    "hybridroute.contracts",
    "hybridroute.datasets",
    "hybridroute.evaluation",
    "hybridroute.exceptions",
    "hybridroute.experiments",
    "hybridroute.records",
    "hybridroute.monitoring",
    "hybridroute.service",
    "hybridroute.client",
    "hybridroute.router",
    "hybridroute.rules",
    "hybridroute.scores",
    "hybridroute.spark",
    "hybridroute.testing",
    "hybridroute.tracking",
)
#: Fewest parameters that call for a ``Parameters`` section.
MIN_PARAMETERS = 3

_SECTION = re.compile(r"^\s*Parameters\s*\n\s*-{3,}\s*$", re.MULTILINE)
_FIELDS_SECTION = re.compile(r"^\s*(?:Parameters|Attributes)\s*\n\s*-{3,}\s*$", re.MULTILINE)
_NOT_COUNTED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
#: The receiver, never named by a caller (``_cls`` is a NamedTuple's ``__new__``'s).
_RECEIVERS = ("self", "cls", "_cls")


def has_parameters_section(obj: Any, *, fields: bool = False) -> bool:
    """Whether ``obj``'s docstring (or the one it inherits) has a numpydoc Parameters section.

    Parameters
    ----------
    obj : object
        Whose docstring is read (:func:`inspect.getdoc`, so an inherited one counts).
    fields : bool, default False
        ``obj`` is a dataclass or NamedTuple whose constructor takes exactly its fields: an
        ``Attributes`` section counts too.
    """
    pattern = _FIELDS_SECTION if fields else _SECTION
    return bool(pattern.search(inspect.getdoc(obj) or ""))


def _named_parameters(func: Callable[..., Any]) -> list[str]:
    """Parameters of ``func`` a caller names: the receiver, ``*args``, ``**kwargs`` left out."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return []
    return [p.name for p in params if p.kind not in _NOT_COUNTED and p.name not in _RECEIVERS]


def count_parameters(func: Callable[..., Any]) -> int:
    """Parameters of ``func`` a caller names: ``self``, ``cls``, ``*args``, ``**kwargs`` left out."""
    return len(_named_parameters(func))


def _ours(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "hybridroute"


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _constructor(cls: type) -> Callable[..., Any]:
    """The constructor whose parameters a caller of ``cls`` names: ``__init__``, or a
    NamedTuple's generated ``__new__``."""
    return cls.__new__ if _is_namedtuple(cls) else cls.__init__


def _takes_its_fields(cls: type, init: Callable[..., Any]) -> bool:
    """Whether ``init`` takes exactly the fields of dataclass or NamedTuple ``cls``."""
    if _is_namedtuple(cls):
        fields = set(cls._fields)
    elif dataclasses.is_dataclass(cls):
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
    else:
        return False
    return set(_named_parameters(init)) == fields


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


def public_callables() -> Iterator[tuple[str, Callable[..., Any], bool]]:
    """``(qualified name, callable whose parameters count, whether they are documented)``."""
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
                init = _constructor(obj)
                # a NamedTuple's __new__ is generated from fields declared here, although
                # its __module__ says otherwise; an inherited __init__ is listed once
                if (_ours(init) or _is_namedtuple(obj)) and id(init) not in seen:
                    seen.add(id(init))
                    # documented on the class (numpydoc) or on __init__
                    on_class = has_parameters_section(obj, fields=_takes_its_fields(obj, init))
                    yield where, init, on_class or has_parameters_section(init)
                for _name, method in _methods(obj):
                    func = getattr(method, "__func__", method)
                    if id(func) in seen:
                        continue
                    seen.add(id(func))
                    qualified = f"{func.__module__}.{func.__qualname__}"
                    yield qualified, method, has_parameters_section(method)
            elif inspect.isfunction(obj):
                yield where, obj, has_parameters_section(obj)


def undocumented(min_parameters: int = MIN_PARAMETERS) -> list[tuple[str, int]]:
    """Public callables with ``min_parameters`` or more parameters and no Parameters section."""
    found = []
    for where, func, documented in public_callables():
        n = count_parameters(func)
        if n >= min_parameters and not documented:
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


@dataclass
class _Fields:
    """A dataclass documenting its fields numpydoc-style.

    Attributes
    ----------
    a, b, c : int
        Three numbers.
    """

    a: int
    b: int
    c: int


class _Row(NamedTuple):
    """A NamedTuple documenting its fields.

    Attributes
    ----------
    row, column, reason
        Where, and why.
    """

    row: int
    column: str
    reason: str


class _Attributes:
    """A plain class: an Attributes section says what it holds, not what it takes.

    Attributes
    ----------
    total : int
        The sum of the three numbers it was made with.
    """

    def __init__(self, x: int, y: int, z: int) -> None:
        self.total = x + y + z


@pytest.mark.parametrize(
    ("obj", "count", "documented"),
    [
        (_documented_example, 3, True),
        (_undocumented_example, 3, False),
        (_Example.__init__, 3, False),
        (_Example, 3, True),
        (_Example.make, 2, False),
        (len, 1, False),
        (_Row.__new__, 3, False),  # the receiver ``_cls`` is not counted
    ],
)
def test_the_scanner_counts_parameters_and_finds_sections(obj, count, documented):
    assert count_parameters(obj) == count
    assert has_parameters_section(obj) is documented


@pytest.mark.parametrize(
    ("cls", "takes_fields"),
    [(_Fields, True), (_Row, True), (_Attributes, False), (_Example, False)],
)
def test_an_attributes_section_documents_the_fields_of_a_generated_constructor(cls, takes_fields):
    init = _constructor(cls)
    assert count_parameters(init) == 3
    assert _takes_its_fields(cls, init) is takes_fields
    documented = has_parameters_section(cls, fields=_takes_its_fields(cls, init))
    assert documented is (takes_fields or cls is _Example)


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
    listed = "\n".join(f"  {where} ({n} parameters)" for where, n in missing)
    assert not missing, (
        f"{len(missing)} public callables with >= {MIN_PARAMETERS} parameters lack a numpydoc "
        f"Parameters section (a dataclass or NamedTuple may use Attributes):\n{listed}"
    )


if __name__ == "__main__":  # pragma: no cover
    rows = undocumented(int(sys.argv[1]) if len(sys.argv) > 1 else MIN_PARAMETERS)
    for where, n in rows:
        print(f"{where} ({n})")
    print(f"{len(rows)} undocumented", file=sys.stderr)
