"""The options of fitting a policy: their defaults and their checks, written once.

:func:`fit_policy` and ``hybridroute calibrate`` both read their options through
:func:`fit_options`, so a default or a range lives in one place; the command line shows
these defaults and turns an :class:`OptionError` into a message naming its ``--option``.
The objectives and calibrators offered are the registries' (:data:`.techniques.OBJECTIVES`,
:data:`.calibrators.CALIBRATORS`).
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import FALLBACKS, HUMAN_REVIEW, check_fraction, check_nonnegative
from .calibrators import CALIBRATORS, NONE
from .techniques import OBJECTIVES, CostThreshold, Technique

__all__ = ["FitOptions", "OptionError"]

#: Calibrators ``fit_policy`` fits (``none`` only normalises the rows).
CALIBRATOR_CHOICES = (*CALIBRATORS, NONE)
COST_KEYS = ("misroute", "ask_user", "human_review")
_COST_DEFAULTS = CostThreshold().get_params(deep=False)
#: An option not given (its default is taken).
_DEFAULT: Any = object()


class OptionError(ValueError):
    """An option out of range or of the wrong kind; ``option`` is its ``fit_policy`` name."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True, slots=True, kw_only=True)
class FitOptions:
    """Checked options of :func:`fit_policy` (see it for what each means).

    ``FitOptions()`` holds the defaults ``fit_policy`` and ``hybridroute calibrate`` use
    (``target`` is then resolved from the objective: its technique's ``default_target``);
    :meth:`check` checks given options and fills in the rest. :data:`CHOICES` names what
    ``objective``, ``calibrator`` and ``fallback`` may be (the registries' names).

    Attributes
    ----------
    objective : str
        The auto-route technique's registry name (``precision``, ``coverage``, ``cost``...).
    target, delta : float
        The objective's target and the risk of missing it (for certified objectives).
    calibrator : str
        The probability calibrator's registry name (``temperature``, ``isotonic``, ``none``).
    calibrator_fraction : float
        Share of the calibration rows that fit the calibrator (the rest fit thresholds).
    seed : int
        Seed of the rows' permutation.
    oos_label : str or None
        The gold label of out-of-scope rows.
    margin, per_class : bool
        Fit a top-1/top-2 margin gate; fit one threshold per class.
    ask_target, precision_target : float
        Targets of the three-way objective's ask zone and auto-route zone.
    cost_misroute, cost_ask_user, cost_human_review : float
        The cost objective's costs (``cost_ask_user=None``: no ask-the-user zone).
    fallback : str
        Where an item no gate lets through goes (``human_review`` by default).
    """

    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "objective": tuple(OBJECTIVES),
        "calibrator": CALIBRATOR_CHOICES,
        "fallback": FALLBACKS,
    }

    objective: str = "precision"
    target: float = 0.95
    delta: float = 0.05
    calibrator: str = "temperature"
    calibrator_fraction: float = 0.3
    seed: int = 0
    oos_label: str | None = None
    margin: bool = False
    per_class: bool = False
    ask_target: float = 0.8
    precision_target: float = 0.95
    cost_misroute: float = _COST_DEFAULTS["cost_misroute"]
    cost_ask_user: float | None = _COST_DEFAULTS["cost_ask_user"]
    cost_human_review: float = _COST_DEFAULTS["cost_human_review"]
    fallback: str = HUMAN_REVIEW

    @property
    def technique(self) -> type[Technique]:
        """The class that builds this objective's thresholds."""
        return OBJECTIVES[self.objective]

    def objective_args(self) -> dict[str, Any]:
        """What the provenance records of the objective (``objective_args``)."""
        out: dict[str, Any] = {
            "objective": self.objective,
            "target": self.target,
            "delta": self.delta,
        }
        out.update({k: getattr(self, k) for k in self.technique.objective_options})
        return out

    @classmethod
    def check_parameters(cls) -> tuple[str, ...]:
        """The names :meth:`check` takes (``fit_policy``'s options)."""
        return tuple(inspect.signature(cls.check).parameters)

    @classmethod
    def check(
        cls,
        *,
        objective: Any = _DEFAULT,
        target: Any = None,
        delta: Any = _DEFAULT,
        calibrator: Any = _DEFAULT,
        calibrator_fraction: Any = _DEFAULT,
        seed: Any = _DEFAULT,
        oos_label: Any = None,
        margin: Any = False,
        per_class: Any = False,
        ask_target: Any = _DEFAULT,
        precision_target: Any = _DEFAULT,
        costs: Any = None,
        fallback: Any = _DEFAULT,
    ) -> FitOptions:
        """Check ``fit_policy``'s options and fill in their defaults (one place for both).

        Parameters
        ----------
        objective, target, delta, calibrator, calibrator_fraction, seed, oos_label, margin, \
per_class, ask_target, precision_target, costs, fallback
            As :func:`fit_policy` takes them (``costs`` a mapping with keys ``misroute``,
            ``ask_user``, ``human_review``; missing keys take their defaults). An option
            not given takes its default.

        Returns
        -------
        FitOptions

        Raises
        ------
        OptionError
            A ``ValueError`` naming the option at fault.
        """
        d = cls()
        objective, calibrator, fallback = (
            _given(objective, d.objective),
            _given(calibrator, d.calibrator),
            _given(fallback, d.fallback),
        )
        objective = _choice(objective, tuple(OBJECTIVES), "objective")
        calibrator = _choice(calibrator, CALIBRATOR_CHOICES, "calibrator")
        fallback = _choice(fallback, FALLBACKS, "fallback")
        technique = OBJECTIVES[objective]
        fractions = {
            "target": technique.default_target if target is None else target,
            "delta": _given(delta, d.delta),
            "ask_target": _given(ask_target, d.ask_target),
            "precision_target": _given(precision_target, d.precision_target),
        }
        checked = {name: _checked(check_fraction, value, name) for name, value in fractions.items()}
        calibrator_fraction = _checked(
            lambda v, n: check_fraction(v, n, open_low=False),
            _given(calibrator_fraction, d.calibrator_fraction),
            "calibrator_fraction",
        )
        seed = _given(seed, d.seed)
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise OptionError("seed", f"seed must be a non-negative integer, got {seed!r}")
        for name, flag in (("margin", margin), ("per_class", per_class)):
            if not isinstance(flag, bool | np.bool_):
                raise OptionError(name, f"{name} must be True or False, got {flag!r}")
        if per_class and not technique.takes_per_class:
            works = [k for k, t in OBJECTIVES.items() if t.takes_per_class]
            raise OptionError(
                "per_class",
                f"per_class works with the {', '.join(works)} objectives, not {objective}",
            )
        cost_args = _costs(costs)
        if oos_label is not None and not isinstance(oos_label, str):
            raise OptionError("oos_label", f"oos_label must be a string or None, got {oos_label!r}")
        return cls(
            objective=objective,
            calibrator=calibrator,
            calibrator_fraction=calibrator_fraction,
            seed=int(seed),
            oos_label=oos_label,
            margin=bool(margin),
            per_class=bool(per_class),
            fallback=fallback,
            **checked,
            **cost_args,
        )


def _given(value: Any, default: Any) -> Any:
    return default if value is _DEFAULT else value


def _checked(check: Any, value: Any, name: str, option: str | None = None) -> Any:
    try:
        return check(value, name)
    except ValueError as exc:
        raise OptionError(option or name, str(exc)) from None


def _choice(value: Any, allowed: tuple[str, ...], name: str) -> str:
    # str() turns a StrEnum member into its value
    v = str(value) if isinstance(value, str) else value
    if v not in allowed:
        raise OptionError(name, f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return str(v)


def _costs(costs: Mapping[str, float | None] | None) -> dict[str, Any]:
    """``cost_misroute`` / ``cost_ask_user`` / ``cost_human_review`` as plain floats."""
    given: Mapping[str, float | None] = {} if costs is None else costs
    if not isinstance(given, Mapping):
        raise OptionError("costs", f"costs must be a mapping with keys {', '.join(COST_KEYS)}")
    unknown = sorted(set(given) - set(COST_KEYS))
    if unknown:
        raise OptionError(
            "costs",
            f"unknown cost {', '.join(map(repr, unknown))}; the costs are {', '.join(COST_KEYS)}",
        )
    out: dict[str, Any] = {}
    for key in COST_KEYS:
        name = f"cost_{key}"
        value = given.get(key, _COST_DEFAULTS[name])
        if value is None and key == "ask_user":
            out[name] = None
        else:
            out[name] = _checked(check_nonnegative, value, f"costs[{key!r}]", name)
    return out
