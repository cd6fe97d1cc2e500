"""Cross-site posts in a real headless chromium (selenium 4 + Debian's chromedriver).

The service runs on a real uvicorn server at ``http://127.0.0.1:P``. Attacker pages are
served from other origins -- ``http://localhost:A`` (another site) and
``http://127.0.0.1:A`` (the same site, another origin) -- and try what a page can send
without a preflight (``no-cors`` fetches of a Blob, a typed Blob, text, ``sendBeacon``, an
HTML form) and with one (``fetch`` of JSON). None gets a decision logged; every simple
request reaches the server and is refused at the door (403). A page of the configured CORS
origin ``http://localhost:F``, and the service's own page, can route.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import CHROMEDRIVER, CHROMIUM, free_port, uvicorn_thread

pytestmark = [pytest.mark.service, pytest.mark.browser]

#: The request a page builds: a JSON route item whose text says who sent it.
_ATTACKS = r"""
const [url, kind, text] = arguments;
const done = arguments[arguments.length - 1];
const body = JSON.stringify({text: text, facts: {amount: 20}});
const go = {
  "no-cors-blob": () => fetch(url, {method: "POST", mode: "no-cors", body: new Blob([body])}),
  "no-cors-typed-blob": () => fetch(url, {method: "POST", mode: "no-cors",
                                          body: new Blob([body], {type: "application/json"})}),
  "no-cors-text": () => fetch(url, {method: "POST", mode: "no-cors", body: body}),
  "no-cors-json-header": () => fetch(url, {method: "POST", mode: "no-cors", body: body,
                                           headers: {"Content-Type": "application/json"}}),
  "beacon": () => Promise.resolve(navigator.sendBeacon(url, new Blob([body]))),
  "cors-json": () => fetch(url, {method: "POST", body: body,
                                 headers: {"Content-Type": "application/json"}}),
  "form": () => new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.name = "sink";
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST";
    form.action = url;
    form.enctype = "text/plain";
    form.target = "sink";
    const input = document.createElement("input");
    // text/plain encodes name=value: the '=' lands inside the JSON text
    input.name = body.slice(0, body.indexOf(text) + text.length);
    input.value = body.slice(body.indexOf(text) + text.length);
    form.appendChild(input);
    document.body.appendChild(form);
    frame.onload = () => resolve({type: "form", status: 0});
    form.submit();
  }),
};
go[kind]().then(
  (r) => (r && (r.type === "cors" || r.type === "basic"))
    ? r.text().then((t) => done({status: r.status, body: t}))
    : done({sent: String(r && r.type)}),
  (e) => done({error: String(e)}),
);
"""

_SIMPLE = ["no-cors-blob", "no-cors-typed-blob", "no-cors-text", "no-cors-json-header", "beacon"]


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><html><head><title>page</title></head><body></body></html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def page_server() -> Iterator[int]:
    """A plain page on a free port (any host name that reaches 127.0.0.1)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(15)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def site(bundles, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The service (CORS for the friend's origin only), an attacker's and a friend's page."""
    from hybridroute.service import ServiceConfig, create_app

    root = tmp_path_factory.mktemp("crosssite")
    with page_server() as attacker, page_server() as friend:
        config = ServiceConfig(
            router=bundles["v1"],
            log=f"sqlite:///{root / 'decisions.sqlite'}",
            cors_origins=(f"http://localhost:{friend}",),
        )
        with uvicorn_thread(create_app(config)) as url:
            yield {"url": url, "attacker": attacker, "friend": friend, "log": root}


def texts_logged(site: dict[str, Any]) -> list[str]:
    from hybridroute.records import open_log

    with open_log(f"sqlite:///{site['log'] / 'decisions.sqlite'}") as log:
        return [record["input_snapshot"]["text"] for record in log.records()]


def counted(site: dict[str, Any], status: int) -> float:
    """``hybridroute_requests_total`` for POST /v1/route answered ``status``."""
    for line in httpx.get(site["url"] + "/metrics", timeout=5).text.splitlines():
        if line.startswith("hybridroute_requests_total{") and 'endpoint="/v1/route"' in line:
            if f'status="{status}"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_for(check: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])  # another site; the same site
@pytest.mark.parametrize("kind", [*_SIMPLE, "form"])
def test_a_simple_cross_site_post_is_refused_at_the_door(chromium, site, host, kind):
    chromium.get(f"http://{host}:{site['attacker']}/")
    before = counted(site, 403)
    text = f"attack {kind} from {host}"
    result = chromium.execute_async_script(_ATTACKS, site["url"] + "/v1/route", kind, text)
    assert "error" not in result, result  # the browser sent it
    # it reached the server and was refused there (a beacon is sent after the call returns)
    assert wait_for(lambda: counted(site, 403) >= before + 1), result
    assert text not in texts_logged(site)
    assert not any(t.startswith("attack") for t in texts_logged(site))


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_a_preflighted_cross_site_post_never_leaves_the_browser(chromium, site, host):
    chromium.get(f"http://{host}:{site['attacker']}/")
    before = counted(site, 403) + counted(site, 200)
    text = f"attack cors-json from {host}"
    result = chromium.execute_async_script(_ATTACKS, site["url"] + "/v1/route", "cors-json", text)
    assert "Failed to fetch" in result.get("error", ""), result  # its preflight was refused
    time.sleep(0.2)
    assert counted(site, 403) + counted(site, 200) == before
    assert not any(t.startswith("attack") for t in texts_logged(site))


def test_the_configured_origin_and_the_service_own_page_can_route(chromium, site):
    url = site["url"] + "/v1/route"
    chromium.get(f"http://localhost:{site['friend']}/")
    result = chromium.execute_async_script(_ATTACKS, url, "cors-json", "friend parcel")
    assert result["status"] == 200, result
    assert '"selected_destination"' in result["body"]
    # a configured origin must still declare its body JSON
    result = chromium.execute_async_script(_ATTACKS, url, "no-cors-blob", "friend blob")
    assert wait_for(lambda: counted(site, 415) >= 1), result
    # a document of the service's own origin (the status page's CSP allows no fetch at all)
    chromium.get(site["url"] + "/healthz")
    result = chromium.execute_async_script(_ATTACKS, "/v1/route", "cors-json", "own parcel")
    assert result["status"] == 200, result
    logged = texts_logged(site)
    assert "friend parcel" in logged and "own parcel" in logged
    assert "friend blob" not in logged
