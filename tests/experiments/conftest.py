"""Shared fixtures: the real MLflow server (from the tracking tests) and a small synthetic set."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "experiments"

_INTENTS = {
    "refund": ["refund", "money back", "reimburse me", "return my money"],
    "shipping": ["delivery", "parcel", "courier", "shipment"],
    "password": ["password", "log in", "locked out", "reset login"],
    "invoice": ["invoice", "receipt", "billing copy", "tax document"],
}
_FILLER = "please i need help with my order today thanks hello can you tell me about it now".split()


def synthetic_rows(
    splits: dict[str, int], *, oos: dict[str, int] | None = None, noise: float = 0.15, seed: int = 0
) -> list[dict[str, str]]:
    """Texts built from intent phrases plus filler; a share of labels flipped so the model errs."""
    rng = np.random.default_rng(seed)
    labels = list(_INTENTS)
    rows = []
    for split, n in splits.items():
        for label, phrases in _INTENTS.items():
            for _ in range(n):
                words = list(rng.choice(_FILLER, size=5))
                words.insert(int(rng.integers(0, 6)), str(rng.choice(phrases)))
                if rng.random() < noise:  # a second intent's phrase muddles the text
                    words.insert(
                        int(rng.integers(0, 6)), str(rng.choice(_INTENTS[str(rng.choice(labels))]))
                    )
                rows.append({"text": " ".join(words), "label": label, "split": split})
        for _ in range((oos or {}).get(split, 0)):
            rows.append(
                {"text": " ".join(rng.choice(_FILLER, size=6)), "label": "oos", "split": split}
            )
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["text", "label", "split"])
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="session")
def synthetic_csv(tmp_path_factory) -> Path:
    """train / validation / test with a few out-of-scope rows (label ``oos``)."""
    root = tmp_path_factory.mktemp("exp-data")
    rows = synthetic_rows(
        {"train": 60, "validation": 60, "test": 60}, oos={"train": 0, "validation": 30, "test": 60}
    )
    return write_csv(root / "synthetic.csv", rows)
