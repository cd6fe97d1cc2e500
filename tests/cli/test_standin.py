"""``hybridroute stand-in-llm --policy map:FILE``: the label map is read as untrusted input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hybridroute.cli._standin import MAX_MAP_BYTES, _load_map
from hybridroute.exceptions import DatasetError

from ..hostile import bounded
from .test_route import one_error_line, run_cli


def bounded_load(path: Path, timeout: float = 30.0) -> dict[str, str]:
    """``_load_map`` in a thread joined with a timeout (a FIFO must not block it)."""
    return bounded(_load_map, path, timeout=timeout)


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_good_maps_load(tmp_path, suffix):
    p = tmp_path / f"map{suffix}"
    if suffix == ".json":
        p.write_text(json.dumps({"where is it": "order_status", "refund": "refund_request"}))
    else:
        p.write_text(
            '{"text": "where is it", "label": "order_status"}\n\n'
            '{"text": "refund", "label": "refund_request"}\n'
            '{"text": "refund", "label": "refund_request"}\n'
        )
    assert bounded_load(p) == {"where is it": "order_status", "refund": "refund_request"}


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("m.json", '{"a": "x", "a": "y"}', r"row 1: duplicate key 'a'"),
        ("m.json", '{"a": "x",\n "b": "y",\n "a": "z"}', r"row 3: duplicate key 'a'"),
        ("m.json", "[" * 1000 + "]" * 1000, "nested too deeply"),
        ("m.json", '{"a": ' + "1" * 5000 + "}", "integer with 5000 digits"),
        ("m.json", '{"a": NaN}', "NaN"),
        ("m.json", '{"a": "\\ud800"}', "lone surrogate"),
        ("m.json", '{"a\\u0000b": "x"}', "NUL"),
        ("m.json", '["a"]', "must be a JSON object"),
        ("m.jsonl", '{"text": "a", "label": "x", "label": "y"}', r"row 1: duplicate key 'label'"),
        ("m.jsonl", '{"text": "a", "label": "x"}\n' + "[" * 1000, r"row 2: .*nested too deeply"),
        ("m.jsonl", '{"text": "a", "label": "x"}\n{"text": "a", "label": "y"}', r"row 2.*again"),
        ("m.jsonl", '{"text": "a\\u0000", "label": "x"}', r"row 1, column 'text'.*NUL"),
        ("m.jsonl", '{"text": "a", "label": 3}', r"row 1, column 'label'"),
    ],
)
def test_hostile_maps_are_refused_naming_file_and_row(tmp_path, name, content, match):
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=match) as info:
        bounded_load(p)
    assert str(p) in str(info.value)


@pytest.mark.parametrize("name", ["m.json", "m.jsonl"])
def test_maps_that_are_not_utf8_or_too_large(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b'{"text": "caf\xe9", "label": "x"}')
    with pytest.raises(DatasetError, match="not UTF-8"):
        bounded_load(p)
    with open(p, "wb") as fh:
        fh.truncate(MAX_MAP_BYTES + 1)
    with pytest.raises(DatasetError, match="larger than the limit"):
        bounded_load(p)


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "dir"])
def test_special_files_are_refused_at_once(tmp_path, kind):
    path = Path(kind)
    if kind == "fifo":
        path = tmp_path / "map.jsonl"
        os.mkfifo(path)
    elif kind == "dir":
        path = tmp_path
    with pytest.raises(DatasetError, match=r"must be a regular file|directory"):
        bounded_load(path)


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_the_command_exits_2_instead_of_serving(tmp_path, kind):
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "map.json")
        os.mkfifo(path)
    rc, _, err = run_cli("stand-in-llm", "--port", "0", "--policy", f"map:{path}", timeout=60)
    assert rc == 2
    assert path in one_error_line(err)


def test_undecodable_labels_exit_2():
    rc, _, err = run_cli("stand-in-llm", "--port", "0", "--labels", b"a,b\xff", timeout=60)
    assert rc == 2
    assert "--labels" in one_error_line(err)
