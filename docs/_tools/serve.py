"""Build the documentation site strictly and serve it on 127.0.0.1 (``python3 dev.py docs``).

    python3 dev.py docs                 # build into site/, serve on http://127.0.0.1:8000/
    python3 dev.py docs --port 8123     # another port (0: any free one)
    python3 dev.py docs --build-only    # build and stop (what CI checks)
    python3 dev.py docs --live          # mkdocs serve: rebuilds on every saved change

The build is strict (``mkdocs build --strict``): a broken link, a missing reference or a
docstring warning stops it with the warning, and nothing is served. The site is static, so
the search, the API pages and the notebook page all work from ``site/`` as served here.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"
HOST = "127.0.0.1"


def build(site: Path = SITE) -> int:
    """``mkdocs build --strict`` into ``site``; the exit status (0 when it built)."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return subprocess.call(cmd, cwd=ROOT)


def free_port(wanted: int) -> int:
    """``wanted`` when it is free on 127.0.0.1, else any free port."""
    with socket.socket() as s:
        try:
            s.bind((HOST, wanted))
        except OSError:
            s.bind((HOST, 0))
        return int(s.getsockname()[1])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves files without a log line per request (they would drown the URL)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(site: Path, port: int) -> None:
    """Serve ``site`` on 127.0.0.1 until interrupted, printing the URL first."""
    handler = functools.partial(_Quiet, directory=str(site))
    try:
        httpd = http.server.ThreadingHTTPServer((HOST, port), handler)
    except OSError:  # taken since we looked: any free port
        httpd = http.server.ThreadingHTTPServer((HOST, 0), handler)
    with httpd:
        url = f"http://{HOST}:{httpd.server_address[1]}/"
        print(f"The documentation: {url}  (Ctrl-C to stop)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            print("stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dev.py docs", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any)")
    parser.add_argument("--build-only", action="store_true", help="build strictly and stop")
    parser.add_argument("--live", action="store_true", help="mkdocs serve (live reload)")
    args = parser.parse_args(argv)
    # Material's banner about MkDocs 2 says nothing about this site's build
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    port = free_port(args.port)
    if args.live:
        print(f"The documentation: http://{HOST}:{port}/  (Ctrl-C to stop)", flush=True)
        cmd = [sys.executable, "-m", "mkdocs", "serve", "--strict", "-a", f"{HOST}:{port}"]
        return subprocess.call(cmd, cwd=ROOT)
    rc = build()
    if rc:
        print("the documentation site did not build (see the warnings above)", file=sys.stderr)
        return rc
    print(f"built {SITE}", flush=True)
    if not args.build_only:
        serve(SITE, port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
