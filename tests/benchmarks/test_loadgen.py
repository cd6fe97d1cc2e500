"""The service benchmark's load generator: every request sent once on kept-alive
connections, its answer read whole, refusals counted as errors, CPU reported."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import _loadgen, bench_service  # noqa: E402


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive
    seen: list[tuple[str, bytes, int]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        with self.lock:
            self.seen.append((self.path, body, id(self.connection)))
        ok = b"bad" not in body
        answer = json.dumps({"ok": ok, "n": len(body)}).encode()
        self.send_response(200 if ok else 422)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    _Echo.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_every_request_is_sent_once_and_answered(echo):
    host, port = echo
    requests = [["/v1/route", json.dumps({"i": i}), 1] for i in range(40)]
    requests += [["/v1/route/batch", json.dumps({"items": list(range(5))}), 5]]
    got = _loadgen.run_load(
        {"host": host, "port": port, "concurrency": 4, "max_seconds": 30, "requests": requests}
    )
    assert got["items"] == 45 and got["error_count"] == 0
    assert len(got["latencies_ms"]) == 41 and all(x > 0 for x in got["latencies_ms"])
    assert sorted(body for _, body, _ in _Echo.seen) == sorted(r[1].encode() for r in requests)
    assert len({conn for *_, conn in _Echo.seen}) <= 4  # kept alive: at most one per client
    assert got["client_cpu_s"] >= 0


def test_a_refused_request_is_an_error_not_an_item(echo):
    host, port = echo
    requests = [["/x", json.dumps({"i": i}), 1] for i in range(5)] + [["/x", '"bad"', 1]]
    got = _loadgen.run_load(
        {"host": host, "port": port, "concurrency": 2, "max_seconds": 30, "requests": requests}
    )
    assert got["items"] == 5 and got["error_count"] == 1
    assert got["errors"][0].startswith("status 422")


def test_the_benchmarks_http_load_summarises_through_the_generator_process(echo):
    host, port = echo
    requests = [("/v1/route", json.dumps({"i": i}), 1) for i in range(30)]
    got = bench_service._http_load(f"http://{host}:{port}", requests, 3, 30.0)
    assert got["requests"] == 30 and got["items"] == 30 and got["errors"] == 0
    assert got["p50_ms"] > 0 and got["p99_ms"] >= got["p50_ms"]
    assert "server_cpu_us_per_item" not in got  # no server process was named


def test_the_cpu_of_a_process_tree_is_read_from_proc():
    import os

    first = bench_service._tree_cpu(os.getpid())
    sum(i * i for i in range(300_000))  # some CPU
    second = bench_service._tree_cpu(os.getpid())
    assert first is not None and second is not None and second > first
    assert bench_service._tree_cpu(2**22 + 12345) is None  # no such process


def test_a_server_stack_goes_to_the_part_of_its_innermost_named_frame():
    bucket = bench_service._bucket
    root = (
        "<module> (hybridroute/__main__.py:7);run (hybridroute/service/_server.py:97);"
        "Server.run (uvicorn/server.py:86);Runner.run (asyncio/runners.py:118)"
    )
    assert bucket(root) == "event loop"
    http = root + ";RequestResponseCycle.send (uvicorn/protocols/http/httptools_impl.py:524)"
    assert bucket(http) == "http"
    parse = http + ";route (hybridroute/service/_routes.py:9);loads (json/__init__.py:346)"
    assert bucket(parse) == "json"
    score = root + ";_drain (hybridroute/service/_batcher.py:1);dot (scipy/sparse/_base.py:2)"
    assert bucket(score) == "routing"
    commit = "_worker (concurrent/futures/thread.py:83);_immediate (hybridroute/records/_log.py:9)"
    assert bucket(commit) == "log"
    assert bucket("_worker (concurrent/futures/thread.py:83)") == "threads"
    assert bucket("<frozen runpy>") == "other"


def test_shares_go_to_the_first_part_a_stack_holds():
    from collections import Counter

    from benchmarks._pyspy import part_of, shares

    parts = (("litellm", ("(litellm/",)), ("sdk", ("(openai/", "(httpx/")))
    both = "acompletion (litellm/main.py:1);post (openai/_base_client.py:2)"
    assert part_of(both, parts) == "litellm"  # the first part in the order given
    assert part_of("send (httpx/_client.py:3)", parts) == "sdk"
    assert part_of("<frozen runpy>", parts) == "other"
    got = shares(Counter({both: 2, "send (httpx/_client.py:3)": 1, "x (y.py:1)": 1}), parts)
    assert got == {"litellm": 0.5, "sdk": 0.25, "other": 0.25}
    assert shares(Counter(), parts) == {}


def test_a_process_is_sampled_while_the_block_runs():
    import os
    from collections import Counter

    from benchmarks._pyspy import pyspy, sampled

    if pyspy() is None:
        pytest.fail("py-spy is missing: it is in the bench extra (python3 dev.py installs it)")
    stacks: Counter[str] = Counter()
    code = "import time\nt=time.time()\nwhile time.time()-t<3: sum(range(1000))\n"
    import subprocess

    busy = subprocess.Popen([sys.executable, "-c", code])
    try:
        with sampled(busy.pid, stacks, rate=100):
            time.sleep(1.5)
    finally:
        busy.kill()
        busy.wait()
    assert sum(stacks.values()) > 20 and any("<module>" in s for s in stacks)
    assert os.getpid() != busy.pid
