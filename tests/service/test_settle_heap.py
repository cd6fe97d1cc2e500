"""A serving process tunes its garbage collector once its app is made (settle_heap).

``hybridroute serve`` -- one process, or each worker of ``--workers N`` -- freezes what it
holds when it starts serving (routers, app, modules: out of every later collection) and
collects its requests' garbage in larger passes; an app made with ``create_app`` inside
another program leaves that program's collector alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from hybridroute.service import _server, _worker
from hybridroute.service._server import GC_YOUNG_THRESHOLD, settle_heap

pytestmark = pytest.mark.service


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's thresholds and frozen objects put back after the test."""
    saved = gc.get_threshold()
    frozen = gc.get_freeze_count()
    try:
        yield
    finally:
        if gc.get_freeze_count() != frozen:
            gc.unfreeze()
        gc.set_threshold(*saved)


def test_settle_heap_freezes_what_is_held_and_raises_the_young_threshold(collector):
    held = [{"vocabulary": i} for i in range(1000)]  # made before serving: held for good
    older, oldest = gc.get_threshold()[1:]
    settle_heap()
    assert gc.get_freeze_count() >= len(held)
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, older, oldest)
    # garbage made after it is still collected
    cycle: list[Any] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


def test_serve_settles_the_heap_before_serving(monkeypatch, bundles, tmp_path):
    import uvicorn

    from hybridroute.service import ServiceConfig

    order: list[str] = []
    monkeypatch.setattr(_server, "settle_heap", lambda: order.append("settle"))
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: order.append("serve"))
    config = ServiceConfig(router=bundles["v1"], log=f"sqlite:///{tmp_path / 'log.sqlite'}")
    _server.run(config, host="127.0.0.1", port=0)
    assert order == ["settle", "serve"]


def test_each_worker_settles_its_heap_after_making_its_app(monkeypatch, bundles, tmp_path):
    from hybridroute.service import ServiceConfig

    calls: list[str] = []
    monkeypatch.setattr(_server, "settle_heap", lambda: calls.append("settle"))
    config = ServiceConfig(
        router=bundles["v1"], log=f"sqlite:///{tmp_path / 'log.sqlite'}", admin=False
    )
    monkeypatch.setenv(_worker.CONFIG_ENV, config.to_json())
    app = _worker.app_from_env()
    assert calls == ["settle"] and app.state.hybridroute is not None


def test_an_app_made_by_create_app_leaves_the_collector_alone(collector, make_app, tmp_path):
    before = (gc.get_threshold(), gc.get_freeze_count())
    client = make_app(tmp_path)
    assert client.get("/healthz").status_code == 200
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
