"""The HTTP floor: the least a Python ASGI server spends on one request on this machine.

A bare ASGI app served by uvicorn the way ``hybridroute serve`` is served (uvloop,
httptools, no access log) that reads a request's body and answers a fixed small JSON
document. ``bench_service.py`` loads it like the service and reports the server CPU it
takes per request: what a single-item request costs before any routing, the part of the
gap between single items and batches that no change inside hybridroute can remove.

    python benchmarks/_floor_app.py PORT
"""

from __future__ import annotations

import sys
from typing import Any

ANSWER = b'{"decision_id":"d","duplicate":false,"decision":{"destination":"x"}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the body, answer 200 with :data:`ANSWER` (lifespan: accepted)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


def main() -> None:
    import uvicorn

    port = int(sys.argv[1])
    uvicorn.run(
        app, host="127.0.0.1", port=port, access_log=False, log_level="warning",
        loop="uvloop", http="httptools",
    )  # fmt: skip


if __name__ == "__main__":
    main()
