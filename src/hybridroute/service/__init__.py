"""The routing service: ``hybridroute serve``, or an app factory for any ASGI server.

::

    from hybridroute.service import ServiceConfig, create_app

    app = create_app(ServiceConfig(router="bundle/", log="sqlite:///decisions.sqlite"))
    # uvicorn.run(app, host="127.0.0.1", port=8080)

* :class:`ServiceConfig` -- what is served and under which limits (frozen, checked when
  made; importable without the ``service`` extra);
* :func:`create_app` -- the FastAPI application (needs the ``service`` extra: fastapi,
  uvicorn, prometheus-client; ``pip install 'hybridroute[service]'``).

FastAPI and prometheus-client are imported only when :func:`create_app` is first used.
"""

from __future__ import annotations

from typing import Any

from ._config import ServiceConfig

__all__ = ["ServiceConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from ._app import create_app

        globals()["create_app"] = create_app
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
