"""Run the code blocks of a documentation page, in order, as a reader would.

A page is read top to bottom; each fenced block is one of:

* `` ```python `` -- executed; all the page's Python blocks share one namespace;
* `` ```bash `` -- run by ``bash -euo pipefail`` with ``.venv/bin`` first on ``PATH`` (so
  ``hybridroute`` is the checkout's) and the public sets' directory in
  ``HYBRIDROUTE_DATA_DIR``;
* a block with a title (`` ```yaml title="rules.yaml" ``) -- written to that file first,
  whatever its language, and not run (the page shows the file a reader writes);
* anything else (``text``, ``json``, output shown to the reader) -- not run.

Every page runs in a fresh temporary directory, which is the working directory of its
blocks. An HTML comment on the line before a block says how to run it:

* ``<!-- test: skip REASON -->`` -- not run; the reason is required (a cluster, a paid
  provider, a command that installs an environment);
* ``<!-- test: background [URL] -->`` -- a bash block started in the background (a
  server), stopped when the page is done; with a URL, the next block waits until it
  answers 200;
* ``<!-- test: exit N -->`` -- a bash block that must exit with N (a refusal shown on
  purpose);
* ``<!-- test: output -->`` before a ``text`` block -- what the page says the previous bash
  block printed: each of its lines must be in that block's output (lines with ``…`` stand
  for what differs from run to run -- paths, run ids -- and are not compared).

A failing block fails the page with the block's line and its output.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
VENV_BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`\n]*)$")
_DIRECTIVE = re.compile(r"^<!-- test: (?P<kind>skip|background|exit|output)(?: (?P<arg>.*?))? -->$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
#: A block that runs longer than this fails (a hung server or a prompt).
BLOCK_TIMEOUT_S = 300


@dataclass
class Block:
    """One fenced block of a page."""

    line: int
    lang: str
    title: str | None
    code: str
    directive: str | None = None
    arg: str | None = None
    closed: bool = True


@dataclass
class PageRun:
    """What running a page did: the blocks run, written, skipped (with their reasons)."""

    page: str
    ran: list[int] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown text, with the directive written before each."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip("`") == ""
        ):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        lang = info.split()[0].lstrip(".{").rstrip("}") if info else ""
        title = _TITLE.search(info)
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        d = _DIRECTIVE.match(lines[k].strip()) if k >= 0 else None
        out.append(
            Block(
                line=i + 1,
                lang=lang,
                title=title["title"] if title else None,
                code="\n".join(body) + "\n",
                directive=d["kind"] if d else None,
                arg=(d["arg"] or None) if d else None,
                closed=j < len(lines),
            )
        )
        i = j + 1
    return out


_ANY_DIRECTIVE = re.compile(r"^<!-- *test\b.*-->$")


def lint(text: str) -> list[str]:
    """What is wrong with a page's blocks and directives, before anything runs (one line each).

    A fence left open, a directive that is misspelt or not followed by a block, a skip
    without its reason, an exit code that is not a number, an output block that follows no
    command: each would make the page run differently from what its author meant.
    """
    problems: list[str] = []
    found = blocks(text)
    starts = {b.line for b in found}
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not _ANY_DIRECTIVE.match(stripped) or any(
            b.line <= number <= b.line + b.code.count("\n") for b in found
        ):
            continue
        if not _DIRECTIVE.match(stripped):
            problems.append(f"line {number}: unknown directive {stripped!r}")
            continue
        k = number
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k + 1 not in starts:
            problems.append(f"line {number}: {stripped!r} is not followed by a code block")
    last_command: Block | None = None
    for b in found:
        where = f"line {b.line}"
        if not b.closed:
            problems.append(f"{where}: the code block is never closed")
        if b.directive == "skip" and not b.arg:
            problems.append(f"{where}: a skipped block must say why")
        if b.directive == "exit" and not (b.arg or "").lstrip("-").isdigit():
            problems.append(f"{where}: `test: exit` needs the expected exit code")
        if b.directive == "output" and (last_command is None or last_command.directive == "skip"):
            problems.append(f"{where}: an output block must follow a bash block that runs")
        if b.lang == "bash" and b.title is None:
            last_command = b
    return problems


def environment(workdir: Path) -> dict[str, str]:
    """The environment of a page's bash blocks."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", "")])
    env.pop("MLFLOW_TRACKING_URI", None)  # each page's runs go to its own ./mlflow.db
    shared = ROOT.parent / "shared" / "datasets"
    if "HYBRIDROUTE_DATA_DIR" not in env and shared.is_dir():
        env["HYBRIDROUTE_DATA_DIR"] = str(shared)
    env["HYBRIDROUTE_DOCS_TEST"] = "1"
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "120"
    env["PWD"] = str(workdir)
    return env


def _wait_http(url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer 200 within {timeout:.0f} s")


class BlockFailed(AssertionError):
    """A block of a page failed: the page, the block's line, what it printed."""


@contextlib.contextmanager
def _cwd(path: Path, env: dict[str, str]) -> Iterator[None]:
    """Python blocks run here, in the page's directory and environment (as bash blocks do)."""
    old, old_env = Path.cwd(), dict(os.environ)
    os.chdir(path)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.chdir(old)
        os.environ.clear()
        os.environ.update(old_env)


def _check_output(block: Block, printed: str, where: str) -> None:
    """Every line of a shown output (but those with ``…``) is in what the block printed."""
    have = [" ".join(line.split()) for line in printed.splitlines()]
    for line in block.code.splitlines():
        want = " ".join(line.split())  # table widths follow the terminal: spaces not compared
        if not want or "…" in want:
            continue
        if not any(want in h for h in have):
            raise BlockFailed(
                f"{where}: the page shows a line the command did not print: {want.strip()!r}\n"
                f"--- printed\n{printed[-4000:]}"
            )


def run_page(path: Path, workdir: Path, *, docs: Path = DOCS) -> PageRun:
    """Run every block of the page ``path`` in ``workdir`` (see the module docstring).

    ``docs`` is the folder the page's name is given from in messages (``tutorials/x.md``).
    """
    rel = str(path.relative_to(docs))
    workdir.mkdir(parents=True, exist_ok=True)
    result = PageRun(rel)
    env = environment(workdir)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    background: list[subprocess.Popen[bytes]] = []
    wait_url: str | None = None
    printed = ""
    try:
        for block in blocks(path.read_text(encoding="utf-8")):
            where = f"{rel}:{block.line}"
            if block.title is not None:
                target = workdir / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code, encoding="utf-8")
                result.written.append(block.title)
                continue
            if block.directive == "output":
                _check_output(block, printed, where)
                continue
            if block.lang not in ("python", "bash"):
                continue
            if block.directive == "skip":
                if not block.arg:
                    raise BlockFailed(f"{where}: a skipped block must say why")
                result.skipped.append((block.line, block.arg))
                continue
            if wait_url is not None:
                _wait_http(wait_url)
                wait_url = None
            if block.lang == "python":
                with _cwd(workdir, env):
                    try:
                        exec(compile(block.code, where, "exec"), namespace)
                    except Exception as exc:
                        raise BlockFailed(f"{where}: {type(exc).__name__}: {exc}") from exc
            elif block.directive == "background":
                log = open(workdir / f"background-{block.line}.log", "wb")
                proc = subprocess.Popen(
                    ["bash", "-euo", "pipefail", "-c", block.code],
                    cwd=workdir,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                background.append(proc)
                wait_url = block.arg
            else:
                expected = int(block.arg) if block.directive == "exit" and block.arg else 0
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", block.code],
                    cwd=workdir,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=BLOCK_TIMEOUT_S,
                )
                if done.returncode != expected:
                    raise BlockFailed(
                        f"{where}: exit {done.returncode} (expected {expected})\n"
                        f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
                    )
                printed = done.stdout + done.stderr
            result.ran.append(block.line)
    finally:
        for proc in background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    return result


if __name__ == "__main__":  # run one page by hand: python tests/docs/mdrun.py docs/x.md DIR
    import tempfile

    page = Path(sys.argv[1]).resolve()
    work = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="docs-"))
    work.mkdir(parents=True, exist_ok=True)
    done = run_page(page, work)
    print(f"{done.page}: ran {len(done.ran)} blocks, wrote {done.written}, skipped {done.skipped}")
    print(f"in {work}")
