"""Router versions a log knows: the labels and next steps an outcome of theirs may name.

An outcome's gold intent must be a label of the router version that made the decision (or
its out-of-scope label) and its gold next step one of that version's destinations; a typo
(``"no_such_label"``) or junk (``"rm -rf /"``) is refused instead of counting as a wrong
prediction in the monitor, recalibration and the promotion gate. The log learns each
version's vocabulary when it is registered (log schema version 4): the service registers
its live and shadow routers when it starts and when a bundle is reloaded,
``hybridroute route --log`` the router it routes with, and ``hybridroute outcomes add
--router BUNDLE`` a version logged before registration existed.

A registration is insert-if-absent under the log's outcome lock: registering the same
vocabulary again changes nothing, another vocabulary under a registered (router, version)
is refused (:class:`~hybridroute.exceptions.ArtifactError`): a router whose labels or
destinations changed needs a new version.

The table (``routers``; ``hybridroute_routers`` on PostgreSQL) holds one row per (router,
router version): ``labels`` and ``destinations`` as JSON arrays (sorted), ``oos_label``
(``NULL`` when the version has none) and ``registered_at``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from .._safeio import describe_bad_char
from ..contracts import Vocabulary
from ..exceptions import ArtifactError, UserInputError

__all__ = [
    "ROUTER_COLUMNS",
    "RouterVocabulary",
    "RoutesByModel",
    "RoutesByRules",
    "VocabularyConflictError",
    "create_routers_sql",
    "read_vocabularies",
    "register_vocabulary",
]

#: The columns of the routers table.
ROUTER_COLUMNS = (
    "router",
    "router_version",
    "labels",
    "oos_label",
    "destinations",
    "registered_at",
)
#: Longest router name, version, label or destination, in characters (as outcomes).
MAX_CHARS = 256
#: Most labels (or destinations) of one router version.
MAX_NAMES = 100_000
# names shown in a message before "..."
_SHOWN = 12

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


class RoutesByRules(Protocol):
    """What a vocabulary is read from in a rule set routing alone (``RuleSet`` is one),
    and in a router's rules: its declared vocabulary, name and version."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def vocabulary(self) -> Vocabulary: ...


class RoutesByModel(Protocol):
    """What a vocabulary is read from in a router with a classifier (``HybridRouter`` is
    one): its labels, out-of-scope label, label map, model exits and rules."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def classes(self) -> Sequence[str]: ...

    @property
    def oos_label(self) -> str | None: ...

    @property
    def destinations(self) -> Mapping[str, str]: ...

    @property
    def model_destinations(self) -> Sequence[str]: ...

    @property
    def rules(self) -> RoutesByRules: ...


def _by_model(router: RoutesByModel | RoutesByRules) -> TypeGuard[RoutesByModel]:
    return hasattr(router, "classes")


def _by_rules(router: RoutesByModel | RoutesByRules) -> TypeGuard[RoutesByRules]:
    return not hasattr(router, "classes")


class VocabularyConflictError(ArtifactError):
    """A router version is registered in the log with another vocabulary (its labels,
    out-of-scope label or destinations differ): a changed router needs a new version."""


def create_routers_sql(table: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of the routers table (the same in both dialects)."""
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n"
        "    router TEXT NOT NULL,\n    router_version TEXT NOT NULL,\n"
        "    labels TEXT NOT NULL,\n    oos_label TEXT,\n    destinations TEXT NOT NULL,\n"
        "    registered_at TEXT NOT NULL,\n    PRIMARY KEY (router, router_version)\n)"
    )


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(f"{what} must be a non-empty string, got {type(value).__name__}")
    if len(value) > MAX_CHARS:
        raise UserInputError(f"{what} is longer than {MAX_CHARS} characters")
    problem = describe_bad_char(value)
    if problem is not None:
        raise UserInputError(f"{what} {problem}")
    return value


def _names(values: Any, what: str, *, empty: bool = False) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise UserInputError(f"{what} must be a list of names, got {type(values).__name__}")
    out = sorted({_name(v, f"a name in {what}") for v in values})
    if not out and not empty:
        raise UserInputError(f"{what} must name at least one")
    if len(out) > MAX_NAMES:
        raise UserInputError(f"{what} names more than {MAX_NAMES:,}")
    return tuple(out)


def shown(names: Sequence[str]) -> str:
    """The first names of a list for a message (``a, b, c ... and 40 more``)."""
    head = ", ".join(names[:_SHOWN])
    return head if len(names) <= _SHOWN else f"{head} ... and {len(names) - _SHOWN} more"


@dataclass(frozen=True, slots=True)
class RouterVocabulary:
    """What the outcomes of one router version may name.

    Build it with :meth:`of` (checked) or :meth:`from_router`.

    Attributes
    ----------
    router, router_version : str
        The router's name and version (as its decisions record them).
    labels : tuple of str
        The classifier's labels, sorted (none for a rules-only router).
    oos_label : str or None
        The label that means out of scope (also a valid gold intent), if any.
    destinations : tuple of str
        Every next step the version may select (the rules' declared destinations and the
        policy's exits), sorted.
    """

    router: str
    router_version: str
    labels: tuple[str, ...]
    oos_label: str | None
    destinations: tuple[str, ...]

    @classmethod
    def of(
        cls,
        router: object,
        router_version: object,
        *,
        labels: object,
        oos_label: object = None,
        destinations: object,
    ) -> RouterVocabulary:
        """A checked vocabulary (raises :class:`~hybridroute.exceptions.UserInputError`
        naming what is wrong): the values may be anything (read from a log, or given)."""
        return cls(
            _name(router, "router"),
            _name(router_version, "router_version"),
            _names(labels, "labels", empty=True),
            None if oos_label is None else _name(oos_label, "oos_label"),
            _names(destinations, "destinations"),
        )

    @classmethod
    def from_router(cls, router: RoutesByModel | RoutesByRules) -> RouterVocabulary:
        """The vocabulary of a :class:`~hybridroute.router.HybridRouter`: its classifier's
        labels, its out-of-scope label, and every destination it may select (the rule
        set's declared destinations, the label map's and the policy's exits); of a
        :class:`~hybridroute.rules.RuleSet` (rules only): no label, its destinations."""
        if _by_rules(router):  # a rule set routing alone
            return cls.of(
                router.name,
                router.version,
                labels=(),
                destinations=router.vocabulary.destinations,
            )
        if not _by_model(router):  # pragma: no cover - one of the two, always
            raise TypeError(f"not a router: {type(router).__name__}")
        destinations = set(router.rules.vocabulary.destinations)
        destinations.update(router.destinations.values())
        destinations.update(router.model_destinations)
        return cls.of(
            router.name,
            router.version,
            labels=router.classes,
            oos_label=router.oos_label,
            destinations=destinations,
        )

    @property
    def key(self) -> tuple[str, str]:
        """``(router, router_version)``."""
        return self.router, self.router_version

    @property
    def gold_intents(self) -> frozenset[str]:
        """The labels a gold intent may be: the labels and the out-of-scope label."""
        extra = () if self.oos_label is None else (self.oos_label,)
        return frozenset((*self.labels, *extra))

    def intent_problem(self, value: str) -> str | None:
        """Why ``value`` cannot be a gold intent of this version (``None``: it can)."""
        if value in self.gold_intents:
            return None
        oos = "" if self.oos_label is None else f"; out of scope: {self.oos_label}"
        which = f"router {self.router!r} version {self.router_version!r}"
        if not self.gold_intents:
            return f"is not a label of {which}: it routes by rules only (give gold_next_step)"
        return f"is not a label of {which} (labels: {shown(self.labels)}{oos})"

    def next_step_problem(self, value: str) -> str | None:
        """Why ``value`` cannot be a gold next step of this version (``None``: it can)."""
        if value in self.destinations:
            return None
        return (
            f"is not a destination of router {self.router!r} version {self.router_version!r} "
            f"(destinations: {shown(self.destinations)})"
        )

    def gold_problem(self, outcome: Any) -> str | None:
        """Why a stored outcome (a mapping with ``gold_intent`` / ``gold_next_step``) names
        what this version does not know (``None``: every gold it gives is known)."""
        intent, step = outcome.get("gold_intent"), outcome.get("gold_next_step")
        if intent is not None and intent not in self.gold_intents:
            return "gold_intent is not a label of the router version"
        if step is not None and step not in self.destinations:
            return "gold_next_step is not a destination of the router version"
        return None

    def same_as(self, other: RouterVocabulary) -> bool:
        """Whether ``other`` names the same labels, out-of-scope label and destinations."""
        return (self.labels, self.oos_label, self.destinations) == (
            other.labels,
            other.oos_label,
            other.destinations,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: the fields by name."""
        return {
            "router": self.router,
            "router_version": self.router_version,
            "labels": list(self.labels),
            "oos_label": self.oos_label,
            "destinations": list(self.destinations),
        }


def _dump(names: Sequence[str]) -> str:
    return json.dumps(list(names), ensure_ascii=False, separators=(",", ":"))


def _from_row(row: Sequence[Any], where: str | None) -> RouterVocabulary:
    router, version, labels, oos_label, destinations = row[:5]
    try:
        return RouterVocabulary.of(
            router,
            version,
            labels=json.loads(labels),
            oos_label=oos_label,
            destinations=json.loads(destinations),
        )
    except (ValueError, TypeError, UserInputError) as exc:
        raise ArtifactError(
            f"the log's registration of router {router!r} version {version!r} is damaged ({exc})",
            path=where,
        ) from None


def _select(table: str) -> str:
    return f"SELECT {', '.join(ROUTER_COLUMNS[:5])} FROM {table}"


def read_vocabularies(
    query: Query, table: str, *, where: str | None = None
) -> dict[tuple[str, str], RouterVocabulary]:
    """Every registered vocabulary, by ``(router, router_version)``."""
    rows = query(f"{_select(table)} ORDER BY router, router_version", ())
    return {(r[0], r[1]): _from_row(r, where) for r in rows}


def vocabularies_of(
    query: Query, table: str, keys: Iterable[tuple[str, str]], *, where: str | None = None
) -> dict[tuple[str, str], RouterVocabulary]:
    """The registered vocabularies of ``keys`` (those registered; one query per key)."""
    found: dict[tuple[str, str], RouterVocabulary] = {}
    for router, version in sorted(set(keys)):
        rows = query(f"{_select(table)} WHERE router = ? AND router_version = ?", (router, version))
        if rows:
            found[(router, version)] = _from_row(rows[0], where)
    return found


def register_vocabulary(
    tx: Any, table: str, vocab: RouterVocabulary, *, registered_at: str, where: str | None
) -> tuple[RouterVocabulary, bool]:
    """Insert ``vocab`` unless its version is registered (in the caller's transaction).

    Returns the registered vocabulary and whether this call wrote it.

    Raises
    ------
    VocabularyConflictError
        The version is registered with another vocabulary (an ArtifactError).
    """
    stored = vocabularies_of(tx.query, table, [vocab.key], where=where).get(vocab.key)
    if stored is None:
        columns = ", ".join(ROUTER_COLUMNS)
        tx.insert(
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(ROUTER_COLUMNS))})",
            [
                (
                    vocab.router,
                    vocab.router_version,
                    _dump(vocab.labels),
                    vocab.oos_label,
                    _dump(vocab.destinations),
                    registered_at,
                )
            ],
        )
        return vocab, True
    if stored.same_as(vocab):
        return stored, False
    differs = [
        what
        for what, a, b in (
            ("labels", stored.labels, vocab.labels),
            ("out-of-scope label", stored.oos_label, vocab.oos_label),
            ("destinations", stored.destinations, vocab.destinations),
        )
        if a != b
    ]
    raise VocabularyConflictError(
        f"router {vocab.router!r} version {vocab.router_version!r} is registered in this log "
        f"with other {' and '.join(differs)}: a router whose labels or destinations changed "
        "needs a new version",
        path=where,
    )
