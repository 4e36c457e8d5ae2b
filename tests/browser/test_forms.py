"""Issue 20 in Chromium: "Run with: Config file" and "Run with: SLURM". Every
file's Copy and Download equal the CLI's ``--format config`` / ``--format
slurm`` output for the page's URL, file by file (config: each node's YAML in
its own tab, beside its script; SLURM: the sbatch scripts in the form's tab)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import ROOT, download, wait_ready
from tests.browser.test_page import K3, click, settle
from tests.test_slurm_form import fake_bin, run_job  # noqa: F401 (fake_bin: a fixture)

pytestmark = pytest.mark.browser


@pytest.fixture
def context(context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def cli_files(query: str, form: str) -> dict:
    """``{file name: text}`` of the CLI's ``--format FORM`` output."""
    out = subprocess.run([sys.executable, "-m", "composer", "moonshotai/Kimi-K3", "--query", query, "--format", form],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    parts = re.split(r"^# ==> (.+) <==\n", out.stdout, flags=re.M)
    if len(parts) == 1:  # one file: printed without a name line
        return {None: out.stdout}
    return dict(zip(parts[1::2], parts[2::2]))


def open_form(page, server, start: str, form: str) -> str:
    page.goto(f"{server}{K3}?{start}")
    wait_ready(page)
    click(page, "install", form)
    page.wait_for_function(f"() => location.search.includes('install={form}')")
    settle(page)
    return page.evaluate("location.search.replace(/^\\?/, '')")


def check_block(page, block, expected: dict) -> str:
    """One file's Copy and Download against the CLI's file of that name (or
    its only file)."""
    button = block.locator("button.download")
    name = button.get_attribute("data-name")
    if None in expected:
        expected = {name: expected[None]}
    block.locator("button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == expected[name], name
    saved = download(page, button)
    assert saved.suggested_filename == name
    assert Path(saved.path()).read_text() == expected[name]
    return name


@pytest.mark.parametrize("start", ["hardware=h200&nodes=2&strategy=multi_node_tp", "hardware=gb200&strategy=pd_cluster"])
def test_config_file_tabs_copy_and_download_equal_the_cli(page, server, start):
    query = open_form(page, server, start, "config")
    expected = cli_files(query, "config")
    tabs = page.locator("#commands [role=tab]")
    seen = set()
    for i in range(tabs.count()):
        tab = tabs.nth(i)
        tab.click()
        panel = page.locator(f"#{tab.get_attribute('aria-controls')}")
        assert panel.is_visible()
        for j in range(panel.locator(".artifact").count()):
            seen.add(check_block(page, panel.locator(".artifact").nth(j), expected))
        script = panel.locator(":scope > .actions button.download")
        if script.count():
            saved = download(page, script)
            assert Path(saved.path()).read_text() == expected[saved.suggested_filename]
            seen.add(saved.suggested_filename)
            if saved.suggested_filename != "router.sh":
                assert "vllm serve --config " in panel.locator(":scope > pre code").text_content()
    assert seen == set(expected) and any(n.endswith(".yaml") for n in seen)


@pytest.mark.parametrize("start", ["hardware=h200&nodes=2&strategy=multi_node_tp", "hardware=gb200&strategy=pd_cluster"])
def test_slurm_tab_copy_and_download_equal_the_cli(page, server, start, tmp_path):
    query = open_form(page, server, start, "slurm")
    expected = cli_files(query, "slurm")
    tab = page.locator("#tab-slurm")
    assert tab.get_attribute("aria-selected") == "true" and page.locator("#panel-slurm").is_visible()
    blocks = page.locator("#panel-slurm .artifact")
    names = [check_block(page, blocks.nth(j), expected) for j in range(blocks.count())]
    assert set(names) == ({names[0]} if None in expected else set(expected))
    assert names == (["serve.sbatch"] if "multi_node" in start else ["prefill.sbatch", "decode.sbatch", "router.sbatch"])
    # Several jobs: Download all writes each as the CLI prints it (a fresh user's finding: SLURM had none).
    everything = page.locator("#panel-slurm button.download-all")
    assert everything.count() == (len(names) > 1)
    if len(names) > 1:
        bundle = Path(download(page, everything).path()).read_text()
        out = tmp_path / "all"
        out.mkdir()
        subprocess.run(["bash", "-c", bundle], cwd=out, check=True, capture_output=True)
        assert {f.name: f.read_text() for f in out.iterdir()} == expected
    # Long lines wrap inside every shown block, at every width (the jobs' error lines were cut off).
    for width in (1440, 900, 390):
        page.set_viewport_size({"width": width, "height": 900})
        cut = page.evaluate("() => [...document.querySelectorAll('#commands pre')].filter((p) => p.offsetParent"
                            " && p.scrollWidth > p.clientWidth + 1).map((p) => p.className)")
        assert cut == [], width


def test_another_form_opens_on_its_own_first_tab(page, server):
    # A new user chose SLURM while reading "Node 1" and stayed on that tab, the sbatch script out of sight.
    page.goto(f"{server}{K3}?hardware=b200&nodes=2&strategy=multi_node_tp&install=pip")
    wait_ready(page)
    selected = "() => document.querySelector('#commands [role=tab][aria-selected=true]').id"
    page.locator("#commands [role=tab]").nth(1).click()
    assert page.evaluate(selected) == "tab-1"
    for form, first in (("slurm", "tab-slurm"), ("config", "tab-0"), ("docker", "tab-0")):
        if form == "config":
            page.locator("#commands [role=tab]").nth(1).click()
        click(page, "install", form)
        page.wait_for_function(f"() => location.search.includes('install={form}')")
        settle(page)
        assert page.evaluate(selected) == first, form
        assert page.locator(f"#{page.locator('#' + first).get_attribute('aria-controls')}").is_visible()
    # the same form keeps the tab the user reads: a click elsewhere re-renders it in place
    page.locator("#commands [role=tab]").nth(1).click()
    click(page, "kv_offload", "simple")
    page.wait_for_function("() => location.search.includes('kv_offload=simple')")
    settle(page)
    assert page.evaluate(selected) == "tab-1"


def test_a_value_entered_for_an_sbatch_check_is_the_jobs_default(page, server, tmp_path, fake_bin):  # noqa: F811
    """Fresh-user finding: with IFACE_NAME filled in on the page, the SLURM
    job still stopped ("set IFACE_NAME before sbatch"). The value becomes the
    default of the job's check line, as shown, copied and downloaded; the job
    then runs every node with it, and a value exported before sbatch wins.
    The host names stay the job's own."""
    query = open_form(page, server, "hardware=h200&nodes=2&strategy=multi_node_tp", "slurm")
    expected = cli_files(query, "slurm")[None]
    assert ': "${IFACE_NAME:?' in expected
    page.locator('#placeholders input[data-ph="IFACE_NAME"]').fill("ib0")
    page.locator('#placeholders input[data-ph="HEAD_IP"]').fill("10.1.2.3")
    block = page.locator("#panel-slurm .artifact").first
    page.wait_for_function("() => document.querySelector('#panel-slurm pre code').textContent.includes('IFACE_NAME:=ib0')")
    shown = block.locator("pre code").text_content()
    assert shown == expected.replace(next(line for line in expected.splitlines() if line.startswith(': "${IFACE_NAME:?')),
                                     ': "${IFACE_NAME:=ib0}"')
    assert "10.1.2.3" not in shown  # the job sets HEAD_IP from its hosts
    block.locator("button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == shown
    job = Path(download(page, block.locator("button.download")).path()).read_text()
    assert job == shown
    out, nodes = run_job(job, ["gpu-a", "gpu-b"], {}, tmp_path, fake_bin)
    assert out.returncode == 0, out.stderr
    assert [env["GLOO_SOCKET_IFNAME"] for _, env in nodes] == ["ib0", "ib0"]
    assert "gpu-a" in nodes[1][0]  # --master-addr: the job's first host, not the panel's HEAD_IP
    out, nodes = run_job(job, ["gpu-a", "gpu-b"], {"IFACE_NAME": "eth9"}, tmp_path, fake_bin)
    assert out.returncode == 0 and [env["GLOO_SOCKET_IFNAME"] for _, env in nodes] == ["eth9", "eth9"]
