"""The Python API reference: one page per public module, one entry per name of its ``__all__``.

A *public module* is an importable module of ``hybridroute`` whose dotted path has no part
starting with ``_`` (``cli`` excluded: the command line has its own page) and that has an
``__all__``. A module gets a page unless every name of its ``__all__`` is re-exported, as the
same object, by a package above it (``calibration.techniques.margin.MarginThreshold`` is
``calibration.MarginThreshold``): then the package's page holds the entry. Each entry is a
mkdocstrings block, so the text is the docstring and the signature is the code's.

:func:`covered_by` is the rule the docs test checks the built site against.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = "hybridroute"


def public_modules() -> list[str]:
    """Every public module with an ``__all__``, in import-path order."""
    import hybridroute

    names = [ROOT]
    for info in pkgutil.walk_packages(hybridroute.__path__, ROOT + "."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] == "cli":
            continue
        names.append(info.name)
    out = []
    for name in names:
        module = importlib.import_module(name)
        if isinstance(getattr(module, "__all__", None), (list, tuple)):
            out.append(name)
    return sorted(out)


def _ancestors(module: str) -> Iterator[str]:
    parts = module.split(".")
    for i in range(len(parts) - 1, 0, -1):
        yield ".".join(parts[:i])


def _get(module: ModuleType, name: str) -> object:
    return getattr(module, name)


def covered_by(module: str, name: str, documented: set[str]) -> str | None:
    """The documented module whose entry renders ``module.name``, or ``None``.

    Its own module when that has a page, else the nearest package above it that re-exports
    the same object under the same name.
    """
    if module in documented:
        return module
    obj = _get(importlib.import_module(module), name)
    for parent in _ancestors(module):
        if parent not in documented:
            continue
        pmod = importlib.import_module(parent)
        if name in getattr(pmod, "__all__", ()) and _get(pmod, name) is obj:
            return parent
    return None


def documented_modules() -> list[str]:
    """The modules that get a page: those not wholly re-exported by a package above."""
    modules = public_modules()
    documented: set[str] = set()
    # packages first (shorter paths), so a leaf module can be covered by its package
    for module in sorted(modules, key=lambda m: m.count(".")):
        mod = importlib.import_module(module)
        if all(covered_by(module, n, documented) not in (None, module) for n in mod.__all__):
            continue
        documented.add(module)
    return sorted(documented)


def page_name(module: str) -> str:
    """``reference/api/<module>.md``."""
    return f"reference/api/{module}.md"


def _summary(module: ModuleType) -> str:
    doc = (module.__doc__ or "").strip()
    return doc.split("\n\n", 1)[0].replace("\n", " ") if doc else ""


_STATIC: Any = None


def _static_members(module: str) -> set[str]:
    """The names griffe (mkdocstrings' reader) finds in a module without importing it."""
    global _STATIC
    if _STATIC is None:
        import griffe

        src = Path(importlib.import_module(ROOT).__file__ or "").parent.parent
        loader = griffe.GriffeLoader(search_paths=[str(src)])
        _STATIC = loader.load(ROOT)
    node = _STATIC if module == ROOT else _STATIC[module.removeprefix(ROOT + ".")]
    return set(node.members)


def identifier(module: str, name: str) -> tuple[str, str | None]:
    """What mkdocstrings renders for ``module.name``, and the anchor to add, if any.

    A name the package resolves lazily (a module ``__getattr__`` with no import that a
    reader of the source can see) is rendered from the module that defines it, under an
    anchor of its public path, so links and the docs test find it where users import it.
    """
    if name in _static_members(module):
        return f"{module}.{name}", None
    obj = getattr(importlib.import_module(module), name)
    return f"{obj.__module__}.{obj.__qualname__}", f"{module}.{name}"


def module_page(module: str) -> str:
    """The markdown of one module's page: its docstring, then one entry per public name."""
    mod = importlib.import_module(module)
    lines = [
        f"::: {module}",
        "    options:",
        "      members: false",
        "      heading_level: 1",
        "",
    ]
    for name in mod.__all__:
        if name.startswith("__"):
            continue  # __version__: a string, shown on the index
        target, anchor = identifier(module, name)
        if anchor is not None:
            lines += [f'<a id="{anchor}"></a>', ""]
        lines += [f"::: {target}", ""]
    return "\n".join(lines)


def index_page(modules: list[str]) -> str:
    """The API index: every documented module with its first docstring paragraph."""
    import hybridroute

    lines = [
        "# Python API",
        "",
        "Generated from the docstrings of every public name (each module's `__all__`) when the",
        "site is built; nothing here is copied by hand. Private modules (`_name.py`) are not",
        f"part of the API. This build documents hybridroute {hybridroute.__version__}.",
        "",
        "| module | what it holds |",
        "|---|---|",
    ]
    for module in modules:
        summary = _summary(importlib.import_module(module)).replace("|", "\\|")
        lines.append(f"| [`{module}`]({module}.md) | {summary} |")
    return "\n".join(lines) + "\n"


def nav_entries() -> list[dict[str, str]]:
    """The API pages as navigation entries (``{module: page}``), after the index."""
    return [{m: page_name(m)} for m in documented_modules()]


def pages() -> dict[str, str]:
    """``{site path: markdown}`` of the API reference."""
    modules = documented_modules()
    out = {"reference/api/index.md": index_page(modules)}
    for module in modules:
        out[page_name(module)] = module_page(module)
    return out
