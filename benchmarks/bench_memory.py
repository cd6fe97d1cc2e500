"""Peak memory of a streamed evaluation: it must stay flat as the labelled set grows.

    python benchmarks/bench_memory.py [--sizes 100000,1000000] [--json]

A labelled JSONL file of ``max(--sizes)`` rows is generated deterministically (seeded) in a
temporary directory -- never in the repository -- from the bundled support-tickets rows
with perturbed texts (case, typos, a dropped letter, reference numbers, greetings), each
row keeping its label, facts and gold next step. The router of ``bench_router`` is saved
as a bundle. Then, for each size, a **fresh child process** loads the bundle and runs
:func:`hybridroute.evaluation.evaluate_stream` over the first ``size`` rows of the file
(read row by row with :class:`hybridroute.evaluation.LabelledStream`), and reports its
peak resident set size during the evaluation: on Linux the child resets its peak after
loading the router (``/proc/self/clear_refs``) and reads ``VmHWM`` at the end, because
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of a forked-and-exec'd child also counts
the parent's RSS at the fork (it is reported too, as ``ru_maxrss_mib``); elsewhere
``ru_maxrss`` is used. ``rss_ratio`` = peak RSS at the largest size / at the smallest:
~1.0 means flat.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

_GREETINGS = ("Hi, ", "Hello! ", "Hey there, ", "Good morning. ", "")
_SUFFIXES = (" Thanks.", " Please help.", "", " Ref {ref}.", " (ticket {ref})")


def _perturb(text: str, rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 1:
        text = text.lower()
    elif kind == 2 and len(text) > 3:  # swap two neighbouring letters
        i = rng.randrange(len(text) - 1)
        text = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    elif kind == 3 and len(text) > 3:  # drop a letter
        i = rng.randrange(len(text))
        text = text[:i] + text[i + 1 :]
    elif kind == 4:
        text = text.upper()
    greeting = rng.choice(_GREETINGS)
    suffix = rng.choice(_SUFFIXES).format(ref=rng.randrange(10_000, 99_999))
    return f"{greeting}{text}{suffix}"


def write_labelled_file(path: Path, n_rows: int, seed: int = 0) -> Path:
    """Write ``n_rows`` perturbed support tickets as JSONL (deterministic for a seed)."""
    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")
    names = list(ds.fact_columns)
    frame = ds.frame
    next_steps = list(frame["next_step"]) if "next_step" in frame.columns else [None] * len(ds)
    base = []
    for i, (text, label) in enumerate(zip(ds.texts, ds.y, strict=True)):
        facts = {k: v for k, v in ds.facts(i).items() if v is not None and k in names}
        ns = next_steps[i] if isinstance(next_steps[i], str) else None
        base.append((text, str(label), facts, ns))
    rng = random.Random(seed)
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n_rows):
            text, label, facts, ns = base[rng.randrange(len(base))]
            row = {"id": f"m{i:07d}", "text": _perturb(text, rng), "label": label, "facts": facts}
            if ns:
                row["next_step"] = ns
            fh.write(dumps(row) + "\n")
    return path


def _status_kib(field: str) -> int | None:
    """A ``VmHWM`` / ``VmRSS`` line of ``/proc/self/status`` in KiB (Linux), else None."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset this process's peak RSS to its current RSS (Linux ``clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _child(router_dir: str, data: str, limit: int, n_boot: int, batch_size: int) -> dict[str, Any]:
    """Runs in a fresh process: stream-evaluate the first ``limit`` rows, report peak RSS.

    ``ru_maxrss`` of a process started by fork + exec also counts the parent's RSS at the
    fork (Linux keeps the larger of the two across exec), so the child's own peak is read
    from ``VmHWM`` where Linux offers it; ``ru_maxrss`` is reported next to it.
    """
    from hybridroute.evaluation import LabelledStream, evaluate_stream
    from hybridroute.router import load_router

    router = load_router(router_dir)
    loaded_kib = _status_kib("VmRSS")
    reset = _reset_peak()  # from here on, VmHWM is the evaluation's own peak
    fact_types = {spec.name: spec.type for spec in router.rules.schema.specs}
    stream = LabelledStream(data, fact_types=fact_types)
    t0 = time.perf_counter()
    ev = evaluate_stream(
        router, islice(stream, limit), n_boot=n_boot, batch_size=batch_size, seed=0
    )
    seconds = time.perf_counter() - t0
    ru_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    hwm_kib = _status_kib("VmHWM")
    peak_kib = hwm_kib if hwm_kib is not None and reset else ru_kib
    return {
        "rows": ev["n"],
        "seconds": seconds,
        "rows_per_s": ev["n"] / seconds if seconds > 0 else None,
        "peak_rss_mib": peak_kib / 1024.0,
        "peak_source": "VmHWM reset after loading the router"
        if peak_kib == hwm_kib
        else "ru_maxrss",
        "rss_after_load_mib": None if loaded_kib is None else loaded_kib / 1024.0,
        "ru_maxrss_mib": ru_kib / 1024.0,
        "accuracy": ev["accuracy"],
        "accuracy_ci": ev["accuracy_ci"],
        "next_step_accuracy": ev["next_step_accuracy"],
        "decisions_by_stage": ev["decisions_by_stage"],
    }


def run(
    sizes: Sequence[int] = (100_000, 1_000_000),
    n_boot: int = 200,
    batch_size: int = 2048,
    seed: int = 0,
    workdir: str | None = None,
) -> dict[str, Any]:
    """Generate the file, save the router, run one child per size; peak RSS per size."""
    try:
        from .bench_router import build_router
    except ImportError:
        from bench_router import build_router  # type: ignore[no-redef]

    sizes = sorted(int(s) for s in sizes)
    out: dict[str, Any] = {"benchmark": "memory", "sizes": sizes, "n_boot": n_boot}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        t0 = time.perf_counter()
        data = write_labelled_file(Path(tmp) / "labelled.jsonl", sizes[-1], seed=seed)
        out["generate_seconds"] = time.perf_counter() - t0
        out["file_mib"] = data.stat().st_size / 2**20
        router, _ = build_router()
        router.save(str(Path(tmp) / "router"))
        runs = []
        for size in sizes:
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                str(Path(tmp) / "router"),
                str(data),
                str(size),
                str(n_boot),
                str(batch_size),
            ]
            env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"memory child for {size} rows failed:\n{proc.stderr[-3000:]}")
            runs.append({"size": size, **json.loads(proc.stdout.strip().splitlines()[-1])})
    out["runs"] = runs
    small, large = runs[0], runs[-1]
    out["rss_ratio"] = large["peak_rss_mib"] / small["peak_rss_mib"]
    out["rss_growth_mib"] = large["peak_rss_mib"] - small["peak_rss_mib"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--child":
        router_dir, data, limit, n_boot, batch = argv[1:6]
        print(json.dumps(_child(router_dir, data, int(limit), int(n_boot), int(batch))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated row counts")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    res = run(sizes, args.n_boot, args.batch_size)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    for r in res["runs"]:
        print(
            f"{r['size']:>10,} rows: peak RSS {r['peak_rss_mib']:7.1f} MiB "
            f"(after loading the router {r['rss_after_load_mib']:.1f} MiB), "
            f"{r['rows_per_s']:,.0f} rows/s, accuracy {r['accuracy']}"
        )
    print(f"peak RSS ratio largest/smallest: {res['rss_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
