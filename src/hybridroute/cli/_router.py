"""``hybridroute router build``: assemble a router bundle from its parts."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..exceptions import UserInputError

router_app = typer.Typer(help="Build router bundles.", no_args_is_help=True, add_completion=False)


@router_app.command("build")
def build(
    rules: Path = typer.Option(..., "--rules", help="Rules file (YAML)."),
    model: Path = typer.Option(..., "--model", help="Saved classifier directory."),
    policy: Path = typer.Option(..., "--policy", help="Fitted policy artifact (JSON)."),
    destinations: Path | None = typer.Option(
        None, "--destinations", help="JSON object: intent label -> destination (default: identity)."
    ),
    name: str = typer.Option(..., "--name", help="Router name, written into every decision."),
    version: str = typer.Option(
        ..., "--version", help="Router version, written into every decision."
    ),
    out: Path = typer.Option(..., "--out", help="Bundle directory to write."),
    oos_destination: str = typer.Option("human_review", "--oos-destination"),
    fallback_destination: str = typer.Option("human_review", "--fallback-destination"),
    force: bool = typer.Option(False, "--force", help="Replace an existing bundle directory."),
) -> None:
    """Build a router bundle (rules + classifier + policy + label map + manifest)."""
    from ..calibration import Policy
    from ..classifiers import load_classifier
    from ..router import HybridRouter
    from ..rules import load_rules

    mapping = None
    if destinations is not None:
        try:
            mapping = json.loads(destinations.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserInputError(f"{destinations}: not a readable JSON object ({exc})") from None
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise UserInputError(
                f"{destinations}: must be a JSON object of label -> destination strings"
            )
    router = HybridRouter(
        rules=load_rules(rules),
        classifier=load_classifier(model),
        policy=Policy.load(policy),
        destinations=mapping,
        name=name,
        version=version,
        oos_destination=oos_destination,
        fallback_destination=fallback_destination,
    )
    path = router.save(out, overwrite=force)
    typer.echo(
        f"router {name} {version} written to {path} ({len(router.classes)} labels, "
        f"{len(router.rules)} rules)"
    )


def register(app: typer.Typer) -> None:
    """Register the ``router`` group on ``app``."""
    app.add_typer(router_app, name="router")
