"""Helpers for hostile-input tests: a regression that blocks, spins or balloons must fail the
test, never hang the suite or exhaust the machine."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any


def bounded(fn: Callable[..., Any], *args: Any, timeout: float = 20.0, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread joined with ``timeout``: its result, or its
    exception re-raised; an assertion error if it has not returned by then."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    name = getattr(fn, "__name__", "the call")
    assert not t.is_alive(), f"{name} did not return within {timeout} s (blocked or looping)"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def run_limited(
    code: str, *, timeout: float = 60.0, memory: int = 3 << 30
) -> subprocess.CompletedProcess[str]:
    """Python ``code`` in a subprocess under an address-space limit and a timeout."""
    prelude = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
