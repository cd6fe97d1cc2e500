"""``hybridroute outcomes add`` and ``hybridroute audits pending``: close the loop on a log.

``outcomes add FILE --log URL`` attaches outcomes (what really happened) to logged
decisions, from JSON lines (``.jsonl``) or CSV (``.csv``, a header row naming the fields):
each names a decision by ``decision_id`` or by ``request_id`` + ``router`` +
``router_version``, gives ``gold_intent`` and/or ``gold_next_step``, a ``source`` and
optionally ``at``. The file is read through :mod:`hybridroute._safeio` (a regular file, a
byte limit enforced while reading, strict UTF-8 and JSON) and written all or nothing: any
bad row stops the command naming file, row and column (exit 2), with nothing written.

The log checks every outcome against the decision it names (a live decision; ``audit``
only for an audited one; a gold intent among the labels of its router version, a gold next
step among its destinations; ``at`` not before the decision). A version logged before the
log recorded its labels is registered with ``--router BUNDLE``.

``audits pending --log URL`` lists the audited decisions that have no audit outcome yet.

``monitor --log URL`` says whether the auto-route precision still holds, and exits with
a code a cron job or CI step can act on (:data:`MONITOR_EXIT_CODES`):

* 0 -- ``holding`` or ``certified_online``: nothing contradicts the guarantee;
* 1 -- ``breach``: the audit labels show the precision fell below the target;
* 2 -- an error: a bad option, a log that cannot be read, no audited decision of the
  version, no labels known for it;
* 3 -- ``insufficient``: too few audit labels to say yet;
* 4 -- disputed: more than ``--max-disputed-share`` of the labelled audited decisions have
  audit labels that disagree (and no adjudication settles them), so the labels
  themselves are in question (a breach still exits 1).
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

_LOG_HELP = (
    "Decision log to read: a SQLite file, sqlite:///PATH, or postgresql://USER@HOST/DB "
    "(it must exist)."
)

#: The exit code of ``hybridroute monitor`` by state (see the module docstring); disputes
#: over the allowed share exit :data:`DISPUTED_EXIT_CODE` unless the state is a breach.
MONITOR_EXIT_CODES = {"holding": 0, "certified_online": 0, "breach": 1, "insufficient": 3}
DISPUTED_EXIT_CODE = 4


def monitor_exit_code(state: dict[str, Any]) -> int:
    """The exit code of a monitor state (:func:`hybridroute.monitoring.monitor_log`)."""
    status = str(state.get("status"))
    if status == "breach":
        return MONITOR_EXIT_CODES[status]
    if (state.get("disputes") or {}).get("exceeded"):
        return DISPUTED_EXIT_CODE
    return MONITOR_EXIT_CODES.get(status, 2)


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
    """The outcomes of a CSV file, each numbered by the line it starts on (the header is
    line 1, the first data row line 2: the numbers a spreadsheet shows)."""
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
                    row=1,
                    column=name,
                    header=True,
                )
            if name in seen:
                raise OutcomeError(
                    "appears twice in the header", path=where, row=1, column=name, header=True
                )
            seen.add(name)
        items: list[Any] = []
        rows: list[int] = []
        before = reader.line_num  # lines read so far: a record starts on the next one
        for cells in reader:
            row, before = before + 1, reader.line_num
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
    file: Path | None = typer.Argument(
        None, help="Outcomes: a .jsonl or .csv file (optional with --router)."
    ),
    log: str = typer.Option(..., "--log", help=_LOG_HELP),
    routers: list[Path] | None = typer.Option(
        None,
        "--router",
        help="A router bundle whose version's labels and destinations the log should know "
        "(for decisions logged before the log recorded them); repeat for several versions.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Attach outcomes (gold intent / next step, source, time) to logged decisions.

    With --router, first register each bundle's version (its labels and destinations) in
    the log; with --router alone, only register them.
    """
    from .._scrub import Scrubber
    from ..records import OutcomeReport, open_log
    from ..router import load_router

    if file is None and not routers:
        raise InputError("give a file of outcomes, or --router BUNDLE to register its version")
    items, rows = read_outcomes_file(file) if file is not None else ([], [])
    bundles = [load_router(r) for r in routers or ()]
    with open_log(log, create=False) as dl:
        registered = [dl.register_router(bundle) for bundle in bundles]
        report = (
            dl.add_outcomes(items, rows=rows, path=str(file))
            if file is not None
            else OutcomeReport(0, 0)
        )
    scrub = Scrubber()
    if as_json:
        doc = report.to_dict()
        if registered:
            doc["registered"] = [{"router": v.router, "router_version": v.router_version}
                                 for v in registered]  # fmt: skip
        typer.echo(scrub.json(doc, indent=2))
        return
    for v in registered:
        typer.echo(
            scrub.text(
                f"router {v.router} version {v.router_version}: {len(v.labels)} labels, "
                f"{len(v.destinations)} destinations known to the log"
            )
        )
    if file is not None:
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
    max_disputed_share: float = typer.Option(
        0.05,
        "--max-disputed-share",
        help="Flag the labels (exit 4) when more than this share of the labelled audited "
        "decisions is disputed (their audit labels disagree, no adjudication settles them).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Is the auto-route precision still at least its target? From the log's audits.

    Exit 0 holding / certified_online, 1 breach, 2 error, 3 insufficient, 4 disputed.
    """
    from .._scrub import Scrubber
    from ..monitoring import monitor_log
    from ..records import open_log
    from ..records._url import display_url

    if not 0 <= max_disputed_share <= 1:
        raise InputError(
            f"must be between 0 and 1, got {max_disputed_share}", path="--max-disputed-share"
        )
    target, delta, reference, bundle = _promise(router, target, delta)
    with open_log(log, create=False) as dl:
        try:
            state = monitor_log(
                dl,
                target=target,
                delta=delta,
                router_version=router_version,
                reference=reference,
                routers=() if bundle is None else (bundle,),
                max_disputed_share=max_disputed_share,
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
    code = monitor_exit_code(state)
    if as_json:
        typer.echo(scrub.json({**state, "exit_code": code}, indent=2))
        raise typer.Exit(code)
    p = state["precision"]

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}"

    typer.echo(
        f"router version {state['router_version']}: {state['status']} "
        f"(target {state['target']:g}, delta {state['delta']:g})"
    )
    d = state["disputes"]
    typer.echo(
        f"audit labels {state['labels']} of {state['audited']} audited decisions "
        f"({state['pending']} pending, {d['disputed']} disputed, {d['adjudicated']} "
        "adjudicated)"
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
    if d["exceeded"]:
        typer.echo(
            f"DISPUTED         {d['disputed']} of {d['labelled']} labelled decisions "
            f"({d['share']:.4f}) have audit labels that disagree, more than the "
            f"{d['max_share']:g} allowed: each counts as wrong until an outcome of source "
            "adjudication settles it"
        )
    invalid = state["invalid_outcomes"]
    parts = []
    if invalid["count"]:
        reasons = "; ".join(f"{n} {why}" for why, n in invalid["by_reason"].items())
        parts.append(f"{invalid['count']} audit label(s) ({reasons})")
    if invalid.get("shadow"):
        parts.append(f"{invalid['shadow']} outcome(s) of shadow decisions")
    if invalid.get("audit_not_audited"):
        parts.append(f"{invalid['audit_not_audited']} audit outcome(s) of unaudited decisions")
    if parts:
        typer.echo(
            scrub.text(
                "left out        stored outcomes the log would refuse today: " + ", ".join(parts)
            )
        )
    if run_id:
        typer.echo(f"mlflow run {run_id}")
    raise typer.Exit(code)


def _promise(
    router: Path | None, target: float | None, delta: float | None
) -> tuple[float, float, dict[str, Any] | None, Any]:
    """The (target, delta) to watch, the calibration mix and the router: the bundle's, or
    the options (no mix, no router)."""
    if router is not None:
        if target is not None or delta is not None:
            raise InputError("give --router or --target/--delta, not both", path="--router")
        from ..router import load_router

        bundle = load_router(router)
        policy = bundle.policy
        guarantee = policy.guarantee
        t, d = guarantee.get("target"), guarantee.get("delta")
        if t is None or d is None:
            raise InputError(
                "the router's policy promises no precision target; give --target and --delta",
                path=str(router),
            )
        return float(t), float(d), policy.calibration_data, bundle
    if target is None or delta is None:
        raise InputError("give --router BUNDLE, or both --target and --delta", path="--target")
    for name, v in (("--target", target), ("--delta", delta)):
        if not 0 < v < 1:
            raise InputError(f"must be between 0 and 1, got {v}", path=name)
    return target, delta, None, None


def register(app: typer.Typer) -> None:
    """Add the ``outcomes`` and ``audits`` command groups and ``monitor`` to ``app``."""
    outcomes = typer.Typer(help="Outcomes of logged decisions.", no_args_is_help=True)
    outcomes.command("add")(outcomes_add)
    audits = typer.Typer(help="Audit sampling of auto-routed decisions.", no_args_is_help=True)
    audits.command("pending")(audits_pending)
    app.add_typer(outcomes, name="outcomes")
    app.add_typer(audits, name="audits")
    app.command("monitor")(monitor_cmd)
