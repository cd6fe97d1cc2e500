"""Shared by the rules-as-code tests: the example rules file and the support router."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)

#: a small rules file: permission, risk (amount over 500), one condition rule, a default
SMALL = textwrap.dedent(
    """\
    format: 1
    name: small
    version: "1"
    facts:
      has_permission: {type: bool, default: true}
      amount: {type: number, default: 0, min: 0}
      action: {type: str, default: "", enum: ["", issue_refund, lookup_order]}
      tier: {type: str, default: basic, enum: [basic, gold]}
    destinations: [refund_request, order_status]
    reason_codes: [gold_refund]
    rules:
      - id: permission
        guard: permission
      - id: risk
        guard: risk
        params: {amount_limit: 500}
      - id: gold_refund
        when: "tier == 'gold' and action == 'issue_refund'"
        then: refund_request
        reason: gold_refund
    default: {destination: human_review, reason: default_exit}
    """
)


def write(root: Path, body: str, name: str = "rules.yaml") -> Path:
    path = root / name
    path.write_text(body, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def support():
    """(router, dataset): the support router on the example rules (fitted once)."""
    from ..support_router import support_router

    return support_router()
