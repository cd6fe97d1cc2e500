"""``python -m benchmarks --postgres``: a throwaway PostgreSQL server for the run, a fresh
database per benchmark, removed afterwards; a clear refusal without the server programs."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _runner  # noqa: E402


@pytest.mark.postgres
def test_each_bench_gets_a_fresh_database_on_a_server_removed_afterwards():
    import psycopg

    with contextlib.ExitStack() as stack:
        urls = _runner._postgres_logs(stack, ("records", "service"))
        assert set(urls) == {"records", "service"} and urls["records"] != urls["service"]
        for url in urls.values():
            with psycopg.connect(url, connect_timeout=10) as conn:
                tables = conn.execute(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema='public'"
                ).fetchone()
            assert tables == (0,)
        root = Path(urls["records"].split("host=")[1].split("&")[0])
        assert root.is_dir()
    assert not root.exists()  # stopped and removed with the stack


def test_without_the_server_programs_the_run_is_refused_in_one_line(monkeypatch):
    import hybridroute.testing._postgres as pg

    monkeypatch.setattr(pg, "pg_bindir", lambda: None)
    with contextlib.ExitStack() as stack, pytest.raises(SystemExit) as exc:
        _runner._postgres_logs(stack, ("records",))
    assert "apt-get install postgresql" in str(exc.value)
