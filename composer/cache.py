"""The composer's memo caches: one kind, each with a stated bound.

A recipe's context (``RecipeContext.cache``) keeps its derived answers in
named regions; every region is a ``BoundedCache`` whose bound is declared in
``BOUNDS``, so a page that stays open for hours (an embed composes on every
click) or a process composing thousands of plans holds at most that many
entries per region and recipe. Eviction is least-recently-used.
"""

from __future__ import annotations

from typing import Callable, Hashable, TypeVar

V = TypeVar("V")

BOUNDS: dict[str, int] = {
    "resolve": 4096,        # query parameters → (Selection, notices): canonical links and options retry small dicts
    "shape": 1024,          # (selection without its shape, nodes and pool parameters asked) → (shape, notices)
    "canonical": 1024,      # Selection → its canonical Request (every plan and page asks it)
    "plan-error": 1024,     # query parameters → the plan's first error (composer.plan.plan_error), for the controls
    "memory-flags": 1024,   # selection without node counts → (utilization, KV dtype, max-model-len)
    "capacity": 2048,       # (layout, hardware, variant, task, memory flags, context) → the memory model's Capacity
    "owned-units": 256,     # feature id → the flag settings it owns
    "page-selection": 128,  # query → (Selection, canonical Request) of the worker's last plans, for its controls
    "memo": 2048,           # per RecipeContext method: arguments → answer
    "model-derived": 256,   # per ModelFacts value: (what, TP, PP, KV dtype, block) → KV geometry
}
"""Entries per region and recipe context."""

MODULE_BOUNDS: dict[str, int] = {
    "argv._parse_cached": 4096,     # an arg list (tuple of tokens) → its units: recipe lists and their combinations
    "vllm_cli.canonical": 4096,     # a flag spelling → (vLLM option, sense): recipe and Advanced flags
    "vllm_cli._checked_unit": 4096, # (option, value, switched on, omni) → its findings: the flags of composed commands
    "api.context_from_json": 8,     # (recipe JSON, catalogue JSON) → RecipeContext: the recipes a worker shows
    "convert._fields": 128,         # a schema dataclass → its fields (composer.schema has ~40 classes)
    "jinja-templates": 64,          # compiled Jinja2 templates of the renderer (site_src has < 20)
    "keypaths._joined": 4096,       # (key pattern parts, hole values) → key path text: the layers' paths
    "memory.group_layout": 1024,    # (full, sliding, linear) layer counts → vLLM's KV cache groups
    "shell.quote": 8192,            # a word of a command → its shell quoting: flags and values repeat on every node
}
"""Process-wide memos (``functools.lru_cache`` and the renderer's template
cache) and their bounds; each ``RecipeContext`` also holds at most ``BOUNDS``
per region, and at most ``MODULE_BOUNDS["api.context_from_json"]`` contexts
live through the browser's memo (``tests/test_cache.py`` checks that every
``lru_cache`` of the composer is listed here with its bound)."""


class BoundedCache:
    """A mapping of at most ``bound`` entries, least recently used evicted
    first. ``get(key, make)`` returns the cached value or stores ``make()``."""

    __slots__ = ("bound", "_data")

    def __init__(self, bound: int) -> None:
        if bound < 1:
            raise ValueError(f"a cache bound must be at least 1, not {bound}")
        self.bound = bound
        self._data: dict = {}

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        data = self._data
        if key in data:
            value = data.pop(key)
            data[key] = value  # most recently used last
            return value
        value = make()
        if len(data) >= self.bound:
            del data[next(iter(data))]
        data[key] = value
        return value

    def peek(self, key: Hashable, default=None):
        """The cached value of ``key`` without storing anything, or ``default``."""
        return self._data.get(key, default)

    def put(self, key: Hashable, value) -> None:
        self.get(key, lambda: value)

    def __len__(self) -> int:
        return len(self._data)
