"""The app of one worker process of ``hybridroute serve --workers N``.

uvicorn's multi-process mode starts each worker from an import string, so the
configuration travels in the environment variable :data:`CONFIG_ENV` as
:meth:`ServiceConfig.to_json` wrote it (without the salt: workers read
``HYBRIDROUTE_LOG_SALT`` as the parent did). Each worker loads its own routers and opens
its own connection to the log; admin endpoints are off, since a reload or a promotion
would reach only the worker that answered it.
"""

from __future__ import annotations

import os
from typing import Any

from ..exceptions import UserInputError

__all__ = ["CONFIG_ENV", "IMPORT_STRING", "app_from_env"]

#: The environment variable holding the workers' configuration (JSON).
CONFIG_ENV = "HYBRIDROUTE_SERVICE_CONFIG"
#: What uvicorn imports in each worker (a factory: ``factory=True``).
IMPORT_STRING = "hybridroute.service._worker:app_from_env"


def app_from_env() -> Any:
    """The app of the configuration in :data:`CONFIG_ENV` (admin endpoints off)."""
    from ._app import create_app
    from ._config import ServiceConfig

    text = os.environ.get(CONFIG_ENV)
    if not text:
        raise UserInputError(f"{CONFIG_ENV} is not set: start workers with hybridroute serve")
    config = ServiceConfig.from_json(text)
    if config.admin:
        raise UserInputError(f"{CONFIG_ENV}: a worker's configuration must turn admin off")
    app = create_app(config)
    from ._server import settle_heap

    settle_heap()  # this worker process serves until it stops
    return app
