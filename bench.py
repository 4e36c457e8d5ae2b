"""Benchmarks that print figures (never asserted by tests): ``python -m bench``.

* build time of the public corpus (``../shared/upstream-recipes``) and of our
  ``recipes/``, and of a one-recipe rebuild (best of N wall-clock runs);
* compose time of one plan: median and p95 over many Kimi K3 selections;
* the share of ready plans of a seeded sample of the corpus selection space
  that break a vLLM start-up rule (``launch_bench``; target 0);
* the memory model's error on the reference figures the project keeps
  (``tests/data/memory_reference.json``): median and max, today's model and
  the one it replaced (``tests/memory_reference.py``);
* site size: total bytes;
* with ``--browser`` (``make bench``), in headless Chromium over http://127.0.0.1:
  deep link → its own command on screen, cold and warm cache, for five links
  (P/D, DEP, TP+PP, features+Advanced, AMD), on the snapshot path and on the
  fallback path (snapshot blocked); click → plan p50/p95 (measured in the
  page); what a first visit transfers (raw and gzip); a second recipe page in
  the same tab.
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import build
from composer.api import compose, make_context
from composer.buildtime.loader import load_catalog, load_recipe

ROOT = Path(__file__).resolve().parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


def timed_build(recipes: Path, runs: int) -> float:
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            t = time.perf_counter()
            build.build(recipes, Path(tmp) / "site")
            best = min(best, time.perf_counter() - t)
    return best


def one_recipe_dir(tmp: Path) -> Path:
    dst = tmp / "one"
    shutil.copytree(ROOT / "recipes", dst, ignore=shutil.ignore_patterns("models"))
    (dst / "models" / "moonshotai").mkdir(parents=True)
    shutil.copy2(ROOT / "recipes/models/moonshotai/Kimi-K3.yaml", dst / "models/moonshotai/Kimi-K3.yaml")
    return dst


def k3_queries(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    hws = ["h100", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x"]
    strategies = ["", "single_node_tp", "multi_node_tp", "multi_node_tep", "multi_node_dep", "multi_node_tp_pp",
                  "multi_node_tp_dp", "pd_cluster"]
    feats = ["tool_calling", "reasoning", "spec_decoding", "text_only"]
    adv = ["max_batched_8k", "max_num_seqs_256", "gpu_mem_095", "max_model_len_auto"]
    out = []
    for _ in range(n):
        q = {"hardware": rng.choice(hws)}
        if s := rng.choice(strategies):
            q["strategy"] = s
        if rng.random() < 0.5:
            q["nodes"] = str(rng.randint(1, 8))
        q["features"] = ",".join(f for f in feats if rng.random() < 0.5)
        q["advanced"] = ",".join(a for a in adv if rng.random() < 0.3)
        q["kv_offload"] = rng.choice(["off", "simple", "lmcache"])
        out.append("&".join(f"{k}={v}" for k, v in q.items()))
    return out


def compose_times(n: int) -> list[float]:
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(ROOT / "recipes", "moonshotai/Kimi-K3"), load_catalog(ROOT / "recipes"))
    compose(ctx, "")  # warm imports
    times = []
    for q in k3_queries(n):
        t = time.perf_counter()
        compose(ctx, q)
        times.append(time.perf_counter() - t)
    return times


DEEP_LINKS = [
    "moonshotai/Kimi-K3/?hardware=gb200&strategy=pd_cluster",                    # P/D
    "moonshotai/Kimi-K3/?hardware=h200&strategy=multi_node_dep&nodes=3",          # DEP
    "moonshotai/Kimi-K3/?hardware=b200&strategy=multi_node_tp_pp",                # TP+PP
    "moonshotai/Kimi-K3/?hardware=b300&features=spec_decoding&advanced=max_batched_8k,gpu_mem_095",  # features+advanced
    "moonshotai/Kimi-K3/?hardware=mi355x&strategy=multi_node_tep",                # AMD
]
READY = """() => { const a = document.getElementById('app');
  return a.dataset.ready === 'true' && a.dataset.busy !== 'true' && a.dataset.query === location.search.replace(/^\\?/, ''); }"""
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]


def serve(site: Path, served: list | None = None):
    """A static server of ``site`` on 127.0.0.1; ``served`` collects the files
    it sent with a body (GET)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_head(self):
            f = super().send_head()
            if f is not None and served is not None and self.command == "GET":
                served.append(self.translate_path(self.path))
            return f

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def deep_link_times(browser, base: str, runs: int, fallback: bool) -> tuple[list[float], list[float], str]:
    """Seconds from navigation to the link's own command on screen: cold (a
    fresh context, empty cache) and warm (the same link again in that context)."""
    cold, warm, modes = [], [], set()
    for link in DEEP_LINKS:
        for _ in range(runs):
            ctx = browser.new_context()
            page = ctx.new_page()
            if fallback:
                page.route("**/runtime/snapshot-*.bin", lambda route: route.fulfill(status=404, body="gone"))
            for bucket in (cold, warm):
                t = time.perf_counter()
                page.goto(base + link)
                page.wait_for_function(READY, timeout=120_000, polling=5)
                bucket.append(time.perf_counter() - t)
            modes.add(page.get_attribute("#app", "data-boot-mode"))
            ctx.close()
    return cold, warm, ",".join(sorted(modes))


def click_times(browser, base: str, clicks: int, think: float = 0.0) -> tuple[list[float], list[float]]:
    """Milliseconds from a click to its plan on screen, and to its controls on
    screen (they follow the plan), measured in the page; ``think`` seconds
    pass between a page's controls appearing and the next click (a person
    reading the page; the worker composes likely next plans meanwhile)."""
    page = browser.new_page()
    page.goto(base + "moonshotai/Kimi-K3/")
    page.wait_for_function(READY, timeout=120_000)
    rng = random.Random(11)
    out, controls, missed = [], [], 0
    while len(out) < clicks and missed < 5:
        if think:
            page.wait_for_timeout(think * 1000)
        choices = page.eval_on_selector_all("#controls input:not(:disabled):not(:checked)", "xs => xs.map(x => [x.name, x.value])")
        name, value = rng.choice(choices)
        try:
            page.locator(f'#controls input[name="{name}"][value="{value}"]').click(timeout=5_000)
            page.wait_for_function("() => document.getElementById('app').dataset.clickMs "
                                   "|| document.getElementById('runtime-status').dataset.state === 'error'", polling=5, timeout=10_000)
        except Exception:  # a click that produced no new plan in 10 s: counted, not timed
            missed += 1
            print(f"browser: click on {name}={value} showed no plan within 10 s")
            continue
        got = page.evaluate("(() => { const a = document.getElementById('app'); const v = a.dataset.clickMs; delete a.dataset.clickMs; return v; })()")
        # The controls arrive after the plan: choose the next click from them.
        page.wait_for_function("() => document.getElementById('app').dataset.busy === 'false'", polling=5, timeout=10_000)
        ctl = page.evaluate("(() => { const a = document.getElementById('app'); const v = a.dataset.controlsMs; delete a.dataset.controlsMs; return v; })()")
        if got:
            out.append(float(got))
            controls.append(float(ctl or got))
    page.close()
    return out, controls


def transfer(browser, url: str, served: list) -> tuple[int, int, int]:
    """Bytes a first visit transfers (raw, and gzip-compressed as a static host
    with compression would send them) and the number of requests, counted by
    the server (the worker's fetches included)."""
    ctx = browser.new_context()
    page = ctx.new_page()
    served.clear()
    page.goto(url)
    page.wait_for_function(READY, timeout=120_000)
    page.wait_for_timeout(500)
    ctx.close()
    files = [Path(f) / "index.html" if Path(f).is_dir() else Path(f) for f in served]
    raw = sum(f.stat().st_size for f in files)
    gz = sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)
    return raw, gz, len(files)


def second_page_time(browser, base: str, runs: int) -> list[float]:
    """Seconds to the first plan of a second recipe page opened in the same tab."""
    out = []
    for _ in range(runs):
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(base + "moonshotai/Kimi-K3/?hardware=h200")
        page.wait_for_function(READY, timeout=120_000)
        t = time.perf_counter()
        page.goto(base + "Qwen/Qwen3-235B-A22B-Instruct-2507/?hardware=h100")
        page.wait_for_function(READY, timeout=120_000, polling=5)
        out.append(time.perf_counter() - t)
        ctx.close()
    return out


def browser_figures(site: Path, runs: int) -> None:
    from playwright.sync_api import sync_playwright

    served: list = []
    httpd, base = serve(site, served)
    med = statistics.median
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        for fallback in (False, True):
            cold, warm, modes = deep_link_times(b, base, runs, fallback)
            what = "fallback (snapshot blocked, cold boot)" if fallback else "snapshot"
            print(f"browser, deep link → its command, {what} [{modes}], {len(DEEP_LINKS)} links × {runs} runs: "
                  f"cold median {med(cold):.2f} s (p95 {pct(cold, .95):.2f}), warm median {med(warm):.2f} s (p95 {pct(warm, .95):.2f})")
        for think in (1.0, 0.0):
            clicks, controls = click_times(b, base, 60, think)
            print(f"browser, click → plan on screen (60 random clicks, {think:g} s between clicks): p50 {pct(clicks, .5):.0f} ms, "
                  f"p95 {pct(clicks, .95):.0f} ms; → controls too: p50 {pct(controls, .5):.0f} ms, p95 {pct(controls, .95):.0f} ms")
        raw, gz, n = transfer(b, base + DEEP_LINKS[0], served)
        print(f"browser, first visit of a deep link: {n} requests, {raw:,} bytes raw, {gz:,} bytes gzip")
        second = second_page_time(b, base, runs)
        print(f"browser, second recipe page in the same tab: median {med(second):.2f} s")
        b.close()
    httpd.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plans", type=int, default=500)
    ap.add_argument("--launch-plans", type=int, default=1000, help="sampled corpus plans for the launch-rule share")
    ap.add_argument("--browser", action="store_true", help="also measure the page in headless Chromium")
    ap.add_argument("--browser-runs", type=int, default=5, help="runs per deep link and path (medians are printed)")
    args = ap.parse_args()
    if CORPUS.exists():
        print(f"build, public corpus ({len(list((CORPUS / 'models').glob('*/*.yaml')))} recipes): {timed_build(CORPUS, args.runs):.2f} s (best of {args.runs})")
    print(f"build, our recipes/ ({len(list((ROOT / 'recipes/models').glob('*/*.yaml')))} recipes): {timed_build(ROOT / 'recipes', args.runs):.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"build, one recipe (Kimi K3): {timed_build(one_recipe_dir(Path(tmp)), args.runs):.2f} s")
    times = sorted(compose_times(args.plans))
    print(f"compose one plan (Kimi K3, {args.plans} random selections, CPython): median {statistics.median(times) * 1000:.1f} ms, "
          f"p95 {times[int(0.95 * len(times))] * 1000:.1f} ms")
    from tests import memory_reference

    for model in ("new", "old"):
        print(f"memory model ({'today' if model == 'new' else 'before issue 19'}) on the reference figures: "
              f"{memory_reference.summary(model)}")
    if CORPUS.exists():
        import launch_bench

        print(launch_bench.baseline(args.launch_plans).lines()[0])
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build.build(ROOT / "recipes", site)
        total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        print(f"site size (our recipes/): {total:,} bytes")
        if args.browser:
            browser_figures(site, args.browser_runs)


if __name__ == "__main__":
    main()
