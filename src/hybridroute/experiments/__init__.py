"""Experiments: YAML specs run into an MLflow parent run with one nested run per row.

>>> from hybridroute.experiments import run_experiment
>>> result = run_experiment("experiments/thresholds_banking77.yaml")  # doctest: +SKIP
>>> result.rows[0]["violation_rate"]                                  # doctest: +SKIP

* :func:`load_spec` / :func:`parse_spec` -- a safe YAML spec, validated into an
  :class:`ExperimentSpec`; mistakes raise :class:`~hybridroute.exceptions.SpecError`
  naming the file and the field.
* :data:`KINDS` -- experiment kinds by name (``thresholds``, ``oos``, ``router``), one
  module each under :mod:`hybridroute.experiments.kinds`.
* :func:`run_experiment` -- compute the comparison table (same spec and seed, same
  numbers), log it to MLflow (parent run: spec, table as JSON and CSV; nested runs: one
  per row, its numbers as metrics) and return an :class:`ExperimentResult`.

This package sits at the tracking layer; MLflow is imported only when a run is logged.
"""

from __future__ import annotations

from ._runner import ExperimentResult, run_experiment
from ._spec import SPEC_FORMAT, ExperimentSpec, load_spec, parse_spec
from .kinds import KINDS, Column, ExperimentKind

__all__ = [
    "KINDS",
    "SPEC_FORMAT",
    "Column",
    "ExperimentKind",
    "ExperimentResult",
    "ExperimentSpec",
    "load_spec",
    "parse_spec",
    "run_experiment",
]
