"""The stand-in LLM served from a child process (its own interpreter and GIL).

:class:`StandInProcess` starts a :class:`~hybridroute.testing.StandInLLM` in a spawned
child and talks to it over a pipe (``stats`` / ``reset`` / ``stop``), so that a client
under test does not share a CPU with the server (throughput benchmarks, large fault runs).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from ._standin_answers import AnswerPolicy
from ._standin_faults import parse_fault_rates
from ._standin_wire import LocalEndpoint

__all__ = ["StandInProcess"]


def _child_main(conn: Any, policy: AnswerPolicy | None, kwargs: dict[str, Any]) -> None:
    """Serve a :class:`StandInLLM` in this (child) process; obey commands from ``conn``."""
    from .standin_llm import StandInLLM  # in the child: the server module imports this one

    try:
        server = StandInLLM(policy, **kwargs).start()
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("port", server.port))
    try:
        while True:
            try:
                command = conn.recv()
            except EOFError:  # the parent went away
                break
            if command == "stats":
                conn.send(server.stats())
            elif command == "reset":
                server.reset_stats()
                conn.send(True)
            else:  # "stop"
                break
    finally:
        server.stop()
        with contextlib.suppress(OSError, BrokenPipeError):
            conn.send(True)


class StandInProcess(LocalEndpoint):
    """A :class:`StandInLLM` served from a child process (its own interpreter and GIL).

    Same arguments and the same ``api_base`` / :meth:`stats` / :meth:`reset_stats` API as
    :class:`StandInLLM`; use it when the client under test should not share a CPU with the
    server (throughput benchmarks, large fault runs). ``policy`` must be picklable.
    """

    def __init__(self, policy: AnswerPolicy | None = None, **kwargs: Any) -> None:
        parse_fault_rates(kwargs.get("faults"))  # fail here, not in the child
        self.policy = policy
        self.kwargs = kwargs
        self.port = int(kwargs.get("port", 0))
        self._proc: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    def start(self) -> StandInProcess:
        """Start the child and wait until it listens."""
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_child_main,
            args=(child, self.policy, self.kwargs),
            name="hybridroute-standin-llm",
            daemon=True,
        )
        proc.start()
        child.close()
        if not parent.poll(60):
            proc.kill()
            raise RuntimeError("stand-in LLM child process did not start within 60 s")
        kind, value = parent.recv()
        if kind != "port":
            proc.join(5)
            raise RuntimeError(f"stand-in LLM child process failed to start: {value}")
        self.port = int(value)
        self._proc, self._conn = proc, parent
        return self

    def _ask(self, command: str) -> Any:
        with self._lock:
            if self._conn is None:
                raise RuntimeError("stand-in LLM process is not running")
            self._conn.send(command)
            return self._conn.recv()

    def stats(self) -> dict[str, int]:
        """Counts so far (see :meth:`StandInLLM.stats`)."""
        return dict(self._ask("stats"))

    @property
    def request_count(self) -> int:
        return int(self.stats().get("requests", 0))

    def reset_stats(self) -> None:
        self._ask("reset")

    def stop(self) -> None:
        """Stop the child process."""
        proc, conn = self._proc, self._conn
        if proc is None:
            return
        try:
            with self._lock:
                conn.send("stop")
                if conn.poll(30):
                    conn.recv()
        except (OSError, EOFError, BrokenPipeError):
            pass
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()
        self._proc = self._conn = None

    def __enter__(self) -> StandInProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
