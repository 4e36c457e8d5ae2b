"""Bookmarked links (issue 8): each opens on its own plan, and nothing else is
ever offered as the answer on the way there.

Every frame the page paints is recorded (``requestAnimationFrame``) from the
first one: while a link's plan is being prepared the page is a marked preview
with Copy, Download and Share unavailable; every frame that is not a preview,
and every frame in which Copy is usable, shows the link's own argv, which
equals the CLI's for the same query.
"""

from __future__ import annotations

import contextlib

import pytest

from tests.browser.conftest import serve_dir, wait_ready
from tests.browser.test_page import K3, cli_plan, click, page_state, settle

pytestmark = pytest.mark.browser

RECORDER = """
window.__frames = [];
(function rec() {
  const out = document.getElementById('output');
  if (out) {
    const argv = [...document.querySelectorAll('#commands pre.cmd')].map(p => p.dataset.argv).join('\\n');
    const preview = document.documentElement.classList.contains('link-preview');
    const usable = (b) => !b.disabled && getComputedStyle(b).pointerEvents !== 'none';
    const copy = [...out.querySelectorAll('button.copy, button.download, #share')].some(usable);
    const banner = getComputedStyle(document.getElementById('preview-banner')).display !== 'none';
    const hw = (document.querySelector('#controls input[name=hardware]:checked') || {}).value;
    const shown = document.getElementById('app').dataset.linkShown === 'true';
    const f = {preview, copy, banner, argv, hw, shown};
    const last = window.__frames[window.__frames.length - 1];
    if (!last || JSON.stringify(last) !== JSON.stringify(f)) window.__frames.push(f);
  }
  requestAnimationFrame(rec);
})();
"""

LINKS = [
    (K3, "hardware=gb200&strategy=pd_cluster"),
    (K3, "hardware=h200&strategy=multi_node_dep&nodes=3"),
    (K3, "hardware=b200&strategy=multi_node_tp_pp"),
    (K3, "hardware=mi355x&features=spec_decoding&advanced=max_batched_8k,gpu_mem_095"),
    (K3, "hardware=mi300x&strategy=multi_node_tep"),
    (K3, "hardware=h100&kv_offload=simple"),
    (K3, "hardware=b300&install=docker"),
    (K3, "hardware=gb300&strategy=pd_cluster&decode_mode=tep&decode_nodes=4"),
    ("/meta-llama/Llama-3.3-70B-Instruct/", "hardware=h100&variant=fp8"),
]


def cli_argv(path: str, query: str) -> list[list[str]]:
    import json
    import subprocess
    import sys

    from tests.browser.conftest import ROOT

    rid = path.strip("/")
    out = subprocess.run([sys.executable, "-m", "composer", rid, "--query", query, "--json"], cwd=ROOT,
                         capture_output=True, text=True)
    plan = json.loads(out.stdout)
    return [c["argv"] for c in plan["commands"] or plan["blocked_commands"]], plan


@pytest.mark.parametrize("path, query", LINKS, ids=[q for _, q in LINKS])
def test_cold_deep_link_shows_only_its_own_plan(browser, server, path, query):
    import json

    context = browser.new_context()  # an empty cache: opened cold
    page = context.new_page()
    page.add_init_script(RECORDER)
    page.goto(f"{server}{path}?{query}")
    wait_ready(page)
    settle(page)
    want, plan = cli_argv(path, query)
    frames = page.evaluate("window.__frames")
    context.close()
    final = [json.loads(a) for a in frames[-1]["argv"].split("\n")]
    assert final == want
    assert frames[-1]["preview"] is False and frames[-1]["copy"] is True and not frames[-1]["banner"]
    assert frames[0]["preview"] and frames[0]["banner"] and not frames[0]["copy"]
    # Once the page script has run (the first frames may come before it), the
    # link's hardware is shown as chosen.
    assert any(f["shown"] for f in frames)
    for f in frames:
        if f["shown"]:
            assert f["hw"] == plan["selection"]["hardware"], f
    for f in frames:
        if not f["preview"] or f["copy"]:
            assert [json.loads(a) for a in f["argv"].split("\n")] == want, f


def test_click_while_loading_is_applied_on_the_links_state(page, server):
    held = []
    page.route("**/runtime/snapshot-*.bin", lambda route: held.append(route))
    page.goto(f"{server}{K3}?hardware=gb200&strategy=pd_cluster")
    page.wait_for_function("() => document.documentElement.classList.contains('link-preview')")
    page.locator('#controls label.opt:has(input[name="install"][value="docker"])').click()
    page.wait_for_function("() => document.getElementById('runtime-status').dataset.state === 'queued'")
    assert page.locator("#preview-banner").is_visible()
    while not held:  # the worker has asked for the snapshot: release it
        page.wait_for_timeout(50)
    for route in held:
        route.continue_()
    page.unroute("**/runtime/snapshot-*.bin")
    wait_ready(page)
    settle(page)
    state = page_state(page)
    assert "hardware=gb200" in state["query"] and "strategy=pd_cluster" in state["query"]
    assert "install=docker" in state["query"]
    plan = cli_plan(state["query"])
    assert plan["selection"]["install"] == "docker" and plan["selection"]["hardware"] == "gb200"
    assert state["argvs"] == [c["argv"] for c in plan["commands"]]
    assert state["texts"][0].startswith("docker run")


@pytest.mark.parametrize("damage, says", [("missing", "without the fast start"), ("one byte flipped", "SHA-256"),
                                          ("module without data missing", "without the fast start"),
                                          ("module without data byte flipped", "SHA-256"),
                                          ("data patch byte flipped", "SHA-256")])
def test_fallback_cold_boot_when_the_snapshot_cannot_be_used(page, server, site_dir, tmp_path, damage, says):
    """The snapshot, the module without data segments and the patch that
    rebuilds them (build.snapshot_wasm) are the snapshot path's own files: any
    of them missing or altered falls back to the cold boot from Pyodide's files."""
    glob = {"missing": "snapshot-*.bin", "one byte flipped": "snapshot-*.bin",
            "module without data missing": "wasm-nodata-*.wasm", "module without data byte flipped": "wasm-nodata-*.wasm",
            "data patch byte flipped": "wasm-data-*.bin"}[damage]
    with contextlib.ExitStack() as stack:
        if damage.endswith("missing"):
            page.route(f"**/runtime/{glob}", lambda route: route.fulfill(status=404, body="gone"))
        else:  # the right size, the wrong bytes: would compose wrong commands if used
            # Served from a copy of the site with that one file altered: Playwright's route.fulfill
            # passes a body through its protocol as base64 (~15 s for the 37 MB snapshot).
            server = stack.enter_context(serve_dir(_site_with_a_flipped_byte(site_dir, glob, tmp_path)))
        page.goto(f"{server}{K3}?hardware=h200&strategy=multi_node_tep")
        _cold_boot_matches_the_cli(page, says)


def _site_with_a_flipped_byte(site_dir, glob: str, tmp_path):
    """A site equal to ``site_dir`` (symbolic links) but for its runtime file
    matching ``glob``, whose middle byte is flipped."""
    out = tmp_path / "site"
    out.mkdir()
    for entry in site_dir.iterdir():
        if entry.name != "runtime":
            (out / entry.name).symlink_to(entry)
    (out / "runtime").mkdir()
    for entry in (site_dir / "runtime").iterdir():
        if entry.match(glob):
            data = bytearray(entry.read_bytes())
            data[len(data) // 2] ^= 0xFF
            (out / "runtime" / entry.name).write_bytes(bytes(data))
        else:
            (out / "runtime" / entry.name).symlink_to(entry)
    return out


def _cold_boot_matches_the_cli(page, says: str) -> None:
    wait_ready(page)
    settle(page)
    assert page.get_attribute("#app", "data-boot-mode") == "cold"
    assert says in page.inner_text("#runtime-status")
    state = page_state(page)
    assert state["argvs"] == [c["argv"] for c in cli_plan(state["query"])["commands"]]
    assert not page.locator("#preview-banner").is_visible()


def test_a_wrong_data_patch_the_page_trusts_falls_back_to_the_cold_boot(page, server, site_dir):
    """A patch of the right format whose hash the page lists (a build bug, not
    an attack: the hash check passes) but that rebuilds the wrong memory traps
    in the module's constructors, which Pyodide does not report: the worker
    watches its start (composer-worker.js ``watched``) and the page falls back
    to the cold boot instead of loading forever (adversarial finding)."""
    import hashlib
    import struct

    from composer.buildtime.wasm_data import MAGIC

    wrong = struct.pack("<3I", MAGIC, 0, 0)  # rebuilds nothing: the constructors read zeros
    real = next((site_dir / "runtime").glob("wasm-data-*.bin")).read_bytes()
    old, new = hashlib.sha256(real).hexdigest(), hashlib.sha256(wrong).hexdigest()
    page.route("**/runtime/wasm-data-*.bin", lambda route: route.fulfill(status=200, body=wrong))

    def rewrite(route):
        resp = route.fetch()
        route.fulfill(response=resp, body=resp.text().replace(old, new))
    page.route("**/moonshotai/Kimi-K3/*", rewrite)
    page.goto(f"{server}{K3}?hardware=h200&strategy=multi_node_tep")
    wait_ready(page)
    settle(page)
    assert page.get_attribute("#app", "data-boot-mode") == "cold"
    status = page.inner_text("#runtime-status")
    # the watch caught it (not the hash check, which the rewritten page passes)
    assert "SHA-256" not in status and ("fast start failed" in status or "did not finish" in status), status
    state = page_state(page)
    assert state["argvs"] == [c["argv"] for c in cli_plan(state["query"])["commands"]]


def test_snapshot_path_is_used_and_matches_the_cli(page, server):
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(f"{server}{K3}?hardware=mi325x&strategy=multi_node_tp")
    wait_ready(page)
    settle(page)
    assert page.get_attribute("#app", "data-boot-mode") == "snapshot"
    # The module without data segments, never Pyodide's own 9.6 MB one (build.snapshot_wasm).
    assert any("/runtime/wasm-nodata-" in u for u in asked) and any("/runtime/wasm-data-" in u for u in asked)
    assert not any(u.split("?")[0].endswith("pyodide.asm.wasm") for u in asked), asked
    assert page.inner_text("#runtime-status").strip() == ""
    state = page_state(page)
    assert state["argvs"] == [c["argv"] for c in cli_plan(state["query"])["commands"]]


def test_worker_renders_the_prerendered_default_identically(page, server):
    page.goto(server + K3)
    wait_ready(page)
    grab = "() => ['controls','summary','notices','capacity','commands','extras'].map(id => document.getElementById(id).innerHTML)"
    before = page.evaluate(grab)
    click(page, "hardware", "h200")
    page.wait_for_function("() => location.search.includes('hardware=h200')")
    settle(page)
    page.click("#reset")  # the worker renders the default with the same macros
    page.wait_for_function("() => !location.search.includes('hardware')")
    settle(page)
    assert page.evaluate(grab) == before


CLICK_WHEN_READY = """
new MutationObserver((_, obs) => {
  const app = document.getElementById('app');
  if (app && app.dataset.bootMode) {
    obs.disconnect();
    document.querySelector('#controls input[name=features][value=spec_decoding]').click();
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-boot-mode']});
"""


def test_click_between_ready_and_the_links_plan_keeps_the_link(page, server):
    # Found by the adversarial pass: the pre-rendered controls' queries are
    # relative to the default; a click in that window dropped the link's choices.
    page.add_init_script(CLICK_WHEN_READY)
    page.goto(f"{server}{K3}?hardware=h200&strategy=multi_node_dep")
    page.wait_for_function("() => location.search.includes('spec_decoding')")
    settle(page)
    state = page_state(page)
    assert "hardware=h200" in state["query"] and "strategy=multi_node_dep" in state["query"]
    assert state["argvs"] == [c["argv"] for c in cli_plan(state["query"])["commands"]]


def test_two_quick_clicks_both_count(page, server):
    page.goto(server + K3)
    wait_ready(page)
    page.evaluate("""() => {
        document.querySelector('#controls input[name=hardware][value=h200]').click();
        document.querySelector('#controls input[name=install][value=docker]').click();
    }""")
    page.wait_for_function("() => location.search.includes('install=docker')")
    settle(page)
    state = page_state(page)
    assert "hardware=h200" in state["query"], state["query"]
    assert state["argvs"] == [c["argv"] for c in cli_plan(state["query"])["commands"]]


def test_reset_while_loading_then_a_click_starts_from_the_default(page, server):
    held = []
    page.route("**/runtime/snapshot-*.bin", lambda route: held.append(route))
    page.goto(f"{server}{K3}?hardware=h200&features=spec_decoding")
    while not held:
        page.wait_for_timeout(50)
    page.click("#reset")
    assert page.is_checked('#controls input[name=hardware][value=b300]')
    page.locator('#controls label.opt:has(input[name="features"][value="text_only"])').click()
    for route in held:
        route.continue_()
    page.unroute("**/runtime/snapshot-*.bin")
    page.wait_for_function("() => location.search.includes('text_only')")
    settle(page)
    q = page_state(page)["query"]
    assert "spec_decoding" not in q and "hardware=b300" in q, q  # from the default (pinned, v=2)


def test_unusable_recipe_data_ends_the_preview_with_a_message(page, server):
    page.route("**/data/moonshotai/Kimi-K3.json*", lambda route: route.fulfill(status=200, body="{}"))
    page.goto(f"{server}{K3}?hardware=h200")
    page.wait_for_function("() => document.getElementById('runtime-status').dataset.state === 'failed'", timeout=60_000)
    assert not page.locator("#preview-banner").is_visible()
    assert page.evaluate("[...document.querySelectorAll('#controls fieldset')].every(f => f.disabled)")


@pytest.mark.parametrize("path", ["snapshot", "cold"])
def test_a_wasm_module_that_does_not_compile_ends_the_boot_at_once(page, server, site_dir, path):
    """Adversarial finding: a module whose hash the page lists (a build bug:
    the check passes) but that does not compile made Pyodide's instantiation
    hook log "wasm instantiation failed!" and wait forever: the snapshot path
    fell back to the cold boot after the restore's 60 s, and the cold boot
    failed after the page's 180 s. The worker now races the compile
    (composer-worker.js ``wasmFailure``): the snapshot path falls back at once
    and shows the CLI's plan; the cold path fails at once, saying why."""
    import hashlib

    junk = b"not a wasm module at all"
    glob = "wasm-nodata-*.wasm" if path == "snapshot" else "pyodide-*/pyodide.asm.wasm"
    real = next((site_dir / "runtime").glob(glob)).read_bytes()
    old, new = hashlib.sha256(real).hexdigest(), hashlib.sha256(junk).hexdigest()
    page.route("**/runtime/" + glob, lambda route: route.fulfill(status=200, body=junk))
    if path == "cold":
        page.route("**/runtime/snapshot-*.bin", lambda route: route.fulfill(status=404, body="gone"))

    def rewrite(route):
        resp = route.fetch()
        route.fulfill(response=resp, body=resp.text().replace(old, new))
    page.route("**/moonshotai/Kimi-K3/*", rewrite)
    page.goto(f"{server}{K3}?hardware=h200&strategy=multi_node_tep")
    if path == "snapshot":
        page.wait_for_function("() => document.getElementById('app').dataset.ready === 'true'", timeout=40_000)
        settle(page)
        assert page.get_attribute("#app", "data-boot-mode") == "cold"
        state = page_state(page)
        assert state["argvs"] == [c["argv"] for c in cli_plan(state["query"])["commands"]]
    else:
        page.wait_for_function("() => document.getElementById('runtime-status').dataset.state === 'failed'", timeout=40_000)
        assert "wasm module could not be used" in page.inner_text("#runtime-status")
