"""Adapters: how the runner calls each ``bench_*.py`` and turns its result into rows.

One function per benchmark, registered in :data:`ADAPTERS`. Each calls the script's own
entry function (``run``, ``main``, ``evaluate``...) with the sizes of the current mode and
returns a :class:`~benchmarks._core.BenchResult` whose rows put a measurement next to
what it is compared with.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from types import ModuleType, SimpleNamespace
from typing import Any

from ._core import REPO_ROOT, BenchResult, Context, Row, quiet_stdout


def _langgraph(mod: ModuleType, ctx: Context) -> BenchResult:
    s = ctx.size("langgraph")
    res = mod.run(int(s["n"]), int(s["graph_n"]), int(s.get("repeats", 3)), ctx.seed)
    agree = f"agreement {res['agreement_edge']:.3f}"
    return BenchResult(
        "langgraph",
        raw=res,
        rows=[
            Row(
                "langgraph",
                "langgraph.rule_layer_vs_edge",
                "rule layer (Decision records) vs LangGraph conditional edge",
                res["rule_layer_decisions_per_s"],
                "/s",
                res["langgraph_edge_decisions_per_s"],
                "compiled StateGraph, invoke per item",
                notes=f"per-item calls; {res['n_rule_layer']:,} vs {res['n_graph']:,} items; "
                f"{agree}; langgraph {res['langgraph_version']}",
            ),
            Row(
                "langgraph",
                "langgraph.router_node_vs_edge",
                "router_node(rules) inside LangGraph vs conditional edge",
                res["langgraph_router_node_decisions_per_s"],
                "/s",
                res["langgraph_edge_decisions_per_s"],
                "conditional edge",
                notes=f"the rule layer as a graph node (records in state); agreement "
                f"{res['agreement_router_node']:.3f}",
            ),
        ],
    )


def _support_bench_dataset(mod: ModuleType) -> Any:
    """The bundled support tickets as a ``bench_classifiers.Dataset`` (for --quick)."""
    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")

    def part(split: str) -> Any:
        s = ds.split(split)
        return mod.Split(list(s.texts), [str(v) for v in s.y])

    return mod.Dataset(
        name="support-tickets",
        train=part("train"),
        test=part("test"),
        validation=part("calibration"),
        fingerprint=ds.fingerprint,
    )


#: How long loading a public set (and its fingerprint) may take; a timed test until issue 16.
LOAD_TARGET_S = 2.0


def _load_row(name: str, ctx: Context) -> Row:
    """Loading a public set from the data directory: read, every row validated, fingerprint."""
    from hybridroute.datasets import load_dataset

    t0 = time.perf_counter()
    ds = load_dataset(name, data_dir=ctx.data_dir, download=False)
    _ = ds.fingerprint
    seconds = time.perf_counter() - t0
    return Row(
        "classifiers",
        f"classifiers.{name}.load_s",
        f"{name}: load + fingerprint",
        seconds,
        "s",
        LOAD_TARGET_S,
        "target",
        notes=f"{len(ds):,} rows read and validated from the data directory, then fingerprinted",
    )


def _classifiers(mod: ModuleType, ctx: Context) -> BenchResult:
    s = ctx.size("classifiers")
    datasets = [d.strip() for d in str(s["datasets"]).split(",") if d.strip()]
    public = [d for d in datasets if d != "support-tickets"]
    out = BenchResult("classifiers")
    rows: list[dict[str, Any]] = []
    if "support-tickets" in datasets:
        # Only the local family: other families may need models that are not installed.
        args = SimpleNamespace(
            seed=ctx.seed, latency_texts=int(s["latency_texts"]), repeats=int(s["repeats"])
        )
        dataset = _support_bench_dataset(mod)
        with quiet_stdout():
            rows.append(asdict(mod.FAMILIES["local"](dataset, args)))
    if public:
        if ctx.data_dir is None:
            out.rows.append(
                Row(
                    "classifiers",
                    "classifiers.skipped",
                    f"classifiers on {', '.join(public)}",
                    None,
                    status="skipped",
                    notes="public sets not found: set HYBRIDROUTE_DATA_DIR or --data-dir",
                )
            )
        else:
            out.rows += [_load_row(name, ctx) for name in public]
            argv = ["--json", "--datasets", ",".join(public), "--data-dir", str(ctx.data_dir)]
            argv += ["--latency-texts", str(s["latency_texts"]), "--repeats", str(s["repeats"])]
            if s.get("families"):
                argv += ["--families", str(s["families"])]
            affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    code = mod.main(argv)
            finally:
                if affinity is not None:  # bench_classifiers pins this process to one CPU
                    os.sched_setaffinity(0, affinity)
            if code:
                raise RuntimeError(f"bench_classifiers exited with {code}")
            rows.extend(json.loads(buf.getvalue()))
    out.raw = rows
    left_out = [d for d in ("banking77", "clinc150") if d not in datasets]
    budget_note = (
        f"; {', '.join(left_out)} left out to fit the time budget "
        f"(--set classifiers.datasets=banking77,clinc150)"
        if left_out and public
        else ""
    )
    local = {r["dataset"]: r for r in rows if r["classifier"] == "local"}
    for r in rows:
        base = local.get(r["dataset"]) if r["classifier"] != "local" else None
        tag = f"{r['classifier']} on {r['dataset']}"
        key = f"classifiers.{r['classifier']}.{r['dataset'].split()[0]}"
        blabel = "local" if base else ""
        note = f"train {r['n_train']:,} / test {r['n_test']:,}; fit {r['train_seconds']:.0f} s"
        out.rows += [
            Row(
                "classifiers",
                f"{key}.accuracy",
                f"{tag}: test accuracy",
                r["accuracy"],
                "share",
                base["accuracy"] if base else None,
                blabel,
                notes=f"macro-F1 {r['macro_f1']:.4f}; {note}{budget_note}",
            ),
            Row(
                "classifiers",
                f"{key}.p50_ms",
                f"{tag}: single-text latency p50",
                r["p50_ms"],
                "ms",
                base["p50_ms"] if base else None,
                blabel,
                notes=f"p95 {r['p95_ms']:.3f} ms; one core",
            ),
            Row(
                "classifiers",
                f"{key}.texts_per_s",
                f"{tag}: batch throughput",
                r["texts_per_second"],
                "/s",
                base["texts_per_second"] if base else None,
                blabel,
                notes=(r.get("notes") or "")[:90],
            ),
        ]
    return out


def _support_scores() -> tuple[Any, Any]:
    """Top-label confidence and correctness of a local classifier on support tickets."""
    import numpy as np

    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")
    train, scored = ds.split("train"), ds.split("calibration", "test")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    proba = clf.predict_proba(scored.texts)
    top = proba.argmax(axis=1)
    correct = np.asarray([str(c) for c in clf.classes_])[top] == np.asarray(
        [str(y) for y in scored.y]
    )
    return proba.max(axis=1), correct


def oracle_coverage(
    conf: Any, correct: Any, resplits: int, seed: int, targets: Sequence[float]
) -> dict[str, float]:
    """Mean best-in-hindsight coverage on the test halves of ``bench_calibration``'s resplits.

    The same resplits as ``bench_calibration.evaluate`` (same seed, same draws in the same
    order): on each test half, the lowest threshold whose *test-half* precision meets the
    target -- the most any threshold could have covered there while meeting it.
    """
    import numpy as np

    from hybridroute.calibration import EmpiricalThreshold

    n = len(conf)
    rng = np.random.default_rng(seed)
    cov: dict[float, list[float]] = {t: [] for t in targets}
    for _ in range(resplits):
        perm = rng.permutation(n)
        test = perm[n // 2 :]
        rng.integers(0, n, n // 2)  # the population draw of evaluate(); keeps the sequence
        for t in targets:
            thr = EmpiricalThreshold(t).fit(conf[test], correct[test]).threshold_
            cov[t].append(float(np.mean(conf[test] >= thr)))
    return {f"{t:.2f}": float(np.mean(v)) for t, v in cov.items()}


def _calibration(mod: ModuleType, ctx: Context) -> BenchResult:
    s = ctx.size("calibration")
    resplits = int(s["resplits"])
    full = int(s.get("full_resplits", 200))
    datasets = [d.strip() for d in str(s["datasets"]).split(",") if d.strip()]
    out = BenchResult("calibration", raw={"resplits": resplits, "delta": mod.DELTA})
    reduced = f"{resplits} resplits" + (
        f" (reduced from the script's {full} to fit the time budget)" if resplits < full else ""
    )
    import mapie

    out.raw["mapie_version"] = mapie.__version__
    for name in datasets:
        if name == "support-tickets":
            conf, correct = _support_scores()
        elif ctx.data_dir is None:
            out.rows.append(
                Row(
                    "calibration",
                    f"calibration.{name}.skipped",
                    f"certified thresholds on {name}",
                    None,
                    status="skipped",
                    notes="public sets not found: set HYBRIDROUTE_DATA_DIR or --data-dir",
                )
            )
            continue
        else:
            os.environ.setdefault("HYBRIDROUTE_DATA_DIR", str(ctx.data_dir))
            with quiet_stdout():
                conf, correct = mod.scores(name, ctx.cache_dir / "calibration")
        t0 = time.perf_counter()
        # the runner's rows are today's method against MAPIE's default; the full comparison
        # (every fitter, every MAPIE method) is bench_calibration.py's own run
        res = mod.evaluate(
            conf,
            correct,
            resplits,
            ours={"certified": mod.OURS["certified"]},
            mapie_methods=("mapie",),
        )
        oracle = oracle_coverage(conf, correct, resplits, mod.SEED, mod.TARGETS)
        out.raw[name] = {
            "results": res,
            "oracle_coverage": oracle,
            "rows": len(conf),
            "seconds": time.perf_counter() - t0,
        }
        for t in mod.TARGETS:
            key = f"{t:.2f}"
            row = res[key]
            cert, mp = row["certified"], row["mapie"]
            viol = "; ".join(
                f"{m} {row[m]['violation_rate']:.2f}/{row[m]['population_violation_rate']:.2f}"
                for m in ("certified", "mapie", "empirical", "fixed_0.8")
            )
            base = f"calibration.{name}.p{key[2:]}"
            out.metrics.update(
                {
                    f"{base}.{m}.{k}": row[m][k]
                    for m in ("certified", "mapie", "empirical", "fixed_0.8")
                    for k in ("coverage", "violation_rate", "population_violation_rate")
                }
            )
            out.rows += [
                Row(
                    "calibration",
                    f"{base}.certified_vs_mapie",
                    f"{name}, precision >= {t:.2f}: certified coverage vs MAPIE",
                    cert["coverage"],
                    "share",
                    mp["coverage"],
                    "MAPIE BinaryClassificationController",
                    notes=f"violations resplit/population: {viol}; delta {mod.DELTA}; {reduced}",
                ),
                Row(
                    "calibration",
                    f"{base}.certified_vs_oracle",
                    f"{name}, precision >= {t:.2f}: certified coverage vs oracle",
                    cert["coverage"],
                    "share",
                    oracle[key],
                    "best threshold in hindsight",
                    notes=f"MAPIE / oracle {mp['coverage'] / oracle[key]:.3f}"
                    if oracle[key]
                    else "oracle covers nothing",
                ),
                _matched_row(name, t, base, row["matched"], mp, reduced + _frontier(row)),
            ]
    return out


def _frontier(row: dict) -> str:
    """The matched ratio's range over MAPIE's own delta ladder (bench_calibration)."""
    pts = [p for p in row.get("frontier", []) if p["over_mapie"] is not None]
    if not pts:
        return ""
    lo, hi = min(p["over_mapie"] for p in pts), max(p["over_mapie"] for p in pts)
    deltas = ", ".join(f"{p['mapie_delta']:g}" for p in pts)
    return f"; matched against MAPIE at delta {deltas}: ratio {lo:.3f}-{hi:.3f}"


def _matched_row(name: str, t: float, base: str, m: dict, mp: dict, reduced: str) -> Row:
    """Certified coverage at a violation rate no higher than MAPIE's (bench_calibration)."""
    label = f"{name}, precision >= {t:.2f}: certified vs MAPIE at matched violation rate"
    if m["delta"] is None:
        return Row(
            "calibration",
            f"{base}.matched_vs_mapie",
            label,
            None,
            status="n/a",
            notes="no ladder delta kept the violation rate at or below MAPIE's",
        )
    return Row(
        "calibration",
        f"{base}.matched_vs_mapie",
        label,
        m["coverage"],
        "share",
        mp["coverage"],
        "MAPIE at delta 0.05",
        notes=f"certified at delta {m['delta']:g}: violations {m['violation_rate']:.3f} vs "
        f"MAPIE {m['mapie_violation_rate']:.3f}"
        + (
            f"; ratio {m['over_mapie']:.3f}, 95% interval "
            f"[{m['interval'][0]:.3f}, {m['interval'][1]:.3f}]"
            if m.get("interval") and m.get("over_mapie") is not None
            else ""
        )
        + f"; {reduced}",
    )


def _llm(mod: ModuleType, ctx: Context) -> BenchResult:
    s = ctx.size("llm")
    args = argparse.Namespace(
        n=int(s["n"]),
        labels=20,
        latency=float(s["latency"]),
        concurrency=int(s["concurrency"]),
        fault_rate=0.1,
        model="openai/gpt-4o-mini",
        seed=ctx.seed,
        in_process=False,
        no_faults=not s.get("faults", True),
        cascade_target=0.85,
        cascade_delta=0.05,
    )
    res = mod.run(args)
    res["cascade"] = mod.run_cascade(args)
    f, sec, c = res["first_run"], res["second_run"], res["cascade"]
    rows = [
        Row(
            "llm",
            "llm.labels_per_s_vs_bound",
            "LLM path labels/s vs concurrency / latency",
            f["labels_per_s"],
            "/s",
            res["concurrency_bound_labels_per_s"],
            f"bound: {args.concurrency} / {args.latency:g} s",
            notes=f"stand-in server (not LLM accuracy); {args.n} texts; at most "
            f"{f['server_max_in_flight']} in flight"
            + (
                f"; client CPU {f['client_cpu_ms_per_request']:.1f} ms/request"
                if f.get("client_cpu_ms_per_request") is not None
                else ""
            )
            + (f"; {f['client_cpu_where']}" if f.get("client_cpu_where") else ""),
            goal=0.8,
        ),
        Row(
            "llm",
            "llm.cache_requests_saved",
            "requests saved by the cache (rerun)",
            f["requests"] - sec["requests"],
            "count",
            f["requests"],
            "first-run requests",
            notes=f"rerun made {sec['requests']} requests, {sec['cache_hits']} cache hits",
        ),
        Row(
            "llm",
            "llm.cascade_requests_saved",
            "requests saved by the cascade",
            c["requests_saved"],
            "count",
            c["all_llm_requests"],
            "all texts to the LLM",
            notes=f"threshold {c['threshold']:.3f} fitted by {c['threshold_fitter']}; kept-local "
            f"precision {c['kept_local_precision']:.3f}; {c['n_texts']} support tickets",
        ),
    ]
    if "fault_run" in res:
        x = res["fault_run"]
        rows.append(
            Row(
                "llm",
                "llm.faults_items_settled",
                "fault run: items labelled or abstained",
                x["answered"] + x["abstained"],
                "count",
                x["items"],
                "items",
                notes=f"{x['lost']} lost; {x['labels_per_s']:.0f} labels/s; abstentions "
                f"{x['abstentions_by_reason']}",
            )
        )
    return BenchResult("llm", raw=res, rows=rows)


def _memory_argv(ctx: Context) -> list[str]:
    s = ctx.size("memory")
    return ["--json", "--sizes", str(s["sizes"]), "--n-boot", str(s["n_boot"])]


def start_memory_in_background(ctx: Context) -> None:
    """Start the memory benchmark in its own process (it only measures peak RSS per child)."""
    ctx.background["memory"] = {
        "proc": subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_memory", *_memory_argv(ctx)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
        "started": time.perf_counter(),
    }


def _memory(mod: ModuleType, ctx: Context) -> BenchResult:
    s = ctx.size("memory")
    bg = ctx.background.get("memory")
    if bg is not None:
        stdout, stderr = bg["proc"].communicate()
        if bg["proc"].returncode != 0:
            raise RuntimeError(f"bench_memory failed: {stderr.strip()[-500:]}")
        res = json.loads(stdout)
        how = "ran alongside the other benchmarks (peak RSS is per process)"
    else:
        sizes = [int(x) for x in str(s["sizes"]).split(",")]
        with quiet_stdout():
            res = mod.run(sizes, n_boot=int(s["n_boot"]))
        how = "ran alone"
    small, large = res["runs"][0], res["runs"][-1]
    return BenchResult(
        "memory",
        raw=res,
        rows=[
            Row(
                "memory",
                "memory.peak_rss_largest_vs_smallest",
                f"peak RSS, streamed evaluation of {large['size']:,} vs {small['size']:,} rows",
                large["peak_rss_mib"],
                "MiB",
                small["peak_rss_mib"],
                f"{small['size']:,} rows",
                notes=f"peak RSS of a fresh child during evaluate_stream(router) over a "
                f"{res['file_mib']:.0f} MiB JSONL ({large.get('peak_source', 'ru_maxrss')}; "
                f"{large.get('rss_after_load_mib') or 0:.0f} MiB after loading the router); "
                f"{large['rows_per_s']:,.0f} rows/s; accuracy {large['accuracy']}; "
                f"{res['n_boot']} Poisson-bootstrap replicates; {how}",
            )
        ],
    )


#: bench name -> adapter. A new bench_*.py needs an entry here or its own runner_entry.
ADAPTERS: dict[str, Callable[[ModuleType, Context], BenchResult]] = {
    "langgraph": _langgraph,
    "classifiers": _classifiers,
    "calibration": _calibration,
    "llm": _llm,
    "memory": _memory,
}

#: Run order: fast ones first, so a broken setup shows early.
ORDER = ("rules", "langgraph", "router", "records", "llm", "calibration", "classifiers", "memory")
