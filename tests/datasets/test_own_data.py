"""A labelled file of your own works like the public sets (issue 29, the own-data path).

* A file without a split column is split when loaded -- 60% train, 20% calibration, 20%
  test, stratified by label, seeded -- the same rows every time, and the set says so; a
  file too small to split stays unsplit, and says that.
* Rows labelled ``out_of_scope`` or ``oos`` are the set's out-of-scope rows unless told
  otherwise.
"""

from __future__ import annotations

import json

import pytest

from hybridroute.datasets import load_dataset
from hybridroute.exceptions import DatasetError


def _csv(n: int, labels: tuple[str, ...] = ("billing", "shipping", "login")) -> str:
    rows = ["text,label"]
    rows += [
        f"ticket {i} about {labels[i % len(labels)]},{labels[i % len(labels)]}" for i in range(n)
    ]
    return "\n".join(rows) + "\n"


def _jsonl(n: int, labels: tuple[str, ...]) -> str:
    return "".join(
        json.dumps({"text": f"question {i}", "label": labels[i % len(labels)]}) + "\n"
        for i in range(n)
    )


@pytest.mark.parametrize("n", [30, 100, 301])
def test_a_file_without_a_split_column_is_split_when_loaded(write, n):
    path = write("tickets.csv", _csv(n))
    ds = load_dataset(f"csv:{path}")
    counts = ds.splits
    assert list(counts) == ["train", "calibration", "test"]
    assert sum(counts.values()) == n
    for name, share in (("train", 0.6), ("calibration", 0.2), ("test", 0.2)):
        assert abs(counts[name] - share * n) <= 3, (name, counts)
    # every label is in every split (stratified), and the notes say what was done
    for name in counts:
        assert set(ds.split(name).labels) == set(ds.labels)
    (note,) = [n for n in ds.notes if "split" in n]
    assert "no 'split' column" in note and "seed 0" in note and "train" in note
    step = ds.provenance["steps"][-1]
    assert step["op"] == "splits" and step["seed"] == 0
    # the same rows every time the file is loaded (another process, another day)
    again = load_dataset(f"csv:{path}")
    assert again.fingerprint == ds.fingerprint
    assert again.split("calibration").texts == ds.split("calibration").texts


def test_rows_with_the_same_text_share_a_split(write):
    rows = ["text,label"] + [f"same words {i // 3},{'ab'[i // 3 % 2]}" for i in range(60)]
    ds = load_dataset(write("dup.csv", "\n".join(rows) + "\n"))
    by_text: dict[str, set[str]] = {}
    for text, split in zip(ds.frame["text"], ds.frame["split"], strict=True):
        by_text.setdefault(text, set()).add(split)
    assert all(len(s) == 1 for s in by_text.values())


@pytest.mark.parametrize(
    ("content", "name"),
    [
        ("text,label,split\nhi,a,train\nho,b,test\nhu,a,train\nhe,b,test\n", "given.csv"),
        (
            '{"text": "hi", "label": "a", "split": "train"}\n'
            '{"text": "ho", "label": "b", "split": "test"}\n',
            "given.jsonl",
        ),
    ],
)
def test_a_file_with_splits_keeps_them(write, content, name):
    ds = load_dataset(write(name, content))
    assert set(ds.splits) == {"train", "test"}
    assert not [n for n in ds.notes if "split" in n]


def test_auto_split_false_keeps_a_file_unsplit(write):
    ds = load_dataset(write("t.csv", _csv(60)), auto_split=False)
    assert ds.splits == {} and ds.notes == ()
    assert ds.provenance["options"]["auto_split"] is False


@pytest.mark.parametrize("n", [2, 3])
def test_a_file_too_small_to_split_stays_unsplit_and_says_so(write, n):
    ds = load_dataset(write("tiny.csv", _csv(n, labels=("a", "b"))))
    assert ds.splits == {}
    (note,) = ds.notes
    assert "not split" in note and "too few rows" in note


@pytest.mark.parametrize(
    ("oos", "kind"), [("out_of_scope", "csv"), ("oos", "csv"), ("out_of_scope", "jsonl")]
)
def test_out_of_scope_rows_are_found_by_their_label(write, oos, kind):
    labels = ("billing", "shipping", oos)
    text = _csv(30, labels) if kind == "csv" else _jsonl(30, labels)
    ds = load_dataset(write(f"s.{kind}", text))
    assert ds.oos_label == oos
    assert any(oos in n and "out of scope" in n for n in ds.notes)


@pytest.mark.parametrize(("given", "expected"), [(None, None), ("shipping", "shipping")])
def test_the_out_of_scope_label_can_be_given_or_turned_off(write, given, expected):
    ds = load_dataset(write("s.csv", _csv(30, ("billing", "shipping", "oos"))), oos_label=given)
    assert ds.oos_label == expected


def test_a_set_without_out_of_scope_rows_has_no_out_of_scope_label(write):
    assert load_dataset(write("s.csv", _csv(30))).oos_label is None


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_both_conventional_out_of_scope_labels_is_an_error(write, kind):
    labels = ("billing", "oos", "out_of_scope")
    text = _csv(30, labels) if kind == "csv" else _jsonl(30, labels)
    path = write(f"both.{kind}", text)
    with pytest.raises(DatasetError, match=r"both 'out_of_scope' and 'oos'.*oos_label="):
        load_dataset(path)
    assert load_dataset(path, oos_label="oos").oos_label == "oos"
