from __future__ import annotations

import subprocess
import sys

import hybridroute.calibration as cal

PINNED = [
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


def test_public_names_are_pinned() -> None:
    assert sorted(cal.__all__) == sorted(PINNED)
    for name in PINNED:
        assert getattr(cal, name) is not None


def test_calibration_imports_no_llm_or_tracking_stack() -> None:
    # nor scikit-learn: the estimators implement its parameter API rather than inherit it,
    # so loading and applying a policy stays light (isotonic fitting imports it lazily)
    code = (
        "import sys, hybridroute.calibration as c;"
        "c.CertifiedPrecisionThreshold(0.9).set_params(delta=0.1).get_params();"
        "bad=[m for m in ('litellm','instructor','mlflow','matplotlib','openai','sklearn')"
        " if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_objects_have_docstrings() -> None:
    for name in PINNED:
        obj = getattr(cal, name)
        if callable(obj):
            assert obj.__doc__, name


def test_research_fitters_live_in_the_experimental_namespace() -> None:
    import hybridroute.calibration.experimental as experimental
    from hybridroute.calibration.techniques import TECHNIQUES

    assert sorted(experimental.__all__) == [
        "FallbackPrecisionThreshold",
        "LabelFreeStartThreshold",
        "fallback_starts",
    ]
    for name in ("FallbackPrecisionThreshold", "LabelFreeStartThreshold"):
        assert not hasattr(cal, name)
        # still techniques: a policy that holds one loads, its certificate checked
        cls = getattr(experimental, name)
        assert TECHNIQUES[cls.method] is cls and cls.__doc__
