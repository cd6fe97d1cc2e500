"""A griffe extension: the code's reStructuredText-flavoured docstrings, rendered as Markdown.

hybridroute's docstrings are numpydoc with Sphinx-style inline markup (``code``,
:class:`X`, ``::`` literal blocks, ``>>>`` examples, simple tables). mkdocstrings renders
docstring text as Markdown, where ``>>>`` is a nested quote and ``::`` means nothing, so
before the numpydoc sections are parsed each docstring is rewritten here -- the sections
(``Parameters`` / ``----------``) are left as they are:

* ``code`` -> `code`;
* :role:`hybridroute.x.Name` -> a link to the name's reference entry when it has one,
  else `Name` as code;
* a paragraph ending in ``::`` and its indented block -> a fenced text block;
* ``>>>`` examples (with their ``...`` lines and output) -> a fenced ``pycon`` block;
* simple tables (``====  ====``) -> Markdown tables.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import griffe

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

_ROLE = re.compile(r":(?:py:)?([a-z]+):`(~?)([^`<]*?)(?: <([^>]+)>)?`")
_LINKABLE: set[str] | None = None


def _linkable() -> set[str]:
    """The identifiers that have a reference entry (module pages and their names)."""
    global _LINKABLE
    if _LINKABLE is None:
        import importlib

        import gen_api

        found: set[str] = set()
        for module in gen_api.documented_modules():
            found.add(module)
            mod = importlib.import_module(module)
            for name in mod.__all__:
                if not name.startswith("__") and gen_api.identifier(module, name)[1] is None:
                    found.add(f"{module}.{name}")
        _LINKABLE = found
    return _LINKABLE


def _role(m: re.Match[str]) -> str:
    tilde, target, explicit = m.group(2), m.group(3).strip(), m.group(4)
    path = (explicit or target).strip().lstrip("~.")
    shown = target if explicit else (path.rsplit(".", 1)[-1] if tilde else path)
    if path in _linkable():
        return f"[`{shown}`][{path}]"
    return f"`{shown}`"


def inline(text: str) -> str:
    """Inline markup: roles and double-backquoted code."""
    text = _ROLE.sub(_role, text)
    return re.sub(r"``(.+?)``", r"`\1`", text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _table(lines: list[str]) -> list[str]:
    border = lines[0].strip()
    offset = _indent(lines[0])
    spans = [(m.start() + offset, m.end() + offset) for m in re.finditer(r"=+", border)]
    rows: list[list[str]] = []
    for line in lines[1:]:
        if re.fullmatch(r"[= ]+", line.strip()):
            continue
        cells = []
        for i, (start, _) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else len(line)
            cells.append(line[start:end].strip())
        if rows and not cells[0]:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    pad = " " * offset
    out = [
        pad + "| " + " | ".join(inline(c) for c in rows[0]) + " |",
        pad + "|" + "---|" * len(spans),
    ]
    out += [
        pad + "| " + " | ".join(inline(c).replace("|", "\\|") for c in r) + " |" for r in rows[1:]
    ]
    return out


def convert(doc: str) -> str:
    """One docstring, its numpydoc sections kept, its RST markup made Markdown."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        if stripped.startswith(">>>"):
            pad = " " * _indent(line)
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(pad) :] if lines[i].startswith(pad) else lines[i].strip())
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [pad + "```pycon", *(pad + b for b in block), pad + "```"]
            continue
        if re.fullmatch(r"=+( +=+)+", stripped):
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            out += _table(lines[i:j])
            i = j
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            text = line.rstrip()[:-2].rstrip()
            base = _indent(line)
            if text.strip():
                out.append(inline(text) + ":")
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block = []
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                cut = min(_indent(b) for b in block if b.strip())
                pad = " " * base
                out += ["", pad + "```text", *(pad + b[cut:] for b in block), pad + "```", ""]
            i = j
            continue
        out.append(inline(line))
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring griffe loads (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and obj.docstring.value:
            obj.docstring.value = convert(obj.docstring.value)
