"""Experiment specs: validation errors name the file and the field; kinds resolve through one mapping."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hybridroute.experiments as experiments
from hybridroute.exceptions import SpecError, UserInputError
from hybridroute.experiments import KINDS, ExperimentKind, load_spec, parse_spec
from hybridroute.experiments.kinds import (
    OutOfScopeExperiment,
    RouterExperiment,
    ThresholdsExperiment,
)

from .conftest import SHIPPED

THRESHOLDS = """
kind: thresholds
name: t
dataset: {name: banking77}
methods: [{method: fixed, threshold: 0.8}, empirical, certified]
targets: [0.9, 0.95]
"""


def spec_text(base: str = THRESHOLDS, **replace: str) -> str:
    """``base`` with top-level lines replaced (``key=None`` drops the key)."""
    lines = []
    seen = set()
    for line in textwrap.dedent(base).strip().splitlines():
        key = line.split(":", 1)[0]
        if key in replace:
            seen.add(key)
            if replace[key] is not None:
                lines.append(f"{key}: {replace[key]}")
        else:
            lines.append(line)
    lines += [f"{k}: {v}" for k, v in replace.items() if k not in seen and v is not None]
    return "\n".join(lines) + "\n"


def test_public_names_are_pinned():
    assert experiments.__all__ == [
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


def test_kinds_resolve_through_one_mapping():
    assert KINDS == {
        "thresholds": ThresholdsExperiment,
        "oos": OutOfScopeExperiment,
        "router": RouterExperiment,
    }
    for name, cls in KINDS.items():
        assert issubclass(cls, ExperimentKind) and cls.name == name
        keys = [c.key for c in cls.columns]
        assert len(keys) == len(set(keys))
        assert [c.role for c in cls.columns if c.role == "config"], f"{name} has no config column"
        for c in cls.columns:
            assert c.role in ("config", "metric")
            for k in (*c.parts, *(c.ci or ())):
                assert k in keys
    assert {k for k, c in KINDS.items() if c.has_resplits} == {"thresholds", "oos"}


def test_a_valid_spec_fills_in_defaults():
    spec = parse_spec(spec_text(seed="7"), path="exp.yaml")
    assert spec.kind == "thresholds" and spec.seed == 7 and spec.path == "exp.yaml"
    assert spec.splits == {"train": ("train",), "pool": ("test",)}
    assert spec.classifier_params == {"random_state": 7}
    s = spec.settings
    assert s["targets"] == (0.9, 0.95) and s["delta"] == 0.05 and s["resplits"] == 100
    assert s["calibrator"] == {"method": "temperature", "fraction": 0.3}
    assert [m["label"] for m in s["methods"]] == ["fixed 0.8", "empirical", "certified"]
    assert s["methods"][0]["threshold"] == 0.8
    assert spec.with_settings(resplits=3).settings["resplits"] == 3
    assert spec.with_settings(resplits=3).sha256 != spec.sha256
    assert parse_spec(spec_text(seed="7")).sha256 == spec.sha256


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"kind": "bogus"}, "kind", "must be one of thresholds, oos, router"),
        ({"kind": None}, "kind", "missing"),
        ({"name": None}, "name", "missing"),
        ({"format": "2"}, "format", "not supported"),
        ({"seed": "-1"}, "seed", r"must be in \[0"),
        ({"seed": "1.5"}, "seed", "must be an integer"),
        ({"surprise": "1"}, "surprise", "unknown key"),
        ({"scores": "[entropy]"}, "scores", "unknown key"),  # an oos field on a thresholds spec
        ({"dataset": None}, "dataset", "missing"),
        (
            {"dataset": "{name: banking77, splits: {holdout: test}}"},
            "dataset.splits.holdout",
            "unknown key",
        ),
        (
            {"dataset": "{name: banking77, splits: {pool: [test, test]}}"},
            "dataset.splits.pool",
            "twice",
        ),
        ({"dataset": "{splits: {pool: test}}"}, "dataset.name", "missing"),
        ({"classifier": "{kind: llm}"}, "classifier.kind", "must be one of local"),
        ({"classifier": "{params: {C: 3}}"}, "classifier.params.C", "unknown key"),
        ({"classifier": "{params: {Cs: [1, -2]}}"}, "classifier.params.Cs", "positive"),
        (
            {"classifier": "{params: {char_ngram_range: [2]}}"},
            "classifier.params.char_ngram_range",
            "pair",
        ),
        ({"targets": None}, "targets", "missing"),
        ({"targets": "[]"}, "targets", "must not be empty"),
        ({"targets": "[0.9, 1.2]"}, "targets[1]", r"must be in \(0, 1\)"),
        ({"targets": "[0.9, 0.9]"}, "targets", "repeats"),
        ({"targets": "0.9"}, "targets", "must be a list"),
        ({"delta": "0"}, "delta", r"must be in \(0, 1\)"),
        ({"resplits": "0"}, "resplits", r"must be in \[1"),
        ({"resplits": "ten"}, "resplits", "must be an integer"),
        ({"calibration_fraction": "1"}, "calibration_fraction", r"must be in \(0, 1\)"),
        (
            {"calibrator": "platt"},
            "calibrator.method",
            "must be one of temperature, isotonic, none",
        ),
        (
            {"calibrator": "{method: temperature, fraction: 1}"},
            "calibrator.fraction",
            r"must be in \[0, 1\)",
        ),
        ({"methods": None}, "methods", "missing"),
        ({"methods": "[magic]"}, "methods[0].method", "must be one of fixed, empirical, certified"),
        ({"methods": "[{method: fixed}]"}, "methods[0].threshold", "missing"),
        (
            {"methods": "[{method: fixed, threshold: 1.5}]"},
            "methods[0].threshold",
            r"must be in \(0, 1\]",
        ),
        (
            {"methods": "[empirical, {method: certified, n_starts: 0}]"},
            "methods[1].n_starts",
            "must be in",
        ),
        (
            {"methods": "[{method: empirical, threshold: 0.5}]"},
            "methods[0].threshold",
            "unknown key",
        ),
        ({"methods": "[{method: empirical, score: logit}]"}, "methods[0].score", "calibrated, raw"),
        ({"methods": "[empirical, empirical]"}, "methods[1].label", "used twice"),
    ],
)
def test_spec_errors_name_the_field(changes, field, message):
    with pytest.raises(SpecError, match=message) as info:
        parse_spec(spec_text(**changes), path="bad.yaml")
    assert info.value.field == field
    assert info.value.path == "bad.yaml"
    assert str(info.value).startswith(f"bad.yaml, field {field!r}: ")
    assert isinstance(info.value, UserInputError)


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (
            "kind: oos\nname: o\ndataset: clinc150\ntargets: [0.9]\nscores: [vibes]\n",
            "scores[0]",
            "entropy",
        ),
        (
            "kind: oos\nname: o\ndataset: clinc150\ntargets: [0.9]\noos_label: 3\n",
            "oos_label",
            "string",
        ),
        ("kind: router\nname: r\ndataset: support-tickets\n", "policies", "missing"),
        (
            "kind: router\nname: r\ndataset: support-tickets\npolicies: [{objective: vibes}]\n",
            "policies[0].objective",
            "precision, empirical",
        ),
        (
            "kind: router\nname: r\ndataset: support-tickets\npolicies: [{objective: precision, target: 2}]\n",
            "policies[0].target",
            r"\(0, 1\)",
        ),
        (
            "kind: router\nname: r\ndataset: support-tickets\npolicies: [{objective: cost, costs: {lunch: 3}}]\n",
            "policies[0].costs.lunch",
            "unknown key",
        ),
        (
            "kind: router\nname: r\ndataset: support-tickets\npolicies: [{margin: maybe}]\n",
            "policies[0].margin",
            "true or false",
        ),
        (
            "kind: router\nname: r\ndataset: support-tickets\npolicies: [{}]\nn_boot: 5\n",
            "n_boot",
            "must be in",
        ),
        (
            "kind: router\nname: r\ndataset: support-tickets\npolicies: [{}]\nrouter: {nme: x}\n",
            "router.nme",
            "unknown key",
        ),
    ],
)
def test_kind_fields_are_validated(text, field, message):
    with pytest.raises(SpecError, match=message) as info:
        parse_spec(text)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the spec is empty"),
        ("- a list\n", "must be a mapping"),
        ("kind: [unclosed\n", "not valid safe YAML"),
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("kind: !!python/object:os.system {}\n", "Python tags|not valid safe YAML"),
        ("kind: !!python/name:os.system ''\n", "Python tags|not valid safe YAML"),
        ("a: [" * 20 + "]" * 20 + "\n", "nested too deeply"),
    ],
)
def test_unsafe_or_malformed_yaml_is_refused(text, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(text, path="x.yaml")


def test_load_spec_names_a_missing_or_binary_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read the spec") as info:
        load_spec(tmp_path / "nope.yaml")
    assert info.value.path == str(tmp_path / "nope.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(tmp_path / "bin.yaml")


def test_file_datasets_are_relative_to_the_spec(tmp_path):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "exp.yaml"
    path.write_text(spec_text(dataset="{name: csv:data/rows.csv}"), encoding="utf-8")
    assert load_spec(path).dataset == f"csv:{tmp_path / 'sub' / 'data' / 'rows.csv'}"
    path.write_text(spec_text(dataset="rows.jsonl"), encoding="utf-8")
    assert load_spec(path).dataset == str(tmp_path / "sub" / "rows.jsonl")


@pytest.mark.parametrize(
    ("name", "kind", "dataset"),
    [
        ("thresholds_banking77.yaml", "thresholds", "banking77"),
        ("oos_clinc150.yaml", "oos", "clinc150"),
        ("router_support_tickets.yaml", "router", "support-tickets"),
    ],
)
def test_the_shipped_specs_parse(name, kind, dataset):
    spec = load_spec(SHIPPED / name)
    assert spec.kind == kind and spec.dataset == dataset
    assert spec.seed == 0
    if kind == "thresholds":
        fixed = [m for m in spec.settings["methods"] if m["method"] == "fixed"]
        assert fixed and fixed[0]["threshold"] == 0.8  # the baseline comes from the spec
        assert {m["method"] for m in spec.settings["methods"]} == {
            "fixed",
            "empirical",
            "certified",
        }
    if kind == "oos":
        assert spec.splits["pool"] == ("validation", "test")
        assert spec.dataset_options == {"oos": "label"}
    if kind == "router":
        assert spec.settings["rules"] == "example:support_rules.yaml"
        assert len(spec.settings["policies"]) >= 2


# ------------------------------------------------------------------ issue 15


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        (THRESHOLDS + "targets: [0.5]\n", "targets", 7),
        (THRESHOLDS.replace("name: t\n", "name: t\nname: u\n"), "name", 4),
        ("kind: thresholds\nname: t\ndataset: {name: banking77, name: clinc150}\n", "name", 3),
        (
            "kind: thresholds\nname: t\ndataset:\n  name: banking77\n  splits: {}\n"
            "  splits: {train: train}\n",
            "splits",
            6,
        ),
        (
            "kind: thresholds\nname: t\nmethods:\n  - {method: fixed, threshold: 0.8, threshold: 0.1}\n",
            "threshold",
            4,
        ),
        ("seed: 0\nkind: thresholds\nseed: 1\n", "seed", 3),
    ],
)
def test_duplicate_keys_are_refused_with_their_line(text, key, line):
    with pytest.raises(SpecError, match=f"line {line}: duplicate key '{key}'") as info:
        parse_spec(text, path="exp.yaml")
    assert info.value.path == "exp.yaml" and "exp.yaml" in str(info.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.Inf", "1" * 70])
def test_non_finite_or_huge_numbers_are_refused(value):
    with pytest.raises(SpecError, match=r"line 3: .*(not finite|digits)"):
        parse_spec(f"kind: thresholds\nname: t\nseed: {value}\n", path="exp.yaml")


def _memory_bound() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _read_bounded(call: str, timeout: float = 60.0) -> str:
    """Run ``call`` in a child process under a time and memory bound (a reader that blocks
    on a FIFO or reads /dev/zero forever fails the test instead of hanging or eating
    memory); return ``"ErrorType|message"`` or ``"ok"``."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "try:\n"
        f"    {call}\n"
        "    print('ok')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__ + '|' + str(exc))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_non_regular_spec_files_are_refused(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "exp.yaml"
        os.mkfifo(path)
        match = "FIFO"
    elif kind == "dev_zero":
        path, match = Path("/dev/zero"), "character device"
    else:
        path, match = tmp_path, "directory"
    out = _read_bounded(f"from hybridroute.experiments import load_spec; load_spec({str(path)!r})")
    assert out.startswith("SpecError|"), out
    assert match in out and out.startswith(f"SpecError|{path}: cannot read the spec")


def test_an_oversized_spec_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(THRESHOLDS + "#" * 300_000 + "\n", encoding="utf-8")
    with pytest.raises(SpecError, match="larger than the limit of 262,144 bytes"):
        load_spec(path)


def test_cli_refuses_a_non_regular_spec_with_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "hybridroute", "experiment", "run", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_memory_bound,  # a regression reading /dev/zero fails, not swaps
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert "/dev/zero" in proc.stderr and "must be a regular file" in proc.stderr
