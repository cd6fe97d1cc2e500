"""The suite's order under pytest-xdist: the files that start something slow come first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from .conftest import _slow_files_first

HERE = Path(__file__).parent


def _item(path: str, *markers: str) -> SimpleNamespace:
    return SimpleNamespace(path=HERE / path, keywords=dict.fromkeys(markers, True))


def _where(items: list[SimpleNamespace]) -> list[str]:
    return [f"{i.path.relative_to(HERE).as_posix()}:{','.join(i.keywords)}" for i in items]


def test_files_with_a_slow_to_start_test_come_first_each_in_its_own_order():
    items = [  # as pytest collects them: each file's tests together
        _item("rules/test_a.py"),
        _item("rules/test_a.py", "postgres"),  # not slow to start
        _item("classifiers/test_b.py"),
        _item("classifiers/test_b.py", "embeddings"),  # one marked test takes its whole file
        _item("classifiers/test_b.py"),
        _item("records/test_c.py"),
        _item("docs/test_site.py"),  # a folder of slow files
        _item("spark/test_s.py", "spark"),
    ]
    _slow_files_first(items)
    assert _where(items) == [
        "classifiers/test_b.py:",
        "classifiers/test_b.py:embeddings",
        "classifiers/test_b.py:",
        "docs/test_site.py:",
        "spark/test_s.py:spark",
        "rules/test_a.py:",
        "rules/test_a.py:postgres",
        "records/test_c.py:",
    ]


def test_a_file_outside_the_tests_folder_keeps_its_place():
    outside = SimpleNamespace(path=HERE.parent / "docs" / "test_x.py", keywords={})
    items = [_item("rules/test_a.py"), outside]
    _slow_files_first(items)
    assert items[1] is outside
