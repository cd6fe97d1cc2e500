"""``hybridroute demo``: the main job."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import typer


def demo(
    rules: Path | None = typer.Option(
        None, "--rules", help="Rules file (default: the bundled example)."
    ),
    tickets: Path | None = typer.Option(
        None, "--tickets", help="JSONL of {id, text, facts} (default: the bundled examples)."
    ),
) -> None:
    """Route the bundled example tickets through the example rules and print a table."""
    from rich.console import Console
    from rich.table import Table

    from ..exceptions import FactsError
    from ..rules import load_rules

    examples = resources.files("hybridroute") / "examples"
    rules_path = rules or Path(str(examples / "support_rules.yaml"))
    tickets_path = tickets or Path(str(examples / "tickets.jsonl"))
    ruleset = load_rules(rules_path)
    table = Table(title=f"{ruleset.name} v{ruleset.version}: decisions for {tickets_path.name}")
    for col in ("id", "ticket", "destination", "reason", "rule", "detail"):
        table.add_column(col, overflow="fold")
    with open(tickets_path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FactsError(
                    f"{tickets_path}, line {lineno}: not valid JSON ({exc.msg})"
                ) from None
            try:
                decision = ruleset.decide(item.get("facts", {}))
            except FactsError as exc:
                raise FactsError(f"{tickets_path}, line {lineno}: {exc}") from None
            text = item.get("text", "")
            table.add_row(
                str(item.get("id", lineno)),
                text if len(text) <= 48 else text[:47] + "…",
                decision.selected_destination,
                decision.reason_code,
                decision.rule_id or "(default)",
                json.dumps(dict(decision.to_dict()["detail"]), ensure_ascii=False)
                if decision.detail
                else "",
            )
    Console(width=160).print(table)


def register(app: typer.Typer) -> None:
    """Register ``demo`` on ``app``."""
    app.command("demo")(demo)
