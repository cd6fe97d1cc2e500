"""A lean HTTP/1.1 load generator for the service benchmark (run as its own process).

The benchmark machine has two cores shared by the server and its clients, so what the
clients spend per request is taken from the server. A thread per client with an
``httpx.Client`` costs about a millisecond of CPU per request -- more than the service
spends routing a single item -- and makes single items look slower than they are next
to batches (one request for many items). This generator does what ``wrk`` does, in
Python: every request's bytes are built before the clock starts, ``concurrency``
keep-alive connections each send one request and read its answer (status line,
``content-length``, body) on one event loop, and each answer's status is checked. What it
spends per request is measured and reported (``client_cpu_ms``), so a reader can see
how much of the machine the load took.

Input (stdin, JSON): ``{"host", "port", "concurrency", "max_seconds", "requests":
[[path, body_text, items], ...]}``; ``"port"`` may be a list (replicas of one service:
connection ``k`` goes to the ``k``-th port, round robin). Output (stdout, JSON): latencies in ms, items,
errors, wall seconds and the client's CPU seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

__all__ = ["encode_request", "main", "run_load"]


def encode_request(host: str, port: int, path: str, body: bytes) -> bytes:
    """One HTTP/1.1 POST of a JSON ``body`` on a kept-alive connection."""
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return status, body


async def _run(
    host: str,
    ports: list[int],
    requests: list[list[tuple[bytes, int]]],
    concurrency: int,
    max_seconds: float,
) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    done_items = [0]
    next_index = [0]
    conns = [
        (k % len(ports), *await asyncio.open_connection(host, ports[k % len(ports)]))
        for k in range(concurrency)
    ]
    deadline = time.perf_counter() + max_seconds

    async def client(
        which: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        while time.perf_counter() < deadline:
            i = next_index[0]
            if i >= len(requests):
                return
            next_index[0] = i + 1
            data, items = requests[i][which]
            t0 = time.perf_counter()
            writer.write(data)
            status, body = await _read_answer(reader)
            elapsed = time.perf_counter() - t0
            if status != 200:
                errors.append(f"status {status}: {body[:200].decode('utf-8', 'replace')}")
                continue
            latencies.append(elapsed)
            done_items[0] += items

    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(client(k, r, w) for k, r, w in conns))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    for _, _, w in conns:
        w.close()
    return {
        "latencies_ms": [round(x * 1e3, 4) for x in latencies],
        "items": done_items[0],
        "errors": errors[:5],
        "error_count": len(errors),
        "seconds": wall,
        "client_cpu_s": cpu,
    }


def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Send ``spec["requests"]`` (see the module's docstring); the measured result."""
    host = spec["host"]
    given = spec["port"]
    ports = [int(p) for p in given] if isinstance(given, list) else [int(given)]
    # each request as it is sent to each port (its Host header names the port)
    requests = [
        [(encode_request(host, port, path, body.encode("utf-8")), int(items)) for port in ports]
        for path, body, items in spec["requests"]
    ]
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - the service extra installs uvloop
        runner = asyncio.run
    result: dict[str, Any] = runner(
        _run(host, ports, requests, int(spec["concurrency"]), float(spec["max_seconds"]))
    )
    return result


def main() -> int:
    spec = json.load(sys.stdin)
    json.dump(run_load(spec), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
