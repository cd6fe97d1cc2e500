"""Fingerprints: stable across processes and sources, sensitive to every content change."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hybridroute.datasets import load_dataset

BASE = "id,text,label,split,attempts\n1,hello there,a,train,1\n2,good bye,b,test,0\n3,see you,b,train,2\n"


def _fp(write, content: str, name: str = "f.csv") -> str:
    return load_dataset(write(name, content)).fingerprint


def test_fingerprint_is_pinned(write):
    # The canonical serialisation is versioned; changing it must be deliberate.
    assert _fp(write, BASE) == "bc1eb2f717e57362ad3c79f1bb73313448dcf5c7b418f9507805105aa97258b3"


def test_same_in_another_process(write):
    path = write("f.csv", BASE)
    code = (
        "import sys; from hybridroute.datasets import load_dataset; "
        "print(load_dataset(sys.argv[1]).fingerprint)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == load_dataset(path).fingerprint


def test_independent_of_file_name_and_format(write, tmp_path):
    a = load_dataset(write("one.csv", BASE))
    b = load_dataset(write("two.csv", BASE))
    c = load_dataset(a.export(tmp_path / "three.jsonl"))
    assert a.fingerprint == b.fingerprint == c.fingerprint
    assert len(a.fingerprint) == 64 and int(a.fingerprint, 16) >= 0


@pytest.mark.parametrize(
    ("what", "changed"),
    [
        ("one label", BASE.replace("good bye,b", "good bye,a")),
        ("one text", BASE.replace("see you", "see ya")),
        ("one split", BASE.replace("see you,b,train", "see you,b,test")),
        ("one fact", BASE.replace("train,2", "train,3")),
        ("one id", BASE.replace("3,see", "4,see")),
        (
            "row order",
            "id,text,label,split,attempts\n2,good bye,b,test,0\n1,hello there,a,train,1\n3,see you,b,train,2\n",
        ),
        ("a fact name", BASE.replace("attempts", "tries")),
    ],
)
def test_changes_with_content(write, what, changed):
    assert _fp(write, BASE, "a.csv") != _fp(write, changed, "b.csv"), what


def test_public_set_fingerprints_survive_a_new_process(banking77, shared_dir):
    code = (
        "from hybridroute.datasets import load_dataset; "
        "print(load_dataset('banking77', download=False).fingerprint)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == banking77.fingerprint
    from hybridroute.datasets import LabelledSet

    frame = banking77.frame
    assert LabelledSet.from_frame(frame).fingerprint == banking77.fingerprint
    # ...and one changed label changes it
    frame.loc[5, "label"] = (
        "card_linking" if frame.loc[5, "label"] != "card_linking" else "age_limit"
    )
    assert LabelledSet.from_frame(frame).fingerprint != banking77.fingerprint
