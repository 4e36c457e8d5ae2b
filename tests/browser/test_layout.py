"""Issue 12, item 8: the page on a phone (390 px) and the Explain table at
1280 px. On a phone the command is in the first screen (the dock), a tap
changes something visible, tap targets are at least 44 px, the output tabs
scroll instead of wrapping and the page never scrolls sideways; Explain shows
every column and wraps values at sensible points. axe-core stays clean."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, click, settle

pytestmark = pytest.mark.browser
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
PD = "?hardware=gb300&strategy=pd_cluster&features=spec_decoding,tool_calling,reasoning"


def axe_violations(page) -> list:
    page.evaluate(AXE.read_text() + "\n;0")  # through DevTools: the page's CSP refuses inline script
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [(v["id"], v["impact"], len(v["nodes"])) for v in result["violations"] if v["impact"] in ("serious", "critical")]


def first_command_line(page) -> str:
    text = page.inner_text("#commands .panel:not([hidden]) pre code")
    return next(line for line in text.split("\n") if line and not line.startswith("export ")).removesuffix(" \\")


def dock_in_first_screen(page) -> dict:
    return page.evaluate("""() => {
        const d = document.getElementById('dock'), r = d.getBoundingClientRect();
        return {hidden: d.hidden, top: r.top, bottom: r.bottom, summary: document.getElementById('dock-summary').textContent,
                command: document.getElementById('dock-command').textContent};
    }""")


def test_phone_shows_the_command_in_the_first_screen(page, server):
    page.set_viewport_size(PHONE)
    page.goto(server + K3)
    wait_ready(page)
    assert page.evaluate("() => window.scrollY") == 0
    dock = dock_in_first_screen(page)
    assert not dock["hidden"] and 0 < dock["top"] and dock["bottom"] <= PHONE["height"]
    assert dock["command"].startswith(first_command_line(page)) and dock["command"].startswith("vllm serve moonshotai/Kimi-K3")
    assert dock["summary"] == page.inner_text("#summary .summary-text")
    # A tap far from the output changes something on screen: the dock follows the plan.
    before = dock["summary"]
    page.locator('#controls input[name="hardware"][value="h200"]').scroll_into_view_if_needed()
    click(page, "hardware", "h200")
    page.wait_for_function("() => location.search.includes('h200')")
    settle(page)
    dock = dock_in_first_screen(page)
    assert not dock["hidden"] and dock["bottom"] <= PHONE["height"]
    assert dock["summary"] != before and dock["summary"] == page.inner_text("#summary .summary-text")
    assert dock["command"].startswith(first_command_line(page))
    # The dock's link brings the commands into view, and the dock steps aside.
    page.click("#dock-jump")
    page.wait_for_function("() => document.getElementById('dock').hidden")
    top = page.evaluate("() => document.getElementById('commands').getBoundingClientRect().top")
    assert -2 <= top < PHONE["height"] / 2
    assert "#" not in page.url  # the jump is no part of the page's URL
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "kimi-k3-phone.png"))


def test_dock_stays_off_where_it_is_not_needed(page, server):
    page.set_viewport_size({"width": 1280, "height": 900})  # wide: the command is beside the controls
    page.goto(server + K3)
    wait_ready(page)
    assert page.evaluate("() => document.getElementById('dock').hidden")
    page.set_viewport_size(PHONE)
    page.wait_for_function("() => !document.getElementById('dock').hidden")


@pytest.mark.parametrize("query", ["", PD])
def test_phone_tap_targets_tabs_and_no_sideways_scroll(page, server, query):
    page.set_viewport_size(PHONE)
    page.goto(server + K3 + query)
    wait_ready(page)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    small = page.evaluate("""() => [...document.querySelectorAll(
            '#app label.opt, #app button, #app summary, #app [role=tab], #dock-jump, #theme-toggle')]
        .filter(e => e.offsetParent !== null || getComputedStyle(e).position === 'fixed')
        .map(e => [e.id || e.className || e.tagName, e.getBoundingClientRect()])
        .filter(([, r]) => r.width > 0 && (r.height < 44 || r.width < 44))
        .map(([n, r]) => `${n} ${Math.round(r.width)}x${Math.round(r.height)}`)""")
    assert not small, small
    tabs = page.evaluate("""() => {
        const list = document.querySelector('#commands [role=tablist]');
        const tops = [...list.querySelectorAll('[role=tab]')].map(t => t.offsetTop);
        return {n: tops.length, rows: new Set(tops).size, scroll: list.scrollWidth, width: list.clientWidth,
                overflow: getComputedStyle(list).overflowX};
    }""")
    assert tabs["rows"] == 1 and tabs["overflow"] == "auto"
    if query:  # P/D on GB300: more tabs than fit, reached by scrolling the tab row, not the page
        assert tabs["n"] >= 7 and tabs["scroll"] > tabs["width"]
        # The strip says where tabs are cut off (app.js markTabOverflow, called by its observers once
        # the page is laid out and after each plan): at the end before any scroll, at the start after.
        assert page.get_attribute("#commands .tabs", "data-more") == "end"
        last = page.locator('#commands [role="tab"]').last
        last.click()
        assert last.get_attribute("aria-selected") == "true" and page.is_visible("#" + last.get_attribute("aria-controls"))
        page.wait_for_function("() => ['start', 'both'].includes(document.querySelector('#commands .tabs').dataset.more)")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    page.locator("#panel-0 details.explain summary").click() if page.is_visible("#panel-0 details.explain summary") else None
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    # Explain's rows are cards on a phone: nothing scrolls sideways, not even inside its own box (fresh-user finding)
    if page.is_visible("#panel-0 details.explain table"):
        box = page.evaluate("""() => { const w = document.querySelector('#panel-0 details.explain .table-wrap');
            return {scroll: w.scrollWidth, client: w.clientWidth,
                    label: getComputedStyle(w.querySelector('td[data-label="Set by"]'), '::before').content}; }""")
        assert box["scroll"] <= box["client"] + 1 and box["label"] == '"Set by: "', box


def test_phone_axe_with_the_dock(page, server):
    page.set_viewport_size(PHONE)
    page.goto(server + K3 + PD)
    wait_ready(page)
    assert not page.evaluate("() => document.getElementById('dock').hidden")
    assert not axe_violations(page)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_explain_fits_1280(page, server, theme):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{server}{K3}{PD}&advanced=max_num_seqs_256&theme={theme}")
    wait_ready(page)
    page.locator("#panel-0 details.explain summary").click()
    box = page.evaluate("""() => {
        const wrap = document.querySelector('#panel-0 .table-wrap'), table = wrap.querySelector('table');
        const w = wrap.getBoundingClientRect();
        return {wrapRight: w.right, scroll: wrap.scrollWidth, client: wrap.clientWidth, width: table.getBoundingClientRect().width,
                heads: [...table.querySelectorAll('th')].map(th => { const r = th.getBoundingClientRect(); return [th.textContent, r.left, r.right, r.width]; })};
    }""")
    assert [h[0] for h in box["heads"]] == ["Flag or variable", "Value", "Set by", "Replaced"]
    assert box["scroll"] <= box["client"] + 1  # nothing hidden to the right
    for name, _left, right, width in box["heads"]:
        assert right <= min(box["wrapRight"], 1280) + 1 and width >= 0.15 * box["width"], name
    # A long JSON value wraps at its commas and colons: a few lines, not one every few characters.
    cell = page.evaluate("""() => {
        const code = document.querySelector('#panel-0 tr[data-flag="--kv-transfer-config"] code.val');
        const style = getComputedStyle(code);
        return {text: code.textContent, height: code.getBoundingClientRect().height, width: code.getBoundingClientRect().width,
                line: parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.5, font: style.fontFamily};
    }""")
    assert "mono" in cell["font"].lower()
    lines = round(cell["height"] / cell["line"])
    assert cell["text"].startswith('{"kv_connector"') and 1 <= lines <= 5, cell
    # The Replaced column shows what a later layer replaced, with its key path.
    replaced = page.locator('#panel-0 tr[data-flag="--max-num-seqs"] td').nth(3)
    assert replaced.is_visible() and "256" in replaced.inner_text() and "advanced.max_num_seqs_256" in replaced.inner_text()
    right = page.evaluate("""() => document.querySelector('#panel-0 tr[data-flag="--max-num-seqs"] td:nth-child(4)').getBoundingClientRect().right""")
    assert right <= 1280
    assert not axe_violations(page)


def test_phone_dock_names_the_sbatch_jobs_not_a_shebang(page, server):
    """Fresh-user finding: in the SLURM form the dock's "first command line"
    was ``#!/usr/bin/env bash``; a form's whole-plan files are named instead."""
    page.set_viewport_size(PHONE)
    page.goto(server + K3 + "?hardware=gb200&strategy=pd_cluster&install=slurm")
    wait_ready(page)
    dock = dock_in_first_screen(page)
    assert dock["command"] == "prefill.sbatch, decode.sbatch, router.sbatch"


def test_controls_stay_in_view_beside_a_long_plan_at_900(page, server):
    """Fresh-user finding: at a 900 px embed the column under the controls
    was empty while the P/D plan ran on for thousands of pixels. The controls
    stay in view (sticky) when the page is scrolled down the plan."""
    page.set_viewport_size({"width": 900, "height": 800})
    page.goto(server + K3 + PD)
    wait_ready(page)
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height > 2400  # a long plan: the check below is not vacuous
    page.evaluate("() => window.scrollTo(0, document.getElementById('commands').getBoundingClientRect().top + scrollY)")
    r = page.evaluate("() => { const r = document.getElementById('controls').getBoundingClientRect();"
                      " return {top: r.top, bottom: r.bottom, y: scrollY}; }")
    assert r["y"] > 1000 and r["top"] >= 0 and r["bottom"] > 400, r
