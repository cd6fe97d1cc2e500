"""``hybridroute datasets list / show / validate / export``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hybridroute.cli import main
from hybridroute.datasets import load_dataset

GOOD = "id,text,label,split,attempts\n1,hello there,a,train,1\n2,good bye,b,test,0\n3,see you,b,train,2\n"
BAD = "text,label\nhello,a\n   ,b\n"


def test_list(capsys, shared_dir):
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("banking77", "clinc150", "support-tickets"):
        assert name in out
    assert f"data directory {shared_dir}" in out
    assert main(["datasets", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["banking77", "clinc150", "support-tickets"]


def test_show_banking77(capsys, shared_dir):
    assert main(["datasets", "show", "banking77"]) == 0
    out = capsys.readouterr().out
    assert "rows: 13,083   labels: 77" in out
    assert "train / test: 10,003 / 3,080" in out
    assert "class balance (rows per label): min" in out
    assert load_dataset("banking77").fingerprint in out


def test_show_clinc150(capsys, shared_dir):
    assert main(["datasets", "show", "clinc150"]) == 0
    out = capsys.readouterr().out
    assert "in scope 15,000 / 3,000 / 4,500 plus 100 / 100 / 1,000 out of scope" in out
    assert main(["datasets", "show", "clinc150", "--oos", "drop", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["splits"] == {"train": 15_000, "validation": 3_000, "test": 4_500}
    assert info["n_rows"] == 22_500 and len(info["labels"]) == 150


def test_show_json_of_a_file(capsys, write):
    path = write("g.csv", GOOD)
    assert main(["datasets", "show", f"csv:{path}", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"name", "n_rows", "labels", "splits", "fingerprint"} <= set(info)
    assert info["name"] == "g" and info["n_rows"] == 3 and info["labels"] == ["a", "b"]
    assert info["splits"] == {"train": 2, "test": 1}
    assert info["fingerprint"] == load_dataset(path).fingerprint
    assert info["class_balance"] == {"a": 1, "b": 2}
    assert info["fact_columns"] == ["attempts"]


def test_show_support_tickets_prints_labels_and_splits(capsys, monkeypatch):
    from pathlib import Path

    from hybridroute.datasets import _bundled

    fixture = Path(__file__).parent / "fixtures" / "support_tickets_small.jsonl"
    monkeypatch.setattr(_bundled, "bundled_path", lambda: fixture)
    assert main(["datasets", "show", "support-tickets"]) == 0
    out = capsys.readouterr().out
    assert "labels: order_status, out_of_scope, refund_request" in out
    assert "train / calibration / test: 4 / 3 / 3" in out
    assert "facts: has_permission (bool)" in out


def test_validate_ok(capsys, write):
    path = write("g.csv", GOOD)
    assert main(["datasets", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {path}: 3 rows, 2 labels (train 2, test 1); facts: attempts")


@pytest.mark.parametrize("name", ["g.csv", "g.txt"])
def test_validate_takes_the_dataset_reference_form(capsys, write, name):
    """``csv:PATH`` (as ``--dataset`` names a file) validates the file; the prefix sets the
    kind, so a CSV with another extension is read too."""
    path = write(name, GOOD)
    assert main(["datasets", "validate", f"csv:{path}"]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {path}: 3 rows, 2 labels")


def test_validate_bad_file_exits_2_with_one_line(capsys, write):
    path = write("b.csv", BAD)
    assert main(["datasets", "validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert lines == [f"error: {path}, row 2, column 'text': the text is empty or whitespace only"]


def test_validate_label_set_and_all(capsys, write):
    path = write("g.csv", GOOD + "4,another,c,train,1\n5,,a,test,0\n")
    assert main(["datasets", "validate", str(path), "--label-set", "a,b"]) == 2
    assert (
        "row 4, column 'label': label 'c' is not in the declared label set (a, b)"
        in capsys.readouterr().err
    )
    assert main(["datasets", "validate", str(path), "--label-set", "a,b", "--all"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert (
        err[0]
        == f"{path}, row 4, column 'label': label 'c' is not in the declared label set (a, b)"
    )
    assert err[1] == f"{path}, row 5, column 'text': the text is empty or whitespace only"
    assert err[2].startswith(f"error: {path}, row 4, column 'label': 2 bad row(s)")


def test_show_skip_bad_rows_lists_them(capsys, write):
    path = write("g.csv", GOOD + "4,,a,test,0\n")
    assert main(["datasets", "show", str(path), "--skip-bad-rows"]) == 0
    out = capsys.readouterr().out
    assert "rows: 3" in out
    assert "skipped rows: 1\n  row 4, column 'text': the text is empty or whitespace only" in out


def test_validate_needs_a_known_suffix(capsys, write):
    path = write("g.txt", GOOD)
    assert main(["datasets", "validate", str(path)]) == 2
    assert "cannot tell the format from the suffix" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_export_then_validate(capsys, write, tmp_path, suffix):
    path = write("g.csv", GOOD)
    out = tmp_path / f"exported{suffix}"
    assert main(["datasets", "export", f"csv:{path}", "--out", str(out)]) == 0
    assert f"wrote 3 rows of g to {out}" in capsys.readouterr().out
    assert load_dataset(out).fingerprint == load_dataset(path).fingerprint
    if suffix == ".csv":
        assert out.read_text(encoding="utf-8").splitlines()[0] == "text,label,split,attempts,id"
    assert main(["datasets", "validate", str(out)]) == 0


def test_export_public_set(capsys, tmp_path, shared_dir):
    out = tmp_path / "b77.csv"
    assert main(["datasets", "export", "banking77", "--out", str(out)]) == 0
    capsys.readouterr()
    assert out.read_text(encoding="utf-8").splitlines()[0] == "text,label,split,id"
    back = load_dataset(out)
    assert len(back) == 13_083 and back.fingerprint == load_dataset("banking77").fingerprint


def test_user_mistakes_exit_2(capsys, write):
    assert main(["datasets", "show", "nope"]) == 2
    assert "error: unknown dataset 'nope'" in capsys.readouterr().err
    path = write("g.csv", GOOD)
    assert main(["datasets", "show", f"csv:{path}", "--oos", "drop"]) == 2
    assert "does not take oos" in capsys.readouterr().err


def test_unavailable_public_set_exits_2(capsys, tmp_path):
    assert (
        main(["datasets", "show", "banking77", "--data-dir", str(tmp_path), "--no-download"]) == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(
        "error: banking77: banking77/train.csv is not available and downloads are off"
    )
    assert len(err.strip().splitlines()) == 1


def test_subprocess_validate(write):
    path = write("b.csv", BAD)
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "hybridroute", "datasets", "validate", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"error: {path}, row 2, column 'text': the text is empty or whitespace only"
    )
    assert "Traceback" not in proc.stderr
