"""``hybridroute route --log URL``, ``replay``, ``drift`` and ``export`` on both backends."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hybridroute.cli import main
from hybridroute.records import open_log

from ..cli.facts_bundle import build_bundles
from ..hostile import bounded

TICKETS = Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "tickets.jsonl"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_bundles(tmp_path_factory.mktemp("records-cli"))["example"]


def add_shadow(url: str, bundle: Path) -> int:
    """Log what a 'version 2' shadow decides for each logged ticket (another destination
    for the first two)."""
    from hybridroute.router import load_router

    router = load_router(bundle)
    with open_log(url) as log:
        live = [(r["item_id"], r["record"]["input_snapshot"]) for r in log.rows()]
        entries = []
        for n, (rid, snap) in enumerate(live):
            d = router.route(snap.get("facts"), snap.get("text"))
            if n < 2:
                other = "fail" if d.selected_destination != "fail" else "human_review"
                d = dataclasses.replace(
                    d, selected_destination=other, allowed_destinations=(other,)
                )
            entries.append((dataclasses.replace(d, router_version="2"), rid, "shadow"))
        log.log_many(entries)
    return len(entries)


def test_route_replay_drift_export_through_a_log_url(bundle, log_url, tmp_path, capsys):
    argv = ["route", "--router", str(bundle), "--input", str(TICKETS), "--log", log_url]
    assert main(argv) == 0
    assert "routed 12 items" in capsys.readouterr().out
    assert main(argv) == 0  # the same ids again: nothing new
    assert "12 already logged, skipped" in capsys.readouterr().out
    one = ["route", "--router", str(bundle), "--text", "where is my parcel", "--id", "x1"]
    assert main([*one, "--log", log_url, "--json"]) == 0
    capsys.readouterr()

    assert main(["replay", "--log", log_url, "--router", str(bundle), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 13 and report["mismatches"] == 0 and "shadow" not in report

    shadows = add_shadow(log_url, bundle)
    assert main(["replay", "--log", log_url, "--router", str(bundle), "--role", "live"]) == 0
    out = capsys.readouterr().out
    assert "replayed 13 decisions" in out
    assert f"shadow support 2 vs live support 1: {shadows} request(s) in both" in out
    assert "destination differs on 2" in out
    assert main(["replay", "--log", log_url, "--router", str(bundle), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (pair,) = report["shadow"]["comparisons"]
    assert pair["n"] == shadows and pair["disagree"]["destination"] == 2

    assert main(["drift", "--log", log_url, "--json"]) == 0
    drift = json.loads(capsys.readouterr().out)
    assert drift["n"] == 13 + shadows and drift["shadow"]["comparisons"][0]["n"] == shadows
    assert main(["drift", "--log", log_url]) == 0
    assert "shadow support 2 vs live support 1" in capsys.readouterr().out

    out_file = tmp_path / "export.jsonl"
    assert main(["export", "--log", log_url, "--out", str(out_file), "--role", "shadow"]) == 0
    assert f"exported {shadows} decisions" in capsys.readouterr().err
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert {x["role"] for x in lines} == {"shadow"} and lines[0]["item_id"] == "ex-01"
    assert main(["export", "--log", log_url, "-o", str(out_file)]) == 0
    assert len(out_file.read_text().splitlines()) == 13 + shadows


@pytest.mark.parametrize("command", ["replay", "drift", "export"])
def test_readers_never_create_a_log(tmp_path, capsys, command, bundle):
    url = f"sqlite:///{tmp_path / 'none.sqlite'}"
    extra = {"replay": ["--router", str(bundle)], "export": ["--out", str(tmp_path / "o")]}
    assert main([command, "--log", url, *extra.get(command, [])]) == 2
    assert "no such decision log" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["export", "--log", "mysql://u:topsecret1@h/db", "--out", "x"], "scheme 'mysql'"),
        (["drift", "--log", "sqlite://x.sqlite"], "not a SQLite log URL"),
        (["export", "--log", "LOG", "--out", "o", "--role", "canary"], "--role: must be one"),
    ],
)
def test_bad_log_arguments_exit_2_in_one_line(tmp_path, capsys, monkeypatch, argv, match):
    monkeypatch.chdir(tmp_path)
    open_log(tmp_path / "LOG").close()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "topsecret1" not in err and len(err.strip().splitlines()) == 1


def test_export_refuses_the_log_itself_and_files_that_are_not_regular(tmp_path, capsys):
    import os

    log = tmp_path / "log.sqlite"
    open_log(log).close()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for out, match in ((log, "is also an input or the log"), (fifo, "not a regular file")):
        assert bounded(main, ["export", "--log", str(log), "--out", str(out)]) == 2  # no hang
        assert match in capsys.readouterr().err
    assert main(["export", "--log", f"sqlite:///{log}", "--out", str(tmp_path / "x.jsonl")]) == 0


@pytest.mark.postgres
def test_a_postgres_password_is_never_printed(bundle, postgres_db_url, capsys):
    url = postgres_db_url.replace("hybridroute@", "hybridroute:pw-never-shown@")
    argv = ["route", "--router", str(bundle), "--input", str(TICKETS), "--log", url]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "routed 12 items" in out.out and "pw-never-shown" not in out.out + out.err
    assert "hybridroute:***@" in out.out
    bad = url.replace("port=", "port=1")
    assert main(["drift", "--log", bad]) == 2
    err = capsys.readouterr().err
    assert "cannot connect" in err and "pw-never-shown" not in err
