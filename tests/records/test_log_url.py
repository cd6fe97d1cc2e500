"""open_log: which URLs open which backend, and a password never shows."""

from __future__ import annotations

import os
import sys

import pytest

from hybridroute.exceptions import ArtifactError, InputError, UserInputError
from hybridroute.records import DecisionLog, open_log
from hybridroute.records._url import display_url

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize(
    ("target", "relative"),
    [
        ("sqlite:///rel/log.sqlite", "rel/log.sqlite"),
        ("sqlite:///log.sqlite", "log.sqlite"),
        ("SQLite:///log.sqlite", "log.sqlite"),
        ("plain.sqlite", "plain.sqlite"),
        ("./dir/plain.sqlite", "dir/plain.sqlite"),
        ("logs:2026.sqlite", "logs:2026.sqlite"),  # a colon, but no URL
    ],
)
def test_sqlite_urls_and_bare_paths_open_a_sqlite_log(tmp_path, monkeypatch, target, relative):
    monkeypatch.chdir(tmp_path)
    # a log is created in an existing directory, never with one (tests/cli/test_outputs_log.py)
    (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
    with open_log(target) as log:
        assert isinstance(log, DecisionLog)
        assert log.path.resolve() == (tmp_path / relative).resolve()
    assert (tmp_path / relative).is_file()


def test_absolute_sqlite_url_and_path_objects(tmp_path):
    path = tmp_path / "abs.sqlite"
    with open_log(f"sqlite:///{path}") as log:  # sqlite:////tmp/...: four slashes
        assert log.path == path
    with open_log(path) as log:
        assert log.path == path
    assert f"sqlite:///{path}".startswith("sqlite:////")


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("sqlite://relative.sqlite", "not a SQLite log URL"),
        ("sqlite:relative.sqlite", "not a SQLite log URL"),
        ("sqlite://host/x.sqlite", "not a SQLite log URL"),
        ("sqlite:///x.sqlite?mode=ro", "not a SQLite log URL"),
        ("sqlite:///", "needs a file path"),
        ("sqlite:///:memory:", "needs a file path"),
        ("sqlite:///dir/", "needs a file path"),
        ("mysql://root:" + SECRET + "@db/x", "scheme 'mysql'"),
        ("http://u:" + SECRET + "@example.org/log", "scheme 'http'"),
        ("postgresql:/u:" + SECRET + "@host/db", "not a PostgreSQL URL"),
        ("file:///tmp/x.sqlite", "scheme 'file'"),
    ],
)
def test_bad_urls_are_input_errors_without_the_password(tmp_path, monkeypatch, url, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=match) as info:
        open_log(url)
    assert isinstance(info.value, UserInputError)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://app:{SECRET}@db:5432/log", "postgresql://app:***@db:5432/log"),
        (f"postgres://app:{SECRET}@/log?host=/tmp/s", "postgres://app:***@/log?host=/tmp/s"),
        (f"postgresql://app:{SECRET}/x@db/log", "postgresql://app:***@db/log"),  # raw '/'
        (f"postgresql://app:p@ss{SECRET}@db/log", "postgresql://app:***@db/log"),  # raw '@'
        (
            f"postgresql://db/log?user=a&password={SECRET}&port=5",
            "postgresql://db/log?user=a&password=***&port=5",
        ),
        (f"postgresql://db/log?PASSWORD={SECRET}", "postgresql://db/log?PASSWORD=***"),
        ("postgresql://app@db/log", "postgresql://app@db/log"),
        ("/var/log/x.sqlite", "/var/log/x.sqlite"),
    ],
)
def test_display_url_hides_the_password(url, shown):
    assert display_url(url) == shown
    assert SECRET not in display_url(url)


def test_a_reader_never_creates_a_sqlite_log(tmp_path):
    for target in (str(tmp_path / "none.sqlite"), f"sqlite:///{tmp_path / 'none.sqlite'}"):
        with pytest.raises(ArtifactError, match="no such decision log"):
            open_log(target, create=False)
    assert list(tmp_path.iterdir()) == []


def test_without_the_driver_the_error_says_how_to_install_it(tmp_path):
    """psycopg is imported only by the PostgreSQL backend, lazily; missing: a clear error."""
    import subprocess

    code = (
        "import sys; sys.modules['psycopg'] = None  # as if not installed\n"
        "import hybridroute.records as r\n"
        "try:\n"
        f"    r.open_log('postgresql://u:{SECRET}@/db?host=/nonexistent')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith("ArtifactError ")
    assert "pip install 'hybridroute[postgres]'" in out and SECRET not in out


def test_importing_records_does_not_import_the_driver():
    import subprocess

    code = "import sys, hybridroute.records; print('psycopg' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.postgres
def test_a_password_in_the_url_never_reaches_errors_or_reprs(postgres_server):
    url = postgres_server.url("postgres", password=SECRET)
    with open_log(url) as log:  # trust auth: the password is sent to no one, but kept
        assert SECRET not in repr(log) and SECRET not in log.where
        assert "***" in log.where
    wrong = url.replace(f"port={postgres_server.port}", "port=1")
    with pytest.raises(ArtifactError, match="cannot connect to the decision log") as info:
        open_log(wrong)
    assert SECRET not in str(info.value) and "***" in str(info.value)
    with pytest.raises(ArtifactError, match="no decision log in this database") as info:
        open_log(postgres_server.url("template1", password=SECRET), create=False)
    assert SECRET not in str(info.value)
    bad_port = url.replace(f"port={postgres_server.port}", "port=notaport")
    with pytest.raises(ArtifactError) as info:
        open_log(bad_port)
    assert SECRET not in str(info.value)
    assert os.environ.get("PGPASSWORD") != SECRET
