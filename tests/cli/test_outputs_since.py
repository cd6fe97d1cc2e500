"""``calibrate --from-log --since / --until``: a time without a UTC offset is refused, in
one line naming the option, before the bundle or the log is opened (as an outcome's
``at`` is refused)."""

from __future__ import annotations

import pytest

from hybridroute.cli import main

from .test_route import one_error_line

BAD = [
    ("2026-05-01", "needs a UTC offset"),
    ("2026-05-01T00:00", "needs a UTC offset"),
    ("2026-05-01T00:00:00", "needs a UTC offset"),
    ("2026-05-01 00:00:00", "needs a UTC offset"),
    ("2026-05-01T00:00:00.5", "needs a UTC offset"),
    ("yesterday", "not an ISO 8601 time"),
    ("2026-02-30T00:00:00Z", "not an ISO 8601 time"),
    ("", "not an ISO 8601 time"),
    ("0001-01-01T00:00:00+01:00", "is out of range"),
]


def _calibrate(tmp_path, *extra: str) -> list[str]:
    # neither the log nor the bundle exists: the time is refused before either is opened
    log, bundle = tmp_path / "log.sqlite", tmp_path / "bundle"
    base = ["calibrate", "--from-log", str(log), "--router", str(bundle)]
    return [*base, "--out", str(tmp_path / "new"), *extra]


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize(("value", "reason"), BAD)
def test_a_time_without_an_offset_is_refused(tmp_path, capsys, option, value, reason):
    assert main(_calibrate(tmp_path, option, value)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {option}: {reason}"), line
    assert not (tmp_path / "new").exists()


def test_since_must_come_before_until(tmp_path, capsys):
    since, until = "2026-05-02T00:00:00+02:00", "2026-05-01T22:00:00Z"  # the same instant
    assert main(_calibrate(tmp_path, "--since", since, "--until", until)) == 2
    assert "must be before --until" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "value", ["2026-05-01T00:00:00Z", "2026-05-01T00:00:00+00:00", "2026-05-01T02:00:00+02:00"]
)
def test_a_time_with_an_offset_passes(tmp_path, capsys, value):
    """The next refusal is about the missing log or bundle, not about the time."""
    assert main(_calibrate(tmp_path, "--since", value)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--since" not in line and str(tmp_path) in line, line


def test_the_help_says_it(capsys):
    assert main(["calibrate", "--help"]) == 0
    assert "ISO 8601 with a UTC offset" in " ".join(capsys.readouterr().out.split())
