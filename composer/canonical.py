"""Canonical URLs: the smallest query that resolves to a selection.

Parameters equal to what the recipe would choose anyway are dropped, so a link
with no parameters is the recipe default and a shared link keeps only what the
person chose (issue: "Share … defaults omitted, a v= schema version").
"""

from __future__ import annotations

from composer.context import RecipeContext
from composer.query import SCHEMA_VERSION, Request, parse_query
from composer.resolve import POOLS, Selection, resolve


def selection_values(sel: Selection) -> dict[str, str]:
    """Every query parameter that states ``sel`` explicitly."""
    vals = {"hardware": sel.hardware, "variant": sel.variant, "strategy": sel.strategy,
            "features": ",".join(sel.features), "advanced": ",".join(sel.advanced),
            "kv_offload": sel.kv_offload or "off", "install": sel.install}
    if sel.task is not None:
        vals["task"] = sel.task
    vals["instances"] = str(sel.instances)  # dropped below when it is what the recipe picks
    if sel.cuda is not None:
        vals["cuda"] = sel.cuda
    if sel.prefill:
        for name in POOLS:
            p = sel.pool(name)
            vals[f"{name}_mode"] = p.mode
            vals[f"{name}_nodes"] = str(p.nodes)
    else:
        vals["nodes"] = str(sel.nodes)
    return vals


DROP_ORDER = ("instances", "nodes", "prefill_nodes", "decode_nodes", "strategy", "prefill_mode", "decode_mode",
              "features", "advanced", "kv_offload", "install", "cuda", "task", "variant", "hardware")


def resolved_selection(ctx: RecipeContext, values: dict[str, str]) -> Selection:
    """The Selection ``values`` resolve to (cached: canonical URLs and page
    options try the same small dicts again and again)."""
    return resolved_with_notices(ctx, values)[0]


def raise_reason(notices, asked: int, got: int) -> str:
    """Why a node count would not be kept, for a disabled option's tooltip (the
    ``reason`` of the resolver's nodes-raised/-lowered notice)."""
    for n in notices:
        if n.code in ("nodes-raised", "nodes-lowered") and n.reason:
            return f"Becomes {got}: {n.reason}"
    return f"{asked} node(s) cannot run this deployment; it needs {got}."


def resolved_with_notices(ctx: RecipeContext, values: dict[str, str]):
    """``resolve`` of a parameter dict: ``(Selection, [Notice])``, cached on the context."""
    cache = ctx.__dict__.setdefault("_resolve_cache", {})
    key = tuple(sorted(values.items()))
    if key not in cache:
        if len(cache) > 4096:
            cache.clear()
        sel, notices = resolve(ctx, parse_query(values))
        cache[key] = (sel, notices.items())
    return cache[key]


def canonical_request(ctx: RecipeContext, sel: Selection) -> Request:
    """The smallest request that resolves to ``sel``: parameters equal to what the
    recipe would choose anyway are omitted (a link with no parameters is the
    recipe default), and ``v`` is set when any parameter remains."""
    vals = selection_values(sel)
    for key in DROP_ORDER:
        if key not in vals:
            continue
        trial = {k: v for k, v in vals.items() if k != key}
        if resolved_selection(ctx, trial) == sel:
            vals = trial
    if vals:
        vals["v"] = SCHEMA_VERSION
    return parse_query(vals)
