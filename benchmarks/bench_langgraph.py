"""Rule layer vs a LangGraph conditional edge: the same routing, decisions per second.

    python benchmarks/bench_langgraph.py [--n 20000] [--graph-n 2000] [--json]

Three ways to route the same seeded fact sets (``bench_rules.fact_sets``, every guard of
the example rules fires) with the example rules (``support_rules.yaml``):

* ``rule_layer`` -- ``RuleSet.decide(facts)`` per item: facts validated against the
  schema, first match wins, a full :class:`~hybridroute.contracts.Decision` record with
  its snapshot hash;
* ``langgraph_edge`` -- a compiled LangGraph ``StateGraph`` whose conditional edge out of
  ``START`` is a plain-Python function implementing the same rule order over the state's
  facts (no validation, no record: only the destination), with one no-op node per
  destination; the compiled graph is invoked once per item;
* ``langgraph_router_node`` -- the same graph shape with hybridroute's
  :func:`~hybridroute.router.router_node` as the routing node (the rule layer inside
  LangGraph, decision record in the state).

Every destination is checked against the rule layer's (``agreement`` must be 1.0). Timings
are the best of ``--repeats``; the machine may be shared, so compare the ratio.
"""

from __future__ import annotations

import argparse
import json
import operator
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypedDict

from hybridroute.rules import load_rules

try:  # as part of the benchmarks package (python -m benchmarks)
    from .bench_rules import RULES, fact_sets
except ImportError:  # as a script: benchmarks/ is on sys.path
    from bench_rules import RULES, fact_sets  # type: ignore[no-redef]

# The example rules' parameters (support_rules.yaml); the agreement check below proves the
# plain-Python edge routes exactly as the rule layer does.
_RETRYABLE = frozenset({"retryable"})
_RETRY_BUDGET = 1
_AMOUNT_LIMIT = 500
_SENSITIVE = frozenset({"delete_account_data", "change_bank_details", "override_fraud_hold"})
_MAX_STEPS = 12
_MAX_REPEATS = 2
_DESTINATIONS = ("reject", "retry_tool", "fail", "human_review", "answer", "ask_user")


def _oscillates(history: Sequence[str]) -> bool:
    """A cycle of 2..4 routes (not all one route) repeated more than twice in a row."""
    n = len(history)
    for length in range(2, 5):
        if length * (_MAX_REPEATS + 1) > n:
            break
        for start in range(n - length * (_MAX_REPEATS + 1) + 1):
            cycle = history[start : start + length]
            if len(set(cycle)) < 2:
                continue
            repeats, pos = 1, start + length
            while pos + length <= n and history[pos : pos + length] == cycle:
                repeats += 1
                pos += length
            if repeats > _MAX_REPEATS:
                return True
    return False


def route_edge(state: Mapping[str, Any]) -> str:
    """The example rules in plain Python, in the same order: first match wins."""
    f = state["facts"]
    if f.get("has_permission", True) is not True:
        return "reject"
    kind = f.get("tool_error_kind")
    if kind is not None:
        if kind in _RETRYABLE:
            return "retry_tool" if (f.get("attempts") or 0) < _RETRY_BUDGET else "fail"
        return "fail"
    amount = f.get("amount", 0)
    if (amount is not None and amount > _AMOUNT_LIMIT) or f.get("action", "") in _SENSITIVE:
        return "human_review"
    step = f.get("step", 0)
    if step is not None and step > _MAX_STEPS:
        return "fail"
    history = list(f.get("route_history") or ())
    if history and _oscillates(history):
        return "fail"
    if f.get("evidence_complete", False) is True:
        return "answer"
    if f.get("missing_user_fields"):
        return "ask_user"
    return "human_review"  # the declared default


class _EdgeState(TypedDict, total=False):
    facts: dict[str, Any]
    route: str


class _NodeState(TypedDict, total=False):
    facts: dict[str, Any]
    route: str
    route_decisions: Annotated[list, operator.add]


def _leaf(name: str) -> Any:
    def node(state: Mapping[str, Any]) -> dict[str, str]:
        return {"route": name}

    node.__name__ = f"node_{name}"
    return node


def build_edge_graph() -> Any:
    """START --(plain-Python conditional edge)--> one node per destination --> END."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(_EdgeState)
    for d in _DESTINATIONS:
        g.add_node(d, _leaf(d))
        g.add_edge(d, END)
    g.add_conditional_edges(START, route_edge, list(_DESTINATIONS))
    return g.compile()


def build_node_graph(rules: Any) -> Any:
    """START -> router_node(rules) --Command(goto)--> one node per destination --> END."""
    from langgraph.graph import END, START, StateGraph

    from hybridroute.router import router_node

    g = StateGraph(_NodeState)
    g.add_node("route", router_node(rules, list(_DESTINATIONS)), destinations=tuple(_DESTINATIONS))
    for d in _DESTINATIONS:
        g.add_node(d, _leaf(d))
        g.add_edge(d, END)
    g.add_edge(START, "route")
    return g.compile()


def _best(fn: Any, repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run(n: int = 20_000, graph_n: int = 2_000, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """Decisions per second of the three ways; ``graph_n`` items go through the graphs."""
    rules = load_rules(RULES)
    facts = fact_sets(max(n, graph_n), seed=seed)
    rule_facts = facts[:n]
    graph_facts = facts[:graph_n]
    edge = build_edge_graph()
    node = build_node_graph(rules)
    # warm-up (lazy imports, compiled channels)
    for f in graph_facts[:20]:
        rules.decide(f)
        edge.invoke({"facts": f})
        node.invoke({"facts": f})

    decide = rules.decide
    t_rules, decisions = _best(lambda: [decide(f) for f in rule_facts], repeats)
    t_edge, edge_routes = _best(
        lambda: [edge.invoke({"facts": f})["route"] for f in graph_facts], repeats
    )
    t_node, node_routes = _best(
        lambda: [node.invoke({"facts": f})["route"] for f in graph_facts], repeats
    )
    wanted = [d.selected_destination for d in decisions[:graph_n]]
    if len(wanted) < graph_n:  # graph_n > n: decide the rest once, untimed
        wanted += [rules.decide(f).selected_destination for f in graph_facts[len(wanted) :]]
    agree_edge = sum(a == b for a, b in zip(wanted, edge_routes, strict=True)) / graph_n
    agree_node = sum(a == b for a, b in zip(wanted, node_routes, strict=True)) / graph_n
    import langgraph

    rules_rate = n / t_rules
    edge_rate = graph_n / t_edge
    node_rate = graph_n / t_node
    return {
        "benchmark": "langgraph",
        "langgraph_version": getattr(langgraph, "__version__", None) or _version("langgraph"),
        "n_rule_layer": n,
        "n_graph": graph_n,
        "repeats": repeats,
        "rule_layer_decisions_per_s": rules_rate,
        "langgraph_edge_decisions_per_s": edge_rate,
        "langgraph_router_node_decisions_per_s": node_rate,
        "rule_layer_over_edge": rules_rate / edge_rate,
        "router_node_over_edge": node_rate / edge_rate,
        "agreement_edge": agree_edge,
        "agreement_router_node": agree_node,
    }


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="items through the rule layer")
    ap.add_argument("--graph-n", type=int, default=2_000, help="items through each graph")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.n, args.graph_n, args.repeats, args.seed)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"rule layer (full Decision records): {res['rule_layer_decisions_per_s']:,.0f} decisions/s"
    )
    print(
        f"LangGraph conditional edge:         {res['langgraph_edge_decisions_per_s']:,.0f} "
        f"decisions/s  (agreement {res['agreement_edge']:.3f})"
    )
    print(
        f"hybridroute router_node in LangGraph: {res['langgraph_router_node_decisions_per_s']:,.0f} "
        f"decisions/s  (agreement {res['agreement_router_node']:.3f})"
    )
    print(f"rule layer / LangGraph edge: {res['rule_layer_over_edge']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
