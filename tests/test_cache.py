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
