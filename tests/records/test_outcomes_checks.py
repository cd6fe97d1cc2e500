"""What the log checks an outcome against before it counts (both backends): the router
version's labels and destinations (registered in the log, schema version 4), a live
decision, ``audit`` only for an audited one, ``at`` not before the decision; registration
is insert-if-absent and refuses another vocabulary; a version-3 log is migrated."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta

import pytest

from hybridroute.exceptions import ArtifactError, UserInputError
from hybridroute.records import AuditSampler, OutcomeError, open_log
from hybridroute.records._outcomes import SOURCES
from hybridroute.records._vocabulary import RouterVocabulary, VocabularyConflictError

from .test_outcomes import DESTINATIONS, LABELS, decision, register


@pytest.fixture
def audited(log_url):
    """A log of router r: version 1 registered (labels LABELS, out of scope 'oos'), three
    audited live decisions (q0..q2), one live decision of version 2 (registered with other
    labels), a shadow decision of version 3 (registered) for q0, and one unaudited live
    decision of version 1 (q3, logged without a sampler)."""
    log = open_log(log_url, audit=AuditSampler(1.0, "k"))
    log.register_router(
        name="r", version="1", labels=LABELS, oos_label="oos", destinations=DESTINATIONS
    )
    log.register_router(name="r", version="2", labels=("card",), destinations=("cards",))
    register(log, "3")
    ids = [r.decision_id for r in log.log_many([(decision(i), f"q{i}", "live") for i in range(3)])]
    (v2,) = log.log_many([(decision(9, version="2"), "q9", "live")])
    (shadow,) = log.log_many([(decision(0, version="3"), "q0", "shadow")])
    log.close()
    with open_log(log_url) as plain:  # no audit sampler: audited is NULL
        (unaudited,) = plain.log_many([(decision(3), "q3", "live")])
    log = open_log(log_url)
    yield (
        log,
        {
            "ids": ids,
            "v2": v2.decision_id,
            "shadow": shadow.decision_id,
            "unaudited": unaudited.decision_id,
        },
    )
    log.close()


def _refused(log, outcomes, *, row, field, words):
    before = log.outcomes()
    with pytest.raises(OutcomeError, match=f"row {row}, column '{field}': .*{words}") as e:
        log.add_outcomes(outcomes)
    assert isinstance(e.value, UserInputError) and (e.value.row, e.value.field) == (row, field)
    assert log.outcomes() == before  # all or nothing
    return e.value


# --------------------------------------------------------------------------- labels
@pytest.mark.parametrize(
    "gold",
    [
        "no_such_label",  # the typo
        "Billing",  # case matters
        "billing ",  # so does a trailing space
        "card",  # a label of another version of the router
        "cards",  # a destination is not a label
        "rm -rf /",
    ],
)
def test_a_gold_intent_outside_the_versions_labels_is_refused(audited, gold):
    log, ids = audited
    good = {"decision_id": ids["ids"][0], "gold_intent": "billing", "source": "audit"}
    bad = {"decision_id": ids["ids"][1], "gold_intent": gold, "source": "audit"}
    err = _refused(
        log, [good, bad], row=2, field="gold_intent", words="is not a label of router 'r'"
    )
    assert "labels: billing, refund, shipping; out of scope: oos" in str(err)


@pytest.mark.parametrize(
    "step",
    ["rm -rf /", "BILLING", "cards", "no_such_destination", "billing\t"],
)
def test_a_gold_next_step_outside_the_versions_destinations_is_refused(audited, step):
    log, ids = audited
    bad = {"decision_id": ids["ids"][0], "gold_next_step": step, "source": "human_review"}
    _refused(log, [bad], row=1, field="gold_next_step", words="is not a destination of")


def test_the_versions_labels_its_out_of_scope_label_and_destinations_are_accepted(audited):
    log, ids = audited
    a, b, c = ids["ids"]
    report = log.add_outcomes(
        [
            {"decision_id": a, "gold_intent": "refund", "source": "audit"},
            {"decision_id": b, "gold_intent": "oos", "source": "audit"},
            {"decision_id": c, "gold_next_step": "human_review", "source": "audit"},
            # version 2's own label and destination, by request id
            {"request_id": "q9", "router": "r", "router_version": "2", "gold_intent": "card",
             "gold_next_step": "cards", "source": "audit"},
        ]
    )  # fmt: skip
    assert report.added == 4


def test_a_version_the_log_knows_no_labels_of_has_its_outcomes_refused(log_url):
    with open_log(log_url) as log:
        (d,) = log.log_many([(decision(0, version="7"), "q0", "live")])
        outcome = {
            "decision_id": d.decision_id,
            "gold_intent": "billing",
            "source": "user_feedback",
        }
        err = _refused(
            log, [outcome], row=1, field="decision_id", words="knows no labels of router 'r'"
        )
        assert "hybridroute outcomes add --router BUNDLE" in str(err)
        by_request = {"request_id": "q0", "router": "r", "router_version": "7",
                      "gold_next_step": "billing", "source": "human_review"}  # fmt: skip
        _refused(log, [by_request], row=1, field="request_id", words="register the version")
        register(log, "7")
        assert log.add_outcomes([outcome, by_request]).added == 2


# --------------------------------------------------------------------------- decisions
@pytest.mark.parametrize("source", SOURCES)
def test_an_outcome_of_a_shadow_decision_is_refused(audited, source):
    log, ids = audited
    by_id = {"decision_id": ids["shadow"], "gold_intent": "billing", "source": source}
    _refused(log, [by_id], row=1, field="decision_id", words="names a shadow decision")
    by_request = {"request_id": "q0", "router": "r", "router_version": "3",
                  "gold_intent": "billing", "source": source}  # fmt: skip
    _refused(log, [by_request], row=1, field="request_id", words="live decision of that request")


def test_audit_outcomes_only_for_audited_decisions(log_url):
    with open_log(log_url, audit=AuditSampler(0.0, "k")) as log:  # rate 0: never audited
        register(log)
        (never,) = log.log_many([(decision(0), "q0", "live")])
    with open_log(log_url, audit=AuditSampler(1.0, "k")) as log:
        (rule,) = log.log_many([(decision(1, stage="rule"), "q1", "live")])  # rules: p = 0
        (yes,) = log.log_many([(decision(2), "q2", "live")])
    with open_log(log_url) as log:
        (unset,) = log.log_many([(decision(3), "q3", "live")])  # no sampler: NULL
        for d in (never, rule, unset):
            outcome = {"decision_id": d.decision_id, "gold_intent": "billing", "source": "audit"}
            err = _refused(log, [outcome], row=1, field="source", words="not selected for audit")
            assert d.decision_id in str(err)
            other = {**outcome, "source": "human_review"}
            assert log.add_outcomes([other]).added == 1
            log_outcomes = log.outcomes(d.decision_id)
            assert [o["source"] for o in log_outcomes] == ["human_review"]
        ok = {"decision_id": yes.decision_id, "gold_intent": "billing", "source": "audit"}
        assert log.add_outcomes([ok]).added == 1


# --------------------------------------------------------------------------- times
def test_an_outcome_observed_before_its_decision_is_refused(audited):
    log, ids = audited
    (row,) = [r for r in log.rows() if r["decision_id"] == ids["ids"][0]]
    logged = datetime.fromisoformat(row["logged_at"])
    for at in (
        "2000-01-01T00:00:00Z",  # long before
        (logged - timedelta(microseconds=1)).isoformat(),  # just before
        (logged - timedelta(seconds=1)).astimezone().isoformat(),  # before, in another zone
    ):
        outcome = {"decision_id": ids["ids"][0], "gold_intent": "billing", "source": "audit",
                   "at": at}  # fmt: skip
        _refused(log, [outcome], row=1, field="at", words="is before decision .* was logged")
    same = {"decision_id": ids["ids"][0], "gold_intent": "billing", "source": "audit",
            "at": logged.isoformat()}  # fmt: skip
    assert log.add_outcomes([same]).added == 1


def test_without_at_an_outcome_is_never_before_its_decision(log_url):
    # the logger's clock is ahead of this one: the decision was logged "in the future"
    with open_log(log_url) as log:
        register(log)
        ahead = time.time() + 120
        log.append(decision(0), item_id="q0", at=ahead)
        log.flush()
        (row,) = log.rows()
        outcome = {"decision_id": row["decision_id"], "gold_intent": "billing",
                   "source": "human_review"}  # fmt: skip
        assert log.add_outcomes([outcome]).added == 1
        (stored,) = log.outcomes()
        assert stored["observed_at"] == row["logged_at"]  # moved to the decision's time
        now = datetime.now(UTC).isoformat()
        _refused_again = {**outcome, "gold_intent": "refund", "at": now}
        with pytest.raises(OutcomeError, match="column 'at': is before decision"):
            log.add_outcomes([_refused_again])


# --------------------------------------------------------------------------- registration
def test_registering_is_idempotent_and_another_vocabulary_is_refused(log_url):
    with open_log(log_url) as log:
        first = log.register_router(
            name="r", version="1", labels=["b", "a", "a"], oos_label="oos", destinations=["x"]
        )
        assert first.labels == ("a", "b")  # sorted, once each
        again = log.register_router(RouterVocabulary.of("r", "1", labels=["a", "b"],
                                                        oos_label="oos", destinations=["x"]))  # fmt: skip
        assert again == first and list(log.router_vocabularies()) == [("r", "1")]
        for change, words in [
            ({"labels": ["a"]}, "other labels"),
            ({"labels": ["a", "b", "c"]}, "other labels"),
            ({"oos_label": None}, "other out-of-scope label"),
            ({"oos_label": "other"}, "other out-of-scope label"),
            ({"destinations": ["x", "y"]}, "other destinations"),
        ]:
            kw = {"labels": ["a", "b"], "oos_label": "oos", "destinations": ["x"], **change}
            with pytest.raises(VocabularyConflictError, match=f"{words}: a router whose"):
                log.register_router(name="r", version="1", **kw)
        assert issubclass(VocabularyConflictError, ArtifactError)
        assert log.router_vocabularies()[("r", "1")] == first  # unchanged
        # another version (or router) is another registration
        log.register_router(name="r", version="2", labels=["z"], destinations=["x"])
        log.register_router(name="s", version="1", labels=["z"], destinations=["x"])
        assert sorted(log.router_vocabularies()) == [("r", "1"), ("r", "2"), ("s", "1")]
    with open_log(log_url) as log:  # stored: another connection reads them back
        assert log.router_vocabularies()[("r", "1")] == first


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"name": "", "version": "1", "labels": ["a"], "destinations": ["x"]}, "router must"),
        ({"name": "r", "version": None, "labels": ["a"], "destinations": ["x"]}, "router_version"),
        ({"name": "r", "version": "1", "labels": "a", "destinations": ["x"]}, "list of names"),
        ({"name": "r", "version": "1", "labels": ["a\x00"], "destinations": ["x"]}, "NUL"),
        ({"name": "r", "version": "1", "labels": ["a"], "destinations": []}, "at least one"),
        ({"name": "r", "version": "1", "labels": ["x" * 300], "destinations": ["x"]}, "longer"),
    ],
)
def test_a_bad_registration_is_refused(log_url, kw, words):
    with open_log(log_url) as log:
        with pytest.raises(UserInputError, match=words):
            log.register_router(**kw)
        assert log.router_vocabularies() == {}


def test_a_router_registers_its_labels_oos_label_and_every_destination(tmp_path):
    from ..support_router import support_router

    router, _ = support_router()
    with open_log(tmp_path / "log.sqlite") as log:
        vocab = log.register_router(router)
    assert vocab.key == (router.name, router.version)
    assert set(vocab.labels) == set(router.classes) and vocab.oos_label == router.oos_label
    assert set(router.destinations.values()) <= set(vocab.destinations)
    assert set(router.rules.vocabulary.destinations) <= set(vocab.destinations)
    assert {"reject", "human_review", "ask_user"} <= set(vocab.destinations)
    rules_only = RouterVocabulary.from_router(router.rules)
    assert rules_only.labels == () and "reject" in rules_only.destinations
    assert "routes by rules only" in (rules_only.intent_problem("billing") or "")


# --------------------------------------------------------------------------- migration 3 -> 4
# the CHECK on source of a version-3 outcomes table
_V3_SOURCES = "CHECK (source IN ('human_review', 'audit', 'user_feedback', 'agent_outcome'))"


def test_a_version_3_sqlite_log_is_migrated_to_version_4(tmp_path):
    path = tmp_path / "v3.sqlite"
    with open_log(path, audit=AuditSampler(1.0, "k")) as log:
        register(log)
        ids = [
            r.decision_id for r in log.log_many([(decision(i), f"q{i}", "live") for i in range(3)])
        ]
        log.add_outcomes(
            [{"decision_id": d, "gold_intent": "billing", "source": "audit"} for d in ids]
        )
        before = [o["outcome_id"] for o in log.outcomes()]
    conn = sqlite3.connect(path)  # back to the version-3 layout
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'outcomes'").fetchone()
    old = sql.replace(", 'adjudication'", "")
    assert "adjudication" not in old and _V3_SOURCES in old
    conn.executescript(
        f"DROP TABLE routers; ALTER TABLE outcomes RENAME TO o4; {old}; "
        "INSERT INTO outcomes SELECT * FROM o4; DROP TABLE o4; "
        "CREATE INDEX outcomes_decision ON outcomes (decision_id, source); "
        "UPDATE meta SET value = '3' WHERE key = 'schema_version';"
    )
    conn.commit()
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute(
            "INSERT INTO outcomes (outcome_id, decision_id, gold_intent, source, observed_at, "
            "recorded_at) VALUES ('x', 'y', 'z', 'adjudication', 't', 't')"
        )
    conn.close()
    with open_log(path, create=False) as log:
        meta = log.meta()
        assert meta["schema_version"] == "4" and meta["migrated_from"] == "3"
        assert [o["outcome_id"] for o in log.outcomes()] == before  # kept, in order
        assert log.router_vocabularies() == {}  # a version-3 log knew no labels
        register(log)
        report = log.add_outcomes(
            [{"decision_id": ids[0], "gold_intent": "refund", "source": "adjudication"}]
        )
        assert report.added == 1 and log.integrity_check() == "ok"
        names = {r[0] for r in log._query("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "outcomes_decision" in names
    with open_log(path) as log:  # nothing more to migrate
        assert log.meta()["schema_version"] == "4" and len(log.outcomes()) == 4


@pytest.mark.postgres
def test_a_version_3_postgres_log_is_migrated_to_version_4(postgres_db_url):
    import psycopg

    with open_log(postgres_db_url, audit=AuditSampler(1.0, "k")) as log:
        register(log)
        (d,) = log.log_many([(decision(0), "q0", "live")])
        log.add_outcomes(
            [{"decision_id": d.decision_id, "gold_intent": "billing", "source": "audit"}]
        )
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:  # back to version 3
        conn.execute("DROP TABLE hybridroute_routers")
        conn.execute(
            "ALTER TABLE hybridroute_outcomes DROP CONSTRAINT hybridroute_outcomes_source_check"
        )
        conn.execute(
            f"ALTER TABLE hybridroute_outcomes ADD CONSTRAINT hybridroute_outcomes_source_check {_V3_SOURCES}"
        )
        conn.execute("UPDATE hybridroute_meta SET value = '3' WHERE key = 'schema_version'")
    with open_log(postgres_db_url, create=False) as log:
        meta = log.meta()
        assert meta["schema_version"] == "4" and meta["migrated_from"] == "3"
        assert len(log.outcomes()) == 1 and log.router_vocabularies() == {}
        register(log)
        adjudicated = {
            "decision_id": d.decision_id,
            "gold_intent": "refund",
            "source": "adjudication",
        }
        assert log.add_outcomes([adjudicated]).added == 1
