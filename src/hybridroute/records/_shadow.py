"""Live against shadow: how often a shadow router version decides otherwise.

A shadow version routes the same requests as the live one (after the live answer is
sent) and its decisions are logged with the role ``shadow`` under the same request id.
A request that came without a request id is shadowed under the live decision's
``decision_id`` (what the service does), and pairs through it. For each request logged by
both a live and a shadow version, :func:`shadow_disagreement` compares destination, stage and reason code, and breaks the disagreements down by the
live decision's stage and reason code, per (live version, shadow version) pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._logbase import LogBase

__all__ = ["ShadowComparison", "ShadowReport", "shadow_disagreement"]

#: What is compared between a live and a shadow decision of one request.
ASPECTS = ("destination", "stage", "reason_code")
_READ = ("item_id", "router", "router_version", "stage", "selected_destination", "reason_code")


def _frozen(table: dict[str, dict[str, int]]) -> Mapping[str, Mapping[str, int]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in sorted(table.items())})


@dataclass(frozen=True, slots=True)
class ShadowComparison:
    """One shadow version against the live version it shadowed.

    Attributes
    ----------
    live_router, live_version, shadow_router, shadow_version : str
    n : int
        Request ids logged by both.
    disagree : mapping
        ``destination`` / ``stage`` / ``reason_code`` -> how many of the ``n`` differ.
    by_stage, by_reason_code : mapping
        The live decision's stage (reason code) -> ``{"n", "destination", "stage",
        "reason_code"}``: pairs, and disagreements on each aspect.
    """

    live_router: str
    live_version: str
    shadow_router: str
    shadow_version: str
    n: int
    disagree: Mapping[str, int]
    by_stage: Mapping[str, Mapping[str, int]]
    by_reason_code: Mapping[str, Mapping[str, int]]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        n = self.n
        return {
            "live": {"router": self.live_router, "version": self.live_version},
            "shadow": {"router": self.shadow_router, "version": self.shadow_version},
            "n": n,
            "agree": {a: n - self.disagree[a] for a in ASPECTS},
            "disagree": dict(self.disagree),
            "disagreement_rate": {a: (self.disagree[a] / n if n else 0.0) for a in ASPECTS},
            "by_stage": {k: dict(v) for k, v in self.by_stage.items()},
            "by_reason_code": {k: dict(v) for k, v in self.by_reason_code.items()},
        }


@dataclass(frozen=True, slots=True)
class ShadowReport:
    """Live-vs-shadow disagreement over a decision log (:func:`shadow_disagreement`).

    Attributes
    ----------
    comparisons : tuple of ShadowComparison
        One per (live version, shadow version) pair, ordered by versions.
    unpaired : int
        Shadow decisions with a request id that no live decision has.
    without_request_id : int
        Shadow decisions logged without a request id (they cannot be paired).
    filters : mapping
        The ``live_version`` / ``shadow_version`` the report was limited to (``None``: all).
    """

    comparisons: tuple[ShadowComparison, ...] = ()
    unpaired: int = 0
    without_request_id: int = 0
    filters: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (what ``GET /v1/shadow`` and ``--json`` show)."""
        return {
            "live_version": self.filters.get("live_version"),
            "shadow_version": self.filters.get("shadow_version"),
            "comparisons": [c.to_dict() for c in self.comparisons],
            "unpaired_shadow_decisions": self.unpaired,
            "shadow_decisions_without_request_id": self.without_request_id,
        }

    def summary_lines(self) -> list[str]:
        """A few lines for the terminal."""
        lines: list[str] = []
        for c in self.comparisons:
            rate = c.disagree["destination"] / c.n if c.n else 0.0
            lines.append(
                f"shadow {c.shadow_router} {c.shadow_version} vs live {c.live_router} "
                f"{c.live_version}: {c.n} request(s) in both; destination differs on "
                f"{c.disagree['destination']} ({rate:.2%}), stage on {c.disagree['stage']}, "
                f"reason code on {c.disagree['reason_code']}"
            )
            for title, table in (("stage", c.by_stage), ("reason", c.by_reason_code)):
                for key, row in table.items():
                    lines.append(
                        f"  live {title} {key}: n={row['n']} destination {row['destination']}, "
                        f"stage {row['stage']}, reason code {row['reason_code']} differ"
                    )
        if not self.comparisons:
            lines.append("shadow decisions: none paired with a live decision")
        if self.unpaired or self.without_request_id:
            lines.append(
                f"  shadow decisions not compared: {self.unpaired} without a live decision, "
                f"{self.without_request_id} without a request id"
            )
        return lines


def _bump(table: dict[str, dict[str, int]], key: str, differs: dict[str, bool]) -> None:
    row = table.setdefault(key, {"n": 0, **dict.fromkeys(ASPECTS, 0)})
    row["n"] += 1
    for aspect, d in differs.items():
        row[aspect] += d


def shadow_disagreement(
    log: LogBase, *, live_version: str | None = None, shadow_version: str | None = None
) -> ShadowReport:
    """Compare live and shadow decisions logged for the same request ids.

    Parameters
    ----------
    log : DecisionLog or PostgresLog
        An open decision log (:func:`~hybridroute.records.open_log`).
    live_version, shadow_version : str, optional
        Only this live / shadow router version.

    Returns
    -------
    ShadowReport
        Per (live version, shadow version): the number of request ids in both, and how
        many differ in destination, stage and reason code, overall and by the live
        decision's stage and reason code.
    """
    live: dict[str, list[tuple[Any, ...]]] = {}
    by_decision_id: dict[str, tuple[Any, ...]] = {}
    for row in log._columns((*_READ, "decision_id"), router_version=live_version, role="live"):
        if row[1] is not None:
            live.setdefault(row[1], []).append(row[2:7])
        if row[7] is not None:
            by_decision_id[row[7]] = row[2:7]
    tallies: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    unpaired = with_id = 0
    for row in log._columns(_READ, router_version=shadow_version, role="shadow", with_id=True):
        _, item_id, router, version, stage, dest, reason = row
        with_id += 1
        matches = [r for r in live.get(item_id, ()) if (r[0], r[1]) != (router, version)]
        if not matches and item_id in by_decision_id:
            # a request that came without a request id: the service logs its shadow
            # decisions under the live decision's id
            matches = [by_decision_id[item_id]]
        if not matches:
            unpaired += 1
        for l_router, l_version, l_stage, l_dest, l_reason in matches:
            key = (l_router, l_version, router, version)
            t = tallies.setdefault(
                key, {"n": 0, "disagree": dict.fromkeys(ASPECTS, 0), "stage": {}, "reason": {}}
            )
            differs = {
                "destination": dest != l_dest,
                "stage": stage != l_stage,
                "reason_code": reason != l_reason,
            }
            t["n"] += 1
            for aspect, d in differs.items():
                t["disagree"][aspect] += d
            _bump(t["stage"], str(l_stage), differs)
            _bump(t["reason"], str(l_reason), differs)
    without_id = max(0, log.count(router_version=shadow_version, role="shadow") - with_id)
    comparisons = tuple(
        ShadowComparison(
            live_router=k[0],
            live_version=k[1],
            shadow_router=k[2],
            shadow_version=k[3],
            n=t["n"],
            disagree=MappingProxyType(t["disagree"]),
            by_stage=_frozen(t["stage"]),
            by_reason_code=_frozen(t["reason"]),
        )
        for k, t in sorted(tallies.items())
    )
    return ShadowReport(
        comparisons=comparisons,
        unpaired=unpaired,
        without_request_id=without_id,
        filters=MappingProxyType({"live_version": live_version, "shadow_version": shadow_version}),
    )
