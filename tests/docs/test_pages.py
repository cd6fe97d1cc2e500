"""Every code block of the documentation runs (issue 29, item 3: docs that cannot rot).

Each page of ``docs/`` is run top to bottom by :mod:`tests.docs.mdrun` in a fresh
temporary directory, as a reader would run it: Python blocks share one namespace, bash
blocks run with the checkout's ``hybridroute`` first on ``PATH``, titled blocks are the
files a reader writes, and a ``<!-- test: output -->`` block must match what the command
before it printed. A page without runnable blocks is still parsed and checked (an open
fence or a misspelt directive fails it). The README's relative links must resolve. (The
notebook is executed by ``test_notebook.py``.)

Pages whose blocks take longer than the fast suite allows are marked slow in
:data:`SLOW_PAGES` (with what makes them long); they run with ``python3 dev.py slow
tests/docs``.
"""

from __future__ import annotations

import re

import pytest

from . import mdrun

DOCS = mdrun.DOCS
ROOT = mdrun.ROOT
#: Pages whose code takes about 20 s or more here (2 shared cores): page -> what makes it
#: long. They run with `python3 dev.py slow tests/docs` (and in CI, .ci/run).
SLOW_PAGES: dict[str, str] = {
    "getting-started/demo.md": "the whole demo (~25 s)",
    "guides/classifiers.md": "serves the stand-in LLM and trains through it (~20 s)",
    "guides/mlflow.md": "runs an experiment spec into MLflow (~20 s)",
    "tutorials/evaluate.md": "trains, calibrates and evaluates a router (~35 s)",
    "tutorials/own-model.md": "fits a classifier on Banking77 (~40 s)",
    "tutorials/own-tickets.md": "trains, calibrates, bundles and evaluates (~20 s)",
    "tutorials/serve-and-loop.md": "serves a router and closes the loop (~25 s)",
    "tutorials/spark.md": "starts Spark (~55 s)",
}
#: Pages that need an optional extra: marked with it, so a run without the extra reports them
#: as NOT run (and CI, which requires every extra, runs them).
EXTRA_PAGES: dict[str, str] = {"tutorials/spark.md": "spark"}


def _pages() -> list[str]:
    return sorted(
        p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_tools" not in p.parts
    )


def _param(page: str) -> object:
    marks = [pytest.mark.slow] if page in SLOW_PAGES else []
    if page in EXTRA_PAGES:
        marks.append(getattr(pytest.mark, EXTRA_PAGES[page]))
    return pytest.param(page, marks=marks, id=page)


def test_the_pages_are_found():
    pages = _pages()
    assert "index.md" in pages and "tutorials/own-tickets.md" in pages
    assert set(SLOW_PAGES) | set(EXTRA_PAGES) <= set(pages), "a marked page no longer exists"


@pytest.mark.parametrize("page", [_param(p) for p in _pages()])
def test_the_code_of_every_page_runs(page, tmp_path):
    path = DOCS / page
    problems = mdrun.lint(path.read_text(encoding="utf-8"))
    assert not problems, f"{page}:\n" + "\n".join(problems)
    result = mdrun.run_page(path, tmp_path)
    # what was not run says why (a cluster, a paid provider): never silently
    for line, reason in result.skipped:
        assert reason.strip(), f"{page}:{line} is skipped without a reason"


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_the_readmes_relative_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a URL, or a heading of the README itself
        file = target.split("#")[0]
        if file and not (ROOT / file).exists():
            broken.append(target)
    assert not broken, f"README.md links to files that do not exist: {broken}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```bash\necho hi\n", "never closed"),
        ("<!-- test: skip -->\n```bash\necho hi\n```\n", "must say why"),
        ("<!-- test: skp no -->\n```bash\necho hi\n```\n", "unknown directive"),
        ("<!-- test: exit two -->\n```bash\nfalse\n```\n", "expected exit code"),
        ("<!-- test: output -->\n```text\nhi\n```\n", "must follow a bash block"),
        ("<!-- test: background -->\n\nsome text\n", "not followed by a code block"),
    ],
)
def test_a_page_that_would_run_differently_from_what_it_says_is_refused(text, problem):
    problems = mdrun.lint(text)
    assert any(problem in p for p in problems), problems


def test_a_failing_block_fails_the_page_with_its_line(tmp_path):
    text = "# t\n\n```bash\necho before\nexit 3\n```\n"
    probe = tmp_path / "docs"
    probe.mkdir()
    (probe / "p.md").write_text(text, encoding="utf-8")
    with pytest.raises(mdrun.BlockFailed, match=r"p.md:3: exit 3 \(expected 0\)"):
        mdrun.run_page(probe / "p.md", tmp_path, docs=probe)


def test_a_shown_output_must_match_what_the_command_printed(tmp_path):
    probe = tmp_path / "docs"
    probe.mkdir()
    text = (
        "```bash\necho 'routed 3 of 4'\n```\n\n<!-- test: output -->\n```text\nrouted 4 of 4\n```\n"
    )
    (probe / "p.md").write_text(text, encoding="utf-8")
    with pytest.raises(mdrun.BlockFailed, match="did not print: 'routed 4 of 4'"):
        mdrun.run_page(probe / "p.md", tmp_path / "w", docs=probe)
