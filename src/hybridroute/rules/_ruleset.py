"""Rules and ordered rule sets: first match wins, validated when built."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .._canonical import _freeze
from ..contracts import (
    Decision,
    FactSchema,
    FactSpec,
    Stage,
    Vocabulary,
    rule_decision,
)
from ..exceptions import FactsError, RuleSetError, UndeclaredValueError
from ._conditions import CompiledCondition, ConditionError, compile_condition
from .guards import GUARDS, Guard, Outcome

_RULE_STAGE = Stage.RULE.value
#: The detail of an outcome that has none (one read-only value shared by every decision).
_NO_DETAIL: Mapping[str, Any] = MappingProxyType({})


def _frozen_detail(detail: Mapping[str, Any]) -> Mapping[str, Any]:
    """``detail`` read-only, as a :class:`Decision` stores it (what ``_freeze`` makes of
    it), made once here so the decision keeps it as it is. A guard's detail is a few
    plain values; only nested ones need ``_freeze``'s walk."""
    if type(detail) is MappingProxyType:
        return detail
    if not detail:
        return _NO_DETAIL
    for v in detail.values():
        t = type(v)
        if not (t is str or t is int or t is float or t is bool or v is None):
            frozen: Mapping[str, Any] = _freeze(detail)
            return frozen
    return MappingProxyType(dict(detail))


__all__ = ["Rule", "RuleMatch", "RuleSet", "reference_fact_schema", "reference_rules"]


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """The rule that fired (``rule_id`` is ``None`` for the default exit) and its outcome.

    Parameters
    ----------
    rule_id : str or None
        The id of the rule that fired; ``None`` for the rule set's default exit.
    destination : str
        Where the item goes (a declared destination).
    reason_code : str
        Why (a declared reason code).
    detail : mapping
        What the rule found, JSON-able (the missing fields, an oscillation's cycle and
        count...); empty for a condition rule and the default exit. It becomes the
        decision's ``detail``.
    """

    rule_id: str | None
    destination: str
    reason_code: str
    detail: Mapping[str, Any]


class Rule:
    """One rule: a built-in guard, or a condition with a destination and a reason code.

    Build with :meth:`guard` or :meth:`when`. Destinations and reason codes are checked
    against the vocabulary when the rule joins a :class:`RuleSet`.

    Parameters
    ----------
    id : str
        The rule's id (non-empty); decisions name it as ``rule_id``.
    guard_obj : Guard or None, default None
        A configured built-in guard (see :meth:`guard`).
    condition : CompiledCondition or None, default None
        A compiled condition (see :meth:`when`). Exactly one of ``guard_obj`` and
        ``condition`` is required.
    destination : str or None, default None
        Where a condition rule sends the item; required with ``condition``, unused for a
        guard (which yields its own destinations).
    reason_code : str or None, default None
        A condition rule's reason code (``None``: ``rule_matched``).
    description : str, default ""
        Free text, written back into the rules file.
    overlaps : sequence of str, default ()
        Ids of earlier rules known to take part of this rule's cases: ``hybridroute rules
        lint`` does not report those overlaps (the rule set checks that they are earlier).

    Raises
    ------
    RuleSetError
        If ``id`` is empty or not a string, both or neither of ``guard_obj`` and
        ``condition`` is given, or a condition rule has no destination.
    """

    __slots__ = (
        "_check",
        "condition",
        "description",
        "destination",
        "guard_obj",
        "id",
        "overlaps",
        "reason_code",
    )

    def __init__(
        self,
        id: str,
        *,
        guard_obj: Guard | None = None,
        condition: CompiledCondition | None = None,
        destination: str | None = None,
        reason_code: str | None = None,
        description: str = "",
        overlaps: Sequence[str] = (),
    ) -> None:
        if not isinstance(id, str) or not id.strip():
            raise RuleSetError("every rule needs a non-empty string id", rule_id=str(id))
        if (guard_obj is None) == (condition is None):
            raise RuleSetError("a rule is either a guard or a condition", rule_id=id)
        self.id = id
        self.guard_obj = guard_obj
        self.condition = condition
        self.destination = destination
        self.reason_code = reason_code
        self.description = description
        self.overlaps: tuple[str, ...] = tuple(overlaps)
        if guard_obj is not None:
            self._check = guard_obj.check
        else:
            if destination is None:
                raise RuleSetError("a condition rule needs a destination ('then')", rule_id=id)
            outcome = Outcome(destination, reason_code or "rule_matched")
            cond = condition.fn  # type: ignore[union-attr]

            def check(
                facts: Mapping[str, Any], _c: Any = cond, _o: Outcome = outcome
            ) -> Outcome | None:
                return _o if _c(facts) else None

            self._check = check

    @classmethod
    def guard(cls, id: str, name: str, description: str = "", **params: Any) -> Rule:
        """A rule running the built-in guard ``name`` with ``params``.

        Parameters
        ----------
        id : str
            The rule's id.
        name : str
            A built-in guard: ``permission``, ``tool_error``, ``risk``, ``step_budget``,
            ``oscillation``, ``evidence`` or ``missing_user_fields``.
        description : str, default ""
            Free text, written back into the rules file.
        **params
            The guard's parameters (e.g. ``retry_budget=1`` for ``tool_error``); each
            guard declares which it takes and which are required.

        Raises
        ------
        RuleSetError
            Naming the rule: an unknown guard, an unknown or missing parameter, or a bad
            parameter value.
        """
        guard_cls = GUARDS.get(name)
        if guard_cls is None:
            raise RuleSetError(
                f"unknown guard {name!r}; built-in guards: {', '.join(GUARDS)}", rule_id=id
            )
        return cls(id, guard_obj=guard_cls(id, **params), description=description)

    @classmethod
    def when(
        cls,
        id: str,
        condition: str | bool,
        then: str,
        reason_code: str = "rule_matched",
        description: str = "",
        *,
        fact_types: Mapping[str, str] | None = None,
    ) -> Rule:
        """A rule that sends to ``then`` with ``reason_code`` when ``condition`` holds.

        Parameters
        ----------
        id : str
            The rule's id.
        condition : str or bool
            A condition in the rules' condition language (e.g.
            ``"attempts >= 2 and tool_error_kind == 'timeout'"``); ``True`` / ``False``
            stand for ``true`` / ``false``.
        then : str
            The destination when the condition holds.
        reason_code : str, default "rule_matched"
            The decision's reason code.
        description : str, default ""
            Free text, written back into the rules file.
        fact_types : mapping of str to str or None, default None
            Declared fact name -> type. When given, every name the condition reads must
            be declared and obviously ill-typed comparisons are refused here; the
            :class:`RuleSet` checks the names against its schema in any case.

        Raises
        ------
        RuleSetError
            Naming the rule, when the condition does not parse or type-check.
        """
        try:
            compiled = compile_condition(condition, fact_types)
        except ConditionError as exc:
            raise RuleSetError(f"bad condition: {exc}", rule_id=id) from None
        return cls(
            id,
            condition=compiled,
            destination=then,
            reason_code=reason_code,
            description=description,
        )

    @property
    def destinations(self) -> tuple[str, ...]:
        """Every destination this rule can yield."""
        if self.guard_obj is not None:
            return self.guard_obj.destinations
        return (self.destination,)  # type: ignore[return-value]

    @property
    def reason_codes(self) -> tuple[str, ...]:
        if self.guard_obj is not None:
            return self.guard_obj.reason_codes
        return (self.reason_code or "rule_matched",)

    def facts_read(self) -> dict[str, tuple[str, ...] | None]:
        """Fact name -> accepted types (``None``: any type) for every fact read."""
        if self.guard_obj is not None:
            return dict(self.guard_obj.facts_read())
        return {name: None for name in self.condition.facts}  # type: ignore[union-attr]

    def check(self, facts: Mapping[str, Any]) -> Outcome | None:
        """The outcome when the rule fires on (validated) ``facts``, else ``None``."""
        return self._check(facts)

    def to_dict(self) -> dict[str, Any]:
        """The rule as it is written in a rules file."""
        out: dict[str, Any] = {"id": self.id}
        if self.guard_obj is not None:
            out["guard"] = self.guard_obj.name
            params = self.guard_obj.params_dict()
            if params:
                out["params"] = params
        else:
            out["when"] = self.condition.source  # type: ignore[union-attr]
            out["then"] = self.destination
            out["reason"] = self.reason_code or "rule_matched"
        if self.overlaps:
            out["overlaps"] = list(self.overlaps)
        if self.description:
            out["description"] = self.description
        return out

    def __repr__(self) -> str:
        return f"Rule({self.to_dict()!r})"


class RuleSet:
    """An ordered, validated rule set: first match wins, then the default exit.

    Parameters
    ----------
    rules : sequence of Rule
        In evaluation order.
    schema : FactSchema
        The declared facts; facts are validated against it before any rule runs.
    default : str
        The default exit's destination, taken when no rule fires (``fail`` unless declared).
    default_reason : str
        Its reason code.
    vocabulary : Vocabulary, optional
        Declared intent destinations and extra reason codes.
    name, version : str
        Written into every decision as ``router`` / ``router_version``.

    Attributes
    ----------
    source : str or None
        The rules file it was loaded from (set by :func:`~hybridroute.rules.load_rules`;
        ``None`` for a rule set built in code): where its tests are looked for.

    Raises
    ------
    RuleSetError
        On duplicate rule ids, an undeclared destination or reason code, a missing default
        exit, a rule shadowed by an earlier unconditional rule (or one that can never
        fire), a rule reading a fact the schema does not declare (or declares with an
        incompatible type), or a guard parameter that the schema's ``enum`` / ``min`` /
        ``max`` make unreachable (a sensitive action or retryable kind outside the fact's
        enum, a limit no allowed value can exceed). The message names the rule.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        schema: FactSchema,
        default: str | None = "fail",
        default_reason: str = "default_exit",
        vocabulary: Vocabulary | None = None,
        name: str = "rules",
        version: str = "0",
    ) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.schema = schema
        self.vocabulary = vocabulary or Vocabulary()
        self.name = str(name)
        self.version = str(version)
        if default is None:
            raise RuleSetError("the rule set has no default exit (declare 'default')")
        self.default = default
        self.default_reason = default_reason
        self.source: str | None = None
        self._validate()
        # the rules' own check functions (Rule.check only forwards to them)
        self._checks = tuple((r.id, r._check) for r in self.rules)
        self._default_match = RuleMatch(None, default, default_reason, _NO_DETAIL)

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        vocab = self.vocabulary
        seen: dict[str, int] = {}
        for pos, rule in enumerate(self.rules):
            if not isinstance(rule, Rule):
                raise RuleSetError(f"item {pos} is not a Rule: {rule!r}")
            if rule.id in seen:
                raise RuleSetError(
                    f"duplicate rule id (also rule #{seen[rule.id] + 1})", rule_id=rule.id
                )
            seen[rule.id] = pos
            for other in rule.overlaps:
                if other not in seen or other == rule.id:
                    raise RuleSetError(
                        f"'overlaps' names {other!r}, which is not an earlier rule",
                        rule_id=rule.id,
                    )
            for dest in rule.destinations:
                try:
                    vocab.check_destination(dest)
                except UndeclaredValueError as exc:
                    raise RuleSetError(str(exc), rule_id=rule.id) from None
            for code in rule.reason_codes:
                try:
                    vocab.check_reason_code(code)
                except UndeclaredValueError as exc:
                    raise RuleSetError(str(exc), rule_id=rule.id) from None
            for fact, types in rule.facts_read().items():
                if fact not in self.schema:
                    raise RuleSetError(
                        f"reads fact {fact!r}, which the facts schema does not declare",
                        rule_id=rule.id,
                    )
                declared = self.schema[fact].type
                if types is not None and declared not in types:
                    raise RuleSetError(
                        f"reads fact {fact!r} as {' or '.join(types)}, but it is declared {declared}",
                        rule_id=rule.id,
                    )
            if rule.guard_obj is not None:
                rule.guard_obj.check_schema(self.schema)
            else:
                self._check_literals(rule)
            if rule.condition is not None and rule.condition.constant is False:
                raise RuleSetError(
                    f"can never fire: its condition {rule.condition.source!r} is always false",
                    rule_id=rule.id,
                )
        # shadowing: nothing after an unconditional rule can fire; nor can a guard that
        # repeats an earlier guard with the same parameters.
        for pos, rule in enumerate(self.rules):
            if (
                rule.condition is not None
                and rule.condition.constant is True
                and pos + 1 < len(self.rules)
            ):
                nxt = self.rules[pos + 1]
                raise RuleSetError(
                    f"can never fire: the earlier rule {rule.id!r} is unconditional "
                    f"({rule.condition.source!r}) and shadows it",
                    rule_id=nxt.id,
                )
            if rule.guard_obj is not None:
                for earlier in self.rules[:pos]:
                    if earlier.guard_obj is not None and earlier.guard_obj == rule.guard_obj:
                        raise RuleSetError(
                            f"can never fire: rule {earlier.id!r} runs the same guard with the "
                            "same parameters earlier",
                            rule_id=rule.id,
                        )
        try:
            vocab.check_destination(self.default)
            vocab.check_reason_code(self.default_reason)
        except UndeclaredValueError as exc:
            raise RuleSetError(f"default exit: {exc}") from None

    def _check_literals(self, rule: Rule) -> None:
        """A condition comparing an enum fact with a value outside its enum is a typo."""
        for fact, value in rule.condition.literals:  # type: ignore[union-attr]
            if value is None or fact not in self.schema:
                continue
            spec = self.schema[fact]
            if spec.enum is None:
                continue
            if isinstance(value, bool) or value not in spec.enum:
                shown = ", ".join(repr(v)[:40] for v in spec.enum[:20])
                more = "" if len(spec.enum) <= 20 else f", ... ({len(spec.enum)} in all)"
                raise RuleSetError(
                    f"compares fact {fact!r} with {value!r}, which is not one of its allowed "
                    f"values ({shown}{more}); a typo?",
                    rule_id=rule.id,
                )

    # ------------------------------------------------------------------ evaluation
    def validate_facts(self, facts: Mapping[str, Any] | None) -> dict[str, Any]:
        """Facts checked against the schema, defaults filled in (raises :class:`FactsError`)."""
        return self.schema.validate(facts)

    def _first(self, facts: Mapping[str, Any]) -> tuple[str, Outcome] | None:
        """The id and outcome of the first rule that fires on validated ``facts``."""
        for rule_id, check in self._checks:
            try:
                outcome = check(facts)
            except ConditionError as exc:
                raise FactsError(f"rule {rule_id!r} cannot be evaluated: {exc}") from None
            if outcome is not None:
                return rule_id, outcome
        return None

    def match(self, facts: Mapping[str, Any]) -> RuleMatch | None:
        """The first rule that fires on already-validated ``facts``, or ``None``.

        Its ``detail`` is read-only already (as a :class:`Decision` holds it).
        """
        first = self._first(facts)
        if first is None:
            return None
        rule_id, outcome = first
        return RuleMatch(
            rule_id, outcome.destination, outcome.reason_code, _frozen_detail(outcome.detail)
        )

    def evaluate(self, facts: Mapping[str, Any] | None) -> RuleMatch:
        """Validate ``facts`` and return the first match, or the default exit."""
        return self.match(self.validate_facts(facts)) or self._default_match

    def decide(self, facts: Mapping[str, Any] | None) -> Decision:
        """Validate ``facts`` and return the full rule-stage :class:`Decision`."""
        valid = self.validate_facts(facts)
        first = self._first(valid)
        if first is None:
            rule_id, destination, reason = None, self.default, self.default_reason
            detail = _NO_DETAIL
        else:
            rule_id, outcome = first
            destination, reason = outcome.destination, outcome.reason_code
            detail = _frozen_detail(outcome.detail)
        # validated facts are canonical: write their JSON straight from the schema
        digest = hashlib.sha256(
            ('{"facts":' + self.schema.canonical_json(valid) + "}").encode()
        ).hexdigest()
        return rule_decision(
            self.name,
            self.version,
            MappingProxyType({"facts": MappingProxyType(valid)}),
            digest,
            destination,
            reason,
            rule_id,
            detail,
        )

    def decide_many(self, facts_list: Iterable[Mapping[str, Any] | None]) -> list[Decision]:
        """:meth:`decide` for each item."""
        return [self.decide(f) for f in facts_list]

    def coverage(
        self,
        decisions: Iterable[Any],
        *,
        model_destinations: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Which rules, rule outcomes and destinations ``decisions`` reach, and which none does.

        Parameters
        ----------
        decisions : iterable
            Decisions (:class:`~hybridroute.contracts.Decision` values or their records)
            made with this rule set: by its tests, or by a router over a labelled set.
        model_destinations : iterable of str, optional
            The destinations a router's model stage can select (a router's
            ``model_destinations``); ``None``: the declared intent destinations.

        Returns
        -------
        dict
            See :func:`hybridroute.rules._coverage.rule_coverage`.
        """
        from ._coverage import rule_coverage

        return rule_coverage(self, decisions, model_destinations=model_destinations)

    def diff(self, new: RuleSet, inputs: Iterable[Any], **options: Any) -> Any:
        """What replacing this rule set by ``new`` changes on ``inputs`` (logged rows, records).

        See :func:`hybridroute.rules.diff_rules` (this rule set is ``old``); ``options`` are
        its keyword arguments.
        """
        from ._diff import diff_rules

        return diff_rules(self, new, inputs, **options)

    def to_dict(self) -> dict[str, Any]:
        """The rule set as a rules-file document: ``parse_rules`` of its YAML rebuilds it."""
        doc: dict[str, Any] = {
            "format": 1,
            "name": self.name,
            "version": self.version,
            "facts": self.schema.to_dict(),
        }
        if self.schema.extra != "forbid":
            doc["extra_facts"] = self.schema.extra
        if self.vocabulary.intents:
            doc["destinations"] = list(self.vocabulary.intents)
        if self.vocabulary.reason_codes:
            doc["reason_codes"] = list(self.vocabulary.reason_codes)
        doc["rules"] = [r.to_dict() for r in self.rules]
        doc["default"] = {"destination": self.default, "reason": self.default_reason}
        return doc

    def to_yaml(self) -> str:
        """The rule set as rules-file YAML text."""
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"RuleSet(name={self.name!r}, version={self.version!r}, rules={[r.id for r in self.rules]})"


# --------------------------------------------------------------------------- reference set


def reference_fact_schema() -> FactSchema:
    """The facts the reference routing order reads, with their defaults.

    Counters (``attempts``, ``step``) and ``amount`` are declared ``min: 0``: a negative
    attempt count would earn extra retries and a negative step extra steps.
    """
    return FactSchema(
        (
            FactSpec(
                name="has_permission",
                type="bool",
                default=True,
                description="the requester may do what is asked",
            ),
            FactSpec(
                name="tool_error_kind",
                type="str",
                nullable=True,
                default=None,
                description="null, 'retryable', or another error kind",
            ),
            FactSpec(
                name="attempts",
                type="int",
                default=0,
                min=0,
                description="tool attempts made so far",
            ),
            FactSpec(name="amount", type="number", default=0, min=0, description="money involved"),
            FactSpec(name="action", type="str", default="", description="the action prepared"),
            FactSpec(
                name="evidence_complete",
                type="bool",
                default=False,
                description="every required evidence point is covered",
            ),
            FactSpec(
                name="missing_user_fields",
                type="list[str]",
                default=[],
                description="fields the user still has to give",
            ),
            FactSpec(
                name="route_history",
                type="list[str]",
                default=[],
                description="destinations visited so far",
            ),
            FactSpec(name="step", type="int", default=0, min=0, description="steps taken so far"),
        )
    )


def reference_rules(
    *,
    retry_budget: int,
    amount_limit: float | None,
    sensitive_actions: Sequence[str] = (),
    max_steps: int,
    max_repeats: int,
    default: str = "fail",
    intents: Sequence[str] = (),
    name: str = "reference",
    version: str = "1",
) -> RuleSet:
    """The built-in guards in the reference routing order.

    permission -> tool error (retry budget) -> risk -> step budget -> oscillation ->
    evidence -> missing user fields -> ``default``. Every limit is an explicit argument:
    there are no built-in numbers. The facts are :func:`reference_fact_schema`'s.

    Parameters
    ----------
    retry_budget : int
        A retryable tool error goes to ``retry_tool`` while ``attempts < retry_budget``,
        then to ``fail``; an integer >= 0.
    amount_limit : float or None
        ``abs(amount)`` above it goes to ``human_review``; a finite number >= 0, or
        ``None`` for no amount check (then ``sensitive_actions`` must not be empty).
    sensitive_actions : sequence of str, default ()
        Actions that go to ``human_review`` (compared normalised: case, accents,
        spacing, hyphens and underscores ignored).
    max_steps : int
        ``step > max_steps`` goes to ``fail``; an integer >= 0.
    max_repeats : int
        A cycle in ``route_history`` repeated more than this many times in a row goes to
        ``fail``; an integer >= 1.
    default : str, default "fail"
        The default exit's destination (a declared destination).
    intents : sequence of str, default ()
        Intent destinations to declare, on top of the generic next steps.
    name, version : str, default "reference", "1"
        Written into every decision as ``router`` / ``router_version``.

    Returns
    -------
    RuleSet

    Raises
    ------
    RuleSetError
        Naming the rule, for a bad limit (or a risk guard with neither an amount limit
        nor sensitive actions), or an undeclared default.
    """
    rules = [
        Rule.guard("permission", "permission"),
        Rule.guard("tool_error", "tool_error", retry_budget=retry_budget),
        Rule.guard(
            "risk", "risk", amount_limit=amount_limit, sensitive_actions=list(sensitive_actions)
        ),
        Rule.guard("step_budget", "step_budget", max_steps=max_steps),
        Rule.guard("oscillation", "oscillation", max_repeats=max_repeats),
        Rule.guard("evidence", "evidence"),
        Rule.guard("missing_user_fields", "missing_user_fields"),
    ]
    return RuleSet(
        rules,
        schema=reference_fact_schema(),
        default=default,
        vocabulary=Vocabulary(intents=tuple(intents)),
        name=name,
        version=version,
    )
