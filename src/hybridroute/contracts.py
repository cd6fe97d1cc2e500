"""The decision contract: destinations, reason codes, stages, the facts schema, ``Decision``.

Everything that crosses a layer boundary is defined here or re-exported from here: the
facts schema (:class:`FactSpec`, :class:`FactSchema`) lives in :mod:`hybridroute._facts`
and the canonical JSON behind every snapshot hash (:func:`canonical_json`,
:func:`snapshot_hash`) in :mod:`hybridroute._canonical`. This module imports nothing else
from hybridroute except :mod:`hybridroute.exceptions`; those two import only leaf modules
(the exceptions, :mod:`hybridroute._safeio`, :mod:`hybridroute._canonical`).

* **Destinations** form a finite declared set: the six generic next steps
  (:data:`GENERIC_DESTINATIONS`) plus the intent destinations a user declares in a
  :class:`Vocabulary`.
* **Reason codes** are finite too: the built-in :class:`ReasonCode` members plus codes a
  rules file declares.
* A :class:`RouteRequest` is one item to route -- text, facts, evidence and request id --
  as an immutable, keyword-only value whose field types are checked when it is made (no
  I/O; the facts are checked against a schema by the router that routes it,
  :meth:`hybridroute.router.HybridRouter.check`).
* A :class:`Decision` is an immutable, keyword-only value carrying the five contract
  fields (``input_snapshot``, ``allowed_destinations``, ``selected_destination``,
  ``reason_code``, ``evidence_ids``) plus router name and version, stage and, for model
  stages, label, confidence, threshold and margin. Its ``snapshot_hash`` is the SHA-256
  of the canonical JSON of the input snapshot alone, so the same input hashes the same
  across processes, machines and router versions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from ._canonical import _freeze, _thaw, canonical_json, snapshot_hash
from ._facts import FactSchema, FactSpec
from .exceptions import FactsError, InputError, UndeclaredValueError

__all__ = [
    "GENERIC_DESTINATIONS",
    "MAX_REQUEST_ID_CHARS",
    "RECORD_VERSION",
    "Decision",
    "FactSchema",
    "FactSpec",
    "ReasonCode",
    "RouteRequest",
    "Stage",
    "Vocabulary",
    "canonical_json",
    "snapshot_hash",
]

#: Version of the serialised decision record written by :meth:`Decision.to_dict`.
RECORD_VERSION = 1

#: The generic next steps every router knows. Intent destinations are declared on top.
GENERIC_DESTINATIONS: tuple[str, ...] = (
    "answer",
    "ask_user",
    "retry_tool",
    "fail",
    "reject",
    "human_review",
)

#: Longest request id, in characters (``--id`` and a batch line's ``id`` on the command
#: line, ``request_id`` in the service and its client, :attr:`RouteRequest.request_id`).
MAX_REQUEST_ID_CHARS = 256

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(?:[.:/-][a-z0-9_]+)*$")


class Stage(StrEnum):
    """Which layer made a decision."""

    RULE = "rule"
    MODEL = "model"
    POLICY = "policy"
    FALLBACK = "fallback"


class ReasonCode(StrEnum):
    """Built-in reason codes. Rules files may declare more (see :class:`Vocabulary`)."""

    # rule stage
    PERMISSION_DENIED = "permission_denied"
    TOOL_ERROR_RETRY = "tool_error_retry"
    RETRY_BUDGET_EXHAUSTED = "retry_budget_exhausted"
    TOOL_ERROR_FATAL = "tool_error_fatal"
    HIGH_RISK_AMOUNT = "high_risk_amount"
    SENSITIVE_ACTION = "sensitive_action"
    STEP_BUDGET_EXCEEDED = "step_budget_exceeded"
    ROUTE_OSCILLATION = "route_oscillation"
    EVIDENCE_COMPLETE = "evidence_complete"
    MISSING_USER_FIELDS = "missing_user_fields"
    RULE_MATCHED = "rule_matched"
    DEFAULT_EXIT = "default_exit"
    # model / policy stage
    CONFIDENT_INTENT = "confident_intent"
    LOW_CONFIDENCE = "low_confidence"
    LOW_MARGIN = "low_margin"
    OUT_OF_SCOPE = "out_of_scope"
    NEEDS_REVIEW = "needs_review"
    EVIDENCE_INCOMPLETE = "evidence_incomplete"
    NOT_CERTIFIED = "not_certified"
    # fallback stage (classifier could not answer)
    INVALID_LABEL = "invalid_label"
    PROVIDER_ERROR = "provider_error"
    TIMEOUT = "timeout"
    CLASSIFIER_ERROR = "classifier_error"


_BUILTIN_REASONS: frozenset[str] = frozenset(r.value for r in ReasonCode)
_STAGES: frozenset[str] = frozenset(s.value for s in Stage)


def _check_name(kind: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise UndeclaredValueError(
            kind, value, ("lower-case identifiers such as 'refund_request'",)
        )
    return value


# --------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The finite declared sets a router works with.

    Parameters
    ----------
    intents : iterable of str
        Intent destinations declared by the user (e.g. ``refund_request``), on top of the
        generic next steps.
    reason_codes : iterable of str
        Extra reason codes (e.g. declared by a rules file), on top of :class:`ReasonCode`.
    """

    intents: tuple[str, ...] = ()
    reason_codes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        intents = tuple(dict.fromkeys(self.intents))
        for name in intents:
            _check_name("destination", name)
        reasons = tuple(dict.fromkeys(self.reason_codes))
        for name in reasons:
            _check_name("reason code", name)
        object.__setattr__(self, "intents", intents)
        object.__setattr__(self, "reason_codes", reasons)

    @property
    def destinations(self) -> tuple[str, ...]:
        """Generic next steps followed by the declared intent destinations."""
        return GENERIC_DESTINATIONS + tuple(
            i for i in self.intents if i not in GENERIC_DESTINATIONS
        )

    @property
    def all_reason_codes(self) -> tuple[str, ...]:
        """Built-in reason codes followed by the declared extra ones."""
        return tuple(r.value for r in ReasonCode) + tuple(
            r for r in self.reason_codes if r not in _BUILTIN_REASONS
        )

    def check_destination(self, value: object) -> str:
        """Return ``value`` if it is a declared destination, else raise."""
        if value in GENERIC_DESTINATIONS or value in self.intents:
            return value  # type: ignore[return-value]
        raise UndeclaredValueError("destination", value, self.destinations)

    def check_reason_code(self, value: object) -> str:
        """Return ``value`` if it is a declared reason code, else raise."""
        if value in _BUILTIN_REASONS or value in self.reason_codes:
            return value  # type: ignore[return-value]
        raise UndeclaredValueError("reason code", value, self.all_reason_codes)

    def check_decision(self, decision: Decision) -> Decision:
        """Check every destination and the reason code of ``decision`` against this vocabulary."""
        for d in decision.allowed_destinations:
            self.check_destination(d)
        self.check_reason_code(decision.reason_code)
        return decision


# --------------------------------------------------------------------------- request


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteRequest:
    """One item to route: an immutable, keyword-only value.

    The types of the fields are checked when the value is made (no I/O, no schema): what
    the facts must hold, how long a text may be and what the evidence must cover are the
    router's to check (:meth:`hybridroute.router.HybridRouter.check`), since they depend
    on its rules file, its limits and its policy.

    Parameters
    ----------
    text : str or None, default None
        The text to classify when no rule fires. ``None`` (or a blank text) leaves the
        item to the rules.
    facts : mapping, default empty
        The item's structured facts (``None`` is taken as no facts). Kept as a read-only view of a
        copy of the mapping given (values inside are not copied: the router's check
        makes the frozen, canonical form that decisions record).
    evidence : mapping or None, default None
        ``{"required_points": [...], "items": [...]}``, kept as ``facts`` is.
    request_id : str or None, default None
        The item's request id: a decision log keeps one decision per request id and
        router version, and the service answers a repeat with the stored decision. A
        non-blank string of at most :data:`MAX_REQUEST_ID_CHARS` characters. The router
        itself never reads it (it is not part of the input snapshot or its hash).

    Raises
    ------
    FactsError
        ``facts`` or ``evidence`` is not a mapping.
    InputError
        ``text`` is not a string, or ``request_id`` is not a non-blank string of at most
        :data:`MAX_REQUEST_ID_CHARS` characters.

    Examples
    --------
    >>> from hybridroute.contracts import RouteRequest
    >>> req = RouteRequest(text="where is my parcel?", facts={"amount": 20}, request_id="t-1")
    >>> req.facts["amount"], req.request_id
    (20, 't-1')
    """

    text: str | None = None
    facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    evidence: Mapping[str, Any] | None = None
    request_id: str | None = None

    def __post_init__(self) -> None:
        # in the order the router checked a route item before there was this value
        # (facts, text, evidence), with the router's words
        facts = self.facts
        if facts is None:
            object.__setattr__(self, "facts", MappingProxyType({}))
        elif isinstance(facts, Mapping):
            object.__setattr__(self, "facts", MappingProxyType(dict(facts)))
        else:
            raise FactsError(f"facts must be a JSON object, got {type(facts).__name__}")
        if self.text is not None and not isinstance(self.text, str):
            raise InputError(f"text must be a string, got {type(self.text).__name__}")
        evidence = self.evidence
        if evidence is not None:
            if not isinstance(evidence, Mapping):
                raise FactsError("evidence must be a mapping with 'required_points' and 'items'")
            object.__setattr__(self, "evidence", MappingProxyType(dict(evidence)))
        rid = self.request_id
        if rid is not None:
            if not isinstance(rid, str):
                raise InputError(f"request_id must be a string, got {type(rid).__name__}")
            if not rid.strip():
                raise InputError("request_id is empty")
            if len(rid) > MAX_REQUEST_ID_CHARS:
                raise InputError(f"request_id is longer than {MAX_REQUEST_ID_CHARS} characters")

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> RouteRequest:
        """A request from a mapping with the keys ``text``, ``facts``, ``evidence`` and
        ``request_id`` (each optional; any other key is refused).

        Raises
        ------
        InputError
            ``item`` is not a mapping, or holds another key.
        FactsError, InputError
            As the constructor raises.
        """
        if not isinstance(item, Mapping):
            raise InputError(f"a route request is a mapping, got {type(item).__name__}")
        unknown = sorted(str(k) for k in set(item) - set(_REQUEST_KEYS))
        if unknown:
            raise InputError(
                f"unknown key(s) {unknown}; a route request holds {list(_REQUEST_KEYS)}"
            )
        facts = item.get("facts")
        return cls(
            text=item.get("text"),
            facts=MappingProxyType({}) if facts is None else facts,
            evidence=item.get("evidence"),
            request_id=item.get("request_id"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The request as a mapping :meth:`from_dict` reads back (the body of one item of
        ``POST /v1/route``): ``text`` and ``facts`` always, ``evidence`` and
        ``request_id`` when set. Values are the ones given (not copied deeply)."""
        out: dict[str, Any] = {"text": self.text, "facts": dict(self.facts)}
        if self.evidence is not None:
            out["evidence"] = dict(self.evidence)
        if self.request_id is not None:
            out["request_id"] = self.request_id
        return out


_REQUEST_KEYS = ("text", "facts", "evidence", "request_id")


# --------------------------------------------------------------------------- decision


_DECISION_KEYS = (
    "record_version",
    "router",
    "router_version",
    "stage",
    "selected_destination",
    "allowed_destinations",
    "reason_code",
    "evidence_ids",
    "input_snapshot",
    "snapshot_hash",
    "rule_id",
    "label",
    "confidence",
    "threshold",
    "margin",
    "detail",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One routing decision: an immutable, JSON-round-trippable record.

    Parameters
    ----------
    router, router_version : str
        Which router (name and version) made the decision.
    input_snapshot : mapping
        The facts used and, when a model was consulted, the text (``{"facts": ..., "text": ...}``).
        Stored read-only; must hold JSON types only.
    allowed_destinations : tuple of str
        The destinations this decision was allowed to pick from.
    selected_destination : str
        The chosen destination; must be one of ``allowed_destinations``.
    reason_code : str
        Why; a declared reason code.
    evidence_ids : tuple of str
        Ids of the evidence items the decision relied on.
    stage : {"rule", "model", "policy", "fallback"}
        Which layer decided.
    rule_id : str, optional
        The rule that fired, for rule-stage decisions.
    label, confidence, threshold, margin : optional
        For model and policy stages: the top label, its (calibrated) confidence, the fitted
        threshold it was compared with and the top-1/top-2 margin.
    detail : mapping
        Further JSON-able diagnosis (missing fields, an oscillation pattern, ...).
    snapshot_hash : str
        Computed from ``input_snapshot`` when left empty.
    """

    router: str
    router_version: str
    input_snapshot: Mapping[str, Any]
    allowed_destinations: tuple[str, ...]
    selected_destination: str
    reason_code: str
    stage: str
    evidence_ids: tuple[str, ...] = ()
    rule_id: str | None = None
    label: str | None = None
    confidence: float | None = None
    threshold: float | None = None
    margin: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    snapshot_hash: str = ""

    def __post_init__(self) -> None:
        # (rule_decision below makes rule-stage decisions without this method: a check
        # added here must be added there too)
        if self.stage not in _STAGES:
            raise UndeclaredValueError("stage", self.stage, tuple(sorted(_STAGES)))
        allowed = self.allowed_destinations
        if not isinstance(allowed, tuple):
            allowed = tuple(allowed)
            object.__setattr__(self, "allowed_destinations", allowed)
        if self.selected_destination not in allowed:
            raise UndeclaredValueError("destination", self.selected_destination, allowed)
        if not isinstance(self.reason_code, str) or not self.reason_code:
            raise UndeclaredValueError(
                "reason code", self.reason_code, tuple(sorted(_BUILTIN_REASONS))
            )
        if not isinstance(self.evidence_ids, tuple):
            object.__setattr__(self, "evidence_ids", tuple(self.evidence_ids))
        snap = self.input_snapshot
        if not isinstance(snap, MappingProxyType):
            snap = _freeze(snap)
            object.__setattr__(self, "input_snapshot", snap)
        if not isinstance(self.detail, MappingProxyType):
            object.__setattr__(self, "detail", _freeze(self.detail))
        if not self.snapshot_hash:
            object.__setattr__(self, "snapshot_hash", snapshot_hash(snap))

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON types, in a fixed key order."""
        return {
            "record_version": RECORD_VERSION,
            "router": self.router,
            "router_version": self.router_version,
            "stage": str(self.stage),
            "selected_destination": self.selected_destination,
            "allowed_destinations": list(self.allowed_destinations),
            "reason_code": str(self.reason_code),
            "evidence_ids": list(self.evidence_ids),
            "input_snapshot": _thaw(self.input_snapshot),
            "snapshot_hash": self.snapshot_hash,
            "rule_id": self.rule_id,
            "label": self.label,
            "confidence": self.confidence,
            "threshold": self.threshold,
            "margin": self.margin,
            "detail": _thaw(self.detail),
        }

    def to_json(self) -> str:
        """The record as one line of JSON (keys in the fixed order of :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        vocabulary: Vocabulary | None = None,
        verify_hash: bool = True,
    ) -> Decision:
        """Rebuild a decision from :meth:`to_dict` output, checking it thoroughly.

        Parameters
        ----------
        data : mapping
            A record as :meth:`to_dict` writes it (``record_version`` may be left out).
        vocabulary : Vocabulary, optional
            When given, every destination and the reason code must be declared in it.
        verify_hash : bool
            Recompute ``snapshot_hash`` from the snapshot and refuse a record whose recorded
            hash differs (default). With ``False`` the recorded hash is kept as it is (a
            logged record whose sensitive facts were replaced by salted hashes still carries
            the hash of the original input).

        Raises
        ------
        UndeclaredValueError
            For an undeclared stage, destination or reason code.
        ValueError
            For unknown or missing keys, a wrong record version, or a ``snapshot_hash``
            that does not match the snapshot.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a decision record must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - set(_DECISION_KEYS)
        if unknown:
            raise ValueError(f"unknown keys in decision record: {sorted(unknown)}")
        required = (
            "router",
            "router_version",
            "stage",
            "selected_destination",
            "allowed_destinations",
            "reason_code",
            "input_snapshot",
        )
        missing = [k for k in required if k not in data]
        if missing:
            raise ValueError(f"decision record lacks {missing}")
        version = data.get("record_version", RECORD_VERSION)
        if version != RECORD_VERSION:
            raise ValueError(
                f"decision record version {version!r} is not supported (expected {RECORD_VERSION})"
            )
        decision = cls(
            router=data["router"],
            router_version=data["router_version"],
            stage=data["stage"],
            selected_destination=data["selected_destination"],
            allowed_destinations=tuple(data["allowed_destinations"]),
            reason_code=data["reason_code"],
            evidence_ids=tuple(data.get("evidence_ids") or ()),
            input_snapshot=data["input_snapshot"],
            rule_id=data.get("rule_id"),
            label=data.get("label"),
            confidence=data.get("confidence"),
            threshold=data.get("threshold"),
            margin=data.get("margin"),
            detail=data.get("detail") or {},
            snapshot_hash="" if verify_hash else (data.get("snapshot_hash") or ""),
        )
        given = data.get("snapshot_hash")
        if verify_hash and given and given != decision.snapshot_hash:
            raise ValueError(
                "snapshot_hash does not match the input snapshot "
                f"(record says {given[:12]}…, content hashes to {decision.snapshot_hash[:12]}…)"
            )
        if vocabulary is not None:
            vocabulary.check_decision(decision)
        return decision


# --------------------------------------------------------------------------- rule decisions
#: Decision's fields, in the order :func:`rule_decision` sets them (a record's keys).
_DECISION_FIELDS = _DECISION_KEYS[1:]


def _decision_setters() -> tuple[Callable[[Any, Any], None], ...] | None:
    """The slot setters of :class:`Decision`'s fields (in :data:`_DECISION_FIELDS` order),
    or ``None`` when its fields are not exactly those slots (then every rule decision is
    made by its constructor)."""
    if {f.name for f in fields(Decision)} != set(_DECISION_FIELDS):
        return None  # pragma: no cover - a field added to Decision
    setters = []
    for name in _DECISION_FIELDS:
        slot = Decision.__dict__.get(name)
        if slot is None or type(slot).__name__ != "member_descriptor":
            return None  # pragma: no cover - Decision without slots
        setters.append(slot.__set__)
    return tuple(setters)


_SETTERS = _decision_setters()
_new = object.__new__


def rule_decision(
    router: str,
    version: str,
    snapshot: Mapping[str, Any],
    digest: str,
    destination: str,
    reason: str,
    rule_id: str | None,
    detail: Mapping[str, Any],
) -> Decision:
    """A rule-stage :class:`Decision`, equal to (and as checked as) what its constructor
    makes of these values.

    The rule layer makes one per decision, and the constructor of a frozen dataclass sets
    each field through ``object.__setattr__``: a fifth of a rule decision's time. Here the
    checks of :meth:`Decision.__post_init__` hold by construction -- the stage is ``rule``,
    the destination is the only allowed one, ``snapshot`` and ``detail`` are read-only
    views of canonical values (as the rules and the router make them), the hash is given
    -- so the fields are set straight into the slots. A reason code that is not a
    non-empty string, a missing hash, or a snapshot or detail that is not a read-only view
    goes through the constructor (which refuses, freezes or hashes it). **A check added to
    ``Decision.__post_init__`` must be added here too** (``tests/rules/test_fast_paths.py``
    compares the two field by field).
    """
    setters = _SETTERS
    if (
        setters is None
        or type(reason) is not str
        or not reason
        or not digest
        or type(snapshot) is not MappingProxyType
        or type(detail) is not MappingProxyType
    ):
        return Decision(
            router=router,
            router_version=version,
            stage="rule",
            input_snapshot=snapshot,
            snapshot_hash=digest,
            allowed_destinations=(destination,),
            selected_destination=destination,
            reason_code=reason,
            rule_id=rule_id,
            detail=detail,
        )
    d = _new(Decision)
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14 = setters
    s0(d, router)
    s1(d, version)
    s2(d, "rule")
    s3(d, destination)
    s4(d, (destination,))
    s5(d, reason)
    s6(d, ())
    s7(d, snapshot)
    s8(d, digest)
    s9(d, rule_id)
    s10(d, None)
    s11(d, None)
    s12(d, None)
    s13(d, None)
    s14(d, detail)
    return d
