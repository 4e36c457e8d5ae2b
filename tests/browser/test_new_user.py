"""Issue 21 in the browser: what a new user trips on.

Layout at six widths for a single-node, a multi-node and a P/D plan (and the
900 px embed): nothing wider than its container, no text column narrower than
about 12 characters, every tab reachable, a bounded page height; the same
adjustment notice from a click as from a link; an Advanced choice that lost
says so on its control; the router's tab installs it; Copy all and Download
all; disclosure markers on a phone; the last GPU remembered across pages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, click, settle

pytestmark = pytest.mark.browser
WIDTHS = (390, 820, 900, 1024, 1280, 1440)
PLANS = {"single": "", "multi": "?hardware=h200&strategy=multi_node_tp", "pd": "?hardware=gb200&strategy=pd_cluster"}
MAX_HEIGHT = {390: 10_000, 820: 8_000}
"""Page height bounds in px (the P/D page was 11-14k px tall at 900 px); 5,000 above 820 px."""
LLAMA = "/meta-llama/Llama-3.3-70B-Instruct/"

MEASURE = """() => {
  const out = {over: [], narrow: []};
  const ch = parseFloat(getComputedStyle(document.body).fontSize) * 0.5;  // a character of body text, roughly
  for (const el of document.querySelectorAll('#app *')) {
    const p = el.parentElement;
    if (!p || el.closest('[hidden]') || el.closest('details:not([open]) > :not(summary)') || el.offsetParent === null) continue;
    const cs = getComputedStyle(p);
    if (['auto', 'scroll', 'hidden'].includes(cs.overflowX)) continue;  // a scroll box: its content may be wider
    const r = el.getBoundingClientRect(), pr = p.getBoundingClientRect();
    if (r.width > 0 && r.right > pr.right + 1) out.over.push(`${el.tagName}.${el.className} +${Math.round(r.right - pr.right)}px`);
  }
  for (const el of document.querySelectorAll('#app p, #app li, #app td, #app .ph-meaning, #app .notice-text')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || el.closest('[hidden]') || el.closest('details:not([open]) > :not(summary)')) continue;
    if (el.textContent.trim().length > 12 && r.width < 12 * ch) out.narrow.push(`${el.className || el.tagName} ${Math.round(r.width)}px`);
  }
  out.height = document.documentElement.scrollHeight;
  out.sideways = document.documentElement.scrollWidth > window.innerWidth;
  return out;
}"""


def tabs_reachable(page) -> list[str]:
    """Every tab brought into view in its strip (its own scroll) and chosen: its panel shows."""
    missed = []
    for i in range(page.locator('#commands [role="tab"]').count()):
        tab = page.locator('#commands [role="tab"]').nth(i)
        tab.scroll_into_view_if_needed()
        inside = page.evaluate("""(i) => { const t = document.querySelectorAll('#commands [role=tab]')[i];
            const s = t.parentElement.getBoundingClientRect(), r = t.getBoundingClientRect();
            return r.left >= s.left - 1 && r.right <= s.right + 1; }""", i)
        tab.click()
        if not inside or not page.is_visible("#" + tab.get_attribute("aria-controls")):
            missed.append(tab.inner_text())
    return missed


@pytest.mark.parametrize("plan", list(PLANS))
def test_layout_at_every_width(page, server, plan):
    page.goto(server + K3 + PLANS[plan])
    wait_ready(page)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        m = page.evaluate(MEASURE)
        assert not m["over"], (width, m["over"][:5])
        assert not m["narrow"], (width, m["narrow"][:5])
        assert not m["sideways"], width
        assert m["height"] <= MAX_HEIGHT.get(width, 5_000), (width, m["height"])
        assert not tabs_reachable(page), width
        if plan == "pd" and width in (390, 1440):
            page.screenshot(path=f"/tmp/ux_shots/test-{plan}-{width}.png", full_page=True)


def test_embed_at_900(page, server):
    page.set_viewport_size({"width": 900, "height": 900})
    page.goto(server + K3 + PLANS["pd"] + "&embed=1")
    wait_ready(page)
    m = page.evaluate(MEASURE)
    assert not m["over"] and not m["narrow"] and not m["sideways"], m
    height = page.evaluate("() => Math.ceil(document.getElementById('app').getBoundingClientRect().bottom + scrollY)")
    assert height <= 5_000, height
    assert not tabs_reachable(page)
    # the placeholders panel is one column at its own width, even though the viewport is wider than a phone
    cols = page.evaluate("() => getComputedStyle(document.querySelector('.ph-grid')).gridTemplateColumns.split(' ').length")
    assert cols == 1


def test_placeholders_follow_their_own_width_not_the_viewport(page, server):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(server + K3 + PLANS["multi"])
    wait_ready(page)
    cols = """() => { const l = document.querySelector('label.ph'), r = (s) => l.querySelector(s).getBoundingClientRect();
      return [getComputedStyle(document.querySelector('.ph-grid')).gridTemplateColumns.split(' ').length,
              Math.abs(r('input').top - r('.ph-name').top) < 12, r('input').top > r('.ph-meaning').top]; }"""
    wide = page.evaluate(cols)
    page.evaluate("() => { document.getElementById('placeholders').style.width = '420px'; }")
    narrow = page.evaluate(cols)
    # wide: two cards a row, each its name and field on a line, the meaning under them;
    # narrow: one column, the name, its meaning, then the field
    assert wide == [2, True, False] and narrow == [1, False, True]


def test_pd_commands_start_in_the_second_screen_at_1280(page, server):
    """Issue 21: at 1280 px a K3 P/D plan's commands started about 2,000 px
    down, under two pools' capacity paragraphs and a one-row-per-value
    placeholders panel. The accounts fold under the results, the panel puts two
    values a row; the commands start within two screens."""
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(server + K3 + PLANS["pd"])
    wait_ready(page)
    top = page.evaluate("() => document.getElementById('commands').getBoundingClientRect().top + scrollY")
    assert top < 1_500, top  # was about 1,900
    # the accounts are there, folded: one click opens each, and it stays open over the next plan
    assert page.locator("#capacity details.cap-how").count() == 2
    page.locator("#capacity li[data-scope=decode] details.cap-how > summary").click()
    click(page, "prefill_nodes", "4")
    page.wait_for_function("() => location.search.includes('prefill_nodes=4')")
    settle(page)
    assert page.evaluate("() => document.querySelector('#capacity li[data-scope=decode] details.cap-how').open")
    assert not page.evaluate("() => document.querySelector('#capacity li[data-scope=prefill] details.cap-how').open")


def node_notice(page) -> dict:
    return page.evaluate("""() => [...document.querySelectorAll('#notices li')]
        .filter(li => li.dataset.code === 'nodes-set' || li.dataset.code === 'nodes-raised')
        .map(li => ({code: li.dataset.code, text: li.querySelector('.notice-text').textContent}))""")


def test_an_adjustment_reads_the_same_from_a_click_and_from_a_link(page, server):
    page.goto(server + K3)
    wait_ready(page)
    click(page, "hardware", "h100")
    page.wait_for_function("() => location.search.includes('h100')")
    settle(page)
    clicked = node_notice(page)
    assert page.locator('#controls input[name="nodes"]:checked').get_attribute("value") == "6"
    assert clicked and clicked[0]["text"].startswith("6 nodes are the fewest that work for Multi-node TP on H100")
    # the same state reached by its link
    page.goto(server + K3 + "?" + page.evaluate("() => location.search.slice(1)"))
    wait_ready(page)
    assert node_notice(page) == clicked
    # a link asking for 2 gives the same reasons
    page.goto(server + K3 + "?hardware=h100&strategy=multi_node_tp&nodes=2")
    wait_ready(page)
    linked = node_notice(page)
    assert linked and linked[0]["text"].startswith("Nodes raised from 2 to 6")
    assert linked[0]["text"].split("3 nodes:", 1)[1] == clicked[0]["text"].split("3 nodes:", 1)[1]
    # the level shows as a word, not only a colour
    kinds = page.locator("#notices li .notice-kind").all_inner_texts()
    assert kinds and all(k.strip().split()[-1] in ("Note:", "Warning:", "Error:") for k in kinds)


def test_a_replaced_advanced_choice_says_so_on_its_control(page, server):
    page.goto(server + K3 + "?hardware=h200&strategy=multi_node_dep&features=spec_decoding,tool_calling,reasoning")
    wait_ready(page)
    click(page, "advanced", "max_num_seqs_256")
    page.wait_for_function("() => location.search.includes('max_num_seqs_256')")
    settle(page)
    label = page.locator('#controls input[name="advanced"][value="max_num_seqs_256"]').locator("xpath=..")
    assert "lost" in label.get_attribute("class")
    assert "Replaced by Speculative decoding's --max-num-seqs 32" in label.inner_text()
    other = page.locator('#controls input[name="advanced"][value="gpu_mem_095"]').locator("xpath=..")
    assert "lost" not in (other.get_attribute("class") or "")


def test_an_advanced_knob_already_in_force_says_so_on_its_control(page, server):
    """Second fresh-user trial: on B200 "gpu-memory-utilization 0.95" and "kv-cache-dtype fp8" looked off
    (unticked) while the command already set both; only the tooltip said so. The control now shows who sets it."""
    page.goto(server + K3 + "?hardware=b200")
    wait_ready(page)
    for knob in ("gpu_mem_095", "kv_fp8"):
        label = page.locator(f'#controls input[name="advanced"][value="{knob}"]').locator("xpath=..")
        assert not label.locator("input").is_checked()
        assert "already in force: the recipe's" in label.locator(".in-force-mark").inner_text()
        # the flag never breaks inside its name, the mark is a line of its own under it (a fresh user saw
        # "gpu-memory-" / "utilization 0.95" beside the mark at 1280 px)
        flag, mark = label.locator(".opt-label").bounding_box(), label.locator(".in-force-mark").bounding_box()
        font = page.evaluate("(e) => parseFloat(getComputedStyle(e).fontSize)", label.locator(".opt-label").element_handle())
        assert flag["height"] < font * 2 and mark["y"] >= flag["y"] + flag["height"] - 1, (knob, flag, mark)
    chosen = page.locator('#controls input[name="advanced"][value="max_batched_8k"]').locator("xpath=..")
    assert chosen.locator(".in-force-mark").count() == 0


def test_on_a_phone_the_placeholders_start_closed_until_they_hold_a_value(page, server):
    """Fresh-user finding: at 390 px the open placeholders panel (~1,500 px) pushed a P/D page's commands
    ~7,000 px down. On a phone it starts closed while it holds no value of the user's, and stays as left."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + K3 + PLANS["pd"])
    wait_ready(page)
    box = page.locator("#placeholders details.placeholders")
    assert box.count() == 1 and box.get_attribute("open") is None
    commands_top = page.evaluate("() => document.getElementById('commands').getBoundingClientRect().top + scrollY")
    box.locator("summary").click()
    assert box.get_attribute("open") is not None
    opened_top = page.evaluate("() => document.getElementById('commands').getBoundingClientRect().top + scrollY")
    assert opened_top - commands_top > 500  # what the closed panel saves
    # a value of the user's: the next visit opens it (the values are what the commands show)
    box.locator('input[data-ph]').first.fill("10.1.2.3")
    page.reload()
    wait_ready(page)
    assert page.locator("#placeholders details.placeholders").get_attribute("open") is not None
    # wider than a phone: open as before
    page.evaluate("() => localStorage.clear()")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.reload()
    wait_ready(page)
    assert page.locator("#placeholders details.placeholders").get_attribute("open") is not None


@pytest.fixture
def context(context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def test_router_tab_installs_the_router_and_copy_all(page, server):
    page.goto(server + K3 + PLANS["pd"])
    wait_ready(page)
    router = page.locator('#commands [role="tab"]', has_text="Router")
    router.click()
    panel = page.locator("#" + router.get_attribute("aria-controls"))
    text = panel.locator("pre code").inner_text()
    assert text.index("uv pip install vllm-router") < text.index("vllm-router \\")
    with page.expect_download() as dl:
        panel.locator("button.download").click()
    script = open(dl.value.path()).read()
    assert "uv pip install vllm-router" in script
    page.click("#commands button.copy-all")
    copied = page.evaluate("navigator.clipboard.readText()")
    labels = page.locator('#commands [role="tab"]').all_inner_texts()
    # Copy all is what the command line prints for the plan, byte for byte (a fresh user's finding: it
    # had its own headers, and left out the install steps and the plan's comment lines).
    cli = subprocess.run([sys.executable, "-m", "composer", "moonshotai/Kimi-K3", "--query",
                          page.get_attribute("#app", "data-query")], cwd=ROOT, capture_output=True, text=True)
    assert cli.returncode in (0, 1), cli.stderr
    assert copied == cli.stdout
    assert "uv pip install vllm-router" in copied and copied.count("\n# --- ") >= len(labels)
    # With a placeholder's value given, Copy all has it in, as the tabs show it.
    page.fill('#placeholders input[data-ph="PREFILL_NODE_1"]', "10.1.2.3")
    page.wait_for_function("() => document.querySelector('#commands pre code').textContent.includes('10.1.2.3')")
    page.click("#commands button.copy-all")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert "10.1.2.3" in copied and "$PREFILL_NODE_1" not in copied and "${PREFILL_NODE_1" not in copied
    assert copied == cli.stdout.replace("${PREFILL_NODE_1}", "10.1.2.3").replace("$PREFILL_NODE_1", "10.1.2.3")
    with page.expect_download() as dl:
        page.click("#commands button.download-all")
    bundle = open(dl.value.path()).read()
    assert dl.value.suggested_filename == "Kimi-K3-gb200-scripts.sh"
    assert bundle.count("<<'VLLM_CONFIGURATOR_EOF'") == len(labels)


def test_disclosures_keep_their_marker_on_a_phone(page, server):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + K3 + PLANS["multi"])
    wait_ready(page)
    marks = page.evaluate("""() => [...document.querySelectorAll('details.why > summary, details.explain > summary')]
        .filter(s => s.offsetParent !== null).map(s => getComputedStyle(s, '::before').content)""")
    assert marks and all(m == '"▶"' for m in marks), marks


def test_the_last_gpu_is_remembered_across_recipe_pages_and_the_url_wins(page, server):
    page.goto(server + K3)
    wait_ready(page)
    click(page, "hardware", "h100")
    page.wait_for_function("() => location.search.includes('h100')")
    settle(page)
    page.goto(server + LLAMA, wait_until="domcontentloaded")
    page.wait_for_function("() => document.getElementById('app') !== null && document.getElementById('app').dataset.started === 'true'")
    # From the first paint the recipe default is not shown as the answer: the page is a preview of the
    # remembered GPU's plan, or shows that plan already (the build's rendering); never the default unmarked.
    first = page.evaluate("""() => ({preview: document.documentElement.classList.contains('link-preview')
                                             && !document.getElementById('preview-banner').hidden,
                                    hw: document.querySelector('#controls input[name="hardware"]:checked').value,
                                    shown: document.getElementById('app').dataset.shown || ''})""")
    assert first["preview"] or (first["hw"] == "h100" and first["shown"]), first
    assert first["hw"] == "h100", first  # the control already says where the page is heading
    wait_ready(page)
    settle(page)
    assert page.locator('#controls input[name="hardware"]:checked').get_attribute("value") == "h100"
    assert "hardware=h100" in page.evaluate("() => location.search")
    # The page says why it opened there, and Reset forgets it (the next bare visit is the recipe default).
    said = page.inner_text("#runtime-status")
    assert "H100" in said and "the GPU you chose last" in said and "Reset" in said, said
    page.click("#reset")
    page.wait_for_function("() => !location.search.includes('h100')")
    settle(page)
    assert page.evaluate("() => localStorage.getItem('vllm-configurator:hardware')") is None
    assert "chose last" not in page.inner_text("#runtime-status")
    page.goto(server + LLAMA)
    wait_ready(page)
    assert page.locator('#controls input[name="hardware"]:checked').get_attribute("value") != "h100"
    page.evaluate("() => localStorage.setItem('vllm-configurator:hardware', 'h100')")  # remembered again, for the embed
    # An embed shows what its page asked for, not this browser's last GPU.
    page.goto(server + LLAMA + "?embed=1")
    wait_ready(page)
    assert page.locator('#controls input[name="hardware"]:checked').get_attribute("value") != "h100"
    assert not page.evaluate("() => document.documentElement.classList.contains('link-preview')")
    page.goto(server + LLAMA + "?hardware=b200")
    wait_ready(page)
    assert page.locator('#controls input[name="hardware"]:checked').get_attribute("value") == "b200"


def test_kubernetes_mode_shows_preflight_not_pip_or_head_ip(page, server):
    page.goto(server + K3 + PLANS["multi"] + "&install=k8s")
    wait_ready(page)
    extras = page.inner_text("#extras")
    assert "Before you apply" in extras and "kubectl apply -f Kimi-K3-h200.yaml" in extras
    assert "$HEAD_IP" not in extras and "uv pip install" not in extras
    assert json.loads(page.evaluate("() => JSON.stringify(document.querySelectorAll('#extras ul.preflight li').length)")) >= 5


def test_a_hint_never_shrinks_under_the_pointer(page, server):
    """A fresh user's finding at 1280 px: resting the pointer on an Advanced
    knob made the column shake forever (a shorter hint moved the options up
    under the pointer, which showed the longer hint again). Within its group
    the hint only grows; leaving the group lets it shrink."""
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(server + K3)
    wait_ready(page)
    labels = page.locator('fieldset[data-dim="advanced"] label.opt')
    titles = [labels.nth(i).get_attribute("title") or "" for i in range(labels.count())]
    long_i = max(range(len(titles)), key=lambda i: len(titles[i]))
    short_i = min(range(len(titles)), key=lambda i: len(titles[i]))
    hint = page.locator('fieldset[data-dim="advanced"] .hint')
    labels.nth(long_i).hover()
    tall = hint.evaluate("h => h.getBoundingClientRect().height")
    labels.nth(short_i).hover()
    assert hint.inner_text() == titles[short_i]
    assert hint.evaluate("h => h.getBoundingClientRect().height") >= tall - 0.5
    page.mouse.move(5, 5)  # out of the group: it may shrink again
    page.wait_for_function("() => document.querySelector('fieldset[data-dim=\"advanced\"] .hint').style.minHeight === ''")
