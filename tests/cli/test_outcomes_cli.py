"""``hybridroute outcomes add``, ``audits pending`` and ``route --audit-rate``: files read
safely, all or nothing, errors naming file / row / column (exit 2); audits never change
what is routed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from hybridroute.records import AUDIT_KEY_ENV, AuditSampler, OutcomeError, open_log
from hybridroute.router import load_router

from . import test_route_batch
from .test_route import bounded_main, one_error_line
from .test_route_batch import good_line, write_batch

bundle = test_route_batch.bundle  # the module's router bundle fixture, trained once here


def cli(*args: str) -> int:
    return bounded_main(list(args), timeout=120)


@pytest.fixture
def routed(bundle, tmp_path, monkeypatch, capsys):
    """A log of 60 routed tickets, every auto-routed one audited (rate 1)."""
    monkeypatch.setenv(AUDIT_KEY_ENV, "test-audit-key")
    batch = write_batch(tmp_path / "batch.jsonl", mixed_lines(60))
    log = tmp_path / "log.sqlite"
    assert cli("route", "--router", bundle, "--input", str(batch), "--log", str(log),
               "--audit-rate", "1") == 0  # fmt: skip
    capsys.readouterr()
    with open_log(log) as dl:
        # the bundle's labels (route --log registers them too; this test does not rely on it)
        dl.register_router(load_router(bundle))
        rows = list(dl.rows())
    return log, rows


def now_in(offset_hours: int = 0) -> str:
    """Now (after every decision of the test was logged), ISO 8601 in a zone."""
    zone = timezone(timedelta(hours=offset_hours))
    return datetime.now(UTC).astimezone(zone).isoformat()


def mixed_lines(n: int) -> list[str]:
    """Tickets of every kind: auto-routed, sent to a human by a rule, unsure of the model."""
    lines = []
    for i in range(n):
        if i % 5 == 3:
            lines.append(good_line(i, facts={"amount": 10_000 + i}))  # the risk rule
        elif i % 5 == 4:
            lines.append(good_line(i, text=f"hmm {i} zzz qqq"))  # the model is unsure
        else:
            lines.append(good_line(i))
    return lines


def write_jsonl(path: Path, items: list[object]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


def test_route_with_and_without_auditing_routes_the_same(bundle, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(AUDIT_KEY_ENV, "k")
    batch = write_batch(tmp_path / "batch.jsonl", mixed_lines(80))
    records = {}
    for rate in ("0", "0.5", "1"):
        log = tmp_path / f"log-{rate}.sqlite"
        assert cli("route", "--router", bundle, "--input", str(batch), "--log", str(log),
                   "--audit-rate", rate) == 0  # fmt: skip
        with open_log(log) as dl:
            rows = list(dl.rows())
        records[rate] = [r["record"] for r in rows]
        auto = [r for r in rows if r["stage"] == "model"]
        assert auto and len(auto) < len(rows)  # both kinds in the batch
        if rate == "0":
            assert all(r["audit_p"] is None for r in rows)
        else:
            assert all(r["audit_p"] == float(rate) for r in auto)
            assert all(r["audit_p"] == 0.0 and not r["audited"] for r in rows if r not in auto)
            sampler = AuditSampler(float(rate), "k")
            assert [bool(r["audited"]) for r in auto] == [
                sampler.mark(r["decision_id"], "model")[1] for r in auto
            ]
    assert records["0"] == records["0.5"] == records["1"]  # an audit never changes a route
    capsys.readouterr()


def test_a_single_route_is_audited_too(bundle, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(AUDIT_KEY_ENV, "k")
    log = tmp_path / "one.sqlite"
    assert cli("route", "--router", bundle, "--text", "where is my parcel?", "--facts",
               '{"amount": 3}', "--log", str(log), "--audit-rate", "1", "--id", "a") == 0  # fmt: skip
    with open_log(log) as dl:
        (row,) = dl.rows()
    assert row["audit_p"] == (1.0 if row["stage"] == "model" else 0.0)
    capsys.readouterr()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--audit-rate", "0.1"), f"needs the secret audit key: set {AUDIT_KEY_ENV}"),
        (("--audit-rate", "0.1", "--no-log"), "--audit-rate needs --log"),
        (("--audit-rate", "0.1", "--url", "http://127.0.0.1:9"), "its own --audit-rate"),
    ],
)
def test_audit_rate_mistakes_are_one_line_exit_2(
    bundle,
    tmp_path,
    monkeypatch,
    capsys,
    args,
    words,
):
    monkeypatch.delenv(AUDIT_KEY_ENV, raising=False)
    if "--no-log" in args:
        args = tuple(a for a in args if a != "--no-log")
        base = ["route", "--router", bundle, "--text", "hi"]
    elif "--url" in args:
        monkeypatch.setenv(AUDIT_KEY_ENV, "k")
        base = ["route", "--text", "hi", "--log", str(tmp_path / "x.sqlite")]
    else:
        base = ["route", "--router", bundle, "--text", "hi", "--log", str(tmp_path / "x.sqlite")]
    assert cli(*base, *args) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "x.sqlite").exists()


def test_outcomes_add_from_jsonl_and_csv(routed, tmp_path, capsys):
    log, rows = routed
    first_at = now_in(0)
    jsonl = write_jsonl(
        tmp_path / "out.jsonl",
        [{"decision_id": rows[0]["decision_id"], "gold_intent": "order_status", "source": "audit"},
         {"request_id": rows[1]["item_id"], "router": "support", "router_version": "1",
          "gold_next_step": "order_status", "source": "human_review",
          "at": first_at}],
    )  # fmt: skip
    assert cli("outcomes", "add", str(jsonl), "--log", str(log)) == 0
    assert "2 added, 0 already present, 0 conflicting" in capsys.readouterr().out
    assert cli("outcomes", "add", str(jsonl), "--log", str(log), "--json") == 0  # idempotent
    assert json.loads(capsys.readouterr().out) == {
        "added": 0, "already_present": 2, "conflicts": []
    }  # fmt: skip
    csv = tmp_path / "out.csv"
    csv.write_text(
        "decision_id,request_id,router,router_version,gold_intent,source,at\n"
        f"{rows[0]['decision_id']},,,,refund_request,audit,\n"  # another gold: a conflict
        f",{rows[2]['item_id']},support,1,order_status,user_feedback,{now_in(1)}\n"
        "\n",
        encoding="utf-8",
    )
    assert cli("outcomes", "add", str(csv), "--log", str(log), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    # rows are the file's lines: the header is line 1, the first outcome line 2
    assert report["added"] == 2 and [c["row"] for c in report["conflicts"]] == [2]
    with open_log(log) as dl:
        stored = dl.outcomes()
    assert len(stored) == 4
    assert stored[1]["observed_at"] == datetime.fromisoformat(first_at).isoformat(
        timespec="microseconds"
    )


def test_outcomes_add_router_registers_a_version_logged_before_registration(
    bundle, tmp_path, capsys
):
    router = load_router(bundle)
    log = tmp_path / "old.sqlite"
    with open_log(log, audit=AuditSampler(1.0, "k")) as dl:  # as an older version wrote it
        items = [{"text": f"where is my parcel {i}?", "facts": {"amount": i}} for i in range(5)]
        logged = dl.log_many([(d, f"t{i}", "live") for i, d in enumerate(router.route_many(items))])
    outcome = {"decision_id": logged[0].decision_id, "gold_intent": "order_status",
               "source": "human_review"}  # fmt: skip
    path = write_jsonl(tmp_path / "o.jsonl", [outcome])
    assert cli("outcomes", "add", str(path), "--log", str(log)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "knows no labels of router 'support' version '1'" in line
    assert "hybridroute outcomes add --router BUNDLE" in line
    assert cli("outcomes", "add", str(path), "--log", str(log), "--router", bundle) == 0
    assert "1 added" in capsys.readouterr().out
    with open_log(log) as dl:
        assert list(dl.router_vocabularies()) == [("support", "1")]
        # the version's labels check what comes next
        bad = {**outcome, "gold_intent": "no_such_label"}
        with pytest.raises(OutcomeError, match="'no_such_label' is not a label of router"):
            dl.add_outcomes([bad])
    # --router alone only registers; neither a file nor --router is a mistake
    fresh = tmp_path / "fresh.sqlite"
    with open_log(fresh) as dl:
        pass
    assert cli("outcomes", "add", "--log", str(fresh), "--router", bundle, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["registered"] == [{"router": "support", "router_version": "1"}]
    assert doc["added"] == 0
    with open_log(fresh) as dl:
        assert list(dl.router_vocabularies()) == [("support", "1")]
    assert cli("outcomes", "add", "--log", str(fresh), "--router", bundle) == 0
    assert "router support version 1: 13 labels" in capsys.readouterr().out
    assert cli("outcomes", "add", "--log", str(fresh)) == 2
    assert "or --router BUNDLE" in one_error_line(capsys.readouterr().err)
    # a bundle under a registered version whose labels differ is refused
    other = tmp_path / "other.sqlite"
    with open_log(other) as dl:
        dl.register_router(name="support", version="1", labels=["x"], destinations=["answer"])
    assert cli("outcomes", "add", str(path), "--log", str(other), "--router", bundle) == 2
    assert "registered in this log with other labels" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("bad.jsonl", '{"decision_id": "D", "gold_intent": "G", "source": "audit"}\n\n'
                      '{"decision_id": "D", "gold_intent": "G", "source": "oracle"}\n',
         "bad.jsonl, row 3, column 'source': must be one of"),
        ("bad.jsonl", '{"decision_id": "D", "gold_intent": "G", "source": "audit"}\n'
                      '{"decision_id": "nope", "gold_intent": "G", "source": "audit"}\n',
         "bad.jsonl, row 2, column 'decision_id': the log holds no decision"),
        ("bad.jsonl", '{"decision_id": "D", "gold_intent": "G", "source": "audit"}\n\n\n'
                      '{"decision_id": "D", "gold_intent": "no_such_label", "source": "audit"}\n',
         "bad.jsonl, row 4, column 'gold_intent': 'no_such_label' is not a label of router"),
        ("bad.csv", "decision_id,gold_next_step,source\nD,G,audit\n\nD,rm -rf /,audit\n",
         "bad.csv, row 4, column 'gold_next_step': 'rm -rf /' is not a destination"),
        ("bad.jsonl", '{"decision_id": "D", "source": "audit", "source": "audit"}\n',
         "line 1: duplicate key 'source'"),
        ("bad.jsonl", '{"decision_id": "D", "gold_intent": "x", "source": "audit", '
                      '"at": "2026-01-01"}\n', "row 1, column 'at': needs a UTC offset"),
        ("bad.csv", "decision_id,gold_intent,source\nD,G,audit\nD,,audit\n",
         "bad.csv, row 3, column 'gold_intent': no gold given"),
        ("bad.csv", 'decision_id,gold_intent,source\nD,"G",audit\nD,"two\nlines",audit\nD,,x\n',
         "bad.csv, row 5, column 'gold_intent': no gold given"),  # a cell over two lines
        ("bad.csv", "decision_id,gold,source\nD,G,audit\n",
         "bad.csv, row 1 (the header), column 'gold': is not an outcome field"),
        ("bad.csv", "source,decision_id,source\nD,G,audit\n",
         "bad.csv, row 1 (the header), column 'source': appears twice in the header"),
        ("bad.csv", "decision_id,gold_intent,source\nD,G,audit,extra\n",
         "bad.csv, row 2: has 4 cells"),
        ("bad.txt", "whatever", "must be JSON lines (.jsonl) or CSV (.csv)"),
    ],
)  # fmt: skip
def test_a_bad_outcomes_file_is_one_line_exit_2_and_writes_nothing(
    routed, tmp_path, capsys, name, content, words
):
    log, rows = routed
    path = tmp_path / name
    content = content.replace("D", rows[0]["decision_id"]).replace("G", "order_status")
    path.write_text(content, encoding="utf-8")
    assert cli("outcomes", "add", str(path), "--log", str(log)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: ") and words in line and str(path) in line
    with open_log(log) as dl:
        assert dl.outcomes() == []


def test_outcomes_add_refuses_a_missing_log_or_a_fifo(tmp_path, capsys):
    import os

    good = write_jsonl(tmp_path / "o.jsonl", [{"decision_id": "x", "gold_intent": "a",
                                              "source": "audit"}])  # fmt: skip
    assert cli("outcomes", "add", str(good), "--log", str(tmp_path / "none.sqlite")) == 2
    assert "no such decision log" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "none.sqlite").exists()
    fifo = tmp_path / "o.jsonl.fifo.jsonl"
    os.mkfifo(fifo)
    assert cli("outcomes", "add", str(fifo), "--log", str(tmp_path / "none.sqlite")) == 2
    assert "is a FIFO (named pipe); a file of outcomes must be a regular file" in one_error_line(
        capsys.readouterr().err
    )


def test_audits_pending_lists_what_is_left_to_label(routed, tmp_path, capsys):
    log, rows = routed
    auto = [r for r in rows if r["stage"] == "model"]
    assert cli("audits", "pending", "--log", str(log), "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == len(auto) and doc["pending"][0]["decision_id"] == auto[0]["decision_id"]
    assert doc["pending"][0]["text"] == auto[0]["record"]["input_snapshot"]["text"]
    done = write_jsonl(
        tmp_path / "done.jsonl",
        [{"decision_id": r["decision_id"], "gold_intent": "order_status", "source": "audit"}
         for r in auto[:3]],
    )  # fmt: skip
    assert cli("outcomes", "add", str(done), "--log", str(log)) == 0
    capsys.readouterr()
    assert cli("audits", "pending", "--log", str(log)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{len(auto) - 3} audit(s) pending")
    assert auto[3]["decision_id"] in out and auto[0]["decision_id"] not in out
    assert cli("audits", "pending", "--log", str(log), "--router-version", "9", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {"count": 0, "pending": []}


def test_serve_with_an_audit_rate_needs_the_key_before_it_starts(
    bundle, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv(AUDIT_KEY_ENV, raising=False)
    log = tmp_path / "serve.sqlite"
    assert (
        bounded_main(
            ["serve", "--router", bundle, "--log", str(log), "--audit-rate", "0.05"], timeout=60
        )
        == 2
    )
    assert f"set {AUDIT_KEY_ENV}" in one_error_line(capsys.readouterr().err)
    assert not log.exists()  # refused before the log is opened
