"""Shared fixtures for the datasets tests: no network, a private cache, the public sets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hybridroute.datasets import _public, load_dataset

FIXTURES = Path(__file__).parent / "fixtures"


def _shared_dir() -> Path | None:
    env = os.environ.get("HYBRIDROUTE_DATA_DIR")
    candidates = [Path(env)] if env else []
    # ../shared/datasets beside the project checkout (tests/datasets/conftest.py → repo → ..)
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "datasets")
    for c in candidates:
        if (c / "banking77" / "train.csv").is_file() and (
            c / "clinc150" / "data_full.json"
        ).is_file():
            return c
    return None


SHARED = _shared_dir()
NO_DATA = (
    "public sets not found: set HYBRIDROUTE_DATA_DIR to a directory with "
    "banking77/ and clinc150/ (e.g. ../shared/datasets)"
)


@pytest.fixture(autouse=True)
def _no_network_private_cache(monkeypatch, tmp_path_factory):
    """Every test: an empty private cache, and any download attempt fails the test."""
    monkeypatch.setenv("HYBRIDROUTE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("HYBRIDROUTE_OFFLINE", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("a test tried to reach the network")

    monkeypatch.setattr(_public, "_urlopen", refuse)


@pytest.fixture
def shared_dir(monkeypatch) -> Path:
    """The public data directory, also set as HYBRIDROUTE_DATA_DIR for the test."""
    if SHARED is None:
        pytest.skip(NO_DATA)
    monkeypatch.setenv("HYBRIDROUTE_DATA_DIR", str(SHARED))
    return SHARED


@pytest.fixture(scope="session")
def banking77():
    if SHARED is None:
        pytest.skip(NO_DATA)
    return load_dataset("banking77", data_dir=SHARED, download=False)


@pytest.fixture(scope="session")
def clinc150():
    if SHARED is None:
        pytest.skip(NO_DATA)
    return load_dataset("clinc150", data_dir=SHARED, download=False)


@pytest.fixture
def write(tmp_path):
    """``write(name, content)``: a file in the test's directory (text written as UTF-8)."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    return _write
