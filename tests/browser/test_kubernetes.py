"""Issue 13 in Chromium: "Run with: Kubernetes" shows the manifests first; its
Copy gives exactly the CLI's ``--format k8s`` output for the page's URL, and
Download saves the same text as ``<recipe>-<hardware>.yaml``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import ROOT, wait_ready
from tests.browser.test_page import K3, click, settle

pytestmark = pytest.mark.browser


@pytest.fixture
def context(context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def cli_k8s(query: str) -> str:
    out = subprocess.run([sys.executable, "-m", "composer", "moonshotai/Kimi-K3", "--query", query, "--format", "k8s"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("start", ["hardware=h200&strategy=multi_node_tp", "hardware=gb200&strategy=pd_cluster"])
def test_kubernetes_tab_copy_and_download_equal_the_cli(page, server, start):
    page.goto(f"{server}{K3}?{start}")
    wait_ready(page)
    click(page, "install", "k8s")
    page.wait_for_function("() => location.search.includes('install=k8s')")
    settle(page)
    tab = page.locator("#tab-k8s")
    assert tab.get_attribute("aria-selected") == "true" and page.locator("#panel-k8s").is_visible()
    assert not page.locator("#panel-0").is_visible()
    query = page.evaluate("location.search.replace(/^\\?/, '')")
    expected = cli_k8s(query)
    page.locator("#panel-k8s button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == expected
    with page.expect_download() as info:
        page.locator("#panel-k8s button.download").click()
    assert info.value.suggested_filename == "Kimi-K3-" + ("h200" if "h200" in start else "gb200") + ".yaml"
    assert Path(info.value.path()).read_text() == expected
    # The per-node tabs stay: the commands each pod runs.
    page.locator("#tab-0").click()
    assert page.locator("#panel-0").is_visible() and not page.locator("#panel-k8s").is_visible()


def test_reload_with_install_k8s_shows_the_manifests(page, server):
    page.goto(f"{server}{K3}?hardware=h200&install=k8s")
    wait_ready(page)
    settle(page)
    text = page.locator("#panel-k8s pre code").text_content()
    assert text == cli_k8s("hardware=h200&install=k8s")
    assert "kind: LeaderWorkerSet" in text or "kind: Deployment" in text
