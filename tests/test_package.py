"""The package surface: pinned public names, a light import, offline defaults, a fast --help."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import hybridroute
from hybridroute import exceptions

HEAVY = ("litellm", "instructor", "mlflow", "matplotlib", "openai", "sklearn", "torch")


def run_py(code: str, env: dict | None = None) -> str:
    full_env = {k: v for k, v in os.environ.items()}
    if env is not None:
        full_env.update(env)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=full_env
    )
    return out.stdout


def test_public_names_are_pinned():
    assert hybridroute.__all__ == [
        "__version__",
        "Decision",
        "FactSchema",
        "FactSpec",
        "GENERIC_DESTINATIONS",
        "ReasonCode",
        "Rule",
        "RuleSet",
        "Stage",
        "Vocabulary",
        "load_rules",
    ]
    for name in hybridroute.__all__:
        assert getattr(hybridroute, name) is not None


# Every subpackage's public names, pinned (DESIGN.md habit 3). A change to a public surface
# is a decision: update the list here in the same change (`python tests/test_package.py`
# prints the block for the names as they are now).
PUBLIC_NAMES = {
    "calibration": """
        CertifiedPrecisionThreshold CostThreshold CoverageThreshold EmpiricalThreshold
        EvidenceItem EvidenceResult EvidenceThresholds FitOptions IsotonicCalibration
        LabelMixDeparture MarginThreshold OutOfScopeThreshold POLICY_FORMAT
        POLICY_FORMAT_VERSION PerClassThreshold Policy PolicyOutcome ReliabilityDiagram
        RiskCoverageCurve TemperatureScaling ThreeWayThreshold ThresholdFitter aurc
        brier_score check_evidence check_leakage clopper_pearson_lower clopper_pearson_upper
        coverage_at excess_aurc expected_calibration_error fit_policy label_mix_departure
        load_evidence_labels negative_log_likelihood planned_calibration_size precision_at
        precision_p_value reliability_diagram required_calibration_size risk_coverage_curve
    """.split(),
    "classifiers": """
        CascadeClassifier EmbeddingClassifier IntentClassifier LLMClassifier LocalClassifier
        PromptTemplate RankedLabels RetrySettings load_classifier
    """.split(),
    "contracts": """
        Decision FactSchema FactSpec GENERIC_DESTINATIONS MAX_REQUEST_ID_CHARS RECORD_VERSION
        ReasonCode RouteRequest Stage Vocabulary canonical_json snapshot_hash
    """.split(),
    "datasets": """
        FactProblem LabelledSet SkippedRow SplitPlan list_datasets load_dataset make_splits
    """.split(),
    "evaluation": """
        Evaluation LabelledStream StreamEvaluation bootstrap_ci compare evaluate_classifier
        evaluate_router evaluate_stream macro_f1 mcnemar paired_bootstrap write_report
    """.split(),
    "exceptions": """
        ArtifactError ClassifierError ConditionError DatasetError DatasetUnavailableError
        DuplicateDecisionError FactsError HybridRouteError InputError LLMError LLMLabelError
        LLMTimeoutError LLMTransportError NotFittedError RequestIdConflictError RuleSetError
        RulesFileError ServiceError ServiceUnavailableError SpecError TrackingError
        UndeclaredValueError UserInputError
    """.split(),
    "experiments": """
        Column ExperimentKind ExperimentResult ExperimentSpec KINDS SPEC_FORMAT load_spec
        parse_spec run_experiment
    """.split(),
    "records": """
        AUDIT_KEY_ENV AuditSampler DecisionLog DriftReport LoggedDecision OUTCOME_SOURCES
        OutcomeError OutcomeReport REDACTED Redactor ReplayReport SCHEMA_VERSION
        ShadowReport drift_report open_log psi record_to_decision replay shadow_disagreement
    """.split(),
    "service": "ServiceConfig create_app".split(),
    "client": "AsyncRouterClient RetrySettings RouteResult RouterClient".split(),
    "monitoring": """
        BettingConfidenceSequence MONITOR_STATES PrecisionMonitor PromotionReport Recalibration
        TrafficShift labels_to_certify monitor_log promotion_gate recalibrate_from_log
        repeated_clopper_pearson traffic_shift
    """.split(),
    "router": """
        CheckedRequest HybridRouter load_router router_node save_router
    """.split(),
    "rules": """
        ConditionError GUARDS Rule RuleMatch RuleSet check_rule_tests compile_condition
        diff_rules lint_rules load_rule_tests load_rules parse_rules reference_fact_schema
        reference_rules run_rule_tests
    """.split(),
    "scores": """
        MAX_SCORES_BYTES MAX_SCORES_BYTES_ENV PER_CLASS SCORES_FORMAT SCORES_FORMAT_VERSION
        ScoresTable TOP_LABEL calibrate_scores evaluate_scores read_scores
    """.split(),
    "spark": """
        ITEM_COLUMNS LoggedRouter RESULT_TYPE SparkEvaluation SparkRouter dataset_items
        evaluate_scored local_session log_router prepare_items read_decision_log
        replay_records router_udf
    """.split(),
    "testing": """
        ClassifierPolicy EXCLUSIVE_FAULTS FAULT_KINDS HashPolicy LabelMapPolicy
        ObeyInjections StandInAnswer StandInLLM StandInProcess parse_fault_rates
    """.split(),
    "tracking": """
        LoggedRouter RouterModel Tracker code_revision default_tracking_uri
        load_router_model log_evaluation log_monitor log_router_model log_router_run
        router_spark_udf
    """.split(),
}


@pytest.mark.parametrize("package", sorted(PUBLIC_NAMES))
def test_subpackage_public_names_are_pinned(package):
    module = importlib.import_module(f"hybridroute.{package}")
    names = list(module.__all__)
    assert len(names) == len(set(names)), f"hybridroute.{package}.__all__ repeats a name"
    assert sorted(names) == PUBLIC_NAMES[package]
    for name in names:
        assert getattr(module, name) is not None, name


def test_every_subpackage_is_pinned():
    root = Path(hybridroute.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py")} - {"cli"}
    modules = {p.stem for p in root.glob("*.py") if not p.stem.startswith("_")}
    assert packages | modules == set(PUBLIC_NAMES)


def _drawn_hierarchy() -> dict[str, str]:
    """``{class: parent}`` as the tree in hybridroute.exceptions' docstring draws it."""
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in (exceptions.__doc__ or "").splitlines():
        m = re.match(r"([ │├└─]*)([A-Z][A-Za-z]+Error)\b", line)
        if not m:
            continue
        depth, name = len(m.group(1)), m.group(2)  # the column the name starts in
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            drawn[name] = stack[-1][1]
        stack.append((depth, name))
    return drawn


def test_the_exception_hierarchy_is_drawn_as_it_is():
    drawn = _drawn_hierarchy()
    public = set(exceptions.__all__) - {"HybridRouteError"}
    assert set(drawn) == public
    for name, parent in drawn.items():
        assert getattr(exceptions, name).__bases__[0] is getattr(exceptions, parent), name


@pytest.mark.parametrize("text", ["a ==", "a ! b", "(a", "x in", "'unterminated"])
def test_condition_errors_join_the_hierarchy(text):
    from hybridroute.rules import ConditionError, compile_condition

    assert ConditionError is exceptions.ConditionError
    with pytest.raises(exceptions.UserInputError):
        compile_condition(text)
    with pytest.raises(ValueError):  # callers that catch ValueError keep working
        compile_condition(text)


def test_import_is_light():
    loaded = json.loads(
        run_py("import sys, json, hybridroute; print(json.dumps(sorted(sys.modules)))")
    )
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]


def test_public_names_resolve_without_heavy_imports():
    code = (
        "import sys, json, hybridroute\n"
        "for n in hybridroute.__all__: getattr(hybridroute, n)\n"
        "import hybridroute.classifiers, hybridroute.rules\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(run_py(code))
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]


def test_offline_defaults_are_set_unless_user_chose():
    code = "import os, hybridroute; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'], os.environ['MLFLOW_DISABLE_TELEMETRY'])"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LITELLM_LOCAL_MODEL_COST_MAP", "MLFLOW_DISABLE_TELEMETRY")
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["True", "true"]
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "False"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["False", "true"]


def test_help_is_fast_and_light():
    code = (
        "import sys, json, time\n"
        "t = time.perf_counter()\n"
        "from hybridroute.cli import main\n"
        "rc = None\n"
        "try:\n    rc = main(['--help'])\nexcept SystemExit as e:\n    rc = e.code\n"
        "sys.stderr.write(json.dumps({'rc': rc, 's': time.perf_counter() - t, 'mods': sorted(sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    res = json.loads(out.stderr)
    assert res["rc"] == 0
    assert not [m for m in res["mods"] if m.split(".")[0] in HEAVY]
    assert "route" in out.stdout
    # Wall-clock of the whole console command, generous for a loaded CI machine.
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hybridroute", "--help"], capture_output=True, check=True)
    assert time.perf_counter() - t0 < 3.0


def _pins_now() -> str:
    """The ``PUBLIC_NAMES`` block for the public names as they are now."""
    lines = ["PUBLIC_NAMES = {"]
    for package in sorted(PUBLIC_NAMES):
        names = sorted(importlib.import_module(f"hybridroute.{package}").__all__)
        lines.append(f'    "{package}": """')
        lines += [f"        {line}" for line in textwrap.wrap(" ".join(names), width=84)]
        lines.append('    """.split(),')
    return "\n".join([*lines, "}"])


if __name__ == "__main__":  # pragma: no cover
    print(_pins_now())
