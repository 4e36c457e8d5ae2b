"""Benchmarks that print figures (never asserted by tests): ``python -m bench``.

* build time of the public corpus (``../shared/upstream-recipes``) and of our
  ``recipes/``, and of a one-recipe rebuild (best of N wall-clock runs);
* compose time of one plan: median and p95 over many Kimi K3 selections;
* site size: total bytes, and what a first visit of one recipe page transfers
  (raw and gzip-compressed, as a static server with compression would send);
* with ``--browser``: time from navigation to the first composed plan in
  headless Chromium, and the median time of a click → rendered plan.
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
from composer.loader import load_catalog, load_recipe

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


def first_visit_bytes(site: Path, rid: str = "moonshotai/Kimi-K3") -> tuple[int, int]:
    files = [site / rid / "index.html", site / "assets/style.css", site / "assets/app.js", site / "assets/composer-worker.js",
             site / "data/catalog.json", site / f"data/{rid}.json"]
    files += [site / "pyodide" / n for n in ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")]
    files += sorted((site / "wheels").iterdir())
    raw = sum(f.stat().st_size for f in files)
    gz = sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)
    return raw, gz


def browser_times(site: Path, clicks: int = 10) -> tuple[float, float, float]:
    import functools
    import http.server
    import threading

    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/moonshotai/Kimi-K3/"
    args = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-sync"]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=args)
        page = b.new_page()
        t = time.perf_counter()
        page.goto(url)
        interactive = time.perf_counter() - t
        page.wait_for_function("document.getElementById('app').dataset.ready === 'true'", timeout=120_000)
        ready = time.perf_counter() - t
        print("browser: worker timings (ms since worker start):", page.get_attribute("#app", "data-timings"),
              "first compose", page.get_attribute("#app", "data-compose-ms"), "ms")
        times = []
        for hw in ["h200", "gb200", "mi355x", "b200", "h100"] * (clicks // 5):
            t = time.perf_counter()
            page.click(f'#controls input[name="hardware"][value="{hw}"]')
            page.wait_for_function("hw => location.search.includes(hw) && document.getElementById('app').dataset.busy === 'false'", arg=hw)
            times.append(time.perf_counter() - t)
        b.close()
    httpd.shutdown()
    return interactive, ready, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plans", type=int, default=500)
    ap.add_argument("--browser", action="store_true", help="also measure the page in headless Chromium")
    args = ap.parse_args()
    if CORPUS.exists():
        print(f"build, public corpus ({len(list((CORPUS / 'models').glob('*/*.yaml')))} recipes): {timed_build(CORPUS, args.runs):.2f} s (best of {args.runs})")
    print(f"build, our recipes/ ({len(list((ROOT / 'recipes/models').glob('*/*.yaml')))} recipes): {timed_build(ROOT / 'recipes', args.runs):.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"build, one recipe (Kimi K3): {timed_build(one_recipe_dir(Path(tmp)), args.runs):.2f} s")
    times = sorted(compose_times(args.plans))
    print(f"compose one plan (Kimi K3, {args.plans} random selections, CPython): median {statistics.median(times) * 1000:.1f} ms, "
          f"p95 {times[int(0.95 * len(times))] * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build.build(ROOT / "recipes", site)
        total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        raw, gz = first_visit_bytes(site)
        print(f"site size (our recipes/): {total:,} bytes")
        print(f"first visit of /moonshotai/Kimi-K3/: {raw:,} bytes raw, {gz:,} bytes gzip")
        if args.browser:
            interactive, ready, click = browser_times(site)
            print(f"browser: page loaded {interactive:.2f} s, first composed plan {ready:.2f} s, click → plan median {click * 1000:.0f} ms")


if __name__ == "__main__":
    main()
