"""Router throughput and overhead.

    python benchmarks/bench_router.py [--n 50000] [--json]

Prints
* rule-stage decisions per second **with logging** (full Decision records written to a
  SQLite decision log in batches) -- target (issue 6): >= 20,000/s;
* the router's overhead over the bare local classifier on single tickets: the median time
  of ``router.route(facts, text)`` for tickets that reach the model, against the median
  of ``classifier.predict_proba([text])`` on the same texts -- target: <= 10%.

Both figures come from the same process run. Timings are medians of repeated runs; the
machine may be shared, so compare ratios rather than absolute numbers across machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from hybridroute.calibration import fit_policy
from hybridroute.classifiers import LocalClassifier
from hybridroute.datasets import load_dataset
from hybridroute.records import DecisionLog
from hybridroute.router import HybridRouter
from hybridroute.rules import load_rules

RULES = (
    Path(__file__).resolve().parent.parent
    / "src"
    / "hybridroute"
    / "examples"
    / "support_rules.yaml"
)


def build_router() -> tuple[HybridRouter, object]:
    ds = load_dataset("support-tickets")
    train, cal = ds.split("train"), ds.split("calibration")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    policy = fit_policy(
        clf.predict_proba(cal.texts),
        cal.y,
        list(clf.classes_),
        objective="precision",
        target=0.85,
        delta=0.1,
        oos_label=ds.oos_label,
    )
    return HybridRouter(
        rules=load_rules(RULES), classifier=clf, policy=policy, name="bench", version="1"
    ), ds


def rule_stage_with_logging(router: HybridRouter, n: int, batch: int = 1000) -> dict:
    rng = np.random.default_rng(0)
    facts = []
    for i in range(n):
        kind = i % 4
        f = {"step": int(rng.integers(0, 5))}
        if kind == 0:
            f["has_permission"] = False
        elif kind == 1:
            f["amount"] = float(rng.integers(501, 5000))
        elif kind == 2:
            f["tool_error_kind"] = "retryable"
            f["attempts"] = int(rng.integers(0, 3))
        else:
            f["missing_user_fields"] = ["order_number"]
        facts.append({"facts": f, "text": f"ticket {i}: please help with my order"})
    with tempfile.TemporaryDirectory() as tmp:
        best = float("inf")
        parts = (0.0, 0.0)
        clock = time.perf_counter
        for rep in range(3):
            path = Path(tmp) / f"log{rep}.sqlite"
            routing = 0.0  # the rule stage's share of the run (the rest is the log's)
            t0 = clock()
            with DecisionLog(path, batch_size=batch) as log:
                for start in range(0, n, batch):
                    part = facts[start : start + batch]
                    t1 = clock()
                    decided = router.route_many(part)
                    routing += clock() - t1
                    log.extend(decided)
            seconds = clock() - t0
            if seconds < best:
                best, parts = seconds, (routing, seconds - routing)
            with DecisionLog(path) as log:
                assert log.count() == n
    return {
        "n": n,
        "batch_size": batch,
        "seconds": round(best, 4),
        "decisions_per_s": round(n / best, 1),
        # per decision in the best run: routing (rules, snapshot, hash, Decision) and
        # logging (redaction, JSON, row, SQLite inserts and commits)
        "route_us": round(parts[0] / n * 1e6, 2),
        "log_us": round(parts[1] / n * 1e6, 2),
    }


def overhead(router: HybridRouter, ds, n_texts: int = 300, repeats: int = 5) -> dict:
    test = ds.split("test")
    texts = [t for t in test.texts][:n_texts]
    clf = router.classifier
    for t in texts[:20]:  # warm-up
        clf.predict_proba([t])
        router.route({}, t)
    bare, routed = [], []
    each = []  # each repeat's ratio of medians: their spread is the row's noise
    for _ in range(repeats):
        start = len(bare)
        for t in texts:
            t0 = time.perf_counter()
            clf.predict_proba([t])
            t1 = time.perf_counter()
            router.route({}, t)
            t2 = time.perf_counter()
            bare.append(t1 - t0)
            routed.append(t2 - t1)
        each.append(statistics.median(routed[start:]) / statistics.median(bare[start:]))
    b, r = statistics.median(bare), statistics.median(routed)
    return {
        "texts": len(texts),
        "classifier_p50_ms": round(b * 1e3, 4),
        "router_p50_ms": round(r * 1e3, 4),
        "overhead": round(r / b - 1.0, 4),
        "ratio_each": [round(x, 4) for x in each],
    }


def run(n: int) -> dict:
    router, ds = build_router()
    return {
        "benchmark": "router",
        "rule_stage_with_logging": rule_stage_with_logging(router, n),
        "overhead_over_classifier": overhead(router, ds),
    }


#: Issue 27's goal: rule-stage decisions written to the log at >= 20,000/s.
LOGGED_TARGET = 20_000


def runner_entry(quick: bool, settings: dict) -> dict:
    """Rows for ``python -m benchmarks``: logged rule-stage decisions, router overhead."""
    from ._core import spread

    res = run(int(settings.get("n", 1_000 if quick else 10_000)))
    r, o = res["rule_stage_with_logging"], res["overhead_over_classifier"]
    rows = [
        {
            "key": "router.rule_stage_logged_per_s",
            "measure": "rule-stage decisions written to the log",
            "value": r["decisions_per_s"],
            "unit": "/s",
            "baseline": LOGGED_TARGET,
            "baseline_label": "target (issue 27)",
            "goal": 1.0,
            "notes": f"n={r['n']:,}, batches of {r['batch_size']}; per decision: rule stage "
            f"{r['route_us']} us, log (redact, JSON, SQLite insert+commit) {r['log_us']} us",
        },
        {
            "key": "router.p50_vs_classifier",
            "measure": "router.route p50 vs bare classifier p50",
            "value": o["router_p50_ms"],
            "unit": "ms",
            "baseline": o["classifier_p50_ms"],
            "baseline_label": "predict_proba([text])",
            "goal": 1.1,
            "goal_op": "<=",
            "noise": spread(o["ratio_each"]),
            "notes": f"overhead {o['overhead']:+.1%}; {o['texts']} texts, alternating calls; "
            f"ratio per repeat {min(o['ratio_each']):.3f}-{max(o['ratio_each']):.3f}",
        },
    ]
    return {"rows": rows, "raw": res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = run(args.n)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    r = res["rule_stage_with_logging"]
    o = res["overhead_over_classifier"]
    print(
        f"rule-stage decisions with logging: {r['decisions_per_s']:,.0f}/s "
        f"(n={r['n']:,}, batches of {r['batch_size']}; target >= 20,000/s); per decision "
        f"{r['route_us']} us routing + {r['log_us']} us logging"
    )
    print(
        f"router overhead over the bare local classifier: {o['overhead']:+.1%} "
        f"(router p50 {o['router_p50_ms']:.3f} ms vs classifier p50 {o['classifier_p50_ms']:.3f} ms; target <= 10%)"
    )


if __name__ == "__main__":
    main()
