"""``hybridroute stand-in-llm``: serve the local stand-in LLM (testing only).

Its answers come from a policy (a hash of the text, a fixed text -> label map, or a saved
classifier), never from a language model: nothing measured against it is an LLM's
accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError

_POLICY_HELP = (
    "Answer policy: 'hash' (a label hashed from the text), 'map:FILE' (a .json object "
    "text -> label, or .jsonl lines with 'text' and 'label'), or 'classifier:DIR' (a "
    "saved hybridroute classifier)."
)


def _load_map(path: Path) -> dict[str, str]:
    from ..exceptions import DatasetError

    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read label map: {exc.strerror}", path=str(path)) from None
    if path.suffix.lower() != ".jsonl":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"not JSON: {exc.msg}", path=str(path)) from None
        if not isinstance(data, dict):
            raise DatasetError("must be a JSON object of text -> label", path=str(path))
        for key, value in data.items():
            if not isinstance(value, str):
                raise DatasetError("label must be a string", path=str(path), column=key)
        return dict(data)
    mapping: dict[str, str] = {}
    for row, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"not JSON: {exc.msg}", path=str(path), row=row) from None
        for column in ("text", "label"):
            if not isinstance(item, dict) or not isinstance(item.get(column), str):
                raise DatasetError(
                    "missing or not a string", path=str(path), row=row, column=column
                )
        mapping[item["text"]] = item["label"]
    return mapping


def _make_policy(spec: str, obey_injections: bool, seed: int) -> Any:
    from ..testing import ClassifierPolicy, HashPolicy, LabelMapPolicy, ObeyInjections

    kind, _, arg = spec.partition(":")
    policy: Any
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
