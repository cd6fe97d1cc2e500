"""The LabelledSet type: columns, views, facts, split selection, export round trips."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import hybridroute.datasets as datasets
from hybridroute.datasets import LabelledSet, load_dataset
from hybridroute.exceptions import DatasetError

ROWS = [
    {
        "id": "r1",
        "text": "where is my parcel",
        "label": "order_status",
        "split": "test",
        "facts": {"attempts": 0, "vip": True, "fields": ["email"]},
        "next_step": "answer",
        "tags": ["a"],
    },
    {
        "id": "r2",
        "text": "refund please",
        "label": "refund",
        "split": "train",
        "facts": {"attempts": 2, "vip": False, "fields": []},
        "next_step": "ask_user",
        "tags": [],
    },
    {
        "id": "r3",
        "text": "my parcel is late",
        "label": "order_status",
        "split": "validation",
        "facts": {"attempts": 1, "vip": None, "fields": []},
        "next_step": None,
        "tags": None,
    },
    {
        "id": "r4",
        "text": "money back for the shoes",
        "label": "refund",
        "split": "calib",
        "facts": {"attempts": 3, "vip": True, "fields": ["order_id", "email"]},
        "next_step": "answer",
        "tags": ["b"],
    },
    {
        "id": "r5",
        "text": "cancel it",
        "label": "cancel",
        "split": "train",
        "facts": {"attempts": 0, "vip": False, "fields": []},
        "next_step": "answer",
        "tags": [],
    },
]


@pytest.fixture
def small(write):
    path = write("small.jsonl", "".join(json.dumps(r) + "\n" for r in ROWS))
    return load_dataset(f"jsonl:{path}")


def test_public_surface_is_pinned():
    assert datasets.__all__ == [
        "FactProblem",
        "LabelledSet",
        "SkippedRow",
        "SplitPlan",
        "list_datasets",
        "load_dataset",
        "make_splits",
    ]
    assert datasets.list_datasets() == ("banking77", "clinc150", "support-tickets")


def test_columns_and_views(small):
    assert list(small.frame.columns) == [
        "id",
        "text",
        "label",
        "split",
        "attempts",
        "vip",
        "fields",
        "next_step",
        "tags",
    ]
    assert small.name == "small" and small.source.endswith("small.jsonl")
    assert len(small) == 5
    assert small.labels == ("cancel", "order_status", "refund")
    assert small.splits == {"train": 2, "validation": 1, "calibration": 1, "test": 1}
    assert list(small.splits) == ["train", "validation", "calibration", "test"]
    assert small.texts[1] == "refund please" and small.y[1] == "refund"
    assert small.ids == ["r1", "r2", "r3", "r4", "r5"]
    assert small.fact_columns == ("attempts", "vip", "fields")
    assert small.fact_types == {"attempts": "int", "vip": "bool", "fields": "list"}
    assert small.label_counts() == {"cancel": 1, "order_status": 2, "refund": 2}
    assert small.label_counts("train") == {"cancel": 1, "refund": 1}
    assert small.skipped == [] and small.notes == () and small.oos_label is None
    assert "rows=5" in repr(small)


def test_facts_are_plain_json_values(small):
    assert small.facts(2) == {"attempts": 1, "vip": None, "fields": []}
    assert small.facts(-1) == {"attempts": 0, "vip": False, "fields": []}
    facts = list(small.iter_facts())
    assert len(facts) == 5 and facts[3]["fields"] == ["order_id", "email"]
    json.dumps(facts)  # JSON types only
    facts[3]["fields"].append("x")  # a copy: the set is unchanged
    assert small.facts(3)["fields"] == ["order_id", "email"]


def test_frame_is_a_copy(small):
    f = small.frame
    f.loc[0, "label"] = "changed"
    f["split"] = "x"
    assert small.y[0] == "order_status" and small.splits["train"] == 2


def test_split_selection(small):
    train = small.split("train")
    assert train.ids == ["r2", "r5"] and train.splits == {"train": 2}
    both = small.split("train", "test")
    assert both.ids == ["r1", "r2", "r5"]
    assert both.provenance["steps"][-1] == {"op": "select", "splits": ["train", "test"]}
    with pytest.raises(
        DatasetError,
        match=r"column 'split': small has no split 'train2'; its splits are train, validation, calibration, test",
    ):
        small.split("train2")


def test_from_frame_of_a_frame_gives_the_same_set(small):
    again = LabelledSet.from_frame(small.frame, name="again")
    assert again.fingerprint == small.fingerprint
    assert again.fact_columns == small.fact_columns


def test_unsplit_sets(write):
    path = write("u.csv", "text,label\nhi,a\nho,b\n")
    ds = load_dataset(path)
    assert LabelledSet.from_frame(ds.frame).fingerprint == ds.fingerprint
    assert ds.splits == {}
    assert ds.frame["split"].tolist() == [None, None]
    with pytest.raises(DatasetError, match="it has no splits; make some with with_splits"):
        ds.split("train")


def test_from_frame_validates_like_a_file():
    df = pd.DataFrame(
        {"text": ["a b", "c d", " "], "label": ["x", "y", "x"], "amount": [1.0, None, 3.0]}
    )
    with pytest.raises(DatasetError, match=r"frame, row 3, column 'text': the text is empty"):
        LabelledSet.from_frame(df)
    ok = LabelledSet.from_frame(df.iloc[:2], name="mine")
    assert ok.name == "mine" and ok.facts(1) == {"amount": None} and ok.facts(0) == {"amount": 1.0}
    assert ok.ids == ["1", "2"]


def _formula_rows() -> list[dict]:
    """ROWS with texts, labels, ids and string facts that a spreadsheet would run."""
    triggers = ["=", "+", "-", "@", "\t", "'="]
    out = []
    for i, r in enumerate(ROWS):
        t = triggers[i % len(triggers)]
        facts = dict(r["facts"], action=f"{t}cmd|' /C calc'!A0", fields=[f"{t}x", "y"])
        out.append(
            dict(r, text=t + r["text"], label="=" + r["label"], id=f"@{r['id']}", facts=facts)
        )
    return out


@pytest.fixture
def small_formulas(write):
    path = write("formulas.jsonl", "".join(json.dumps(r) + "\n" for r in _formula_rows()))
    return load_dataset(f"jsonl:{path}")


@pytest.mark.parametrize("which", ["small", "small_formulas"])
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_export_round_trip_keeps_the_fingerprint(request, tmp_path, suffix, which):
    small = request.getfixturevalue(which)
    out = small.export(tmp_path / f"out{suffix}")
    back = load_dataset(out)
    assert back.fingerprint == small.fingerprint
    assert back.facts(3) == small.facts(3)
    assert back.frame.equals(small.frame)
    if which == "small_formulas" and suffix == ".csv":
        body = out.read_text(encoding="utf-8")
        assert "\n=" not in body and ",=" not in body and ",+" not in body and ",@" not in body
        assert ",'=cmd|" in body and "'@r1" in body


def test_export_csv_columns(small, tmp_path):
    out = small.export(tmp_path / "o.csv")
    header = out.read_text(encoding="utf-8").splitlines()[0]
    assert header == "text,label,split,attempts,vip,fields,next_step,tags,id"
    row = out.read_text(encoding="utf-8").splitlines()[1]
    assert row == 'where is my parcel,order_status,test,0,true,"[""email""]",answer,"[""a""]",r1'


def test_export_refuses_other_formats(small, tmp_path):
    with pytest.raises(DatasetError, match=r"export writes \.csv or \.jsonl"):
        small.export(tmp_path / "o.parquet")
