"""Small helpers shared by the service tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PARCEL = {"text": "where is my parcel", "facts": {"amount": 20}}
REFUND = {"text": "I want a refund for my order", "facts": {"amount": 30}}
RULE = {"text": "refund please", "facts": {"has_permission": False}}
TEXTS = [
    "where is my parcel",
    "I want a refund for my order",
    "cancel my subscription now",
    "my card was charged twice",
    "I cannot log in to my account",
    "please change my delivery address",
    "the app crashes when I open it",
    "delete all my personal data",
    "what is the weather like on mars",
    "hello",
]


def log_rows(log_dir: Path, **kw: Any) -> list[dict[str, Any]]:
    """Every row of the SQLite log of an app made by ``make_app(log_dir)``."""
    from hybridroute.records import open_log

    with open_log(f"sqlite:///{log_dir / 'decisions.sqlite'}") as log:
        return list(log.rows(**kw))


def state(client: Any) -> Any:
    """The ServiceState of a TestClient's app."""
    return client.app.state.hybridroute


def drain_shadows(client: Any, timeout: float = 10.0) -> None:
    """Wait (bounded) until the app's shadows have routed every queued request."""
    assert client.portal.call(state(client).shadows.join, timeout), "shadows did not finish"
