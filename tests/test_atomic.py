"""``hybridroute._atomic``: an artifact is replaced whole or not at all."""

from __future__ import annotations

import os
import stat

import pytest

from hybridroute import _atomic
from hybridroute._atomic import replace_directory, write_atomic


def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("data", ["new ü text\n", b"\x00raw bytes"])
def test_write_atomic_writes_and_replaces(tmp_path, data) -> None:
    p = tmp_path / "a.json"
    p.write_text("old")
    assert write_atomic(p, data) == p
    assert p.read_bytes() == (data.encode() if isinstance(data, str) else data)
    assert _leftovers(tmp_path) == []
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask  # the usual permissions


@pytest.mark.parametrize("fails", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, fails) -> None:
    p = tmp_path / "a.json"
    p.write_text("old")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_atomic.os, fails, boom)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(p, "new")
    assert p.read_text() == "old" and _leftovers(tmp_path) == []


def test_replace_directory_swaps_in_the_new_content(tmp_path) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "old.txt").write_text("old")
    with replace_directory(root) as staging:
        assert staging.parent == tmp_path and staging != root
        (staging / "new.txt").write_text("new")
        assert (root / "old.txt").exists()  # untouched until the block ends
    assert sorted(p.name for p in root.iterdir()) == ["new.txt"]
    assert stat.S_IMODE(root.stat().st_mode) == 0o755 and _leftovers(tmp_path) == []


@pytest.mark.parametrize("exists", [True, False])
def test_a_failed_build_leaves_the_old_directory_and_no_staging(tmp_path, exists) -> None:
    root = tmp_path / "sub" / "bundle"
    if exists:
        root.mkdir(parents=True)
        (root / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="half-way"):
        with replace_directory(root) as staging:
            (staging / "new.txt").write_text("new")
            raise RuntimeError("half-way")
    assert root.exists() is exists
    if exists:
        assert sorted(p.name for p in root.iterdir()) == ["old.txt"]
    assert _leftovers(root.parent) == []


def test_a_policy_is_saved_atomically(tmp_path, monkeypatch) -> None:
    import numpy as np

    from hybridroute.calibration import EmpiricalThreshold, Policy

    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 300)
    policy = Policy.build(
        classes=["a", "b"], threshold=EmpiricalThreshold(0.7).fit(conf, rng.random(300) < conf)
    )
    p = tmp_path / "policy.json"
    p.write_text("the policy before")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_atomic.os, "replace", boom)
    with pytest.raises(OSError):
        policy.save(p)
    assert p.read_text() == "the policy before" and _leftovers(tmp_path) == []
    monkeypatch.undo()
    policy.save(p)
    assert Policy.load(p) == policy
