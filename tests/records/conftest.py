"""Fixtures of the log-backend tests: one log URL per backend (a fresh store per test)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def log_url(request, tmp_path):
    """A URL of an empty decision log: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log.sqlite'}"
    return request.getfixturevalue("postgres_db_url")
