"""Generated parts of hand-written pages: ``<!-- gen:NAME ARG -->`` lines are replaced.

The File formats page (and a few others) keep their prose by hand, but every fact that the
code defines -- the fact types, the guards, the log's tables, the layout of a bundle, the
scores file's columns -- is inserted here from the code when the site is built:

* ``<!-- gen:docstring MODULE -->``: a module's docstring, reStructuredText turned into
  Markdown (:func:`rst_to_md`);
* ``<!-- gen:fact-types -->``: the fact types and which take ``enum`` / ``min`` / ``max``;
* ``<!-- gen:guards -->``: the built-in guards and what each does;
* ``<!-- gen:log-schema sqlite|postgres -->``: the decision log's tables, as a fresh log
  creates them;
* ``<!-- gen:value MODULE NAME -->``: a constant, inline in a sentence of its own;
* ``<!-- gen:capacity -->``: the service's capacity tables, from the committed throughput
  run (:mod:`gen_bench`).
"""

from __future__ import annotations

import importlib
import inspect
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

_MARKER = re.compile(r"^<!-- gen:([a-z-]+)(?: (.*?))? -->$", re.MULTILINE)


# --------------------------------------------------------------------------- RST -> MD
_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?: <[^>]+>)?`")


def _inline(text: str) -> str:
    def role(m: re.Match[str]) -> str:
        target = m.group(1).strip()
        if m.group(0).startswith(
            tuple(f":{r}:`~" for r in ("mod", "class", "func", "meth", "data", "attr", "exc"))
        ):
            target = target.rsplit(".", 1)[-1]
        return f"`{target}`"

    text = _ROLE.sub(role, text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _table(lines: list[str]) -> list[str]:
    """An RST simple table (``====  ====`` borders) as a Markdown table."""
    border = lines[0]
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", border)]
    rows: list[list[str]] = []
    borders = 0
    for line in lines[1:]:
        if re.fullmatch(r"[= ]+", line.strip() or "x"):
            borders += 1
            continue
        cells = []
        for i, (start, _) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else len(line)
            cells.append(line[start:end].strip())
        if rows and not cells[0] and borders > 0:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    if not rows:
        return []
    out = ["| " + " | ".join(_inline(c) for c in rows[0]) + " |", "|" + "---|" * len(spans)]
    out += ["| " + " | ".join(_inline(c).replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
    return out


def rst_to_md(doc: str, heading: str = "###") -> str:
    """A docstring written in reStructuredText (as the code's are) as Markdown."""
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if re.fullmatch(r"=+( +=+)+", line.strip()):  # a simple table
            j, borders = i, 0
            while j < len(lines) and lines[j].strip():
                if re.fullmatch(r"[= ]+", lines[j].strip()):
                    borders += 1
                j += 1
            out += _table(lines[i:j])
            i = j
            continue
        if (
            line.strip()
            and re.fullmatch(r"-{3,}|={3,}", nxt.strip())
            and len(nxt.strip()) >= len(line.strip())
        ):
            out.append(f"{heading} {_inline(line.strip())}")
            i += 2
            continue
        if line.rstrip().endswith("::"):
            text = line.rstrip()[:-2].rstrip()
            if text:
                out.append(_inline(text) + ":")
            # the literal block: the indented lines after a blank line
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t"))):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *inspect.cleandoc("\n".join(block)).splitlines(), "```", ""]
            i = j
            continue
        out.append(_inline(line))
        i += 1
    return "\n".join(out)


# --------------------------------------------------------------------------- generators
def docstring(module: str) -> str:
    """A module's docstring as Markdown."""
    return rst_to_md(importlib.import_module(module).__doc__ or "")


def fact_types(_: str = "") -> str:
    """The fact types, and which take ``enum`` and ``min`` / ``max``."""
    from hybridroute import _facts

    lines = ["| type | `enum` | `min` / `max` |", "|---|---|---|"]
    for t in _facts._FACT_TYPES:
        enum = "yes" if t in _facts._ENUM_TYPES else ""
        bounds = "yes" if t in _facts._BOUND_TYPES else ""
        lines.append(f"| `{t}` | {enum} | {bounds} |")
    return "\n".join(lines)


def guards(_: str = "") -> str:
    """The built-in guards: the name a rules file uses, and the guard's own docstring."""
    from hybridroute.rules import GUARDS

    lines = ["| guard | what it does |", "|---|---|"]
    for name, cls in GUARDS.items():
        doc = " ".join(_inline(inspect.getdoc(cls) or "").split("\n\n")[0].split())
        doc = doc.replace("|", "\\|")
        lines.append(f"| `{name}` | {doc} |")
    return "\n".join(lines)


def log_schema(backend: str) -> str:
    """The decision log's tables as a fresh log of ``backend`` creates them."""
    if backend.strip() == "postgres":
        from hybridroute.records import _postgres

        sql = _postgres._CREATE.strip()
        return "```sql\n" + sql + "\n```"
    import sqlite3

    from hybridroute.records import DecisionLog

    with tempfile.TemporaryDirectory(prefix="hr-docs-") as tmp:
        path = Path(tmp) / "decisions.sqlite"
        DecisionLog(path).close()
        con = sqlite3.connect(path)
        try:
            rows = con.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name"
            ).fetchall()
        finally:
            con.close()
    return "```sql\n" + ";\n".join(r[0] for r in rows) + ";\n```"


def value(arg: str) -> str:
    """``MODULE NAME``: the constant's value, as code."""
    module, name = arg.split()
    return f"`{getattr(importlib.import_module(module), name)!r}`"


def capacity(arg: str) -> str:
    """The service's capacity tables, from the committed throughput run (``gen_bench``)."""
    from gen_bench import capacity as tables

    return tables(arg)


GENERATORS: dict[str, Callable[[str], str]] = {
    "capacity": capacity,
    "docstring": docstring,
    "fact-types": fact_types,
    "guards": guards,
    "log-schema": log_schema,
    "value": value,
}


def expand(markdown: str, where: str) -> str:
    """Replace every ``<!-- gen:NAME ARG -->`` line of a page (an unknown name is an error)."""

    def one(m: re.Match[str]) -> str:
        name, arg = m.group(1), m.group(2) or ""
        if name not in GENERATORS:
            raise ValueError(f"{where}: unknown generated part {name!r}")
        return GENERATORS[name](arg)

    return _MARKER.sub(one, markdown)
