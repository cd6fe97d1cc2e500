"""Rule-layer throughput: full rule-stage Decision records (with snapshot hashes) per second.

    python benchmarks/bench_rules.py [--n 200000] [--json]

Target (issue 2): >= 100,000 decisions/s on one core. The fact sets are drawn (seeded)
so that every guard of the example rules fires; facts are validated against the schema
for every decision, as in production.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from hybridroute.rules import load_rules

RULES = (
    Path(__file__).resolve().parent.parent
    / "src"
    / "hybridroute"
    / "examples"
    / "support_rules.yaml"
)


def fact_sets(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    kinds = [None] * 8 + ["retryable", "auth_failed"]
    out = []
    for _ in range(n):
        out.append(
            {
                "has_permission": rng.random() > 0.05,
                "tool_error_kind": rng.choice(kinds),
                "attempts": rng.randint(0, 2),
                "amount": round(rng.uniform(0, 800), 2),
                "action": rng.choice(["", "issue_refund", "lookup_order", "change_bank_details"]),
                "evidence_complete": rng.random() < 0.2,
                "missing_user_fields": rng.choice([[], [], ["email"], ["order_number", "email"]]),
                "route_history": rng.choice([[], ["refund_request"], ["a", "b"] * 3]),
                "step": rng.randint(0, 14),
            }
        )
    return out


def run(n: int, repeats: int = 3) -> dict:
    rules = load_rules(RULES)
    facts = fact_sets(n)
    rules.decide_many(facts[:1000])  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        decisions = rules.decide_many(facts)
        best = min(best, time.perf_counter() - t0)
    by_reason: dict[str, int] = {}
    for d in decisions:
        by_reason[d.reason_code] = by_reason.get(d.reason_code, 0) + 1
    return {
        "benchmark": "rules",
        "n": n,
        "decisions_per_s": n / best,
        "us_per_decision": best / n * 1e6,
        "by_reason_code": dict(sorted(by_reason.items())),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = run(args.n)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(
        f"rule layer: {res['decisions_per_s']:,.0f} decisions/s "
        f"({res['us_per_decision']:.2f} us each, n={res['n']:,}, full Decision + snapshot hash)"
    )
    print("decisions by reason code:", res["by_reason_code"])


if __name__ == "__main__":
    main()
