"""MkDocs hooks: the generated pages and the generated parts of hand-written pages.

Generated when the site is built, never copied by hand:

* ``reference/api/*.md`` -- the Python API, one entry per public name (:mod:`gen_api`);
* ``reference/cli.md`` -- every command and option (:mod:`gen_cli`);
* ``reference/http.md`` and ``reference/openapi.json`` -- the HTTP API (:mod:`gen_http`);
* ``benchmarks.md`` -- the tables of the committed benchmark runs (:mod:`gen_bench`);
* ``<!-- gen:... -->`` lines in hand-written pages (:mod:`gen_formats`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import gen_api  # noqa: E402
import gen_bench  # noqa: E402
import gen_cli  # noqa: E402
import gen_formats  # noqa: E402
import gen_http  # noqa: E402


def generated_pages() -> dict[str, str]:
    """``{path in the site: content}`` of every generated page."""
    pages = dict(gen_api.pages())
    pages[gen_cli.PAGE] = gen_cli.page()
    pages[gen_http.PAGE] = gen_http.page()
    pages[gen_http.SCHEMA] = gen_http.schema_json()
    pages[gen_bench.PAGE] = gen_bench.page()
    return pages


def _expand_nav(items: list[Any]) -> list[Any]:
    """The nav with the API index's entry turned into a section of every module page."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            (title, value), *_ = item.items()
            if value == "reference/api/index.md":
                out.append({title: ["reference/api/index.md", *gen_api.nav_entries()]})
            elif isinstance(value, list):
                out.append({title: _expand_nav(value)})
            else:
                out.append(item)
        else:
            out.append(item)
    return out


def on_config(config: Any) -> Any:
    # the build imports hybridroute: keep it offline and quiet, like the library's defaults
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    config["nav"] = _expand_nav(config["nav"])
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return gen_formats.expand(markdown, page.file.src_uri)
