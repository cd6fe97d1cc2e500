"""A throwaway PostgreSQL server for the tests and the benchmarks (not public API).

:class:`PostgresServer` runs Debian's (or any) PostgreSQL server programs in a temporary
directory, on a Unix socket (and on 127.0.0.1 on request), with trust authentication:
what the log's tests and ``python -m benchmarks --postgres`` need, started and removed
by the project's own files. Never a server for data anyone keeps.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PostgresServer", "pg_bindir"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: on PATH, or Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb"), shutil.which("pg_ctl")
    if all(found):
        # a link on PATH (as /usr/local/bin/initdb may be) names the real directory,
        # where the server's other programs are too
        return Path(found[0]).resolve().parent  # type: ignore[arg-type]
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    for bindir in reversed(versions):
        if (Path(bindir) / "initdb").is_file() and (Path(bindir) / "pg_ctl").is_file():
            return Path(bindir)
    return None


class PostgresServer:
    """A throw-away PostgreSQL cluster in a temporary directory, on a unix socket only.

    Root may not run ``initdb``: as root the directory is given to the ``postgres`` system
    user (which Debian's package creates) and the programs run through ``runuser``.
    """

    SUPERUSER = "hybridroute"

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        # not under pytest's tmp dir: its parents are private to root, and the server user
        # must reach its socket directory
        self.root = Path(tempfile.mkdtemp(prefix="hr-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, user="postgres", group="postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            timeout=120,
        )
        self.running = False

    def _run(self, program: str, *args: str, timeout: float) -> None:
        where = self.bindir / program
        cmd = [str(where if where.is_file() else shutil.which(program) or where), *args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-3000:] if log.is_file() else ""
            raise RuntimeError(f"{program} failed:\n{proc.stdout}\n{proc.stderr}\n{tail}")

    def start(self, *, tcp: bool = False) -> None:
        """Start the server: on its Unix socket only, or also on 127.0.0.1 (``tcp``)."""
        listen = "127.0.0.1" if tcp else ""
        options = (
            f"-c listen_addresses='{listen}' -k {self.root} -p {self.port} -c max_connections=60"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
            "-w", "-t", "60", "-o", options, "start", timeout=90,
        )  # fmt: skip
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", timeout=60)
            self.running = False

    def url(self, dbname: str = "postgres", password: str | None = None, tcp: bool = False) -> str:
        user = self.SUPERUSER if password is None else f"{self.SUPERUSER}:{password}"
        if tcp:
            return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"
        return f"postgresql://{user}@/{dbname}?host={self.root}&port={self.port}"

    def processes(self) -> list[int]:
        """The server's processes: the postmaster and its children."""
        first = (self.data / "postmaster.pid").read_text().splitlines()[0]
        master = int(first)
        pids = [master]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                    pids.append(int(entry.name))
        return pids

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Every process of the server stopped (SIGSTOP) within the block, then resumed:
        a server whose kernel still accepts and acknowledges, but that never answers."""
        pids = self.processes()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def create_database(self, name: str) -> str:
        """A new, empty database ``name`` (``createdb``); its URL."""
        self._run(
            "createdb", "-h", str(self.root), "-p", str(self.port), "-U", self.SUPERUSER, name,
            timeout=60,
        )  # fmt: skip
        return self.url(name)

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
