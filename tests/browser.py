"""A headless Chromium (Debian's ``chromium`` + ``chromedriver``, driven by selenium) for the
tests that open a page: the documentation site and MLflow's run page."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from .conftest import CHROMEDRIVER, CHROMIUM


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 2000) -> Iterator[Any]:
    """A started headless browser that records console messages; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "the page") -> Any:
    """Poll ``predicate`` until it returns something truthy (bounded: an AssertionError)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"{what} did not show up within {timeout} s (last: {last!r})")


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The browser's SEVERE console messages since the last call."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
