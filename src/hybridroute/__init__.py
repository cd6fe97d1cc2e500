"""hybridroute: rule-plus-model hybrid routing with fitted thresholds and auditable decisions.

The public surface is small and listed in ``__all__``; everything else lives in private
modules. Names are resolved lazily (PEP 562), so ``import hybridroute`` stays fast and
imports none of litellm, instructor, mlflow or matplotlib. Offline-safe defaults for
litellm and MLflow are applied here, before either can be imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._offline import apply_offline_defaults
from ._version import __version__

apply_offline_defaults()

# public name -> module that defines it
_LAZY: dict[str, str] = {
    # contracts
    "Decision": "hybridroute.contracts",
    "FactSchema": "hybridroute.contracts",
    "FactSpec": "hybridroute.contracts",
    "GENERIC_DESTINATIONS": "hybridroute.contracts",
    "ReasonCode": "hybridroute.contracts",
    "Stage": "hybridroute.contracts",
    "Vocabulary": "hybridroute.contracts",
    # rules
    "Rule": "hybridroute.rules",
    "RuleSet": "hybridroute.rules",
    "load_rules": "hybridroute.rules",
}

__all__ = ["__version__", *sorted(_LAZY)]

if TYPE_CHECKING:  # pragma: no cover
    from .contracts import (
        GENERIC_DESTINATIONS,
        Decision,
        FactSchema,
        FactSpec,
        ReasonCode,
        Stage,
        Vocabulary,
    )
    from .rules import Rule, RuleSet, load_rules


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hybridroute' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
