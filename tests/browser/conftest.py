"""Browser fixtures: build the site once per test process, serve it on
127.0.0.1, drive the system Chromium (Playwright cannot download its own
browsers here).

Under pytest-xdist (``make test``) every worker is its own process: session
fixtures run once per worker, so each worker serves the site on its own free
port. The site itself is built once per run and shared (``tests.site_cache``:
the first worker builds it under a lock, the others wait and read it), as is
the Pyodide snapshot cache (``.cache/snapshots``)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

import build

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--js-flags=--expose-gc"]  # gc() in pages and workers: tests/browser/test_lazy.py checks what a boot frees


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture
def context(context, request):
    """pytest-playwright's per-test context, with the worker's look-ahead off
    (``window.composerLookahead = false``, read by app.js): after every view
    it composes the plan of each enabled option (~35 for Kimi K3, ~1.2 s of a
    core in Chromium), which tests that do not click those options only pay
    for. Tests marked ``lookahead`` keep it: they click through the options
    the look-ahead composed (tests/browser/test_page.py)."""
    if request.node.get_closest_marker("lookahead") is None:
        context.add_init_script("window.composerLookahead = false;")
    return context


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The site built from ``recipes/``, once per run for every worker
    (``tests.site_cache``): read it, never write into it."""
    from tests.site_cache import shared_site

    return shared_site()


class _QuietHandler(build.StaticHostHandler):
    """Serves the site as a static host does: an unknown path gets its 404.html."""

    def log_message(self, *args):  # keep test output readable
        pass


@contextlib.contextmanager
def serve_dir(directory: Path):
    """Serve ``directory`` as a static host would, on a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@pytest.fixture(scope="session")
def server(site_dir):
    """Base URL of the built site, served by a thread on a free port."""
    with serve_dir(site_dir) as url:
        yield url


def wait_ready(page, timeout=90_000):
    """Wait until the composer has loaded in the page (or failed to). The page
    loads it only when needed (a link that needs Python, a control touched, a
    top-level page idle a moment): a pointer press on the controls asks now."""
    page.wait_for_function("() => document.getElementById('app') !== null && document.getElementById('app').dataset.started === 'true'")
    if page.get_attribute("#app", "data-boot-reason") is None:
        page.dispatch_event("#controls", "pointerdown")
    page.wait_for_function(  # a function, not an expression: the page's CSP forbids eval
        "() => (document.getElementById('app').dataset.ready === 'true' && document.getElementById('app').dataset.busy !== 'true') || "
        "document.getElementById('runtime-status').dataset.state === 'failed'", timeout=timeout)
    state = page.get_attribute("#runtime-status", "data-state")
    assert state == "ready", page.inner_text("#runtime-status")


def download(page, button):
    """Click ``button`` and return Playwright's ``Download`` it starts.

    Chromium drops anchor downloads beyond 10 per second from one frame
    (Chromium CL 1132485, "Throttle url download requests from a RenderFrame";
    chromedp/chromedp#791), silently: a test that checks a dozen files in a row
    on a fast machine lost the 11th (CI, 2026-12-03). A person does not click
    that fast; the test waits a tenth of a second before each click so that it
    stays within the limit."""
    page.wait_for_timeout(110)
    with page.expect_download() as info:
        button.click()
    return info.value


CSP_RECORDER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.fixture(autouse=True)
def no_csp_violations(request):
    """Every page of the suite runs under the site's Content-Security-Policy;
    a test whose page reports a violation fails."""
    if "page" not in request.fixturenames:
        yield
        return
    page = request.getfixturevalue("page")
    page.add_init_script(CSP_RECORDER)
    yield
    if not page.is_closed():
        try:
            found = page.evaluate("window.__csp || []")
        except Exception:  # the page navigated away or crashed: nothing to read
            found = []
        assert not found, found
