"""Calibration and threshold control: thresholds come from labelled data, never literals.

* Probability calibration -- :class:`TemperatureScaling`, :class:`IsotonicCalibration`.
* Threshold control, one class per technique, each fitted on ``(scores, correct)`` from a
  calibration split -- :class:`CertifiedPrecisionThreshold`,
  :class:`FallbackPrecisionThreshold` and :class:`LabelFreeStartThreshold` (finite-sample
  guarantees; three ways of spending delta along a fixed sequence),
  :class:`EmpiricalThreshold` (no guarantee; for experiments), :class:`CoverageThreshold`,
  :class:`CostThreshold`, :class:`PerClassThreshold`, :class:`MarginThreshold`,
  :class:`OutOfScopeThreshold`, :class:`ThreeWayThreshold`.
* Exact bounds and the sample-size planner -- :func:`clopper_pearson_lower`,
  :func:`required_calibration_size`, :func:`planned_calibration_size`.
* Evidence completeness with per-source thresholds -- :class:`EvidenceThresholds`,
  :func:`check_evidence`.
* Metrics -- ECE, Brier, NLL, AURC, risk–coverage and reliability data.
* The policy artifact -- :class:`Policy` (``save`` / ``load`` / ``apply``) and
  :func:`label_mix_departure`.
* The whole procedure, from a probability matrix and gold labels to a built policy --
  :func:`fit_policy` (what ``hybridroute calibrate`` runs).

The calibrators and threshold fitters follow scikit-learn's estimator API
(``get_params`` / ``set_params``, nested ``<component>__<parameter>`` names), so
:func:`sklearn.base.clone` works on them.

This package imports numpy, scipy and (lazily, for isotonic regression) scikit-learn;
never litellm, instructor or mlflow.
"""

from __future__ import annotations

from ._bounds import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    planned_calibration_size,
    precision_p_value,
    required_calibration_size,
)
from ._cost import CostThreshold
from ._coverage import CoverageThreshold
from ._drift import LabelMixDeparture, label_mix_departure
from ._evidence import (
    EvidenceItem,
    EvidenceResult,
    EvidenceThresholds,
    check_evidence,
    load_evidence_labels,
)
from ._fit import fit_policy
from ._isotonic import IsotonicCalibration
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
from ._oos import OutOfScopeThreshold
from ._per_class import PerClassThreshold
from ._policy import POLICY_FORMAT, POLICY_FORMAT_VERSION, Policy, PolicyOutcome
from ._precision import (
    CertifiedPrecisionThreshold,
    EmpiricalThreshold,
    MarginThreshold,
    ThresholdFitter,
)
from ._precision_fallback import FallbackPrecisionThreshold, LabelFreeStartThreshold
from ._temperature import TemperatureScaling
from ._three_way import ThreeWayThreshold

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
    "FallbackPrecisionThreshold",
    "IsotonicCalibration",
    "LabelFreeStartThreshold",
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
