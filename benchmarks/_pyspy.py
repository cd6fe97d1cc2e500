"""Where a process spends its CPU during a benchmark: py-spy samples, shared by part.

:func:`sampled` runs ``py-spy record`` on a process (the server of ``bench_service``, or
the benchmark's own process in ``bench_llm``) while a block runs, and :func:`shares`
turns the sampled stacks into the share of samples per part, each stack going to the first
part (in the order given) one of whose markers appears anywhere in it. Markers are the
frames' files as py-spy prints them, ``function (package/module.py:line)``: e.g.
``"(litellm/"``. A benchmark reports the shares times the CPU it measured per request or
per item (from ``/proc`` or ``time.process_time``): the breakdown comes from the same
run, never from a table typed in.

py-spy is in the ``bench`` extra; without it (or when it cannot attach) nothing is
sampled and the benchmark says so.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["Rules", "pyspy", "sampled", "shares"]

#: ``(part, markers)`` in priority order.
Rules = Sequence[tuple[str, Sequence[str]]]


def pyspy() -> str | None:
    """The py-spy program: on PATH or beside this interpreter; ``None`` when missing."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else None


@contextlib.contextmanager
def sampled(pid: int, out: Counter[str], *, rate: int = 250, gil: bool = False) -> Iterator[None]:
    """Sample process ``pid`` while the block runs; ``out`` gets each stack's count.

    ``gil``: only the thread holding the interpreter lock (its Python CPU), else every
    thread that is not idle.
    """
    program = pyspy()
    if program is None:
        yield
        return
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        raw = Path(f.name)
    cmd = [program, "record", "-p", str(pid), "-r", str(rate), "-f", "raw", "-o", str(raw)]
    cmd += ["--nonblocking", *(["--gil"] if gil else [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the block starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(OSError):
            for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
                stack, _, n = line.rpartition(" ")
                if n.isdigit():
                    out[stack] += int(n)
        raw.unlink(missing_ok=True)


def part_of(stack: str, rules: Rules, default: str = "other") -> str:
    """The first part one of whose markers appears in ``stack``; else ``default``."""
    for name, markers in rules:
        if any(m in stack for m in markers):
            return name
    return default


def shares(stacks: Counter[str], rules: Rules, default: str = "other") -> dict[str, float]:
    """The share of samples per part (largest first); empty without samples."""
    counts: Counter[str] = Counter()
    for stack, n in stacks.items():
        counts[part_of(stack, rules, default)] += n
    total = sum(counts.values())
    return {k: round(v / total, 3) for k, v in counts.most_common()} if total else {}
