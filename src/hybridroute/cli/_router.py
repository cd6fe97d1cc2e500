"""``hybridroute router build``: assemble a router bundle from its parts.

The parts are verified as they are read (the model's and the policy's seals, and their
signatures when ``HYBRIDROUTE_SIGNING_KEY`` is set), and the policy must be the one fitted
on ``--model``: a policy that records another model's fingerprint, or none, is refused
(exit 2, naming the policy file, the field and both fingerprints). The bundle is sealed,
and signed when the key is set.

``--redact-pii all`` (every kind) or ``--redact-pii email,card`` makes the router redact
personal data from ticket texts before routing (``[EMAIL]``, ``[IBAN]``, ``[CARD]``,
``[PHONE]``); the bundle records it, so the service and replay redact the same way.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..exceptions import UserInputError
from ._outputs import REFIT_ON_THE_COMMAND_LINE, check_output, output_errors

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
    redact_pii: str | None = typer.Option(
        None,
        "--redact-pii",
        metavar="KINDS",
        help="Redact personal data from texts before routing, logging and replay: 'all', or "
        "a comma-separated list of email, iban, card, phone (default: texts as given).",
    ),
) -> None:
    """Build a router bundle (rules + classifier + policy + label map + manifest)."""
    # before any work, in this command's words
    check_output(out, "--out", kind="dir", new_dir=True, force=force)
    from .. import _safeio
    from .._integrity import signing_key
    from .._pii import PIIRedaction
    from ..calibration import Policy
    from ..classifiers import load_classifier
    from ..router import HybridRouter
    from ..router._bundle import DESTINATIONS_MAX_BYTES, check_model_binding
    from ..rules import load_rules

    redaction = PIIRedaction.coerce(redact_pii, what="--redact-pii")
    mapping = None
    if destinations is not None:
        mapping = _safeio.read_json(
            destinations, limit=DESTINATIONS_MAX_BYTES, what="destinations file"
        )
        if not isinstance(mapping, dict):
            raise UserInputError(
                f"{destinations}: must be a JSON object of label -> destination strings"
            )
        for label, dest in mapping.items():
            if not isinstance(dest, str) or not dest:
                raise UserInputError(
                    f"{destinations}: label {label!r} must map to a destination name, got {dest!r}"
                )
    clf = load_classifier(model)
    pol = Policy.load(policy)
    # strict: a policy built for another model (or for none recorded) never gets bundled
    check_model_binding(
        pol,
        clf,
        strict=True,
        policy_source=str(policy),
        model_source=f"--model {model}",
        refit_hint=REFIT_ON_THE_COMMAND_LINE,
    )
    router = HybridRouter(
        rules=load_rules(rules),
        classifier=clf,
        policy=pol,
        destinations=mapping,
        name=name,
        version=version,
        oos_destination=oos_destination,
        fallback_destination=fallback_destination,
        redact_pii=redaction,
    )
    with output_errors(out, "--out"):
        path = router.save(out, overwrite=force)
    signed = "signed" if signing_key() is not None else "sealed, not signed"
    typer.echo(
        f"router {name} {version} written to {path} ({len(router.classes)} labels, "
        f"{len(router.rules)} rules; model {clf.fingerprint()[:12]}; {signed}"
        + ("" if redaction is None else f"; redacts {', '.join(redaction.kinds)}")
        + ")"
    )


def register(app: typer.Typer) -> None:
    """Register the ``router`` group on ``app``."""
    app.add_typer(router_app, name="router")
