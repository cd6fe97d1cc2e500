"""The bundled support-tickets set: built from its sources, and consistent with the example rules."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from hybridroute.datasets import load_dataset
from hybridroute.rules import load_rules

ROOT = Path(__file__).resolve().parents[2]
RULES = load_rules(ROOT / "src" / "hybridroute" / "examples" / "support_rules.yaml")


def test_built_file_is_up_to_date_with_its_sources():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_support_tickets.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_gold_next_step_agrees_with_the_example_rules():
    ds = load_dataset("support-tickets")
    frame = ds.frame
    branches: Counter[str] = Counter()
    for i in range(len(ds)):
        facts = {k: v for k, v in ds.facts(i).items() if v is not None and k in RULES.schema}
        match = RULES.match(RULES.validate_facts(facts))
        gold = frame["next_step"].iloc[i]
        if match is not None:
            assert match.destination == gold, (ds.ids[i], match, gold)
            branches[match.reason_code] += 1
        else:
            label = ds.y[i]
            tags = frame["tags"].iloc[i] if "tags" in frame.columns else []
            expected = (
                "human_review"
                if label == "out_of_scope"
                else "ask_user"
                if "ambiguous" in (tags or [])
                else label
            )
            assert gold == expected, (ds.ids[i], gold, expected)
    # every rule branch is exercised
    for reason in (
        "permission_denied",
        "tool_error_retry",
        "retry_budget_exhausted",
        "tool_error_fatal",
        "high_risk_amount",
        "sensitive_action",
        "step_budget_exceeded",
        "route_oscillation",
        "evidence_complete",
        "missing_user_fields",
    ):
        assert branches[reason] >= 20, reason


def test_size_labels_and_splits():
    ds = load_dataset("support-tickets")
    assert len(ds) >= 1000
    assert 10 <= len([lab for lab in ds.labels if lab != "out_of_scope"]) <= 15
    assert set(ds.splits) == {"train", "calibration", "test"}
