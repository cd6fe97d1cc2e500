"""The decision log: round trips, batching, crash safety, concurrent writers, redaction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hybridroute.contracts import snapshot_hash
from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.records import REDACTED, DecisionLog, Redactor
from hybridroute.rules import load_rules

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)
RULES = load_rules(EXAMPLE)


def decisions(n: int, offset: int = 0):
    return [RULES.decide({"step": (i + offset) % 20, "amount": i + offset}) for i in range(n)]


def test_round_trip_and_exports(tmp_path):
    ds = decisions(25)
    with DecisionLog(tmp_path / "log.sqlite", batch_size=10) as log:
        log.extend(ds, item_ids=[f"t{i}" for i in range(25)])
        assert log.count() == 20 and log.pending == 5
    with DecisionLog(tmp_path / "log.sqlite") as log:
        assert log.count() == 25
        assert list(log.decisions()) == ds
        assert log.meta()["schema_version"] == "4"
        n = log.to_jsonl(tmp_path / "out.jsonl")
        frame = log.to_frame()
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert n == len(lines) == 25
    first = json.loads(lines[0])
    assert first["item_id"] == "t0" and first["snapshot_hash"] == ds[0].snapshot_hash
    assert list(frame["selected_destination"]) == [d.selected_destination for d in ds]
    assert str(frame["logged_at"].dtype).startswith("datetime64")


def test_wal_mode_and_integrity(tmp_path):
    path = tmp_path / "log.sqlite"
    with DecisionLog(path) as log:
        log.extend(decisions(3))
        assert log.integrity_check() == "ok"
    import sqlite3

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_newer_schema_and_non_log_files_are_refused(tmp_path):
    path = tmp_path / "log.sqlite"
    DecisionLog(path).close()
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(ArtifactError, match="schema version 99 is newer"):
        DecisionLog(path)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ArtifactError, match="not a usable decision log"):
        DecisionLog(junk)


WRITER = r"""
import sys, time
from hybridroute.records import DecisionLog
from hybridroute.rules import load_rules
rules = load_rules(sys.argv[1])
log = DecisionLog(sys.argv[2], batch_size=int(sys.argv[3]))
n = int(sys.argv[4]); tag = sys.argv[5]
for i in range(n):
    log.append(rules.decide({"step": i % 20, "amount": i}), item_id=f"{tag}-{i}")
    if i and i % int(sys.argv[3]) == 0:
        print(log.count(), flush=True)
log.close()
print("done", flush=True)
"""


def test_sigkill_mid_batch_loses_at_most_the_open_batch(tmp_path):
    path = tmp_path / "log.sqlite"
    batch = 1000
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(EXAMPLE), str(path), str(batch), "100000", "k"],
        stdout=subprocess.PIPE,
        text=True,
    )
    # wait until a few batches are committed, then kill without warning
    seen = 0
    while seen < 3000:
        line = proc.stdout.readline()
        assert line, "writer ended early"
        seen = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with DecisionLog(path) as log:
        assert log.integrity_check() == "ok"
        n = log.count()
        ids = [r["item_id"] for r in log.rows()]
    assert n >= seen and n % batch == 0  # only whole batches, every committed one
    assert ids == [f"k-{i}" for i in range(n)]


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "log.sqlite"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(EXAMPLE), str(path), "50", "3000", tag],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    with DecisionLog(path) as log:
        ids = [r["item_id"] for r in log.rows()]
    assert len(ids) == 6000
    for tag in ("a", "b"):
        mine = [i for i in ids if i.startswith(tag + "-")]
        assert mine == [f"{tag}-{i}" for i in range(3000)]


def test_sensitive_facts_are_salted_hashes_and_credentials_never_reach_the_file(
    tmp_path, monkeypatch
):
    fake_key = "sk-test-" + "Zq9" * 12
    monkeypatch.setenv("OPENAI_API_KEY", fake_key)
    from hybridroute.contracts import Decision

    decision = Decision(
        router="r",
        router_version="1",
        stage="rule",
        input_snapshot={
            "facts": {"email": "ana@example.com", "api_key": "plain-secret-value-123", "amount": 3},
            "text": f"my key is {fake_key} and also AKIA{'A' * 16}, please help",
        },
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
        detail={"note": f"Bearer {'x' * 24}"},
    )
    path = tmp_path / "log.sqlite"
    with DecisionLog(path, sensitive_fields=["email"], salt="pepper-1") as log:
        log.append(decision)
    with DecisionLog(path) as log:
        rec = next(log.records())
    facts = rec["input_snapshot"]["facts"]
    assert facts["email"].startswith("hmac-sha256:")
    assert facts["email"] == Redactor(["email"], salt="pepper-1").hash_value("ana@example.com")
    assert facts["email"] != Redactor(["email"], salt="pepper-2").hash_value("ana@example.com")
    assert facts["api_key"] == REDACTED
    # the stored hash is the hash of the stored snapshot, not of the original input
    assert rec["snapshot_hash"] == snapshot_hash(rec["input_snapshot"])
    assert rec["snapshot_hash"] != decision.snapshot_hash
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for secret in (
        fake_key,
        "plain-secret-value-123",
        "AKIA" + "A" * 16,
        "x" * 24,
        "ana@example.com",
        "pepper-1",
    ):
        assert secret.encode() not in raw


@pytest.mark.parametrize(
    ("guessed_fact", "guess"),
    [
        ("email", "ana@example.com"),  # a salted-HMAC sensitive fact
        ("api_key", "plain-secret-value-123"),  # a [REDACTED] credential under its key
    ],
)
def test_the_stored_hash_cannot_confirm_a_guessed_redacted_value(tmp_path, guessed_fact, guess):
    """Putting the right guess back into a stored snapshot must not reproduce its hash."""
    from hybridroute.contracts import Decision

    snapshot = {
        "facts": {"email": "ana@example.com", "api_key": "plain-secret-value-123", "amount": 3},
        "text": "my key is sk-test-" + "Q" * 30,
    }
    decision = Decision(
        router="r",
        router_version="1",
        stage="rule",
        input_snapshot=snapshot,
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
    )
    path = tmp_path / "log.sqlite"
    with DecisionLog(path, sensitive_fields=["email"], salt="pepper-1") as log:
        log.append(decision)
    with DecisionLog(path) as log:
        (row,) = list(log.rows())
    rec = row["record"]
    assert row["snapshot_hash"] == rec["snapshot_hash"]
    # the attacker's move: restore the guessed value (and the whole original, for good
    # measure) and compare hashes
    restored = json.loads(json.dumps(rec["input_snapshot"]))
    restored["facts"][guessed_fact] = guess
    for candidate in (restored, snapshot):
        assert snapshot_hash(candidate) != rec["snapshot_hash"]
    # what the hash does tell: that the stored snapshot was not edited
    assert snapshot_hash(rec["input_snapshot"]) == rec["snapshot_hash"]


def test_same_input_and_salt_give_the_same_stored_hash_and_redaction_is_idempotent(tmp_path):
    from hybridroute.contracts import Decision

    def make(email: str) -> Decision:
        return Decision(
            router="r",
            router_version="1",
            stage="rule",
            input_snapshot={"facts": {"email": email}, "text": "hi"},
            allowed_destinations=("fail",),
            selected_destination="fail",
            reason_code="default_exit",
        )

    hashes = []
    for salt in ("s1", "s1", "s2"):
        rec = Redactor(["email"], salt=salt).apply_decision(make("a@b.c"))
        hashes.append(rec["snapshot_hash"])
    assert hashes[0] == hashes[1] != hashes[2]
    # a stored record, rebuilt and redacted again, keeps its snapshot and hash
    red = Redactor(["email"], salt="s1")
    stored = red.apply_decision(make("a@b.c"))
    again = red.apply_decision(Decision.from_dict(stored))
    assert again["input_snapshot"] == stored["input_snapshot"]
    assert again["snapshot_hash"] == stored["snapshot_hash"]
    # without anything to redact, the hash is the decision's own
    plain = make("x")
    assert Redactor().apply_decision(plain)["snapshot_hash"] == plain.snapshot_hash


def test_sensitive_fields_need_a_salt(monkeypatch, tmp_path):
    monkeypatch.delenv("HYBRIDROUTE_LOG_SALT", raising=False)
    with pytest.raises(UserInputError, match="no salt is given"):
        DecisionLog(tmp_path / "x.sqlite", sensitive_fields=["email"])


def test_failed_flush_keeps_the_batch(tmp_path):
    log = DecisionLog(tmp_path / "log.sqlite", batch_size=100)
    log.extend(decisions(5))
    other = __import__("sqlite3").connect(tmp_path / "log.sqlite", timeout=0)
    other.execute("BEGIN EXCLUSIVE")
    log._conn.execute("PRAGMA busy_timeout = 50")
    t0 = time.perf_counter()
    with pytest.raises(Exception, match="locked"):
        log.flush()
    assert time.perf_counter() - t0 < 5
    assert log.pending == 5
    other.rollback()
    other.close()
    assert log.flush() == 5
    log.close()


def test_redacting_a_decision_directly_equals_redacting_its_dict():
    from hybridroute.contracts import Decision

    d = Decision(
        router="r",
        router_version="1",
        stage="rule",
        allowed_destinations=("fail",),
        selected_destination="fail",
        reason_code="default_exit",
        input_snapshot={"facts": {"a": [1, 2], "email": "x@example.com"}, "text": "t"},
        detail={"x": [1, {"email": "x@example.com"}]},
    )
    r = Redactor(["email"], salt="s")
    assert r.apply_decision(d) == r.apply(d.to_dict())
    assert list(r.apply_decision(d)) == list(d.to_dict())


def test_redaction_rules_order_counts_urls_and_values_in_text(monkeypatch):
    """Key shapes go before environment values; counts stay; URL passwords and a sensitive
    value quoted in the ticket text are removed too (the record's own facts)."""
    from hybridroute.contracts import Decision

    monkeypatch.setenv("OPENAI_API_KEY", "proj-C4N4RYsk1")  # a value that sits inside a key
    red = Redactor(["email"], salt="s")  # a one-letter salt is not searched for in text
    leaked = "sk-proj-C4N4RYsk1abcdefghijklmnop"
    assert red.scrub_text(f"key {leaked} here") == f"key {REDACTED} here"
    assert red.scrub_text("seven sisters") == "seven sisters"
    assert red.scrub_text("postgresql://app:hunter2pw@db/x") == f"postgresql://app:{REDACTED}@db/x"
    decision = Decision(
        router="r",
        router_version="1",
        stage="fallback",
        input_snapshot={"facts": {"email": "ana@example.com"}, "text": "I am ana@example.com"},
        allowed_destinations=("human_review",),
        selected_destination="human_review",
        reason_code="provider_error",
        detail={"usage": {"prompt_tokens": 12, "completion_tokens": 3}, "token": "abc"},
    )
    rec = red.apply_decision(decision)
    assert "ana@example.com" not in json.dumps(rec)
    assert rec["input_snapshot"]["text"] == "I am " + rec["input_snapshot"]["facts"]["email"]
    assert rec["detail"]["usage"] == {"prompt_tokens": 12, "completion_tokens": 3}
    assert rec["detail"]["token"] == REDACTED


@pytest.mark.parametrize(
    "text",
    [
        "https://github.com/PolyAI-LDN/task-specific-datasets/raw/master/banking77.csv",
        "see the risk-assessment-procedures page",
        "our desk-booking-system-for-teams is down",
    ],
)
def test_words_ending_in_sk_are_not_taken_for_keys(text):
    assert Redactor().scrub_text(text) == text
