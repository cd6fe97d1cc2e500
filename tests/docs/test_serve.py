"""``python3 dev.py docs``: builds the site strictly, then serves it on 127.0.0.1 and prints
the URL; a build that fails serves nothing (issue 29, item 4).

The real build is checked by ``test_site.py``; here the build step is replaced by a stand-in
(a written page, or a failure) so the serving part runs in a second.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from .conftest import ROOT

SERVE = ROOT / "docs" / "_tools" / "serve.py"

_STANDIN = """
import sys
sys.path.insert(0, {tools!r})
import serve
from pathlib import Path

def build(site=None):
    if {fail}:
        print("WARNING - a broken link", file=sys.stderr)
        return 1
    Path({site!r}).mkdir(parents=True, exist_ok=True)
    Path({site!r}, "index.html").write_text("<h1>hybridroute</h1>")
    return 0

serve.build = build
serve.SITE = Path({site!r})
sys.exit(serve.main(sys.argv[1:]))
"""


def _start(tmp_path: Path, *args: str, fail: bool = False) -> subprocess.Popen[str]:
    code = _STANDIN.format(tools=str(SERVE.parent), site=str(tmp_path / "site"), fail=fail)
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_dev_py_docs_runs_the_serve_script_in_the_checkout():
    spec = importlib.util.spec_from_file_location("dev_for_docs", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    cmd, cwd = dev.plan("docs", ["--port", "0"])
    assert [str(c) for c in cmd[1:]] == [str(SERVE), "--port", "0"]
    assert cwd == dev.ROOT
    assert "python3 dev.py docs" in (dev.__doc__ or "")


@pytest.mark.parametrize("port", ["0", None])
def test_the_built_site_is_served_on_127_0_0_1_and_the_url_printed(tmp_path, port):
    args = ["--port", port] if port else []
    proc = _start(tmp_path, *args)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        (line,) = [ln for ln in lines if "http://" in ln]
        url = line.split()[2]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "index.html", timeout=10) as resp:
            assert resp.status == 200 and b"hybridroute" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_site_that_does_not_build_is_not_served(tmp_path):
    proc = _start(tmp_path, fail=True)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "http://" not in out
    assert "did not build" in err and "broken link" in err


def test_build_only_builds_and_stops(tmp_path):
    proc = _start(tmp_path, "--build-only")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "built" in out and "http://" not in out
    assert (tmp_path / "site" / "index.html").is_file()
