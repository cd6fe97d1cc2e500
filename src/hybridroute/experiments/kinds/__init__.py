"""Experiment kinds, one file each, resolved through one name -> class mapping.

==============  ==============================================================
kind            measures
==============  ==============================================================
``thresholds``  a fixed threshold vs empirical vs certified thresholds: realised
                precision, coverage and violation rate over seeded resplits
``oos``         out-of-scope cut-offs for recall targets: realised recall, false
                alarms and accuracy of what passes over seeded resplits
``router``      the full hybrid router (rules -> classifier -> fitted policy) on
                a labelled set with gold next steps, one row per policy
==============  ==============================================================

A new kind is a module here with a subclass of :class:`ExperimentKind`, added to
:data:`KINDS`.
"""

from __future__ import annotations

from ._base import Column, ExperimentKind, KindOutput, Progress
from .oos import OutOfScopeExperiment
from .router import RouterExperiment
from .thresholds import ThresholdsExperiment

#: kind name -> class; the one place an experiment kind is resolved.
KINDS: dict[str, type[ExperimentKind]] = {
    k.name: k for k in (ThresholdsExperiment, OutOfScopeExperiment, RouterExperiment)
}

__all__ = [
    "KINDS",
    "Column",
    "ExperimentKind",
    "KindOutput",
    "OutOfScopeExperiment",
    "Progress",
    "RouterExperiment",
    "ThresholdsExperiment",
]
