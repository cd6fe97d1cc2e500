"""The first step of a decision: a route request checked, and decided by the rules if one fires.

:meth:`HybridRouter.check <hybridroute.router.HybridRouter.check>` turns a
:class:`~hybridroute.contracts.RouteRequest` into a :class:`CheckedRequest`: the facts
validated against the rule set's schema (defaults filled in, canonical and read-only), the
text checked (and PII-redacted when the router redacts), the evidence made plain, the
input snapshot and its hash, and the rules run on the facts -- the decision of the rule
that fires, or of the default exit when there is no text to classify. The value is frozen
and passed forward: the classifier, the policy and the evidence check read it and make the
:class:`~hybridroute.contracts.Decision`; nothing fills it in later.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._canonical import _freeze, hash_canonical
from .._safeio import check_text
from ..contracts import Decision, RouteRequest, rule_decision
from ..exceptions import FactsError, InputError

if TYPE_CHECKING:
    from ._router import HybridRouter

__all__ = ["CheckedRequest", "RouteItem", "as_request", "check_request"]

#: A route item as the router took it before :class:`RouteRequest`: a mapping with
#: ``facts``, ``text`` and ``evidence`` (each optional; other keys are ignored).
RouteItem = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedRequest:
    """A route request checked by one router: what :meth:`HybridRouter.check` returns.

    Routing it (:meth:`HybridRouter.route_many`) goes straight on to the classifier: the
    checks, the snapshot and its hash, and the rules are not run again. A value checked
    by another router (another version included) is checked again by the one that routes
    it.

    Attributes
    ----------
    request : RouteRequest
        The request as it was given.
    snapshot : mapping
        The read-only input snapshot every decision on it records: the validated facts,
        the text (redacted when the router redacts personal data) and the plain evidence.
    snapshot_hash : str
        The SHA-256 of the snapshot's canonical JSON.
    text : str or None
        The text the classifier is given (redacted as in the snapshot).
    rule_decision : Decision or None
        The rules' decision -- the first rule that fires, or the default exit when there
        is no text to classify -- or ``None``: the classifier and the policy decide.
    router : HybridRouter
        The router that checked it (not compared, not shown).
    """

    request: RouteRequest
    snapshot: Mapping[str, Any]
    snapshot_hash: str
    text: str | None
    rule_decision: Decision | None
    router: HybridRouter = field(repr=False, compare=False)

    @property
    def facts(self) -> Mapping[str, Any]:
        """The validated facts (read-only, declared order, defaults filled in)."""
        facts: Mapping[str, Any] = self.snapshot["facts"]
        return facts


def as_request(item: RouteRequest | RouteItem) -> RouteRequest:
    """``item`` as a :class:`RouteRequest` (a mapping: its ``facts``, ``text`` and
    ``evidence``; other keys, request ids included, are ignored as they always were)."""
    if isinstance(item, RouteRequest):
        return item
    if not isinstance(item, Mapping):
        raise TypeError(
            "a route item is a RouteRequest or a mapping with 'facts' and 'text', got "
            f"{type(item).__name__}"
        )
    facts = item.get("facts")
    return RouteRequest(
        text=item.get("text"),
        facts=MappingProxyType({}) if facts is None else facts,
        evidence=item.get("evidence"),
    )


def check_request(router: HybridRouter, request: RouteRequest) -> CheckedRequest:
    """Check ``request`` with ``router`` and run its rules (see :meth:`HybridRouter.check`)."""
    snapshot, digest, text, decision = _check(router, request.facts, request.text, request.evidence)
    return CheckedRequest(
        request=request,
        snapshot=snapshot,
        snapshot_hash=digest,
        text=text,
        rule_decision=decision,
        router=router,
    )


def check_item(router: HybridRouter, item: Any) -> Decision | CheckedRequest:
    """``check_request(router, as_request(item))`` for :meth:`HybridRouter.route_many`,
    which keeps only the rules' decision of an item a rule decides: for a plain dict item
    (facts a dict or absent, text a string or absent, no evidence: every check of
    :class:`RouteRequest` passes) that decision itself, without the request and checked
    values it would throw away; any other item as :func:`check_request` checks it.
    """
    if type(item) is dict:
        facts = item.get("facts")
        text = item.get("text")
        if (
            (facts is None or type(facts) is dict)
            and (text is None or type(text) is str)
            and item.get("evidence") is None
        ):
            snapshot, digest, checked_text, decision = _check(
                router, _NO_FACTS if facts is None else facts, text, None
            )
            if decision is not None:
                return decision
            return CheckedRequest(
                request=as_request(item),
                snapshot=snapshot,
                snapshot_hash=digest,
                text=checked_text,
                rule_decision=None,
                router=router,
            )
    return check_request(router, as_request(item))


_NO_FACTS: Mapping[str, Any] = MappingProxyType({})


def _check(
    router: HybridRouter,
    facts: Mapping[str, Any],
    text: str | None,
    evidence: Mapping[str, Any] | None,
) -> tuple[Mapping[str, Any], str, str | None, Decision | None]:
    """The snapshot, its hash, the classifier's text and the rules' decision (or
    ``None``) of a request's parts, checked in the order :func:`check_request` checks."""
    rules = router.rules
    valid = rules.validate_facts(facts)
    if text is not None:
        check_route_text(text, router.max_text_chars)
        if router.redact_pii is not None:
            # before the snapshot, its hash and the classifier: all see the same text
            text = router.redact_pii.redact(text)
    snapshot: Mapping[str, Any]
    if evidence is None:
        # validated facts are canonical: write the snapshot's JSON straight from the schema
        text_json = "" if text is None else ',"text":' + json.encoder.encode_basestring(text)
        canon = '{"facts":' + rules.schema.canonical_json(valid) + text_json + "}"
        digest = hashlib.sha256(canon.encode("utf-8")).hexdigest()
        # validated facts are canonical and frozen already: a read-only view suffices
        plain: dict[str, Any] = {"facts": MappingProxyType(valid)}
        if text is not None:
            plain["text"] = text
        snapshot = MappingProxyType(plain)
    else:
        plain = {"facts": valid}
        if text is not None:
            plain["text"] = text
        plain["evidence"] = plain_evidence(evidence)
        digest = hash_canonical(plain)
        snapshot = _freeze(plain)
    found = rules.match(valid)
    if found is None and (text is None or not text.strip()):
        found = rules.evaluate(valid)  # nothing to classify: the rules' default exit
    decision = None
    if found is not None:
        decision = rule_decision(
            router.name,
            router.version,
            snapshot,
            digest,
            found.destination,
            found.reason_code,
            found.rule_id,
            found.detail,
        )
    return snapshot, digest, text, decision


def check_route_text(text: Any, limit: int) -> None:
    """Refuse a text that is not a string, too long, not valid Unicode, or holds NUL."""
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}")
    if len(text) > limit:
        raise InputError(f"text is {len(text):,} characters long (the limit is {limit:,})")
    # ASCII text holds no surrogate (isascii is a flag lookup): only NUL is left to look for
    if not text.isascii() or "\x00" in text:
        check_text(text, what="text")


def plain_evidence(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """``evidence`` checked and made plain JSON: ``{"required_points", "items"}``."""
    from ..calibration import EvidenceItem

    if not isinstance(evidence, Mapping):
        raise FactsError("evidence must be a mapping with 'required_points' and 'items'")
    points = evidence.get("required_points", ())
    if not isinstance(points, (list, tuple)) or not all(isinstance(p, str) for p in points):
        raise FactsError("evidence 'required_points' must be a list of strings")
    raw_items = evidence.get("items", ())
    if not isinstance(raw_items, (list, tuple)):
        raise FactsError("evidence 'items' must be a list of evidence items")
    items = []
    for pos, it in enumerate(raw_items):
        try:
            item = EvidenceItem.coerce(it)
        except (ValueError, TypeError) as exc:
            raise FactsError(f"evidence item #{pos + 1}: {exc}") from None
        for value in (item.id, item.point, item.source):
            check_text(value, what=f"evidence item #{pos + 1}")
        items.append(
            {"id": item.id, "point": item.point, "source": item.source, "score": item.score}
        )
    for point in points:
        check_text(point, what="evidence 'required_points'")
    return {"required_points": list(points), "items": items}
