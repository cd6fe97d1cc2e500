"""DESIGN: nothing but the tracking layer imports mlflow; Spark reaches MLflow through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "hybridroute"


def _modules(*, outside: str) -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if outside not in p.relative_to(SRC).parts)


def _mlflow_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            lines += [node.lineno for a in node.names if a.name.split(".")[0] == "mlflow"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "mlflow":
                lines.append(node.lineno)
    return lines


def test_only_the_tracking_layer_imports_mlflow():
    found = {
        str(p.relative_to(SRC)): lines
        for p in _modules(outside="tracking")
        if (lines := _mlflow_imports(p))
    }
    assert found == {}


def _private_reads(path: Path) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self`` / ``cls``: another object's private state."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


@pytest.mark.parametrize("path", sorted((SRC / "spark").glob("*.py")), ids=lambda p: p.name)
def test_spark_reads_no_private_state_of_other_objects(path):
    assert _private_reads(path) == []


def test_the_router_model_hands_out_its_router_publicly():
    from hybridroute.tracking import RouterModel

    assert isinstance(RouterModel.__dict__["router"], property)
