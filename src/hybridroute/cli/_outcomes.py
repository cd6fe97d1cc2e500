"""``hybridroute outcomes add`` and ``hybridroute audits pending``: close the loop on a log.

``outcomes add FILE --log URL`` attaches outcomes (what really happened) to logged
decisions, from JSON lines (``.jsonl``) or CSV (``.csv``, a header row naming the fields):
each names a decision by ``decision_id`` or by ``request_id`` + ``router`` +
``router_version``, gives ``gold_intent`` and/or ``gold_next_step``, a ``source`` and
optionally ``at``. The file is read through :mod:`hybridroute._safeio` (a regular file, a
byte limit enforced while reading, strict UTF-8 and JSON) and written all or nothing: any
bad row stops the command naming file, row and column (exit 2), with nothing written.

``audits pending --log URL`` lists the audited decisions that have no audit outcome yet.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import typer

from .._csv import unescape_formula
from .._safeio import iter_lines, parse_json, read_text
from ..exceptions import InputError

#: Most bytes of an outcomes file.
MAX_OUTCOMES_BYTES = 64 << 20
#: Most bytes of one JSONL line.
MAX_LINE_BYTES = 1 << 20
#: Most outcomes in one file (they are written in one transaction).
MAX_OUTCOMES = 100_000

_LOG_HELP = "Decision log: a SQLite file, sqlite:///PATH, or postgresql://USER@HOST/DB."


def _too_many(path: str) -> InputError:
    return InputError(f"more than {MAX_OUTCOMES:,} outcomes in one file; split it", path=path)


def _jsonl(path: Path) -> tuple[list[Any], list[int]]:
    where = str(path)
    items: list[Any] = []
    rows: list[int] = []
    for lineno, text in iter_lines(
        path, limit=MAX_OUTCOMES_BYTES, line_limit=MAX_LINE_BYTES, what="file of outcomes"
    ):
        if not text.strip():
            continue
        if len(items) >= MAX_OUTCOMES:
            raise _too_many(where)
        items.append(parse_json(text, source=where, line=lineno, what="outcome"))
        rows.append(lineno)
    return items, rows


def _csv(path: Path) -> tuple[list[Any], list[int]]:
    from ..records import OutcomeError
    from ..records._outcomes import OUTCOME_FIELDS

    where = str(path)
    text = read_text(path, limit=MAX_OUTCOMES_BYTES, what="file of outcomes")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return [], []
        seen: set[str] = set()
        for name in header:
            if name not in OUTCOME_FIELDS:
                raise OutcomeError(
                    f"is not an outcome field (fields: {', '.join(OUTCOME_FIELDS)})",
                    path=where,
                    row=0,
                    column=name,
                )
            if name in seen:
                raise OutcomeError("appears twice in the header", path=where, row=0, column=name)
            seen.add(name)
        items: list[Any] = []
        rows: list[int] = []
        for row, cells in enumerate(reader, start=1):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(header):
                raise OutcomeError(
                    f"has {len(cells)} cells, the header {len(header)}", path=where, row=row
                )
            if len(items) >= MAX_OUTCOMES:
                raise _too_many(where)
            # an empty cell is an absent field; a cell our own CSV writers escaped reads back
            items.append(
                {k: unescape_formula(v) for k, v in zip(header, cells, strict=False) if v != ""}
            )
            rows.append(row)
    except csv.Error as exc:
        raise InputError(f"not valid CSV ({exc})", path=where, line=reader.line_num) from None
    return items, rows


def read_outcomes_file(path: Path) -> tuple[list[Any], list[int]]:
    """The outcomes of a ``.jsonl`` or ``.csv`` file and the row number of each."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl(path)
    if suffix == ".csv":
        return _csv(path)
    raise InputError("an outcomes file must be JSON lines (.jsonl) or CSV (.csv)", path=str(path))


def outcomes_add(
    file: Path = typer.Argument(..., help="Outcomes: a .jsonl or .csv file."),
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Attach outcomes (gold intent / next step, source, time) to logged decisions."""
    from .._scrub import Scrubber
    from ..records import open_log

    items, rows = read_outcomes_file(file)
    with open_log(log, create=False) as dl:
        report = dl.add_outcomes(items, rows=rows, path=str(file))
    scrub = Scrubber()
    if as_json:
        typer.echo(scrub.json(report.to_dict(), indent=2))
    else:
        for line in report.summary_lines():
            typer.echo(scrub.text(line))


def audits_pending(
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    router_version: str | None = typer.Option(
        None, "--router-version", help="Only audits of this router version."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="List at most this many."),
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """List audited decisions that have no audit outcome yet (oldest first)."""
    from .._scrub import Scrubber
    from ..records import open_log

    with open_log(log, create=False) as dl:
        pending = dl.pending_audits(router_version=router_version, limit=limit)
    scrub = Scrubber()
    if as_json:
        typer.echo(scrub.json({"count": len(pending), "pending": pending}, indent=2))
        return
    typer.echo(f"{len(pending)} audit(s) pending")
    for p in pending:
        text = p["text"] if isinstance(p["text"], str) else ""
        shown = " ".join(text.split())
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        line = (
            f"{p['decision_id']}  request {p['request_id'] or '-'}  "
            f"{p['router']} {p['router_version']}  {p['logged_at']}  "
            f"-> {p['selected_destination']}  {shown!r}"
        )
        typer.echo(scrub.text(line))


def monitor_cmd(
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    router_version: str | None = typer.Option(
        None, "--router-version", help="The router version to watch (default: the only one)."
    ),
    router: Path | None = typer.Option(
        None, "--router", help="The router's bundle: its policy gives the target and delta."
    ),
    target: float | None = typer.Option(
        None, "--target", help="The precision promised (instead of --router)."
    ),
    delta: float | None = typer.Option(
        None, "--delta", help="Its allowed error probability (instead of --router)."
    ),
    track: bool = typer.Option(
        False, "--track/--no-track", help="Also log the state to MLflow (a run per call)."
    ),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI (default: ./mlflow.db)."
    ),
    experiment: str = typer.Option(
        "hybridroute-monitor", "--experiment", help="MLflow experiment name."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Is the auto-route precision still at least its target? From the log's audits."""
    from .._scrub import Scrubber
    from ..monitoring import monitor_log
    from ..records import open_log
    from ..records._url import display_url

    target, delta, reference = _promise(router, target, delta)
    with open_log(log, create=False) as dl:
        try:
            state = monitor_log(
                dl,
                target=target,
                delta=delta,
                router_version=router_version,
                reference=reference,
            )
        except ValueError as exc:
            raise InputError(str(exc), path=dl.where) from None
    scrub = Scrubber()
    run_id = None
    if track:
        from ..tracking import Tracker, log_monitor

        tracker = Tracker(tracking_uri, experiment=experiment, scrubber=scrub)
        run_id = log_monitor(tracker, state, log=display_url(log))
        if tracker.warning:
            typer.echo(f"warning: {scrub.text(tracker.warning)}", err=True)
        state = {**state, "mlflow_run_id": run_id}
    if as_json:
        typer.echo(scrub.json(state, indent=2))
        return
    p = state["precision"]

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}"

    typer.echo(
        f"router version {state['router_version']}: {state['status']} "
        f"(target {state['target']:g}, delta {state['delta']:g})"
    )
    typer.echo(
        f"audit labels {state['labels']} of {state['audited']} audited decisions "
        f"({state['pending']} pending, {state['conflicting_outcomes']} conflicting outcomes)"
    )
    typer.echo(
        f"auto-route precision {num(p['estimate'])}, anytime-valid bounds "
        f"[{num(p['lower'])}, {num(p['upper'])}]"
    )
    if state["breach"] is not None:
        b = state["breach"]
        typer.echo(f"breach detected at label {b['labels']} ({b['at'] or 'time not recorded'})")
    if state["shift"] is not None:
        sh = state["shift"]
        typer.echo(
            f"traffic shift    predicted-label mix {sh['total_variation']:.4f} total variation "
            f"from calibration; out-of-scope share {sh['oos_live']:.4f} live vs "
            f"{sh['oos_reference']:.4f} calibrated ({sh['n_live']} decisions)"
        )
    if run_id:
        typer.echo(f"mlflow run {run_id}")


def _promise(
    router: Path | None, target: float | None, delta: float | None
) -> tuple[float, float, dict[str, Any] | None]:
    """The (target, delta) to watch and the calibration mix: the bundle's policy, or the
    options (no mix)."""
    if router is not None:
        if target is not None or delta is not None:
            raise InputError("give --router or --target/--delta, not both", path="--router")
        from ..router import load_router

        policy = load_router(router).policy
        guarantee = policy.guarantee
        t, d = guarantee.get("target"), guarantee.get("delta")
        if t is None or d is None:
            raise InputError(
                "the router's policy promises no precision target; give --target and --delta",
                path=str(router),
            )
        return float(t), float(d), policy.calibration_data
    if target is None or delta is None:
        raise InputError("give --router BUNDLE, or both --target and --delta", path="--target")
    for name, v in (("--target", target), ("--delta", delta)):
        if not 0 < v < 1:
            raise InputError(f"must be between 0 and 1, got {v}", path=name)
    return target, delta, None


def register(app: typer.Typer) -> None:
    """Add the ``outcomes`` and ``audits`` command groups and ``monitor`` to ``app``."""
    outcomes = typer.Typer(help="Outcomes of logged decisions.", no_args_is_help=True)
    outcomes.command("add")(outcomes_add)
    audits = typer.Typer(help="Audit sampling of auto-routed decisions.", no_args_is_help=True)
    audits.command("pending")(audits_pending)
    app.add_typer(outcomes, name="outcomes")
    app.add_typer(audits, name="audits")
    app.command("monitor")(monitor_cmd)
