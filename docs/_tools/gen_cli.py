"""The command-line reference, generated from the Typer application (``hybridroute.cli.app``).

Every command and command group gets a section whose anchor is its path joined by hyphens
(``hybridroute rules test`` -> ``#hybridroute-rules-test``): its help text, its usage line
and a table of its arguments and options with their types, defaults and help, all read from
the command definitions. :func:`command_paths` is what the docs test checks the page against.
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Iterator
from typing import Any

PAGE = "reference/cli.md"


def _root() -> tuple[Any, Any]:
    import typer

    from hybridroute.cli import app

    command = typer.main.get_command(app)
    ctx_type = type(command.make_context("hybridroute", ["--help"], resilient_parsing=True))
    return command, ctx_type


def _walk(
    command: Any, ctx: Any, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    yield path, command, ctx
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            sub_ctx = type(ctx)(sub, info_name=name, parent=ctx)
            yield from _walk(sub, sub_ctx, (*path, name))


def commands() -> list[tuple[tuple[str, ...], Any, Any]]:
    """``(path, command, context)`` of every command and group, the root first."""
    root, ctx_type = _root()
    return list(_walk(root, ctx_type(root, info_name="hybridroute"), ("hybridroute",)))


def command_paths() -> list[str]:
    """``"hybridroute rules test"`` for every command and group below the root."""
    return [" ".join(path) for path, _, _ in commands()[1:]]


def anchor(path: str) -> str:
    """The section anchor of a command path."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def _type(param: Any) -> str:
    descriptor = getattr(param, "type_descriptor", None)
    ann = getattr(descriptor, "annotation", None)
    if getattr(param, "is_flag", False):
        return "flag"
    if inspect.isclass(ann) and issubclass(ann, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in ann)
    if ann is None:
        return "text"
    name = getattr(ann, "__name__", None) or str(ann)
    return {"str": "text", "Path": "path", "float": "number", "int": "integer"}.get(name, name)


def _default(param: Any) -> str:
    if getattr(param, "required", False):
        return "required"
    value = param.default
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or value is False or value == () or value == []:
        return ""
    if getattr(param, "is_flag", False) and value is True and param.secondary_opts:
        return f"`{param.opts[0]}`"
    return f"`{value}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _names(param: Any) -> str:
    if type(param).__name__.endswith("Argument"):
        return f"`{param.name.upper()}`"
    names = [*param.opts, *param.secondary_opts]
    return ", ".join(f"`{n}`" for n in names)


def _section(path: tuple[str, ...], command: Any, ctx: Any) -> list[str]:
    title = " ".join(path)
    level = "#" * min(2 + len(path) - 2, 4)
    lines = [f"{level} `{title}` {{#{anchor(title)}}}", ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines += [help_text, ""]
    usage = command.get_usage(ctx).strip()
    lines += ["```text", usage, "```", ""]
    if hasattr(command, "list_commands"):
        subs = [(n, command.get_command(ctx, n)) for n in command.list_commands(ctx)]
        lines += ["| command | what it does |", "|---|---|"]
        for name, sub in subs:
            short = _cell((sub.help or "").split("\n\n")[0])
            lines.append(f"| [`{name}`](#{anchor(title + ' ' + name)}) | {short} |")
        lines.append("")
        return lines
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    if params:
        lines += ["| argument / option | type | default | help |", "|---|---|---|---|"]
        for p in params:
            lines.append(f"| {_names(p)} | {_type(p)} | {_default(p)} | {_cell(p.help)} |")
        lines.append("")
    return lines


def page() -> str:
    """The markdown of the command-line reference."""
    found = commands()
    root_path, root, root_ctx = found[0]
    lines = [
        "# Command line",
        "",
        "Generated from the command definitions when the site is built. `hybridroute --help`",
        "and `hybridroute COMMAND --help` print the same text. Every command exits 0 on",
        "success, 2 on a user mistake (one line on stderr naming the file, row, field or",
        "option), 1 on a failure that is not the user's; commands that judge something",
        "(`rules test`, `promote`, `monitor`) document their other codes in their help.",
        "",
        "```text",
        root.get_usage(root_ctx).strip(),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for path, command, _ in found[1:]:
        title = " ".join(path)
        short = _cell((command.help or "").split("\n\n")[0])
        lines.append(f"| [`{title}`](#{anchor(title)}) | {short} |")
    lines.append("")
    for path, command, ctx in found[1:]:
        lines += _section(path, command, ctx)
    return "\n".join(lines)
