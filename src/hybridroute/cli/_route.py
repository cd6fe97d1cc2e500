"""``hybridroute route``: route one ticket (facts + text), or a JSONL batch, and print it.

Input is read as untrusted (see :mod:`hybridroute._safeio`): ``--facts @PATH`` and
``--input`` must be regular files within their byte limits (a FIFO or ``/dev/zero`` is
refused before a byte is read), JSON may not repeat a key, nest deeper than 64 levels or
hold huge integers or NaN, and text must be valid Unicode without NUL. Every refusal is
exit code 2 with a line naming the option, file, line or field.

A batch (``--input``) is all or nothing: every line is validated first (JSON, keys, id,
text, facts against the router's schema, ids repeated within the file) -- once: each line
becomes a :class:`~hybridroute.contracts.RouteRequest`, checked by
:meth:`HybridRouter.check <hybridroute.router.HybridRouter.check>`, and the checked values
are what is routed -- and, if any line is bad, each bad line is reported (up to
:data:`MAX_REPORTED_ERRORS`), nothing is routed, logged or printed, and the exit code is 2. With ``--rejects FILE`` the valid lines are
routed and the bad ones are written to FILE instead. The decisions of a batch are written
to the log in one transaction, after routing and before anything is printed.

An ``id`` in a batch line is the item's request id: the log keeps one decision per id for
a router version, so rerunning a batch logs only what is not logged yet. A line without
an ``id`` has no request id (its line number is not one: two files would share it) and is
logged every time it is routed.

With ``--url`` the service at that URL (``hybridroute serve``) routes with its live router
and logs the decisions itself (through :class:`hybridroute.client.RouterClient`); ``--id``
and a line's ``id`` are the request ids it deduplicates on. A batch is checked here first
(JSON, keys, ids, text) and sent in requests of at most :data:`URL_BATCH_ITEMS` items; the
service checks the facts of each request and routes all of it or none, so a refused
request stops the run with the line it names (the requests before it are routed and logged:
rerun the fixed file and lines with an ``id`` are not logged twice).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .._redact import scrub_text
from .._safeio import check_text, parse_json, read_bytes, read_text
from ..contracts import MAX_REQUEST_ID_CHARS, RouteRequest
from ..exceptions import FactsError, InputError, RequestIdConflictError, UserInputError

if TYPE_CHECKING:
    from ..client import RouterClient
    from ..records import AuditSampler
    from ..router import CheckedRequest, HybridRouter

#: Most bytes of ``--facts`` (inline or ``@PATH``).
MAX_FACTS_BYTES = 1 << 20
#: Most bytes of an ``--input`` batch file.
MAX_BATCH_BYTES = 64 << 20
#: Most bytes of one ``--input`` line.
MAX_LINE_BYTES = 1 << 20
#: Most items (non-blank lines) in one ``--input`` batch. The batch is held in memory
#: until it is logged in one transaction (a few KB a decision), so this bounds memory
#: however short the lines are; split larger batches (or use ``hybridroute spark``).
MAX_BATCH_ITEMS = 100_000
#: Longest request id (``id`` of a batch line, ``--id``), in characters.
MAX_ID_CHARS = MAX_REQUEST_ID_CHARS
#: Bad batch lines listed on stderr before "... and N more".
MAX_REPORTED_ERRORS = 20
#: Most items ``route --url --input`` sends in one request (the service may allow fewer).
URL_BATCH_ITEMS = 256
#: Seconds each request to the service may take (``route --url``).
URL_TIMEOUT_S = 60.0

_ITEM_KEYS = frozenset({"id", "text", "facts", "evidence"})
_MASKED = "not a valid value (not shown: a --sensitive fact)"


def read_facts(value: str) -> dict[str, Any]:
    """Parse ``--facts``: inline JSON, or ``@PATH`` to a JSON file (a regular file)."""
    if value.startswith("@"):
        source = value[1:]
        text = read_text(source, limit=MAX_FACTS_BYTES, what="facts file")
    else:
        source = "--facts"
        if len(value) > MAX_FACTS_BYTES:
            raise InputError(
                f"longer than the limit of {MAX_FACTS_BYTES:,} characters", path=source
            )
        # undecodable bytes of a command-line argument arrive as lone surrogates
        text = check_text(value, what="the value", path=source)
    facts = parse_json(text, source=source, what="facts JSON")
    if not isinstance(facts, dict):
        raise FactsError(f"{source} must be a JSON object, got {type(facts).__name__}")
    return facts


def check_id(value: Any, *, what: str = "id", scrub: Callable[[str], str] = scrub_text) -> str:
    """A request id: a non-empty string (or an integer) of valid text, at most
    :data:`MAX_ID_CHARS` characters. Returned as the string the log stores.

    ``scrub`` is the credential scrubber it must leave the id as it is (a batch passes
    one :class:`~hybridroute._redact.Redactor`'s, built once, instead of building one
    per line as :func:`~hybridroute._redact.scrub_text` does)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{what} must be a string or an integer, got {type(value).__name__}")
    text = str(value)
    if not text.strip():
        raise InputError(f"{what} is empty")
    if len(text) > MAX_ID_CHARS:
        raise InputError(f"{what} is longer than {MAX_ID_CHARS} characters")
    check_text(text, what=what)
    if scrub(text) != text:
        # stored in the log's item_id and echoed in messages as it is
        raise InputError(f"{what} looks like a credential (not shown); use an opaque id")
    return text


def print_decision(decision: Any) -> None:
    """Human-readable summary of one decision (a Decision or a redacted record)."""
    d = decision if isinstance(decision, Mapping) else decision.to_dict()
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


# --------------------------------------------------------------------------- batches


@dataclass
class _Batch:
    """A validated batch: the good items and the bad lines (with their reasons).

    A good item is ``(line number, request)``: the request checked by the router
    (:class:`~hybridroute.router.CheckedRequest`, routed as it is), or -- for ``--url``,
    where the service checks the facts -- the :class:`RouteRequest` whose shape was checked.
    """

    path: str
    lines: int = 0
    good: list[tuple[int, CheckedRequest | RouteRequest]] = field(default_factory=list)
    bad: list[tuple[int, str, str]] = field(default_factory=list)  # line, reason, raw text


def _read_batch(path: Path) -> bytes:
    """The bytes of a batch file: a regular file, :data:`MAX_BATCH_BYTES` enforced while
    reading (a FIFO or a device is refused before a byte is read)."""
    return read_bytes(path, limit=MAX_BATCH_BYTES, what="batch file")


def _lines(data: bytes, where: str) -> Any:
    """``(line number, text or InputError, raw text)`` for each line of a batch file.

    A line that is too long or not UTF-8 is reported as that line's error and the scan
    goes on, so every bad line is found in one pass.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.removesuffix(b"\r")
        if len(raw) > MAX_LINE_BYTES:
            yield (
                lineno,
                InputError(
                    f"the line is longer than the limit of {MAX_LINE_BYTES:,} bytes",
                    path=where,
                    line=lineno,
                ),
                raw.decode("utf-8", "replace"),
            )
            continue
        try:
            yield lineno, raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            yield (
                lineno,
                InputError(
                    f"not UTF-8 text (byte {exc.start} of the line)", path=where, line=lineno
                ),
                raw.decode("utf-8", "replace"),
            )


def _reason(exc: UserInputError) -> str:
    """The message of ``exc`` without the file / line prefix the caller adds itself."""
    if isinstance(exc, InputError):
        return exc.reason
    return str(exc)


def _validate_batch(
    router: HybridRouter | None, path: Path, data: bytes, sensitive: frozenset[str] = frozenset()
) -> _Batch:
    """Read and check every line of ``path`` against ``router`` (nothing is routed).

    A reason never shows the value of a ``--sensitive`` fact (it goes to stderr and the
    rejects file, where the log would have hashed it). Without a router (``--url``: the
    service checks the facts) only the shape of each line is checked.
    """

    from .._redact import Redactor

    batch = _Batch(str(path))
    seen: dict[str, int] = {}
    # one scrubber for every id (the environment it reads does not change mid-batch)
    scrub = Redactor().scrub_text
    for lineno, text, raw in _lines(data, str(path)):
        if isinstance(text, InputError) or text.strip():
            batch.lines += 1
        if batch.lines > MAX_BATCH_ITEMS:
            raise InputError(
                f"more than {MAX_BATCH_ITEMS:,} items (non-blank lines) in one batch; split "
                "the file",
                path=str(path),
            )
        if isinstance(text, InputError):
            batch.bad.append((lineno, scrub_text(text.reason), raw or ""))
            continue
        if not text.strip():
            continue
        try:
            item = parse_json(text, source=str(path), line=lineno, what="JSON")
            if not isinstance(item, dict):
                raise InputError(f"each line must be a JSON object, got {type(item).__name__}")
            unknown = set(item) - _ITEM_KEYS
            if unknown:
                raise InputError(
                    f"unknown key(s) {sorted(unknown)}; a line holds {sorted(_ITEM_KEYS)}"
                )
            item_id = None
            if "id" in item:
                item_id = check_id(item["id"], scrub=scrub)
                first = seen.setdefault(item_id, lineno)
                if first != lineno:
                    raise InputError(f"duplicate id {item_id!r} (first on line {first})")
            facts = item.get("facts")
            request = RouteRequest(
                text=item.get("text"),
                facts={} if facts is None else facts,
                evidence=item.get("evidence"),
                request_id=item_id,
            )
            # exactly what routing checks (facts against the router's schema, rules that
            # cannot be evaluated on them, the text, the evidence), once: the checked
            # value is what is routed. --url: the text here, the rest by the service
            checked: CheckedRequest | RouteRequest = request
            if router is not None:
                checked = router.check(request)
            elif request.text is not None:
                check_text(request.text, what="text")
        except UserInputError as exc:
            reason = _reason(exc)
            if isinstance(exc, FactsError) and exc.field in sensitive:
                reason = f"fact {exc.field!r}: {_MASKED}"
            batch.bad.append((lineno, scrub_text(reason), text))
            continue
        batch.good.append((lineno, checked))
    return batch


def _report_bad_lines(batch: _Batch, *, prefix: str = "error") -> None:
    for lineno, reason, _ in batch.bad[:MAX_REPORTED_ERRORS]:
        typer.echo(f"{prefix}: {batch.path}, line {lineno}: {' '.join(reason.split())}", err=True)
    if len(batch.bad) > MAX_REPORTED_ERRORS:
        typer.echo(
            f"{prefix}: {batch.path}: ... and {len(batch.bad) - MAX_REPORTED_ERRORS} more "
            "bad line(s)",
            err=True,
        )


def _check_output_path(path: Path, option: str, *others: Path | str | None) -> None:
    """An output file: a regular file (or none) in an existing directory that takes new
    files, and not one of the inputs (a ``sqlite:///`` log is compared by its file)."""
    from ..records._url import is_url, sqlite_path
    from ._outputs import check_output

    files = []
    for other in others:
        if isinstance(other, str) and is_url(other):
            other = sqlite_path(other) if other.lower().startswith("sqlite:") else None
        files.append(other)
    try:
        check_output(path, option, inputs=files)
    except UserInputError as exc:  # in this command's words: "--rejects: PATH: reason"
        raise InputError(str(exc).removeprefix(f"{option} "), path=option) from None


def _write_rejects(path: Path, batch: _Batch, sensitive: list[str]) -> None:
    """Write the bad lines as JSONL, atomically (a temporary file, then a rename).

    Each line: ``{"file", "line", "error", "input"}`` -- ``input`` is the original line
    with credentials scrubbed and ``--sensitive`` facts hashed, as the log stores them
    (``"redacted": true`` when that changed it).
    """
    from .._redact import Redactor

    redactor = Redactor(sensitive)
    out = []
    for lineno, reason, raw in batch.bad:
        shown = raw
        try:
            parsed = parse_json(raw, what="JSON") if raw.strip() else None
        except InputError:
            parsed = None
        if isinstance(parsed, dict):
            clean = redactor.scrub(parsed)
            if clean != parsed:
                shown = json.dumps(clean, ensure_ascii=False)
        else:
            shown = redactor.scrub_text(raw)
        row: dict[str, Any] = {"file": batch.path, "line": lineno, "error": reason, "input": shown}
        if shown != raw:
            row["redacted"] = True
        out.append(json.dumps(row, ensure_ascii=False) + "\n")
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.writelines(out)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise InputError(f"cannot write {path} ({exc.strerror or exc})", path="--rejects") from None


def _route_batch(
    router_dir: Path,
    input_path: Path,
    log_path: str | None,
    as_json: bool,
    sensitive: list[str],
    rejects_path: Path | None,
    audit: AuditSampler | None = None,
) -> None:
    from collections import Counter

    from .._redact import Redactor

    if rejects_path is not None:
        _check_output_path(rejects_path, "--rejects", input_path, log_path)
    redactor = Redactor(sensitive)  # fails early when --sensitive has no salt
    data = _read_batch(input_path)  # before the router loads: a bad file fails at once

    from rich.progress import Progress

    from ..records import open_log
    from ..router import load_router

    router = load_router(router_dir)
    batch = _validate_batch(router, input_path, data, frozenset(sensitive))
    del data
    if batch.bad and rejects_path is None:
        _report_bad_lines(batch)
        raise InputError(
            f"{len(batch.bad)} of {batch.lines} line(s) are invalid (listed above); nothing "
            "was routed or logged (fix them, or pass --rejects FILE to route the valid lines)",
            path=str(input_path),
        )

    lines = [lineno for lineno, _ in batch.good]
    requests: list[CheckedRequest | RouteRequest | None] = [req for _, req in batch.good]
    batch.good.clear()  # the requests are held once, and let go as they are routed
    n_items = len(requests)
    ids = [_request_of(req).request_id for req in requests]
    counts: Counter[str] = Counter()
    printed: list[str] = []  # --json lines, printed once the batch is logged
    skipped: list[str] = []
    written = 0
    # The whole batch is buffered and written in one transaction after routing (all or
    # nothing); only the stored form (redacted JSON) is kept, not the decisions.
    log = (
        open_log(log_path, sensitive_fields=sensitive, batch_size=n_items + 1, audit=audit)
        if log_path is not None
        else None
    )
    try:
        if log is not None:
            log.register_router(router)  # the labels and destinations its outcomes may name
        if rejects_path is not None:
            _write_rejects(rejects_path, batch, sensitive)
        chunk = 256
        with Progress(transient=True, disable=as_json) as progress:
            task = progress.add_task(f"routing {input_path.name}", total=n_items)
            for start in range(0, n_items, chunk):
                part = [req for req in requests[start : start + chunk] if req is not None]
                decisions = router.route_many(part)
                for pos, d in enumerate(decisions, start=start):
                    counts[d.selected_destination] += 1
                    if log is not None:
                        rec = log.append(d, item_id=ids[pos])
                    elif as_json:
                        rec = redactor.apply_decision(d)
                    if as_json:
                        printed.append(
                            json.dumps(
                                {"id": ids[pos], "line": lines[pos], **rec}, ensure_ascii=False
                            )
                        )
                requests[start : start + chunk] = [None] * len(part)  # free the inputs
                progress.advance(task, len(part))
        if log is not None:
            try:
                written = log.flush()
            except RequestIdConflictError as exc:
                where = ", ".join(f"line {lines[p]}" for p in exc.positions[:5])
                raise RequestIdConflictError(
                    f"{where}: {exc}", item_ids=exc.item_ids, positions=exc.positions
                ) from None
            skipped = list(log.last_skipped)
    except BaseException:
        if log is not None:
            log.discard()  # a batch that failed half-way leaves nothing in the log
        raise
    finally:
        if log is not None:
            log.close()

    # answer only after the batch is durable
    if as_json:
        already = set(skipped)
        for pos, text in enumerate(printed):
            if ids[pos] is not None and ids[pos] in already:
                text = text[:-1] + ', "already_logged": true}'
            typer.echo(text)

    def say(message: str) -> None:
        typer.echo(message, err=as_json)

    logged = ""
    if log is not None:
        logged = f"; logged {written} to {log.where}"  # a URL without its password
        if skipped:
            logged += f" ({len(skipped)} already logged, skipped)"
    say(f"routed {n_items} items with {router.name} {router.version}{logged}")
    no_id = ids.count(None)
    if log_path is not None and no_id:
        say(
            f"note: {no_id} item(s) have no 'id', so they carry no request id; routing this "
            "file again logs them again"
        )
    if rejects_path is not None:
        say(
            f"rejected {len(batch.bad)} of {batch.lines} line(s); written to {rejects_path} "
            "with their errors"
        )
        _report_bad_lines(batch, prefix="rejected")
    if not as_json:
        for dest, n in counts.most_common():
            typer.echo(f"  {dest:<22} {n}")


def route(
    rules: Path | None = typer.Option(
        None, "--rules", help="Rules file (YAML): route on facts alone."
    ),
    router: Path | None = typer.Option(None, "--router", help="Router bundle directory."),
    facts: str = typer.Option(
        "{}",
        "--facts",
        help=f"Facts as JSON, or @PATH to a JSON file (at most {MAX_FACTS_BYTES:,} bytes).",
    ),
    text: str | None = typer.Option(None, "--text", help="Ticket text (with --router)."),
    item_id: str | None = typer.Option(
        None,
        "--id",
        help="Request id of this ticket: with --log, a second decision for it (same router "
        "version) is skipped.",
    ),
    input_path: Path | None = typer.Option(
        None,
        "--input",
        help='JSONL batch (with --router): {"text": ..., "facts": {...}, "id"?: ...} per line '
        f"(at most {MAX_BATCH_BYTES >> 20} MiB, {MAX_LINE_BYTES >> 20} MiB a line, "
        f"{MAX_BATCH_ITEMS:,} lines). All lines "
        "are checked before any is routed; 'id' is the request id (no id: none).",
    ),
    rejects: Path | None = typer.Option(
        None,
        "--rejects",
        help="With --input: route the valid lines and write the invalid ones (JSONL: file, "
        "line, error, input) to this file, instead of refusing the whole batch.",
    ),
    log: str | None = typer.Option(
        None,
        "--log",
        help="Append the decisions to this decision log (a SQLite file, sqlite:///PATH or "
        "postgresql://...; a SQLite file is created when missing, in a directory that must "
        "exist); ids already logged for this router version are skipped.",
    ),
    sensitive: list[str] = typer.Option(
        [],
        "--sensitive",
        help="A fact stored in the log and printed as a salted hash (salt: "
        "HYBRIDROUTE_LOG_SALT); repeatable.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print full decision records as JSON."),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Route through the service at this URL (hybridroute serve): it routes with its "
        "live router and logs the decisions; --id / a line's 'id' is the request id.",
    ),
    audit_rate: float = typer.Option(
        0.0,
        "--audit-rate",
        min=0.0,
        max=1.0,
        help="With --log: audit this share of auto-routed decisions (e.g. 0.02), selected by "
        "a keyed hash of the decision id (key: HYBRIDROUTE_AUDIT_KEY); never changes the "
        "route.",
    ),
) -> None:
    """Route one ticket (or a JSONL batch) and print the decision."""
    audit = _audit_sampler(audit_rate, log, url)
    if url is not None:
        _check_url_options(rules, router, log, sensitive, rejects)
        if input_path is not None:
            if text is not None or item_id is not None:
                raise typer.BadParameter(
                    "--text and --id are for one ticket; a batch line holds its own",
                    param_hint="--input",
                )
            _route_batch_url(url, input_path, as_json)
        else:
            _route_one_url(url, text, facts, item_id, as_json)
        return
    if (rules is None) == (router is None):
        raise typer.BadParameter(
            "give exactly one of --rules FILE or --router DIR", param_hint="--rules/--router"
        )
    if rejects is not None and input_path is None:
        raise typer.BadParameter("--rejects needs --input", param_hint="--rejects")
    if input_path is not None:
        if router is None:
            raise typer.BadParameter("--input needs --router", param_hint="--input")
        if text is not None or item_id is not None:
            raise typer.BadParameter(
                "--text and --id are for one ticket; a batch line holds its own",
                param_hint="--input",
            )
        _route_batch(router, input_path, log, as_json, sensitive, rejects, audit)
        return
    from .._redact import Redactor

    request_id = None if item_id is None else check_id(item_id, what="--id")
    if text is not None:
        check_text(text, what="--text")
    parsed = read_facts(facts)
    redactor = Redactor(sensitive)  # fails early when --sensitive has no salt
    try:
        if rules is not None:
            from ..rules import load_rules

            if text is not None:
                raise typer.BadParameter(
                    "rules read facts, never text; use --router to classify text",
                    param_hint="--text",
                )
            routed_by: Any = load_rules(rules)
            decision = routed_by.decide(parsed)
        else:
            from ..router import load_router

            hr = routed_by = load_router(router)  # type: ignore[arg-type]
            if text is not None and len(text) > hr.max_text_chars:
                raise InputError(
                    f"--text is {len(text):,} characters long (the limit is {hr.max_text_chars:,})"
                )
            decision = hr.route(RouteRequest(text=text, facts=parsed, request_id=request_id))
    except FactsError as exc:
        if exc.field in sensitive:  # stderr must not show what the log would hash
            raise FactsError(_MASKED, field=exc.field) from None
        raise
    if log is not None:
        from ..records import open_log

        with open_log(log, sensitive_fields=sensitive, audit=audit) as dl:
            dl.register_router(routed_by)  # the labels and destinations its outcomes may name
            record = dl.append(decision, item_id=request_id)
            dl.flush()
            if dl.last_skipped:
                typer.echo(
                    f"note: request id {request_id!r} is already logged for "
                    f"{decision.router} {decision.router_version}; this decision was not "
                    "logged again",
                    err=True,
                )
    else:
        record = redactor.apply_decision(decision)
    if as_json:
        typer.echo(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        print_decision(record)


def _audit_sampler(rate: float, log: str | None, url: str | None) -> AuditSampler | None:
    """The audit sampler of ``--audit-rate`` (``None`` for 0); the key must be set."""
    if not rate:
        return None
    if url is not None:
        raise typer.BadParameter(
            "the service at the URL audits with its own --audit-rate", param_hint="--audit-rate"
        )
    if log is None:
        raise typer.BadParameter("--audit-rate needs --log", param_hint="--audit-rate")
    from ..records import AuditSampler

    return AuditSampler.from_env(rate)


# --------------------------------------------------------------------------- --url


def _check_url_options(
    rules: Path | None,
    router: Path | None,
    log: str | None,
    sensitive: list[str],
    rejects: Path | None,
) -> None:
    refused = [
        (
            rules is not None or router is not None,
            "--rules/--router",
            "it routes with its live router",
        ),
        (log is not None, "--log", "it logs the decisions in its own log"),
        (bool(sensitive), "--sensitive", "it redacts with its own settings"),
        (rejects is not None, "--rejects", "it refuses a bad request whole"),
    ]
    for given, option, why in refused:
        if given:
            raise typer.BadParameter(
                f"{option} is not used with --url: the service at the URL decides ({why})",
                param_hint=option,
            )


def _connect(url: str) -> RouterClient:
    """The client ``route --url`` uses (a seam for tests)."""
    from ..client import RouterClient

    try:
        return RouterClient(url, timeout=URL_TIMEOUT_S)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), path="--url") from None


def _unavailable(exc: Exception) -> typer.Exit:
    from ._app import fail

    return fail(str(exc), code=1)


def _route_one_url(
    url: str, text: str | None, facts: str, item_id: str | None, as_json: bool
) -> None:
    from ..exceptions import ServiceUnavailableError

    request_id = None if item_id is None else check_id(item_id, what="--id")
    if text is not None:
        check_text(text, what="--text")
    parsed = read_facts(facts)
    try:
        with _connect(url) as client:
            result = client.route(RouteRequest(text=text, facts=parsed, request_id=request_id))
    except ServiceUnavailableError as exc:
        raise _unavailable(exc) from None
    d = result.decision
    if result.duplicate:
        typer.echo(
            f"note: request id {request_id!r} is already logged for {d.router} "
            f"{d.router_version}; this is the logged decision",
            err=True,
        )
    record = d.to_dict()
    if as_json:
        typer.echo(json.dumps(record, ensure_ascii=False, indent=2))
        typer.echo(f"decision id: {result.decision_id}", err=True)
    else:
        print_decision(record)
        typer.echo(f"decision id : {result.decision_id}")


def _line_of(exc: Any, part: list[tuple[int, RouteRequest]]) -> int | None:
    """The batch line a refusal of ``part`` names (``items[3].facts.amount`` -> its line)."""
    import re

    m = re.match(r"items\[(\d+)\]", exc.field or "")
    if m is None or int(m.group(1)) >= len(part):
        return None
    return part[int(m.group(1))][0]


def _route_batch_url(url: str, input_path: Path, as_json: bool) -> None:
    from collections import Counter

    from ..exceptions import ServiceError, ServiceUnavailableError

    batch = _validate_batch(None, input_path, _read_batch(input_path))
    if batch.bad:
        _report_bad_lines(batch)
        raise InputError(
            f"{len(batch.bad)} of {batch.lines} line(s) are invalid (listed above); nothing "
            "was sent to the service",
            path=str(input_path),
        )
    items = [(lineno, _request_of(req)) for lineno, req in batch.good]
    results: list[Any] = []
    try:
        with _connect(url) as client:
            for start in range(0, len(items), URL_BATCH_ITEMS):
                part = items[start : start + URL_BATCH_ITEMS]
                try:
                    results.extend(client.route_batch([req for _, req in part]))
                except ServiceError as exc:
                    done = (
                        f"; the {len(results)} item(s) before it were routed and logged"
                        if results
                        else "; nothing was routed"
                    )
                    raise InputError(
                        f"{exc}{done}", path=str(input_path), line=_line_of(exc, part)
                    ) from None
    except ServiceUnavailableError as exc:
        routed = f" ({len(results)} item(s) were routed and logged before)" if results else ""
        raise _unavailable(ServiceUnavailableError(f"{exc}{routed}")) from None

    counts: Counter[str] = Counter(r.decision.selected_destination for r in results)
    if as_json:
        for (lineno, req), r in zip(items, results, strict=True):
            row = {"id": req.request_id, "line": lineno, "decision_id": r.decision_id}
            row.update(r.decision.to_dict())
            if r.duplicate:
                row["already_logged"] = True
            typer.echo(json.dumps(row, ensure_ascii=False))
    routers = sorted({f"{r.decision.router} {r.decision.router_version}" for r in results})
    dup = sum(r.duplicate for r in results)
    logged = f"; the service logged {len(results) - dup}"
    if dup:
        logged += f" ({dup} already logged: their logged decisions are shown)"
    say = lambda message: typer.echo(message, err=as_json)  # noqa: E731
    say(f"routed {len(results)} items with {', '.join(routers) or 'the service'} at {url}{logged}")
    no_id = sum(req.request_id is None for _, req in items)
    if no_id:
        say(
            f"note: {no_id} item(s) have no 'id', so they carry no request id; routing this "
            "file again logs them again"
        )
    if not as_json:
        for dest, n in counts.most_common():
            typer.echo(f"  {dest:<22} {n}")


def _request_of(item: CheckedRequest | RouteRequest | None) -> RouteRequest:
    """The request of a batch item (checked by the router, or only its shape)."""
    if item is None:  # pragma: no cover - items are let go only after they are routed
        raise AssertionError("a batch item was let go before it was routed")
    return item if isinstance(item, RouteRequest) else item.request


def register(app: typer.Typer) -> None:
    """Register ``route`` on ``app``."""
    app.command("route")(route)
