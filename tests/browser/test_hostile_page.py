"""Hostile recipe text on the built page (issue 11): titles, labels,
descriptions and hardware names holding markup or script URLs are shown as
text; no script runs (a canary variable stays unset) and the page's CSP
reports no blocked attempt either."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading

import pytest
import yaml

from tests.browser.conftest import ROOT, _QuietHandler, wait_ready

pytestmark = pytest.mark.browser

EVIL = [
    "</script><script>window.__x=1</script>",
    "\"><img src=x onerror=\"window.__x=1\">",
    "javascript:window.__x=1",
    "<svg onload=window.__x=1>",
]


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    import build

    root = tmp_path_factory.mktemp("hostile")
    recipes = root / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "models" / "moonshotai" / "Kimi-K3.yaml"
    d = yaml.safe_load(path.read_text())
    d["meta"]["title"] = "K3 " + EVIL[0]
    d["meta"]["description"] = EVIL[1]
    d["meta"]["provider"] = EVIL[2]
    d["variants"]["default"]["label"] = EVIL[3]
    d["features"]["tool_calling"]["label"] = EVIL[1]
    d["features"]["reasoning"]["description"] = EVIL[0]
    path.write_text(yaml.safe_dump(d))
    tax = recipes / "taxonomy.yaml"
    t = yaml.safe_load(tax.read_text())
    t["hardware_profiles"]["h200"]["display_name"] = "H200 " + EVIL[3]
    tax.write_text(yaml.safe_dump(t))
    out = root / "site"
    build.build(recipes, out, precompress=False)
    handler = functools.partial(_QuietHandler, directory=str(out))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_hostile_text_is_text_and_no_script_runs(page, hostile_server):
    page.goto(f"{hostile_server}/moonshotai/Kimi-K3/?hardware=h200")
    wait_ready(page)
    page.locator('#controls label.opt:has(input[name="install"][value="docker"])').click()
    page.wait_for_function("() => location.search.includes('install=docker')")
    page.hover('#controls label.opt:has(input[name="features"][value="tool_calling"])')
    assert page.evaluate("typeof window.__x") == "undefined"
    assert EVIL[1] in page.inner_text("body")  # shown as text
    page.goto(f"{hostile_server}/")
    assert page.evaluate("typeof window.__x") == "undefined"
    hrefs = page.eval_on_selector_all("a[href]", "as => as.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h.lower().startswith("javascript:")]
