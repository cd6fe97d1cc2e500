"""``hybridroute route``: route one ticket (facts + text) and print the decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..exceptions import FactsError, UserInputError


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
            f"label       : {d['label']} (confidence {d['confidence']:.3f}, threshold "
            f"{'none' if d['threshold'] is None else format(d['threshold'], '.4f')}, "
            f"margin {d['margin']:.3f})"
        )
    detail = dict(d["detail"])
    ranking = detail.pop("classifier", None)
    if ranking and ranking.get("labels"):
        top = sorted(zip(ranking["labels"], ranking["scores"], strict=True), key=lambda x: -x[1])[
            :3
        ]
        typer.echo(
            "ranking     : "
            + ", ".join(f"{lab} {score:.3f}" for lab, score in top)
            + " (raw scores)"
        )
    if detail:
        typer.echo(f"detail      : {json.dumps(detail, ensure_ascii=False)}")
    typer.echo(f"router      : {d['router']} {d['router_version']}")
    typer.echo(f"snapshot    : {d['snapshot_hash'][:16]}")


def _read_batch(path: Path):
    """Yield (line number, item) from a JSONL batch file, with clear errors."""
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserInputError(f"{path}, line {lineno}: not valid JSON ({exc.msg})") from None
            except UnicodeDecodeError:
                raise UserInputError(f"{path}, line {lineno}: not UTF-8 text") from None
            if not isinstance(item, dict):
                raise UserInputError(f"{path}, line {lineno}: each line must be a JSON object")
            unknown = set(item) - {"id", "text", "facts", "evidence"}
            if unknown:
                raise UserInputError(f"{path}, line {lineno}: unknown key(s) {sorted(unknown)}")
            if "text" in item and not isinstance(item["text"], str):
                raise UserInputError(f"{path}, line {lineno}: 'text' must be a string")
            yield lineno, item


def _route_batch(
    router_dir: Path, input_path: Path, log_path: Path | None, as_json: bool, sensitive: list[str]
) -> None:
    from collections import Counter

    from rich.progress import Progress

    from ..records import DecisionLog
    from ..router import load_router

    router = load_router(router_dir)
    items = list(_read_batch(input_path))
    log = DecisionLog(log_path, sensitive_fields=sensitive) if log_path is not None else None
    counts: Counter[str] = Counter()
    chunk = 256
    try:
        with Progress(transient=True, disable=as_json) as progress:
            task = progress.add_task(f"routing {input_path.name}", total=len(items))
            for start in range(0, len(items), chunk):
                part = items[start : start + chunk]
                try:
                    decisions = router.route_many([it for _, it in part])
                except FactsError:
                    # find the offending line for the message
                    for lineno, it in part:
                        try:
                            router.rules.validate_facts(it.get("facts"))
                        except FactsError as exc:
                            raise FactsError(f"{input_path}, line {lineno}: {exc}") from None
                    raise
                for (lineno, it), d in zip(part, decisions, strict=True):
                    counts[d.selected_destination] += 1
                    if log is not None:
                        log.append(d, item_id=str(it.get("id", lineno)))
                    if as_json:
                        typer.echo(
                            json.dumps(
                                {"id": it.get("id", lineno), **d.to_dict()}, ensure_ascii=False
                            )
                        )
                progress.advance(task, len(part))
    finally:
        if log is not None:
            log.close()
    if not as_json:
        typer.echo(
            f"routed {len(items)} items with {router.name} {router.version}"
            + (f"; logged to {log_path}" if log_path else "")
        )
        for dest, n in counts.most_common():
            typer.echo(f"  {dest:<22} {n}")


def route(
    rules: Path | None = typer.Option(
        None, "--rules", help="Rules file (YAML): route on facts alone."
    ),
    router: Path | None = typer.Option(None, "--router", help="Router bundle directory."),
    facts: str = typer.Option("{}", "--facts", help="Facts as JSON, or @PATH to a JSON file."),
    text: str | None = typer.Option(None, "--text", help="Ticket text (with --router)."),
    input_path: Path | None = typer.Option(
        None,
        "--input",
        help='JSONL batch (with --router): {"text": ..., "facts": {...}, "id"?: ...} per line.',
    ),
    log: Path | None = typer.Option(
        None, "--log", help="Append the decisions to this decision log (SQLite)."
    ),
    sensitive: list[str] = typer.Option(
        [],
        "--sensitive",
        help="A fact stored in the log as a salted hash (salt: HYBRIDROUTE_LOG_SALT); repeatable.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print full decision records as JSON."),
) -> None:
    """Route one ticket (or a JSONL batch) and print the decision."""
    if (rules is None) == (router is None):
        raise typer.BadParameter(
            "give exactly one of --rules FILE or --router DIR", param_hint="--rules/--router"
        )
    if input_path is not None:
        if router is None:
            raise typer.BadParameter("--input needs --router", param_hint="--input")
        _route_batch(router, input_path, log, as_json, sensitive)
        return
    if rules is not None:
        from ..rules import load_rules

        if text is not None:
            raise typer.BadParameter(
                "rules read facts, never text; use --router to classify text", param_hint="--text"
            )
        decision = load_rules(rules).decide(read_facts(facts))
    else:
        from ..router import load_router

        decision = load_router(router).route(read_facts(facts), text)  # type: ignore[arg-type]
    if log is not None:
        from ..records import DecisionLog

        with DecisionLog(log, sensitive_fields=sensitive) as dl:
            dl.append(decision)
    if as_json:
        typer.echo(json.dumps(decision.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_decision(decision)


def register(app: typer.Typer) -> None:
    """Register ``route`` on ``app``."""
    app.command("route")(route)
