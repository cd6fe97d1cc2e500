"""Size limits of the source: no function over 150 lines, no module over 800 (issue 26).

A function counts from its ``def`` line (decorators excluded) to its last line, docstring
included; methods, nested functions and ``async def`` count alike. A module counts all its
lines. A long function is split into named steps, each with its docstring; a typer
command's option list moves into an options table (``cli/_calibrate.py``'s ``_OPTIONS``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "hybridroute"

MAX_FUNCTION_LINES = 150
MAX_MODULE_LINES = 800


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, line count)`` of every function of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                out.append((name, child.lineno, end - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _sizes() -> dict[str, tuple[int, int]]:
    return {
        f"{path.relative_to(SRC).as_posix()}::{name}": (line, size)
        for path in _modules()
        for name, line, size in _functions(path)
    }


def test_the_source_is_found() -> None:
    assert len(_modules()) > 50
    assert "calibration/_fit.py::fit_policy" in _sizes()


def test_no_function_over_the_limit() -> None:
    over = [
        f"{key} (line {line}): {size} lines"
        for key, (line, size) in sorted(_sizes().items())
        if size > MAX_FUNCTION_LINES
    ]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: " + "; ".join(over)


def test_no_module_over_the_limit() -> None:
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in _modules()}
    over = [
        f"{path.relative_to(SRC).as_posix()}: {n} lines"
        for path, n in lines.items()
        if n > MAX_MODULE_LINES
    ]
    assert not over, f"modules over {MAX_MODULE_LINES} lines: " + "; ".join(over)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    return 1\n", [("f", 1, 2)]),
        ("@decorator\n@other\ndef f():\n    pass\n", [("f", 3, 2)]),
        (
            "class A:\n    def m(self):\n        def inner():\n            pass\n",
            [("A.m", 2, 3), ("A.m.inner", 3, 2)],
        ),
        ('async def g():\n    """Doc\n    string."""\n', [("g", 1, 3)]),
        ("if True:\n    def h():\n        pass\n", [("h", 2, 2)]),
    ],
)
def test_how_a_function_is_counted(tmp_path: Path, source: str, expected: list) -> None:
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    assert _functions(path) == expected
