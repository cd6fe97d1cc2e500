"""What a user sees in MLflow (issue 29, item 6): the labelled sets a run used as dataset
inputs (fingerprint as digest, source, schema, context) and a description saying what was
evaluated on what -- checked through MLflow's API and on the run page in a real browser."""

from __future__ import annotations

import json
import warnings

import pytest

from hybridroute.evaluation import evaluate_router
from hybridroute.tracking import Tracker, log_evaluation, log_monitor
from hybridroute.tracking._datasets import DIGEST_CHARS, dataset_record

from ..browser import chromium, console_errors, wait_for


@pytest.fixture(scope="module")
def evaluation(support_router):
    router, _, ds = support_router
    return evaluate_router(router, ds.split("test"), n_boot=20, seed=0)


def _inputs(ds):
    return [
        ("training", ds.split("train"), "train"),
        ("calibration", ds.split("calibration"), "calibration"),
        ("evaluation", ds.split("test"), "test"),
    ]


def _log(uri, evaluation, ds, **kw):
    tracker = Tracker(uri, experiment="datasets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_id = log_evaluation(
            tracker,
            evaluation,
            run_name="support 7 on support-tickets/test",
            params={"objective": "precision", "target": 0.85, "delta": 0.1},
            datasets=_inputs(ds),
            **kw,
        )
    return tracker, run_id


def test_a_run_lists_its_labelled_sets_with_fingerprint_source_and_schema(
    sqlite_store, support_router, evaluation
):
    from mlflow.tracking import MlflowClient

    _, _, ds = support_router
    _, run_id = _log(sqlite_store, evaluation, ds)
    run = MlflowClient(sqlite_store).get_run(run_id)
    got = {d.dataset.name: d for d in run.inputs.dataset_inputs}
    assert set(got) == {
        "support-tickets/train",
        "support-tickets/calibration",
        "support-tickets/test",
    }
    for context, part, split in _inputs(ds):
        entry = got[f"support-tickets/{split}"]
        assert entry.dataset.digest == part.fingerprint[:DIGEST_CHARS]
        assert {t.key: t.value for t in entry.tags}["mlflow.data.context"] == context
        assert json.loads(entry.dataset.source) == {"uri": ds.source}
        profile = json.loads(entry.dataset.profile)
        assert profile["fingerprint"] == part.fingerprint and profile["num_rows"] == len(part)
        columns = {c["name"]: c["type"] for c in json.loads(entry.dataset.schema)["mlflow_colspec"]}
        assert columns["text"] == columns["label"] == "string"
        # every fact with its type: the support set's amount is a number, has_permission a bool
        assert columns["amount"] == "double" and columns["has_permission"] == "boolean"
        assert set(part.fact_columns) <= set(columns)


def test_a_run_has_a_description_of_what_was_evaluated_on_what(
    sqlite_store, support_router, evaluation
):
    from mlflow.tracking import MlflowClient

    _, _, ds = support_router
    _, run_id = _log(sqlite_store, evaluation, ds)
    note = MlflowClient(sqlite_store).get_run(run_id).data.tags["mlflow.note.content"]
    assert note.startswith("**support 7 on support-tickets/test**")
    assert "training on `support-tickets/train` (824 rows)" in note
    assert "evaluation on `support-tickets/test` (273 rows)" in note
    assert f"selective precision {100 * evaluation['selective_precision']:.1f}%" in note
    assert "target 0.85 at δ 0.1" in note


def test_a_given_description_is_kept(sqlite_store, support_router, evaluation):
    from mlflow.tracking import MlflowClient

    _, _, ds = support_router
    _, run_id = _log(sqlite_store, evaluation, ds, description="my own words")
    assert MlflowClient(sqlite_store).get_run(run_id).data.tags["mlflow.note.content"] == (
        "my own words"
    )


def _note(uri, run_id):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri).get_run(run_id).data.tags["mlflow.note.content"]


def _promise(policy) -> str:
    g = policy.guarantee
    return (
        f"target {g['target']} at δ {g['delta']}, threshold {policy.thresholds['auto']:.4f} "
        "(certified)"
    )


@pytest.mark.parametrize("how", ["policy", "policy_path", "report"])
def test_the_description_states_the_policys_promise_however_it_is_known(
    sqlite_store, support_router, evaluation, tmp_path, how
):
    """Given as an object, as the policy file the run logs, or as the report the run logs:
    the description says the objective, target, δ, threshold and whether it was certified."""
    from hybridroute.evaluation import write_report

    router, _, ds = support_router
    kw: dict = {}
    if how == "policy":
        kw["policy"] = router.policy
    elif how == "policy_path":
        kw["policy_path"] = router.policy.save(tmp_path / "policy.json")
    else:
        write_report(dict(evaluation), tmp_path / "report", policy=router.policy)
        kw["report_dir"] = tmp_path / "report"
    tracker = Tracker(sqlite_store, experiment="datasets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_id = log_evaluation(tracker, evaluation, run_name="r", datasets=_inputs(ds), **kw)
    note = _note(sqlite_store, run_id)
    assert "Policy: precision " + _promise(router.policy) in note


@pytest.mark.parametrize(("departs", "words"), [(False, "like the calibration data"),
                                                 (True, "departs markedly")])  # fmt: skip
def test_the_description_says_whether_the_label_mix_is_like_the_calibration_data(
    sqlite_store, evaluation, departs, words
):
    ev = dict(evaluation, label_mix={"departs": departs, "total_variation": 0.0412})
    tracker = Tracker(sqlite_store, experiment="datasets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_id = log_evaluation(tracker, ev, run_name="mix")
    note = _note(sqlite_store, run_id)
    assert f"Label mix of the evaluated set: {words}" in note and "0.041" in note


def test_a_file_given_by_a_relative_path_is_logged_where_it_is(sqlite_store, tmp_path, monkeypatch):
    from hybridroute.datasets import load_dataset

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.csv").write_text(
        "text,label\n" + "".join(f"row {i},{'ab'[i % 2]}\n" for i in range(20))
    )
    ds = load_dataset("csv:mine.csv")
    record = dataset_record(ds)
    assert json.loads(record["source"]) == {"uri": str(tmp_path / "mine.csv")}


@pytest.mark.parametrize("context", ["train", "test", ""])
def test_an_unknown_context_is_refused(sqlite_store, support_router, context):
    _, _, ds = support_router
    tracker = Tracker(sqlite_store, experiment="datasets")
    with (
        tracker.run("bad context"),
        pytest.raises(ValueError, match="context must be one of training, calibration"),
    ):
        tracker.log_datasets([(context, ds, None)])


@pytest.mark.parametrize(
    "secret",
    ["sk-proj-Abc123def456GHI789jkl012MNO345pqr", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
)
def test_a_source_path_that_holds_a_key_is_scrubbed(sqlite_store, tmp_path, secret):
    from mlflow.tracking import MlflowClient

    from hybridroute.datasets import load_dataset

    folder = tmp_path / secret
    folder.mkdir()
    path = folder / "set.csv"
    path.write_text("text,label\n" + "".join(f"row {i},{'ab'[i % 2]}\n" for i in range(20)))
    ds = load_dataset(f"csv:{path}")
    assert secret in dataset_record(ds)["source"]
    tracker = Tracker(sqlite_store, experiment="datasets")
    with tracker.run("scrubbed source") as run_id:
        tracker.log_datasets([("evaluation", ds, None)])
    (entry,) = MlflowClient(sqlite_store).get_run(run_id).inputs.dataset_inputs
    assert secret not in entry.dataset.source and "[REDACTED]" in entry.dataset.source


def test_a_monitor_reading_is_described(sqlite_store):
    from mlflow.tracking import MlflowClient

    state = {
        "status": "holding",
        "labels": 120,
        "router_version": "3",
        "target": 0.9,
        "delta": 0.05,
        "precision": {"estimate": 0.95, "lower": 0.91, "upper": 0.98},
    }
    tracker = Tracker(sqlite_store, experiment="monitor-notes")
    run_id = log_monitor(tracker, state, log="sqlite:///d.sqlite")
    note = MlflowClient(sqlite_store).get_run(run_id).data.tags["mlflow.note.content"]
    assert "router version 3" in note and "`holding`" in note and "120 audit labels" in note
    assert "[0.9100, 0.9800]" in note and "sqlite:///d.sqlite" in note


@pytest.mark.browser
def test_the_run_page_shows_datasets_and_description(mlflow_server, support_router, evaluation):
    """A real `mlflow server`, a real Chromium: the run page lists the three sets with their
    context and digest, and shows the description."""
    from selenium.webdriver.common.by import By

    router, _, ds = support_router
    tracker, run_id = _log(mlflow_server, evaluation, ds, policy=router.policy)
    url = f"{mlflow_server}/#/experiments/{tracker._experiment_id}/runs/{run_id}"
    with chromium() as browser:
        browser.get(url)

        def page_text() -> str:
            text = browser.find_element(By.TAG_NAME, "body").text
            return text if "Evaluated the router" in text else ""

        text = wait_for(page_text, timeout=60, what="the run's description")
        train = ds.split("train")
        assert f"support-tickets/train ({train.fingerprint[:DIGEST_CHARS]})" in text
        assert "Training" in text and "+2" in text  # the other two sets, one click away
        assert "support 7 on support-tickets/test" in text
        assert _promise(router.policy) in text  # target, δ, threshold, certified
        # MLflow's own page: its one known 404 (the current user, on a server without auth)
        # aside, it loads without console errors
        errors = [e for e in console_errors(browser) if "users/current" not in e["message"]]
        assert errors == []
