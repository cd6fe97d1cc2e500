"""Nothing hybridroute writes carries a credential or a declared sensitive fact.

Canaries (provider-key-shaped strings, the values of credential-like environment
variables, a URL's password, a declared sensitive fact's value) go into ticket texts,
labels, facts, dataset paths and spec fields; then every byte of every file written
(report directory, MLflow store and artifacts) and everything printed is searched for
them. Every canary contains ``c4n4ry`` (never produced by hex digests, which is all a
hash is), so one case-insensitive search finds any of them, or any piece of one.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from hybridroute.cli import main

from .router.conftest import EXAMPLE

NEEDLE = b"c4n4ry"

# credential-like environment variables: their values are not key-shaped, so only the
# environment rule can catch them
ENV = {
    "OPENAI_API_KEY": "zq-openai-C4N4RY-7f3e9b2c1d0a",
    "ANTHROPIC_API_KEY": "anth-C4N4RY-55aa77bb99cc",
    "HYBRIDROUTE_TEST_SECRET": "plain-C4N4RY-secret-value",
}
SALT = "test-salt-for-scrubbing"
SHAPED = [
    "sk-proj-C4N4RYsk1abcdefghijklmnop",
    "sk-ant-api03-C4N4RYant2abcdefghijkl",
    "sk-C4N4RYplainkey3abcdefghij",
    "AKIAC4N4RY3ABCDEFGHI",
    "ghp_C4N4RY4abcdefghijklmnopqrstuvwxyz0123",
    "Bearer C4N4RY5eyJhbGciOiJIUzI1NiJ9abc",
    "xoxb-C4N4RY6-1234567890",
]
URLS = [
    "postgresql://admin:C4N4RY7hunter2@db.internal:5432/prod",
    "https://user:pw-C4N4RY8-x@mlflow.example.com/",
]
EMAILS = ["alice.c4n4ry9@example.com", "bob-c4n4ry10@example.org"]
CANARIES = [*ENV.values(), *SHAPED, *URLS]
FORMULAS = ['=HYPERLINK("http://x","c")', "+SUM(1,2) refund", "-1+2 where", "@SUM(A1)", "\tx"]
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


@pytest.fixture()
def canary_env(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HYBRIDROUTE_LOG_SALT", SALT)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def every_byte(*roots: Path) -> dict[str, bytes]:
    """Every file under ``roots`` (names included), read whole."""
    out: dict[str, bytes] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                out[f"name of {Path(dirpath) / name}"] = name.encode()
            for name in filenames:
                path = Path(dirpath) / name
                out[str(path)] = path.read_bytes()
    return out


def assert_clean(
    blobs: dict[str, bytes], *, extra: tuple[bytes, ...] = (), allow: tuple[str, ...] = ()
) -> None:
    """No canary (nor any of ``extra``) in any blob; the strings in ``allow`` are let through."""
    assert blobs, "nothing was written: the check would pass vacuously"
    for where, data in blobs.items():
        low = data.lower()
        for ok in allow:
            low = low.replace(ok.lower().encode(), b"")
        for needle in (NEEDLE, *extra):
            assert needle not in low, f"{needle!r} reached {where}"


def canary_texts() -> list[str]:
    base = [
        "Where is my order #48213? It was supposed to arrive Monday.",
        "Please refund the $89 I was charged twice this month.",
        "I can't log in to my account, the password reset does not work.",
        "The app crashes every time I open the settings page.",
        "Change my shipping address to 12 Elm Street please.",
    ]
    texts = []
    for i, c in enumerate([*CANARIES, *EMAILS]):
        texts.append(f"{base[i % len(base)]} my details: {c} thanks")
    texts += [f"{f} {base[i % len(base)]}" for i, f in enumerate(FORMULAS)]
    return texts


# ---------------------------------------------------------------- the scrubber itself


@pytest.mark.parametrize("canary", CANARIES)
def test_a_canary_is_removed_from_values_keys_and_free_text(canary_env, canary):
    from hybridroute._scrub import Scrubber

    doc = {
        "text": f"see {canary} here",
        canary: 1,
        "nested": [{"label": canary}, (f"x{canary}",)],
        "window": {f"{canary}-w": {"n": 3}},
    }
    out = Scrubber().json(doc)
    assert NEEDLE not in out.lower().encode()
    assert "[REDACTED]" in out


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("HYBRIDROUTE_LOG_SALT", "s"),  # a one-letter salt is scrubbed wherever it occurs
        ("OPENAI_API_KEY", "proj-C4N4RYsk1"),  # an environment value inside a key
        ("HYBRIDROUTE_TEST_TOKEN", "abcdefghij"),  # ... inside several keys
    ],
)
def test_an_environment_value_inside_a_key_does_not_break_its_shape(monkeypatch, env, value):
    from hybridroute._scrub import Scrubber

    monkeypatch.setenv(env, value)
    out = Scrubber().json({"texts": [f"see {k} now" for k in SHAPED]}).lower()
    assert NEEDLE.decode() not in out
    for key in SHAPED:
        assert key[-6:].lower() not in out, key


@pytest.mark.parametrize("key", ["api_key", "password", "Authorization", "db_token", "secret"])
def test_values_under_credential_keys_are_removed_but_token_counts_are_kept(canary_env, key):
    from hybridroute._scrub import Scrubber

    doc = {
        key: "hunter2",
        "usage": {"prompt_tokens": 120, "completion_tokens": 7, "requests": 2},
        "usage_prompt_tokens": 120.0,
        "max_tokens": 64,
    }
    out = Scrubber().value(doc)
    assert out[key] == "[REDACTED]"
    assert out["usage"] == {"prompt_tokens": 120, "completion_tokens": 7, "requests": 2}
    assert out["usage_prompt_tokens"] == 120.0 and out["max_tokens"] == 64


@pytest.mark.parametrize("email", EMAILS)
def test_declared_sensitive_facts_are_hashed_under_their_name_and_wherever_seen(canary_env, email):
    from hybridroute._redact import Redactor
    from hybridroute._scrub import Scrubber

    scrub = Scrubber(["email", "customer_id"]).learn(
        [{"email": email, "customer_id": 48213977}, {"email": None}]
    )
    hashed = Redactor(["email"], SALT).hash_value(email)
    doc = {
        "facts": {"email": email, "customer_id": 48213977},
        "text": f"write to {email} for customer 48213977",
        "windows": {email: {"n": 1}},
    }
    out = scrub.value(doc)
    text = json.dumps(out)
    assert NEEDLE not in text.encode() and "48213977" not in text
    assert out["facts"]["email"] == hashed  # the very hash the decision log stores
    assert hashed in out["text"] and hashed in out["windows"]
    # idempotent: a document scrubbed twice is the document scrubbed once
    assert scrub.value(out) == out


def test_sensitive_fields_without_a_salt_are_refused(monkeypatch):
    from hybridroute._scrub import Scrubber
    from hybridroute.exceptions import UserInputError

    monkeypatch.delenv("HYBRIDROUTE_LOG_SALT", raising=False)
    with pytest.raises(UserInputError, match="no salt"):
        Scrubber(["email"])


@pytest.mark.parametrize("text", [*FORMULAS, "'=already escaped", "\rcarriage"])
def test_csv_cells_are_escaped_against_formulas_and_reversibly(text):
    from hybridroute._csv import unescape_formula
    from hybridroute._scrub import Scrubber

    cell = Scrubber().csv_cell(text)
    assert cell[:1] not in TRIGGERS
    assert unescape_formula(cell) == text
    assert Scrubber().csv_cell(-5) == -5 and Scrubber().csv_cell(None) == ""


def test_text_files_are_copied_scrubbed_and_binary_files_as_they_are(canary_env, tmp_path):
    from hybridroute._scrub import Scrubber

    src = tmp_path / "src"
    (src / "plots").mkdir(parents=True)
    (src / "notes.md").write_text("\n".join(CANARIES), encoding="utf-8")
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (src / "plots" / "p.png").write_bytes(png)
    Scrubber().copy_tree(src, tmp_path / "dst")
    assert (tmp_path / "dst" / "plots" / "p.png").read_bytes() == png
    assert_clean(every_byte(tmp_path / "dst"))


def test_a_decision_record_is_scrubbed_with_the_hash_of_what_is_written(canary_env):
    from hybridroute._scrub import Scrubber
    from hybridroute.contracts import snapshot_hash

    snap = {"facts": {"email": EMAILS[0]}, "text": f"note {URLS[0]}"}
    rec = {
        "selected_destination": "answer",
        "input_snapshot": snap,
        "snapshot_hash": snapshot_hash(snap),
        "detail": {},
    }
    out = Scrubber(["email"]).record(rec)
    assert NEEDLE not in json.dumps(out).lower().encode()
    assert out["snapshot_hash"] == snapshot_hash(out["input_snapshot"]) != rec["snapshot_hash"]


# ---------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A router (the example rules plus an ``email`` fact) saved as two bundle versions
    that disagree on the threshold, and a small labelled JSONL full of canaries."""
    from hybridroute.calibration import CertifiedPrecisionThreshold, EmpiricalThreshold
    from hybridroute.classifiers import LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.router import HybridRouter
    from hybridroute.rules import load_rules

    from .router.conftest import fitted_policy

    root = tmp_path_factory.mktemp("scrub-world")
    rules_text = EXAMPLE.read_text(encoding="utf-8")
    assert rules_text.count("\nfacts:\n") == 1
    rules_path = root / "rules.yaml"
    rules_path.write_text(
        rules_text.replace("\nfacts:\n", '\nfacts:\n  email: {type: str, default: ""}\n'),
        encoding="utf-8",
    )
    rules = load_rules(rules_path)
    ds = load_dataset("support-tickets")
    train = ds.split("train")
    clf = LocalClassifier(
        Cs=(3.0,), word_ngram_range=(1, 1), char_ngram_range=(3, 3), tol=0.001
    ).fit(train.texts, train.y)
    strict = fitted_policy(clf, ds, CertifiedPrecisionThreshold(0.85, 0.1))
    stricter = fitted_policy(clf, ds, EmpiricalThreshold(0.99))
    v1 = HybridRouter(rules=rules, classifier=clf, policy=strict, name="support", version="1")
    v2 = HybridRouter(rules=rules, classifier=clf, policy=stricter, name="support", version="2")

    texts = canary_texts()
    rows = []
    for i, text in enumerate(texts):
        rows.append(
            {
                "id": f"t{i}",
                "text": text,
                # a label no model predicts, and a next step no router takes: every row is
                # an error, so every text reaches errors.csv
                "label": "ghp_C4N4RYlabel0abcdefghijklmnopqrstuv" if i % 4 == 0 else "refund",
                "split": "test",
                "next_step": "nowhere",
                "email": EMAILS[i % len(EMAILS)],
                "note": CANARIES[i % len(CANARIES)],
            }
        )
    inputs = root / "inputs"
    inputs.mkdir()
    data = inputs / "canaries.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {
        "root": root,
        "v1": v1,
        "v2": v2,
        "bundle_v1": v1.save(root / "bundle-v1"),
        "bundle_v2": v2.save(root / "bundle-v2"),
        "data": data,
        "texts": texts,
        "rows": rows,
    }


@pytest.mark.parametrize("declared", [False, True], ids=["credentials", "with --sensitive"])
def test_evaluate_with_a_report_and_mlflow_writes_no_canary(
    world, canary_env, tmp_path, monkeypatch, capsys, declared
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the SQLite store keeps its artifacts under ./mlruns
    args = [
        "evaluate",
        "--dataset",
        f"jsonl:{world['data']}",
        "--router",
        str(world["bundle_v1"]),
        "--report",
        str(work / "report"),
        "--tracking-uri",
        f"sqlite:///{work / 'mlflow.db'}",
        "--experiment",
        "scrub-eval",
        "--n-boot",
        "20",
    ]
    if declared:
        args += ["--sensitive", "email"]
    # the JSON output when nothing is declared, the text output when the email is
    assert main([*args] if declared else [*args, "--json"]) == 0
    printed = capsys.readouterr()
    if not declared:
        out = json.loads(printed.out)
        assert out["n"] == len(world["rows"]) and out["mlflow_run_id"]
    else:
        assert "mlflow: run " in printed.out

    blobs = {
        **every_byte(work),
        "stdout": printed.out.encode(),
        "stderr": printed.err.encode(),
    }
    assert any("mlruns" in k and k.endswith("errors.csv") for k in blobs), sorted(blobs)
    # an email is no credential: only a declared fact's values are hashed
    assert_clean(blobs, allow=() if declared else tuple(EMAILS))

    # every row is an error; its text is there, scrubbed and formula-escaped
    with open(work / "report" / "errors.csv", encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == len(world["rows"])
    cells = [row[c] for row in table for c in row]
    assert all(c[:1] not in TRIGGERS for c in cells if c)
    joined = "\n".join(r["text"] for r in table)
    assert joined.count("[REDACTED]") >= len(CANARIES)
    assert ("hmac-sha256:" in joined) is declared
    summary = json.loads((work / "report" / "evaluation.json").read_text(encoding="utf-8"))
    assert summary["n"] == len(world["rows"]) and summary["usage"]["requests"] == 0


def test_write_report_scrubs_an_evaluation_passed_from_python(world, canary_env, tmp_path):
    from hybridroute._scrub import Scrubber
    from hybridroute.datasets import load_dataset
    from hybridroute.evaluation import evaluate_router, write_report

    ds = load_dataset(f"jsonl:{world['data']}")
    ev = evaluate_router(world["v1"], ds.split("test"), n_boot=20)
    assert NEEDLE in json.dumps(ev, default=str).lower().encode()  # the canaries are in
    # credentials go without asking; the emails, because the fact is declared sensitive
    scrub = Scrubber(["email"]).learn(ds.iter_facts())
    write_report(ev, tmp_path / "report", title=f"eval with {SHAPED[0]}", scrubber=scrub)
    assert_clean(every_byte(tmp_path / "report"))
    write_report(ev, tmp_path / "plain", title=f"eval with {SHAPED[0]}")
    plain = every_byte(tmp_path / "plain")
    assert b"c4n4ry9@example.com" in plain[str(tmp_path / "plain" / "errors.csv")]
    assert_clean(plain, allow=tuple(EMAILS))


def test_the_tracker_scrubs_names_params_tags_dicts_tables_and_files(
    canary_env, tmp_path, monkeypatch
):
    from hybridroute.tracking import Tracker

    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    (src / "spec.yaml").write_text(f"description: {SHAPED[1]}\n", encoding="utf-8")
    tracker = Tracker(
        f"sqlite:///{tmp_path / 'mlflow.db'}", experiment=f"exp {ENV['OPENAI_API_KEY']}"
    )
    with tracker.run(f"run {SHAPED[0]}", tags={"note": URLS[0], SHAPED[2]: "k"}) as run_id:
        assert run_id is not None
        tracker.log_params({"dataset": f"csv:/data/{SHAPED[3]}/x.csv", "api_key": "hunter2c4n4ry"})
        tracker.log_metrics({f"precision_{SHAPED[4]}": 0.5})
        tracker.set_tags({"t": ENV["ANTHROPIC_API_KEY"]})
        tracker.log_dict({"text": SHAPED[5], URLS[1]: 1}, "d/doc.json")
        tracker.log_table([{"text": SHAPED[6]}], "d/table.json")
        tracker.log_artifact(src / "spec.yaml", "spec")
        tracker.log_artifacts(src, "all")
    assert tracker.warning is None
    assert_clean(every_byte(tmp_path / "mlflow.db", tmp_path / "mlruns"), extra=(b"hunter2",))


def test_tracker_warning_names_no_password_of_its_uri(canary_env):
    from hybridroute.tracking import Tracker

    tracker = Tracker(
        "http://admin:pw-C4N4RY-x@127.0.0.1:9", experiment="nowhere", probe_timeout_s=0.5
    )
    with pytest.warns(RuntimeWarning, match="MLflow tracking") as caught:
        with tracker.run("x") as run_id:
            assert run_id is None
    assert NEEDLE not in str(caught[0].message).lower().encode()
    assert tracker.warning and NEEDLE not in tracker.warning.lower().encode()
    assert NEEDLE not in (tracker.run_url("abc") or "").lower().encode()


def test_an_experiment_run_writes_no_canary(canary_env, tmp_path, monkeypatch, capsys):
    from .experiments.conftest import synthetic_rows, write_csv

    # the dataset lives in a directory named like a key, and the spec's description
    # quotes credentials: the path and the description reach the table, params and tags
    data_dir = tmp_path / "inputs" / SHAPED[1]
    data_dir.mkdir(parents=True)
    data = write_csv(data_dir / "data.csv", synthetic_rows({"train": 30, "validation": 30}))
    spec = tmp_path / "inputs" / "spec.yaml"
    spec.write_text(
        "kind: thresholds\n"
        "name: scrub-thresholds\n"
        f"description: 'quotes {ENV['OPENAI_API_KEY']} and {SHAPED[5]} and {URLS[0]}'\n"
        "seed: 0\n"
        "mlflow_experiment: scrub-experiments\n"
        f"dataset: {{name: 'csv:{data}', splits: {{train: train, pool: validation}}}}\n"
        "classifier: {params: {Cs: [3.0], word_ngram_range: [1, 1], char_ngram_range: [3, 3], tol: 0.001}}\n"
        "methods: [{method: fixed, threshold: 0.8}, certified]\n"
        "targets: [0.8]\n"
        "delta: 0.1\n"
        "resplits: 4\n",
        encoding="utf-8",
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = [
        "experiment",
        "run",
        str(spec),
        "--tracking-uri",
        f"sqlite:///{work / 'mlflow.db'}",
        "--out",
        str(work / "out"),
    ]
    assert main([*args, "--json"]) == 0
    printed = capsys.readouterr()
    doc = json.loads(printed.out)
    assert doc["rows"] and doc["mlflow"]["parent_run_id"]
    # the printed table (no second MLflow run: the same scrubber renders both)
    assert main([*args[:3], "--no-track", "--out", str(work / "out2")]) == 0
    printed_text = capsys.readouterr()
    assert "scrub-thresholds" in printed_text.out
    files = every_byte(work)
    assert any(k.endswith("table.csv") and "mlruns" in k for k in files)
    assert_clean(
        {
            **files,
            "stdout (json)": printed.out.encode(),
            "stdout": printed_text.out.encode(),
            "stderr": (printed.err + printed_text.err).encode(),
        }
    )


@pytest.fixture()
def raw_log(world, tmp_path, monkeypatch):
    """A decision log holding canaries the log's own redaction did not know about: written
    before the credential was in the environment, with no sensitive facts declared, and with
    a URL password in the text."""
    from hybridroute.records import DecisionLog

    for k in ENV:
        monkeypatch.delenv(k, raising=False)
    markers = ("://", "zq-", "anth-", "plain-", "@example")
    texts = [t for t in world["texts"] if "c4n4ry" in t.lower() and any(m in t for m in markers)]
    items = [{"facts": {"email": EMAILS[i % len(EMAILS)]}, "text": t} for i, t in enumerate(texts)]
    path = tmp_path / "inputs" / "log.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    with DecisionLog(path) as log:
        log.extend(world["v1"].route_many(items))
    return path


def test_replay_and_drift_output_carries_no_canary(world, raw_log, canary_env, capsys):
    from hybridroute.records import DecisionLog, drift_report, replay

    # without scrubbing, the replay examples and the drift windows would hold canaries
    with DecisionLog(raw_log) as log:
        raw = replay(log.records(), world["v2"])
        frame = log.to_frame()
    assert raw["mismatches"] > 0
    assert NEEDLE in json.dumps(raw).lower().encode()
    assert NEEDLE in json.dumps(drift_report(frame, by="email")).lower().encode()

    # credentials go without asking (an email is no credential: it is let through here)
    for args in (
        ["replay", "--log", str(raw_log), "--router", str(world["bundle_v2"]), "--json"],
        ["drift", "--log", str(raw_log), "--by", "email", "--json"],
    ):
        assert main(args) == 0, args
        got = capsys.readouterr()
        assert_clean({f"stdout of {args}": got.out.encode()}, allow=tuple(EMAILS))
    # and with the fact declared, its values go too
    printed = []
    for args in (
        ["replay", "--log", str(raw_log), "--router", str(world["bundle_v2"]), "--json"],
        ["replay", "--log", str(raw_log), "--router", str(world["bundle_v2"])],
        ["drift", "--log", str(raw_log), "--by", "email", "--json"],
        ["drift", "--log", str(raw_log), "--by", "email", "--segment", "email"],
        ["drift", "--log", str(raw_log), "--by", "email", "--baseline", "nope", "--json"],
    ):
        rc = main([*args, "--sensitive", "email"])
        assert rc in (0, 2), args
        got = capsys.readouterr()
        printed.append(got)
        assert_clean({f"stdout of {args}": got.out.encode(), f"stderr of {args}": got.err.encode()})
    report = json.loads(printed[0].out)
    assert report["mismatches"] == raw["mismatches"] and report["examples"]
    assert all("[REDACTED]" in e["text"] or "hmac-sha256:" in e["text"] for e in report["examples"])
    drift = json.loads(printed[2].out)
    assert all(w.startswith("hmac-sha256:") for w in drift["windows"])
    assert "error:" in printed[4].err


def test_csv_of_an_experiment_table_is_escaped_and_scrubbed(canary_env):
    from hybridroute.experiments._table import table_csv
    from hybridroute.experiments.kinds import Column

    cols = (Column("method", "method", role="config", fmt="str"), Column("x", "x"))
    rows = [{"method": f, "x": -0.5} for f in FORMULAS] + [{"method": SHAPED[0], "x": 1.0}]
    text = table_csv(cols, rows)
    parsed = list(csv.reader(io.StringIO(text)))
    assert all(r[0][:1] not in TRIGGERS for r in parsed[1:])
    assert [r[1] for r in parsed[1:]] == ["-0.5"] * len(FORMULAS) + ["1.0"]  # numbers stay
    assert NEEDLE not in text.lower().encode()


@pytest.mark.parametrize(
    "argv",
    [
        ["datasets", "validate", "missing-{key}.csv"],
        ["route", "--rules", str(EXAMPLE), "--facts", '{{"action": "{key}"}}'],
        ["datasets", "show", "jsonl:{key}.jsonl"],
    ],
)
def test_a_command_line_error_quoting_a_key_prints_it_scrubbed(canary_env, capsys, argv):
    key = "sk-proj-" + "Z1" * 14
    rc = main([a.format(key=key) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert key not in err and "[REDACTED]" in err


@pytest.mark.parametrize(
    "text",
    [
        "connect failed: password=C4N4RYpw1 host=db",
        "FATAL: api_key: 'C4N4RYkey2abc'",
        'config {"client_secret": "C4N4RYsec3xyz"}',
        "AWS_SECRET_ACCESS_KEY=C4N4RY/K7MDENG+bPxRfi",
        "https://hooks.example/?token=C4N4RYtok5&u=1",
        "my Password : Tr0ub-C4N4RY&3",
    ],
)
def test_a_credential_assigned_in_free_text_is_scrubbed(text):
    from hybridroute._redact import REDACTED, scrub_text

    out = scrub_text(text)
    assert NEEDLE.decode() not in out.lower() and REDACTED in out
    assert scrub_text(out) == out  # idempotent


@pytest.mark.parametrize(
    "text",
    ["prompt_tokens=1234567 completion_tokens: 89", "the token is here", "ratio 3:10 passes"],
)
def test_counts_and_plain_words_are_not_scrubbed(text):
    from hybridroute._redact import scrub_text

    assert scrub_text(text) == text
