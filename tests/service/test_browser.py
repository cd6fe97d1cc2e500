"""The status page in a real headless chromium (selenium 4 + Debian's chromedriver),
served by a real uvicorn server after some traffic."""

from __future__ import annotations

import time

import httpx
import pytest

from hybridroute.client import RouterClient

from ..browser import chromium
from .conftest import uvicorn_thread
from .helpers import PARCEL, RULE, TEXTS

pytestmark = [pytest.mark.service, pytest.mark.browser]


def wait_for_shadows(url: str, n: int, timeout: float = 10.0) -> None:
    """Until the shadow has routed ``n`` requests (they run after the answers; bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f'data-compared="{n}"' in httpx.get(url + "/").text:
            return
        time.sleep(0.05)
    raise AssertionError(f"the shadow did not log {n} decisions in {timeout} s")


@pytest.fixture
def browser():
    with chromium(height=2000) as driver:
        yield driver


def test_status_page_shows_versions_and_counts(browser, bundles, tmp_path):
    from selenium.webdriver.common.by import By

    from hybridroute.service import ServiceConfig, create_app

    config = ServiceConfig(
        router=bundles["v1"],
        shadows=(bundles["v2"],),
        log=f"sqlite:///{tmp_path / 'decisions.sqlite'}",
        segment_fact="action",
    )
    app = create_app(config)
    with uvicorn_thread(app) as url:
        with RouterClient(url) as client:
            for i in range(4):
                client.route(PARCEL["text"], PARCEL["facts"], request_id=f"p{i}")
            client.route(RULE["text"], RULE["facts"])
            client.route_batch([{"text": t, "facts": {}} for t in TEXTS[:5]])
        wait_for_shadows(url, 10)
        browser.get(url + "/")
        assert browser.title == "hybridroute · support 1"
        assert browser.find_element(By.ID, "live-version").text == "1"
        assert browser.find_element(By.ID, "window-size").text == "10"
        versions = {
            row.get_attribute("data-role"): row.find_element(By.CLASS_NAME, "router-version").text
            for row in browser.find_elements(By.CSS_SELECTOR, "#routers tbody tr")
        }
        assert versions == {"live": "1", "shadow": "2"}
        by_dest = {
            row.get_attribute("data-destination"): int(
                row.find_element(By.CSS_SELECTOR, "td[data-count]").text
            )
            for row in browser.find_elements(By.CSS_SELECTOR, "#by-destination tbody tr")
        }
        assert by_dest["order_status"] >= 5 and by_dest["reject"] == 1
        assert sum(by_dest.values()) == 10
        reasons = browser.find_elements(By.CSS_SELECTOR, "#by-reason tbody tr")
        assert (
            sum(int(r.find_element(By.CSS_SELECTOR, "td[data-count]").text) for r in reasons) == 10
        )
        shadow_row = browser.find_element(By.CSS_SELECTOR, '#shadows tr[data-shadow="2"]')
        assert shadow_row.find_element(By.CSS_SELECTOR, "td[data-compared]").text == "10"
        link = browser.find_element(By.LINK_TEXT, "/metrics")
        link.click()
        assert "hybridroute_decisions_total" in browser.page_source
