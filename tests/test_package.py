"""The package surface: pinned public names, a light import, offline defaults, a fast --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import hybridroute

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
