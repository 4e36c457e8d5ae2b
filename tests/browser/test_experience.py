"""Issue 5: share and restore, reset, changed markers, copy, embed, keyboard
use, accessibility (axe-core), phone width, screenshots for the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, assert_matches_cli, click, page_state, settle

pytestmark = pytest.mark.browser
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "docs" / "screenshots"


@pytest.fixture
def context(context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def test_share_reset_and_changed_markers(page, server):
    page.goto(server + K3)
    wait_ready(page)
    assert page.locator("fieldset.changed").count() == 0
    click(page, "hardware", "mi355x")
    page.wait_for_function("() => location.search.includes('mi355x')")
    click(page, "features", "spec_decoding")
    page.wait_for_function("() => location.search.includes('spec_decoding')")
    settle(page)
    changed = page.eval_on_selector_all("fieldset.changed", "fs => fs.map(f => f.dataset.dim)")
    assert set(changed) == {"hardware", "features"}
    assert page.locator('fieldset[data-dim="features"] label.changed input[value="spec_decoding"]').count() == 1
    # Share copies the canonical URL; opening it elsewhere restores the same state.
    page.click("#share")
    page.wait_for_function("() => document.getElementById('share-status').textContent.length > 0")
    url = page.evaluate("navigator.clipboard.readText()")
    assert url.startswith(server) and "v=2" in url and "hardware=mi355x" in url
    state = page_state(page)
    other = page.context.new_page()
    other.goto(url)
    wait_ready(other)
    assert page_state(other) == state
    other.close()
    # Reset returns to the recipe default, and Back undoes the reset.
    page.click("#reset")
    page.wait_for_function("() => location.search === ''")
    settle(page)
    assert page_state(page)["selected"]["hardware"] == ["b300"]
    assert page.locator("fieldset.changed").count() == 0
    page.go_back()
    page.wait_for_function("() => location.search.includes('mi355x')")
    assert page_state(page)["argvs"] == state["argvs"]


def test_copy_puts_exactly_the_shown_text_on_the_clipboard(page, server):
    page.goto(f"{server}{K3}?hardware=h200")
    wait_ready(page)
    tabs = page.locator('#commands [role="tab"]')
    assert tabs.count() == 2  # 2 × H200 nodes hold one 1M-token sequence (K3's 24 MLA layers)
    tabs.nth(1).click()
    panel = page.locator("#panel-1")
    assert panel.is_visible() and not page.locator("#panel-0").is_visible()
    panel.locator("button.copy").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == panel.locator("pre code").text_content()
    assert "--headless" in copied and copied.startswith("export ")
    # Download gives the same command as a script that checks its placeholders.
    with page.expect_download() as info:
        panel.locator("button.download").click()
    text = Path(info.value.path()).read_text()
    assert text.startswith("#!/usr/bin/env bash") and ': "${HEAD_IP:?' in text and copied in text


def test_docker_form_uses_host_networking_for_multi_node(page, server):
    page.goto(f"{server}{K3}?hardware=h200")
    wait_ready(page)
    click(page, "install", "docker")
    page.wait_for_function("() => location.search.includes('install=docker')")
    state = assert_matches_cli(page)
    assert all(t.startswith("docker run") and "--network host" in t for t in state["texts"])
    assert "docker pull vllm/vllm-openai:v0.33.0" in page.inner_text("#extras")  # pinned: the release the commands are checked against


def test_embed_mode_reports_height_and_honours_theme(page, server):
    page.goto(server + "/index.html")  # same origin parent
    page.evaluate("""(src) => {
        window.heights = [];
        addEventListener('message', e => { if (e.data && e.data.type === 'vllm-configurator:height') heights.push(e.data.height); });
        const f = document.createElement('iframe'); f.src = src; f.style.width = '900px'; document.body.appendChild(f);
    }""", f"{server}{K3}?embed=1&theme=dark&hardware=h200")
    page.wait_for_function("() => window.heights.length > 0 && window.heights[window.heights.length - 1] > 400", timeout=90_000)
    frame = page.frame_locator("iframe")
    frame.locator("#app[data-shown]").wait_for(timeout=90_000)  # rendered ahead: no runtime needed
    assert frame.locator("header.site").is_hidden()
    inner = page.frames[1]
    assert inner.evaluate("document.documentElement.dataset.theme") == "dark"
    assert "embed=1" in inner.url and "theme=dark" in inner.url and "hardware=h200" in inner.url
    bg = inner.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(22, 24, 28)"
    # The guide stays on the full page; one link opens the plan shown there (pinned, no embed layout).
    assert frame.locator("#guide").count() == 1 and frame.locator("#guide").is_hidden()
    link = frame.locator("#full-page")
    assert link.is_visible() and "guide" in link.inner_text()
    href = link.get_attribute("href")
    assert "hardware=h200" in href and "v=2" in href and "embed" not in href, href
    assert inner.evaluate("document.documentElement.scrollHeight") < 3000  # the guide alone was ~3,100 px


def test_an_embeds_links_to_other_pages_open_in_a_new_tab(page, server):
    """Fresh user's finding: in an embed, the model's Hugging Face link and
    Edit this recipe / Report a problem navigated the iframe itself (and a site
    that refuses framing left an error box in place of the configurator).
    Followed from an iframe, they open a new tab; the frame stays where it was."""
    page.context.route("https://**/*", lambda route: route.fulfill(status=200, body="elsewhere", content_type="text/plain"))
    page.goto(server + "/index.html")
    page.evaluate("""(src) => { const f = document.createElement('iframe'); f.src = src; f.style.width = '900px';
                                f.style.height = '1200px'; document.body.appendChild(f); }""", f"{server}{K3}?embed=1&hardware=h200")
    frame = page.frame_locator("iframe")
    frame.locator("#app[data-shown]").wait_for(timeout=90_000)
    inner = page.frames[1]
    before = inner.url
    for selector in ("a.hf-link", "a.edit-link", "a.report-link"):
        with page.context.expect_page() as opened:
            frame.locator(selector).click()
        tab = opened.value
        assert tab.url.startswith("https://"), (selector, tab.url)
        tab.close()
        assert inner.url == before, selector  # the embed is still there


def test_an_embeds_fix_link_stays_in_the_frame_as_an_embed(page, server):
    """Adversarial finding on the rule above: its first version sent every
    link whose query differed to a new tab, a notice's fix ("--max-model-len
    auto") included. A link to another plan of the same page stays in the frame
    and keeps the embed's layout (embed=1, and its theme)."""
    qwen = "/Qwen/Qwen3-235B-A22B-Instruct-2507/"
    page.goto(server + "/index.html")
    page.evaluate("""(src) => { const f = document.createElement('iframe'); f.src = src; f.style.width = '900px';
                                f.style.height = '1200px'; document.body.appendChild(f); }""", f"{server}{qwen}?embed=1&theme=dark&hardware=h100")
    frame = page.frame_locator("iframe")
    frame.locator("#app[data-shown]").wait_for(timeout=90_000)
    fix = frame.locator("a.fix").first
    want = fix.get_attribute("href").lstrip("?")
    pages = len(page.context.pages)
    fix.click()
    inner = page.frames[1]
    page.wait_for_function("(w) => { const f = document.querySelector('iframe'); return f.contentWindow.location.search.includes(w); }",
                           arg=want.split("&")[2], timeout=30_000)
    assert "embed=1" in inner.url and "theme=dark" in inner.url, inner.url
    frame.locator("#app[data-shown]").wait_for(timeout=90_000)
    assert inner.evaluate("document.documentElement.classList.contains('embed')")
    assert len(page.context.pages) == pages  # no new tab


def test_keyboard_only_selection(page, server):
    page.goto(server + K3)
    wait_ready(page)
    radios = page.eval_on_selector_all('#controls input[name="hardware"]', "rs => rs.map(r => [r.value, r.checked, r.disabled])")
    at = [r[1] for r in radios].index(True)
    nxt = next(r[0] for r in radios[at + 1:] if not r[2])
    page.focus('#controls input[name="hardware"]:checked')
    page.keyboard.press("ArrowRight")  # next hardware in the radio group
    page.wait_for_function("v => location.search.includes('hardware=' + v)", arg=nxt)
    settle(page)
    assert page.evaluate("document.activeElement.name + '=' + document.activeElement.value") == f"hardware={nxt}"
    page.focus('#controls input[name="strategy"]:checked')
    before = page_state(page)["selected"]["strategy"]
    page.keyboard.press("ArrowRight")
    page.wait_for_function("b => { const s = document.querySelector('#controls input[name=strategy]:checked'); return s && s.value !== b; }",
                           arg=before[0])
    settle(page)
    state = assert_matches_cli(page)
    assert state["selected"]["strategy"] != before
    # Tabs of the output answer arrow keys too, and focus is visible.
    page.focus('#commands [role="tab"][aria-selected="true"]')
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.getAttribute('aria-selected')") == "true"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_axe_no_serious_violations_and_screenshots(page, server, theme):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{server}{K3}?theme={theme}&hardware=h200")
    wait_ready(page)
    # Evaluated through the DevTools protocol: the page's CSP (rightly) refuses an inline <script>.
    page.evaluate(AXE.read_text() + "\n;0")
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [(v["id"], v["impact"], len(v["nodes"])) for v in result["violations"] if v["impact"] in ("serious", "critical")]
    assert not bad, bad
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"kimi-k3-{theme}.png"))


def test_phone_width_has_no_horizontal_scroll(page, server):
    page.set_viewport_size({"width": 390, "height": 844})
    for q in ("", "?hardware=gb300&strategy=pd_cluster"):
        page.goto(f"{server}{K3}{q}")
        wait_ready(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_index_filters_live_in_the_url(page, server):
    page.goto(server + "/?provider=Moonshot%20AI")
    items = page.locator("#recipes > li:not([hidden])")
    assert items.count() == 1 and "Kimi K3" in items.inner_text()
    page.fill('input[name="q"]', "llama")
    page.locator('input[name="provider"][value="Moonshot AI"]').uncheck()
    assert page.locator("#recipes > li:not([hidden])").count() == 1
    assert "q=llama" in page.url
    page.goto(server + "/?hardware=b300&task=nonsense")
    assert page.locator("#recipes > li:not([hidden])").count() >= 1


def test_choice_made_while_loading_is_applied_when_ready(page, server):
    import time

    def slow(route):
        time.sleep(3)
        route.continue_()

    page.route("**/pyodide/pyodide.asm.wasm", slow)
    page.goto(server + K3)
    click(page, "hardware", "h200")  # before the composer is ready: the page still answers
    assert page.get_attribute("#runtime-status", "data-state") == "queued"
    wait_ready(page)
    page.wait_for_function("() => location.search.includes('hardware=h200')")
    state = assert_matches_cli(page)
    assert state["selected"]["hardware"] == ["h200"] and state["selected"]["nodes"] == ["2"]  # 2 × H200 hold the 1M context (24 MLA layers)


def test_focus_shows_what_a_choice_would_switch(page, server):
    page.goto(server + K3)
    wait_ready(page)
    page.focus('#controls input[name="hardware"][value="h200"]')
    hint = page.inner_text('fieldset[data-dim="hardware"] .hint')
    assert "Also changes" in hint and "Multi-node TEP" in hint  # the strategy the recipe verified on H200


def test_compose_error_keeps_the_page_true_to_its_command(page, server, site_dir):
    import hashlib
    import json as _json

    def altered() -> str:
        # A recipe whose Hopper block cannot be parsed: every H100/H200 plan fails.
        data = _json.loads((site_dir / "data" / "moonshotai" / "Kimi-K3.json").read_text())
        data["recipe"]["hardware_overrides"]["hopper"]["extra_args"] = ["--moe-backend", "marlin", "stray"]
        return _json.dumps(data)

    def broken(route):
        route.fulfill(body=altered(), content_type="application/json")

    def with_hash_of_broken(route) -> str:
        html = route.fetch().text()
        good = hashlib.sha256((site_dir / "data" / "moonshotai" / "Kimi-K3.json").read_bytes()).hexdigest()
        return html.replace(good, hashlib.sha256(altered().encode()).hexdigest())

    page.route("**/data/moonshotai/Kimi-K3.json*", broken)
    # As a build of that recipe would: the page lists the file's own hash (else
    # the page refuses the altered file before composing anything).
    page.route(f"**{K3}", lambda route: route.fulfill(body=with_hash_of_broken(route), content_type="text/html"))
    page.goto(server + K3)
    wait_ready(page)
    before = page_state(page)
    click(page, "hardware", "h200")
    page.wait_for_function("() => document.getElementById('runtime-status').dataset.state === 'error'")
    assert "could not compose" in page.inner_text("#runtime-status")
    assert page.get_attribute("#app", "data-busy") == "false"
    after = page_state(page, wait=False)
    assert after["selected"] == before["selected"] and after["argvs"] == before["argvs"]
    click(page, "hardware", "mi355x")  # still usable afterwards
    page.wait_for_function("() => location.search.includes('mi355x')")
    assert_matches_cli(page)


# The snapshot path never fetches pyodide.asm.wasm (it runs the module without data segments,
# build.snapshot_wasm): only both modules missing leave nothing to boot.
@pytest.mark.parametrize("blocked", [["wasm-nodata-", "pyodide.asm.wasm"], ["stdlib-"], ["snapshot-", "python-"],
                                     ["snapshot-", "python_stdlib.zip"]])
def test_runtime_file_missing_fails_fast_and_keeps_the_default(page, server, blocked):
    # Without the snapshot the worker boots cold (with Pyodide's whole standard
    # library); without the composer's zip or that library too, it gives up.
    for name in blocked:
        page.route(f"**/runtime/**/{name}*", lambda route: route.fulfill(status=404, body="gone"))
        page.route(f"**/runtime/{name}*", lambda route: route.fulfill(status=404, body="gone"))
    page.goto(f"{server}{K3}?hardware=h200&strategy=multi_node_dep&nodes=3")  # not rendered ahead: Python at once
    page.wait_for_function("() => document.getElementById('runtime-status').dataset.state === 'failed'", timeout=30_000)
    assert "could not load" in page.inner_text("#runtime-status")
    state = page_state(page, wait=False)
    assert state["selected"]["hardware"] == ["b300"]  # controls match the pre-rendered default command
    assert state["argvs"][0][:3] == ["vllm", "serve", "moonshotai/Kimi-K3"]
