"""Reading untrusted input: the one place every file, JSON and YAML reader goes through.

Every reader of hybridroute (rules files, facts, batch inputs, datasets, policies,
manifests, experiment specs, prompt templates, LLM answers) uses these functions, so the
same promises hold everywhere:

* **Regular files only.** A path is opened without blocking and checked with ``fstat``
  before a byte is read: a FIFO, a character device (``/dev/zero``), a socket or a
  directory is refused, so no reader can wait forever on a pipe or read an endless device.
* **Byte limits enforced while reading**, not trusted from the reported size: a file that
  grows past its limit while being read is refused at the limit.
* **Strict UTF-8**; errors name the line and byte.
* **JSON** with no duplicate keys (the error names the key and line), no nesting deeper
  than :data:`MAX_JSON_DEPTH`, no integer longer than :data:`MAX_INT_DIGITS` digits, no
  ``NaN`` / ``Infinity`` / overflowing numbers.
* **YAML** through ``yaml.SafeLoader`` only, after a scan of the event stream that refuses
  aliases, Python tags, deep nesting and too many nodes; duplicate keys and non-finite
  numbers are refused with their line.
* **Text** fields must be valid Unicode (no lone surrogates, which is what undecodable
  bytes in a command-line argument become) and hold no NUL character.

Every refusal is an :class:`~hybridroute.exceptions.InputError` (a user mistake: one line,
exit code 2 on the command line) naming the source, the line where known, and what is
wrong. Callers with their own error type (a dataset's row, a rules file's rule) re-raise
it as that type with :func:`InputError.reason`.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from itertools import accumulate
from typing import Any

from .exceptions import InputError

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_JSON_DEPTH",
    "check_text",
    "describe_bad_char",
    "env_byte_limit",
    "first_bad_string",
    "iter_lines",
    "open_regular",
    "parse_json",
    "parse_yaml",
    "read_bytes",
    "read_json",
    "read_text",
]

#: Deepest nesting of arrays and objects accepted in any JSON document.
MAX_JSON_DEPTH = 64
#: Most digits in one JSON integer (far beyond any real fact; Python's own limit is 4,300).
MAX_INT_DIGITS = 64
#: Defaults of the YAML scan (rules files, experiment specs, prompt templates).
MAX_YAML_DEPTH = 12
MAX_YAML_NODES = 20_000

_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_OPEN_FLAGS |= getattr(os, "O_CLOEXEC", 0)


# --------------------------------------------------------------------------- files


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], what: str) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading without blocking and check that it is a regular file.

    Returns the file descriptor (the caller closes it, e.g. through ``os.fdopen``) and its
    ``fstat``. For readers that need the descriptor itself (a gzip stream); the caller
    then enforces its own byte limit.
    """
    where = os.fspath(path)
    try:
        fd = os.open(where, _OPEN_FLAGS)
    except FileNotFoundError:
        raise InputError(f"{what} not found", path=where) from None
    except IsADirectoryError:
        raise InputError(f"is a directory, not a {what}", path=where) from None
    except PermissionError:
        raise InputError(f"cannot read the {what} (permission denied)", path=where) from None
    except OSError as exc:
        raise InputError(f"cannot read the {what} ({exc.strerror or exc})", path=where) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(
                f"is {_kind_of(info.st_mode)}; a {what} must be a regular file", path=where
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _too_large(what: str, limit: int, where: str) -> InputError:
    return InputError(f"{what} is larger than the limit of {limit:,} bytes", path=where)


def read_bytes(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file, refused once more than ``limit`` bytes have been read.

    Parameters
    ----------
    path : path-like
        The file.
    limit : int
        Most bytes accepted. The reported size is checked first, and the count is
        enforced again while reading (a file may grow, or lie about its size).
    what : str
        What the file is, for error messages (``"rules file"``, ``"facts file"``...).

    Raises
    ------
    InputError
        The file is missing, unreadable, not a regular file, or too large.
    """
    where = os.fspath(path)
    fd, info = open_regular(path, what)
    try:
        if info.st_size > limit:
            raise _too_large(what, limit, where)
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                block = os.read(fd, min(_CHUNK, limit + 1 - total))
            except BlockingIOError:  # pragma: no cover - regular files never block
                continue
            except OSError as exc:
                raise InputError(
                    f"cannot read the {what} ({exc.strerror or exc})", path=where
                ) from None
            if not block:
                break
            total += len(block)
            if total > limit:
                raise _too_large(what, limit, where)
            chunks.append(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _decode(data: bytes, what: str, where: str | None, *, line: int | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if line is None:
            line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"not UTF-8 text (byte {exc.start} of the {'line' if line else what})",
            path=where,
            line=line,
        ) from None


def read_text(
    path: str | os.PathLike[str], *, limit: int, what: str = "file", strip_bom: bool = True
) -> str:
    """:func:`read_bytes`, decoded as strict UTF-8 (a leading byte-order mark dropped)."""
    data = read_bytes(path, limit=limit, what=what)
    if strip_bom and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return _decode(data, what, os.fspath(path))


def iter_lines(
    path: str | os.PathLike[str],
    *,
    limit: int,
    line_limit: int,
    what: str = "file",
) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, text)`` from a UTF-8 file, one line at a time.

    Lines are split on ``\\n`` only (``\\r`` before it dropped), so characters such as
    U+2028 inside JSON strings stay in their line. Blank lines are yielded too (callers
    skip them); numbering starts at 1.

    Raises
    ------
    InputError
        As :func:`read_bytes`, and for a line longer than ``line_limit`` bytes or one that
        is not UTF-8 (naming the line).
    """
    where = os.fspath(path)
    fd, info = open_regular(path, what)
    if info.st_size > limit:
        os.close(fd)
        raise _too_large(what, limit, where)
    with os.fdopen(fd, "rb") as fh:
        total = 0
        lineno = 0
        while True:
            raw = fh.readline(line_limit + 2)
            if not raw:
                return
            lineno += 1
            total += len(raw)
            if total > limit:
                raise _too_large(what, limit, where)
            body = raw[:-1] if raw.endswith(b"\n") else raw
            if len(body) > line_limit and not (len(body) == line_limit + 1 and body[-1:] == b"\r"):
                raise InputError(
                    f"the line is longer than the limit of {line_limit:,} bytes",
                    path=where,
                    line=lineno,
                )
            if lineno == 1 and body.startswith(b"\xef\xbb\xbf"):
                body = body[3:]
            yield lineno, _decode(body.removesuffix(b"\r"), what, where, line=lineno)


# --------------------------------------------------------------------------- text


_BAD_CHAR_RE = re.compile("[\x00\ud800-\udfff]")


def describe_bad_char(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (a NUL, a lone surrogate), or ``None``.

    The phrase completes a sentence about the value: ``"the text " + problem``.
    """
    if value.isascii() and "\x00" not in value:
        return None
    m = _BAD_CHAR_RE.search(value)
    if m is None:
        return None
    if m.group() == "\x00":
        return f"holds a NUL character at character {m.start()}"
    return (
        f"is not valid Unicode (a lone surrogate at character {m.start()}: undecodable "
        "bytes, or an escape such as \\ud800)"
    )


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def first_bad_string(value: Any, *, surrogates_only: bool = False) -> tuple[str, bool] | None:
    """The first string in a JSON value (object keys included) that
    :func:`describe_bad_char` refuses, with whether it is a key; ``None`` when all are fine.
    With ``surrogates_only`` a NUL is allowed (JSON itself may carry one)."""
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        v, is_key = stack.pop()
        if isinstance(v, str):
            bad = (
                _SURROGATE_RE.search(v) is not None
                if surrogates_only
                else describe_bad_char(v) is not None
            )
            if bad:
                return v, is_key
        elif isinstance(v, Mapping):
            stack.extend((k, True) for k in v.keys())
            stack.extend((item, False) for item in v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend((item, False) for item in v)
    return None


def check_text(value: str, *, what: str = "text", path: str | None = None) -> str:
    """Return ``value`` if it is valid Unicode without NUL characters, else raise.

    A lone surrogate is what an undecodable byte in a command-line argument (or a
    ``"\\ud800"`` escape in JSON) becomes; it cannot be written as UTF-8, so it is refused
    where it enters rather than crashing a writer later. NUL has no place in a ticket or a
    fact and is a classic way to make two strings look equal to a person but not a program.
    """
    problem = describe_bad_char(value)
    if problem is None:
        return value
    raise InputError(f"{what} {problem}", path=path)


def env_byte_limit(name: str, default: int) -> int:
    """A byte limit from environment variable ``name``, else ``default``.

    Raises
    ------
    InputError
        If the variable is set to something other than a positive whole number of bytes.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{name} must be a positive whole number of bytes, got {raw[:40]!r}")
    return value


# --------------------------------------------------------------------------- JSON


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # built in C; a repeated key leaves fewer entries than pairs
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)  # the first key that repeats, as the text reads
            seen.add(k)
    return out


def _parse_int(digits: str) -> int:
    if len(digits) > MAX_INT_DIGITS + 1:  # + 1 for a sign
        raise _Number(f"an integer with {len(digits.lstrip('-'))} digits")
    return int(digits)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Number(f"a number too large for a float ({text[:40]})")
    return value


def _parse_constant(name: str) -> float:
    raise _Number(f"{name} (not a JSON number)")


class _Number(Exception):
    pass


_STRUCT_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _deepest(text: str) -> int:
    """Deepest nesting in JSON text (strings skipped), counted in C: the strings and then
    everything but brackets are cut out, and the running depth's maximum is taken."""
    brackets = _NOT_BRACKET_RE.sub("", _STRING_RE.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


def _depth_of(text: str) -> tuple[int, int]:
    """Deepest nesting in JSON text and the line where it is reached (strings skipped)."""
    depth = deepest = 0
    at = 0
    for m in _STRUCT_RE.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
                if deepest > MAX_JSON_DEPTH:
                    break
        elif tok in "]}":
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1


def _duplicate_line(text: str, key: str) -> int | None:
    """Line of the first repeated ``key`` within one object (valid JSON text assumed)."""
    stack: list[set[str] | None] = []
    for m in _STRUCT_RE.finditer(text):
        tok = m.group()
        if tok == "{":
            stack.append(set())
        elif tok == "[":
            stack.append(None)
        elif tok in "]}":
            stack.pop()
        elif stack and stack[-1] is not None:
            # a string inside an object is a key when a ':' follows it
            if text[m.end() : m.end() + 256].lstrip().startswith(":"):
                name = json.loads(tok)
                keys = stack[-1]
                if name == key and name in keys:
                    return text.count("\n", 0, m.start()) + 1
                keys.add(name)
    return None


def parse_json(
    text: str,
    *,
    source: str | None = None,
    line: int | None = None,
    what: str = "JSON",
) -> Any:
    """Parse JSON text strictly (see the module docstring); errors name ``source`` and line.

    Parameters
    ----------
    text : str
        The JSON text.
    source : str, optional
        The file (or option, e.g. ``--facts``) the text came from.
    line : int, optional
        The text's line in its file (for one JSONL line); otherwise lines are counted in
        ``text``.
    what : str
        What the text is, for messages.
    """
    # only text with enough brackets can nest too deeply; skip the scan otherwise, and
    # find the line (a slower scan) only for text that does
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _deepest(text) > MAX_JSON_DEPTH:
        depth, depth_line = _depth_of(text)
    else:
        depth = depth_line = 0
    if depth > MAX_JSON_DEPTH:
        raise InputError(
            f"{what} is nested too deeply (over {MAX_JSON_DEPTH} levels)",
            path=source,
            line=line if line is not None else depth_line,
        )
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except _Duplicate as dup:
        at = line if line is not None else _duplicate_line(text, dup.key)
        raise InputError(f"duplicate key {dup.key!r} in {what}", path=source, line=at) from None
    except _Number as exc:
        raise InputError(f"{what} holds {exc}", path=source, line=line) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid {what} ({exc.msg} at column {exc.colno})",
            path=source,
            line=line if line is not None else exc.lineno,
        ) from None
    except RecursionError:  # pragma: no cover - the depth scan refuses first
        raise InputError(f"{what} is nested too deeply", path=source, line=line) from None
    if "\\u" in text and _SURROGATE_ESCAPE_RE.search(text):
        found = first_bad_string(value, surrogates_only=True)
        if found is not None:
            bad = found[0]
            raise InputError(
                f"{what} holds a string that is not valid Unicode (a lone surrogate escape, "
                f"{bad[:40]!r})",
                path=source,
                line=line,
            )
    return value


_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_json(path: str | os.PathLike[str], *, limit: int, what: str = "JSON file") -> Any:
    """:func:`read_text` then :func:`parse_json`."""
    return parse_json(read_text(path, limit=limit, what=what), source=os.fspath(path), what=what)


# --------------------------------------------------------------------------- YAML


def _yaml_loader() -> type:
    import yaml

    class StrictSafeLoader(yaml.SafeLoader):
        """SafeLoader that refuses duplicate keys, aliases and non-finite numbers."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):  # pragma: no cover - the scan refuses first
                event = self.peek_event()
                raise _YamlRefusal("YAML aliases (*name) are not allowed", event.start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    raise _YamlRefusal(
                        "a mapping key must be a scalar", key_node.start_mark
                    ) from None
                if key in seen:
                    raise _YamlRefusal(f"duplicate key {key!r}", key_node.start_mark)
                seen[key] = True
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_float(self, node: Any) -> float:
            value = super().construct_yaml_float(node)
            if not math.isfinite(value):
                raise _YamlRefusal(
                    f"the number {node.value!r} is not finite (NaN and infinities are refused)",
                    node.start_mark,
                )
            return value

        def construct_yaml_int(self, node: Any) -> int:
            digits = str(node.value).lstrip("+-")
            if len(digits) > MAX_INT_DIGITS:
                raise _YamlRefusal(f"an integer with {len(digits)} digits", node.start_mark)
            return super().construct_yaml_int(node)

    StrictSafeLoader.add_constructor(
        "tag:yaml.org,2002:float", StrictSafeLoader.construct_yaml_float
    )
    StrictSafeLoader.add_constructor("tag:yaml.org,2002:int", StrictSafeLoader.construct_yaml_int)
    StrictSafeLoader.add_constructor(
        "tag:yaml.org,2002:map", lambda loader, node: _construct_map(loader, node)
    )
    return StrictSafeLoader


def _construct_map(loader: Any, node: Any) -> Any:
    # yaml's own map constructor is a generator (two-step construction); checking keys
    # first, then building, keeps the duplicate check ahead of any value.
    data: dict[Any, Any] = {}
    yield data
    loader.flatten_mapping(node)
    data.update(loader.construct_mapping(node))


class _YamlRefusal(Exception):
    def __init__(self, message: str, mark: Any) -> None:
        self.message = message
        self.mark = mark


_LOADER: type | None = None


def parse_yaml(
    text: str,
    *,
    source: str | None = None,
    what: str = "YAML document",
    max_depth: int = MAX_YAML_DEPTH,
    max_nodes: int = MAX_YAML_NODES,
) -> Any:
    """Parse YAML text safely (see the module docstring); errors name ``source`` and line."""
    global _LOADER
    import yaml

    if _LOADER is None:
        _LOADER = _yaml_loader()

    def fail(message: str, mark: Any = None) -> InputError:
        return InputError(message, path=source, line=None if mark is None else int(mark.line) + 1)

    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise fail(f"YAML aliases (*name) are not allowed in a {what}", event.start_mark)
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > max_depth:
                    raise fail(f"nested too deeply (over {max_depth} levels)", event.start_mark)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(
                event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)
            ):
                nodes += 1
                if nodes > max_nodes:
                    raise fail(f"too many YAML nodes (over {max_nodes:,})", event.start_mark)
                tag = getattr(event, "tag", None)
                if tag and tag.startswith("tag:yaml.org,2002:python"):
                    raise fail(f"Python tags ({tag}) are not allowed", event.start_mark)
        return yaml.load(text, Loader=_LOADER)
    except InputError:
        raise
    except _YamlRefusal as exc:
        raise fail(exc.message, exc.mark) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise fail(f"not valid safe YAML: {problem}", mark) from None
    except (RecursionError, ValueError) as exc:
        raise fail(f"cannot read the {what} ({type(exc).__name__})") from None
