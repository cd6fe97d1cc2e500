"""The bundled customer-support set (``support-tickets``), shipped inside the package.

Rows live in ``datasets/data/support_tickets.jsonl``, one JSON object a line::

    {"id": "st-0001", "text": "...", "label": "refund_request", "split": "train",
     "facts": {"has_permission": true, "tool_error_kind": null, "attempts": 0, ...},
     "next_step": "answer", "destination": "refund_request", "tags": ["typo"]}

The facts are those the rule layer reads; their types are declared here (all may be
null), so a wrong type in the file is reported with its row and fact name. The dataset
card is ``DATASET.md`` next to the rows.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..exceptions import DatasetUnavailableError
from ._io import read_jsonl
from ._labelled import LabelledSet
from ._validate import Options, build

NAME = "support-tickets"
RESOURCE = "data/support_tickets.jsonl"
OOS_LABEL = "out_of_scope"

#: The facts of a support ticket and their types (each may be null).
FACT_TYPES: dict[str, str] = {
    "has_permission": "bool",
    "tool_error_kind": "str",
    "attempts": "int",
    "amount": "number",
    "action": "str",
    "evidence_complete": "bool",
    "missing_user_fields": "list[str]",
    "route_history": "list[str]",
    "step": "int",
}


def bundled_path() -> Path:
    """Path of the bundled rows file (it may be missing from a broken installation)."""
    return Path(str(resources.files("hybridroute.datasets").joinpath(RESOURCE)))


def load_support_tickets(*, on_error: str = "raise") -> LabelledSet:
    """The bundled customer-support tickets: intents, out-of-scope, facts and gold next steps.

    Splits are fixed in the file (``train`` / ``calibration`` / ``test``). Out-of-scope
    tickets carry the label ``out_of_scope`` (the set's ``oos_label``).
    """
    path = bundled_path()
    if not path.is_file():
        raise DatasetUnavailableError(
            f"{NAME}: the bundled file {RESOURCE} is missing from this installation "
            f"(looked at {path}); reinstall hybridroute"
        )
    raw = read_jsonl(path)
    opt = Options(
        split_required=True,
        fact_types=FACT_TYPES,
        declared_must_exist=False,
        on_error=on_error,
    )
    built = build(raw, opt)
    return LabelledSet._from_built(
        built,
        name=NAME,
        source=str(path),
        oos_label=OOS_LABEL,
        provenance={"loader": NAME, "options": {"on_error": on_error}},
    )
