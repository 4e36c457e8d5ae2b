"""The configurator page in Chromium: what the controls show as selected matches
the argv printed, and both equal the CLI's plan for the page's URL query."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.conftest import ROOT, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.lookahead]  # lookahead: it clicks through options composed ahead
K3 = "/moonshotai/Kimi-K3/"


def cli_plan(query: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "composer", "moonshotai/Kimi-K3", "--query", query, "--json"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def settle(page) -> None:
    """Wait until the page shows the plan of its current URL (the composer runs
    in a worker, so a click or Back renders a moment later)."""
    page.wait_for_function("""() => {
        const app = document.getElementById('app');
        if (app.dataset.ready !== 'true') return app.dataset.ready === undefined && !location.search;
        return app.dataset.busy !== 'true' && app.dataset.query === location.search.replace(/^\\?/, '');
    }""")


def page_state(page, wait: bool = True) -> dict:
    """What the page shows: checked control values per group, every command's
    argv (from the rendered panels) and the URL query."""
    if wait and page.evaluate("document.getElementById('app').dataset.ready === 'true'"):
        settle(page)
    return page.evaluate("""() => {
        const selected = {};
        for (const fs of document.querySelectorAll('#controls fieldset[data-dim]')) {
            selected[fs.dataset.dim] = [...fs.querySelectorAll('input:checked')].map(i => i.value);
        }
        const argvs = [...document.querySelectorAll('#commands pre.cmd')].map(p => JSON.parse(p.dataset.argv));
        const texts = [...document.querySelectorAll('#commands pre.cmd code')].map(c => c.textContent);
        const labels = [...document.querySelectorAll('#commands [role=tab]')].map(t => t.textContent);
        return {selected, argvs, texts, labels, query: location.search.replace(/^\\?/, '')};
    }""")


def assert_matches_cli(page) -> dict:
    state = page_state(page)
    plan = cli_plan(state["query"])
    sel = plan["selection"]
    cmds = plan["commands"] or plan["blocked_commands"]
    assert state["argvs"] == [c["argv"] for c in cmds]
    assert state["texts"] == [c["text"] for c in cmds]
    assert state["selected"]["hardware"] == [sel["hardware"]]
    assert state["selected"]["strategy"] == [sel["strategy"]]
    assert sorted(state["selected"]["features"]) == sorted(sel["features"])
    assert sorted(state["selected"]["advanced"]) == sorted(sel["advanced"])
    assert state["selected"]["kv_offload"] == [sel["kv_offload"]]
    if "prefill_mode" not in sel:
        assert state["selected"]["nodes"] == [str(sel["nodes"])]
        # one command per node, and a router where several nodes serve the API (hybrid-LB DP)
        assert len([c for c in cmds if c["role"] != "router"]) == sel["nodes"]
    return state


def test_landing_prerendered_then_live(page, server):
    page.route("**/runtime/**", lambda route: route.abort())  # first: what the HTML alone shows
    page.goto(server + K3)
    state = page_state(page)
    assert state["selected"]["hardware"] == ["b300"]
    assert state["selected"]["nodes"] == ["1"]
    assert state["selected"]["strategy"] == ["single_node_tp"]
    argv = state["argvs"][0]
    assert argv[:3] == ["vllm", "serve", "moonshotai/Kimi-K3"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8"
    page.wait_for_function("() => document.getElementById('runtime-status').dataset.state === 'failed'")
    assert "could not load" in page.inner_text("#runtime-status")
    assert page.is_visible("#commands pre.cmd")


def test_live_landing_equals_prerendered(page, server):
    page.goto(server + K3)
    before = page.content()
    pre = page_state(page)
    wait_ready(page)
    live = assert_matches_cli(page)
    assert live["selected"] == pre["selected"]
    assert live["argvs"] == pre["argvs"]
    assert live["query"] == ""
    # The controls the script renders have the same structure as the pre-rendered ones.
    shape = "() => [...document.querySelectorAll('#controls input')].map(i => [i.name, i.value, i.checked, i.disabled, i.dataset.query].join('|'))"
    page.set_content(before)
    pre_shape = page.evaluate(shape)
    page.goto(server + K3)
    wait_ready(page)
    assert page.evaluate(shape) == pre_shape


def units(argv: list[str]) -> list[tuple[str, str | None]]:
    """argv as a sorted list of (flag, value) pairs."""
    out, i = [], 3
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append((argv[i], argv[i + 1]))
            i += 2
        else:
            out.append((argv[i], None))
            i += 1
    return sorted(out, key=lambda u: (u[0], u[1] or ""))


def click(page, dim: str, value: str):
    page.locator(f'#controls input[name="{dim}"][value="{value}"]').click()


def test_click_through_every_dimension(page, server):
    page.goto(server + K3)
    wait_ready(page)
    seen_queries, seen_argvs = set(), []
    steps = [
        ("hardware", "h200"),        # → 2 nodes, multi-node TP 16 (24 MLA layers hold 1M tokens)
        ("nodes", "3"),              # TP 24 divides K3's 96 heads
        ("strategy", "multi_node_dep"),
        ("features", "spec_decoding"),
        ("advanced", "max_batched_8k"),
        ("advanced", "max_num_seqs_256"),  # seed: spec decoding's 32 wins on NVIDIA
        ("hardware", "gb200"),       # DEP floor: 4 trays
        ("strategy", "multi_node_tep"),
        ("features", "reasoning"),   # off
        ("kv_offload", "simple"),
        ("hardware", "mi355x"),
    ]
    for dim, value in steps:
        before = page_state(page)
        click(page, dim, value)
        page.wait_for_function("q => location.search.replace(/^\\?/, '') !== q", arg=before["query"])
        state = assert_matches_cli(page)
        assert state["query"] not in seen_queries, (dim, value)
        if value == "max_num_seqs_256":
            # Same flags and values (the position of --max-num-seqs may differ).
            assert [units(a) for a in state["argvs"]] == [units(a) for a in before["argvs"]]
            notices = page.locator('#notices li[data-code="value-replaced"]').all_inner_texts()
            assert any("256" in n and "32" in n for n in notices), notices
        else:
            assert state["argvs"] != before["argvs"], (dim, value)
        seen_queries.add(state["query"])
        seen_argvs.append(state["argvs"])
    # h200 landed on two nodes with a headless worker
    assert any(any("--headless" in a for a in argvs) for argvs in seen_argvs)


def test_reload_restores_state_and_history(page, server):
    page.goto(server + K3)
    wait_ready(page)
    click(page, "hardware", "h200")
    page.wait_for_function("() => location.search.includes('h200')")
    click(page, "strategy", "multi_node_dep")
    page.wait_for_function("() => location.search.includes('multi_node_dep')")
    state = page_state(page)
    page.reload()
    wait_ready(page)
    again = page_state(page)
    assert again == state
    page.go_back()
    page.wait_for_function("() => !location.search.includes('multi_node_dep')")
    back = assert_matches_cli(page)
    assert back["selected"]["hardware"] == ["h200"]
    page.go_forward()
    page.wait_for_function("() => location.search.includes('multi_node_dep')")
    assert page_state(page)["argvs"] == state["argvs"]


@pytest.mark.parametrize("query", [
    "hardware=h900",
    "nodes=lots&strategy=warp_drive",
    "features=%3Cscript%3Ealert(1)%3C/script%3E",
    "hardware=b300&nodes=99999999999999999999",
])
def test_invalid_url_values_show_notice_and_valid_page(page, server, query):
    page.goto(f"{server}{K3}?{query}")
    wait_ready(page)
    assert page.locator("#notices li.warning").count() >= 1
    state = assert_matches_cli(page)
    assert state["argvs"] and state["argvs"][0][:2] == ["vllm", "serve"]
    assert page.evaluate("() => document.querySelectorAll('#app script').length") == 0


def test_pd_pools_kv_offload_and_explain(page, server):
    page.goto(f"{server}{K3}?hardware=gb200")
    wait_ready(page)
    click(page, "strategy", "pd_cluster")
    page.wait_for_function("() => location.search.includes('pd_cluster')")
    state = assert_matches_cli(page)
    labels = state["labels"]
    assert labels[-1] == "Router" and any(x.startswith("Prefill") for x in labels) and any(x.startswith("Decode") for x in labels)
    assert state["selected"]["prefill_mode"] == ["tep"] and state["selected"]["decode_mode"] == ["dep"]
    click(page, "decode_nodes", "6")
    page.wait_for_function("() => location.search.includes('decode_nodes=6')")
    state = assert_matches_cli(page)
    assert sum(1 for x in state["labels"] if x.startswith("Decode")) == 6
    router = state["argvs"][-1]
    assert router.count("--decode") == 6  # DEP pool: one endpoint per node
    # Mooncake is shown disabled with its reason; Simple is disabled under P/D.
    moon = page.locator('#controls input[name="kv_offload"][value="kv_store_distributed_mooncake"]')
    assert moon.is_disabled()
    title = page.locator('#controls label.opt:has(input[value="kv_store_distributed_mooncake"])').get_attribute("title")
    assert "does not support" in title
    # KV offload drives the URL and the command on a non-P/D strategy.
    click(page, "strategy", "multi_node_tp")  # the recommended strategy on GB200: omitted from the URL
    page.wait_for_function("() => !location.search.includes('pd_cluster')")
    assert page_state(page)["selected"]["strategy"] == ["multi_node_tp"]
    click(page, "kv_offload", "simple")
    page.wait_for_function("() => location.search.includes('kv_offload=simple')")
    state = assert_matches_cli(page)
    assert "--kv-transfer-config" in state["argvs"][0]
    assert page.locator('#notices li[data-code="kv-host-memory"]').count() == 1
    # The explain view names the layer that set a flag.
    click(page, "features", "spec_decoding")
    page.wait_for_function("() => location.search.includes('spec_decoding')")
    page.locator("#panel-0 details.explain summary").click()
    row = page.locator('#panel-0 tr[data-flag="--speculative-config"]')
    assert "features" in row.inner_text() and "spec_decoding" in row.inner_text()


def test_a_panels_explain_is_rendered_when_opened_and_follows_the_plan(page, server):
    """Issue 22: the plan's HTML carries the first command's Explain table
    only (the tables were 80 % of a 15-node plan's HTML); another panel's is
    rendered by the worker, with the same macros, when it is opened, and an
    open one shows the next plan's table after a click."""
    from composer.api import make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    from composer.render import PageRenderer, environment
    from jinja2 import FileSystemLoader

    page.goto(server + K3 + "?hardware=gb200&strategy=pd_cluster")
    wait_ready(page)
    n = page.locator("#commands details.explain").count()  # every vLLM command's (the router has none)
    assert n > 2 and page.locator("#commands details.explain table").count() == 1
    assert page.locator("#panel-0 details.explain table").count() == 1
    assert page.locator("#commands details.explain[data-lazy]").count() == n - 1
    page.locator('#tab-2').click()
    page.locator("#panel-2 details.explain summary").click()
    page.wait_for_selector("#panel-2 details.explain table")
    # the table the page shows is the macro's for that command of the CLI's plan
    state = json.loads(subprocess.run([sys.executable, "-m", "composer", "moonshotai/Kimi-K3", "--query",
                                       page.get_attribute("#app", "data-query"), "--json"],
                                      capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    rows = page.eval_on_selector_all("#panel-2 details.explain tr[data-flag]", "rs => rs.map(r => r.dataset.flag)")
    assert rows == [f["flag"] for f in state["commands"][2]["provenance"]]
    renderer = PageRenderer(environment(FileSystemLoader(ROOT / "site_src")))
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(ROOT / "recipes", "moonshotai/Kimi-K3"),
                       load_catalog(ROOT / "recipes"))
    from composer.api import compose
    want = renderer.macro("explain_body", compose(ctx, state["query"])["commands"][2])
    got = page.evaluate("() => document.querySelector('#panel-2 details.explain .table-wrap').outerHTML")
    # the browser's serialisation of the macro's HTML (entities as the DOM writes them)
    want = page.evaluate("(html) => { const t = document.createElement('template'); t.innerHTML = html;"
                         " return t.content.querySelector('.table-wrap').outerHTML; }", want)
    assert got == want
    # open across a click: the new plan's table, with the flag the click added
    click(page, "features", "spec_decoding")
    page.wait_for_function("() => location.search.includes('spec_decoding')")
    page.wait_for_selector('#panel-2 details.explain[open] tr[data-flag="--speculative-config"]')
    assert page.locator("#panel-2 details.explain table").count() == 1


def _ahead_click(page, server) -> int:
    """The worker's compose time of a click on H200 after the K3 page has
    been idle long enough for a look-ahead to compose every option's plan."""
    page.goto(server + K3)
    wait_ready(page)
    settle(page)
    page.wait_for_timeout(6000)  # ~35 plans at 20–80 ms each in wasm, after 150 ms idle
    page.evaluate("() => { delete document.getElementById('app').dataset.composeMs; }")
    click(page, "hardware", "h200")
    page.wait_for_function("() => document.getElementById('app').dataset.composeMs !== undefined")
    settle(page)
    return int(page.get_attribute("#app", "data-compose-ms"))


def test_a_click_the_look_ahead_composed_is_answered_from_it(page, server):
    assert _ahead_click(page, server) == 0  # a lookup: no plan composed on the click
    assert_matches_cli(page)


def test_without_the_look_ahead_a_click_composes_its_plan(browser, server):
    """``window.composerLookahead = false`` (what tests/browser/conftest.py
    sets for tests not marked ``lookahead``) stops the worker composing ahead."""
    ctx = browser.new_context()
    ctx.add_init_script("window.composerLookahead = false;")
    page = ctx.new_page()
    try:
        assert _ahead_click(page, server) > 0
        assert_matches_cli(page)
    finally:
        ctx.close()
