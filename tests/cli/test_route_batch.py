"""``hybridroute route --router``: hostile text, all-or-nothing batches, rejects, idempotent
reruns, scrubbed output. Every CLI call is bounded (a thread joined with a timeout, or a
subprocess with ``timeout=`` and a memory limit), so a regression fails instead of hanging."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from hybridroute.contracts import snapshot_hash
from hybridroute.records import DecisionLog

from ..router.conftest import EXAMPLE, fitted_policy
from .test_route import bounded_main, one_error_line, run_cli


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    root = tmp_path_factory.mktemp("route-batch")
    ds = load_dataset("support-tickets")
    clf = LocalClassifier(Cs=(10.0,)).fit(ds.split("train").texts, ds.split("train").y)
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    router = HybridRouter(
        rules=load_rules(EXAMPLE), classifier=clf, policy=policy, name="support", version="1"
    )
    router.save(root / "router")
    return str(root / "router")


def good_line(i: int, **extra) -> str:
    item = {"id": f"t{i}", "text": f"where is my parcel number {i}?", "facts": {"amount": i}}
    item.update(extra)
    return json.dumps(item)


def write_batch(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def log_ids(path: Path) -> list[str | None]:
    with DecisionLog(path) as log:
        return [r["item_id"] for r in log.rows()]


def route(bundle, *args) -> int:
    return bounded_main(["route", "--router", bundle, *args], timeout=120)


# ---------------------------------------------------------------- the scenario


@pytest.mark.parametrize(
    "bad_lines",
    [{290}, {1, 150, 290, 300}, set(range(257, 301))],
    ids=["line-290", "first-middle-last", "after-the-first-chunk"],
)
def test_bad_lines_route_and_log_nothing_then_reruns_are_idempotent(
    bundle, tmp_path, capsys, bad_lines
):
    lines = [good_line(i) for i in range(1, 301)]
    for n in bad_lines:
        lines[n - 1] = good_line(n, facts={"amount": "lots"})
    batch = write_batch(tmp_path / "batch.jsonl", lines)
    log = tmp_path / "log.sqlite"

    assert route(bundle, "--input", str(batch), "--log", str(log)) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing printed as routed
    assert "Traceback" not in err
    listed = sorted(bad_lines)[:20]  # every bad line (up to 20), each naming file and line
    for n in listed:
        assert f"error: {batch}, line {n}: fact 'amount'" in err
    assert len(re.findall(r"line \d+: fact 'amount'", err)) == len(listed)
    if len(bad_lines) > 20:
        assert f"... and {len(bad_lines) - 20} more bad line(s)" in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"error: {batch}: {len(bad_lines)} of 300 line(s) are invalid")
    )
    assert "nothing was routed or logged" in err
    assert not log.exists() or log_ids(log) == []

    write_batch(batch, [good_line(i) for i in range(1, 301)])  # fixed
    assert route(bundle, "--input", str(batch), "--log", str(log)) == 0
    assert "routed 300 items" in capsys.readouterr().out
    assert sorted(log_ids(log)) == sorted(f"t{i}" for i in range(1, 301))  # type: ignore[arg-type]

    assert route(bundle, "--input", str(batch), "--log", str(log)) == 0
    assert "300 already logged, skipped" in capsys.readouterr().out
    assert len(log_ids(log)) == 300


def test_the_same_with_rejects(bundle, tmp_path, capsys):
    lines = [good_line(i) for i in range(1, 301)]
    lines[289] = good_line(290, facts={"amount": "lots"})
    lines[9] = '{"id": "t10", "text": "x", "facts": {}, "facts": {"amount": 1}}'
    batch = write_batch(tmp_path / "batch.jsonl", lines)
    log, rejects = tmp_path / "log.sqlite", tmp_path / "rejects.jsonl"

    assert route(bundle, "--input", str(batch), "--log", str(log), "--rejects", str(rejects)) == 0
    out, err = capsys.readouterr()
    assert "routed 298 items" in out and "logged 298" in out
    assert f"rejected 2 of 300 line(s); written to {rejects}" in out
    assert f"rejected: {batch}, line 10: duplicate key 'facts'" in err
    assert len(log_ids(log)) == 298
    rows = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [10, 290]
    assert rows[0]["input"] == lines[9] and rows[1]["input"] == lines[289]
    assert "duplicate key 'facts'" in rows[0]["error"]
    assert "fact 'amount'" in rows[1]["error"]
    assert {r["file"] for r in rows} == {str(batch)}

    write_batch(batch, [good_line(i) for i in range(1, 301)])
    assert route(bundle, "--input", str(batch), "--log", str(log), "--rejects", str(rejects)) == 0
    out = capsys.readouterr().out
    assert "logged 2" in out and "298 already logged, skipped" in out
    assert "rejected 0 of 300" in out
    assert rejects.read_text() == ""  # no stale rejects from the run before
    assert len(log_ids(log)) == 300
    assert route(bundle, "--input", str(batch), "--log", str(log), "--rejects", str(rejects)) == 0
    assert "300 already logged, skipped" in capsys.readouterr().out
    assert len(log_ids(log)) == 300


# ---------------------------------------------------------------- every kind of bad line

MIXED = [
    # (line, expected substring in its error)
    ('{"id": "a1", "text": "x", "facts": {}, "facts": {"amount": 1}}', "duplicate key 'facts'"),
    ('{"id": "a2", "text": "x", "id": "a3"}', "duplicate key 'id'"),
    ('{"text": "x", "facts": ' + "[" * 1000 + "]" * 1000 + "}", "nested too deeply"),
    ('{"text": "x", "facts": {"amount": ' + "9" * 5000 + "}}", "integer with 5000 digits"),
    ('{"text": "x", "facts": {"amount": NaN}}', "NaN"),
    ('{"text": "x\\u0000y"}', "text holds a NUL character"),
    ('{"text": "\\ud800"}', "lone surrogate"),
    ('{"text": 5}', "text must be a string, got int"),
    ('{"text": ["a"]}', "text must be a string, got list"),
    ('{"text": "' + "x" * 100_001 + '"}', "text is 100,001 characters long"),
    ('{"txt": "typo"}', "unknown key(s) ['txt']"),
    ("[1, 2]", "each line must be a JSON object"),
    ("not json", "not valid JSON"),
    ('{"id": true, "text": "x"}', "id must be a string or an integer, got bool"),
    ('{"id": 1.5, "text": "x"}', "id must be a string or an integer, got float"),
    ('{"id": "", "text": "x"}', "id is empty"),
    ('{"id": "t1", "text": "again"}', "duplicate id 't1' (first on line 1)"),
    ('{"text": "x", "facts": {"amount": "lots"}}', "fact 'amount'"),
    ('{"text": "x", "facts": {"colour": "red"}}', "fact 'colour'"),
    ('{"text": "x", "facts": [1]}', "facts"),
    ('{"text": "x", "evidence": {"required_points": 5}}', "list of strings"),
]


def mixed_batch(path: Path) -> tuple[Path, dict[int, str]]:
    """Good lines with every kind of bad line between them (and a non-UTF-8 line)."""
    lines = [good_line(1)]
    expected: dict[int, str] = {}
    for i, (line, match) in enumerate(MIXED):
        lines.append(line)
        expected[len(lines)] = match
        lines.append(good_line(100 + i))
    lines.append("")  # blank lines are skipped, not errors
    data = ("\n".join(lines) + "\n").encode("utf-8")
    data += b'{"text": "caf\xe9"}\n' + good_line(999).encode() + b"\n"
    expected[len(lines) + 1] = "not UTF-8"
    path.write_bytes(data)
    return path, expected


def test_every_bad_line_is_reported_with_its_reason(bundle, tmp_path, capsys, monkeypatch):
    from hybridroute.cli import _route

    monkeypatch.setattr(_route, "MAX_REPORTED_ERRORS", 100)
    batch, expected = mixed_batch(tmp_path / "mixed.jsonl")
    log = tmp_path / "log.sqlite"
    assert route(bundle, "--input", str(batch), "--log", str(log), "--json") == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    reported = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(rf"^error: {re.escape(str(batch))}, line (\d+): (.*)$", err, re.M)
    }
    assert set(reported) == set(expected)
    for n, match in expected.items():
        assert match in reported[n], (n, reported[n])
    assert f"{len(expected)} of {len(expected) + len(MIXED) + 2} line(s) are invalid" in err
    assert not log.exists()


def test_the_report_is_capped(bundle, tmp_path, capsys):
    lines = [good_line(i, facts={"amount": "lots"}) for i in range(1, 31)]
    batch = write_batch(tmp_path / "b.jsonl", lines)
    assert route(bundle, "--input", str(batch)) == 2
    err = capsys.readouterr().err
    assert len(re.findall(r", line \d+: fact 'amount'", err)) == 20
    assert "... and 10 more bad line(s)" in err
    assert "30 of 30 line(s) are invalid" in err


def test_rejects_take_every_kind_of_bad_line(bundle, tmp_path, capsys):
    batch, expected = mixed_batch(tmp_path / "mixed.jsonl")
    rejects, log = tmp_path / "rej.jsonl", tmp_path / "log.sqlite"
    args = ["--input", str(batch), "--log", str(log), "--rejects", str(rejects), "--json"]
    assert route(bundle, *args) == 0
    out, err = capsys.readouterr()
    printed = [json.loads(x) for x in out.splitlines()]  # stdout holds only decisions
    assert len(printed) == len(MIXED) + 2
    assert f"rejected {len(expected)} of" in err and str(rejects) in err  # said on stderr
    rows = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert {r["line"]: r for r in rows}.keys() == expected.keys()
    for r in rows:
        assert expected[r["line"]] in r["error"]
        assert set(r) >= {"file", "line", "error", "input"}
    assert len(log_ids(log)) == len(MIXED) + 2


def test_rejects_are_scrubbed_like_the_log(bundle, tmp_path, capsys, monkeypatch):
    fake = "sk-test-" + "Zq9" * 12
    monkeypatch.setenv("OPENAI_API_KEY", fake)
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "a-long-enough-pepper")
    lines = [
        good_line(1),
        json.dumps({"text": f"my key is {fake}", "facts": {"amount": "lots"}}),
        json.dumps({"text": "x", "facts": {"action": "delete_account_data", "amount": "lots"}}),
        f'{{"text": "{fake}" broken',
    ]
    batch = write_batch(tmp_path / "b.jsonl", lines)
    rejects = tmp_path / "rej.jsonl"
    args = ["--input", str(batch), "--rejects", str(rejects), "--sensitive", "action"]
    assert route(bundle, *args) == 0
    capsys.readouterr()
    raw = rejects.read_text(encoding="utf-8")
    assert fake not in raw and "delete_account_data" not in raw
    rows = [json.loads(x) for x in raw.splitlines()]
    assert [r["line"] for r in rows] == [2, 3, 4]
    assert all(r.get("redacted") for r in rows)
    assert "hmac-sha256:" in rows[1]["input"]


def test_a_sensitive_facts_value_is_not_echoed_in_errors(bundle, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "a-long-enough-pepper")
    secret = "ana-at-example-dot-com"
    batch = write_batch(
        tmp_path / "b.jsonl", [json.dumps({"text": "x", "facts": {"action": secret}})]
    )
    assert route(bundle, "--input", str(batch), "--sensitive", "action") == 2
    err = capsys.readouterr().err
    assert "fact 'action'" in err and secret not in err


@pytest.mark.parametrize("where", ["input", "log", "dir", "fifo"])
def test_rejects_must_be_a_separate_regular_file(bundle, tmp_path, capsys, where):
    batch = write_batch(tmp_path / "b.jsonl", [good_line(1)])
    log = tmp_path / "log.sqlite"
    DecisionLog(log).close()
    target = {"input": batch, "log": log, "dir": tmp_path}.get(where)
    if where == "fifo":
        target = tmp_path / "rejects.fifo"
        os.mkfifo(target)
    args = ["--input", str(batch), "--log", str(log), "--rejects", str(target)]
    if where == "fifo":  # a regression would block on opening it: a subprocess, bounded
        rc, _, err = run_cli("route", "--router", bundle, *args, timeout=120)
    else:
        rc = route(bundle, *args)
        err = capsys.readouterr().err
    assert rc == 2
    line = one_error_line(err)
    assert line.startswith("error: --rejects:")
    assert log_ids(log) == []
    assert batch.read_text() == good_line(1) + "\n"


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--rejects", "r.jsonl", "--text", "hi"], "--rejects needs --input"),
        (["--input", "b.jsonl", "--text", "hi"], "for one ticket"),
        (["--input", "b.jsonl", "--id", "x"], "for one ticket"),
    ],
)
def test_option_combinations(bundle, capsys, args, match):
    assert route(bundle, *args) == 2
    assert match in capsys.readouterr().err


# ---------------------------------------------------------------- a batch is one write


def test_a_failure_while_routing_logs_nothing(bundle, tmp_path, capsys, monkeypatch):
    from hybridroute.router import HybridRouter

    real = HybridRouter.route_many
    calls = {"n": 0}

    def flaky(self, items):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the model server went away")
        return real(self, items)

    monkeypatch.setattr(HybridRouter, "route_many", flaky)
    batch = write_batch(tmp_path / "b.jsonl", [good_line(i) for i in range(1, 701)])
    log = tmp_path / "log.sqlite"
    with pytest.raises(RuntimeError, match="went away"):
        route(bundle, "--input", str(batch), "--log", str(log), "--json")
    assert capsys.readouterr().out == ""
    assert not log.exists() or log_ids(log) == []


@pytest.mark.parametrize(
    ("n_good", "bad_lines"), [(1, ()), (300, ()), (300, (2, 299))], ids=["one", "300", "rejects"]
)
def test_each_batch_line_is_checked_once(bundle, tmp_path, capsys, monkeypatch, n_good, bad_lines):
    """The checked value of each line is what is routed: no line is prepared twice."""
    from hybridroute.rules import RuleSet

    validate = RuleSet.validate_facts
    seen: list[object] = []

    def counting(self, facts):
        seen.append(facts)
        return validate(self, facts)

    monkeypatch.setattr(RuleSet, "validate_facts", counting)
    lines = [good_line(i) for i in range(1, n_good + 1)]
    for n in bad_lines:
        lines[n - 1] = good_line(n, facts={"amount": "lots"})
    batch = write_batch(tmp_path / "b.jsonl", lines)
    args = ["--input", str(batch), "--json"]
    if bad_lines:
        args += ["--rejects", str(tmp_path / "rejects.jsonl")]
    assert route(bundle, *args) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == n_good - len(bad_lines)
    assert len(seen) == n_good  # one check a line (a bad one fails its only check)


# ---------------------------------------------------------------- --url


class StandInService:
    """``POST /v1/route/batch`` answered in order (a rule decision of each item's facts and
    text), every body kept: a stand-in for ``hybridroute serve`` behind ``route --url``."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def __call__(self, request):
        import httpx

        from hybridroute.contracts import Decision

        body = json.loads(request.content)
        self.bodies.append(body)
        results = []
        for it in body["items"]:
            snapshot = {"facts": it["facts"], **({"text": it["text"]} if it["text"] else {})}
            decision = Decision(
                router="support",
                router_version="1",
                input_snapshot=snapshot,
                allowed_destinations=("human_review",),
                selected_destination="human_review",
                reason_code="default_exit",
                stage="rule",
            )
            rid = it.get("request_id")
            results.append(
                {"decision_id": f"d-{rid}", "duplicate": False, "decision": decision.to_dict()}
            )
        return httpx.Response(200, json={"results": results})


@pytest.fixture()
def service(monkeypatch):
    import httpx

    from hybridroute.cli import _route
    from hybridroute.client import RouterClient

    stand_in = StandInService()
    monkeypatch.setattr(
        _route,
        "_connect",
        lambda url: RouterClient(url, transport=httpx.MockTransport(stand_in), retries=0),
    )
    return stand_in


def test_a_url_batch_sends_each_line_as_a_route_request(service, tmp_path, capsys):
    from hybridroute.cli._route import URL_BATCH_ITEMS

    n = 2 * URL_BATCH_ITEMS + 5
    lines = [good_line(i) for i in range(n)]
    lines[3] = json.dumps({"id": 42, "text": "an integer id", "facts": {"amount": 1}})
    lines[4] = json.dumps({"text": "no id"})
    batch = write_batch(tmp_path / "b.jsonl", lines)
    assert (
        bounded_main(["route", "--url", "http://127.0.0.1:9", "--input", str(batch), "--json"]) == 0
    )
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [len(b["items"]) for b in service.bodies] == [URL_BATCH_ITEMS, URL_BATCH_ITEMS, 5]
    sent = [it for b in service.bodies for it in b["items"]]
    assert sent[0] == {
        "text": "where is my parcel number 0?",
        "facts": {"amount": 0},
        "request_id": "t0",
    }
    assert sent[3]["request_id"] == "42"  # the id the log would store
    assert sent[4] == {"text": "no id", "facts": {}}  # no request id: none sent
    assert [(row["line"], row["id"]) for row in out[:5]] == [
        (1, "t0"),
        (2, "t1"),
        (3, "t2"),
        (4, "42"),
        (5, None),
    ]
    assert len(out) == n


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ({"text": "a\u0000b"}, "NUL"),
        ({"text": 5}, "text must be a string, got int"),
        ({"text": "x", "facts": [1]}, "facts must be a JSON object, got list"),
        ({"text": "x", "evidence": ["e"]}, "evidence must be a mapping"),
        ({"text": "x", "txt": "y"}, "unknown key"),
    ],
    ids=["nul", "text-int", "facts-list", "evidence-list", "unknown-key"],
)
def test_a_url_batch_sends_nothing_when_a_line_is_bad(service, tmp_path, capsys, line, match):
    batch = write_batch(tmp_path / "b.jsonl", [good_line(1), json.dumps(line), good_line(3)])
    assert bounded_main(["route", "--url", "http://127.0.0.1:9", "--input", str(batch)]) == 2
    err = capsys.readouterr().err
    assert "line 2:" in err and re.search(match, err) and "nothing was sent" in err
    assert service.bodies == []


# ---------------------------------------------------------------- request ids


def test_lines_without_an_id_carry_no_request_id(bundle, tmp_path, capsys):
    """The line number is no request id: two files would share it."""
    log = tmp_path / "log.sqlite"
    for name in ("a", "b"):
        lines = [json.dumps({"text": f"{name}: parcel {i}"}) for i in range(3)]
        batch = write_batch(tmp_path / f"{name}.jsonl", lines)
        assert route(bundle, "--input", str(batch), "--log", str(log)) == 0
        out = capsys.readouterr().out
        assert "logged 3" in out and "3 item(s) have no 'id'" in out
    assert log_ids(log) == [None] * 6


@pytest.mark.parametrize(("first", "second"), [(7, "7"), ("7", 7), ("x", "x"), (12, 12)])
def test_an_id_may_appear_once_in_a_batch(bundle, tmp_path, capsys, first, second):
    lines = [json.dumps({"id": first, "text": "a"}), json.dumps({"id": second, "text": "b"})]
    batch = write_batch(tmp_path / "b.jsonl", lines)
    assert route(bundle, "--input", str(batch)) == 2
    assert f"line 2: duplicate id '{second}' (first on line 1)" in capsys.readouterr().err


def test_a_changed_input_under_a_logged_id_refuses_the_batch(bundle, tmp_path, capsys):
    log = tmp_path / "log.sqlite"
    batch = write_batch(tmp_path / "b.jsonl", [good_line(1), good_line(2)])
    assert route(bundle, "--input", str(batch), "--log", str(log)) == 0
    capsys.readouterr()
    for changed in (
        good_line(2, text="a different ticket now"),
        json.dumps({"id": "t2", "text": "x", "facts": {"has_permission": False}}),
    ):
        write_batch(batch, [good_line(3), good_line(1), changed])
        assert route(bundle, "--input", str(batch), "--log", str(log)) == 2
        err = capsys.readouterr().err
        assert "line 3:" in err and "'t2'" in err and "another request" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert sorted(log_ids(log)) == ["t1", "t2"]  # nothing of the batch was logged
    # the same requests again: the stored decisions, nothing new
    write_batch(batch, [good_line(1), good_line(2)])
    assert route(bundle, "--input", str(batch), "--log", str(log)) == 0
    assert "2 already logged, skipped" in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad_id", ["sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234", "api_key=abcdef123456", "ghp_" + "x1Y2" * 9]
)
def test_an_id_shaped_like_a_credential_is_refused(bundle, tmp_path, capsys, bad_id):
    log = tmp_path / "log.sqlite"
    batch = write_batch(tmp_path / "b.jsonl", [json.dumps({"id": bad_id, "text": "parcel"})])
    assert route(bundle, "--input", str(batch), "--log", str(log)) == 2
    err = capsys.readouterr().err
    assert "line 1" in err and "looks like a credential" in err and bad_id not in err
    assert route(bundle, "--text", "parcel", "--id", bad_id, "--log", str(log)) == 2
    err = capsys.readouterr().err
    assert "looks like a credential" in err and bad_id not in err
    assert not log.exists() or log_ids(log) == []


@pytest.mark.parametrize("env", ["ACME_SERVICE_TOKEN", "PAYMENTS_API_KEY", "DB_PASSWORD"])
def test_an_id_holding_a_credential_of_the_environment_is_refused_on_every_line(
    bundle, tmp_path, capsys, monkeypatch, env
):
    """The batch builds its scrubber once: it still knows the environment's credentials."""
    secret = "Zq7vLm2Pw9Xc4Rt8"
    monkeypatch.setenv(env, secret)
    lines = [good_line(1), json.dumps({"id": secret, "text": "a"}), good_line(3)]
    lines.append(json.dumps({"id": f"order-{secret}", "text": "b"}))
    batch = write_batch(tmp_path / "b.jsonl", lines)
    assert route(bundle, "--input", str(batch)) == 2
    err = capsys.readouterr().err
    assert "line 2: id looks like a credential" in err
    assert "line 4: id looks like a credential" in err
    assert secret not in err and "line 1" not in err and "line 3" not in err


# ---------------------------------------------------------------- printed JSON


def test_batch_json_is_scrubbed_and_marks_what_was_already_logged(
    bundle, tmp_path, capsys, monkeypatch
):
    fake = "sk-test-" + "Zq9" * 12
    monkeypatch.setenv("OPENAI_API_KEY", fake)
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "a-long-enough-pepper")
    lines = [
        good_line(1, text=f"my key {fake} leaked, help"),
        good_line(2, facts={"action": "change_bank_details"}),
        json.dumps({"text": "no id here"}),
    ]
    batch = write_batch(tmp_path / "b.jsonl", lines)
    log = tmp_path / "log.sqlite"
    args = ["--input", str(batch), "--log", str(log), "--json", "--sensitive", "action"]
    assert route(bundle, *args) == 0
    out, err = capsys.readouterr()
    assert fake not in out and "change_bank_details" not in out
    printed = [json.loads(x) for x in out.splitlines()]
    assert [(p["id"], p["line"]) for p in printed] == [("t1", 1), ("t2", 2), (None, 3)]
    for p in printed:
        assert p["snapshot_hash"] == snapshot_hash(p["input_snapshot"])
        assert "already_logged" not in p
    assert "[REDACTED]" in printed[0]["input_snapshot"]["text"]
    assert printed[1]["input_snapshot"]["facts"]["action"].startswith("hmac-sha256:")
    assert "routed 3 items" in err  # the summary goes to stderr in --json mode
    with DecisionLog(log) as dl:
        stored = [r["record"] for r in dl.rows()]
    assert [p["snapshot_hash"] for p in printed] == [s["snapshot_hash"] for s in stored]

    assert route(bundle, *args) == 0
    out, err = capsys.readouterr()
    again = [json.loads(x) for x in out.splitlines()]
    assert [p.get("already_logged") for p in again] == [True, True, None]
    assert "2 already logged, skipped" in err


def test_batch_json_without_a_log_is_scrubbed_too(bundle, tmp_path, capsys, monkeypatch):
    fake = "ghp_" + "a1B2" * 9
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", "a-long-enough-pepper")
    batch = write_batch(
        tmp_path / "b.jsonl",
        [good_line(1, text=f"token {fake}", facts={"action": "change_bank_details"})],
    )
    assert route(bundle, "--input", str(batch), "--json", "--sensitive", "action") == 0
    out = capsys.readouterr().out
    assert fake not in out and "change_bank_details" not in out
    p = json.loads(out)
    assert p["snapshot_hash"] == snapshot_hash(p["input_snapshot"])


# ---------------------------------------------------------------- files that never end


@pytest.mark.parametrize(
    ("kind", "match"),
    [("/dev/zero", "character device"), ("fifo", "FIFO"), ("dir", "directory")],
)
def test_input_from_a_device_fifo_or_directory_exits_2_at_once(bundle, tmp_path, kind, match):
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "in.fifo")
        os.mkfifo(path)
    elif kind == "dir":
        path = str(tmp_path)
    rc, out, err = run_cli("route", "--router", bundle, "--input", path, timeout=120)
    assert rc == 2 and out == ""
    line = one_error_line(err)
    assert path in line and match in line


def test_input_byte_limits(bundle, tmp_path, capsys, monkeypatch):
    from hybridroute.cli import _route

    lines = [good_line(i) for i in range(1, 51)]
    batch = write_batch(tmp_path / "b.jsonl", lines)
    monkeypatch.setattr(_route, "MAX_BATCH_BYTES", batch.stat().st_size - 1)
    assert route(bundle, "--input", str(batch)) == 2
    assert "larger than the limit" in one_error_line(capsys.readouterr().err)
    monkeypatch.setattr(_route, "MAX_BATCH_BYTES", batch.stat().st_size)
    assert route(bundle, "--input", str(batch)) == 0
    capsys.readouterr()
    monkeypatch.setattr(_route, "MAX_LINE_BYTES", len(good_line(9)))
    assert route(bundle, "--input", str(batch)) == 2
    err = capsys.readouterr().err
    assert "line 10: the line is longer than the limit" in err
    assert "41 of 50 line(s)" in err  # lines 10-50 are one byte longer


# ---------------------------------------------------------------- --text


@pytest.mark.parametrize("raw", [b"caf\xe9", b"\xff\xfe hello", b"x \xed\xa0\x80 y", b"\x80"])
def test_undecodable_text_argument_exits_2(bundle, raw):
    rc, out, err = run_cli("route", "--router", bundle, "--text", raw, timeout=120)
    assert rc == 2 and out == ""
    assert "--text is not valid Unicode" in one_error_line(err)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("a\x00b", "--text holds a NUL character"),
        ("x" * 100_001, "--text is 100,001 characters long"),
        ("\udcff", "--text is not valid Unicode"),
    ],
)
def test_bad_text_option_exits_2(bundle, capsys, text, match):
    assert route(bundle, "--text", text) == 2
    assert match in one_error_line(capsys.readouterr().err)


def test_hostile_facts_with_a_router(bundle, capsys):
    for facts in ('{"has_permission": false, "has_permission": true}', "[" * 1000):
        assert route(bundle, "--facts", facts, "--text", "hi") == 2
        assert one_error_line(capsys.readouterr().err).startswith("error: --facts")


def test_item_limit_bounds_memory_however_short_the_lines(bundle, tmp_path, capsys, monkeypatch):
    from hybridroute.cli import _route

    monkeypatch.setattr(_route, "MAX_BATCH_ITEMS", 10)
    ok = write_batch(tmp_path / "ok.jsonl", [good_line(i) for i in range(10)] + [""] * 5)
    assert route(bundle, "--input", str(ok)) == 0
    capsys.readouterr()
    for lines in (["{}"] * 11, [good_line(i) for i in range(10)] + ["not json"]):
        batch = write_batch(tmp_path / "many.jsonl", lines)
        assert route(bundle, "--input", str(batch)) == 2
        line = one_error_line(capsys.readouterr().err)
        assert f"{batch}: more than 10 items" in line
