"""Calibration and threshold control: thresholds come from labelled data, never literals.

* Probability calibration -- :class:`TemperatureScaling`, :class:`IsotonicCalibration`.
* Threshold control, one class per technique (``techniques/``: one file each and one
  name -> class registry), each fitted on ``(scores, correct)`` from a calibration split,
  deciding for one item, writing its state and checking its own certificate when read back
  -- :class:`CertifiedPrecisionThreshold` (a finite-sample guarantee),
  :class:`EmpiricalThreshold` (no guarantee; for experiments), :class:`CoverageThreshold`,
  :class:`CostThreshold`, :class:`PerClassThreshold`, :class:`MarginThreshold`,
  :class:`OutOfScopeThreshold`, :class:`ThreeWayThreshold`. Two research fitters that
  spend delta along the sequence otherwise live in :mod:`.experimental`.
* Exact bounds and the sample-size planner -- :func:`clopper_pearson_lower`,
  :func:`required_calibration_size`, :func:`planned_calibration_size`.
* Evidence completeness with per-source thresholds -- :class:`EvidenceThresholds`,
  :func:`check_evidence`.
* Metrics -- ECE, Brier, NLL, AURC, risk–coverage and reliability data.
* The policy artifact -- :class:`Policy` (``save`` / ``load`` / ``apply``), a frozen chain
  of fitted parts in a sealed envelope, and :func:`label_mix_departure`.
* The whole procedure, from a probability matrix and gold labels to a built policy --
  :func:`fit_policy` (what ``hybridroute calibrate`` runs), its options and their defaults
  (:class:`FitOptions`), and the check that the model was not trained on the calibration
  rows (:func:`check_leakage`).

The calibrators and threshold fitters follow scikit-learn's estimator API
(``get_params`` / ``set_params``, nested ``<component>__<parameter>`` names), so
:func:`sklearn.base.clone` works on them.

This package imports numpy, scipy (when a bound or a fit needs it) and (lazily, for
isotonic regression) scikit-learn; never litellm, instructor or mlflow.
"""

from __future__ import annotations

from ._bounds import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    planned_calibration_size,
    precision_p_value,
    required_calibration_size,
)
from ._drift import LabelMixDeparture, label_mix_departure
from ._evidence import (
    EvidenceItem,
    EvidenceResult,
    EvidenceThresholds,
    check_evidence,
    load_evidence_labels,
)
from ._fit import check_leakage, fit_policy
from ._metrics import (
    ReliabilityDiagram,
    RiskCoverageCurve,
    aurc,
    brier_score,
    coverage_at,
    excess_aurc,
    expected_calibration_error,
    negative_log_likelihood,
    precision_at,
    reliability_diagram,
    risk_coverage_curve,
)
from ._options import FitOptions
from ._policy import POLICY_FORMAT, POLICY_FORMAT_VERSION, Policy, PolicyOutcome
from .calibrators import IsotonicCalibration, TemperatureScaling
from .techniques import (
    CertifiedPrecisionThreshold,
    CostThreshold,
    CoverageThreshold,
    EmpiricalThreshold,
    MarginThreshold,
    OutOfScopeThreshold,
    PerClassThreshold,
    ThreeWayThreshold,
    ThresholdFitter,
)

__all__ = [
    "POLICY_FORMAT",
    "POLICY_FORMAT_VERSION",
    "CertifiedPrecisionThreshold",
    "CostThreshold",
    "CoverageThreshold",
    "EmpiricalThreshold",
    "EvidenceItem",
    "EvidenceResult",
    "EvidenceThresholds",
    "FitOptions",
    "IsotonicCalibration",
    "LabelMixDeparture",
    "MarginThreshold",
    "OutOfScopeThreshold",
    "PerClassThreshold",
    "Policy",
    "PolicyOutcome",
    "ReliabilityDiagram",
    "RiskCoverageCurve",
    "TemperatureScaling",
    "ThreeWayThreshold",
    "ThresholdFitter",
    "aurc",
    "brier_score",
    "check_evidence",
    "check_leakage",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "coverage_at",
    "excess_aurc",
    "expected_calibration_error",
    "fit_policy",
    "label_mix_departure",
    "load_evidence_labels",
    "negative_log_likelihood",
    "planned_calibration_size",
    "precision_at",
    "precision_p_value",
    "reliability_diagram",
    "required_calibration_size",
    "risk_coverage_curve",
]
