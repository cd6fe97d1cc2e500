"""``HybridRouter``: rules, then the classifier, then the fitted policy, then evidence.

One decision, step by step -- each step passes a frozen value to the next, none is filled
in later:

1. the request (a :class:`~hybridroute.contracts.RouteRequest`, or a mapping made into
   one) is checked: the facts validated against the rule set's schema (a bad fact is the
   caller's mistake: :class:`~hybridroute.exceptions.FactsError`), the text and the
   evidence checked, the input snapshot and its hash made (:meth:`HybridRouter.check`
   does this step alone and returns the :class:`~hybridroute.router.CheckedRequest`,
   which routing then takes as it is);
2. the rules run first; the first that fires decides (``stage="rule"``). Rules read
   facts only, so nothing in the text can get past them;
3. otherwise the classifier ranks the closed label set. A classifier failure or
   abstention becomes a ``fallback`` decision with its reason code (``strict=True``
   raises instead). A caught exception is kept in the decision's detail
   (``detail["error"]``: its type and a one-line message of at most
   :data:`MAX_ERROR_CHARS` characters, no traceback), and every fallback names its
   ``detail["cause"]`` -- the reason code, with the exception's type when there was one
   (``classifier_error (TypeError)``) -- which evaluation, drift and the demo count. Each
   router logs each new cause once (the module's :mod:`logging` logger, ``WARNING`` for
   an exception, ``INFO`` for an abstention the classifier reported), so a bug in a
   custom classifier does not pass for ordinary human-review traffic;
4. the fitted policy turns the ranking into auto-route (``stage="model"``), ask the user,
   human review or out of scope (``stage="policy"``);
5. an auto-routed item that came with evidence is answered only if the evidence is
   complete under the policy's per-source thresholds.

With ``redact_pii`` set, personal data in the text (emails, payment cards, IBANs, phone
numbers: :class:`hybridroute._pii.PIIRedaction`) is replaced by tokens (``[EMAIL]``...)
right after the text is checked and before anything else sees it: the classifier, the
input snapshot and its hash, the decision log and replay all see the same redacted text
(redaction is idempotent, so a replayed record keeps its snapshot hash). Rules read facts
only and never see the text either way.

The text is checked where it enters (:meth:`HybridRouter.route`,
:meth:`~HybridRouter.route_many`, their async twins, :meth:`~HybridRouter.check` and
:meth:`~HybridRouter.replay`): a string of at most :data:`MAX_TEXT_CHARS` characters, valid Unicode (no lone surrogates, which is what
undecodable command-line bytes become) and without NUL characters. Anything else is the
caller's mistake: :class:`~hybridroute.exceptions.InputError` naming the field ``text``.

The model's answer can only ever select one of ``allowed_destinations``: the intent
destinations the label map declares plus the policy's ask-user / human-review exits.
Every decision records the classifier's full ranking (raw scores), so a logged decision
can be replayed through another policy without the classifier (:meth:`HybridRouter.replay`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .._pii import PIIRedaction
from .._ranking import complete_ranking
from .._redact import scrub_text
from ..classifiers import IntentClassifier, RankedLabels
from ..contracts import Decision, ReasonCode, RouteRequest, Stage
from ..exceptions import ClassifierError, RuleSetError, UndeclaredValueError
from ..rules import RuleSet
from ._request import CheckedRequest, RouteItem, as_request, check_item, check_request

if TYPE_CHECKING:
    from ..calibration import Policy, PolicyOutcome

__all__ = ["MAX_ERROR_CHARS", "MAX_TEXT_CHARS", "HybridRouter", "RouteItem"]

logger = logging.getLogger(__name__)

#: Longest text (in characters) the router accepts. Far beyond any ticket or agent turn
#: (~25,000 tokens), short enough that no text can make one classifier call (an LLM
#: prompt, a TF-IDF transform) unbounded. Override per router with ``max_text_chars``.
MAX_TEXT_CHARS = 100_000

#: Longest exception message kept in a fallback decision's ``detail["error"]`` (and in its
#: log line): enough to tell one bug from another, too short to carry a document.
MAX_ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class _Scored:
    """One classifier answer: a full score row over the label set, or an abstention."""

    row: np.ndarray | None = None
    labels: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    abstain_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    error: dict[str, str] | None = None  # a caught exception: {"type", "message"[, "in"]}
    #: the column of the label the classifier named first (None: the row's best column)
    top: int | None = None


_MODEL = Stage.MODEL.value
_POLICY = Stage.POLICY.value
_FALLBACK = Stage.FALLBACK.value

#: What the batch entry points take: a request, a request this router checked, or a
#: mapping with ``facts``, ``text`` and ``evidence`` (the form taken before RouteRequest).
Routable = RouteRequest | CheckedRequest | RouteItem


class HybridRouter:
    """Rules -> classifier -> fitted policy -> evidence check -> :class:`Decision`.

    Parameters
    ----------
    rules : RuleSet
        Run first; the first rule that fires decides. The rule set's default exit is used
        only when there is no text to classify.
    classifier : IntentClassifier
        A fitted classifier over the label set.
    policy : hybridroute.calibration.Policy
        The fitted thresholds (never literals); its ``classes`` must equal the
        classifier's ``classes_``.
    destinations : mapping, optional
        Intent label -> destination. By default each label that is a declared intent
        destination of the rule set maps to itself. Every label except the out-of-scope
        label must map to a declared destination.
    name, version : str
        Written into every decision.
    oos_label : str, optional
        The label that means out of scope (default: the one the policy recorded).
    oos_destination : str
        Where out-of-scope items go (``human_review`` unless declared otherwise).
    fallback_destination : str
        Where classifier failures and abstentions go.
    strict : bool
        Raise classifier failures instead of returning fallback decisions.
    redact_pii : PIIRedaction, bool, str or sequence of str, optional
        Redact personal data from each text before it is classified, stored or hashed:
        ``True`` or ``"all"`` for every kind, a list of kinds (``email``, ``iban``,
        ``card``, ``phone``) or a :class:`~hybridroute._pii.PIIRedaction`. ``None`` (the
        default): texts are used and stored as given. Kept as the ``redact_pii``
        attribute (a ``PIIRedaction`` or ``None``) and written into the router's bundle.

    Attributes
    ----------
    max_text_chars : int
        Longest text accepted (default :data:`MAX_TEXT_CHARS`); a class attribute that an
        instance may override.
    """

    max_text_chars: int = MAX_TEXT_CHARS

    def __init__(
        self,
        *,
        rules: RuleSet,
        classifier: IntentClassifier,
        policy: Policy,
        destinations: Mapping[str, str] | None = None,
        name: str = "router",
        version: str = "0",
        oos_label: str | None = None,
        oos_destination: str = "human_review",
        fallback_destination: str = "human_review",
        strict: bool = False,
        redact_pii: PIIRedaction | bool | str | Sequence[str] | None = None,
    ) -> None:
        self.rules = rules
        self.classifier = classifier
        self.policy = policy
        self.name = str(name)
        self.version = str(version)
        self.strict = bool(strict)
        self.redact_pii = PIIRedaction.coerce(redact_pii)
        self._logged_causes: set[str] = set()  # fallback causes this router has logged
        classes = tuple(str(c) for c in getattr(classifier, "classes_", ()))
        if not classes:
            raise RuleSetError("the router's classifier is not fitted (it has no classes_)")
        if tuple(policy.classes) != classes:
            raise RuleSetError(
                "the policy was fitted for another label set than the classifier's "
                f"({len(policy.classes)} vs {len(classes)} labels)"
            )
        from ._bundle import check_model_binding  # _bundle imports this module

        # a policy and a classifier that both carry a model fingerprint must agree (one
        # fitted in memory without one pairs with any classifier of its label set)
        check_model_binding(policy, classifier)
        self.classes = classes
        self._index = {c: i for i, c in enumerate(classes)}
        if oos_label is None:
            oos_label = (policy.calibration_data or {}).get("out_of_scope_label")
        self.oos_label = oos_label
        vocab = rules.vocabulary
        mapping: dict[str, str] = {}
        given = dict(destinations or {})
        unknown = set(given) - set(classes)
        if unknown:
            raise RuleSetError(
                f"destination map names labels the classifier does not have: {sorted(unknown)}"
            )
        for label in classes:
            if label == oos_label:
                continue
            dest = given.get(label, label)
            try:
                vocab.check_destination(dest)
            except UndeclaredValueError:
                raise RuleSetError(
                    f"label {label!r} maps to {dest!r}, which is not a declared destination "
                    "(declare it under 'destinations' in the rules file, or map the label)"
                ) from None
            mapping[label] = dest
        for exit_ in (oos_destination, fallback_destination):
            vocab.check_destination(exit_)
        self.destinations = mapping
        self.oos_destination = oos_destination
        self.fallback_destination = fallback_destination
        fallbacks = ("ask_user", "human_review", oos_destination, fallback_destination, "answer")
        self.model_destinations: tuple[str, ...] = tuple(
            dict.fromkeys([*sorted(set(mapping.values())), *fallbacks])
        )

    # ------------------------------------------------------------------ routing
    def route(
        self,
        facts: Mapping[str, Any] | RouteRequest | CheckedRequest | None,
        text: str | None = None,
        *,
        evidence: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Route one item.

        Parameters
        ----------
        facts : mapping, RouteRequest, CheckedRequest or None
            The item's structured facts, checked against the rule set's schema (defaults
            filled in); ``None`` is no facts. Or the whole item: a
            :class:`~hybridroute.contracts.RouteRequest` (then ``text`` and ``evidence``
            are not given), or what :meth:`check` returned for one.
        text : str or None, default None
            The text to classify when no rule fires. ``None`` or a blank text leaves the
            item to the rules: the rule set's default exit decides if none fires. At most
            :attr:`max_text_chars` characters, valid Unicode, no NUL.
        evidence : mapping or None, default None
            ``{"required_points": [...], "items": [...]}`` (items as
            :class:`~hybridroute.calibration.EvidenceItem` or mappings). When the policy
            has evidence thresholds, an item the policy auto-routes goes to ``answer``
            (reason ``evidence_complete``) instead of its label's destination if the
            evidence covers every required point. Recorded in the snapshot.

        Returns
        -------
        Decision
            Of stage ``rule``, ``model``, ``policy`` or ``fallback``. A classifier that
            raises or abstains gives a ``fallback`` decision (its exception's type and
            message in ``detail["error"]``), unless the router is ``strict``.

        Raises
        ------
        FactsError
            If the facts break the schema, a rule cannot be evaluated, or ``evidence`` is
            malformed.
        InputError
            If ``text`` is not a string, too long, or holds NUL or a lone surrogate.
        ClassifierError
            With ``strict=True``, when the classifier abstains (its own exceptions then
            propagate unchanged).
        TypeError
            A request given with ``text`` or ``evidence`` beside it.
        """
        return self.route_many([_one(facts, text, evidence)])[0]

    def route_many(self, items: Iterable[Routable]) -> list[Decision]:
        """Route a batch: rules per item, one classifier call for the items that need it.

        Parameters
        ----------
        items : iterable of RouteRequest, CheckedRequest or mapping
            :class:`~hybridroute.contracts.RouteRequest` values; values :meth:`check`
            returned (not checked again when this router checked them); or mappings with
            ``facts``, ``text`` and ``evidence`` (other keys ignored), made into requests.
            Every item is checked before any is classified: one refused item refuses the
            batch.

        Returns
        -------
        list of Decision
            In the order of ``items``.

        Raises
        ------
        FactsError, InputError, ClassifierError
            As :meth:`route` raises.
        TypeError
            An item of another type.
        """
        # a plain item a rule decides comes back as its decision (nothing else is kept)
        checked = [self._checked_or_ruled(item) for item in items]
        pending = [c for c in checked if not isinstance(c, Decision) and c.rule_decision is None]
        if not pending:
            return [_ruled(c) for c in checked]
        return _merge(checked, self._decide(pending, self._score([_text(c) for c in pending])))

    def check(self, request: RouteRequest | RouteItem) -> CheckedRequest:
        """Check one request as routing would, without classifying it.

        The facts are validated against the rule set's schema, the rules are run on them
        (a rule that cannot be evaluated on these facts refuses the request here, as it
        would in routing), the text is checked (and PII-redacted when this router
        redacts) and the evidence made plain. Nothing is classified, logged or counted.

        Parameters
        ----------
        request : RouteRequest or mapping
            The request (a mapping with ``facts``, ``text`` and ``evidence`` is made into
            one; other keys are ignored).

        Returns
        -------
        CheckedRequest
            The checked value: its input snapshot and hash, the text the classifier would
            see, and the rules' decision when a rule fires (``rule_decision``). Pass it to
            :meth:`route_many` (or :meth:`route`) to route it without checking it again.

        Raises
        ------
        FactsError, InputError
            Exactly as :meth:`route` raises for the same request.
        TypeError
            ``request`` is neither a request nor a mapping.
        """
        return check_request(self, as_request(request))

    def _checked_or_ruled(self, item: Routable) -> CheckedRequest | Decision:
        if isinstance(item, CheckedRequest):
            return self._checked(item)
        return check_item(self, item)

    def _checked(self, item: Routable) -> CheckedRequest:
        if isinstance(item, CheckedRequest):
            if item.router is self:
                return item
            item = item.request  # checked by another router: its rules and limits
        return check_request(self, as_request(item))

    async def aroute(
        self,
        facts: Mapping[str, Any] | None,
        text: str | None = None,
        *,
        evidence: Mapping[str, Any] | None = None,
    ) -> Decision:
        """Async :meth:`route` (the classifier runs off the event loop, or natively async).

        A classifier with an ``arank`` coroutine is awaited on the caller's loop; any other
        runs in a worker thread.

        Parameters
        ----------
        facts : mapping, RouteRequest, CheckedRequest or None
            The item's structured facts, or the whole item (see :meth:`route`).
        text : str or None, default None
            The text to classify when no rule fires (see :meth:`route`).
        evidence : mapping or None, default None
            ``{"required_points": [...], "items": [...]}`` (see :meth:`route`).

        Returns
        -------
        Decision
            As :meth:`route` returns, with the same fallbacks.

        Raises
        ------
        FactsError, InputError, ClassifierError
            As :meth:`route` raises.
        """
        return (await self.aroute_many([_one(facts, text, evidence)]))[0]

    async def aroute_many(self, items: Iterable[Routable]) -> list[Decision]:
        """Async :meth:`route_many` (the same items, the same answers)."""
        checked = [self._checked(item) for item in items]
        pending = [c for c in checked if c.rule_decision is None]
        if not pending:
            return [_ruled(c) for c in checked]
        texts = [_text(c) for c in pending]
        arank = getattr(self.classifier, "arank", None)
        if arank is not None:
            try:
                ranked = await arank(texts, k=len(self.classes))
            except Exception as exc:
                if self.strict:
                    raise
                scored = _failed(exc, len(texts))
            else:
                scored = [self._from_ranking(r) for r in ranked]
        else:
            scored = await asyncio.to_thread(self._score, texts)
        return _merge(checked, self._decide(pending, scored))

    # ------------------------------------------------------------------ replay
    def replay(self, record: Mapping[str, Any], *, rescore: bool = False) -> Decision:
        """Re-decide a logged record with this router.

        The logged input snapshot (facts and text) goes through this router's rules; if no
        rule fires, the classifier's recorded ranking is put through this router's policy
        (pure policy replay) -- or, with ``rescore=True`` or when the record has no
        ranking, the classifier scores the text again.
        """
        snap = record.get("input_snapshot") or {}
        checked = self.check(
            {"facts": snap.get("facts"), "text": snap.get("text"), "evidence": snap.get("evidence")}
        )
        if checked.rule_decision is not None:
            return checked.rule_decision
        ranked = None if rescore else _recorded_ranking(record)
        scored = self._score([_text(checked)]) if ranked is None else [self._from_ranking(ranked)]
        return self._decide([checked], scored)[0]

    # ------------------------------------------------------------------ internals
    def _score(self, texts: Sequence[str]) -> list[_Scored]:
        """Scores over the label set for each text (or an abstention with its reason)."""
        clf = self.classifier
        try:
            if type(clf).rank is IntentClassifier.rank:
                # A classifier that cannot abstain: its probabilities are its whole answer.
                proba = np.asarray(clf.predict_proba(texts), dtype=float)
                if proba.shape != (len(texts), len(self.classes)):
                    raise ClassifierError(
                        f"classifier returned scores of shape {proba.shape} for {len(texts)} texts"
                    )
                labels = self.classes
                return [
                    _Scored(row=row, labels=labels, scores=tuple(row.tolist())) for row in proba
                ]
            ranked = clf.rank(texts, k=len(self.classes))
            if len(ranked) != len(texts):
                raise ClassifierError(
                    f"classifier returned {len(ranked)} rankings for {len(texts)} texts"
                )
        except Exception as exc:
            if self.strict:
                raise
            return _failed(exc, len(texts))
        return [self._from_ranking(r) for r in ranked]

    def _from_ranking(self, ranked: RankedLabels) -> _Scored:
        """A full score row from a (possibly partial) ranking.

        Labels the classifier did not rank share the probability mass it left over equally
        (an LLM that names one label with confidence 0.9 leaves 0.1 to the others): the
        one rule of :func:`hybridroute._ranking.complete_ranking`, which the policy uses too.
        """
        if ranked.abstained or not ranked.labels:
            return _Scored(
                abstain_reason=ranked.abstain_reason or ReasonCode.CLASSIFIER_ERROR.value,
                usage=dict(ranked.usage or {}),
            )
        index = self._index
        columns = []
        for label in ranked.labels:
            j = index.get(label)
            if j is None:
                return _Scored(
                    abstain_reason=ReasonCode.INVALID_LABEL.value,
                    usage=dict(ranked.usage or {}),
                    labels=tuple(ranked.labels),
                    scores=tuple(ranked.scores),
                )
            columns.append(j)
        row = complete_ranking(columns, ranked.scores, len(self.classes))
        if row.sum() <= 0:
            return _Scored(
                abstain_reason=ReasonCode.CLASSIFIER_ERROR.value, usage=dict(ranked.usage or {})
            )
        return _Scored(
            row=row,
            labels=tuple(ranked.labels),
            scores=tuple(float(x) for x in ranked.scores),
            usage=dict(ranked.usage or {}),
            # the best label the classifier gave (a ranking's first; a recorded full row,
            # in class order, its highest score): never one it did not name
            top=index[ranked.labels[_first_max(ranked.scores)]],
        )

    def _fallback(self, checked: CheckedRequest, reason: str, detail: dict[str, Any]) -> Decision:
        return Decision(
            router=self.name,
            router_version=self.version,
            stage=_FALLBACK,
            input_snapshot=checked.snapshot,
            snapshot_hash=checked.snapshot_hash,
            allowed_destinations=self.model_destinations,
            selected_destination=self.fallback_destination,
            reason_code=reason,
            detail=detail,
        )

    def _decide(
        self, checked: Sequence[CheckedRequest], scored: Sequence[_Scored]
    ) -> list[Decision]:
        """The decision on each checked item (no rule fired) from its scores, through the
        policy and the evidence check."""
        ok: list[int] = []
        ok_rows: list[np.ndarray] = []
        tops: list[int] = []
        for i, sc in enumerate(scored):
            if sc.row is not None:
                ok.append(i)
                ok_rows.append(sc.row)
                # the label the classifier named first: a row completed from a partial
                # ranking may give an unranked label more mass, and that label was never said
                tops.append(int(sc.row.argmax()) if sc.top is None else sc.top)
        outcomes: dict[int, PolicyOutcome] = {}
        if ok:
            try:
                rows = ok_rows[0][None, :] if len(ok_rows) == 1 else np.vstack(ok_rows)
                for i, o in zip(ok, self.policy.apply_proba(rows, top=tops), strict=True):
                    outcomes[i] = o
            except (ValueError, UndeclaredValueError) as exc:
                if self.strict:
                    raise
                error = {**_error_detail(exc), "in": "policy"}
                failed = ReasonCode.CLASSIFIER_ERROR.value
                scored = list(scored)
                for i in ok:
                    scored[i] = replace(scored[i], abstain_reason=failed, error=error, row=None)
        decisions: list[Decision] = []
        for i, (item, sc) in enumerate(zip(checked, scored, strict=True)):
            if sc.row is None or i not in outcomes:
                if self.strict:
                    raise ClassifierError(f"classifier abstained: {sc.abstain_reason}")
                reason = sc.abstain_reason or ReasonCode.CLASSIFIER_ERROR.value
                detail: dict[str, Any] = {"classifier": {"labels": sc.labels, "scores": sc.scores}}
                if sc.usage:
                    detail["usage"] = sc.usage
                if sc.error:
                    detail["error"] = dict(sc.error)
                detail["cause"] = _cause(reason, sc.error)
                self._log_cause(detail["cause"], reason, sc.error)
                decisions.append(self._fallback(item, reason, detail))
            else:
                decisions.append(self._from_outcome(item, sc, outcomes[i]))
        return decisions

    def _log_cause(self, cause: str, reason: str, error: Mapping[str, str] | None) -> None:
        """Log a fallback cause the first time this router meets it (never again after)."""
        if cause in self._logged_causes:
            return
        self._logged_causes.add(cause)
        where = f"router {self.name!r} (version {self.version})"
        then = (
            f"its items go to {self.fallback_destination!r} as fallbacks with cause {cause!r} "
            "(logged once per router and cause)"
        )
        if error is None:
            logger.info("%s: the classifier gave no usable ranking (%s); %s", where, reason, then)
            return
        source = "the policy" if error.get("in") == "policy" else "the classifier"
        # a message may quote the item; credentials in it go no further than this line
        message = scrub_text(error["message"])
        logger.warning("%s: %s raised %s: %s; %s", where, source, error["type"], message, then)

    def _from_outcome(
        self, checked: CheckedRequest, sc: _Scored, outcome: PolicyOutcome
    ) -> Decision:
        detail: dict[str, Any] = {
            # labels and scores are tuples of str / float: a read-only view needs no copy
            "classifier": MappingProxyType({"labels": sc.labels, "scores": sc.scores}),
            "policy_action": outcome.action,
            "threshold_name": outcome.threshold_name,
        }
        if outcome.oos_score is not None:
            detail["oos_score"] = outcome.oos_score
        if sc.usage:
            detail["usage"] = sc.usage
        stage, reason = _POLICY, outcome.reason_code
        evidence_ids: tuple[str, ...] = ()
        action = outcome.action
        if action == "auto_route" and outcome.label == self.oos_label:
            action = "out_of_scope"
        if action == "out_of_scope":
            destination, reason = self.oos_destination, ReasonCode.OUT_OF_SCOPE.value
        elif action in ("ask_user", "human_review"):
            destination = action
        else:
            stage, destination = _MODEL, self.destinations[str(outcome.label)]
            evidence = checked.snapshot.get("evidence")
            if evidence is not None and self.policy.evidence_thresholds:
                result = self.policy.check_evidence(
                    evidence.get("required_points", ()), evidence.get("items", ())
                )
                detail["evidence"] = {
                    "required_points": list(result.required_points),
                    "covered_points": list(result.covered_points),
                    "missing_points": list(result.missing_points),
                }
                if result.evidence_complete:
                    stage, destination = _POLICY, "answer"
                    reason = ReasonCode.EVIDENCE_COMPLETE.value
                    evidence_ids = tuple(result.evidence_ids)
        return Decision(
            router=self.name,
            router_version=self.version,
            stage=stage,
            input_snapshot=checked.snapshot,
            snapshot_hash=checked.snapshot_hash,
            allowed_destinations=self.model_destinations,
            selected_destination=destination,
            reason_code=reason,
            evidence_ids=evidence_ids,
            label=outcome.label,
            confidence=outcome.confidence,
            threshold=_threshold_value(outcome.threshold),
            margin=outcome.margin,
            detail=detail,
        )

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Any:
        """Write this router as a bundle directory (see :func:`save_router`)."""
        from ._bundle import save_router

        return save_router(self, path, overwrite=overwrite)

    def with_policy(self, policy: Policy, *, version: str) -> HybridRouter:
        """This router with another policy, as version ``version`` (a new router).

        The rules, classifier, destination map, exits and PII redaction are shared; the
        policy must fit the same classifier (label set and model binding are checked as at
        construction).
        """
        return type(self)(
            rules=self.rules,
            classifier=self.classifier,
            policy=policy,
            destinations=self.destinations,
            name=self.name,
            version=version,
            oos_label=self.oos_label,
            oos_destination=self.oos_destination,
            fallback_destination=self.fallback_destination,
            strict=self.strict,
            redact_pii=self.redact_pii,
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        strict: bool = False,
        redact_pii: PIIRedaction | bool | str | Sequence[str] | None = None,
    ) -> HybridRouter:
        """Load a router bundle: :func:`hybridroute.router.load_router`.

        Parameters
        ----------
        path, strict, redact_pii
            As for :func:`~hybridroute.router.load_router` (the bundle directory; raise
            classifier failures instead of falling back; personal data to redact besides
            what the bundle records), which also says what is checked and what is raised.
        """
        from ._bundle import load_router

        return load_router(path, strict=strict, redact_pii=redact_pii)

    def __repr__(self) -> str:
        return f"HybridRouter(name={self.name!r}, version={self.version!r}, labels={len(self.classes)})"


def _threshold_value(thr: Any) -> float | None:
    # None / inf: the threshold lets nothing through (an uncertified policy).
    if isinstance(thr, (int, float)) and math.isfinite(thr):
        return float(thr)
    return None


def _failure_code(exc: BaseException) -> str:
    code = getattr(exc, "reason_code", None)
    return str(code) if code else ReasonCode.CLASSIFIER_ERROR.value


def _error_detail(exc: BaseException) -> dict[str, str]:
    """An exception as a fallback keeps it: its type and a bounded one-line message."""
    message = " ".join(str(exc).split())
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 1] + "…"
    return {"type": type(exc).__name__, "message": message}


def _failed(exc: BaseException, n: int) -> list[_Scored]:
    """``n`` abstentions for one caught classifier exception (its reason code and detail)."""
    error = _error_detail(exc)
    return [_Scored(abstain_reason=_failure_code(exc), error=error) for _ in range(n)]


def _first_max(scores: Sequence[float]) -> int:
    """Index of the first highest score."""
    best = 0
    for i in range(1, len(scores)):
        if scores[i] > scores[best]:
            best = i
    return best


def _cause(reason: str, error: Mapping[str, str] | None) -> str:
    """What a fallback is counted under: its reason code, with the exception's type."""
    if error is None:
        return reason
    where = "policy: " if error.get("in") == "policy" else ""
    return f"{reason} ({where}{error['type']})"


def _recorded_ranking(record: Mapping[str, Any]) -> RankedLabels | None:
    ranking = (record.get("detail") or {}).get("classifier")
    if not ranking or not ranking.get("labels"):
        return None
    return RankedLabels(
        labels=tuple(ranking["labels"]), scores=tuple(float(s) for s in ranking["scores"])
    )


def _one(
    facts: Mapping[str, Any] | RouteRequest | CheckedRequest | None,
    text: str | None,
    evidence: Mapping[str, Any] | None,
) -> Routable:
    """The one item of :meth:`HybridRouter.route`: a request, or one made of its parts."""
    if isinstance(facts, (RouteRequest, CheckedRequest)):
        if text is not None or evidence is not None:
            raise TypeError("a RouteRequest holds its own text and evidence; pass them in it")
        return facts
    return {"facts": facts, "text": text, "evidence": evidence}


def _text(checked: CheckedRequest) -> str:
    """The text of an item no rule decided (one without text is decided by the rules)."""
    text = checked.text
    if text is None:  # pragma: no cover - the rules' default exit decides such an item
        raise AssertionError("an item without text reached the classifier")
    return text


def _ruled(checked: CheckedRequest | Decision) -> Decision:
    if isinstance(checked, Decision):
        return checked
    decision = checked.rule_decision
    if decision is None:  # pragma: no cover - only called when every item was ruled
        raise AssertionError("an item no rule decided has no decision")
    return decision


def _merge(
    checked: Sequence[CheckedRequest | Decision], decided: Sequence[Decision]
) -> list[Decision]:
    """The rules' decisions (an item's own, or its checked value's), with the
    classifier's in the places no rule decided."""
    rest = iter(decided)
    out: list[Decision] = []
    for c in checked:
        if isinstance(c, Decision):
            out.append(c)
        elif c.rule_decision is not None:
            out.append(c.rule_decision)
        else:
            out.append(next(rest))
    return out
