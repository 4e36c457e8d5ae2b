"""The recipe page in the browser (issue 12, item 3): the guide and the
header links are there, the checkpoint follows the variant after a click, and
axe-core finds nothing on these parts."""

from __future__ import annotations

from tests.browser.conftest import wait_ready
from tests.browser.test_experience import AXE
from tests.browser.test_page import K3, click, settle

QWEN = "/Qwen/Qwen3-235B-A22B-Instruct-2507/"
PARTS = ["#guide", ".model-facts", ".recipe-links", "#checkpoint"]


def test_guide_header_links_and_axe(page, server):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{server}{K3}")
    wait_ready(page)
    assert page.locator("#guide h2").inner_text() == "Guide"
    assert page.locator("#guide h3").first.inner_text() == "Before you start"
    assert page.locator("#guide table th").count() == 4  # Precision, Weights, Sized with headroom, Runs on
    assert page.locator('#guide a[href="https://docs.vllm.ai/"]').count() == 1
    assert page.get_attribute(".model-facts a.hf-link", "href") == "https://huggingface.co/moonshotai/Kimi-K3"
    tags = page.locator(".model-facts .tag").all_inner_texts()
    assert any(t.startswith("Architecture") for t in tags) and any(t.startswith("Context") for t in tags)
    assert page.get_attribute(".recipe-links a.edit-link", "href").endswith("/edit/main/models/moonshotai/Kimi-K3.yaml")
    assert "/issues/new?" in page.get_attribute(".recipe-links a.report-link", "href")
    page.evaluate(AXE.read_text() + "\n;0")  # through DevTools: the page's CSP refuses inline scripts
    for theme in ("light", "dark"):
        page.evaluate(f"() => document.documentElement.setAttribute('data-theme', '{theme}')")
        result = page.evaluate("(parts) => axe.run({include: parts.map(p => [p])}, {resultTypes: ['violations']})", PARTS)
        bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in result["violations"]]
        assert not bad, (theme, bad)


def test_checkpoint_follows_the_variant(page, server):
    page.goto(f"{server}{QWEN}")
    wait_ready(page)
    link = page.locator("#checkpoint a")
    assert link.get_attribute("href") == "https://huggingface.co/Qwen/Qwen3-235B-A22B-Instruct-2507"
    click(page, "variant", "fp8")
    settle(page)
    page.wait_for_function("() => document.querySelector('#checkpoint a').href.endsWith('-FP8')")
    assert link.inner_text() == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    assert "FP8" in page.locator("#checkpoint .checkpoint-variant").inner_text()
    assert "variant=fp8" in page.url
    page.reload()
    wait_ready(page)
    assert page.locator("#checkpoint a").get_attribute("href").endswith("-FP8")
