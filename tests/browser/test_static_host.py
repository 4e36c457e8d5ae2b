"""Issue 12, item 7: the site on a static host. Paths in another case and
variant checkpoint ids lead to the recipe page with the query kept (404.html
and redirect stubs; the test server answers unknown paths with 404.html as
GitHub Pages does), P/D says the cluster size, an embed's height follows its
content both ways, and the page has a theme toggle."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, click, settle

pytestmark = pytest.mark.browser
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
QWEN = "/Qwen/Qwen3-235B-A22B-Instruct-2507/"


@pytest.fixture
def context(context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def test_unknown_path_is_answered_with_404_page(page, server):
    resp = page.goto(server + "/nobody/nothing-here/?hardware=h200")
    assert resp.status == 404
    page.wait_for_load_state("load")
    assert page.inner_text("h1") == "Page not found" and page.is_visible("#not-found")
    assert page.url.endswith("/nobody/nothing-here/?hardware=h200")  # no redirect anywhere
    page.evaluate(AXE.read_text() + "\n;0")
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    assert not [v["id"] for v in result["violations"] if v["impact"] in ("serious", "critical")]
    page.click("#not-found a")
    page.wait_for_selector("#recipes")


@pytest.mark.parametrize("path", ["/qwen/qwen3-235b-a22b-instruct-2507/", "/QWEN/Qwen3-235B-A22B-INSTRUCT-2507",
                                  "/qwen/qwen3-235b-a22b-instruct-2507/index.html"])
def test_path_in_another_case_leads_to_the_recipe_with_its_query(page, server, path):
    page.goto(f"{server}{path}?hardware=b200&theme=dark#x")
    page.wait_for_url(f"{server}{QWEN}?hardware=b200&theme=dark#x")
    wait_ready(page)
    assert page.get_attribute("#app", "data-recipe") == "Qwen/Qwen3-235B-A22B-Instruct-2507"
    assert page.locator('#controls input[name="hardware"][value="b200"]').is_checked()


def test_organisation_path_in_another_case(page, server):
    page.goto(server + "/MOONSHOTAI/")
    page.wait_for_url(server + "/moonshotai/")
    assert page.locator("#recipes > li").count() == 1


def test_variant_checkpoint_id_leads_to_its_variant(page, server, site_dir):
    stub = site_dir / "Qwen" / "Qwen3-235B-A22B-Instruct-2507-FP8" / "index.html"
    assert stub.is_file()  # the exact id is a stub page; in another case it goes through 404.html
    for path in ("/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8/", "/qwen/qwen3-235b-a22b-instruct-2507-fp8/"):
        page.goto(f"{server}{path}?hardware=b200&variant=default")
        page.wait_for_url(lambda url: QWEN in url)
        wait_ready(page)
        settle(page)
        assert "hardware=b200" in page.url and "variant=fp8" in page.url  # the query kept; the address's variant wins
        argv = page.evaluate("() => JSON.parse(document.querySelector('#commands pre.cmd').dataset.argv)")
        query = page.evaluate("() => location.search.slice(1)")
        cli = subprocess.run([sys.executable, "-m", "composer", "Qwen/Qwen3-235B-A22B-Instruct-2507", "--query", query, "--json"],
                             cwd=ROOT, capture_output=True, text=True)
        plan = json.loads(cli.stdout)
        assert argv == (plan["commands"] or plan["blocked_commands"])[0]["argv"]
        assert argv[2] == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8" and plan["selection"]["variant"] == "fp8"
        assert page.locator('#controls input[name="variant"][value="fp8"]').is_checked()


def test_redirect_stubs_never_replace_a_page(site_dir):
    # Every recipe page is its own recipe's (a stub would name another in its title).
    for page_file in site_dir.glob("*/*/index.html"):
        html = page_file.read_text()
        if 'name="redirect-to"' in html:
            assert 'id="app"' not in html
        else:
            rid = f"{page_file.parent.parent.name}/{page_file.parent.name}"
            assert f'data-recipe="{rid}"' in html


def test_pd_summary_says_the_cluster_size(page, server):
    page.goto(f"{server}{K3}?hardware=h200&strategy=pd_cluster")
    wait_ready(page)
    summary = page.inner_text("#summary .summary-text")
    # Pools sized to hold the weights and one 1M-token sequence each: prefill 2 × TEP, decode 2 × DEP (its floor).
    assert summary.startswith("4 × H200 nodes") and "prefill 2" in summary and "decode 2" in summary
    caps = page.locator("#capacity > li").all_inner_texts()
    assert len(caps) == 2 and all("of the 4 × H200 nodes" in c for c in caps)
    assert all("GPU KV cache size:" in c for c in caps)  # vLLM's own log line, per pool
    click(page, "decode_nodes", "4")
    page.wait_for_function("() => location.search.includes('decode_nodes=4')")
    settle(page)
    assert page.inner_text("#summary .summary-text").startswith("6 × H200 nodes")


def test_embed_height_shrinks_after_a_shorter_plan(page, server):
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(server + "/index.html")  # same origin parent that sizes the iframe as an embedder does
    page.evaluate("""(src) => {
        window.heights = [];
        const f = document.createElement('iframe');
        f.src = src; f.style.width = '900px'; f.style.border = '0';
        addEventListener('message', e => {
            if (e.data && e.data.type === 'vllm-configurator:height') { heights.push(e.data.height); f.style.height = e.data.height + 'px'; }
        });
        document.body.appendChild(f);
    }""", f"{server}{K3}?embed=1&hardware=gb300&strategy=pd_cluster")
    frame = page.frame_locator("iframe")
    frame.locator("#app[data-ready=true]").wait_for(timeout=90_000)
    inner = page.frames[1]
    inner.wait_for_function("() => document.getElementById('app').dataset.busy !== 'true'")
    page.wait_for_timeout(300)
    tall = page.evaluate("() => heights[heights.length - 1]")
    content = inner.evaluate("() => Math.ceil(document.getElementById('app').getBoundingClientRect().bottom)")
    assert abs(tall - content) <= 2  # the content's own height
    # A plan without P/D pools has fewer controls: the iframe must shrink.
    frame.locator('#controls input[name="strategy"][value="multi_node_tp"]').click()
    inner.wait_for_function("() => !location.search.includes('pd_cluster') && document.getElementById('app').dataset.busy !== 'true'")
    page.wait_for_function("(t) => heights[heights.length - 1] < t - 50", arg=tall)
    short = page.evaluate("() => heights[heights.length - 1]")
    assert page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().height") == pytest.approx(short, abs=1)
    assert inner.evaluate("() => document.documentElement.scrollHeight") <= short + 2  # nothing cut off
    # ... and grows again when the plan grows.
    frame.locator('#controls input[name="strategy"][value="pd_cluster"]').click()
    page.wait_for_function("(s) => heights[heights.length - 1] > s + 50", arg=short)


def test_theme_toggle_cycles_and_is_kept(page, server):
    page.emulate_media(color_scheme="light")
    page.goto(f"{server}{K3}?hardware=h200")
    wait_ready(page)
    button = page.locator("#theme-toggle")
    assert button.inner_text() == "Theme: auto"
    bg = lambda: page.evaluate("() => getComputedStyle(document.body).backgroundColor")  # noqa: E731
    assert bg() == "rgb(255, 255, 255)"
    button.click()
    assert button.inner_text() == "Theme: light" and "theme=light" in page.url and "hardware=h200" in page.url
    button.click()
    assert button.inner_text() == "Theme: dark" and bg() == "rgb(22, 24, 28)" and "theme=dark" in page.url
    click(page, "hardware", "mi355x")  # a new plan keeps the view parameter
    page.wait_for_function("() => location.search.includes('mi355x') && document.getElementById('app').dataset.busy !== 'true'")
    assert "theme=dark" in page.url and page.inner_text("#theme-toggle") == "Theme: dark"
    # Share gives a link for people: no view parameters.
    page.click("#share")
    page.wait_for_function("() => document.getElementById('share-status').textContent.length > 0")
    shared = page.evaluate("navigator.clipboard.readText()")
    assert "mi355x" in shared and "theme" not in shared
    # The choice is remembered for the next page opened without theme=.
    page.goto(server + K3)
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    assert page.locator("#theme-toggle").inner_text() == "Theme: dark"
    page.locator("#theme-toggle").click()  # back to auto: the system's light scheme
    assert page.locator("#theme-toggle").inner_text() == "Theme: auto" and bg() == "rgb(255, 255, 255)"
    assert "theme" not in page.url
