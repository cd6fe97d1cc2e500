"""The decision log's redaction shortcuts give what the plain algorithm gives.

The redactor scrubs a list or tuple with its strings looked up in the text cache inline,
keeps the scrubbed form of tuples of four strings or more (a router's labels) and none of
shorter ones, and walks a nested mapping or list under a key that is not credential-like
without asking about the key again. Each is checked against ``reference_apply`` of
``tests/test_redact_fast.py`` (every pattern on every text, nothing cached) on generated
records whose tuples of strings -- key-shaped ones among them -- recur from record to
record, are long and short, and sit under credential-like keys and others.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridroute._redact import REDACTED, Redactor

from ..test_redact_fast import TEXTS, reference_apply, reference_scrub_text

KEY_SHAPED = [
    "sk-proj-AbCdEfGh12345678ijkl",
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "Bearer eyJhbGciOiJIUzI1NiJ9",
    "api_key=hunter22hunter22",
    "refund_request",
    "order_status",
    "0123456789abcdef",
    "alice@example.com",
]
STRINGS = st.sampled_from(KEY_SHAPED) | TEXTS
SEQS = st.lists(STRINGS | st.none() | st.integers(-3, 3), max_size=7) | st.lists(
    STRINGS, min_size=3, max_size=7
)
KEYS = st.sampled_from(["labels", "tags", "api_key", "token_ids", "prompt_tokens", "email"])
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _record(facts: dict, detail: dict, labels: tuple, text: str) -> dict[str, Any]:
    return {
        "record_version": 1,
        "router": "r",
        "router_version": "1",
        "stage": "model",
        "selected_destination": "x",
        "allowed_destinations": ["x"],
        "reason_code": "confident_intent",
        "evidence_ids": [],
        "input_snapshot": MappingProxyType({"facts": MappingProxyType(facts), "text": text}),
        "snapshot_hash": "0" * 64,
        "rule_id": None,
        "label": "x",
        "confidence": 0.5,
        "threshold": 0.4,
        "margin": 0.1,
        "detail": MappingProxyType(
            {**detail, "classifier": MappingProxyType({"labels": labels, "scores": (0.5,)})}
        ),
    }


@SETTINGS
@given(
    labels=st.lists(STRINGS, min_size=1, max_size=8).map(tuple),
    facts=st.dictionaries(KEYS, SEQS.map(tuple) | SEQS, max_size=4),
    detail=st.dictionaries(KEYS, SEQS.map(tuple) | st.dictionaries(KEYS, SEQS), max_size=3),
    text=TEXTS,
    sensitive=st.booleans(),
)
def test_records_with_recurring_tuples_are_redacted_as_the_plain_algorithm(
    monkeypatch, labels, facts, detail, text, sensitive
):
    monkeypatch.setenv("X_API_TOKEN", "0123456789abcdef")
    r = Redactor(["email"] if sensitive else [], salt="s-for-tests")
    frozen_facts = {k: tuple(v) if isinstance(v, list) else v for k, v in facts.items()}
    for _ in range(3):  # the same tuples again: from the caches the second and third time
        record = _record(frozen_facts, detail, labels, text)
        want = reference_apply(r, record)
        assert r.apply(record) == want
        assert r.apply_decision(_Decision(record)) == want


class _Decision:
    """A record's fields as a Decision's attributes (what apply_decision reads)."""

    def __init__(self, record: dict[str, Any]) -> None:
        for k, v in record.items():
            setattr(self, k, v)
        self.allowed_destinations = tuple(record["allowed_destinations"])
        self.evidence_ids = tuple(record["evidence_ids"])


def test_a_long_tuple_is_kept_and_a_short_one_is_not():
    r = Redactor()
    long_ = ("a_label", "sk-proj-AbCdEfGh12345678ijkl", "c_label", "d_label")
    short = ("sk-proj-AbCdEfGh12345678ijkl", "x_label")
    for _ in range(2):
        changed: list[bool] = []
        assert r._scrub(long_, None, changed, None) == ["a_label", REDACTED, "c_label", "d_label"]
        assert changed  # a key inside was replaced: the snapshot hash is recomputed
        changed = []
        assert r._scrub(short, None, changed, None) == [REDACTED, "x_label"]
        assert changed
    assert id(long_) in r._tuple_cache and id(short) not in r._tuple_cache
    assert r._scrub(("a_label", "b_label", "c_label", "d_label"), None, [], None) == [
        "a_label",
        "b_label",
        "c_label",
        "d_label",
    ]
    for s in long_:
        assert reference_scrub_text(r, s) == r.scrub_text(s)
