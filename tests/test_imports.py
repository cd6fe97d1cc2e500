"""The import table of DESIGN.md ("Parts and the direction of imports", and its "Never:"
rules), enforced on the sources.

Every ``.py`` file under ``src/hybridroute`` is parsed with :mod:`ast` (nothing is
imported or run) and every import in it is checked -- at the top, inside a function, under
``if TYPE_CHECKING:`` or in a ``try:`` alike -- together with
``importlib.import_module("...")`` / ``__import__("...")`` calls whose module is a string
literal. Two kinds of rules:

* **Between parts** (:data:`MAY_IMPORT`): a part is a top-level module or package of
  hybridroute; it may import only the parts its row of the table names. The foundation --
  ``exceptions`` and the neutral leaf modules ``hybridroute/_*.py`` (``_safeio``,
  ``_canonical``, ``_retry_settings``, ...) -- may be imported by every part, and imports
  no part but ``contracts`` itself. So nothing imports ``cli`` (only ``__main__``), rules
  never import a classifier, the client imports only the contracts, and a new top-level
  part must first be given its row (here and in DESIGN.md).
* **Third-party packages** (:data:`ONLY_IN`): litellm, instructor (and the OpenAI SDK under
  them) only in the LLM classifier; mlflow only in the tracking layer; fastapi, starlette,
  uvicorn, prometheus-client only in the service; a database driver only in the records
  backends; the calibration package nothing but numpy, scipy and scikit-learn.

``sqlite3`` is a database driver (the DB-API driver of SQLite) and is held to that rule,
with two named exceptions that open no decision log: ``classifiers/_cache_store.py``, the
one store of the classifiers' own cache files (LLM answers, embeddings), and
``tracking/_outage.py``, which only names the ``sqlite3`` exception types that MLflow's
SQLite store raises.

The checker is tested too: each kind of forbidden import, written into a small source tree
(and one into a copy of the real tree), is reported with its file and line.
"""

from __future__ import annotations

import ast
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import hybridroute

SRC = Path(hybridroute.__file__).parent
PACKAGE = "hybridroute"

# --------------------------------------------------------------------------- the table

_ABOVE_TRACKING = frozenset(
    {
        "contracts",
        "rules",
        "classifiers",
        "calibration",
        "datasets",
        "router",
        "records",
        "evaluation",
        "monitoring",
        "scores",
    }
)

#: Part -> the parts it may import (besides itself and the foundation), as DESIGN.md's
#: table draws them.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "contracts": frozenset(),
    "rules": frozenset({"contracts"}),
    "classifiers": frozenset({"contracts"}),
    "calibration": frozenset({"contracts"}),
    "datasets": frozenset({"contracts"}),
    "router": frozenset({"contracts", "rules", "classifiers", "calibration", "datasets"}),
    "records": frozenset({"contracts", "router"}),
    "evaluation": frozenset({"contracts", "calibration"}),
    "monitoring": frozenset({"contracts", "calibration", "records", "evaluation"}),
    # Not yet a row of DESIGN.md's table (issue 26): a user's own scores file -> a policy
    # fitted, certified and evaluated on it; beside monitoring, under the tracking row.
    "scores": frozenset({"contracts", "classifiers", "calibration", "datasets", "evaluation"}),
    # one row of the table: "everything above"; MLflow reaches experiments and Spark
    # through the tracking layer
    "tracking": _ABOVE_TRACKING,
    "experiments": _ABOVE_TRACKING | {"tracking"},
    "spark": _ABOVE_TRACKING | {"tracking"},
    "service": _ABOVE_TRACKING | {"tracking", "experiments", "spark"},
    "client": frozenset({"contracts"}),
    # Not a row of the table: the stand-ins (a local OpenAI-compatible server) that tests
    # and ``hybridroute standin`` run; only the command line imports them.
    "testing": frozenset({"contracts"}),
    # the package's face re-exports the contracts and the rules; ``python -m`` runs the CLI
    PACKAGE: frozenset({"contracts", "rules"}),
    "__main__": frozenset({"cli"}),
}
#: The command line may import every part ("everything; nothing imports it").
EVERYTHING = "cli"

#: Always importable: the one exception hierarchy (the leaf modules ``_*.py`` too).
FOUNDATION = frozenset({"exceptions"})
#: What a foundation module may import besides other foundation modules.
FOUNDATION_MAY_IMPORT = frozenset({"contracts"})

_LLM = ("classifiers/llm/",)
_SERVICE = ("service/",)
_BACKENDS = ("records/_log.py", "records/_postgres.py")
#: Third-party top-level package -> the only places (paths under src/hybridroute, a
#: trailing ``/`` for a folder) that may import it.
ONLY_IN: dict[str, tuple[str, ...]] = {
    "litellm": _LLM,
    "instructor": _LLM,
    "openai": _LLM,
    "mlflow": ("tracking/",),
    "fastapi": _SERVICE,
    "starlette": _SERVICE,
    "uvicorn": _SERVICE,
    "prometheus_client": _SERVICE,
    "psycopg": _BACKENDS,
    "psycopg2": _BACKENDS,
    "psycopg_pool": _BACKENDS,
    "asyncpg": _BACKENDS,
    "pymysql": _BACKENDS,
    "MySQLdb": _BACKENDS,
    "sqlite3": (*_BACKENDS, "classifiers/_cache_store.py", "tracking/_outage.py"),
}
#: Part -> the only third-party packages it may import (the standard library aside).
THIRD_PARTY_ONLY: dict[str, frozenset[str]] = {
    "calibration": frozenset({"numpy", "scipy", "sklearn"}),
}


# --------------------------------------------------------------------------- the checker


def _module_of(path: Path, root: Path) -> tuple[str, bool]:
    """``("hybridroute.a.b", is_package)`` of a source file under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts]), is_package


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``tree``, wherever it stands."""
    package = module if is_package else module.rpartition(".")[0]

    def absolute(name: str, level: int) -> str:
        if not level:
            return name
        base = package.split(".")
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, name] if name else base)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.module or "", node.level)
            if base == PACKAGE:  # ``from hybridroute import x``: x may be a part
                for alias in node.names:
                    yield node.lineno, f"{base}.{alias.name}"
            else:
                yield node.lineno, base
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC)
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            name = node.args[0].value
            level = len(name) - len(name.lstrip("."))
            yield node.lineno, absolute(name[level:], level)


_DYNAMIC = frozenset({"import_module", "__import__"})


def _part(module: str, root: Path) -> str:
    """The part of an internal module: its top-level module or package under hybridroute
    (``hybridroute`` itself for the package's face and names defined there)."""
    parts = module.split(".")
    if len(parts) == 1:
        return PACKAGE
    head = parts[1]
    if head.startswith("__") and head.endswith("__") and head != "__main__":
        return PACKAGE  # a dunder of the package's face (``__version__``)
    if head.startswith("_") and head != "__main__":
        return head
    if (
        head in MAY_IMPORT
        or head == EVERYTHING
        or (root / head).is_dir()
        or (root / f"{head}.py").is_file()
    ):
        return head
    return PACKAGE  # a name defined in the package's __init__ (``__version__``)


def _is_foundation(part: str) -> bool:
    return part in FOUNDATION or (part.startswith("_") and part != "__main__")


def _allowed_here(rel: str, places: tuple[str, ...]) -> bool:
    return any(rel.startswith(p) if p.endswith("/") else rel == p for p in places)


def check_tree(root: Path) -> list[str]:
    """Every import under ``root`` (the ``hybridroute`` source folder) that the table
    forbids, as ``"path:line: what (rule)"`` lines."""
    stdlib = sys.stdlib_module_names
    problems: list[str] = []
    unplaced: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        module, is_package = _module_of(path, root)
        source = _part(module, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where_ok = MAY_IMPORT.get(source)
        if where_ok is None and source != EVERYTHING and not _is_foundation(source):
            if source not in unplaced:
                unplaced.add(source)
                problems.append(
                    f"{rel}:1: part {source!r} has no row in the import table (give it one, "
                    "here and in DESIGN.md)"
                )
            where_ok = frozenset()
        for line, target in _imports(tree, module, is_package):
            top = target.split(".")[0]
            if top == PACKAGE:
                part = _part(target, root)
                if part == source or part in FOUNDATION:
                    continue
                if _is_foundation(source):
                    if not (_is_foundation(part) or part in FOUNDATION_MAY_IMPORT):
                        problems.append(
                            f"{rel}:{line}: the leaf module {source} imports {part} "
                            "(a leaf imports only the foundation and the contracts)"
                        )
                    continue
                if _is_foundation(part) or source == EVERYTHING:
                    continue
                if part not in (where_ok or ()):
                    problems.append(
                        f"{rel}:{line}: {source} imports {part} ({target}); the table lets "
                        f"{source} import only: {', '.join(sorted(where_ok or ())) or 'nothing'}"
                    )
                continue
            places = ONLY_IN.get(top)
            if places is not None and not _allowed_here(rel, places):
                problems.append(
                    f"{rel}:{line}: imports {top}, which only {', '.join(places)} may import"
                )
            allowed = THIRD_PARTY_ONLY.get(source)
            if allowed is not None and top not in stdlib and top not in allowed:
                problems.append(
                    f"{rel}:{line}: {source} imports {top}; it may import only "
                    f"{', '.join(sorted(allowed))} besides the standard library"
                )
    return problems


# --------------------------------------------------------------------------- the real tree


def test_the_sources_keep_the_import_table():
    problems = check_tree(SRC)
    assert not problems, "imports against DESIGN.md's table:\n" + "\n".join(problems)


def test_the_table_names_every_part_there_is():
    parts = {p.parent.name for p in SRC.glob("*/__init__.py")}
    parts |= {p.stem for p in SRC.glob("*.py") if not p.stem.startswith("_")}
    assert parts - set(MAY_IMPORT) - FOUNDATION - {EVERYTHING} == set()


def test_the_checker_reads_the_whole_tree():
    """Imports inside functions and under TYPE_CHECKING are seen: the known ones are."""
    seen = {
        (path.relative_to(SRC).as_posix(), target)
        for path in SRC.rglob("*.py")
        for _, target in _imports(ast.parse(path.read_text()), *_module_of(path, SRC))
    }
    # inside a function: the service runs uvicorn; under TYPE_CHECKING: a prompt type
    assert ("service/_server.py", "uvicorn") in seen
    assert ("classifiers/llm/_cache.py", "hybridroute.classifiers.llm._prompt") in seen


# --------------------------------------------------------------------------- the checker fails


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A small ``hybridroute`` source tree with ``files`` (path -> source)."""
    base = root / PACKAGE
    for rel, text in {"__init__.py": "", "contracts.py": "", **files}.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(base).parents:
            init = base / parent / "__init__.py"
            if not init.exists():
                init.write_text("")
        path.write_text(text)
    return base


# (file, its source, what the report must say)
FORBIDDEN = {
    "rules-import-a-classifier": (
        "rules/_x.py",
        "def f():\n    from ..classifiers import LocalClassifier\n",
        "rules/_x.py:2: rules imports classifiers",
    ),
    "calibration-imports-litellm": (
        "calibration/_x.py",
        "import litellm\n",
        "calibration/_x.py:1: imports litellm, which only classifiers/llm/ may import",
    ),
    "calibration-imports-pandas": (
        "calibration/_x.py",
        "import numpy\nimport pandas\n",
        "calibration/_x.py:2: calibration imports pandas; it may import only numpy",
    ),
    "mlflow-outside-tracking": (
        "evaluation/_x.py",
        "def f():\n    import mlflow.pyfunc\n",
        "evaluation/_x.py:2: imports mlflow, which only tracking/ may import",
    ),
    "instructor-outside-the-llm-classifier": (
        "classifiers/_cascade.py",
        "from instructor import patch\n",
        "classifiers/_cascade.py:1: imports instructor, which only classifiers/llm/",
    ),
    "uvicorn-in-the-cli": (
        "cli/_serve.py",
        "def serve():\n    import uvicorn\n",
        "cli/_serve.py:2: imports uvicorn, which only service/ may import",
    ),
    "fastapi-outside-the-service": (
        "records/_x.py",
        "from fastapi import APIRouter\n",
        "records/_x.py:1: imports fastapi, which only service/ may import",
    ),
    "sqlite-outside-the-records-backends": (
        "spark/_replay.py",
        "def rows():\n    import sqlite3\n",
        "spark/_replay.py:2: imports sqlite3, which only records/_log.py",
    ),
    "a-driver-in-records-but-no-backend": (
        "records/_drift.py",
        "import psycopg\n",
        "records/_drift.py:1: imports psycopg, which only records/_log.py",
    ),
    "a-core-module-imports-the-cli": (
        "service/_x.py",
        "from ..cli import main\n",
        "service/_x.py:1: service imports cli",
    ),
    "the-client-imports-the-router": (
        "client.py",
        "from .router import HybridRouter\n",
        "client.py:1: client imports router",
    ),
    "a-dynamic-import": (
        "classifiers/_x.py",
        "import importlib\nm = importlib.import_module('hybridroute.records')\n",
        "classifiers/_x.py:2: classifiers imports records",
    ),
    "a-relative-dynamic-import": (
        "evaluation/_x.py",
        "import importlib\nm = importlib.import_module('..monitoring', __package__)\n",
        "evaluation/_x.py:2: evaluation imports monitoring",
    ),
    "a-type-checking-import": (
        "contracts.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .rules import Rule\n",
        "contracts.py:3: contracts imports rules",
    ),
    "a-leaf-module-imports-a-part": (
        "_safeio.py",
        "from .router import HybridRouter\n",
        "_safeio.py:1: the leaf module _safeio imports router",
    ),
    "records-imports-monitoring": (
        "records/_replay.py",
        "from hybridroute.monitoring import monitor_log\n",
        "records/_replay.py:1: records imports monitoring",
    ),
    "a-part-without-a-row": (
        "plugins/__init__.py",
        "",
        "plugins/__init__.py:1: part 'plugins' has no row in the import table",
    ),
}


def test_a_clean_tree_reports_nothing(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rules/_x.py": "from ..contracts import Decision\nfrom .. import _safeio\n",
            "_safeio.py": "from .exceptions import InputError\nfrom . import contracts\n",
            "exceptions.py": "",
            "calibration/_x.py": "import math\nimport numpy\nfrom scipy import stats\n",
            "service/_x.py": "import uvicorn\nfrom ..monitoring import x\nfrom ..spark import y\n",
            "cli/_x.py": "from ..service import create_app\nfrom .. import __version__\n",
            "records/_log.py": "import sqlite3\nfrom ..router import HybridRouter\n",
            "classifiers/llm/_seam.py": "import litellm\nimport instructor\n",
            "classifiers/_cache_store.py": "import sqlite3\n",
            "__main__.py": "from .cli import main\n",
        },
    )
    assert check_tree(root) == []


@pytest.mark.parametrize(("rel", "source", "reported"), FORBIDDEN.values(), ids=list(FORBIDDEN))
def test_a_forbidden_import_is_reported(tmp_path, rel, source, reported):
    problems = check_tree(_tree(tmp_path, {rel: source}))
    where = reported.split(": ", 1)[0]
    assert problems and {p.split(": ", 1)[0] for p in problems} == {where}, problems
    assert any(p.startswith(reported) for p in problems), problems


def _sources_only(folder: str, names: list[str]) -> list[str]:
    """Leave out of a copy of the tree everything but folders and ``.py`` files."""
    return [
        n
        for n in names
        if n == "__pycache__" or not (n.endswith(".py") or Path(folder, n).is_dir())
    ]


@pytest.mark.parametrize(
    ("rel", "line"),
    [
        ("rules/__init__.py", "    from ..classifiers import LocalClassifier"),
        ("calibration/__init__.py", "    import litellm"),
        ("cli/_serve.py", "    import uvicorn"),
        ("spark/_replay.py", "    import sqlite3"),
    ],
)
def test_a_forbidden_import_added_to_the_real_tree_is_reported(tmp_path, rel, line):
    copy = tmp_path / PACKAGE
    shutil.copytree(SRC, copy, ignore=_sources_only)
    before = set(check_tree(copy))  # empty when the tree keeps the table
    target = copy / rel
    text = target.read_text()
    target.write_text(text + f"\n\ndef _added() -> None:\n{line}\n")
    added = set(check_tree(copy)) - before
    added_at = len(text.splitlines()) + 4
    assert added and {p.split(": ", 1)[0] for p in added} == {f"{rel}:{added_at}"}, added
