"""The routing service against in-process routing and MLflow's scoring server.

    python benchmarks/bench_service.py [--requests 400] [--batch-size 50]
        [--concurrency 1,8,32] [--max-seconds 60] [--no-mlflow] [--json]

One router (the ``bench_router`` one: local classifier, certified policy, the example
rules), saved as a bundle, is served three ways on 127.0.0.1 in the same run:

* **service** -- ``hybridroute serve`` (uvicorn, one worker) with its SQLite decision log:
  every answer waits for the log commit that holds its decision;
* **in-process** -- ``HybridRouter.route`` / ``route_many`` in this process, each call's
  decisions written to the same kind of log with ``log_many`` (one commit per call), one
  caller at a time (the GIL makes more threads no faster);
* **mlflow** -- ``mlflow models serve`` (``--env-manager local``, one worker) on the same
  router logged as a pyfunc model (stateless: no log, no request ids).

Each cell sends at most ``--requests`` requests (single items, or batches of
``--batch-size`` items) from ``c`` kept-alive connections and stops early after
``--max-seconds``. The load comes from a lean generator in its own process
(``_loadgen.py``: requests built before the clock starts, one event loop, like ``wrk``):
on two cores shared with the server, a client that spends a millisecond per request --
what a thread with an ``httpx.Client`` does -- takes the CPU the server would use, and
single items most of all. Each cell records what the generator spent per request and
what the server spent per item (its CPU time, read from ``/proc``). It prints items per
second and the p50 / p99 latency per request, and the ratios: service / in-process and
service / mlflow at equal concurrency. Goals (issue 17, this 2-core machine):
single-item p99 <= 15 ms at concurrency 8; batch throughput >= 0.7x in-process; >= 3x
MLflow's scoring server; issue 27's are rows of ``python -m benchmarks``.

The load, the server and (for the in-process baseline) the router share the machine's
cores, so absolute figures move with its load; the ratios are measured side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:  # as part of the benchmarks package (python -m benchmarks)
    from ._pyspy import sampled
    from ._service_report import GOAL_SINGLE_P99_MS, GOAL_SINGLE_VS_BATCH, _cell, print_report
    from .bench_records import ticket_items
    from .bench_router import build_router
except ImportError:  # as a script
    from _pyspy import sampled  # type: ignore[no-redef]
    from _service_report import (  # type: ignore[no-redef]
        GOAL_SINGLE_P99_MS,
        GOAL_SINGLE_VS_BATCH,
        _cell,
        print_report,
    )
    from bench_records import ticket_items  # type: ignore[no-redef]
    from bench_router import build_router  # type: ignore[no-redef]

HOST = "127.0.0.1"
#: Issue 27: service batches at c=8 >= 0.8x in-process routing + logging.
GOAL_BATCH_VS_INPROCESS_27 = 0.8
#: The service's switch for micro-batching (``0``: off), see hybridroute.service._batcher.
WINDOW_ENV = "HYBRIDROUTE_BATCH_WINDOW_MS"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server at {url} exited with status {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server at {url} was not ready after {timeout_s:.0f} s")


@contextlib.contextmanager
def _server(
    cmd: list[str], ready_url: str, env: dict[str, str], log_file: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with open(log_file, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_ready(ready_url, proc, timeout_s=120)
            yield proc
        except RuntimeError as exc:
            tail = log_file.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{exc}\n{tail}") from None
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # ``mlflow models serve`` starts ``uvicorn`` by name: this interpreter's scripts first
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env.setdefault("DO_NOT_TRACK", "true")
    return env


# --------------------------------------------------------------------------- the load
def _load(
    send: Callable[[Any, int], int],
    make_session: Callable[[], Any],
    requests: int,
    concurrency: int,
    max_seconds: float,
) -> dict[str, Any]:
    """Run ``send(session, i)`` for i < requests from ``concurrency`` threads (the
    in-process baseline)."""
    return _summary(
        concurrency, *_clients(send, make_session, range(requests), concurrency, max_seconds)
    )


def _clients(
    send: Callable[[Any, int], int],
    make_session: Callable[[], Any],
    ids: Sequence[int],
    concurrency: int,
    max_seconds: float,
) -> tuple[list[float], int, list[str], float]:
    """``concurrency`` threads sending the requests ``ids``: latencies, items, errors, wall."""
    counter = iter(ids)
    lock = threading.Lock()
    latencies: list[float] = []
    items = [0]
    errors: list[str] = []
    deadline = time.perf_counter() + max_seconds
    start_gate = threading.Barrier(concurrency + 1)

    def worker() -> None:
        session = make_session()
        mine: list[float] = []
        n_items = 0
        try:
            start_gate.wait()
            while time.perf_counter() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                t0 = time.perf_counter()
                try:
                    n_items += send(session, i)
                except Exception as exc:
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                mine.append(time.perf_counter() - t0)
        finally:
            with lock:
                latencies.extend(mine)
                items[0] += n_items
            closer = getattr(session, "close", None)
            if closer is not None:
                closer()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    start_gate.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return latencies, items[0], errors, time.perf_counter() - t0


def _summary(
    concurrency: int, latencies: list[float], items: int, errors: list[str], wall: float
) -> dict[str, Any]:
    lat = np.asarray(latencies) * 1e3
    return {
        "concurrency": concurrency,
        "requests": int(lat.size),
        "items": items,
        "seconds": round(wall, 3),
        "items_per_s": round(items / wall, 1) if wall > 0 else None,
        "p50_ms": round(float(np.percentile(lat, 50)), 2) if lat.size else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 2) if lat.size else None,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }


def _chunks(items: Sequence[dict[str, Any]], size: int, i: int) -> list[dict[str, Any]]:
    start = (i * size) % len(items)
    part = [items[(start + k) % len(items)] for k in range(size)]
    return part


def _tree_cpu(pid: int) -> float | None:
    """CPU seconds used so far by process ``pid`` and its live children (Linux ``/proc``;
    ``None`` elsewhere)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    todo = [pid]
    try:
        while todo:
            p = todo.pop()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError, IndexError):
        return None if pid in todo or total == 0.0 else total
    return total


def _cpu_of(pids: Sequence[int]) -> float | None:
    """CPU seconds of the process trees ``pids`` together (``None``: not known)."""
    each = [_tree_cpu(pid) for pid in pids]
    return None if not each or None in each else sum(x for x in each if x is not None)


#: Where a server's CPU goes, by the innermost frame that names a part: (bucket, markers
#: of the frames' files as py-spy prints them, ``function (package/module.py:line)``).
BUCKETS = (
    ("routing", ("(hybridroute/classifiers/", "(hybridroute/router/", "(sklearn/", "(scipy/")),
    ("routing", ("(numpy/", "(hybridroute/rules/", "(hybridroute/_facts")),
    ("log", ("(hybridroute/records/", "(hybridroute/_redact", "(hybridroute/_scrub")),
    ("log", ("(psycopg/", "(sqlite3/")),
    ("json", ("(json/", "(hybridroute/_safeio", "(hybridroute/service/_input")),
    ("micro-batching", ("(hybridroute/service/_batcher", "(hybridroute/service/_commit")),
    ("micro-batching", ("(hybridroute/service/_state",)),
    ("event loop", ("(asyncio/", "(uvloop/")),
    ("threads", ("(threading.py", "(concurrent/futures/")),
    ("http", ("(uvicorn/protocols/", "(starlette/", "(fastapi/", "(prometheus_client/")),
    ("http", ("(hybridroute/service/_app", "(hybridroute/service/_routes")),
    ("http", ("(hybridroute/service/_edges", "(hybridroute/service/_protocol")),
    ("http", ("(hybridroute/service/_metrics", "(h11/", "(httptools/")),
)


def _bucket(stack: str) -> str:
    """The part of the server a sampled stack (``py-spy -f raw``: root;...;leaf) is in."""
    for frame in reversed(stack.split(";")):
        for name, markers in BUCKETS:
            if any(m in frame for m in markers):
                return name
    return "other"


@contextlib.contextmanager
def _profiled(pid: int | None, out: dict[str, Any]) -> Iterator[None]:
    """Sample ``pid`` with py-spy while the block runs; ``out["profile"]``: the share of
    samples per bucket (:data:`BUCKETS`, by the innermost frame that names one). Nothing
    when py-spy is missing or cannot attach."""
    from collections import Counter

    if pid is None:
        yield
        return
    stacks: Counter[str] = Counter()
    with sampled(pid, stacks):
        yield
    counts: Counter[str] = Counter()
    for stack, n in stacks.items():
        counts[_bucket(stack)] += n
    total = sum(counts.values())
    if total:
        out["profile"] = {k: round(v / total, 3) for k, v in sorted(counts.items())}


def _http_load(
    base: str | Sequence[str],
    requests: Sequence[tuple[str, str, int]],
    concurrency: int,
    max_seconds: float,
    server_pid: int | Sequence[int] | None = None,
) -> dict[str, Any]:
    """Send ``requests`` (path, JSON body, items) from ``concurrency`` kept-alive
    connections with the lean load generator (:mod:`_loadgen`, its own process), the
    summary of what came back, and what the server and the load took of the CPU.

    ``base`` may name several replicas of one service (same host): the connections are
    spread over them; ``server_pid`` then names each replica's process."""
    bases = [base] if isinstance(base, str) else list(base)
    hosts_ports = [b.removeprefix("http://").rsplit(":", 1) for b in bases]
    pids = [server_pid] if isinstance(server_pid, int) else list(server_pid or ())
    spec = {
        "host": hosts_ports[0][0],
        "port": [int(p) for _, p in hosts_ports],
        "concurrency": concurrency,
        "max_seconds": max_seconds,
        "requests": [list(r) for r in requests],
    }
    cpu0 = _cpu_of(pids)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_loadgen.py"))],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=max_seconds + 120,
    )
    cpu1 = _cpu_of(pids)
    if proc.returncode != 0:
        raise RuntimeError(f"the load generator failed: {proc.stderr[-2000:]}")
    got = json.loads(proc.stdout)
    lat = got["latencies_ms"]
    out = _summary(concurrency, [x / 1e3 for x in lat], got["items"], got["errors"], got["seconds"])
    out["errors"] = got["error_count"]
    n = max(1, len(lat))
    out["client_cpu_us_per_request"] = round(got["client_cpu_s"] / n * 1e6, 1)
    if cpu0 is not None and cpu1 is not None and got["items"]:
        out["server_cpu_us_per_item"] = round((cpu1 - cpu0) / got["items"] * 1e6, 1)
    return out


def _service_cells(
    base: str | Sequence[str],
    items: Sequence[dict[str, Any]],
    args: argparse.Namespace,
    run_id: str,
    concurrency: Sequence[int] | None = None,
    modes: Sequence[str] = ("single", "batch"),
    server_pid: int | Sequence[int] | None = None,
) -> dict[str, Any]:
    # every request id is new to the log (a repeated one would be answered from it)
    def single(tag: str, i: int) -> tuple[str, str, int]:
        item = items[i % len(items)]
        body = {"text": item["text"], "facts": item["facts"], "request_id": f"{tag}-{i}"}
        return "/v1/route", json.dumps(body), 1

    def batch(tag: str, i: int) -> tuple[str, str, int]:
        part = _chunks(items, args.batch_size, i)
        body = {
            "items": [
                {"text": it["text"], "facts": it["facts"], "request_id": f"{tag}-{i}-{k}"}
                for k, it in enumerate(part)
            ]
        }
        return "/v1/route/batch", json.dumps(body), len(part)

    out: dict[str, Any] = {mode: [] for mode in modes}
    pid = server_pid if isinstance(server_pid, int) else None
    for c in concurrency or args.concurrency:
        for mode in ("single", "batch"):
            if mode not in modes:
                continue

            def requests(tag: str, mode: str = mode, c: int = c) -> list[tuple[str, str, int]]:
                if mode == "single":  # enough requests that every client sends several
                    return [single(tag, i) for i in range(max(args.requests, 4 * c))]
                n_batches = max(max(1, args.requests // args.batch_size) * 4, 2 * c)
                return [batch(tag, i) for i in range(n_batches)]

            cell = _http_load(
                base, requests(f"{run_id}-c{c}-{mode}"), c, args.max_seconds, server_pid
            )
            if c in args.profile and pid is not None:
                # the same load again under the profiler (sampling slows the server a
                # little: the measured cell above runs without it)
                profile: dict[str, Any] = {}
                with _profiled(pid, profile):
                    again = _http_load(
                        base, requests(f"{run_id}-c{c}-{mode}-p"), c, args.max_seconds, pid
                    )
                cell["profile"] = profile.get("profile")
                cell["profiled_server_cpu_us_per_item"] = again.get("server_cpu_us_per_item")
            out[mode].append(cell)
    return out


def _paired(
    on: str, off: str, items: Sequence[dict[str, Any]], args: argparse.Namespace, run_id: str
) -> dict[str, Any]:
    """Single items at each ``--unbatched`` concurrency, micro-batching on (``on``) and off
    (``off``), in alternating rounds: per concurrency, each side's pooled figures and the
    per-round ratios on / off (their spread is the noise of the comparison)."""
    rounds = 4
    # each round as long as a cell: a median of fewer latencies moves with the machine
    part = argparse.Namespace(**{**vars(args), "requests": max(100, args.requests)})
    out: dict[str, Any] = {}
    for c in args.unbatched:
        cells: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
        for r in range(rounds):
            for side, base in (
                (("on", on), ("off", off)) if r % 2 == 0 else (("off", off), ("on", on))
            ):
                got = _service_cells(base, items, part, f"{run_id}-{side}{r}", (c,), ("single",))
                cells[side].append(got["single"][0])
        out[f"c{c}"] = {
            side: {
                "concurrency": c,
                "items_per_s": round(
                    sum(x["items"] for x in cs) / sum(x["seconds"] for x in cs), 1
                ),
                "p50_ms": float(np.median([x["p50_ms"] for x in cs])),
                "p99_ms": float(np.median([x["p99_ms"] for x in cs])),
                "errors": sum(x["errors"] for x in cs),
            }
            for side, cs in cells.items()
        }
        out[f"c{c}"]["p50_ratio_each"] = [
            a["p50_ms"] / b["p50_ms"] for a, b in zip(cells["on"], cells["off"], strict=True)
        ]
        out[f"c{c}"]["throughput_ratio_each"] = [
            a["items_per_s"] / b["items_per_s"]
            for a, b in zip(cells["on"], cells["off"], strict=True)
        ]
    return out


def _mlflow_cells(
    base: str, items: Sequence[dict[str, Any]], args: argparse.Namespace, server_pid: int
) -> dict[str, Any]:
    def frame(part: Sequence[dict[str, Any]]) -> tuple[str, str, int]:
        doc = {
            "dataframe_split": {
                "columns": ["text", "facts"],
                "data": [[it["text"], json.dumps(it["facts"])] for it in part],
            }
        }
        return "/invocations", json.dumps(doc), len(part)

    out: dict[str, Any] = {"single": [], "batch": []}
    for c in args.mlflow_concurrency:
        singles = [frame([items[i % len(items)]]) for i in range(args.requests)]
        out["single"].append(_http_load(base, singles, c, args.max_seconds, server_pid))
        n_batches = max(1, args.requests // args.batch_size) * 4
        batches = [frame(_chunks(items, args.batch_size, i)) for i in range(n_batches)]
        out["batch"].append(_http_load(base, batches, c, args.max_seconds, server_pid))
    return out


def _in_process(
    router: Any, items: Sequence[dict[str, Any]], args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    from hybridroute.records import open_log

    out: dict[str, Any] = {}
    with open_log(f"sqlite:///{tmp / 'inprocess.sqlite'}") as log:

        def single(_: Any, i: int) -> int:
            item = items[i % len(items)]
            d = router.route(item["facts"], item["text"])
            log.log_many([(d, f"s-{i}", "live")])
            return 1

        def batch(_: Any, i: int) -> int:
            part = _chunks(items, args.batch_size, i)
            decisions = router.route_many(part)
            log.log_many([(d, f"b-{i}-{k}", "live") for k, d in enumerate(decisions)])
            return len(part)

        n_batches = max(1, args.requests // args.batch_size) * 4
        out["single"] = _load(single, lambda: None, args.requests, 1, args.max_seconds)
        out["batch"] = _load(batch, lambda: None, n_batches, 1, args.max_seconds)
    return out


def _floor_cell(
    items: Sequence[dict[str, Any]],
    args: argparse.Namespace,
    run_id: str,
    env: dict[str, str],
    tmp: Path,
) -> dict[str, Any]:
    """The same single-item load at the highest concurrency against a bare ASGI app on
    the same server stack (``_floor_app.py``): the HTTP floor per request."""
    top = 32 if 32 in args.concurrency else max(args.concurrency)
    port = _free_port()
    base = f"http://{HOST}:{port}"
    cmd = [sys.executable, str(Path(__file__).with_name("_floor_app.py")), str(port)]
    with _server(cmd, f"{base}/", env, tmp / "floor.out") as server:
        cells = _service_cells(
            base, items, args, run_id + "floor", (top,), ("single",), server_pid=server.pid
        )
    return dict(cells["single"][0])


#: What is measured on one PostgreSQL log: (label, worker processes per server, servers).
PG_SHAPES = (("1 worker", 1, 1), ("2 workers", 2, 1), ("2 replicas", 1, 2))


def _postgres_cells(
    cmd: list[str],
    args: argparse.Namespace,
    items: Sequence[dict[str, Any]],
    run_id: str,
    env: dict[str, str],
    tmp: Path,
) -> dict[str, Any]:
    """The service on the PostgreSQL log ``--log-url``, at the highest concurrency: one
    server with one worker, one with two (``serve --workers 2``), and two replicas (two
    ``serve`` processes, the connections spread over them) -- how throughput grows with
    processes when the log is shared."""
    top = 32 if 32 in args.concurrency else max(args.concurrency)
    out: dict[str, Any] = {"concurrency": top, "shapes": {}}
    for label, workers, replicas in PG_SHAPES:
        with contextlib.ExitStack() as stack:
            bases, pids = [], []
            for k in range(replicas):
                port = _free_port()
                one = list(cmd)
                one[one.index("--port") + 1] = str(port)
                one[one.index("--log") + 1] = args.log_url
                if workers > 1:
                    one += ["--workers", str(workers)]
                base = f"http://{HOST}:{port}"
                out_file = tmp / f"pg-{workers}w-{k}.out"
                server = stack.enter_context(_server(one, f"{base}/readyz", env, out_file))
                bases.append(base)
                pids.append(server.pid)
            tag = f"{run_id}-pg{workers}w{replicas}r"
            out["shapes"][label] = {
                "workers": workers,
                "replicas": replicas,
                **_service_cells(bases, items, args, tag, (top,), server_pid=pids),
            }
    return out


def _mlflow_model(bundle: Path, tmp: Path) -> Path:
    """The router logged as a pyfunc model, downloaded to a local directory."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow

    from hybridroute.tracking import log_router_model

    mlflow.set_tracking_uri(f"sqlite:///{tmp / 'mlflow.db'}")
    exp = mlflow.create_experiment("bench-service", artifact_location=(tmp / "mlruns").as_uri())
    with mlflow.start_run(experiment_id=exp):
        info = log_router_model(bundle)
    return Path(mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp / "model")))


# --------------------------------------------------------------------------- the run
def run(args: argparse.Namespace) -> dict[str, Any]:
    from hybridroute.router import save_router

    router, ds = build_router()
    items = ticket_items(ds, 1000)
    for it in items[:50]:  # warm the router's caches before any timing
        router.route(it["facts"], it["text"])
    run_id = uuid.uuid4().hex[:8]
    env = _env()
    result: dict[str, Any] = {
        "benchmark": "service",
        "requests_per_cell": args.requests,
        "batch_size": args.batch_size,
        "concurrency": list(args.concurrency),
        "cpus": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        bundle = save_router(router, tmp / "bundle")
        result["in_process"] = _in_process(router, items, args, tmp)

        port = _free_port()
        base = f"http://{HOST}:{port}"
        cmd = [
            sys.executable,
            "-m",
            "hybridroute",
            "serve",
            "--router",
            str(bundle),
            "--log",
            f"sqlite:///{tmp / 'service.sqlite'}",
            "--host",
            HOST,
            "--port",
            str(port),
            "--max-batch",
            str(max(1000, args.batch_size)),
        ]
        with _server(cmd, f"{base}/readyz", env, tmp / "service.out") as server:
            result["service"] = _service_cells(base, items, args, run_id, server_pid=server.pid)
            if args.unbatched:
                # the same service with micro-batching off, side by side: single items
                # sent to one and the other in alternating rounds
                port = _free_port()
                off_base = f"http://{HOST}:{port}"
                off_cmd = list(cmd)
                off_cmd[off_cmd.index("--port") + 1] = str(port)
                off_cmd[off_cmd.index("--log") + 1] = f"sqlite:///{tmp / 'unbatched.sqlite'}"
                off = {**env, WINDOW_ENV: "0"}
                with _server(off_cmd, f"{off_base}/readyz", off, tmp / "unbatched.out"):
                    result["paired"] = _paired(base, off_base, items, args, run_id)
            if args.access_log_pair:
                # the same service without uvicorn's access log, side by side: single
                # items at the highest concurrency, in alternating rounds
                port = _free_port()
                quiet_base = f"http://{HOST}:{port}"
                quiet_cmd = [*cmd, "--no-access-log"]
                quiet_cmd[quiet_cmd.index("--port") + 1] = str(port)
                quiet_cmd[quiet_cmd.index("--log") + 1] = f"sqlite:///{tmp / 'quiet.sqlite'}"
                top = 32 if 32 in args.concurrency else max(args.concurrency)
                part = argparse.Namespace(**{**vars(args), "unbatched": (top,)})
                with _server(quiet_cmd, f"{quiet_base}/readyz", env, tmp / "quiet.out"):
                    result["access_log_pair"] = _paired(base, quiet_base, items, part, run_id + "q")
        if args.workers > 1:
            # the same service in N worker processes on one log (single items and batches
            # at the highest concurrency): how throughput grows with processes
            port = _free_port()
            base = f"http://{HOST}:{port}"
            many = [*cmd, "--workers", str(args.workers)]
            many[many.index("--port") + 1] = str(port)
            many[many.index("--log") + 1] = f"sqlite:///{tmp / 'workers.sqlite'}"
            top = 32 if 32 in args.concurrency else max(args.concurrency)
            with _server(many, f"{base}/readyz", env, tmp / "workers.out") as server:
                result["service_workers"] = {
                    "workers": args.workers,
                    **_service_cells(
                        base, items, args, run_id + "w", (top,), server_pid=server.pid
                    ),
                }
        result["floor"] = _floor_cell(items, args, run_id, env, tmp)
        if args.log_url:
            result["postgres"] = _postgres_cells(cmd, args, items, run_id, env, tmp)
        if not args.no_mlflow:
            model = _mlflow_model(bundle, tmp)
            port = _free_port()
            base = f"http://{HOST}:{port}"
            mlflow_bin = str(Path(sys.executable).with_name("mlflow"))
            cmd = [
                mlflow_bin,
                "models",
                "serve",
                "-m",
                str(model),
                "--env-manager",
                "local",
                "--host",
                HOST,
                "-p",
                str(port),
                "-w",
                "1",
            ]
            with _server(cmd, f"{base}/ping", env, tmp / "mlflow.out") as server:
                result["mlflow"] = _mlflow_cells(base, items, args, server.pid)
    result["ratios"] = ratios(result)
    return result


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Service / in-process and service / mlflow throughput, per mode and concurrency;
    single items / batches at equal concurrency; micro-batched / unbatched singles."""
    out: dict[str, Any] = {}
    inproc = result["in_process"]
    for mode in ("single", "batch"):
        for cell in result["service"][mode]:
            c = cell["concurrency"]
            row: dict[str, Any] = {}
            base = inproc[mode]["items_per_s"]
            if cell["items_per_s"] and base:
                row["vs_in_process"] = round(cell["items_per_s"] / base, 3)
            other_cell = _cell(result.get("mlflow", {}).get(mode, []), c)
            if other_cell is not None and cell["items_per_s"] and other_cell["items_per_s"]:
                row["vs_mlflow"] = round(cell["items_per_s"] / other_cell["items_per_s"], 3)
            batch = _cell(result["service"]["batch"], c)
            if mode == "single" and batch is not None and batch["items_per_s"]:
                row["vs_batch"] = round((cell["items_per_s"] or 0) / batch["items_per_s"], 3)
            pair = result.get("paired", {}).get(f"c{c}")
            if mode == "single" and pair is not None:
                row["vs_unbatched"] = round(float(np.median(pair["throughput_ratio_each"])), 3)
                row["p50_vs_unbatched"] = round(float(np.median(pair["p50_ratio_each"])), 3)
            out[f"{mode}@c{c}"] = row
    return out


def _concurrency(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or min(values) < 1 or max(values) > 256:
        raise argparse.ArgumentTypeError("concurrency levels must be between 1 and 256")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400, help="most requests per cell")
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--concurrency", type=_concurrency, default=(1, 8, 32, 128))
    ap.add_argument(
        "--unbatched",
        type=_concurrency,
        default=(1, 32),
        help="single items again at these concurrencies with micro-batching off",
    )
    ap.add_argument(
        "--mlflow-concurrency",
        type=_concurrency,
        default=(8,),
        help="the concurrencies MLflow's scoring server is measured at",
    )
    ap.add_argument("--max-seconds", type=float, default=60.0, help="longest cell")
    ap.add_argument("--no-mlflow", action="store_true", help="skip MLflow's scoring server")
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="also serve with this many worker processes (serve --workers N) and measure "
        "the highest concurrency again",
    )
    ap.add_argument(
        "--profile",
        type=_concurrency,
        default=(),
        help="sample the server with py-spy in the cells at these concurrencies: the share "
        "of its CPU in routing, the log, JSON, micro-batching, HTTP and the event loop",
    )
    ap.add_argument(
        "--log-url",
        default=None,
        help="also serve on this PostgreSQL log (postgresql://...) with 1 and 2 workers and "
        "2 replicas, at the highest concurrency",
    )
    ap.add_argument(
        "--no-access-log-pair",
        dest="access_log_pair",
        action="store_false",
        help="skip the side-by-side rounds with uvicorn's access log off",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.requests < 1 or args.batch_size < 1 or args.max_seconds <= 0:
        ap.error("--requests, --batch-size and --max-seconds must be positive")
    return args


def _spread(ratios: Sequence[float]) -> float | None:
    """Half the range of repeated ratios over their median (the runner's noise)."""
    if len(ratios) < 2:
        return None
    mid = float(np.median(ratios))
    return (max(ratios) - min(ratios)) / (2 * mid) if mid else None


def _cpu_note(
    single: dict[str, Any], batch: dict[str, Any], floor: dict[str, Any] | None = None
) -> str:
    """What the server spent per item in each mode (the gap is the per-request HTTP cost
    that a batch shares among its items), and what the load took per request."""
    s, b = single.get("server_cpu_us_per_item"), batch.get("server_cpu_us_per_item")
    if s is None or b is None:
        return "server CPU not measured"
    note = (
        f"server CPU per item {s:,.0f} us single vs {b:,.0f} us in batches "
        f"({s - b:,.0f} us per request)"
    )
    if floor is not None and floor.get("server_cpu_us_per_item") is not None:
        note += (
            f", of which the HTTP floor (a bare ASGI app on the same server) is "
            f"{floor['server_cpu_us_per_item']:,.0f} us"
        )
    note += f"; load generator {single['client_cpu_us_per_request']:.0f} us per request"
    for label, cell in (("single", single), ("batch", batch)):
        if cell.get("profile") and cell.get("server_cpu_us_per_item"):
            parts = sorted(cell["profile"].items(), key=lambda kv: -kv[1])
            each = ", ".join(f"{k} {v * cell['server_cpu_us_per_item']:,.0f}" for k, v in parts)
            note += f"; {label} us per item by part (py-spy): {each}"
    return note


def _goal_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of issue 27's service goals (each a ratio measured in this run)."""
    rows: list[dict[str, Any]] = []
    single, batch = r["service"]["single"], r["service"]["batch"]
    s32, b32, s8 = _cell(single, 32), _cell(batch, 32), _cell(single, 8)
    if s32 is not None and b32 is not None:
        rows.append(
            {
                "key": "service.single_vs_batch_c32",
                "measure": "single items/s vs batches at c=32 (micro-batched)",
                "value": s32["items_per_s"],
                "unit": "/s",
                "baseline": b32["items_per_s"],
                "baseline_label": f"batches of {r['batch_size']} at c=32",
                "goal": GOAL_SINGLE_VS_BATCH,
                "notes": f"p99 single {s32['p99_ms']} ms, batch {b32['p99_ms']} ms; "
                + _cpu_note(s32, b32, r.get("floor")),
            }
        )
    if s8 is not None:
        rows.append(
            {
                "key": "service.single_c8_p99_ms",
                "measure": "single-item p99 at c=8",
                "value": s8["p99_ms"],
                "unit": "ms",
                "baseline": GOAL_SINGLE_P99_MS,
                "baseline_label": "target",
                "goal": 1.0,
                "goal_op": "<=",
                "notes": f"p50 {s8['p50_ms']} ms, {s8['items_per_s']:,.0f} items/s",
            }
        )
    pair = r.get("paired", {}).get("c1")
    if pair is not None:
        ratios_each = pair["p50_ratio_each"]
        rows.append(
            {
                "key": "service.single_c1_p50_vs_unbatched",
                "measure": "single-item p50 at c=1, micro-batching on vs off",
                "value": pair["on"]["p50_ms"],
                "unit": "ms",
                "baseline": pair["off"]["p50_ms"],
                "baseline_label": f"{WINDOW_ENV}=0, side by side",
                "ratio": float(np.median(ratios_each)),
                "goal": 1.0,
                "goal_op": "<=",
                "noise": _spread(ratios_each),
                "notes": "a lone client never waits for a batch; median of alternating rounds",
            }
        )
    for key, quiet in r.get("access_log_pair", {}).items():
        ratios_each = quiet["throughput_ratio_each"]
        rows.append(
            {
                "key": f"service.single_{key}_access_log_vs_off",
                "measure": f"single items/s at {key.replace('c', 'c=')}, access log on vs off",
                "value": quiet["on"]["items_per_s"],
                "unit": "/s",
                "baseline": quiet["off"]["items_per_s"],
                "baseline_label": "serve --no-access-log, side by side",
                "ratio": float(np.median(ratios_each)),
                "noise": _spread(ratios_each),
                "notes": "what uvicorn's access-log line costs a single-item request (the "
                "decision log and /metrics record every request either way); median of "
                "alternating rounds",
            }
        )
    b8 = _cell(batch, 8)
    if b8 is not None:
        rows.append(
            {
                "key": "service.batch_c8_vs_in_process",
                "measure": "service batches at c=8 vs in-process router + log",
                "value": b8["items_per_s"],
                "unit": "/s",
                "baseline": r["in_process"]["batch"]["items_per_s"],
                "baseline_label": "in-process route_many + log_many",
                "goal": GOAL_BATCH_VS_INPROCESS_27,
                "notes": f"p99 {b8['p99_ms']} ms",
            }
        )
    return rows


def _worker_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """N worker processes against one, at the highest concurrency (no goal: a figure)."""
    w = r.get("service_workers")
    rows: list[dict[str, Any]] = []
    for mode in ("single", "batch") if w else ():
        cell = w[mode][0]
        one = _cell(r["service"][mode], cell["concurrency"])
        if one is None:
            continue
        rows.append(
            {
                "key": f"service.{mode}_workers_{w['workers']}",
                "measure": f"service {mode} items/s, {w['workers']} workers vs 1, "
                f"c={cell['concurrency']}",
                "value": cell["items_per_s"],
                "unit": "/s",
                "baseline": one["items_per_s"],
                "baseline_label": "1 worker",
                "notes": f"p50 {cell['p50_ms']} ms, p99 {cell['p99_ms']} ms; one SQLite log; "
                f"{r['cpus']} CPUs shared with the clients",
            }
        )
    return rows


def _postgres_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Throughput on one PostgreSQL log: 2 workers and 2 replicas against 1 worker."""
    pg = r.get("postgres")
    rows: list[dict[str, Any]] = []
    if not pg:
        return rows
    shapes = pg["shapes"]
    c = pg["concurrency"]
    for mode in ("single", "batch"):
        one = shapes["1 worker"][mode][0]
        for label, shape in shapes.items():
            cell = shape[mode][0]
            cpu = cell.get("server_cpu_us_per_item")
            rows.append(
                {
                    "key": f"service.pg_{mode}_{label.replace(' ', '_')}",
                    "measure": f"service {mode} items/s on one PostgreSQL log, {label}, c={c}",
                    "value": cell["items_per_s"],
                    "unit": "/s",
                    "baseline": one["items_per_s"],
                    "baseline_label": "1 worker",
                    "notes": f"p50 {cell['p50_ms']} ms, p99 {cell['p99_ms']} ms; server CPU "
                    + ("not measured" if cpu is None else f"{cpu:,.0f} us per item")
                    + f"; {r['cpus']} CPUs shared with the load and PostgreSQL",
                }
            )
    return rows


def runner_entry(quick: bool, settings: dict[str, Any]) -> dict[str, Any]:
    """Rows for ``python -m benchmarks``: the goals, then the curve over concurrency."""
    argv = ["--requests", str(settings.get("requests", 40 if quick else 1000))]
    argv += ["--concurrency", str(settings.get("concurrency", "8" if quick else "1,8,32,128"))]
    argv += ["--unbatched", str(settings.get("unbatched", "1" if quick else "1,32"))]
    argv += ["--max-seconds", str(settings.get("max_seconds", 10 if quick else 30))]
    argv += ["--workers", str(settings.get("workers", 1 if quick else 2))]
    if settings.get("profile", not quick):  # where the server's CPU goes, at c=32
        argv += ["--profile", str(settings.get("profile_concurrency", 32))]
    if quick or settings.get("no_mlflow"):
        argv.append("--no-mlflow")
    if quick or settings.get("no_access_log_pair"):
        argv.append("--no-access-log-pair")
    if settings.get("log_url"):
        argv += ["--log-url", str(settings["log_url"])]
    r = run(parse_args(argv))
    rows = _goal_rows(r) + _worker_rows(r) + _postgres_rows(r)
    for mode in ("single", "batch"):
        for cell in r["service"][mode]:
            c = cell["concurrency"]
            ratio = r["ratios"][f"{mode}@c{c}"]
            notes = [f"p50 {cell['p50_ms']} ms, p99 {cell['p99_ms']} ms"]
            if "vs_unbatched" in ratio:
                notes.append(f"{ratio['vs_unbatched']:.2f}x the unbatched service")
            if "vs_mlflow" in ratio:
                notes.append(f"{ratio['vs_mlflow']:.2f}x MLflow's scoring server")
            rows.append(
                {
                    "key": f"service.{mode}_c{c}_items_per_s",
                    "measure": f"service {mode} items/s at c={c}",
                    "value": cell["items_per_s"],
                    "unit": "/s",
                    "baseline": r["in_process"][mode]["items_per_s"],
                    "baseline_label": "in-process router + log",
                    "notes": "; ".join(notes),
                }
            )
    return {"rows": rows, "raw": r}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    r = run(args)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print_report(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
