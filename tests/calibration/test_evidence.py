from __future__ import annotations

import json

import numpy as np
import pytest

from hybridroute.calibration import (
    CertifiedPrecisionThreshold,
    EvidenceItem,
    EvidenceThresholds,
    check_evidence,
    load_evidence_labels,
)
from hybridroute.exceptions import DatasetError, UndeclaredValueError

from ..hostile import bounded


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_evidence_labels()


def test_bundled_data_has_two_sources_on_different_scales(rows) -> None:
    by_source: dict[str, list[float]] = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append(r["score"])
    assert set(by_source) == {"bm25", "char_tfidf"}
    assert max(by_source["char_tfidf"]) <= 1.0 < max(by_source["bm25"])
    assert {r["split"] for r in rows} == {"calibration", "test"}


def test_per_source_thresholds_hold_on_held_out_requests(rows) -> None:
    cal = [r for r in rows if r["split"] == "calibration"]
    test = [r for r in rows if r["split"] == "test"]
    ev = EvidenceThresholds().fit_records(cal)
    assert set(ev.thresholds_) == {"bm25", "char_tfidf"}
    # the thresholds live on each source's own scale
    assert ev.thresholds_["bm25"] > 1.0 > ev.thresholds_["char_tfidf"]
    for source, t in ev.thresholds_.items():
        assert ev.sources_[source]["certified"]
        sub = [r for r in test if r["source"] == source]
        s = np.array([r["score"] for r in sub])
        c = np.array([r["covered"] for r in sub])
        assert c[s >= t].mean() >= 0.8


def test_one_shared_threshold_would_be_wrong_for_one_source(rows) -> None:
    cal = [r for r in rows if r["split"] == "calibration"]
    ev = EvidenceThresholds().fit_records(cal)
    t_bm25 = ev.thresholds_["bm25"]
    cos = [r for r in cal if r["source"] == "char_tfidf"]
    # the BM25 threshold on cosine scores accepts nothing at all
    assert not any(r["score"] >= t_bm25 for r in cos)


def test_check_returns_the_contract_fields() -> None:
    thresholds = {"bm25": 10.0, "char_tfidf": 0.3}
    items = [
        EvidenceItem(id="kb-1", source="bm25", score=12.0, point="install_command"),
        {"id": "kb-2", "source": "char_tfidf", "score": 0.2, "point": "requirements"},
        {"id": "kb-3", "source": "char_tfidf", "score": 0.5, "point": "unrelated"},
    ]
    res = check_evidence(["install_command", "requirements", "install_command"], items, thresholds)
    assert res.required_points == ("install_command", "requirements")
    assert res.covered_points == ("install_command",)
    assert res.missing_points == ("requirements",)
    assert res.evidence_complete is False
    assert res.evidence_ids == ("kb-1",)
    assert set(res.to_dict()) == {
        "required_points",
        "covered_points",
        "missing_points",
        "evidence_complete",
        "evidence_ids",
    }


def test_complete_when_every_point_is_covered() -> None:
    res = check_evidence(
        ["a", "b"],
        [
            {"id": "x", "source": "s", "score": 1.0, "point": "a"},
            {"id": "y", "source": "s", "score": 1.0, "point": "b"},
        ],
        {"s": 0.5},
    )
    assert res.evidence_complete and res.evidence_ids == ("x", "y")


def test_uncertified_source_never_counts() -> None:
    res = check_evidence(
        ["a"], [{"id": "x", "source": "s", "score": 1e9, "point": "a"}], {"s": None}
    )
    assert not res.evidence_complete


def test_unknown_source_is_an_error() -> None:
    with pytest.raises(UndeclaredValueError, match="evidence source 'dense'"):
        check_evidence(["a"], [{"id": "x", "source": "dense", "score": 1, "point": "a"}], {"s": 1})


def test_item_missing_field() -> None:
    with pytest.raises(ValueError, match="lacks score"):
        check_evidence(["a"], [{"id": "x", "source": "s", "point": "a"}], {"s": 1})


def test_custom_base_is_cloned_per_source(rows) -> None:
    base = CertifiedPrecisionThreshold(0.99, 0.1)
    ev = EvidenceThresholds(base).fit_records(rows)
    assert not hasattr(base, "threshold_")
    assert all(not s["certified"] for s in ev.sources_.values())
    assert all(
        s["required_calibration_size"] is None or s["required_calibration_size"] > 0
        for s in ev.sources_.values()
    )


@pytest.mark.parametrize(
    "line,match",
    [
        ("not json", "row 1: not valid JSON"),
        (json.dumps({"point": "a"}), "column 'request_id'"),
        (
            json.dumps(
                {
                    "request_id": "r",
                    "point": "a",
                    "item_id": "i",
                    "source": "s",
                    "score": "x",
                    "covered": True,
                }
            ),
            "column 'score'",
        ),
        (
            json.dumps(
                {
                    "request_id": "r",
                    "point": "a",
                    "item_id": "i",
                    "source": "s",
                    "score": 1,
                    "covered": "yes",
                }
            ),
            "column 'covered'",
        ),
    ],
)
def test_loader_names_file_row_and_column(tmp_path, line: str, match: str) -> None:
    p = tmp_path / "ev.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(DatasetError, match=match) as info:
        load_evidence_labels(p)
    assert str(p) in str(info.value)


def test_build_script_output_is_current() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "build_evidence_data.py"
    out = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# --------------------------------------------------------------------------- hostile files

GOOD_EVIDENCE = {
    "request_id": "r",
    "point": "a",
    "item_id": "i",
    "source": "bm25",
    "score": 1.5,
    "covered": True,
}


def test_loader_refuses_a_fifo_at_once(tmp_path) -> None:
    import os

    fifo = tmp_path / "ev.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match=r"ev\.jsonl: is a FIFO .*must be a regular file"):
        bounded(lambda: load_evidence_labels(fifo), timeout=10)


def test_loader_refuses_devices_in_bounded_memory() -> None:
    import subprocess
    import sys

    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from hybridroute.calibration import load_evidence_labels\n"
        "from hybridroute.exceptions import DatasetError\n"
        "for p in ('/dev/zero', '/dev/urandom'):\n"
        "    try:\n"
        "        load_evidence_labels(p)\n"
        "    except DatasetError as exc:\n"
        "        print('refused:', exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        proc.stdout.count("is a character device; a file of evidence labels must be a regular file")
        == 2
    )


def test_loader_enforces_its_byte_limit(tmp_path, monkeypatch) -> None:
    from hybridroute.calibration import _evidence

    p = tmp_path / "ev.jsonl"
    p.write_text((json.dumps(GOOD_EVIDENCE) + "\n") * 50)
    monkeypatch.setattr(_evidence, "MAX_EVIDENCE_BYTES", 1000)
    with pytest.raises(DatasetError, match="larger than the limit of 1,000 bytes"):
        load_evidence_labels(p)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            '{"request_id": "r", "point": "a", "item_id": "i", "source": "s", "score": 0.1, '
            '"covered": false, "covered": true}',
            "duplicate key 'covered'",
        ),
        (
            '{"request_id": "r", "point": "a", "item_id": "i", "source": "s", "source": "t", '
            '"score": 0.1, "covered": true}',
            "duplicate key 'source'",
        ),
        ('{"request_id": "r", "x": ' + "[" * 1000 + "]" * 1000 + "}", "nested too deeply"),
        ('{"request_id": ' + "7" * 5000 + "}", "5000 digits"),
        (
            '{"request_id": "r", "point": "a", "item_id": "i", "source": "s", "score": NaN, '
            '"covered": true}',
            "NaN",
        ),
        (
            '{"request_id": "r", "point": "a", "item_id": "i", "source": "s", '
            '"score": Infinity, "covered": true}',
            "Infinity",
        ),
    ],
)
def test_loader_parses_each_line_strictly(tmp_path, line: str, match: str) -> None:
    p = tmp_path / "ev.jsonl"
    p.write_text(json.dumps(GOOD_EVIDENCE) + "\n" + line + "\n")
    with pytest.raises(DatasetError, match=rf"ev\.jsonl, row 2: .*{match}"):
        bounded(lambda: load_evidence_labels(p))


@pytest.mark.parametrize("key", ["source", "point", "item_id", "request_id"])
def test_loader_refuses_nul_in_string_fields(tmp_path, key: str) -> None:
    p = tmp_path / "ev.jsonl"
    row = dict(GOOD_EVIDENCE, **{key: "bm25\x00"})
    p.write_text(json.dumps(GOOD_EVIDENCE) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=rf"row 2, column '{key}': holds a NUL character"):
        load_evidence_labels(p)


def test_loader_refuses_undecodable_bytes(tmp_path) -> None:
    p = tmp_path / "ev.jsonl"
    p.write_bytes(json.dumps(GOOD_EVIDENCE).encode() + b'\n{"source": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match=r"ev\.jsonl, row 2: not UTF-8"):
        load_evidence_labels(p)
