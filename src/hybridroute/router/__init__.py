"""The hybrid router: rules -> classifier -> fitted policy -> evidence -> Decision.

* :class:`HybridRouter` -- routes one item, a batch, or (async) either; replays logged
  records; checks a :class:`~hybridroute.contracts.RouteRequest` without routing it
  (:meth:`HybridRouter.check`, which returns a :class:`CheckedRequest`).
* :func:`save_router` / :func:`load_router` -- router bundles (rules file, classifier,
  policy, label map, checksummed manifest).
* :func:`router_node` -- a LangGraph routing node (needs the ``langgraph`` extra).
"""

from __future__ import annotations

from typing import Any

from ._bundle import load_router, save_router
from ._request import CheckedRequest
from ._router import HybridRouter

__all__ = ["CheckedRequest", "HybridRouter", "load_router", "router_node", "save_router"]


def __getattr__(name: str) -> Any:
    if name == "router_node":
        from ._langgraph import router_node

        globals()["router_node"] = router_node
        return router_node
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
