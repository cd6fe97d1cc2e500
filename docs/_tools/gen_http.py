"""The HTTP API reference, generated from the service's route table.

The service reads request bodies by hand (so that each refusal is the command line's own
message), and serves no OpenAPI document (``openapi_url=None``: an open schema endpoint is
one more thing to expose). So the reference is made here, at build time: every
``fastapi.APIRouter`` the ``hybridroute.service`` modules define is mounted on a bare app,
FastAPI writes the OpenAPI document of its routes (method, path, summary, description from
the endpoint's docstring), and the page renders it, with the request-item keys and the
error codes read from the code. The document itself is published beside the page as
``reference/openapi.json``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from typing import Any

PAGE = "reference/http.md"
SCHEMA = "reference/openapi.json"

#: Routes that need the admin bearer token (``HYBRIDROUTE_ADMIN_TOKEN``).
_ADMIN_PREFIXES = ("/v1/admin/", "/v1/outcomes", "/v1/audits")


def routers() -> list[Any]:
    """Every ``APIRouter`` defined in a module of ``hybridroute.service``."""
    from fastapi import APIRouter

    import hybridroute.service as service

    found: list[Any] = []
    for info in pkgutil.iter_modules(service.__path__, service.__name__ + "."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, APIRouter) and value not in found:
                found.append(value)
    return found


def openapi() -> dict[str, Any]:
    """The OpenAPI document of the service's routes."""
    from fastapi import FastAPI
    from fastapi.openapi.utils import get_openapi

    import hybridroute

    app = FastAPI()
    for router in routers():
        app.include_router(router)
    return get_openapi(
        title="hybridroute routing service",
        version=hybridroute.__version__,
        description="The HTTP API of `hybridroute serve` (generated from its route table).",
        routes=app.routes,
    )


def endpoints() -> list[tuple[str, str, str]]:
    """``(METHOD, path, docstring)`` of every route, sorted by path."""
    doc = openapi()
    out = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            out.append((method.upper(), path, op.get("description") or op.get("summary", "")))
    return sorted(out, key=lambda e: (e[1], e[0]))


def anchor(method: str, path: str) -> str:
    """The section anchor of an endpoint: ``post-v1-route-batch``."""
    return (method + path).lower().replace("/", "-").strip("-")


def _problem_doc() -> str:
    from hybridroute.service._input import RequestProblem

    doc = inspect.getdoc(RequestProblem) or ""
    # the numpydoc "Parameters" of the error: the statuses and codes, as written in the code
    return doc


def page() -> str:
    """The markdown of the HTTP reference."""
    from hybridroute.service._input import ITEM_KEYS

    rows = endpoints()
    lines = [
        "# HTTP API",
        "",
        "The routes of `hybridroute serve`, generated from the service's route table when the",
        "site is built ([OpenAPI document](openapi.json)). The service itself publishes no",
        "schema endpoint. Bodies are JSON and must be sent with",
        "`Content-Type: application/json`; a browser request from another origin is refused",
        "unless `--cors-origin` names it. Routes marked *admin* need",
        "`Authorization: Bearer $HYBRIDROUTE_ADMIN_TOKEN` and are off (403 `admin_disabled`)",
        "when the variable is not set. The [serve tutorial](../tutorials/serve-and-loop.md)",
        "walks through them.",
        "",
        "| method | path | what it does |",
        "|---|---|---|",
    ]
    for method, path, doc in rows:
        admin = " *(admin)*" if path.startswith(_ADMIN_PREFIXES) else ""
        first = " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")
        lines.append(f"| `{method}` | [`{path}`](#{anchor(method, path)}) | {first}{admin} |")
    lines.append("")
    for method, path, doc in rows:
        lines += [f"## `{method} {path}` {{#{anchor(method, path)}}}", "", doc.strip(), ""]
        if path.startswith(_ADMIN_PREFIXES):
            lines += ["Needs the admin bearer token.", ""]
    keys = ", ".join(f"`{k}`" for k in ITEM_KEYS)
    lines += [
        "## Request items",
        "",
        f"An item (the body of `POST /v1/route`, an element of a batch's `items`) has the keys "
        f"{keys}; any other key is refused. Facts are checked against the router's facts "
        "schema exactly as the library checks them "
        "([`HybridRouter.check`](api/hybridroute.router.md#hybridroute.router.HybridRouter)).",
        "",
        "## Errors",
        "",
        'Every refusal is `{"error": {"code", "field", "message"}}` with a 4xx status; the',
        "field names what was wrong (`facts.amount`, `items[3].text`). From the code",
        "(`hybridroute.service._input.RequestProblem`):",
        "",
        "```text",
        _problem_doc(),
        "```",
        "",
    ]
    return "\n".join(lines)


def schema_json() -> str:
    """The OpenAPI document as JSON text."""
    return json.dumps(openapi(), indent=2, sort_keys=True) + "\n"
