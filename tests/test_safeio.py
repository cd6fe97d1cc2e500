"""The hardened readers every file, JSON and YAML input goes through."""

from __future__ import annotations

import os
import random

import pytest

from hybridroute import _safeio as safeio
from hybridroute.exceptions import InputError, UserInputError

from .hostile import bounded


def test_input_error_is_a_user_error_with_its_location():
    exc = InputError("bad", path="f.json", line=3)
    assert isinstance(exc, UserInputError)
    assert str(exc) == "f.json, line 3: bad"
    assert (exc.path, exc.line, exc.reason) == ("f.json", 3, "bad")


@pytest.mark.parametrize("reader", ["read_bytes", "read_text", "iter_lines"])
@pytest.mark.parametrize(
    ("special", "kind"),
    [("/dev/zero", "character device"), ("/dev/urandom", "character device"), ("fifo", "FIFO")],
)
def test_non_regular_files_are_refused_without_reading(tmp_path, reader, special, kind):
    if special == "fifo":
        special = str(tmp_path / "pipe")
        os.mkfifo(special)  # nobody ever writes: a blocking open would wait forever

    def call():
        fn = getattr(safeio, reader)
        kw = {"limit": 1 << 30, "what": "facts file"}
        if reader == "iter_lines":
            return list(fn(special, line_limit=1 << 20, **kw))
        return fn(special, **kw)

    with pytest.raises(InputError, match=f"{kind}.*must be a regular file"):
        bounded(call)


def test_a_directory_and_a_missing_file_are_named(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        safeio.read_bytes(tmp_path, limit=10, what="rules file")
    with pytest.raises(InputError, match="rules file not found"):
        safeio.read_bytes(tmp_path / "nope.yaml", limit=10, what="rules file")


def test_the_byte_limit_holds_while_reading(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="larger than the limit of 100 bytes"):
        safeio.read_bytes(p, limit=100)
    assert safeio.read_bytes(p, limit=101) == b"x" * 101
    lines = tmp_path / "many.jsonl"
    lines.write_bytes(b"{}\n" * 50)
    with pytest.raises(InputError, match="larger than the limit"):
        list(safeio.iter_lines(lines, limit=100, line_limit=10))


def test_iter_lines_numbers_lines_and_bounds_each(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"a":1}\r\n\n{"b":"\xe2\x80\xa8"}\n' + b"y" * 30 + b"\n")
    it = safeio.iter_lines(p, limit=1000, line_limit=20)
    assert next(it) == (1, '{"a":1}')
    assert next(it) == (2, "")
    assert next(it) == (3, '{"b":"\u2028"}')  # U+2028 stays inside its line
    with pytest.raises(InputError, match=r"line 4: the line is longer than the limit of 20"):
        next(it)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"{}\n{\xff}\n")
    with pytest.raises(InputError, match="line 2: not UTF-8"):
        list(safeio.iter_lines(bad, limit=1000, line_limit=100))


def test_read_text_is_strict_utf8_and_names_the_line(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(InputError, match="line 2: not UTF-8"):
        safeio.read_text(p, limit=100)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            '{"has_permission": false, "has_permission": true}',
            r"line 1: duplicate key 'has_permission'",
        ),
        ('{\n "a": {"k": 1},\n "b": {"k": 2,\n  "k": 3}\n}', r"line 4: duplicate key 'k'"),
        ('[{"x": 1, "y": [1, {"z": 1, "z": 2}]}]', r"duplicate key 'z'"),
        ("[" * 1000 + "]" * 1000, r"nested too deeply \(over 64 levels\)"),
        ('{"a":' * 200 + "1" + "}" * 200, "nested too deeply"),
        ('{"n": ' + "9" * 5000 + "}", "an integer with 5000 digits"),
        ('{"n": -' + "9" * 100 + "}", "an integer with 100 digits"),
        ('{"t": NaN}', "NaN"),
        ('{"t": -Infinity}', "Infinity"),
        ('{"t": 1e999}', "too large for a float"),
        ('{"t": "\\ud800"}', "lone surrogate"),
        ('{"\\udfff": 1}', "lone surrogate"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_parse_json_refuses_hostile_documents(text, match):
    with pytest.raises(InputError, match=match):
        bounded(safeio.parse_json, text, source="--facts")


def test_parse_json_accepts_ordinary_documents_and_keeps_the_given_line():
    doc = (
        '{"a": [1, 2.5, {"b": null}], "c": "\\ud83d\\ude00", "d": "\\u0000x", "e": '
        + "[" * 63
        + "]" * 63
        + "}"
    )
    value = safeio.parse_json(doc)
    assert value["a"] == [1, 2.5, {"b": None}]
    assert value["c"] == "\U0001f600"
    with pytest.raises(InputError, match=r"batch.jsonl, line 7: duplicate key"):
        safeio.parse_json('{"facts": {}, "facts": {}}', source="batch.jsonl", line=7)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("rules:\n  - id: a\n    when: x\n    when: y\n", r"line 4: duplicate key 'when'"),
        ("a: 1\na: 2\n", r"line 2: duplicate key 'a'"),
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("a: !!python/object/apply:os.system [ls]\n", "Python tags"),
        ("a: .nan\n", "not finite"),
        ("a: -.inf\n", "not finite"),
        ("a: " + "1" * 5000 + "\n", "an integer with 5000 digits"),
        ("a: [" * 20 + "]" * 20 + "\n", "nested too deeply"),
        ("a: [1, 2\n", "not valid safe YAML"),
        ("? [1, 2]\n: x\n", "not valid safe YAML|must be a scalar"),
    ],
)
def test_parse_yaml_refuses_hostile_documents(text, match):
    with pytest.raises(InputError, match=match):
        bounded(safeio.parse_yaml, text, source="r.yaml")


def test_parse_yaml_reads_plain_documents():
    assert safeio.parse_yaml("a: [1, 2.5, x]\nb: {c: true, d: null}\n") == {
        "a": [1, 2.5, "x"],
        "b": {"c": True, "d": None},
    }


@pytest.mark.parametrize(
    ("value", "match"),
    [("a\x00b", "NUL character at character 1"), ("ok \udc80", "lone surrogate at character 3")],
)
def test_check_text_refuses_nul_and_lone_surrogates(value, match):
    with pytest.raises(InputError, match=match):
        safeio.check_text(value, what="--text")
    assert safeio.check_text("fine \u2028 text 😀") == "fine \u2028 text 😀"


def test_csv_formula_escaping_is_reversible_and_never_leaves_a_formula():
    import itertools

    from hybridroute._csv import escape_formula, unescape_formula

    assert escape_formula("=cmd|' /C calc'!A0") == "'=cmd|' /C calc'!A0"
    assert escape_formula("@SUM(A1)") == "'@SUM(A1)"
    assert escape_formula("where is my parcel") == "where is my parcel"
    for parts in itertools.product(["'", "=", "+", "@", "\t", "a", "-"], repeat=4):
        s = "".join(parts)
        assert unescape_formula(escape_formula(s)) == s
        assert escape_formula(s)[:1] not in ("=", "+", "-", "@", "\t", "\r")


def _random_json_text(rng: random.Random, depth: int = 0) -> str:
    """JSON-ish text: nested arrays and objects, strings holding brackets, quotes and
    escapes, numbers and literals (sometimes cut short or with a stray bracket)."""
    pieces = ['"a[b"', '"}{"', '"q\\\\"', '"x\\"]"', '"\\\\\\"["', "1", "-2.5e3", "null", "true"]
    kind = rng.random()
    if depth > 70 or kind < 0.3:
        return rng.choice(pieces)
    inner = [_random_json_text(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind < 0.65:
        return "[" + ", ".join(inner) + "]"
    return "{" + ", ".join(f'"k{i}[": {v}' for i, v in enumerate(inner)) + "}"


def test_the_fast_depth_count_agrees_with_the_scan_that_finds_the_line():
    from hybridroute._safeio import MAX_JSON_DEPTH, _deepest, _depth_of

    rng = random.Random(7)
    checked = deep = 0
    for _ in range(1500):
        text = _random_json_text(rng)
        if rng.random() < 0.1:  # broken text: cut short, or a stray bracket added
            text = text[: rng.randint(0, len(text))] + rng.choice(["", "[", "}", '"'])
        if rng.random() < 0.1:  # deep enough to be refused
            n = rng.randint(MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH + 3)
            text = "[" * n + text + "]" * n
        slow, _ = _depth_of(text)
        fast = _deepest(text)
        if slow > MAX_JSON_DEPTH:  # the scan stops once past the limit
            assert fast > MAX_JSON_DEPTH
            deep += 1
        else:
            assert fast == slow, text
        checked += 1
    assert checked == 1500 and deep > 25
