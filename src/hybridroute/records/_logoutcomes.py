"""The decision log's review API: outcomes, pending audits and router registrations.

:class:`LogOutcomes` is a base of :class:`~._logbase.LogBase` (both backends): what the log
does with what happened after a decision (:mod:`._outcomes`) and with the vocabularies of
the router versions it logs (:mod:`._vocabulary`), over the backend's hooks ``_query`` and
``_in_transaction``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._outcomes import (
    OutcomeReport,
    Tx,
    add_outcomes,
    check_outcome,
    misplaced_outcomes,
    pending_audits,
    read_outcomes,
)
from ._vocabulary import (
    RouterVocabulary,
    RoutesByModel,
    RoutesByRules,
    read_vocabularies,
    register_vocabulary,
)

__all__ = ["LogOutcomes"]


class LogOutcomes:
    """Outcomes, pending audits and router registrations of a decision log."""

    where: str
    _table = "decisions"
    _outcomes_table = "outcomes"
    _routers_table = "routers"

    if TYPE_CHECKING:  # the backend's hooks (see LogBase)

        def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def _in_transaction(self, work: Any) -> Any: ...

    # ------------------------------------------------------------------ router versions
    def register_router(
        self,
        router: RoutesByModel | RoutesByRules | RouterVocabulary | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        labels: Iterable[str] | None = None,
        oos_label: str | None = None,
        destinations: Iterable[str] | None = None,
    ) -> RouterVocabulary:
        """Record a router version's vocabulary: the labels and next steps its outcomes
        may name (insert-if-absent, in one transaction).

        Parameters
        ----------
        router : HybridRouter, RuleSet or RouterVocabulary, optional
            The router (its name, version, classifier labels, out-of-scope label and every
            destination it may select). Otherwise give the keywords.
        name, version : str
            The router's name and version, as its decisions record them.
        labels : iterable of str
            Its classifier's labels.
        oos_label : str, optional
            Its out-of-scope label.
        destinations : iterable of str
            Every next step it may select.

        Returns
        -------
        RouterVocabulary
            The registered vocabulary (the stored one when the version was registered).

        Raises
        ------
        ArtifactError
            The version is registered with another vocabulary (a router whose labels or
            destinations changed needs a new version), or the log cannot be written.
        UserInputError
            A name that is empty, too long or holds a control character.
        """
        from ._schema import now_iso

        if router is None:
            vocab = RouterVocabulary.of(
                name, version, labels=labels, oos_label=oos_label, destinations=destinations
            )
        elif any(v is not None for v in (name, version, labels, oos_label, destinations)):
            raise TypeError("give a router, or the keywords, not both")
        elif isinstance(router, RouterVocabulary):
            vocab = router
        else:
            vocab = RouterVocabulary.from_router(router)

        def work(tx: Tx) -> RouterVocabulary:
            stored, _ = register_vocabulary(
                tx, self._routers_table, vocab, registered_at=now_iso(), where=self.where
            )
            return stored

        result: RouterVocabulary = self._in_transaction(work)
        return result

    def router_vocabularies(self) -> dict[tuple[str, str], RouterVocabulary]:
        """The registered router versions' vocabularies, by ``(router, router_version)``."""
        return read_vocabularies(self._query, self._routers_table, where=self.where)

    # ------------------------------------------------------------------ outcomes, audits
    def add_outcomes(
        self,
        outcomes: Iterable[Mapping[str, Any]],
        *,
        rows: Sequence[int] | None = None,
        path: str | None = None,
    ) -> OutcomeReport:
        """Attach outcomes to logged decisions: all or nothing, in one transaction.

        Parameters
        ----------
        outcomes : iterable of mapping
            Each ``{"decision_id": ...}`` or ``{"request_id", "router", "router_version"}``,
            with ``gold_intent`` and/or ``gold_next_step``, a ``source`` (one of
            ``human_review``, ``audit``, ``user_feedback``, ``agent_outcome``,
            ``adjudication``) and optionally ``at`` (when it was observed: ISO 8601 with a
            UTC offset, not before the decision was logged; default now). ``None`` values
            count as absent.
        rows : sequence of int, optional
            The row number of each outcome in messages (default 1, 2, ...; a file's
            reader passes its line numbers).
        path : str, optional
            The file they came from, for messages.

        Returns
        -------
        OutcomeReport
            Counts added / already present (an identical outcome: nothing written) and
            the conflicts (another gold for the same decision and source: written too).

        Raises
        ------
        OutcomeError
            A malformed outcome; one naming a decision the log does not hold, a shadow
            decision, or (``audit``) a decision not selected for audit; a gold intent that
            is not a label of the decision's router version, a gold next step that is not
            one of its destinations, or a version whose vocabulary is not registered
            (:meth:`register_router`); an ``at`` before the decision. The message names
            the row and field; nothing is written.
        """
        from ._logbase import new_decision_id
        from ._schema import now_iso

        items = list(outcomes)
        numbers = list(range(1, len(items) + 1)) if rows is None else list(rows)
        if len(numbers) != len(items):
            raise ValueError("rows must give one row number per outcome")
        now = time.time()
        checked = [
            check_outcome(item, row, path=path, now=now)
            for item, row in zip(items, numbers, strict=True)
        ]
        if not checked:
            return OutcomeReport(0, 0)

        def work(tx: Tx) -> OutcomeReport:
            return add_outcomes(
                tx,
                decisions=self._table,
                table=self._outcomes_table,
                routers=self._routers_table,
                outcomes=checked,
                where=path,
                new_id=new_decision_id,
                recorded_at=now_iso(),
            )

        report: OutcomeReport = self._in_transaction(work)
        return report

    def outcomes(self, decision_id: str | None = None) -> list[dict[str, Any]]:
        """The stored outcomes (of ``decision_id`` when given) in the order recorded,
        each with ``outcome_id``, ``decision_id``, ``gold_intent``, ``gold_next_step``,
        ``source``, ``observed_at`` and ``recorded_at``."""
        return read_outcomes(self._query, self._outcomes_table, decision_id)

    def misplaced_outcomes(self, *, router_version: str | None = None) -> dict[str, int]:
        """Stored outcomes this log would refuse today by the decision they name (written
        by an older version): ``{"shadow", "audit_not_audited"}`` counts, of one router
        version's decisions when given. The monitor, recalibration and the promotion gate
        never read them."""
        return misplaced_outcomes(
            self._query,
            decisions=self._table,
            table=self._outcomes_table,
            router_version=router_version,
        )

    def pending_audits(
        self, *, router_version: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Audited decisions that have no outcome of source ``audit`` (or
        ``adjudication``) yet, oldest first.

        Each is ``{"decision_id", "request_id", "router", "router_version", "logged_at",
        "audit_p", "selected_destination", "label", "text"}`` (``text``: the snapshot's
        text as stored, redacted and scrubbed).
        """
        if limit is not None and (isinstance(limit, bool) or int(limit) < 1):
            raise ValueError("limit must be at least 1")
        return pending_audits(
            self._query,
            decisions=self._table,
            table=self._outcomes_table,
            router_version=router_version,
            limit=limit,
            loads=json.loads,
        )
