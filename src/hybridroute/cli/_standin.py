"""``hybridroute stand-in-llm``: serve the local stand-in LLM (testing only).

Its answers come from a policy (a hash of the text, a fixed text -> label map, or a saved
classifier), never from a language model: nothing measured against it is an LLM's
accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..exceptions import UserInputError

if TYPE_CHECKING:
    from ..testing._standin_answers import AnswerPolicy

_POLICY_HELP = (
    "Answer policy: 'hash' (a label hashed from the text), 'map:FILE' (a .json object "
    "text -> label, or .jsonl lines with 'text' and 'label'), or 'classifier:DIR' (a "
    "saved hybridroute classifier)."
)


#: Most bytes of a ``map:FILE`` label map.
MAX_MAP_BYTES = 64 << 20
#: Most bytes of one line of a ``.jsonl`` label map.
MAX_MAP_LINE_BYTES = 1 << 20


def _load_map(path: Path) -> dict[str, str]:
    """Read a text -> label map (``.json`` object, or ``.jsonl`` lines with text and label).

    Read as untrusted input: a regular file within :data:`MAX_MAP_BYTES` (lines within
    :data:`MAX_MAP_LINE_BYTES`), strict JSON (no duplicate keys, deep nesting, huge
    numbers), text and labels valid Unicode without NUL; one text may not map to two
    labels. Every refusal is a :class:`~hybridroute.exceptions.DatasetError` naming the
    file and row.
    """
    from .._safeio import check_text, iter_lines, parse_json, read_text
    from ..exceptions import DatasetError, InputError

    where = str(path)

    def fail(exc: InputError, row: int | None = None, column: str | None = None) -> DatasetError:
        return DatasetError(exc.reason, path=where, row=row or exc.line, column=column)

    mapping: dict[str, str] = {}
    if path.suffix.lower() != ".jsonl":
        try:
            data = parse_json(
                read_text(path, limit=MAX_MAP_BYTES, what="label map"),
                source=where,
                what="label map",
            )
        except InputError as exc:
            raise fail(exc) from None
        if not isinstance(data, dict):
            raise DatasetError("must be a JSON object of text -> label", path=where)
        for key, value in data.items():
            if not isinstance(value, str):
                raise DatasetError("label must be a string", path=where, column=key[:80])
            try:
                check_text(key, what="text")
                check_text(value, what="label")
            except InputError as exc:
                raise fail(exc, column=key[:80]) from None
            mapping[key] = value
        return mapping
    first: dict[str, int] = {}
    try:
        for row, line in iter_lines(
            path, limit=MAX_MAP_BYTES, line_limit=MAX_MAP_LINE_BYTES, what="label map"
        ):
            if not line.strip():
                continue
            item = parse_json(line, source=where, line=row, what="JSON")
            for column in ("text", "label"):
                if not isinstance(item, dict) or not isinstance(item.get(column), str):
                    raise DatasetError(
                        "missing or not a string", path=where, row=row, column=column
                    )
                try:
                    check_text(item[column], what=column)
                except InputError as exc:
                    raise fail(exc, row=row, column=column) from None
            text, label = item["text"], item["label"]
            if text in mapping and mapping[text] != label:
                raise DatasetError(
                    f"the text of row {first[text]} again, with another label "
                    f"({mapping[text]!r} there, {label!r} here)",
                    path=where,
                    row=row,
                    column="label",
                )
            first.setdefault(text, row)
            mapping[text] = label
    except InputError as exc:
        raise fail(exc) from None
    return mapping


def _make_policy(spec: str, obey_injections: bool, seed: int) -> AnswerPolicy:
    from ..testing import ClassifierPolicy, HashPolicy, LabelMapPolicy, ObeyInjections

    kind, _, arg = spec.partition(":")
    policy: AnswerPolicy
    if kind == "hash" and not arg:
        policy = HashPolicy(seed=seed)
    elif kind == "map" and arg:
        policy = LabelMapPolicy(_load_map(Path(arg)))
    elif kind == "classifier" and arg:
        from ..classifiers import load_classifier

        policy = ClassifierPolicy(load_classifier(arg))
    else:
        raise UserInputError(
            f"--policy: unknown policy {spec!r}; use hash, map:FILE or classifier:DIR"
        )
    return ObeyInjections(policy) if obey_injections else policy


def register(app: typer.Typer) -> None:
    """Register ``stand-in-llm`` on ``app``."""

    @app.command("stand-in-llm")
    def stand_in_llm(
        port: int = typer.Option(8765, "--port", help="Port on 127.0.0.1 (0: any free port)."),
        labels: list[str] = typer.Option(
            [],
            "--labels",
            help="Label set, comma-separated or repeated (default: read from each request).",
        ),
        policy: str = typer.Option("hash", "--policy", help=_POLICY_HELP),
        obey_injections: bool = typer.Option(
            False,
            "--obey-injections",
            help="Answer X when a text says 'route (this) to X' (for router tests).",
        ),
        latency: float = typer.Option(0.0, "--latency", help="Seconds added to every answer."),
        fault_rate: list[str] = typer.Option(
            [],
            "--fault-rate",
            help="KIND=RATE, repeatable. Kinds: slow, rate_limit, server_error, hang, "
            "malformed_json, out_of_set, empty_choices, truncated.",
        ),
        seed: int = typer.Option(0, "--seed", help="Seeds fault and sampling draws."),
        retry_after: float = typer.Option(
            1.0, "--retry-after", help="Seconds announced by 429 answers."
        ),
        slow_seconds: float = typer.Option(2.0, "--slow-seconds", help="Delay of 'slow'."),
        hang_seconds: float = typer.Option(
            300.0, "--hang-seconds", help="How long a 'hang' stays silent."
        ),
    ) -> None:
        """Serve an OpenAI-compatible stand-in LLM with fault injection (testing only)."""
        import time

        from ..testing import StandInLLM, parse_fault_rates

        try:
            faults = parse_fault_rates(fault_rate)
        except ValueError as exc:
            raise UserInputError(f"--fault-rate: {exc}") from None
        label_set = [x.strip() for item in labels for x in item.split(",") if x.strip()]
        from .._safeio import check_text

        for label in label_set:
            check_text(label, what="a label", path="--labels")
        server = StandInLLM(
            _make_policy(policy, obey_injections, seed),
            labels=label_set or None,
            latency=latency,
            faults=faults,
            seed=seed,
            retry_after=retry_after,
            slow_seconds=slow_seconds,
            hang_seconds=hang_seconds,
            port=port,
        )
        try:
            server.start()
        except RuntimeError as exc:
            from ._app import fail

            raise fail(str(exc), code=1) from None
        typer.echo(
            f"stand-in LLM on {server.api_base} (answers come from the '{policy}' policy, "
            "not from a language model); Ctrl-C stops it",
            err=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
            typer.echo(json.dumps(server.stats(), sort_keys=True))
