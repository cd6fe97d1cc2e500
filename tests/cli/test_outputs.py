"""Each layer speaks its own words: the library names its parameters, the CLI its options."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridroute.calibration import CertifiedPrecisionThreshold
from hybridroute.cli import main
from hybridroute.cli._outputs import refuse_existing_output
from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.router._bundle import check_model_binding

from ..router.conftest import EXAMPLE, fitted_policy

CLI_WORDS = ("--force", "--out", "hybridroute ")
PYTHON_WORDS = ("overwrite=", "fit_policy(", "=True")


def _speaks_python(message: str) -> None:
    assert not [w for w in CLI_WORDS if w in message], message


def _speaks_cli(message: str) -> None:
    assert not [w for w in PYTHON_WORDS if w in message], message


@pytest.fixture(scope="module")
def support():
    from hybridroute.datasets import load_dataset

    return load_dataset("support-tickets")


@pytest.fixture(scope="module")
def local_clf(support):
    from hybridroute.classifiers import LocalClassifier

    train = support.split("train")
    return LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)


@pytest.fixture(scope="module")
def router(local_clf, support):
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    policy = fitted_policy(local_clf, support, CertifiedPrecisionThreshold(0.85, 0.1))
    return HybridRouter(
        rules=load_rules(EXAMPLE), classifier=local_clf, policy=policy, name="s", version="1"
    )


@pytest.fixture
def occupied(tmp_path) -> Path:
    path = tmp_path / "taken"
    path.mkdir()
    (path / "something.txt").write_text("x")
    return path


# ------------------------------------------------------------------ the library


def test_save_router_names_its_parameter(router, occupied):
    with pytest.raises(UserInputError, match=r"not empty.*overwrite=True") as info:
        router.save(occupied)
    _speaks_python(str(info.value))


def test_save_classifier_names_its_parameter(local_clf, occupied):
    with pytest.raises(ArtifactError, match=r"not empty.*overwrite=True") as info:
        local_clf.save(occupied)
    _speaks_python(str(info.value))


def test_check_model_binding_names_the_python_call_by_default(local_clf, support, tmp_path):
    unbound = fitted_policy(local_clf, support, CertifiedPrecisionThreshold(0.85, 0.1))
    with pytest.raises(ArtifactError, match=r"is null.*fit_policy\(") as info:
        check_model_binding(unbound, local_clf, strict=True)
    _speaks_python(str(info.value))
    other = unbound.with_model_fingerprint("e" * 64)
    with pytest.raises(ArtifactError, match=r"fitted on model.*fit_policy\(") as info:
        check_model_binding(other, local_clf, strict=True)
    _speaks_python(str(info.value))
    with pytest.raises(ArtifactError, match="refit it with `my words`"):
        check_model_binding(other, local_clf, strict=True, refit_hint="`my words`")


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize("force", [False, True])
def test_refuse_existing_output_passes_absent_and_empty_directories(tmp_path, force):
    refuse_existing_output(tmp_path / "absent", force=force)
    (tmp_path / "empty").mkdir()
    refuse_existing_output(tmp_path / "empty", force=force)


@pytest.mark.parametrize("option", ["--out", "--output-dir"])
def test_refuse_existing_output_names_the_option(occupied, option):
    with pytest.raises(
        UserInputError, match=rf"^{option} .*taken: exists and is not empty.*--force"
    ):
        refuse_existing_output(occupied, force=False, option=option)
    refuse_existing_output(occupied, force=True, option=option)  # --force: the saver decides


@pytest.mark.parametrize("force", [False, True])
def test_refuse_existing_output_refuses_a_file(tmp_path, force):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(UserInputError, match=r"^--out .*file: exists and is not a directory"):
        refuse_existing_output(path, force=force)


def _build(local_clf, support, tmp_path: Path, out: Path, *extra: str) -> int:
    from hybridroute.classifiers._persistence import classifier_fingerprint

    model = tmp_path / "model"
    if not model.exists():
        local_clf.save(model)
        policy = fitted_policy(local_clf, support, CertifiedPrecisionThreshold(0.85, 0.1))
        policy.save(tmp_path / "unbound.json")
        policy.with_model_fingerprint(classifier_fingerprint(model)).save(tmp_path / "policy.json")
    args = ["router", "build", "--rules", str(EXAMPLE), "--model", str(model)]
    args += ["--name", "s", "--version", "1", "--out", str(out)]
    if "--policy" not in extra:
        args += ["--policy", str(tmp_path / "policy.json")]
    return main([*args, *extra])


def test_router_build_names_its_options(local_clf, support, tmp_path, occupied, capsys):
    assert _build(local_clf, support, tmp_path, occupied) == 2
    err = capsys.readouterr().err
    assert f"--out {occupied}: exists and is not empty" in err and "--force" in err
    _speaks_cli(err)
    assert err.count("\n") == 1
    # --force replaces a bundle, never another directory (the saver's check, neutral words)
    assert _build(local_clf, support, tmp_path, occupied, "--force") == 2
    err = capsys.readouterr().err
    assert "not a router bundle" in err
    _speaks_cli(err)
    bundle = tmp_path / "bundle"
    assert _build(local_clf, support, tmp_path, bundle) == 0
    assert _build(local_clf, support, tmp_path, bundle) == 2
    capsys.readouterr()
    assert _build(local_clf, support, tmp_path, bundle, "--force") == 0


def test_router_build_names_the_calibrate_command(local_clf, support, tmp_path, capsys):
    assert _build(local_clf, support, tmp_path, tmp_path / "b") == 0  # writes the parts
    capsys.readouterr()
    out = tmp_path / "b2"
    assert _build(local_clf, support, tmp_path, out, "--policy", str(tmp_path / "unbound.json"))
    err = capsys.readouterr().err
    assert "is null" in err and "`hybridroute calibrate --model DIR`" in err
    _speaks_cli(err)
