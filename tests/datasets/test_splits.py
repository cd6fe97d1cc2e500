"""Seeded stratified splits: deterministic, recorded, proportional, and leak-free."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridroute.datasets import SplitPlan, load_dataset, make_splits
from hybridroute.exceptions import DatasetError

FRACTIONS = {"train": 0.6, "calibration": 0.2, "test": 0.2}


def _labels(sizes: dict[str, int]) -> list[str]:
    out = [lab for lab, n in sizes.items() for _ in range(n)]
    random.Random(0).shuffle(out)
    return out


def test_same_seed_same_split_other_seed_other_split():
    labels = _labels({"a": 50, "b": 30, "c": 20})
    p1 = make_splits(labels, FRACTIONS, seed=3)
    p2 = make_splits(labels, FRACTIONS, seed=3)
    p3 = make_splits(labels, FRACTIONS, seed=4)
    assert isinstance(p1, SplitPlan)
    assert p1.assignment == p2.assignment
    assert p1.assignment != p3.assignment
    assert list(p1) == ["train", "calibration", "test"]
    assert p1.counts == {"train": 60, "calibration": 20, "test": 20}


def test_split_is_a_partition_and_recorded():
    labels = _labels({"a": 40, "b": 17, "c": 9})
    plan = make_splits(labels, FRACTIONS, seed=0)
    all_idx = np.concatenate([plan[k] for k in plan])
    assert sorted(all_idx.tolist()) == list(range(len(labels)))
    record = plan.to_dict()
    assert record["seed"] == 0 and record["fractions"] == FRACTIONS
    assert record["indices"]["test"] == plan["test"].tolist()
    assert sum(record["counts"].values()) == len(labels)


@pytest.mark.parametrize("sizes", [{"a": 50, "b": 30, "c": 20}, {"a": 7, "b": 3, "c": 101, "d": 1}])
def test_stratified_within_one_row_per_class(sizes):
    labels = _labels(sizes)
    plan = make_splits(labels, FRACTIONS, seed=1)
    for split, frac in FRACTIONS.items():
        got = Counter(labels[i] for i in plan[split])
        for lab, n in sizes.items():
            assert abs(got[lab] - frac * n) < 1.0 + 1e-9 or (split == "train" and got[lab] >= 1)
        assert abs(len(plan[split]) - frac * len(labels)) <= 1.0 + 1e-9


def test_every_class_keeps_a_row_in_the_first_split():
    labels = ["a"] * 10 + ["rare1", "rare2", "rare3"]
    for seed in range(20):
        plan = make_splits(labels, {"train": 0.5, "calibration": 0.5}, seed=seed)
        train = {labels[i] for i in plan["train"]}
        assert {"rare1", "rare2", "rare3"} <= train


def test_keys_make_a_row_keep_its_split_when_rows_are_reordered():
    labels = _labels({"a": 30, "b": 30})
    keys = [f"id-{i}" for i in range(len(labels))]
    plan = make_splits(labels, FRACTIONS, seed=0, keys=keys)
    order = list(range(len(labels)))
    random.Random(5).shuffle(order)
    plan2 = make_splits(
        [labels[i] for i in order], FRACTIONS, seed=0, keys=[keys[i] for i in order]
    )
    by_key = dict(zip(keys, plan.assignment, strict=True))
    assert all(by_key[keys[i]] == s for i, s in zip(order, plan2.assignment, strict=True))


def test_groups_stay_together():
    labels = ["a", "a", "b", "b", "a", "b"] * 10
    groups = [i // 3 for i in range(len(labels))]
    plan = make_splits(labels, {"train": 0.5, "test": 0.5}, seed=0, groups=groups)
    for g in set(groups):
        assert len({plan.assignment[i] for i in range(len(labels)) if groups[i] == g}) == 1
    assert plan.grouped


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ({"train": 0.5, "test": 0.4}, "add up to 1"),
        ({"train": 1.2, "test": -0.2}, "must be in"),
        ({}, "non-empty mapping"),
        ({"": 1.0}, "non-empty strings"),
    ],
)
def test_bad_fractions(fractions, message):
    with pytest.raises(ValueError, match=message):
        make_splits(["a", "b"], fractions, seed=0)


def test_too_few_rows_is_an_error():
    with pytest.raises(
        DatasetError, match="too few rows \\(2\\) to split into train, calibration, test"
    ):
        make_splits(["a", "b"], FRACTIONS, seed=0)


def test_seed_must_be_an_integer():
    with pytest.raises(ValueError, match="seed must be an integer"):
        make_splits(["a", "b"], {"train": 1.0}, seed=0.5)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.sampled_from("abcde"), min_size=10, max_size=200),
    seed=st.integers(0, 2**31),
    f=st.floats(0.1, 0.5),
)
def test_partition_invariants(labels, seed, f):
    plan = make_splits(labels, {"train": 1 - f, "calibration": f}, seed=seed)
    assert set(plan.assignment) <= {"train", "calibration"}
    assert len(plan.assignment) == len(labels)
    assert {labels[i] for i in plan["train"]} == set(labels)  # every class is trained on
    assert abs(len(plan["calibration"]) - f * len(labels)) <= 1 + 1e-9 + len(set(labels))


# ------------------------------------------------------------------------- on labelled sets


@pytest.fixture
def tickets(write):
    rows = ["id,text,label,split"]
    for i in range(60):
        lab = "abc"[i % 3]
        split = "test" if i % 5 == 0 else "train"
        rows.append(f"t{i},text number {i} for {lab},{lab},{split}")
    # the same text twice in train (and a case variant): must not straddle train/calibration
    rows += ["d1,Duplicate text,a,train", "d2,duplicate  TEXT,a,train", "d3,duplicate text,a,train"]
    return load_dataset(write("t.csv", "\n".join(rows) + "\n"))


def test_calibration_split_never_leaks_into_training(tickets):
    ds = tickets.with_calibration_split(fraction=0.25, seed=7)
    train, calib, test = ds.split("train"), ds.split("calibration"), ds.split("test")
    assert set(train.ids).isdisjoint(calib.ids)
    assert set(train.ids) | set(calib.ids) == set(tickets.split("train").ids)
    assert test.ids == tickets.split("test").ids  # other splits untouched
    dup_splits = {s for t, s in zip(ds.texts, ds.frame["split"], strict=True) if "uplicate" in t}
    assert len(dup_splits) == 1  # duplicates stay together
    assert set(train.texts).isdisjoint(calib.texts)
    assert set(calib.labels) == {"a", "b", "c"}  # stratified: every class calibrated
    assert len(calib) == pytest.approx(0.25 * len(tickets.split("train")), abs=3)


def test_calibration_split_is_seeded_and_recorded(tickets):
    a = tickets.with_calibration_split(0.2, seed=1)
    b = tickets.with_calibration_split(0.2, seed=1)
    c = tickets.with_calibration_split(0.2, seed=2)
    assert a.split("calibration").ids == b.split("calibration").ids
    assert a.fingerprint == b.fingerprint != c.fingerprint
    step = a.provenance["steps"][-1]
    assert step["op"] == "calibration_split" and step["seed"] == 1 and step["fraction"] == 0.2
    assert step["calibration_ids"] == a.split("calibration").ids
    assert step["counts"] == {"train": a.splits["train"], "calibration": a.splits["calibration"]}
    assert tickets.splits == {"train": 51, "test": 12}  # the original is unchanged


def test_calibration_split_errors(tickets):
    once = tickets.with_calibration_split(0.2, seed=0)
    with pytest.raises(DatasetError, match="already has a calibration split"):
        once.with_calibration_split(0.2, seed=0)
    with pytest.raises(DatasetError, match="has no split 'validation'; its splits are train, test"):
        tickets.with_calibration_split(0.2, seed=0, from_split="validation")
    with pytest.raises(ValueError, match="between 0 and 1"):
        tickets.with_calibration_split(1.5)


def test_with_splits_on_an_unsplit_set(write):
    rows = ["text,label"] + [f"row {i},{'xy'[i % 2]}" for i in range(50)]
    ds = load_dataset(write("u.csv", "\n".join(rows) + "\n"), auto_split=False)
    assert ds.splits == {}
    split = ds.with_splits(seed=0)
    assert split.splits == {"train": 30, "calibration": 10, "test": 10}
    assert ds.with_splits(seed=0).fingerprint == split.fingerprint
    assert split.provenance["steps"][-1]["seed"] == 0
    with pytest.raises(DatasetError, match="already has splits"):
        split.with_splits(seed=0)
    custom = ds.with_splits({"train": 0.8, "test": 0.2}, seed=3)
    assert custom.splits == {"train": 40, "test": 10}


def test_public_set_calibration_carve_out(banking77):
    ds = banking77.with_calibration_split(0.2, seed=0)
    assert ds.splits["calibration"] + ds.splits["train"] == 10_003
    assert abs(ds.splits["calibration"] - 2_000) <= 2
    assert ds.splits["test"] == 3_080
    assert set(ds.split("calibration").labels) == set(banking77.labels)
    assert set(ds.split("train").texts).isdisjoint(ds.split("calibration").texts)
