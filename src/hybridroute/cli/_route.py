"""``hybridroute route``: route one ticket (facts + text) and print the decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..exceptions import FactsError


def read_facts(value: str) -> dict[str, Any]:
    """Parse ``--facts``: inline JSON, or ``@PATH`` to a JSON file."""
    source = "--facts"
    text = value
    if value.startswith("@"):
        path = Path(value[1:])
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise FactsError(f"cannot read facts file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise FactsError(f"facts file {path} is not UTF-8 text") from None
    try:
        facts = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactsError(
            f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(facts, dict):
        raise FactsError(f"{source} must be a JSON object, got {type(facts).__name__}")
    return facts


def print_decision(decision: Any) -> None:
    """Human-readable summary of one decision."""
    d = decision.to_dict()
    typer.echo(f"destination : {d['selected_destination']}")
    typer.echo(f"reason      : {d['reason_code']}")
    typer.echo(f"stage       : {d['stage']}" + (f" (rule {d['rule_id']})" if d["rule_id"] else ""))
    if d["label"] is not None:
        typer.echo(
            f"label       : {d['label']} (confidence {d['confidence']:.3f}, "
            f"threshold {d['threshold']}, margin {d['margin']})"
        )
    if d["detail"]:
        typer.echo(f"detail      : {json.dumps(d['detail'], ensure_ascii=False)}")
    typer.echo(f"router      : {d['router']} {d['router_version']}")
    typer.echo(f"snapshot    : {d['snapshot_hash'][:16]}")


def route(
    rules: Path | None = typer.Option(None, "--rules", help="Rules file (YAML)."),
    facts: str = typer.Option("{}", "--facts", help="Facts as JSON, or @PATH to a JSON file."),
    as_json: bool = typer.Option(False, "--json", help="Print the full decision record as JSON."),
) -> None:
    """Route one ticket through a rules file and print the decision."""
    from ..rules import load_rules

    if rules is None:
        raise typer.BadParameter("give --rules FILE", param_hint="--rules")
    ruleset = load_rules(rules)
    decision = ruleset.decide(read_facts(facts))
    if as_json:
        typer.echo(json.dumps(decision.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_decision(decision)


def register(app: typer.Typer) -> None:
    """Register ``route`` on ``app``."""
    app.command("route")(route)
