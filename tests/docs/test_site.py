"""The documentation site: built strictly, its reference generated from the code, and it works
in a browser (issue 29, items 2 and 3).

All the tests of the built site are in this module, so the site is built once per session
(``built_site``) even under pytest-xdist (whole files to a worker).

* the build is strict: a broken link, a missing cross-reference or a docstring warning
  fails it (checked with small sites made to fail, each in a few seconds);
* every public name of every ``__all__`` of hybridroute has a rendered entry on the API
  pages; every CLI command has a section naming all its options; the HTTP page and its
  OpenAPI document come from the service's route table and list every route the real app
  serves;
* in a headless Chromium: the pages load without a console error, the navigation and the
  search work, and the API page of a public class shows its signature and parameters.
"""

from __future__ import annotations

import html
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import ROOT, build_site

TOOLS = ROOT / "docs" / "_tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import gen_api  # noqa: E402
import gen_cli  # noqa: E402
import gen_http  # noqa: E402


def _page(site: Path, path: str) -> str:
    file = site / path
    assert file.is_file(), f"{path} is not in the built site"
    return file.read_text(encoding="utf-8")


def _ids(text: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'\bid="([^"]+)"', text)]


def _nav_pages() -> list[str]:
    """Every page the navigation of mkdocs.yml names (the generated API pages come on top)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    out: list[str] = []

    def walk(items: Any) -> None:
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if isinstance(value, list):
                walk(value)
            else:
                out.append(value)

    walk(config["nav"])
    return out


def _html_name(page: str) -> str:
    return re.sub(r"\.(md|ipynb)$", ".html", page)


# ------------------------------------------------------------------------------ the build


def test_every_page_of_the_navigation_and_every_generated_page_is_built(built_site):
    for page in _nav_pages():
        _page(built_site, _html_name(page))
    for module in gen_api.documented_modules():
        _page(built_site, _html_name(gen_api.page_name(module)))
    for generated in (gen_cli.PAGE, gen_http.PAGE, "benchmarks.md"):
        _page(built_site, _html_name(generated))
    assert json.loads(_page(built_site, gen_http.SCHEMA))["paths"]
    assert json.loads(_page(built_site, "search/search_index.json"))["docs"]


def _small_site(tmp_path: Path, page: str, module: str = "") -> Path:
    """A one-page site with the project's settings (strict, the same plugins and docstring
    handling) but none of its generated pages: it builds in a few seconds."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(page, encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\nA page to link to.\n", encoding="utf-8")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "sample.py").write_text(module or '"""A module."""\n', encoding="utf-8")
    config.update(docs_dir=str(docs), nav=["index.md", "other.md"], hooks=[])
    config.pop("not_in_nav", None)
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            python = plugin["mkdocstrings"]["handlers"]["python"]
            python["paths"] = [str(pkg), str(ROOT / "src")]
            python["options"]["extensions"] = [
                str(ROOT / e) if e.endswith(".py") or ".py:" in e else e
                for e in python["options"]["extensions"]
            ]
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


_GOOD_MODULE = '''"""A module."""


def double(x: int) -> int:
    """Twice ``x``.

    Parameters
    ----------
    x : int
        The number.
    """
    return 2 * x
'''


@pytest.mark.parametrize(
    ("page", "module", "warning"),
    [
        ("# Home\n\nSee [the other page](missing.md).\n", "", "missing.md"),
        ("# Home\n\nSee [there](other.md#no-such-heading).\n", "", "no-such-heading"),
        ("# Home\n\n[The router][hybridroute.router.NoSuchName].\n", "", "NoSuchName"),
        (
            "# Home\n\n::: sample.double\n",
            _GOOD_MODULE.replace("    x : int\n", "    y : int\n"),
            "'y' does not appear in the function signature",
        ),
    ],
    ids=["broken-link", "broken-anchor", "missing-reference", "docstring-warning"],
)
def test_a_warning_fails_the_build(tmp_path, page, module, warning):
    done = build_site(tmp_path / "site", _small_site(tmp_path, page, module))
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert warning in out and "strict" in out.lower(), out[-3000:]


def test_the_same_small_site_without_the_mistake_builds(tmp_path):
    page = "# Home\n\nSee [there](other.md) and [the function][sample.double].\n"
    done = build_site(
        tmp_path / "site", _small_site(tmp_path, page + "\n::: sample.double\n", _GOOD_MODULE)
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert 'id="sample.double"' in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


def test_every_generated_part_was_filled_in(built_site):
    """A ``<!-- gen:... -->`` line the hook did not replace (indented, misspelt) would be
    left in the page as an invisible comment: none is."""
    left = [
        str(p.relative_to(built_site))
        for p in built_site.rglob("*.html")
        if "<!-- gen:" in p.read_text(encoding="utf-8")
    ]
    assert not left, f"generated parts left unexpanded in {left}"


def test_the_benchmarks_page_is_made_from_every_committed_run(built_site):
    import gen_bench

    text = html.unescape(_page(built_site, "benchmarks.html"))
    files = gen_bench.run_files()
    assert files, "no committed benchmark runs"
    for path in files:
        assert path.name in text, f"{path.name} is not on the benchmarks page"
    assert "no table generator knows this file" not in text


# -------------------------------------------------------------------------- the Python API


def _public_names() -> list[tuple[str, str]]:
    return [
        (module, name)
        for module in gen_api.public_modules()
        for name in importlib.import_module(module).__all__
    ]


@pytest.mark.parametrize("module", gen_api.public_modules())
def test_every_public_name_has_a_rendered_reference_entry(built_site, module):
    documented = set(gen_api.documented_modules())
    mod = importlib.import_module(module)
    assert mod.__all__, f"{module} has an empty __all__"
    missing = []
    for name in mod.__all__:
        if name == "__version__":  # a string: the API index names the version it documents
            index = _page(built_site, "reference/api/index.html")
            assert importlib.import_module("hybridroute").__version__ in index
            continue
        page = gen_api.covered_by(module, name, documented)
        if page is None:
            missing.append(f"{module}.{name} (no page renders it)")
            continue
        text = _page(built_site, _html_name(gen_api.page_name(page)))
        entry = f"{page}.{name}"
        if entry not in _ids(text):
            missing.append(f"{module}.{name} (no entry {entry!r} on {page}'s page)")
    assert not missing, "\n".join(missing)


def test_the_reference_covers_every_public_module():
    names = _public_names()
    assert len(names) > 150  # the whole public surface, not a sample
    modules = {m for m, _ in names}
    assert {"hybridroute", "hybridroute.router", "hybridroute.calibration"} <= modules


def test_a_class_entry_has_its_docstring_signature_and_parameters(built_site):
    text = _page(built_site, "reference/api/hybridroute.router.html")
    start = text.index('id="hybridroute.router.HybridRouter"')
    entry = text[start : start + 40_000]
    assert "doc-signature" in entry  # the signature, from the code
    assert "Parameters" in entry and "rules" in entry and "classifier" in entry


# ----------------------------------------------------------------------- the command line


def _cli_sections(text: str) -> dict[str, str]:
    """Each command's section of the CLI page: from its anchor to the next command's."""
    anchors = {gen_cli.anchor(p): p for p in gen_cli.command_paths()}
    found = sorted(
        (m.start(), anchors[m.group(1)])
        for m in re.finditer(r'id="([^"]+)"', text)
        if m.group(1) in anchors
    )
    ends = [pos for pos, _ in found[1:]] + [len(text)]
    return {
        path: html.unescape(text[pos:end]) for (pos, path), end in zip(found, ends, strict=True)
    }


@pytest.mark.parametrize("path", gen_cli.command_paths())
def test_every_command_has_a_section_naming_its_options(built_site, path):
    sections = _cli_sections(_page(built_site, "reference/cli.html"))
    assert path in sections, f"no section for `{path}` on the CLI page"
    section = sections[path]
    (command,) = [c for p, c, _ in gen_cli.commands() if " ".join(p) == path]
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        names = [*param.opts, *getattr(param, "secondary_opts", [])]
        if type(param).__name__.endswith("Argument"):
            names = [param.name.upper()]
        for name in names:
            assert name in section, f"`{path}`: {name} is not in its section"


def test_the_cli_page_lists_every_command():
    assert len(gen_cli.command_paths()) >= 20
    assert "hybridroute train" in gen_cli.command_paths()


# ------------------------------------------------------------------------------- HTTP API


def _real_app_routes(tmp_path: Path) -> set[tuple[str, str]]:
    """``(METHOD, path)`` of every API route the real service app serves."""
    from fastapi.routing import APIRoute

    from hybridroute.service import ServiceConfig, create_app

    from ..support_router import support_router

    router, _ = support_router(version="1")
    bundle = router.save(tmp_path / "bundle")
    app = create_app(ServiceConfig(router=bundle, log=f"sqlite:///{tmp_path / 'log.sqlite'}"))
    return {
        (method, route.path)
        for route in app.routes
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods
    }


def test_the_http_page_comes_from_the_services_openapi_schema(built_site, tmp_path):
    shipped = json.loads(_page(built_site, gen_http.SCHEMA))
    assert shipped == gen_http.openapi()  # generated at build time, not copied
    documented = {(m.upper(), p) for p, ops in shipped["paths"].items() for m in ops}
    assert _real_app_routes(tmp_path) <= documented
    ids = set(_ids(_page(built_site, "reference/http.html")))
    for method, path in documented:
        assert gen_http.anchor(method, path) in ids, f"no section for {method} {path}"
    assert ("POST", "/v1/route") in documented


# -------------------------------------------------------------------------------- browser


#: The links of the search results, read in one go (the list re-renders while it fills).
_RESULTS_JS = "return [...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)"


def _loaded(browser: Any) -> bool:
    return browser.execute_script("return document.readyState") == "complete"


@pytest.mark.browser
def test_the_site_works_in_a_browser(site_url):
    """Every page of the navigation and an API page load with no console error; a link of
    the navigation and a search result take the reader to their page; the API page of a
    public class renders its entry."""
    from selenium.webdriver.common.by import By

    from ..browser import chromium, console_errors, wait_for

    pages = [_html_name(p) for p in _nav_pages()] + ["reference/api/hybridroute.router.html"]
    with chromium() as browser:
        errors: dict[str, list[str]] = {}
        for page in pages:
            browser.get(f"{site_url}/{page}")
            wait_for(lambda: _loaded(browser), timeout=20, what=page)
            found = [e["message"] for e in console_errors(browser)]
            if found:
                errors[page] = found
        assert not errors, errors

        # navigation: the sidebar's link to the CLI reference opens it
        browser.get(f"{site_url}/index.html")
        link = wait_for(
            lambda: next(
                (
                    a
                    for a in browser.find_elements(By.CSS_SELECTOR, "nav.md-nav a.md-nav__link")
                    if (a.get_attribute("href") or "").endswith("reference/cli.html")
                    and a.is_displayed()
                ),
                None,
            ),
            what="the sidebar link to the CLI reference",
        )
        link.click()
        wait_for(lambda: browser.current_url.endswith("reference/cli.html"), what="the CLI page")
        assert "Command line" in browser.find_element(By.TAG_NAME, "h1").text

        # search: a query lists results (stable once the index is loaded), the first opens
        browser.find_element(By.CSS_SELECTOR, "input.md-search__input").click()
        box = wait_for(
            lambda: next(
                (
                    e
                    for e in browser.find_elements(By.CSS_SELECTOR, "input.md-search__input")
                    if e.is_displayed()
                ),
                None,
            ),
            what="the search box",
        )
        box.send_keys("HybridRouter")
        seen: list[list[str]] = [[]]

        def stable_results() -> list[str] | None:
            now = browser.execute_script(_RESULTS_JS)
            same = bool(now) and now == seen[-1]
            seen.append(now)
            return now if same else None

        hrefs = wait_for(stable_results, timeout=30, what="search results")
        assert any("hybridroute.router.html" in h for h in hrefs), hrefs
        browser.find_element(By.CSS_SELECTOR, ".md-search-result__item a").click()
        wait_for(
            lambda: browser.current_url.split("#")[0] == hrefs[0].split("#")[0],
            what="the first result's page",
        )

        # the API page of a public class: its heading, signature and parameters are shown
        browser.get(
            f"{site_url}/reference/api/hybridroute.router.html#hybridroute.router.HybridRouter"
        )
        heading = wait_for(
            lambda: browser.find_element(By.ID, "hybridroute.router.HybridRouter"), what="the class"
        )
        assert heading.is_displayed() and "HybridRouter" in heading.text
        entry = heading.find_element(By.XPATH, "./ancestor::div[contains(@class, 'doc-class')][1]")
        assert "Parameters" in entry.text and "classifier" in entry.text
        assert entry.find_elements(By.CSS_SELECTOR, ".doc-signature")
        assert console_errors(browser) == []
