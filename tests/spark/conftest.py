"""One local Spark session (``local[2]``) for the whole test session, stopped at the end."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from hybridroute.spark import local_session

    session = local_session(
        "hybridroute-tests", master="local[2]", driver_memory="1g", shuffle_partitions=4
    )
    yield session
    session.stop()
