"""The live guarantee read from a decision log (monitor_log and `hybridroute monitor`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hybridroute.cli import main
from hybridroute.contracts import Decision
from hybridroute.monitoring import monitor_log
from hybridroute.records import AuditSampler, open_log


def _decision(i: int, version: str = "1") -> Decision:
    return Decision(
        router="r",
        router_version=version,
        stage="model",
        input_snapshot={"facts": {"n": i}, "text": f"ticket {i}"},
        allowed_destinations=("billing", "human_review"),
        selected_destination="billing",
        reason_code="confident_intent",
        label="billing",
        confidence=0.9,
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_url(request, tmp_path):
    """An empty decision log on each backend: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log.sqlite'}"
    return request.getfixturevalue("postgres_db_url")


def register(log, version: str = "1") -> None:
    """Router "r" ``version``: labels billing and refund, out of scope 'oos'."""
    log.register_router(
        name="r",
        version=version,
        labels=("billing", "refund"),
        oos_label="oos",
        destinations=("billing", "refund", "human_review"),
    )


def _log(
    tmp_path, n: int, precision_of, *, rate: float = 1.0, versions=("1",), url: str | None = None
) -> str:
    """A log of ``n`` auto-routed decisions per version, all audited at ``rate``, each
    given an audit outcome: correct with the probability ``precision_of(i)``."""
    if url is None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    rng = np.random.default_rng(0)
    with open_log(url, audit=AuditSampler(rate, "test-key")) as log:
        for version in versions:
            register(log, version)
            logged = log.log_many(
                [(_decision(i, version), f"{version}-{i}", "live") for i in range(n)]
            )
            outcomes = []
            for i, d in enumerate(logged):
                right = rng.uniform() < precision_of(i)
                outcomes.append(
                    {
                        "decision_id": d.decision_id,
                        "gold_intent": "billing" if right else "refund",
                        "source": "audit",
                    }
                )
            log.add_outcomes(outcomes)
    return url


def test_a_healthy_stream_certifies_and_a_drop_is_a_breach(tmp_path):
    url = _log(tmp_path, 600, lambda i: 0.99)
    with open_log(url, create=False) as log:
        state = monitor_log(log, target=0.9, delta=0.05)
    assert state["status"] == "certified_online" and state["labels"] == 600
    assert state["precision"]["lower"] > 0.9 and state["pending"] == 0

    url = _log(tmp_path / "drop", 1200, lambda i: 0.97 if i < 800 else 0.6)
    with open_log(url, create=False) as log:
        state = monitor_log(log, target=0.9, delta=0.05)
    assert state["status"] == "breach"
    assert 800 < state["breach"]["labels"] <= 1000 and state["breach"]["at"] is not None


def test_only_audit_outcomes_of_audited_decisions_count_once_each(tmp_path):
    url = _log(tmp_path, 50, lambda i: 1.0)
    with open_log(url) as log:
        rows = [r for r in log.rows() if r["audited"] == 1]
        log.add_outcomes(
            [
                # the same audit label again (nothing new), feedback of another source
                {
                    "decision_id": rows[0]["decision_id"],
                    "gold_intent": "billing",
                    "source": "audit",
                },
                {
                    "decision_id": rows[1]["decision_id"],
                    "gold_intent": "refund",
                    "source": "user_feedback",
                },
            ]
        )
        state = monitor_log(log, target=0.9, delta=0.05)
        assert state["labels"] == 50 and state["disputes"]["disputed"] == 0
        assert state["precision"]["estimate"] == 1.0
        # a second, different audit label disputes the decision: it counts as wrong
        log.add_outcomes(
            [{"decision_id": rows[0]["decision_id"], "gold_intent": "refund", "source": "audit"}]
        )
        state = monitor_log(log, target=0.9, delta=0.05)
    assert state["labels"] == 50 and state["disputes"]["disputed"] == 1
    assert state["precision"]["estimate"] == pytest.approx(49 / 50)


def test_the_version_must_be_named_when_several_are_audited(tmp_path):
    url = _log(tmp_path, 20, lambda i: 1.0, versions=("1", "2"))
    with open_log(url, create=False) as log:
        with pytest.raises(ValueError, match=r"versions \['1', '2'\]"):
            monitor_log(log, target=0.9, delta=0.05)
        assert monitor_log(log, target=0.9, delta=0.05, router_version="2")["labels"] == 20
        with pytest.raises(ValueError, match="no audited decision of router version '3'"):
            monitor_log(log, target=0.9, delta=0.05, router_version="3")


def test_the_cli_prints_the_state_and_refuses_mistakes(tmp_path, capsys):
    url = _log(tmp_path, 600, lambda i: 0.99)
    assert main(["monitor", "--log", url, "--target", "0.9", "--delta", "0.05", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"status", "labels", "precision", "target", "delta", "exit_code"}
    assert set(doc["precision"]) == {"estimate", "lower", "upper"}
    assert doc["status"] == "certified_online"
    assert main(["monitor", "--log", url, "--target", "0.9", "--delta", "0.05"]) == 0
    assert "certified_online" in capsys.readouterr().out
    for argv, message in [
        (["--target", "0.9"], "both --target and --delta"),
        (["--target", "0.9", "--delta", "1.5"], "between 0 and 1"),
        (["--target", "0.9", "--delta", "0.05", "--router-version", "9"], "no audited decision"),
    ]:
        assert main(["monitor", "--log", url, *argv]) == 2
        assert message in capsys.readouterr().err


def test_the_shift_compares_live_predicted_labels_with_the_calibration_mix(tmp_path, backend_url):
    url = _log(tmp_path, 200, lambda i: 1.0, url=backend_url)
    with open_log(url) as log:
        register(log)  # (the _log above registered it in another log when url is given)
        # besides the 200 'billing' decisions: 50 out-of-scope abstentions
        oos = [
            Decision(
                router="r",
                router_version="1",
                stage="policy",
                input_snapshot={"facts": {"n": i}, "text": f"other {i}"},
                allowed_destinations=("billing", "human_review"),
                selected_destination="human_review",
                reason_code="out_of_scope",
                label="billing",
                confidence=0.2,
            )
            for i in range(50)
        ]
        log.log_many([(d, f"oos-{i}", "live") for i, d in enumerate(oos)])
        reference = {
            "label_counts": {"billing": 45, "refund": 45, "oos": 10},
            "out_of_scope_label": "oos",
        }
        state = monitor_log(log, target=0.9, delta=0.05, reference=reference)
        assert monitor_log(log, target=0.9, delta=0.05)["shift"] is None
    shift = state["shift"]
    assert shift["n_live"] == 250
    assert shift["oos_live"] == pytest.approx(0.2) and shift["oos_reference"] == pytest.approx(0.1)
    assert shift["oos_difference"] == pytest.approx(0.1)
    # live: billing 0.8, oos 0.2; calibration: billing 0.45, refund 0.45, oos 0.1
    assert shift["total_variation"] == pytest.approx(0.45)


def _dispute(url: str, share: float) -> None:
    """Give a ``share`` of the audited decisions (spread over the stream) a second,
    different audit label."""
    with open_log(url) as log:
        rows = [r for r in log.rows() if r["audited"] == 1]
        first = {o["decision_id"]: o["gold_intent"] for o in log.outcomes()}
        other = {"billing": "refund", "refund": "billing"}
        log.add_outcomes(
            [
                {"decision_id": r["decision_id"], "gold_intent": other[first[r["decision_id"]]],
                 "source": "audit"}
                for i, r in enumerate(rows)
                if int((i + 1) * share) > int(i * share)
            ]
        )  # fmt: skip


@pytest.mark.parametrize(
    ("n", "precision", "target", "share", "extra", "status", "code"),
    [
        (600, 0.99, 0.9, 0.0, (), "certified_online", 0),
        (400, 0.9, 0.9, 0.0, (), "holding", 0),
        (1200, 0.5, 0.9, 0.0, (), "breach", 1),
        (10, 1.0, 0.9, 0.0, (), "insufficient", 3),
        (600, 0.99, 0.8, 0.1, (), "certified_online", 4),  # labels in question
        (600, 0.99, 0.8, 0.1, ("--max-disputed-share", "0.2"), "certified_online", 0),
        (600, 0.99, 0.8, 0.04, (), "certified_online", 0),  # within the default 0.05
        (1200, 0.5, 0.9, 0.1, (), "breach", 1),  # a breach is a breach, disputes or not
        (10, 1.0, 0.9, 0.5, (), "insufficient", 4),
    ],
)
def test_monitor_exit_codes_say_what_to_do(
    tmp_path, capsys, n, precision, target, share, extra, status, code
):
    url = _log(tmp_path, n, lambda i: precision)
    if share:
        _dispute(url, share)
    argv = ["monitor", "--log", url, "--target", str(target), "--delta", "0.05", *extra]
    assert main([*argv, "--json"]) == code
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == status and doc["exit_code"] == code
    assert doc["disputes"]["exceeded"] is (code == 4 or (status == "breach" and share > 0.05))
    assert main(argv) == code  # the same code without --json
    out = capsys.readouterr().out
    assert status in out and ("DISPUTED" in out) is doc["disputes"]["exceeded"]


def test_monitor_errors_exit_2(tmp_path, capsys):
    url = _log(tmp_path, 20, lambda i: 1.0)
    for argv, words in [
        (["--max-disputed-share", "1.5"], "between 0 and 1"),
        (["--router-version", "9"], "no audited decision"),
    ]:
        assert main(["monitor", "--log", url, "--target", "0.9", "--delta", "0.05", *argv]) == 2
        assert words in capsys.readouterr().err
    bare = tmp_path / "bare"
    bare.mkdir()
    bare_url = f"sqlite:///{bare / 'log.sqlite'}"
    with open_log(bare_url, audit=AuditSampler(1.0, "k")) as log:
        log.log_many([(_decision(0), "x", "live")])
    assert main(["monitor", "--log", bare_url, "--target", "0.9", "--delta", "0.05"]) == 2
    assert "knows no labels of router 'r' version '1'" in capsys.readouterr().err
