"""The service and personal data in texts: a redacting bundle, and the ``redact_pii`` config.

A bundle built with ``redact_pii`` redacts in the service as everywhere (the answer, the
live row). The service's ``redact_pii`` field turns redaction on for the live router *and*
every shadow whatever their bundles say -- without it, a shadow built without redaction
would log the raw text of a request that the live router redacted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybridroute.exceptions import UserInputError
from hybridroute.service._config import ServiceConfig

from ..service.helpers import drain_shadows, log_rows

TEXT = "my parcel never came; card 4111 1111 1111 1111, call +44 20 7946 0958, jo@example.com"
REDACTED = "my parcel never came; card [CARD], call [PHONE], [EMAIL]"
SECRETS = (b"4111", b"7946", b"jo@example")


# --------------------------------------------------------------------------- the config field


@pytest.mark.parametrize(
    ("value", "kinds"),
    [
        ((), ()),
        ([], ()),
        (None, ()),
        (True, ("email", "iban", "card", "phone")),
        (["all"], ("email", "iban", "card", "phone")),
        (["phone", "email"], ("email", "phone")),
        ("card,iban", ("iban", "card")),
    ],
)
def test_the_config_field_is_normalized_to_kinds(value, kinds):
    config = ServiceConfig(router="r", log="x.sqlite", redact_pii=value)
    assert config.redact_pii == kinds
    assert ServiceConfig.from_json(config.to_json()).redact_pii == kinds


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (["ssn"], "field 'redact_pii': 'ssn' is not a kind of personal data"),
        (["email", "passport"], "'passport' is not a kind"),
        (3, "field 'redact_pii': expected true, 'all' or a list of kinds"),
    ],
)
def test_the_config_field_refuses_unknown_kinds_naming_it(value, match):
    with pytest.raises(UserInputError, match=match):
        ServiceConfig(router="r", log="x.sqlite", redact_pii=value)


def test_a_config_json_with_an_unknown_kind_is_refused():
    text = (
        ServiceConfig(router="r", log="x.sqlite")
        .to_json()
        .replace('"redact_pii": []', '"redact_pii": ["ssn"]')
    )
    with pytest.raises(UserInputError, match="field 'redact_pii'"):
        ServiceConfig.from_json(text)


# --------------------------------------------------------------------------- served


@pytest.fixture(scope="module")
def bundles(rules, local_clf, support, tmp_path_factory) -> dict[str, Path]:
    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.router import HybridRouter

    from .conftest import fitted_policy

    root = tmp_path_factory.mktemp("pii-service")
    out = {}
    for version, target, redact in (("1", 0.85, True), ("2", 0.97, None), ("3", 0.85, None)):
        router = HybridRouter(
            rules=rules,
            classifier=local_clf,
            policy=fitted_policy(local_clf, support, CertifiedPrecisionThreshold(target, 0.1)),
            name="support",
            version=version,
            redact_pii=redact,
        )
        out[f"v{version}"] = router.save(root / f"v{version}")
    return out


@pytest.fixture
def make_app(bundles) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from hybridroute.service import create_app

    stack = contextlib.ExitStack()

    def make(log_dir: Path, live: str, shadows: tuple[str, ...] = (), **kw: Any) -> Any:
        config = ServiceConfig(
            router=bundles[live],
            shadows=tuple(bundles[s] for s in shadows),
            log=f"sqlite:///{log_dir / 'decisions.sqlite'}",
            admin=False,
            **kw,
        )
        client = TestClient(create_app(config), raise_server_exceptions=False)
        stack.enter_context(client)
        return client

    with stack:
        yield make


def _post(client: Any) -> dict[str, Any]:
    one = client.post("/v1/route", json={"text": TEXT, "facts": {}, "request_id": "p-1"})
    batch = client.post(
        "/v1/route/batch",
        json={"items": [{"text": TEXT, "facts": {"amount": 5000}, "request_id": "p-2"}]},
    )
    assert one.status_code == 200 and batch.status_code == 200, (one.text, batch.text)
    return {"one": one.json(), "batch": batch.json()}


def _raw(log_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in log_dir.glob("decisions.sqlite*"))


@pytest.mark.service
def test_a_redacting_bundle_redacts_the_answer_and_the_live_rows(make_app, tmp_path):
    client = make_app(tmp_path, "v1")
    answers = _post(client)
    assert answers["one"]["decision"]["input_snapshot"]["text"] == REDACTED
    assert answers["batch"]["results"][0]["decision"]["input_snapshot"]["text"] == REDACTED
    rows = log_rows(tmp_path, role="live")
    assert [r["record"]["input_snapshot"]["text"] for r in rows] == [REDACTED, REDACTED]
    for secret in SECRETS:
        assert secret not in _raw(tmp_path)


@pytest.mark.service
def test_the_same_request_id_with_other_personal_data_is_the_same_request(make_app, tmp_path):
    client = make_app(tmp_path, "v1")
    first = client.post("/v1/route", json={"text": TEXT, "facts": {}, "request_id": "q"})
    other = TEXT.replace("4111 1111 1111 1111", "5555-5555-5555-4444")
    again = client.post("/v1/route", json={"text": other, "facts": {}, "request_id": "q"})
    # the stored input is the redacted one: equal, so the stored decision answers
    assert first.status_code == again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["decision_id"] == first.json()["decision_id"]


@pytest.mark.service
def test_the_config_redacts_for_live_and_shadows_whatever_their_bundles_say(make_app, tmp_path):
    client = make_app(tmp_path, "v3", shadows=("v2",), redact_pii=["all"])
    answers = _post(client)
    drain_shadows(client)
    assert answers["one"]["decision"]["input_snapshot"]["text"] == REDACTED
    live = log_rows(tmp_path, role="live")
    shadow = log_rows(tmp_path, role="shadow")
    assert len(live) == len(shadow) == 2
    for row in (*live, *shadow):
        assert row["record"]["input_snapshot"]["text"] == REDACTED
    for secret in SECRETS:
        assert secret not in _raw(tmp_path)
