"""The queries that state a selection.

* ``canonical_request``: the smallest query that resolves to a selection
  (parameters equal to what the recipe would choose anyway are dropped). It
  keys caches and says which controls differ from the recipe default.
* ``pinned_request``: what the address bar and Share write (``v=2``): every
  dimension stated, so a bookmark opens the same plan after the recipe's
  defaults change (issue 12.5: a link that omitted ``hardware`` opened another
  GPU once ``default_hardware`` changed).
"""

from __future__ import annotations

from composer.context import RecipeContext
from composer.modes import default_mode, format_fmode
from composer.query import SCHEMA_VERSION, Request, parse_query
from composer.dimensions import DEFAULT_CONTEXT, DROP_ORDER, POOLS, Selection
from composer.resolve import resolve


def selection_values(ctx: RecipeContext, sel: Selection) -> dict[str, str]:
    """Every query parameter that states ``sel`` explicitly (feature modes:
    those that differ from the default mode on ``sel``'s hardware)."""
    vals = {"hardware": sel.hardware, "variant": sel.variant, "strategy": sel.strategy,
            "features": ",".join(sel.features), "advanced": ",".join(sel.advanced),
            "kv_offload": sel.kv_offload or "off", "install": sel.form}
    if sel.task is not None:
        vals["task"] = sel.task
    chosen = [(f, m) for f, m in sel.modes if m != default_mode(ctx, f, sel.hardware, sel.variant)]
    if chosen:
        vals["fmode"] = format_fmode(tuple(chosen))
    vals["instances"] = str(sel.instances)  # dropped below when it is what the recipe picks
    if sel.cuda is not None:
        vals["cuda"] = sel.cuda
    vals["context"] = sel.context
    if sel.prefill:
        for name in POOLS:
            p = sel.pool(name)
            assert p is not None  # a P/D selection has both pools
            vals[f"{name}_mode"] = p.mode
            vals[f"{name}_nodes"] = str(p.nodes)
    else:
        vals["nodes"] = str(sel.nodes)
    return vals


def pinned_request(ctx: RecipeContext, sel: Selection) -> Request:
    """Every dimension of ``sel`` stated (``v=2``): hardware, variant, nodes or
    the P/D pools, strategy, features (``features=`` for none), the mode of
    every enabled moded feature, install, and task or instances where they
    apply. Advanced knobs and KV offload are written when set: their default
    (none, off) is not recipe data. Resolving the result gives ``sel`` again."""
    vals = selection_values(ctx, sel)
    modes = [(f, m) for f, m in sel.modes if f in sel.features]
    vals.pop("fmode", None)
    if modes:
        vals["fmode"] = format_fmode(tuple(modes))
    if sel.variant == "default":  # the key names the recipe's default variant for good
        vals.pop("variant")
    if not sel.advanced:
        vals.pop("advanced")
    if not sel.kv_offload:
        vals.pop("kv_offload")
    if sel.context == DEFAULT_CONTEXT:
        vals.pop("context")
    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    if store is None or store.deploy_type != "kv_store_lb" or sel.prefill:
        vals.pop("instances")
    vals["v"] = SCHEMA_VERSION
    return parse_query(vals)


def resolved_selection(ctx: RecipeContext, values: dict[str, str]) -> Selection:
    """The Selection ``values`` resolve to (cached: canonical URLs and page
    options try the same small dicts again and again)."""
    return resolved_with_notices(ctx, values)[0]


def raise_reason(notices, asked: int, got: int) -> str:
    """Why a node count would not be kept, for a disabled option's tooltip:
    that count's own problem from the resolver's nodes-raised/-lowered notice
    (``Notice.per_count``; a fresh user found the 1-node option quoting the 2-
    and 3-node reasons too), never "becomes" (the option is disabled; issue 21)."""
    for n in notices:
        if n.code in ("nodes-raised", "nodes-lowered"):
            own = dict(n.per_count).get(asked)
            if own:
                return own
    return f"{asked} node(s) cannot run this deployment; it needs {got}."


def resolved_with_notices(ctx: RecipeContext, values: dict[str, str]):
    """``resolve`` of a parameter dict: ``(Selection, [Notice])``, cached on the context."""
    def make():
        sel, notices = resolve(ctx, parse_query(values))
        return sel, notices.items()

    return ctx.cache("resolve").get(tuple(sorted(values.items())), make)


def canonical_request(ctx: RecipeContext, sel: Selection) -> Request:
    """The smallest request that resolves to ``sel``: parameters equal to what the
    recipe would choose anyway are omitted (a link with no parameters is the
    recipe default), and ``v`` is set when any parameter remains. Cached per
    selection (region ``canonical``): the plan and the page's controls ask it."""
    return ctx.cache("canonical").get(sel, lambda: _canonical(ctx, sel))


def _canonical(ctx: RecipeContext, sel: Selection) -> Request:
    from dataclasses import replace

    from composer.resolve import before_shape

    vals = selection_values(ctx, sel)
    unshaped = replace(sel, nodes=1, prefill=None, decode=None)
    for key in DROP_ORDER:
        if key not in vals:
            continue
        trial = {k: v for k, v in vals.items() if k != key}
        # A trial that differs before the shape differs after it: no node search for it (most drops).
        if before_shape(ctx, parse_query(trial)) == unshaped and resolved_selection(ctx, trial) == sel:
            vals = trial
    if vals:
        vals["v"] = SCHEMA_VERSION
    return parse_query(vals)
