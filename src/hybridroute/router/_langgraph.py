"""LangGraph adapter: a router (or a bare rule set) as a routing node of a ``StateGraph``.

The node reads the facts and text from the graph state, decides, and returns
``Command(goto=<node>, update={"route_decisions": [<decision record>]})``. The graph's
node names are the allowed destinations: :func:`router_node` checks, when the graph is
built, that every destination the router can select has a node, so a route can never
point nowhere.

Because the retry budget is read from the ``attempts`` fact in the state, a graph resumed
from a checkpoint sees the attempts already made and cannot earn an extra retry.

The record put into the state is redacted like a decision-log row (graph state is often
checkpointed to a store): credentials are always replaced, declared sensitive facts are
salted hashes when a :class:`~hybridroute.records.Redactor` with them is passed, and the
record's ``snapshot_hash`` is then the hash of the redacted snapshot, as in the log, so
the same input with the same salt hashes the same in the graph and in the log.

Needs the ``langgraph`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._redact import Redactor
from ..exceptions import RuleSetError
from ..rules import RuleSet
from ._router import HybridRouter

__all__ = ["reachable_destinations", "router_node"]


def reachable_destinations(router: HybridRouter | RuleSet) -> tuple[str, ...]:
    """Every destination ``router`` can select (rules, default exit, model and policy exits)."""
    rules = router.rules if isinstance(router, HybridRouter) else router
    out: list[str] = []
    for rule in rules.rules:
        out.extend(rule.destinations)
    out.append(rules.default)
    if isinstance(router, HybridRouter):
        out.extend(router.model_destinations)
    return tuple(dict.fromkeys(out))


def router_node(
    router: HybridRouter | RuleSet,
    nodes: Sequence[str] | Mapping[str, str],
    *,
    facts_key: str = "facts",
    text_key: str = "text",
    decisions_key: str = "route_decisions",
    redactor: Redactor | None = None,
) -> Callable[[Mapping[str, Any]], Any]:
    """A LangGraph node function that routes the state and jumps to the chosen node.

    Parameters
    ----------
    router : HybridRouter or RuleSet
        What decides. A bare :class:`RuleSet` routes on facts alone.
    nodes : sequence of node names, or mapping destination -> node name
        The graph's nodes. With a sequence, each destination goes to the node of the same
        name; a mapping can send destinations elsewhere (e.g. ``{"fail": END}``).
    facts_key, text_key : str
        State keys holding the facts (a mapping) and the text.
    decisions_key : str
        State key the decision record is appended to (declare it with a list reducer,
        e.g. ``Annotated[list, operator.add]``).
    redactor : Redactor, optional
        How the record is redacted before it goes into the state (default: credentials
        only, no sensitive facts). Pass the one your decision log uses
        (``Redactor(sensitive_fields, salt)``) to hash the same facts.

    Raises
    ------
    RuleSetError
        When a destination the router can select has no node.
    """
    from langgraph.types import Command

    if isinstance(nodes, Mapping):
        targets = {str(k): str(v) for k, v in nodes.items()}
    else:
        targets = {str(n): str(n) for n in nodes}
    missing = [d for d in reachable_destinations(router) if d not in targets]
    if missing:
        raise RuleSetError(
            "destinations with no graph node: "
            + ", ".join(missing)
            + " (add the nodes, or map them, e.g. {'fail': END})"
        )
    scrubber = redactor if redactor is not None else Redactor()

    def route(state: Mapping[str, Any]) -> Any:
        facts = state.get(facts_key) or {}
        if isinstance(router, HybridRouter):
            decision = router.route(facts, state.get(text_key))
        else:
            decision = router.decide(facts)
        return Command(
            goto=targets[decision.selected_destination],
            update={decisions_key: [scrubber.apply_decision(decision)]},
        )

    route.__name__ = f"route_with_{getattr(router, 'name', 'router')}".replace("-", "_")
    return route
