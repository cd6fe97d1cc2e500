"""Shared fixtures of the tracking tests: one router bundle and one warmed SQLite store."""

from __future__ import annotations

import pytest

from ..support_router import support_router as build_support_router


@pytest.fixture(scope="session")
def support_router(tmp_path_factory):
    """(router, bundle directory, the support-tickets set) -- built once."""
    router, ds = build_support_router(version="7")
    bundle = router.save(tmp_path_factory.mktemp("tracking-bundle") / "bundle")
    return router, bundle, ds


@pytest.fixture(scope="session")
def sqlite_store(tmp_path_factory):
    """The URI of an embedded SQLite store whose tables already exist (creating them is slow)."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("tracking-store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    MlflowClient(uri).search_experiments()
    return uri
