"""Issue 20.4/20.5 in Chromium: "Paste a command" on a recipe page and on the
index shows the report the CLI's ``python -m composer import`` gives, its link
opens that plan, and the pasted text never reaches the URL; "Compare with…"
keeps plan A in the URL (``compare=``), a comparison link reopens the same
comparison, and its differences equal the CLI's ``--compare``."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import quote

import pytest

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, click

pytestmark = pytest.mark.browser

A = "v=2&hardware=h200&nodes=2&strategy=multi_node_tp&features=tool_calling,reasoning&install=pip"


def _cli(*args, stdin=None) -> dict:
    out = subprocess.run([sys.executable, "-m", "composer", *args], cwd=ROOT, capture_output=True, text=True, input=stdin)
    assert out.returncode in (0, 1), out.stderr + out.stdout
    return json.loads(out.stdout)


def _commands(query: str) -> str:
    plan = _cli("moonshotai/Kimi-K3", "--query", query, "--json")
    return "\n\n".join(c["pip_text"] for c in plan["commands"])


def _rows(page, selector: str) -> list[tuple[str, str]]:
    return [tuple(x) for x in page.eval_on_selector_all(selector, "rows => rows.map(r => [r.dataset.name, r.dataset.change])")]


def _wait(page, flag: str) -> None:
    page.wait_for_function(f"() => document.getElementById('app').dataset.{flag} === 'true'", timeout=90_000)


def test_paste_on_a_recipe_page_equals_the_cli_and_its_link_opens_the_plan(page, server):
    text = _commands(A).replace("--gpu-memory-utilization 0.95", "--gpu-memory-utilization 0.85") + \
        " --served-model-name '<img src=x onerror=alert(1)>'"
    expected = _cli("import", "--format", "json", stdin=text)
    page.goto(server + K3)
    wait_ready(page)
    page.locator("#import-box summary").click()
    page.fill("#import-text", text)
    page.locator("#import-run").click()
    _wait(page, "importReady")
    assert page.get_attribute("#import .import-report", "data-differences") == str(expected["differences"])
    want = [(d["name"], d["change"]) for p in expected["pairs"] for d in p["differences"]]
    assert _rows(page, "#import table.import-diff tbody tr") == want
    assert page.locator("#import img").count() == 0  # pasted text is shown as text
    assert "<img" in page.inner_text("#import") or "served-model-name" in page.inner_text("#import")
    link = page.locator("#import a.import-link")
    assert link.get_attribute("data-query") == expected["plan"]["query"]
    assert "served" not in page.url and "0.85" not in page.url
    link.click()
    page.wait_for_function("(q) => document.getElementById('app').dataset.query === q && "
                           "document.getElementById('app').dataset.busy !== 'true'", arg=expected["plan"]["query"])
    assert "served" not in page.url and "img" not in page.url
    assert page.evaluate("location.search.replace(/^\\?/, '')") == expected["plan"]["query"]


def test_paste_on_the_index_opens_the_recipe_and_reports(page, server):
    text = _commands("hardware=b300")
    expected = _cli("import", "--format", "json", stdin=text)
    page.goto(server + "/")
    page.locator("#import-box summary").click()
    page.fill("#import-text", text)
    page.locator("#import-run").click()
    page.wait_for_url("**/moonshotai/Kimi-K3/")
    wait_ready(page)
    _wait(page, "importReady")
    assert page.get_attribute("#import .import-report", "data-differences") == str(expected["differences"]) == "0"
    assert "vllm" not in page.url
    assert page.evaluate("sessionStorage.getItem('vllm-configurator:import')") is None


def test_index_refuses_an_unknown_model(page, server):
    page.goto(server + "/")
    page.locator("#import-box summary").click()
    page.fill("#import-text", "vllm serve '<b>evil/model</b>'")
    page.locator("#import-run").click()
    assert "No recipe here serves" in page.inner_text("#import-status")
    assert page.locator("#import-status b").count() == 0 and page.url.rstrip("/") == server


def test_compare_link_reopens_the_comparison_and_equals_the_cli(page, server):
    page.goto(f"{server}{K3}?{A}")
    wait_ready(page)
    page.locator("#compare-start").click()
    _wait(page, "compareReady")
    assert page.get_attribute("#compare .compare", "data-same") == "true"
    click(page, "strategy", "multi_node_dep")
    page.wait_for_function("() => document.getElementById('app').dataset.query.includes('multi_node_dep') && "
                           "document.getElementById('app').dataset.compareReady === 'true'")
    b = page.evaluate("document.getElementById('app').dataset.query")
    assert "compare=" in page.url
    expected = _cli("moonshotai/Kimi-K3", "--query", A, "--compare", b, "--format", "json")
    want = [(d["name"], d["change"]) for c in expected["commands"] for d in c["differences"]]
    assert _rows(page, "#compare table.compare-diff tbody tr") == want
    assert page.get_attribute("#compare .compare", "data-differences") == str(expected["differences"])
    url = page.url
    assert f"compare={quote(A, safe='')}".replace("%2C", ",").replace("%3A", ":") in url or "compare=" in url
    # The link, opened afresh, shows the same comparison.
    other = page.context.new_page()
    other.goto(url)
    wait_ready(other)
    _wait(other, "compareReady")
    assert _rows(other, "#compare table.compare-diff tbody tr") == want
    assert other.inner_text("#compare .compare-a") == page.inner_text("#compare .compare-a")
    other.close()
    page.locator("#compare-stop").click()
    page.wait_for_function("() => !location.search.includes('compare=')")
    assert page.inner_html("#compare") == ""


def test_the_compare_view_shows_the_placeholder_values_filled_in(page, server):
    """Fresh user's finding: with $HEAD_IP filled in, the tabs and Copy used the
    value but the compare view's two commands still showed $HEAD_IP. They take
    the values too, as the view is shown and as a value changes."""
    page.goto(f"{server}{K3}?hardware=b200&nodes=2&strategy=multi_node_tp")
    wait_ready(page)
    page.locator('#placeholders input[data-ph="HEAD_IP"]').fill("10.0.0.1")
    page.locator("#compare-start").click()
    _wait(page, "compareReady")
    sides = lambda: page.eval_on_selector_all("#compare .compare-side pre code", "cs => cs.map(c => c.textContent)")  # noqa: E731
    assert sides() and all("10.0.0.1" in t and "$HEAD_IP" not in t for t in sides())
    page.locator('#placeholders input[data-ph="HEAD_IP"]').fill("10.9.9.9")
    page.wait_for_function("() => [...document.querySelectorAll('#compare .compare-side pre code')].every(c => c.textContent.includes('10.9.9.9'))")
