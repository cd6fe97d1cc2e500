"""The status page as HTML (the browser test drives it in chromium): what it shows, that
it loads nothing from anywhere, and that every value is escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from .helpers import PARCEL, RULE, drain_shadows, state

pytestmark = pytest.mark.service


class _Cells(HTMLParser):
    """data-count values by the data-* key of their row, per table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, int]] = {}
        self.ids: dict[str, str] = {}
        self._table: str | None = None
        self._row: str | None = None
        self._id: str | None = None
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a and tag != "a":
                self.srcs.append(a[key] or "")
        if tag == "table" and "id" in a:
            self._table = a["id"]
            self.tables[a["id"]] = {}
        if tag == "tr":
            self._row = next((v for k, v in a.items() if k.startswith("data-")), None)
        if tag == "td" and "data-count" in a and self._table and self._row is not None:
            self.tables[self._table][self._row] = int(a["data-count"])
        if "id" in a:
            self._id = a["id"]

    def handle_data(self, data):
        if self._id is not None and data.strip():
            self.ids.setdefault(self._id, data.strip())

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        if tag != "td":
            self._id = None


def test_the_page_shows_versions_counts_and_shadows(make_app, tmp_path):
    client = make_app(tmp_path, shadows=("v2",), segment_fact="action")
    for _ in range(3):
        client.post("/v1/route", json=PARCEL)
    client.post("/v1/route", json=RULE)
    drain_shadows(client)
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    page = _Cells()
    page.feed(r.text)
    assert page.ids["live-version"] == "1"
    assert page.ids["window-size"] == "4"
    assert page.tables["by-destination"] == {"order_status": 3, "reject": 1}
    assert sum(page.tables["by-reason"].values()) == 4
    assert page.srcs == []  # nothing is loaded: no script, image, stylesheet or font
    assert '<a href="/metrics">' in r.text
    assert 'data-shadow="2"' in r.text and 'data-compared="4"' in r.text
    assert not re.search(r"https?://", r.text)


def test_every_value_is_escaped(make_app, tmp_path):
    from hybridroute.service._status_page import render_status
    from hybridroute.service._window import RecentWindow

    client = make_app(tmp_path, segment_fact="action")
    hostile = "<img src=x onerror=alert(1)>"
    window = RecentWindow(10, "action")
    window.add_live(
        [
            {
                "router_version": hostile,
                "stage": "fallback",
                "selected_destination": hostile,
                "reason_code": "</td><script>x</script>",
                "detail": {"cause": hostile},
                "input_snapshot": {"facts": {"action": '"><b>'}},
            }
        ]
    )
    state(client).window = window
    html = render_status(state(client))
    assert "<img" not in html and "<script" not in html and '"><b>' not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
