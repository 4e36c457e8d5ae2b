"""The page's controls: every option of every group with its state (selected,
disabled and why, default, changed), what a click on it would also switch, and
the query it produces. The page renders these; it decides nothing itself.
"""

from __future__ import annotations

from composer import run_forms as run
from composer.canonical import raise_reason, resolved_selection, resolved_with_notices
from composer.context import MAX_NODES, RecipeContext
from composer.help import GROUPS
from composer.modes import default_mode, format_fmode, mode_block_reason, mode_label, moded_features, parse_fmode
from composer.outputs import Option
from composer.query import SCHEMA_VERSION, Request, parse_query
from composer.resolve import POOLS, Selection, feature_label, pd_modes


def build_options(ctx: RecipeContext, sel: Selection, canon: Request) -> dict[str, tuple[Option, ...]]:
    """Every control of the page (query parameter → its options in order) with
    each option's state: selected, disabled (and why), default, changed, what
    else a click switches, and the query a click produces."""
    base = canon.with_values(v=SCHEMA_VERSION)
    pd_keys = dict(prefill_mode=None, prefill_nodes=None, decode_mode=None, decode_nodes=None)
    hwp = ctx.hw(sel.hardware)
    opts: dict[str, list[dict]] = {}

    opts["hardware"] = []
    for h in ctx.listed_hardware:
        p = ctx.hw(h)
        reason = ctx.hardware_block_reason(h, sel.variant)
        query = _hardware_query(ctx, sel, base, h)
        # A GPU the selected checkpoint cannot use is still offered when another
        # variant runs there: the click switches the variant (said in effects).
        other = ctx.variant_for(h) if reason else None
        if other is not None:
            reason = None
            query = query.with_values(variant=None if other == "default" else other, strategy=None, **pd_keys)
        if reason is None and h != sel.hardware:
            query, reason = _working(query, ctx, dict(strategy=None, nodes=None, **pd_keys))
        opts["hardware"].append({
            "id": h, "label": p.display_name, "group": p.brand, "gpus": p.gpu_count,
            "gb_per_node": p.vram_gb, "gb_per_gpu": round(p.gb_per_gpu), "verified": ctx.is_verified(h),
            "description": p.description, "selected": h == sel.hardware, "disabled": reason is not None,
            "reason": reason, "query": query.query(),
        })
    opts["variant"] = []
    for v in ctx.recipe.variants:
        # The GPU in use stays when the checkpoint runs there (stated: the
        # recipe's default GPU for this checkpoint may be another one).
        query = base.with_values(variant=v, strategy=None, nodes=None, **pd_keys,
                                 hardware=None if ctx.hardware_block_reason(sel.hardware, v) else sel.hardware)
        reason = None
        if v != sel.variant:
            query, reason = _working(query, ctx, dict(hardware=None))
        opts["variant"].append({
            "id": v, "label": ctx.variant_label(v), "description": ctx.variant(v).description,
            "weights_gb": ctx.weights_gb(v), "selected": v == sel.variant, "disabled": reason is not None,
            "reason": reason, "query": query.query(),
        })

    deploy = ctx.strategy(sel.strategy).deploy_type
    weights = ctx.weights_gb(sel.variant)
    single_ok = any(ctx.strategy(s).deploy_type == "single_node" and ctx.strategy_block_reason(s, sel.hardware) is None
                    for s in ctx.strategies)
    multi_ok = hwp.scalable and any(ctx.strategy(s).deploy_type == "multi_node" and ctx.strategy_block_reason(s, sel.hardware) is None
                                    for s in ctx.strategies)
    opts["nodes"] = []
    for k in range(1, MAX_NODES + 1 if deploy != "pd_cluster" else 1):  # P/D: the pools have their own
        keep = deploy == "multi_node" and k > 1
        query = base.with_values(nodes=k, strategy=sel.strategy if keep else None, **pd_keys)
        reason = None
        if deploy == "pd_cluster":
            reason = "P/D disaggregation sizes its prefill and decode pools below."
        elif k == 1 and not single_ok:
            reason = "No single-node strategy is offered here."
        elif k > 1 and not multi_ok:
            reason = f"No multi-node strategy is offered on {hwp.display_name}."
        else:
            got, why = resolved_with_notices(ctx, dict(query.values))
            if got.nodes != k:
                reason = raise_reason(why, k, got.nodes)
            elif any(n.level == "error" for n in why):
                reason = next(n.message for n in why if n.level == "error")
        opts["nodes"].append({
            "id": str(k), "label": str(k), "selected": deploy != "pd_cluster" and k == sel.nodes,
            "disabled": reason is not None, "reason": reason, "query": query.query(),
        })

    opts["strategy"] = []
    for s in ctx.strategies:
        st = ctx.strategy(s)
        reason = ctx.strategy_block_reason(s, sel.hardware)
        if reason is None and st.deploy_type == "single_node" and weights and not ctx.fits_one_node(sel.hardware, sel.variant):
            reason = f"One {hwp.display_name} node cannot hold {weights:g} GB of weights."
        if reason is None and ctx.floor_nodes(s, sel.hardware) > MAX_NODES:
            reason = f"Needs more than {MAX_NODES} nodes of {hwp.display_name}."
        same_kind = st.deploy_type == deploy
        query = base.with_values(strategy=s, nodes=(None if not same_kind or st.deploy_type != "multi_node" else base.get("nodes")),
                                 **(pd_keys if s != "pd_cluster" else {}))
        if reason is None:
            # A strategy that no node count makes work (e.g. TP+DP where one node
            # cannot hold a replica) is disabled with the composer's reason.
            _, why = resolved_with_notices(ctx, dict(query.values))
            errors = [n.message for n in why if n.level == "error"]
            if errors:
                reason = errors[0]
        floor = ctx.floor_gpus(s, sel.hardware)
        desc = st.description + (f" Needs at least {floor} GPUs ({ctx.floor_nodes(s, sel.hardware)} × {hwp.display_name})." if floor else "")
        opts["strategy"].append({
            "id": s, "label": ctx.strategy_label(s), "description": desc,
            "verified": ctx.is_verified(sel.hardware) and any(
                c.hardware == sel.hardware and c.strategy == s for c in ctx.recipe.meta.verified_configs),
            "deploy_type": st.deploy_type, "min_gpus": ctx.floor_gpus(s, sel.hardware),
            "selected": s == sel.strategy, "disabled": reason is not None, "reason": reason,
            "query": query.query(),
        })

    if deploy == "pd_cluster":
        modes = pd_modes(ctx, sel.hardware)
        for name in POOLS:
            pool = sel.pool(name)
            assert pool is not None  # a P/D selection has both pools
            opts[f"{name}_mode"] = [{
                "id": m, "label": m.upper(), "selected": m == pool.mode, "disabled": False, "reason": None,
                "query": base.with_values(**{f"{name}_mode": m}).query(),
            } for m in modes]
            opts[f"{name}_nodes"] = []
            for k in range(1, MAX_NODES + 1):
                query = base.with_values(**{f"{name}_nodes": k})
                got, why = resolved_with_notices(ctx, dict(query.values))
                got_k = got.pool(name).nodes if got.pool(name) else k
                reason = raise_reason(why, k, got_k) if got_k != k else None
                if reason is None and any(n.level == "error" for n in why):
                    reason = next(n.message for n in why if n.level == "error")
                opts[f"{name}_nodes"].append({
                    "id": str(k), "label": str(k), "selected": k == pool.nodes, "disabled": reason is not None,
                    "reason": reason, "query": query.query(),
                })

    opts["features"] = []
    for f, spec in ctx.recipe.features.items():
        on = f in sel.features
        excl = ctx.exclusive_with(f)
        new = tuple(x for x in sel.features if x != f) if on else tuple(x for x in sel.features if x not in excl) + (f,)
        desc = spec.description + (f" Turning it on turns off {', '.join(feature_label(ctx, x) for x in excl)}." if excl else "")
        reason = ctx.feature_block_reason(f, sel.strategy)
        query = base.with_values(features=list(new))
        if reason is not None and not on:
            # Offered with a strategy it runs with, when one works here (issue 12.6).
            alt = _with_strategy(ctx, sel, base, lambda s, f=f: ctx.feature_block_reason(f, s) is None,
                                 features=list(new))
            if alt is not None:
                reason, query = None, alt
        if reason is not None and on:
            # On but not emitted with this strategy: it can still be turned off.
            desc, reason = f"Not emitted: {reason} {desc}".strip(), None
        opts["features"].append({
            "id": f, "label": feature_label(ctx, f), "description": desc, "selected": on,
            "disabled": reason is not None, "reason": reason, "query": query.query(),
        })
    for fid in moded_features(ctx):
        # A method row for an enabled feature with a choice (semantics §7.2).
        fmodes = ctx.recipe.features[fid].modes or {}
        if len(fmodes) < 2 or fid not in sel.features:
            continue
        picked = parse_fmode(base.get("fmode"))[0]
        items = []
        for m, mspec in fmodes.items():
            chosen = {**picked, fid: m}
            if m == default_mode(ctx, fid, sel.hardware, sel.variant):
                del chosen[fid]
            reason = mode_block_reason(ctx, fid, m, sel.hardware, sel.variant)
            query = base.with_values(fmode=format_fmode(chosen) or None)
            # A mode another checkpoint offers here is offered too: the click
            # switches the variant (the same rule as for hardware).
            other = next((v for v in ctx.recipe.variants if v != sel.variant
                          and ctx.hardware_block_reason(sel.hardware, v) is None
                          and mode_block_reason(ctx, fid, m, sel.hardware, v) is None), None) if reason else None
            if other is not None:
                reason = None
                query = base.with_values(fmode=format_fmode({**picked, fid: m}), hardware=sel.hardware,
                                         variant=None if other == "default" else other, strategy=None, nodes=None, **pd_keys)
            items.append({
                "id": m, "label": mode_label(ctx, fid, m), "description": mspec.description,
                "selected": m == sel.mode(fid), "disabled": reason is not None, "reason": reason,
                "query": query.query(),
            })
        opts[f"fmode.{fid}"] = items
    opts["advanced"] = []
    for k in ctx.advanced_knobs(sel.strategy):
        on = k.id in sel.advanced
        new = tuple(x for x in sel.advanced if x != k.id) if on else sel.advanced + (k.id,)
        opts["advanced"].append({
            "id": k.id, "label": k.label, "description": k.description, "selected": on,
            "disabled": False, "reason": None, "query": base.with_values(advanced=list(new) or None).query(),
        })
    opts["kv_offload"] = [{"id": "off", "label": "Off", "description": "KV cache stays in GPU HBM.",
                           "selected": not sel.kv_offload, "disabled": False, "reason": None,
                           "query": base.with_values(kv_offload=None).query()}]
    for kid in ctx.kv_options():
        reason = ctx.kv_block_reason(kid, sel.strategy, sel.hardware)
        query = base.with_values(kv_offload=kid)
        if reason is not None:
            alt = _with_strategy(ctx, sel, base, lambda s, k=kid: ctx.kv_block_reason(k, s, sel.hardware) is None,
                                 kv_offload=kid)
            if alt is not None:
                reason, query = None, alt
        opt = ctx.catalog.taxonomy.kv_offload.get(kid)
        desc = opt.description if opt else ctx.strategy(kid).description
        opts["kv_offload"].append({
            "id": kid, "label": ctx.kv_label(kid), "description": desc, "selected": kid == sel.kv_offload,
            "disabled": reason is not None, "reason": reason, "query": query.query(),
        })
    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    if store is not None and store.deploy_type == "kv_store_lb" and deploy != "pd_cluster":
        from composer.resolve import MAX_INSTANCES

        opts["instances"] = [{
            "id": str(k), "label": str(k), "selected": k == sel.instances, "disabled": False, "reason": None,
            "description": f"{k} vLLM instance{'s' if k > 1 else ''} of {sel.nodes} node(s) each, sharing the store"
                           + (" behind a cache-aware router." if k > 1 else "."),
            "query": base.with_values(instances=k).query(),
        } for k in range(1, MAX_INSTANCES + 1)]
    if ctx.is_omni and len(ctx.omni_tasks()) > 1:
        opts["task"] = [{
            "id": t.ident, "label": t.label or t.id, "description": t.description, "selected": t.ident == sel.task,
            "disabled": False, "reason": None, "query": base.with_values(task=t.ident).query(),
        } for t in ctx.omni_tasks()]
    image = run.docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, sel.cuda)
    opts["install"] = [
        {"id": "pip", "label": "pip", "description": "Install vLLM with pip (uv) on each node and run the commands there.",
         "selected": sel.install == "pip", "disabled": False, "reason": None, "query": base.with_values(install="pip").query()},
        {"id": "docker", "label": "Docker", "description": f"Run each command in the {image} container." if image else "",
         "selected": sel.install == "docker", "disabled": image is None,
         "reason": None if image else run.docker_reason(ctx, sel.hardware, sel.variant, sel.kv_offload),
         "query": base.with_values(install="docker").query()},
        {"id": "k8s", "label": "Kubernetes",
         "description": (f"Kubernetes manifests running the {image} container: a Deployment for one node, a LeaderWorkerSet "
                         "across nodes, a DisaggregatedSet for P/D.") if image else "",
         "selected": sel.install == "k8s", "disabled": image is None,
         "reason": None if image else run.docker_reason(ctx, sel.hardware, sel.variant, sel.kv_offload),
         "query": base.with_values(install="k8s").query()},
    ]
    cuda = _cuda_options(ctx, sel, base)
    if cuda:
        opts["cuda"] = cuda
    for items in opts.values():
        for item in items:
            item.setdefault("description", "")
    _mark_defaults_and_effects(ctx, sel, opts)
    return {dim: tuple(Option(**item) for item in items) for dim, items in opts.items()}


def _cuda_options(ctx: RecipeContext, sel: Selection, base: Request) -> list[dict]:
    """The CUDA version of the container image, where the recipe offers images
    for several (semantics §10 "CUDA toggle"); ``cuda=`` in the URL."""
    out = []
    for c in run.cuda_choices(ctx, sel.hardware, sel.variant):
        digits = c[2:]
        label = f"CUDA {digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) >= 2 else c
        image = run.docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, c)
        out.append({"id": c, "label": label, "description": f"Container image {image}.", "selected": c == sel.cuda,
                    "disabled": False, "reason": None, "query": base.with_values(cuda=c).query()})
    return out


def _error(ctx: RecipeContext, query: Request) -> str | None:
    """The first error the plan of ``query`` has, or None (cached resolution)."""
    _, notices = resolved_with_notices(ctx, dict(query.values))
    return next((n.message for n in notices if n.level == "error"), None)


def _working(query: Request, ctx: RecipeContext, fallback: dict) -> tuple[Request, str | None]:
    """``(query, None)`` when ``query`` composes without an error; else the
    query with ``fallback`` applied (e.g. the recommended strategy instead of
    the current one) when that does; else ``(query, the error)``: an option
    never leads to an error page without saying so (fresh-user finding)."""
    why = _error(ctx, query)
    if why is None:
        return query, None
    other = query.with_values(**fallback)
    if other.values != query.values and _error(ctx, other) is None:
        return other, None
    return query, why


def _with_strategy(ctx: RecipeContext, sel: Selection, base: Request, works, **values) -> Request | None:
    """The query that sets ``values`` together with another strategy for which
    ``works(strategy)`` holds and that composes without an error on this
    hardware (same deployment kind first, then the recipe's default), or None.
    The click's "Also changes strategy → …" says so before it is made."""
    deploy = ctx.strategy(sel.strategy).deploy_type
    cands = [s for s in ctx.strategies if s != sel.strategy and ctx.strategy_block_reason(s, sel.hardware) is None
             and works(s)]
    cands.sort(key=lambda s: (ctx.strategy(s).deploy_type != deploy, s != ctx.recipe.default_strategy))
    for s in cands:
        same = ctx.strategy(s).deploy_type == deploy
        pools = {} if same and deploy == "pd_cluster" else dict(prefill_mode=None, prefill_nodes=None,
                                                                  decode_mode=None, decode_nodes=None)
        query = base.with_values(strategy=s, nodes=base.get("nodes") if same else None, hardware=sel.hardware,
                                 **pools, **values)
        if resolved_selection(ctx, dict(query.values)).strategy == s and _error(ctx, query) is None:
            return query
    return None


def _hardware_query(ctx: RecipeContext, sel: Selection, base: Request, hw: str) -> Request:
    """Switching hardware keeps the strategy (and P/D pool modes) when it still
    works there; node counts are recomputed for the new hardware."""
    keep = ctx.strategy_block_reason(sel.strategy, hw) is None
    if keep and ctx.strategy(sel.strategy).deploy_type == "single_node":
        keep = ctx.fits_one_node(hw, sel.variant)
    if not keep:
        return base.with_values(hardware=hw, strategy=None, nodes=None, prefill_mode=None, prefill_nodes=None,
                                decode_mode=None, decode_nodes=None)
    return base.with_values(hardware=hw, strategy=base.get("strategy"), nodes=None, prefill_nodes=None, decode_nodes=None)


def _dim_values(sel: Selection) -> dict[str, set[str]]:
    vals = {"hardware": {sel.hardware}, "variant": {sel.variant}, "strategy": {sel.strategy}, "task": {sel.task or ""},
            "nodes": set() if sel.prefill else {str(sel.nodes)}, "features": set(sel.features),
            "advanced": set(sel.advanced), "kv_offload": {sel.kv_offload or "off"}, "install": {sel.install},
            "instances": {str(sel.instances)}, "cuda": {sel.cuda or ""}}
    for name in POOLS:
        pool = sel.pool(name)
        vals[f"{name}_mode"] = {pool.mode} if pool else set()
        vals[f"{name}_nodes"] = {str(pool.nodes)} if pool else set()
    for fid, mode in sel.modes:
        vals[f"fmode.{fid}"] = {mode}
    return vals


EFFECT_DIMS = ("hardware", "variant", "nodes", "strategy", "prefill_mode", "prefill_nodes", "decode_mode",
               "decode_nodes", "features", "advanced", "kv_offload", "instances")


def _mark_defaults_and_effects(ctx: RecipeContext, sel: Selection, opts: dict) -> None:
    """``default`` marks the option(s) the recipe default selects, ``changed`` an
    option whose state differs from it; ``effects`` says, before the click, what
    else a click would switch (e.g. "also: strategy → Multi-node TP, nodes → 2")."""
    default = _dim_values(resolved_selection(ctx, {}))
    current = _dim_values(sel)
    for dim, items in opts.items():
        for item in items:
            item["default"] = item["id"] in default.get(dim, set())
            item["changed"] = item["selected"] != item["default"]
            item["effects"] = ""
            if item["selected"] or item["disabled"]:
                continue
            got = _dim_values(resolved_selection(ctx, dict(parse_query(item["query"]).values)))
            changes = []
            for d in EFFECT_DIMS:
                if d == dim or got.get(d) == current.get(d):
                    continue
                if d in ("features", "advanced"):
                    on = sorted(got[d] - current[d])
                    off = sorted(current[d] - got[d])
                    name = (lambda f: feature_label(ctx, f)) if d == "features" else ctx.advanced_label
                    parts = [f"+{name(f)}" for f in on] + [f"−{name(f)}" for f in off]
                    changes.append(f"{'features' if d == 'features' else 'Advanced'} {' '.join(parts)}")
                elif got.get(d):
                    value = next(iter(got[d]))
                    label = ctx.strategy_label(value) if d == "strategy" else (
                        ctx.hw(value).display_name if d == "hardware" else
                        ctx.variant_label(value) if d == "variant" else value)
                    changes.append(f"{d.replace('_', ' ')} → {label}")
                elif d != "nodes":
                    changes.append(f"{d.replace('_', ' ')} no longer applies")
            for d in sorted(k for k in got if k.startswith("fmode.")):
                fid = d.split(".", 1)[1]
                if d != dim and fid in got["features"] and got[d] != current.get(d):
                    changes.append(f"{feature_label(ctx, fid)} → {mode_label(ctx, fid, next(iter(got[d])))}")
            if changes:
                item["effects"] = "Also changes " + "; ".join(changes) + "."


def groups(ctx: RecipeContext | None = None) -> dict:
    """Legend and one-line help of every control group; with ``ctx``, also of
    the recipe's feature-mode groups (``fmode.<feature id>``)."""
    out = {dim: {"legend": legend, "help": text} for dim, (legend, text) in GROUPS.items()}
    if ctx is None:
        return out
    for fid in moded_features(ctx):
        out[f"fmode.{fid}"] = {"legend": f"{feature_label(ctx, fid)}: method",
                               "help": ctx.recipe.features[fid].description or "One method of this feature is used at a time."}
    return out
