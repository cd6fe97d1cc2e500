"""``hybridroute promote``: exit 0 on pass, 1 on fail, 2 with one line on a user mistake;
``--json`` prints one object; the run is logged to MLflow.

Bundles: a local classifier on the support tickets with a policy certified at 0.85
(incumbent, version 1), the same model and policy as version 2, a model trained on rotated
labels with a coverage policy (version 3: deliberately worse) and the incumbent with looser
risk rules (version 4). The log: the train split routed live by the incumbent, audited at
rate 0.5, with audit outcomes on audited decisions and human_review outcomes on reviews.
"""

from __future__ import annotations

import json

import pytest

from hybridroute.records import AuditSampler, open_log

from ..router.conftest import EXAMPLE, fitted_policy
from .test_route import bounded_main, one_error_line


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from hybridroute.calibration import CertifiedPrecisionThreshold, CoverageThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules, parse_rules

    root = tmp_path_factory.mktemp("promote-cli")
    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(Cs=(10.0,)).fit(train.texts, train.y)
    classes = sorted(set(train.y))
    rotated = {c: classes[(i + 1) % len(classes)] for i, c in enumerate(classes)}
    bad = LocalClassifier(Cs=(10.0,)).fit(train.texts, [rotated[y] for y in train.y])
    rules = load_rules(EXAMPLE)
    looser = parse_rules(EXAMPLE.read_text().replace("amount_limit: 500", "amount_limit: 5000"))
    policy = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    routers = {
        "a": HybridRouter(rules=rules, classifier=clf, policy=policy, name="support", version="1"),
        "same": HybridRouter(
            rules=rules, classifier=clf, policy=policy, name="support", version="2"
        ),
        "worse": HybridRouter(
            rules=rules,
            classifier=bad,
            policy=fitted_policy(bad, ds, CoverageThreshold(0.9)),
            name="support",
            version="3",
        ),
        "rules": HybridRouter(
            rules=looser, classifier=clf, policy=policy, name="support", version="4"
        ),
    }
    bundles = {k: str(r.save(root / k)) for k, r in routers.items()}
    names = set(routers["a"].rules.schema.names)
    items = [
        {"facts": {k: v for k, v in train.facts(i).items() if v is not None and k in names},
         "text": text}
        for i, text in enumerate(train.texts)
    ]  # fmt: skip
    log = root / "log.sqlite"
    with open_log(log, audit=AuditSampler(0.5, "test-key")) as dl:
        dl.register_router(routers["a"])
        live = dl.log_many(
            [(d, f"t{i}", "live") for i, d in enumerate(routers["a"].route_many(items))]
        )
        audited = {r["decision_id"] for r in dl.rows() if r["audited"] == 1}
        outcomes = []
        for i, ld in enumerate(live):
            if ld.decision_id in audited:
                source = "audit"
            elif ld.record["selected_destination"] == "human_review":
                source = "human_review"
            else:
                continue
            outcomes.append(
                {"decision_id": ld.decision_id, "gold_intent": train.y[i], "source": source}
            )
        dl.add_outcomes(outcomes)
    bare = root / "no-audits.sqlite"
    with open_log(bare) as dl:
        dl.log_many([(d, f"t{i}", "live") for i, d in enumerate(routers["a"].route_many(items))])
    return {"bundles": bundles, "log": f"sqlite:///{log}", "bare": str(bare), "root": root}


def promote(world, candidate: str, *args: str, incumbent: str = "a") -> int:
    b = world["bundles"]
    return bounded_main(
        ["promote", "--incumbent", b[incumbent], "--candidate", b[candidate],
         "--log", world["log"], *args],
        timeout=120,
    )  # fmt: skip


def test_an_equal_candidate_passes_with_one_json_object(world, capsys):
    assert promote(world, "same", "--no-track", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is True and doc["status"] == "pass" and doc["reasons"] == []
    assert set(doc["checks"]) == {"disagreement", "precision", "paired_test", "rules"}
    p = doc["checks"]["precision"]
    assert p["status"] == "pass" and p["lower"] >= p["target"] == 0.85
    assert doc["candidate"] == {"name": "support", "version": "2"}
    assert doc["decisions"]["rescored"] is False and doc["mlflow_run_id"] is None


def test_a_worse_candidate_fails_with_exit_1_and_says_why(world, capsys):
    assert promote(world, "worse", "--no-track") == 1
    out = capsys.readouterr().out
    assert out.startswith("promotion gate: FAIL")
    assert "[fail] precision" in out and "below target" in out and "rescored" in out


def test_changed_rules_list_the_decisions_and_pass_only_when_allowed(world, capsys):
    assert promote(world, "rules", "--no-track") == 1
    out = capsys.readouterr().out
    assert "[fail] rules: rules changed:" in out and "decisions differ" in out
    assert "high_risk_amount" in out  # the overturned decisions are listed
    promote(world, "rules", "--no-track", "--json", "--allow-rule-changes")
    doc = json.loads(capsys.readouterr().out)
    rules = doc["checks"]["rules"]
    assert rules["status"] == "pass" and rules["changed"] > 0 and rules["examples"]


def test_the_paired_test_on_a_labelled_set(world, capsys):
    args = ("--no-track", "--json", "--dataset", "support-tickets", "--n-boot", "100")
    assert promote(world, "same", *args) == 0
    same = json.loads(capsys.readouterr().out)["checks"]["paired_test"]
    assert same["status"] == "pass" and same["key"] == "next_step_correct"
    assert same["mcnemar"]["p_value"] == 1.0 and same["dataset"] == "support-tickets"
    assert promote(world, "worse", *args) == 1
    worse = json.loads(capsys.readouterr().out)["checks"]["paired_test"]
    assert worse["status"] == "fail" and worse["mcnemar"]["p_value"] < 0.05


def test_the_gate_is_logged_to_mlflow(world, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a SQLite store keeps its artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert promote(world, "worse", "--json", "--tracking-uri", uri) == 1
    doc = json.loads(capsys.readouterr().out)
    run_id = doc["mlflow_run_id"]
    assert run_id
    from mlflow.tracking import MlflowClient

    run = MlflowClient(uri).get_run(run_id)
    assert run.data.tags["hybridroute.promotion"] == "fail"
    assert run.data.tags["hybridroute.candidate"] == "support 3"
    assert run.data.metrics["passed"] == 0.0 and "precision_upper" in run.data.metrics
    assert run.data.params["log"].endswith("log.sqlite")
    artifacts = [a.path for a in MlflowClient(uri).list_artifacts(run_id, "promotion")]
    assert artifacts == ["promotion/report.json"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--incumbent": "/nonexistent/bundle"}, "not a router bundle directory"),
        ({"--candidate": "/nonexistent/bundle"}, "not a router bundle directory"),
        ({"--log": "{root}/missing.sqlite"}, "missing.sqlite"),
        ({"--log": "{bare}"}, "no audited decision of the incumbent"),
        ({"--incumbent": "{same}", "--candidate": "{a}"}, "no live decision of the incumbent"),
        ({"--candidate": "{a}"}, "same router version"),
        ({"--alpha": "2"}, "alpha must be a number in"),
        ({"--target": "0"}, "target must be a number in"),
        ({"--dataset": "support-tickets", "--split": "nope"}, "has no split 'nope'"),
        ({"--oos": "maybe"}, "must be 'label' or 'drop'"),
    ],
    ids=[
        "incumbent-path", "candidate-path", "missing-log", "no-audits", "not-the-incumbent",
        "same-version", "alpha", "target", "split", "oos",
    ],
)  # fmt: skip
def test_user_mistakes_are_one_line_and_exit_2(world, capsys, change, message):
    b = world["bundles"]
    fill = {"root": str(world["root"]), "bare": world["bare"], **b}
    opts = {"--incumbent": b["a"], "--candidate": b["same"], "--log": world["log"]}
    opts.update({k: v.format(**fill) for k, v in change.items()})
    argv = ["promote", "--no-track", *[x for kv in opts.items() for x in kv]]
    assert bounded_main(argv, timeout=120) == 2
    assert message in one_error_line(capsys.readouterr().err)


def test_disputed_audit_labels_fail_the_gate_unless_allowed(world, tmp_path, capsys):
    import shutil

    log = tmp_path / "disputed.sqlite"
    shutil.copy(world["log"].removeprefix("sqlite:///"), log)
    with open_log(log) as dl:
        audits = [o for o in dl.outcomes() if o["source"] == "audit"]
        labels = sorted({o["gold_intent"] for o in audits})
        other = {label: labels[(i + 1) % len(labels)] for i, label in enumerate(labels)}
        dl.add_outcomes(
            [{"decision_id": o["decision_id"], "gold_intent": other[o["gold_intent"]],
              "source": "audit"} for o in audits[::5]]
        )  # fmt: skip
    b = world["bundles"]
    argv = ["promote", "--incumbent", b["a"], "--candidate", b["same"], "--log", str(log),
            "--no-track", "--json"]  # fmt: skip
    assert bounded_main(argv, timeout=120) == 1
    precision = json.loads(capsys.readouterr().out)["checks"]["precision"]
    assert precision["status"] == "fail" and "disputed" in precision["reason"]
    assert precision["disputes"]["disputed"] == len(audits[::5])
    assert bounded_main([*argv, "--max-disputed-share", "1"], timeout=120) in (0, 1)
    allowed = json.loads(capsys.readouterr().out)["checks"]["precision"]
    assert "more than the" not in allowed["reason"] and allowed["disputes"]["exceeded"] is False
    assert bounded_main([*argv, "--max-disputed-share", "2"], timeout=120) == 2
    assert "largest disputed share" in one_error_line(capsys.readouterr().err)
