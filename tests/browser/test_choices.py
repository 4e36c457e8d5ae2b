"""Issue 12 in the browser: feature modes (12.1), the placeholders panel
(12.4), links that pin every dimension (12.5) and choices that would work
being offered (12.6). What the page shows and copies equals the CLI's plan."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, click, page_state, settle

pytestmark = pytest.mark.browser
LLAMA = "/meta-llama/Llama-3.3-70B-Instruct/"


@pytest.fixture
def context(context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def cli(rid: str, query: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "composer", rid, "--query", query, "--json"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def argvs(plan: dict) -> list[list[str]]:
    return [c["argv"] for c in plan["commands"] or plan["blocked_commands"]]


def test_feature_mode_switch_changes_argv_and_url_and_survives_reload(page, server):
    page.goto(server + LLAMA)
    wait_ready(page)
    assert page.locator('fieldset[data-dim="fmode.spec_decoding"]').count() == 0  # the feature is off
    click(page, "features", "spec_decoding")
    page.wait_for_function("() => location.search.includes('spec_decoding')")
    settle(page)
    row = page.locator('fieldset[data-dim="fmode.spec_decoding"]')
    assert row.locator("input:checked").get_attribute("value") == "ngram"
    before = page_state(page)
    click(page, "fmode.spec_decoding", "eagle3")
    page.wait_for_function("() => location.search.includes('fmode=spec_decoding:eagle3')")
    settle(page)
    state = page_state(page)
    assert state["argvs"] != before["argvs"]
    assert any("eagle3" in a for argv in state["argvs"] for a in argv)
    assert state["argvs"] == argvs(cli("meta-llama/Llama-3.3-70B-Instruct", state["query"]))
    assert state["selected"]["fmode.spec_decoding"] == ["eagle3"]
    page.reload()
    wait_ready(page)
    assert page_state(page) == state


def test_placeholder_values_reach_commands_copy_and_download_but_never_the_link(page, server):
    page.goto(f"{server}{K3}?hardware=h200")
    wait_ready(page)
    panel = page.locator("#placeholders details.placeholders")
    assert panel.is_visible()
    names = panel.locator("input[data-ph]").evaluate_all("els => els.map(e => e.dataset.ph)")
    assert "HEAD_IP" in names and "IFACE_NAME" in names
    assert "local storage" in panel.inner_text() and "never part of a shared link" in panel.inner_text()
    raw = page.locator("#panel-1 pre code").text_content()
    assert "$HEAD_IP" in raw
    panel.locator('input[data-ph="HEAD_IP"]').fill("10.1.2.3")
    page.wait_for_function("() => document.querySelector('#panel-1 pre code').textContent.includes('10.1.2.3')")
    shown = page.locator("#panel-1 pre code").text_content()
    assert shown == raw.replace("$HEAD_IP", "10.1.2.3") and "$IFACE_NAME" in shown  # whole names, only the given one
    page.locator('#commands [role="tab"]').nth(1).click()
    page.locator("#panel-1 button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == shown
    with page.expect_download() as info:
        page.locator("#panel-1 button.download").click()
    script = Path(info.value.path()).read_text()
    assert "10.1.2.3" in script and "$HEAD_IP" not in script and "HEAD_IP:?" not in script
    assert ': "${IFACE_NAME:?' in script  # still asked for
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    # A value a shell would read as syntax is refused, never substituted.
    panel.locator('input[data-ph="IFACE_NAME"]').fill("eth0; rm -rf ~")
    assert panel.locator('input[data-ph="IFACE_NAME"]').get_attribute("aria-invalid") == "true"
    assert "rm -rf" not in page.locator("#panel-1 pre code").text_content()
    # Shared links carry no value; this browser keeps them for the next page.
    page.click("#share")
    page.wait_for_function("() => document.getElementById('share-status').textContent.length > 0")
    url = page.evaluate("navigator.clipboard.readText()")
    assert "10.1.2.3" not in url and "HEAD_IP" not in url and "10.1.2.3" not in page.url
    click(page, "strategy", "multi_node_dep")
    page.wait_for_function("() => location.search.includes('multi_node_dep')")
    settle(page)
    assert "10.1.2.3" in page.locator("#panel-1 pre code").text_content()
    page.reload()
    wait_ready(page)
    assert page.locator('#placeholders input[data-ph="HEAD_IP"]').input_value() == "10.1.2.3"
    assert "10.1.2.3" in page.locator("#panel-1 pre code").text_content()
    page.locator("#placeholders button.ph-clear").click()
    assert "$HEAD_IP" in page.locator("#panel-1 pre code").text_content()


def test_a_companions_downloaded_script_gets_the_values_its_tab_shows(page, server):
    """A fresh user's finding: the Mooncake master's tab showed the panel's
    value, its downloaded script still said $MOONCAKE_MASTER_IP."""
    page.goto(f"{server}{LLAMA}?kv_offload=kv_store_distributed_mooncake")
    wait_ready(page)
    page.locator('#placeholders input[data-ph="MOONCAKE_MASTER_IP"]').fill("10.7.7.7")
    tab = page.locator('#commands [role="tab"]', has_text="Mooncake master")
    tab.click()
    panel = page.locator("#" + tab.get_attribute("aria-controls"))
    page.wait_for_function("id => document.getElementById(id).querySelector('pre code').textContent.includes('10.7.7.7')",
                           arg=tab.get_attribute("aria-controls"))
    with page.expect_download() as info:
        panel.locator("button.download").click()
    script = Path(info.value.path()).read_text()
    assert "10.7.7.7" in script and "$MOONCAKE_MASTER_IP" not in script and "${MOONCAKE_MASTER_IP" not in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_a_hardware_pill_another_checkpoint_runs_on_switches_the_variant(page, server):
    # NVFP4 needs Blackwell: on the NVFP4 checkpoint, H100 is still offered,
    # with the BF16 checkpoint that runs there (said before the click).
    page.goto(f"{server}{LLAMA}?variant=nvfp4&hardware=b200")
    wait_ready(page)
    pill = page.locator('#controls input[name="hardware"][value="h100"]')
    assert pill.is_enabled()
    title = page.locator('#controls label.opt:has(input[name="hardware"][value="h100"])').get_attribute("title")
    assert "variant → BF16" in title
    pill.click()
    page.wait_for_function("() => location.search.includes('hardware=h100')")
    settle(page)
    state = page_state(page)
    plan = cli("meta-llama/Llama-3.3-70B-Instruct", state["query"])
    assert plan["selection"]["variant"] == "default" and plan["selection"]["hardware"] == "h100"
    assert state["argvs"] == argvs(plan)
    assert state["selected"]["variant"] == ["default"]


def test_a_bookmark_keeps_its_plan_after_the_recipes_default_hardware_changes(page, server, tmp_path):
    import build
    from tests.browser.conftest import serve_dir

    page.goto(server + K3)
    wait_ready(page)
    click(page, "nodes", "2")
    page.wait_for_function("() => location.search.includes('nodes=2')")
    settle(page)
    click(page, "strategy", "multi_node_dep")
    page.wait_for_function("() => location.search.includes('multi_node_dep')")
    settle(page)
    bookmark = page_state(page)
    assert "hardware=b300" in bookmark["query"] and "v=2" in bookmark["query"]
    # The recipe's default hardware changes; the bookmark opens what it did.
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "models" / "moonshotai" / "Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    data["meta"]["default_hardware"] = "h200"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    build.build(recipes, tmp_path / "dist", neighbours=0, precompress=False)  # the bookmark is no neighbour
    with serve_dir(tmp_path / "dist") as other:
        page.goto(f"{other}{K3}")
        wait_ready(page)
        assert page_state(page)["selected"]["hardware"] == ["h200"]  # the change is real
        page.goto(f"{other}{K3}?{bookmark['query']}")
        wait_ready(page)
        again = page_state(page)
    assert again["argvs"] == bookmark["argvs"] and again["selected"] == bookmark["selected"]


def test_an_over_long_link_reads_as_the_cli_reads_it(page, server):
    # Found by the adversarial pass: the page re-encoded the query ('(' → %28)
    # before the composer's length limit, so it dropped what the CLI kept.
    query = "zzz=" + "(" * 4000 + "&hardware=h100&features=spec_decoding&fmode=spec_decoding:eagle3"
    page.goto(f"{server}{LLAMA}?{query}")
    wait_ready(page)
    settle(page)
    state = page_state(page)
    plan = cli("meta-llama/Llama-3.3-70B-Instruct", query)
    assert plan["selection"]["hardware"] == "h100"
    assert state["selected"]["hardware"] == ["h100"] and state["argvs"] == argvs(plan)


def test_a_co_located_plans_one_address_fills_both_pools_hosts(page, server):
    """A fresh user's finding: on a co-located P/D plan (both pools on one
    node) the panel asked for PREFILL_NODE_1 and DECODE_NODE_1 as two unrelated
    addresses; given the first only, the router script stopped at "set
    DECODE_NODE_1 first". DECODE_NODE_1 now takes PREFILL_NODE_1's value
    while it has none of its own."""
    page.goto(f"{server}{LLAMA}?hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    wait_ready(page)
    panel = page.locator("#placeholders details.placeholders")
    decode = panel.locator('input[data-ph="DECODE_NODE_1"]')
    assert decode.get_attribute("placeholder") == "same as $PREFILL_NODE_1"
    router = page.locator('#commands [role="tab"]', has_text="Router")
    router.click()
    panel_id = router.get_attribute("aria-controls")
    code = page.locator(f"#{panel_id} pre code")
    assert "$DECODE_NODE_1" in code.text_content()
    panel.locator('input[data-ph="PREFILL_NODE_1"]').fill("10.1.2.3")
    page.wait_for_function(f"() => document.querySelector('#{panel_id} pre code').textContent.includes('10.1.2.3:8002')")
    assert "10.1.2.3:8001" in code.text_content() and "$DECODE_NODE_1" not in code.text_content()
    with page.expect_download() as info:
        page.locator(f"#{panel_id} button.download").click()
    script = Path(info.value.path()).read_text()
    assert "http://10.1.2.3:8002" in script and "DECODE_NODE_1:?" not in script
    # A value of its own wins.
    decode.fill("10.9.9.9")
    page.wait_for_function(f"() => document.querySelector('#{panel_id} pre code').textContent.includes('10.9.9.9:8002')")
    page.locator("#placeholders button.ph-clear").click()
