"""Issue 12, item 9: the index. Search over names, provider, hardware and
tags; multi-select facets (OR within one, AND across) with counts of what a
choice would give; sort; all of it in the URL; distinct hardware labels."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ROOT

pytestmark = pytest.mark.browser
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def shown(page) -> list[str]:
    return page.eval_on_selector_all("#recipes > li:not([hidden])", "ls => ls.map(l => l.dataset.id)")


def counts(page, facet: str) -> dict[str, int]:
    return page.eval_on_selector_all(
        f'input[name="{facet}"]', "is => Object.fromEntries(is.map(i => [i.value, Number(i.closest('label').querySelector('[data-count]').textContent)]))")


def test_search_matches_hardware_and_tags(page, server):
    page.goto(server + "/")
    assert len(shown(page)) == 3
    page.fill('input[name="q"]', "moe")  # architecture tag
    assert sorted(shown(page)) == ["Qwen/Qwen3-235B-A22B-Instruct-2507", "moonshotai/Kimi-K3"]
    page.fill('input[name="q"]', "fp8 moe")  # every word must match: precision tag and architecture
    assert shown(page) == ["Qwen/Qwen3-235B-A22B-Instruct-2507"]
    page.fill('input[name="q"]', "MI325X")  # a hardware label, any case: every recipe offers it
    assert len(shown(page)) == 3
    page.fill('input[name="q"]', "meta")  # provider
    assert shown(page) == ["meta-llama/Llama-3.3-70B-Instruct"]
    assert "q=meta" in page.url
    page.fill('input[name="q"]', "no such model anywhere")
    assert shown(page) == [] and page.is_visible("#none")


def test_facets_are_multi_select_with_counts(page, server):
    page.goto(server + "/")
    assert counts(page, "provider") == {"Meta": 1, "Moonshot AI": 1, "Qwen": 1}
    assert counts(page, "hardware")["h100"] == 2 and counts(page, "hardware")["b300"] == 1
    page.locator("details.facet[data-facet=provider] > summary").click()
    page.check('input[name="provider"][value="Qwen"]')
    page.check('input[name="provider"][value="Meta"]')  # OR within a facet
    assert sorted(shown(page)) == ["Qwen/Qwen3-235B-A22B-Instruct-2507", "meta-llama/Llama-3.3-70B-Instruct"]
    assert "provider=" in page.url and "Qwen" in page.url and "Meta" in page.url
    # Counts of the other facets follow the providers chosen; a facet's own stay what a choice would give.
    hw = counts(page, "hardware")
    assert hw["h100"] == 2 and hw["b300"] == 0 and hw["mi300x"] == 1
    assert counts(page, "provider")["Moonshot AI"] == 1
    assert page.locator('label:has(input[name="hardware"][value="b300"])').get_attribute("class").split().count("empty") == 1
    page.locator("details.facet[data-facet=hardware] > summary").click()
    page.check('input[name="hardware"][value="mi300x"]')  # AND across facets
    assert shown(page) == ["Qwen/Qwen3-235B-A22B-Instruct-2507"]
    assert page.inner_text("details.facet[data-facet=provider] .facet-chosen") == "(2)"
    # The filtered list is a link: opened again it shows the same.
    url = page.url
    page.goto(url)
    assert shown(page) == ["Qwen/Qwen3-235B-A22B-Instruct-2507"]
    assert page.locator('input[name="provider"][value="Meta"]').is_checked()
    assert page.locator("details.facet[data-facet=provider]").get_attribute("open") is not None
    # Unknown values in a link are ignored, never an error.
    page.goto(server + "/?provider=Nobody,Qwen&hardware=h900&sort=sideways")
    assert shown(page) == ["Qwen/Qwen3-235B-A22B-Instruct-2507"]


def test_sort(page, server):
    page.goto(server + "/?sort=size-desc")
    order = lambda: page.eval_on_selector_all("#recipes > li", "ls => ls.map(l => l.dataset.id.split('/')[1])")  # noqa: E731
    assert order() == ["Kimi-K3", "Qwen3-235B-A22B-Instruct-2507", "Llama-3.3-70B-Instruct"]
    page.select_option('select[name="sort"]', "size-asc")
    assert order() == ["Llama-3.3-70B-Instruct", "Qwen3-235B-A22B-Instruct-2507", "Kimi-K3"]
    assert "sort=size-asc" in page.url
    page.select_option('select[name="sort"]', "provider")
    assert order() == ["Llama-3.3-70B-Instruct", "Kimi-K3", "Qwen3-235B-A22B-Instruct-2507"]  # Meta, Moonshot AI, Qwen
    page.select_option('select[name="sort"]', "")
    assert order() == ["Kimi-K3", "Llama-3.3-70B-Instruct", "Qwen3-235B-A22B-Instruct-2507"]  # by title
    assert "sort" not in page.url


def test_hardware_labels_are_distinct_and_index_is_accessible(page, server):
    page.goto(server + "/")
    labels = page.eval_on_selector_all('input[name="hardware"]', "is => is.map(i => i.closest('label').querySelector('span').textContent)")
    assert labels and len(set(labels)) == len(labels)
    for d in page.locator("details.facet").all():
        d.locator("summary").click()
    page.evaluate(AXE.read_text() + "\n;0")
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [(v["id"], v["impact"], len(v["nodes"])) for v in result["violations"] if v["impact"] in ("serious", "critical")]
    assert not bad, bad


def test_first_click_on_a_result_after_typing_opens_it(page, server):
    """Issue 21: typing then clicking a result opens it at once. The search
    field's blur fires `change` between mousedown and mouseup; the list must
    not be re-sorted (its nodes moved) then, or the click is lost."""
    page.goto(server + "/")
    page.click('input[name="q"]')
    page.keyboard.type("kimi")
    assert shown(page) == ["moonshotai/Kimi-K3"]
    link = page.locator("#recipes > li:not([hidden]) a").first
    with page.expect_navigation():
        link.click()
    assert "/moonshotai/Kimi-K3/" in page.url


def test_blur_of_the_search_field_moves_no_result(page, server):
    page.goto(server + "/?sort=size-desc")
    page.click('input[name="q"]')
    page.keyboard.type("qwen")
    page.evaluate("""() => { window.__moved = 0;
        new MutationObserver((m) => { window.__moved += m.length; }).observe(document.getElementById('recipes'), {childList: true}); }""")
    page.evaluate("() => document.querySelector('input[name=q]').blur()")
    assert page.evaluate("window.__moved") == 0
