"""Every memo of a recipe context is one bounded cache region
(``composer.cache``): a long session never holds more than the bounds say."""

from __future__ import annotations

import random

import pytest

from composer.api import compose_page
from composer.cache import BOUNDS, BoundedCache


def test_a_bounded_cache_evicts_the_least_recently_used():
    c = BoundedCache(2)
    assert c.get("a", lambda: 1) == 1 and c.get("b", lambda: 2) == 2
    assert c.get("a", lambda: 9) == 1  # a is now the most recent
    c.get("c", lambda: 3)
    assert len(c) == 2 and c.peek("b") is None and c.peek("a") == 1
    with pytest.raises(ValueError):
        BoundedCache(0)


def test_an_undeclared_region_is_refused(k3):
    with pytest.raises(KeyError):
        k3.cache("nobody-declared-me")


def test_regions_stay_within_their_bounds_over_a_click_walk(k3, monkeypatch):
    monkeypatch.setitem(BOUNDS, "resolve", 50)
    monkeypatch.setitem(BOUNDS, "memo", 20)
    k3._caches.clear()
    rng = random.Random(23)
    query = ""
    for _ in range(30):
        page = compose_page(k3, query)
        opts = [o["query"] for items in page["options"].values() for o in items if not o["disabled"]]
        query = rng.choice(opts)
    sizes = {name: len(c) for name, c in k3._caches.items()}
    assert sizes["resolve"] == 50
    for name, c in k3._caches.items():
        assert len(c) <= BOUNDS[name.split(":", 1)[0]], name
    k3._caches.clear()


def _composer_modules():
    import importlib
    import pkgutil

    import composer

    for info in pkgutil.walk_packages(composer.__path__, "composer."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def test_every_process_wide_memo_has_its_stated_bound():
    """Issue 23.4: every ``functools.lru_cache`` of the composer is listed in
    ``MODULE_BOUNDS`` with the bound it has; none is unbounded."""
    from composer.cache import MODULE_BOUNDS

    found = {}
    for mod in _composer_modules():
        for name, obj in vars(mod).items():
            info = getattr(obj, "cache_info", None)
            if callable(info) and getattr(obj, "__module__", None) == mod.__name__:
                found[f"{mod.__name__.removeprefix('composer.')}.{name}"] = info().maxsize
    assert found, "no memo found: the walk is broken"
    for key, maxsize in found.items():
        assert maxsize is not None, f"{key} is unbounded"
        assert MODULE_BOUNDS.get(key) == maxsize, f"{key}: bound {maxsize} not stated in MODULE_BOUNDS"


def test_the_renderer_caches_at_most_its_stated_templates():
    from jinja2 import DictLoader

    from composer.cache import MODULE_BOUNDS
    from composer.render import environment

    assert environment(DictLoader({})).cache.capacity == MODULE_BOUNDS["jinja-templates"]


def test_a_context_memoizes_only_through_its_bounded_regions(k3):
    """No memo left in the context's ``__dict__`` (``resolve.memory_flags``
    and ``layers.owned_units`` cached there, unbounded, before issue 23)."""
    rng = random.Random(5)
    query = ""
    before = set(vars(k3))
    for _ in range(15):
        page = compose_page(k3, query)
        opts = [o["query"] for items in page["options"].values() for o in items if not o["disabled"]]
        query = rng.choice(opts)
    # A ``functools.cached_property`` holds one value of the recipe (bounded by construction) and appears
    # whenever a page first reads it (which one depends on the tests this worker ran before): not a memo.
    import functools
    once = {n for n in dir(type(k3)) if isinstance(getattr(type(k3), n, None), functools.cached_property)}
    assert set(vars(k3)) - once == before - once
    assert {"memory-flags", "owned-units"} <= {name.split(":", 1)[0] for name in k3._caches}


def test_make_bench_accepts_its_soak_options():
    # Found 2026-12-02: a merge left bench.py's --soak options after parse_args, so `make bench`
    # refused them and the soak figures of issue 23 were never printed.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    res = subprocess.run([sys.executable, "bench.py", "--help"], cwd=root, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "--soak-only" in res.stdout and "--soak " in res.stdout.replace("[", " ")
