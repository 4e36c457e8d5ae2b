"""Benchmarks that print figures (never asserted by tests): ``python -m bench``.

* build time of the public corpus (``../shared/upstream-recipes``) and of our
  ``recipes/``, and of a one-recipe rebuild (best of N wall-clock runs);
* compose time of one plan: median and p95 over many Kimi K3 selections;
* the share of ready plans of a seeded sample of the corpus selection space
  that break a vLLM start-up rule (``launch_bench``; target 0);
* the memory model's error on the reference figures the project keeps
  (``tests/data/memory_reference.json``): median and max, today's model and
  the one it replaced (``tests/memory_reference.py``);
* site size: total bytes, and each runtime file raw, gzip and Brotli;
* soak: RSS (CPython) and the WebAssembly heap (Pyodide, the snapshot restored
  in Node) after 1,000 and 10,000 page plans of random click walks in one
  process (``soak``, ``pyodide_soak``), with p99 and worst compose time;
* with ``--browser`` (``make bench``), in headless Chromium over http://127.0.0.1,
  first the figures of issue 22, each printed with its target and ratio: a
  bare visit and an embed before any interaction (bytes, runtime requests),
  a deep link's first visit (bytes; time to its command, and that time ÷ a
  stock Pyodide cold boot to a first ``runPython`` on the same server in the
  same run), 60 random clicks back to back (p95 to plan and to controls), the
  first interaction on a bare page to its plan; then
  deep link → its own command on screen, cold and warm cache, for five links
  (P/D, DEP, TP+PP, features+Advanced, AMD), on the snapshot path and on the
  fallback path (snapshot blocked); click → plan p50/p95 (measured in the
  page); what a first visit transfers (raw and gzip); a second recipe page in
  the same tab.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
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


def controls_times(n: int) -> list[float]:
    """Seconds for the page's controls of one plan (``controls_json``, what the
    worker computes after each click), over random Kimi K3 selections."""
    import json

    from composer import render
    from composer.buildtime.validate import dump

    build.install_browser_templates()
    rid = "moonshotai/Kimi-K3"
    recipe_text = json.dumps({"id": rid, "recipe": dump(load_recipe(ROOT / "recipes", rid))}, separators=(",", ":"))
    catalog_text = json.dumps(dump(load_catalog(ROOT / "recipes")), separators=(",", ":"))
    render.controls_json(recipe_text, catalog_text, "")
    times = []
    for q in k3_queries(n, seed=5):
        t = time.perf_counter()
        render.controls_json(recipe_text, catalog_text, q)
        times.append(time.perf_counter() - t)
    return times


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


def click_times(browser, base: str, clicks: int, think: float = 0.0,
                parts: dict | None = None) -> tuple[list[float], list[float]]:
    """Milliseconds from a click to its plan on screen, and to its controls on
    screen (they follow the plan), measured in the page; ``think`` seconds
    pass between a page's controls appearing and the next click (a person
    reading the page; the worker composes likely next plans meanwhile).
    ``parts``, when given, receives per click where the time went (the page's
    data-queued-ms, -compose-ms, -transit-ms, -swap-ms: waiting for the
    worker, composing and rendering, the reply's way back, parsing and
    swapping in) as lists under those names."""
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
        if parts is not None and got:
            d = page.evaluate("(() => { const a = document.getElementById('app').dataset; return [a.queuedMs, a.composeMs, a.transitMs, a.swapMs]; })()")
            for name, v in zip(("queued", "compose", "transit", "swap"), d):
                parts.setdefault(name, []).append(float(v or 0))
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


RUNTIME_PARTS = ("/runtime/", "/data/", "composer-worker.js", "boot-python.mjs")
"""Requests that belong to the runtime (worker, Pyodide, snapshot, composer zip, data)."""
PRERENDERED_LINK = "moonshotai/Kimi-K3/?hardware=h200"
PYTHON_LINK = DEEP_LINKS[0]  # P/D: no view rendered ahead, the page boots Python at once
STOCK_PAGE = """<!doctype html><meta charset="utf-8"><title>stock Pyodide</title><body><script type="module">
const t0 = performance.now();
const index = new URL("INDEX", location.href).href;
const {loadPyodide} = await import(index + "pyodide.mjs");
const py = await loadPyodide({indexURL: index});
document.body.dataset.result = String(py.runPython("6 * 7"));
document.body.dataset.ms = String(performance.now() - t0);
</script>"""


def report(what: str, value: float, target: float, unit: str, ref: str = "") -> None:
    """One figure with its target and value/target (≤ 1 holds), and a same-run reference."""
    ok = "holds" if value <= target else "MISSES"
    ratio = f"ratio {value / target:.2f}, " if target else ""
    print(f"  {what}: {value:,.2f} {unit} (target ≤ {target:,.2f} {unit}; {ratio}{ok})" + (f"; {ref}" if ref else ""))


def _sizes(files: list[Path]) -> tuple[int, int]:
    files = [f / "index.html" if f.is_dir() else f for f in files]
    return sum(f.stat().st_size for f in files), sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)


def until_interaction(browser, url: str, served: list, window_s: float, embed: bool) -> tuple[int, int, int]:
    """(requests, bytes gzip, runtime requests) a visit makes in its first
    ``window_s`` seconds without any interaction (an embed: in an iframe)."""
    ctx = browser.new_context()
    page = ctx.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    if embed:
        page.goto(url.split("/moonshotai/")[0] + "/index.html")
        served.clear()
        seen.clear()
        page.evaluate("(src) => { const f = document.createElement('iframe'); f.src = src; document.body.appendChild(f); }",
                      url + ("&" if "?" in url else "?") + "embed=1")
    else:
        served.clear()
        page.goto(url)
    # What was fetched up to the last moment the page had not asked for the
    # runtime yet (a top-level page asks once idle: that is not before interaction).
    before_served, before_seen = list(served), list(seen)
    end = time.perf_counter() + window_s
    while time.perf_counter() < end:
        booted = [f for f in page.frames
                  if f.evaluate("document.getElementById('app') && document.getElementById('app').dataset.bootReason")]
        if booted:
            print(f"  (the page asked for the runtime once idle: {booted[0].url}; counted until then)")
            break
        before_served, before_seen = list(served), list(seen)
        page.wait_for_timeout(50)
    ctx.close()
    files = [Path(f) for f in before_served]
    _, gz = _sizes(files)
    runtime = [u for u in before_seen if any(p in u for p in RUNTIME_PARTS)]
    return len(files), gz, len(runtime)


def stock_boot(browser, base: str, site: Path, runs: int) -> list[float]:
    """Seconds from navigation to a stock Pyodide's first runPython result
    (loadPyodide of the site's own Pyodide files, no snapshot, nothing of
    ours), each in a fresh context (an empty cache): the same-run reference."""
    index = next((site / "runtime").glob("pyodide-*/")).relative_to(site).as_posix() + "/"
    (site / "_bench").mkdir(exist_ok=True)
    (site / "_bench" / "stock.html").write_text(STOCK_PAGE.replace("INDEX", "../" + index))
    out = []
    for _ in range(runs):
        ctx = browser.new_context()
        page = ctx.new_page()
        t = time.perf_counter()
        page.goto(base + "_bench/stock.html")
        page.wait_for_function("() => document.body.dataset.result === '42'", timeout=120_000, polling=5)
        out.append(time.perf_counter() - t)
        ctx.close()
    return out


def link_first_visit(browser, base: str, link: str, served: list, runs: int,
                     settled: list | None = None, timings: list | None = None) -> tuple[list[float], int, int, int]:
    """Seconds from navigation to the link's own command on screen (its plan
    shown as the answer, ``COMMAND``) in a fresh context, and what the first of
    those visits transferred: (times, requests, bytes gzip, runtime requests).
    ``settled``, when given, receives the seconds to the controls too
    (``SHOWN``: the worker sends them after the plan), ``timings`` the worker's
    boot timings (``data-timings``: ms from its start to the snapshot fetched,
    restored, ready)."""
    times, first = [], None
    for i in range(runs):
        ctx = browser.new_context()
        page = ctx.new_page()
        seen: list[str] = []
        page.on("request", lambda r, seen=seen: seen.append(r.url))
        served.clear()
        t = time.perf_counter()
        page.goto(base + link)
        page.wait_for_function(COMMAND, timeout=120_000, polling=5)
        times.append(time.perf_counter() - t)
        page.wait_for_function(SHOWN, timeout=120_000, polling=5)
        if settled is not None:
            settled.append(time.perf_counter() - t)
        if timings is not None and page.get_attribute("#app", "data-timings"):
            timings.append(json.loads(page.get_attribute("#app", "data-timings")))
        if i == 0:
            page.wait_for_timeout(300)
            files = [Path(f) for f in served]
            first = (len(files), _sizes(files)[1], len([u for u in seen if any(p in u for p in RUNTIME_PARTS) and "/data/views/" not in u]))
        ctx.close()
    assert first is not None
    return times, *first


COMMAND = """() => { const a = document.getElementById('app');
  return (a.dataset.shown === 'composed' || a.dataset.shown === 'prerendered')
    && a.dataset.query === location.search.replace(/^\\?/, ''); }"""
"""The link's own plan is on screen as the answer (app.js ``received`` or
``showPrerendered``: the preview mark is gone); its controls may still be on
their way."""
SHOWN = """() => { const a = document.getElementById('app');
  return (a.dataset.ready === 'true' || a.dataset.shown === 'prerendered') && a.dataset.busy !== 'true'
    && a.dataset.query === location.search.replace(/^\\?/, ''); }"""
"""The plan and its controls are on screen."""


def first_interaction(browser, base: str, runs: int) -> list[float]:
    """Milliseconds from the first click on a bare page (before it loaded
    anything of the runtime) to that click's plan on screen, measured in the page."""
    out = []
    for _ in range(runs):
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(base + "moonshotai/Kimi-K3/")
        page.wait_for_function("() => document.getElementById('app').dataset.started === 'true' || document.readyState === 'complete'")
        page.locator('#controls input[name="hardware"][value="h200"]').click()
        page.wait_for_function("() => document.getElementById('app').dataset.clickMs", timeout=120_000, polling=5)
        out.append(float(page.get_attribute("#app", "data-click-ms")))
        ctx.close()
    return out


def browser_figures(site: Path, runs: int, extended: bool = True) -> None:
    """The issue-22 figures, each with its target and ratio, then the older
    per-link figures (``extended``)."""
    from playwright.sync_api import sync_playwright

    served: list = []
    httpd, base = serve(site, served)
    med = statistics.median
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        print("browser figures (targets of issue 22; ratio = value / target, ≤ 1 holds):")
        for embed, window in ((False, 1.5), (True, 4.0)):
            n, gz, rt = until_interaction(b, base + "moonshotai/Kimi-K3/", served, window, embed)
            what = f"{'embed' if embed else 'bare visit'}, first {window:g} s without interaction"
            report(f"{what}: transferred", gz / 1e6, 0.5, "MB gzip", f"{n} requests")
            report(f"{what}: runtime requests", rt, 0, "", "")
        stock = stock_boot(b, base, site, runs)
        settled: list = []
        boots: list = []
        times, n, gz, rt = link_first_visit(b, base, PYTHON_LINK, served, runs, settled, boots)
        report("deep link needing Python, first visit: transferred", gz / 1e6, 10, "MB gzip", f"{n} requests, {rt} runtime")
        report("deep link needing Python, first visit: right command (median)", med(times), 1.5, "s",
               f"stock Pyodide cold boot to a first runPython, same server and run: median {med(stock):.2f} s; "
               f"its controls too: median {med(settled):.2f} s; the worker's boot, medians from its start: "
               + ", ".join(f"{k} {med([t[k] for t in boots if k in t]):.0f}" for k in ("fetched", "restored", "ready")
                           if any(k in t for t in boots)) + " ms"
               + (f"; it started {med([t['boot_at'] for t in boots if 'boot_at' in t]):.0f} ms after navigation "
                  f"(its thread at {med([t['worker_at'] for t in boots if 'worker_at' in t]):.0f})"
                  if any("boot_at" in t for t in boots) else ""))
        report("deep link needing Python ÷ stock Pyodide cold boot", med(times) / med(stock), 0.3, "×")
        times, n, gz, rt = link_first_visit(b, base, PRERENDERED_LINK, served, runs)
        report("deep link rendered ahead, first visit: transferred", gz / 1e6, 10, "MB gzip", f"{n} requests, {rt} runtime")
        report("deep link rendered ahead: right command (median)", med(times), 1.5, "s")
        parts: dict = {}
        clicks, controls = click_times(b, base, 60, 0.0, parts)
        report("60 random clicks back to back: click → plan p95", pct(clicks, .95), 50, "ms", f"p50 {pct(clicks, .5):.0f} ms; "
               "p95 of its parts: " + ", ".join(f"{k} {pct(v, .95):.0f}" for k, v in parts.items()) + " ms")
        report("60 random clicks back to back: click → controls settled p95", pct(controls, .95), 120, "ms",
               f"p50 {pct(controls, .5):.0f} ms")
        first = first_interaction(b, base, runs)
        report("first interaction on a bare page → its plan (median)", med(first) / 1000, 1.5, "s",
               f"max {max(first) / 1000:.2f} s")
        if extended:
            for fallback in (False, True):
                cold, warm, modes = deep_link_times(b, base, max(1, runs // 2), fallback)
                what = "fallback (snapshot blocked, cold boot)" if fallback else "snapshot"
                print(f"browser, deep link → its command, {what} [{modes}], {len(DEEP_LINKS)} links: "
                      f"cold median {med(cold):.2f} s (p95 {pct(cold, .95):.2f}), warm median {med(warm):.2f} s (p95 {pct(warm, .95):.2f})")
            clicks, controls = click_times(b, base, 60, 1.0)
            print(f"browser, click → plan on screen (60 random clicks, 1 s between clicks): p50 {pct(clicks, .5):.0f} ms, "
                  f"p95 {pct(clicks, .95):.0f} ms; → controls too: p50 {pct(controls, .5):.0f} ms, p95 {pct(controls, .95):.0f} ms")
            second = second_page_time(b, base, runs)
            print(f"browser, second recipe page in the same tab: median {med(second):.2f} s")
        b.close()
    httpd.shutdown()


def runtime_bytes(site: Path) -> None:
    """What the runtime files weigh raw, gzip and Brotli (the build's pre-compressed copies)."""
    for f in sorted((site / "runtime").rglob("*")):
        if f.is_file() and f.suffix not in (".gz", ".br"):
            gz = f.with_name(f.name + ".gz")
            br = f.with_name(f.name + ".br")
            print(f"  {f.relative_to(site)}: {f.stat().st_size:,} raw"
                  + (f", {gz.stat().st_size:,} gzip" if gz.exists() else "")
                  + (f", {br.stat().st_size:,} br" if br.exists() else ""))


def rss_mb() -> float:
    """Resident set size of this process in MB (Linux ``/proc/self/status``
    VmRSS; elsewhere the peak from ``resource``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def soak(checkpoints: tuple[int, ...] = (1000, 10000), seed: int = 23) -> list[tuple[int, float, float, float, int]]:
    """Compose ``max(checkpoints)`` page plans in one process as random click
    walks (Kimi K3 and the public corpus; a walk restarts on another recipe
    every 25 clicks; a fifth of the clicks carry a never-seen value, e.g.
    ``nodes=<n>`` or an unknown hardware id, so every cache keeps meeting new
    keys). Returns ``(plans, RSS MB, p99 ms, worst ms, Python objects the
    collector tracks after a collection)`` at each checkpoint: with every cache
    bounded (``composer.cache``), both stay flat after warm-up (RSS alone
    rarely shrinks: the objects show what is held; Pyodide has no
    ``sys.getallocatedblocks``, so both runtimes count objects).
    The process keeps at most as many recipe contexts alive as the browser's
    worker does (``MODULE_BOUNDS["api.context_from_json"]``, least recently used
    evicted): a context holds its caches, so 157 contexts kept forever would
    measure the soak's own dictionary, not the composer's bounds."""
    from composer.api import compose_page
    from composer.cache import MODULE_BOUNDS, BoundedCache

    rng = random.Random(seed)
    recipes = [(ROOT / "recipes", "moonshotai/Kimi-K3")]
    if CORPUS.exists():
        recipes += [(CORPUS, f"{p.parent.name}/{p.stem}") for p in sorted((CORPUS / "models").glob("*/*.yaml"))]
    catalogs: dict = {}
    contexts = BoundedCache(MODULE_BOUNDS["api.context_from_json"])

    def ctx_of(root: Path, rid: str):
        def make():
            try:
                cat = catalogs.setdefault(root, load_catalog(root))
                return make_context(rid, load_recipe(root, rid), cat)
            except Exception:  # a corpus recipe our checks refuse: not part of the soak
                return None
        return contexts.get((str(root), rid), make)

    out, times, query, ctx = [], [], "", None
    for i in range(1, max(checkpoints) + 1):
        if ctx is None or i % 25 == 1:
            root, rid = recipes[0] if rng.random() < 0.3 else rng.choice(recipes)
            ctx, query = ctx_of(root, rid), ""
            if ctx is None:
                ctx = ctx_of(*recipes[0])
        if rng.random() < 0.2:
            query = rng.choice([f"nodes={rng.randint(1, 64)}", f"hardware=hw{rng.randint(0, 10 ** 9)}",
                                f"instances={rng.randint(1, 9)}&strategy=s{rng.randint(0, 10 ** 6)}"])
        t = time.perf_counter()
        page = compose_page(ctx, query)
        times.append(time.perf_counter() - t)
        opts = [o["query"] for items in page["options"].values() for o in items if not o.get("disabled")]
        query = rng.choice(opts) if opts else ""
        if i in checkpoints:
            ordered = sorted(times)
            gc.collect()
            out.append((i, rss_mb(), ordered[int(0.99 * (len(ordered) - 1))] * 1000, ordered[-1] * 1000,
                        len(gc.get_objects())))
    return out


def pyodide_soak(checkpoints: tuple[int, ...], seed: int = 23) -> list[tuple[int, int, float, float, int]]:
    """The soak inside Pyodide: the build's memory snapshot restored in Node as
    the page's worker restores it (``tests/pyodide_soak.mjs``), page plans
    composed from the build's JSON documents (Kimi K3 and the corpus). Returns
    ``(plans, WebAssembly heap bytes, p99 ms, worst ms, Python objects tracked
    after a collection)`` per checkpoint (the heap only grows: it is the
    high-water mark; the objects say what is held now); ``[]`` without Node."""
    import json
    import subprocess

    from composer.buildtime.loader import recipe_paths
    from composer.buildtime.validate import dump

    if shutil.which("node") is None or not (build.PYODIDE_DIR / "pyodide.mjs").exists():
        print("soak, Pyodide heap: not measured (needs node and npm's pyodide)")
        return []
    docs = []
    for root in (ROOT / "recipes", CORPUS):
        if not root.exists():
            continue
        catalog = load_catalog(root)
        catalog_text = json.dumps(dump(catalog), separators=(",", ":"))
        ids = ["moonshotai/Kimi-K3"] if root == ROOT / "recipes" else list(recipe_paths(root))
        for rid in ids:
            try:
                recipe = load_recipe(root, rid)
            except Exception:  # refused by the checks: not on the site
                continue
            docs.append({"recipe": json.dumps({"id": rid, "recipe": dump(recipe)}, separators=(",", ":")),
                         "catalog": catalog_text})
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "snapshot.bin"
        full = build.make_snapshot(build.site_python_zip())
        snap.write_bytes(build.packed_snapshot(full))  # as the page fetches it (tests/pyodide_restore.mjs)
        pyodide, patch = build.snapshot_runtime_dir(Path(tmp), full)
        payload = {"pyodide": str(pyodide), "snapshot": str(snap), "patch": str(patch), "docs": docs,
                   "checkpoints": list(checkpoints), "seed": seed}
        res = subprocess.run(["node", str(ROOT / "tests" / "pyodide_soak.mjs")], input=json.dumps(payload),
                             capture_output=True, text=True, timeout=24 * 3600)
    if res.returncode != 0:
        print("soak, Pyodide heap: failed: " + "\n".join(ln for ln in res.stderr.splitlines() if len(ln) < 500)[-1500:])
        return []
    return [(r["plans"], r["heap_bytes"], r["p99_ms"], r["worst_ms"], r["py_blocks"]) for r in json.loads(res.stdout)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plans", type=int, default=500)
    ap.add_argument("--launch-plans", type=int, default=1000, help="sampled corpus plans for the launch-rule share")
    ap.add_argument("--browser", action="store_true", help="also measure the page in headless Chromium")
    ap.add_argument("--browser-runs", type=int, default=5, help="runs per deep link and path (medians are printed)")
    ap.add_argument("--site", type=Path, default=None,
                    help="measure this already built site in the browser only (e.g. one built from another commit)")
    ap.add_argument("--brief", action="store_true", help="only the issue-22 browser figures")
    ap.add_argument("--soak", type=int, nargs="*", default=[1000, 10000],
                    help="plans composed in one process; RSS is printed after each count (default 1000 10000)")
    ap.add_argument("--soak-only", action="store_true", help="only the soak figures")
    args = ap.parse_args()  # every option is declared above: a merge once left --soak after this line
    if args.site is not None:
        with tempfile.TemporaryDirectory() as tmp:  # a copy: the stock page is added to it
            site = Path(tmp) / "site"
            shutil.copytree(args.site, site, symlinks=True)
            runtime_bytes(site)
            browser_figures(site, args.browser_runs, extended=not args.brief)
        return
    if args.soak:
        print(f"soak start: RSS {rss_mb():.0f} MB (CPython)")
        for n, rss, p99, worst, blocks in soak(tuple(args.soak)):
            print(f"soak, {n:,} page plans of random click walks (Kimi K3 + corpus, 1/5 never-seen values): "
                  f"RSS {rss:.0f} MB, {blocks:,} live Python objects, p99 {p99:.0f} ms, worst {worst:.0f} ms (CPython)")
        for n, heap, p99, worst, blocks in pyodide_soak(tuple(args.soak)):
            print(f"soak, {n:,} page plans in Pyodide (the build's snapshot restored in Node, same walks): "
                  f"WebAssembly heap {heap / 2 ** 20:.0f} MB (high-water mark), {blocks:,} live Python objects, "
                  f"p99 {p99:.0f} ms, worst {worst:.0f} ms")
    if args.soak_only:
        return
    if CORPUS.exists():
        print(f"build, public corpus ({len(list((CORPUS / 'models').glob('*/*.yaml')))} recipes): {timed_build(CORPUS, args.runs):.2f} s (best of {args.runs})")
    print(f"build, our recipes/ ({len(list((ROOT / 'recipes/models').glob('*/*.yaml')))} recipes): {timed_build(ROOT / 'recipes', args.runs):.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"build, one recipe (Kimi K3): {timed_build(one_recipe_dir(Path(tmp)), args.runs):.2f} s")
    times = sorted(compose_times(args.plans))
    print(f"compose one plan (Kimi K3, {args.plans} random selections, CPython): median {statistics.median(times) * 1000:.1f} ms, "
          f"p95 {times[int(0.95 * len(times))] * 1000:.1f} ms")
    ctl = sorted(controls_times(min(args.plans, 200)))
    print(f"page controls of one plan (Kimi K3, {len(ctl)} random selections, CPython, composer.render.controls_json): "
          f"median {statistics.median(ctl) * 1000:.1f} ms, p95 {ctl[int(0.95 * len(ctl))] * 1000:.1f} ms")

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
        total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and f.suffix not in (".gz", ".br"))
        print(f"site size (our recipes/): {total:,} bytes (without the .gz/.br copies)")
        runtime_bytes(site)
        if args.browser:
            browser_figures(site, args.browser_runs, extended=not args.brief)


if __name__ == "__main__":
    main()
