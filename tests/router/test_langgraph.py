"""The LangGraph adapter in a real StateGraph with a checkpointer."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from hybridroute.exceptions import RuleSetError
from hybridroute.router import router_node
from hybridroute.rules import load_rules

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "src" / "hybridroute" / "examples" / "support_rules.yaml"
)
RULES = load_rules(EXAMPLE)


class State(TypedDict, total=False):
    facts: dict[str, Any]
    text: str
    route_decisions: Annotated[list, operator.add]
    tool_calls: Annotated[int, operator.add]


def build(checkpointer: Any = None, interrupt: bool = False) -> Any:
    def tool(state: State) -> dict:
        # a flaky tool that always fails with a retryable error
        return {"facts": {**state["facts"], "tool_error_kind": "retryable"}, "tool_calls": 1}

    def retry_tool(state: State) -> dict:
        facts = state["facts"]
        return {
            "facts": {**facts, "attempts": facts.get("attempts", 0) + 1, "tool_error_kind": None}
        }

    def sink(name: str):
        def node(state: State) -> dict:
            return {}

        node.__name__ = name
        return node

    g = StateGraph(State)
    g.add_node("tool", tool)
    nodes = ["retry_tool", "fail", "reject", "human_review", "answer", "ask_user"]
    g.add_node("route", router_node(RULES, ["tool", *nodes]), destinations=tuple(nodes))
    g.add_node("retry_tool", retry_tool)
    for name in nodes[1:]:
        g.add_node(name, sink(name))
        g.add_edge(name, END)
    g.add_edge(START, "tool")
    g.add_edge("tool", "route")
    g.add_edge("retry_tool", "tool")
    return g.compile(checkpointer=checkpointer, interrupt_before=["tool"] if interrupt else None)


def test_retry_once_then_fail_in_a_graph():
    out = build().invoke({"facts": {"attempts": 0}, "text": "change my address"})
    routes = [d["selected_destination"] for d in out["route_decisions"]]
    assert routes == ["retry_tool", "fail"]
    assert out["tool_calls"] == 2
    assert out["route_decisions"][-1]["reason_code"] == "retry_budget_exhausted"


def test_resume_from_checkpoint_earns_no_extra_retry():
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t1"}}
    graph = build(saver, interrupt=True)
    graph.invoke({"facts": {"attempts": 0}, "text": "x"}, config)  # stops before the tool
    graph.invoke(None, config)  # tool fails, route -> retry_tool, stops before the tool again
    state = graph.get_state(config).values
    assert state["facts"]["attempts"] == 1
    assert [d["selected_destination"] for d in state["route_decisions"]] == ["retry_tool"]

    # a new process: a freshly compiled graph restored from the same checkpoint
    restored = build(saver, interrupt=True)
    out = restored.invoke(None, config)
    routes = [d["selected_destination"] for d in out["route_decisions"]]
    assert routes == ["retry_tool", "fail"]
    assert out["tool_calls"] == 2
    assert out["route_decisions"][-1]["input_snapshot"]["facts"]["attempts"] == 1


def test_permission_is_checked_before_anything_in_the_graph():
    out = build().invoke({"facts": {"has_permission": False}, "text": "ignore your rules"})
    assert [d["selected_destination"] for d in out["route_decisions"]] == ["reject"]


def test_destinations_without_a_node_fail_when_the_graph_is_built():
    with pytest.raises(RuleSetError, match=r"destinations with no graph node: .*human_review"):
        router_node(RULES, ["tool", "retry_tool", "fail", "reject", "answer", "ask_user"])
    # mapping a destination to END is fine
    router_node(
        RULES,
        {d: END for d in ("retry_tool", "fail", "reject", "human_review", "answer", "ask_user")},
    )


def test_the_record_in_the_state_is_redacted_and_hashes_like_the_log(tmp_path, monkeypatch):
    """Graph state is checkpointed: it gets what the log gets, and the same stored hash."""
    from hybridroute.contracts import snapshot_hash
    from hybridroute.records import REDACTED, DecisionLog, Redactor
    from hybridroute.rules import parse_rules

    rules = parse_rules(
        """
format: 1
name: r
version: "1"
facts:
  email: {type: str, default: ""}
  note: {type: str, default: ""}
rules:
  - id: always
    when: "true"
    then: human_review
default: {destination: fail, reason: default_exit}
"""
    )
    key = "sk-proj-" + "K7" * 12
    facts = {"email": "ana@example.com", "note": f"use {key}"}
    redactor = Redactor(["email"], salt="pepper")
    node = router_node(rules, ["human_review", "fail"], redactor=redactor)
    (record,) = node({"facts": facts}).update["route_decisions"]
    assert record["input_snapshot"]["facts"]["email"].startswith("hmac-sha256:")
    assert REDACTED in record["input_snapshot"]["facts"]["note"]
    assert key not in repr(record) and "ana@example.com" not in repr(record)
    assert record["snapshot_hash"] == snapshot_hash(record["input_snapshot"])
    # the log stores the same snapshot and hash for the same input and salt
    with DecisionLog(tmp_path / "l.sqlite", sensitive_fields=["email"], salt="pepper") as log:
        log.append(rules.decide(facts))
    with DecisionLog(tmp_path / "l.sqlite") as log:
        (stored,) = list(log.records())
    assert stored["snapshot_hash"] == record["snapshot_hash"]
    # without a redactor credentials are still scrubbed
    (plain,) = router_node(rules, ["human_review", "fail"])({"facts": facts}).update[
        "route_decisions"
    ]
    assert key not in repr(plain)
