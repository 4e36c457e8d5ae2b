"""The page's controls: every option of every group with its state (selected,
disabled and why, default, changed), what a click on it would also switch, and
the query it produces. The page renders these; it decides nothing itself.
"""

from __future__ import annotations

from composer import run_forms as run
from composer.canonical import raise_reason, resolved_selection, resolved_with_notices
from composer.context import MAX_NODES, RecipeContext
from composer.memory import recipe_size_text
from composer.dimensions import DIMENSIONS, EFFECT_DIMS, HALF_NODE, POOLS, Selection, pool_size_label
from composer.notices import lower_first
from composer.modes import default_mode, format_fmode, mode_block_reason, mode_label, moded_features, parse_fmode
from composer.outputs import Option
from composer.parallel import KINDS
from composer.plan import plan_error_notice, working_values
from composer.query import SCHEMA_VERSION, Request, parse_query
from composer.resolve import feature_label, pd_modes, recommend


PD_KEYS = dict(prefill_mode=None, prefill_nodes=None, decode_mode=None, decode_nodes=None)
"""The P/D pool parameters, cleared together when a click changes the deployment's shape."""


def build_options(ctx: RecipeContext, sel: Selection, canon: Request, notices=()) -> dict[str, tuple[Option, ...]]:
    """Every control of the page (query parameter → its options in order,
    the groups in page order: ``BUILDERS``) with each option's state:
    selected, disabled (and why), default, changed, what else a click
    switches, and the query a click produces. ``notices`` (the plan's
    ``Notice`` list) mark a chosen Advanced knob whose value a later layer
    replaced (``lost``)."""
    base = canon.with_values(v=SCHEMA_VERSION)
    opts: dict[str, list[dict]] = {}
    for _, builder in BUILDERS:
        opts.update(builder(ctx, sel, base))
    _disable_errors(ctx, sel, base, opts)
    _advanced_pairs(ctx, sel, opts)
    for items in opts.values():
        for item in items:
            item.setdefault("description", "")
    lost = lost_choices(notices)
    for item in opts.get("advanced", ()):
        if item["selected"] and item["id"] in lost:
            item["lost"] = "Replaced by " + "; ".join(lost[item["id"]])
    _mark_defaults_and_effects(ctx, sel, opts)
    return {dim: tuple(Option(**item) for item in items) for dim, items in opts.items()}


def group_options(ctx: RecipeContext, query, group: str) -> list[dict]:
    """The options of one control group (``group``: a ``BUILDERS`` name, e.g.
    ``strategy``) of the page for ``query``, each option's ``id``,
    ``disabled``, ``reason`` and ``query`` as ``build_options`` gives them
    (the group's builder, and the error check of ``CHECKED_AFTER`` groups),
    without the other groups, the plan or the ``default``/``effects``
    marking: the build's public API asks each hardware's strategies (a whole
    page's controls cost ~30 plans). Raises KeyError for an unknown group."""
    from composer.plan import page_selection

    builder = dict(BUILDERS)[group]
    sel, canon = page_selection(ctx, query)
    base = canon.with_values(v=SCHEMA_VERSION)
    opts = builder(ctx, sel, base)
    _disable_errors(ctx, sel, base, opts)
    return opts.get(group, [])


def why_lines(options) -> list[tuple[str, str]]:
    """The "Why N unavailable" list of a group: one ``(labels, reason)`` line
    per distinct reason, in option order (docs/page.md: "one line per distinct
    reason"). Reasons that differ only in one number (besides the option's
    own label) are one line, the numbers that vary listed, runs of
    consecutive ones as a range ("TP 40, 56, 64 … does not divide …"), the
    labels too ("5, 7–11, 13–16"); reasons that differ in more stay apart,
    each distinct one once with all its labels."""
    import re

    # A number with thousands separators ("458,946 tokens") is one number, never two; digits that are
    # part of a name or a version ("GB200", "0.33.0") are not numbers to merge.
    number = r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?!\d|\.\d|,\d)"
    groups: dict[str, list] = {}
    for o in options:
        if not o.get("disabled") or not o.get("reason"):
            continue
        groups.setdefault(re.sub(number, "#", o["reason"]), []).append(o)
    out = []
    for shape, opts in groups.items():
        texts = [o["reason"] for o in opts]
        numbers = [re.findall(number, t) for t in texts]
        # One varying number reads as a list ("TP 40, 56 does not divide"); several do not ("holds 0.44,
        # 0.94x … (~458,946; 986,025 tokens)", a fresh user's finding): then each reason is its own line.
        # A number that is the option's own label ("on 3 × H100" for 3 nodes) does not count.
        varying = [i for i in range(len(numbers[0])) if len({n[i] for n in numbers}) > 1
                   and any(n[i] != str(o["label"]) for n, o in zip(numbers, opts))]
        if len(varying) > 1:  # each distinct reason once, with every label that has it (adversarial finding:
            same: dict[str, list[str]] = {}  # identical reasons beside differing ones were repeated)
            for o in opts:
                same.setdefault(o["reason"], []).append(str(o["label"]))
            out += [(_span(labels), text) for text, labels in same.items()]
            continue
        pieces = shape.split("#")
        reason = pieces[0]
        for i, piece in enumerate(pieces[1:]):
            reason += _span([n[i] for n in numbers]) + piece
        out.append((_span([str(o["label"]) for o in opts]), reason))
    return out


def _span(values: list[str]) -> str:
    """Distinct ``values`` in order, as one value, a short list, or a range
    (integers; runs of consecutive labels become ``a–b``)."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return distinct[0]
    if all(v.isdigit() for v in distinct):
        # Runs of consecutive integers become a–b, labels and values alike: "TP 40–128" would
        # claim 48 and 96 as well (an adversarial finding on the K3 page).
        runs: list[list[int]] = []
        for n in (int(v) for v in distinct):
            if runs and n == runs[-1][-1] + 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
    return ("; " if any("," in v for v in distinct) else ", ").join(distinct)


def lost_choices(notices) -> dict[str, list[str]]:
    """Advanced knob id → who replaced its value, from the plan's
    ``value-replaced`` notices (``subject`` ``advanced``, ``old`` the knob,
    ``reason`` the winner: ``composer.plan._replacement_notices``), in order,
    each once."""
    out: dict[str, list[str]] = {}
    for n in notices:
        if n.code == "value-replaced" and n.subject == "advanced" and n.old and n.reason:
            if n.reason not in out.setdefault(n.old, []):
                out[n.old].append(n.reason)
    return out


def _hardware(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """Every listed GPU. One the selected checkpoint cannot use is still
    offered when another variant runs there: the click switches the variant
    (said in effects); an option never leads to an error page unannounced."""
    items = []
    for h in ctx.listed_hardware:
        p = ctx.hw(h)
        reason = ctx.hardware_block_reason(h, sel.variant)
        query = _hardware_query(ctx, sel, base, h)
        other = ctx.variant_for(h) if reason else None
        if other is not None:
            reason = None
            query = query.with_values(variant=None if other == "default" else other, strategy=None, **PD_KEYS)
        if reason is None and h != sel.hardware:
            query, reason = _working(query, ctx, dict(strategy=None, nodes=None, **PD_KEYS), base)
        items.append({
            "id": h, "label": p.display_name, "group": p.brand, "gpus": p.gpu_count,
            "gb_per_node": p.vram_gb, "gb_per_gpu": round(p.gb_per_gpu), "verified": ctx.is_verified(h),
            "description": p.description, "selected": h == sel.hardware, "disabled": reason is not None,
            "reason": reason, "query": query.query(),
        })
    return {"hardware": items}


def _variant(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """Every checkpoint. The GPU in use stays when the checkpoint runs there
    (stated: the recipe's default GPU for this checkpoint may be another one)."""
    items = []
    for v in ctx.recipe.variants:
        query = base.with_values(variant=v, strategy=None, nodes=None, **PD_KEYS,
                                 hardware=None if ctx.hardware_block_reason(sel.hardware, v) else sel.hardware)
        reason = None
        if v != sel.variant:
            query, reason = _working(query, ctx, dict(hardware=None), base)
        items.append({
            "id": v, "label": ctx.variant_label(v), "description": ctx.variant(v).description,
            "weights_gb": ctx.weights_gb(v), "selected": v == sel.variant, "disabled": reason is not None,
            "reason": reason, "query": query.query(),
        })
    return {"variant": items}


def _nodes(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """Node counts 1–``MAX_NODES`` (none for P/D: its pools have their own),
    each disabled with the reason when the composer would not keep it (the
    resolver's raise) or when its plan is an error the current one does not
    have (``_error``: the capacity and launch errors of the commands it composes)."""
    deploy = ctx.strategy(sel.strategy).deploy_type
    hwp = ctx.hw(sel.hardware)
    single_ok = any(ctx.strategy(s).deploy_type == "single_node" and ctx.strategy_block_reason(s, sel.hardware) is None
                    for s in ctx.strategies)
    multi_ok = hwp.scalable and any(ctx.strategy(s).deploy_type == "multi_node" and ctx.strategy_block_reason(s, sel.hardware) is None
                                    for s in ctx.strategies)
    items = []
    for k in range(1, MAX_NODES + 1 if deploy != "pd_cluster" else 1):
        keep = deploy == "multi_node" and k > 1
        query = base.with_values(nodes=k, strategy=sel.strategy if keep else None, **PD_KEYS)
        reason = None
        if k == 1 and not single_ok:
            reason = "No single-node strategy is offered here."
        elif k > 1 and not multi_ok:
            reason = f"No multi-node strategy is offered on {hwp.display_name}."
        else:
            got, why = resolved_with_notices(ctx, dict(query.values))
            if got.nodes != k:
                reason = raise_reason(why, k, got.nodes)
            else:
                reason = _error(ctx, query, base)
        items.append({
            "id": str(k), "label": str(k), "selected": k == sel.nodes,
            "disabled": reason is not None, "reason": reason, "query": query.query(),
        })
    return {"nodes": items}


def _strategy(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """Every offered strategy; one that cannot run here, or that no node count
    makes work (e.g. TP+DP where one node cannot hold a replica), is disabled
    with the composer's reason."""
    deploy = ctx.strategy(sel.strategy).deploy_type
    hwp = ctx.hw(sel.hardware)
    weights = ctx.weights_gb(sel.variant)
    supported = [s for s in ctx.strategies if ctx.strategy_block_reason(s, sel.hardware) is None]
    best = recommend(ctx, sel.hardware, sel.variant, None, supported, base)
    items = []
    for s in ctx.strategies:
        st = ctx.strategy(s)
        reason = ctx.strategy_block_reason(s, sel.hardware)
        if reason is None and st.deploy_type == "single_node" and weights and not ctx.fits_one_node(sel.hardware, sel.variant):
            reason = f"One {hwp.display_name} node cannot hold {recipe_size_text(ctx, sel.variant)}."
        if reason is None and ctx.floor_nodes(s, sel.hardware) > MAX_NODES:
            reason = f"Needs more than {MAX_NODES} nodes of {hwp.display_name}."
        same_kind = st.deploy_type == deploy
        query = base.with_values(strategy=s, nodes=(None if not same_kind or st.deploy_type != "multi_node" else base.get("nodes")),
                                 **(PD_KEYS if st.kind != "pd" else {}))
        if reason is None:
            reason = _error(ctx, query, base)
        floor = ctx.floor_gpus(s, sel.hardware)
        desc = st.description + (f" Needs at least {floor} GPUs ({ctx.floor_nodes(s, sel.hardware)} × {hwp.display_name})." if floor else "")
        items.append({
            "id": s, "label": ctx.strategy_label(s), "description": desc,
            "verified": ctx.is_verified(sel.hardware) and any(
                c.hardware == sel.hardware and c.strategy == s for c in ctx.recipe.meta.verified_configs),
            "deploy_type": st.deploy_type, "min_gpus": floor, "orientation": st.orientation,
            "recommended": s == best and reason is None,
            "selected": s == sel.strategy, "disabled": reason is not None, "reason": reason,
            "query": query.query(),
        })
    return {"strategy": items}


def _pools(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """P/D only: each pool's mode and node count (``<pool>_mode``, ``<pool>_nodes``);
    a node count is disabled with the resolver's reason or its plan's error (as in ``_nodes``)."""
    if ctx.strategy(sel.strategy).deploy_type != "pd_cluster":
        return {}
    modes = pd_modes(ctx, sel.hardware)
    out: dict[str, list[dict]] = {}
    for name in POOLS:
        pool = sel.pool(name)
        assert pool is not None  # a P/D selection has both pools
        out[f"{name}_mode"] = [{
            "id": m, "label": KINDS[m].label, "description": KINDS[m].pool_help,
            "selected": m == pool.mode, "disabled": False, "reason": None,
            "query": base.with_values(**{f"{name}_mode": m}).query(),
        } for m in modes]
        out[f"{name}_nodes"] = []
        other = POOLS[1 - POOLS.index(name)]
        half = ctx.fits_half_node(sel.hardware, sel.variant)  # ½ is offered where half a node holds the weights
        mate = sel.pool(other)
        for k in range(HALF_NODE if half else 1, MAX_NODES + 1):
            # ½ puts both pools on one node (co-located); a whole count leaves it, the other pool sized afresh:
            # one pool alone on half a node leaves the other half idle (an adversarial finding: both clicks did)
            together = {f"{other}_nodes": HALF_NODE} if k == HALF_NODE else (
                {f"{other}_nodes": None} if mate is not None and mate.half else {})
            query = base.with_values(**{f"{name}_nodes": k, **together})
            got, why = resolved_with_notices(ctx, dict(query.values))
            got_k = got.pool(name).nodes if got.pool(name) else k
            reason = raise_reason(why, k, got_k) if got_k != k else None
            if reason is None and k == HALF_NODE and not (got.pool(other) and got.pool(other).half):
                own = next((dict(n.per_count).get(HALF_NODE) for n in why
                            if n.code == "nodes-raised" and n.subject == f"{other}_nodes"), None)
                reason = f"The {other} pool cannot run on the other half" + (f": {own}" if own else ".")
            if reason is None:
                reason = _error(ctx, query, base)
            out[f"{name}_nodes"].append({
                "id": str(k), "label": pool_size_label(k), "selected": k == pool.nodes,
                "disabled": reason is not None, "reason": reason, "query": query.query(),
                **({"description": f"Half of one node's GPUs ({'the first half' if name == POOLS[0] else 'the second half'}); with the {other} pool on "
                                   "the other half, both run on one node."} if k == HALF_NODE else {}),
            })
    return out


def _features(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """Every feature as a toggle; turning one on turns off those it excludes.
    One the strategy does not allow is offered with a strategy it runs with,
    when one works here (issue 12.6); one that is on but not emitted can
    still be turned off."""
    items = []
    for f, spec in ctx.recipe.features.items():
        on = f in sel.features
        excl = ctx.exclusive_with(f)
        new = tuple(x for x in sel.features if x != f) if on else tuple(x for x in sel.features if x not in excl) + (f,)
        desc = spec.description + (f" Turning it on turns off {', '.join(feature_label(ctx, x) for x in excl)}." if excl else "")
        reason = ctx.feature_block_reason(f, sel.strategy)
        query = base.with_values(features=list(new))
        if reason is not None and not on:
            alt = _with_strategy(ctx, sel, base, lambda s, f=f: ctx.feature_block_reason(f, s) is None,
                                 features=list(new))
            if alt is not None:
                reason, query = None, alt
        if reason is not None and on:
            desc, reason = f"Not emitted: {reason} {desc}".strip(), None
        items.append({
            "id": f, "label": feature_label(ctx, f), "description": desc, "selected": on,
            "disabled": reason is not None, "reason": reason, "query": query.query(),
        })
    return {"features": items}


def _feature_modes(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """A method row (``fmode.<feature>``) per enabled feature with a choice of
    modes (semantics §7.2). A mode another checkpoint offers here is offered
    too: the click switches the variant (the same rule as for hardware)."""
    out: dict[str, list[dict]] = {}
    for fid in moded_features(ctx):
        modes = ctx.recipe.features[fid].modes or {}
        if len(modes) < 2 or fid not in sel.features:
            continue
        picked = parse_fmode(base.get("fmode"))[0]
        items = []
        for m, mspec in modes.items():
            chosen = {**picked, fid: m}
            if m == default_mode(ctx, fid, sel.hardware, sel.variant):
                del chosen[fid]
            reason = mode_block_reason(ctx, fid, m, sel.hardware, sel.variant)
            query = base.with_values(fmode=format_fmode(chosen) or None)
            other = next((v for v in ctx.recipe.variants if v != sel.variant
                          and ctx.hardware_block_reason(sel.hardware, v) is None
                          and mode_block_reason(ctx, fid, m, sel.hardware, v) is None), None) if reason else None
            if other is not None:
                reason = None
                query = base.with_values(fmode=format_fmode({**picked, fid: m}), hardware=sel.hardware,
                                         variant=None if other == "default" else other, strategy=None, nodes=None, **PD_KEYS)
            items.append({
                "id": m, "label": mode_label(ctx, fid, m), "description": mspec.description,
                "selected": m == sel.mode(fid), "disabled": reason is not None, "reason": reason,
                "query": query.query(),
            })
        out[f"fmode.{fid}"] = items
    return out


def _advanced(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """The Advanced knobs the strategy shows, as toggles. One whose every flag
    the commands already have with its value says who sets it, first in its
    description (``in_force``; a fresh user saw "gpu-memory-utilization 0.95"
    unticked beside commands that all had it). It stays a choice: the seed
    wants the toggle to give another UI state although "toggling this
    typically won't change the final command"."""
    items = []
    composed = None
    for k in ctx.advanced_knobs(sel.strategy):
        on = k.id in sel.advanced
        new = tuple(x for x in sel.advanced if x != k.id) if on else sel.advanced + (k.id,)
        if not on and composed is None:
            composed = role_layers(ctx, sel)
        who = None if on else in_force(ctx, composed or [], k.args)
        said = f"Already in force ({who}: {' '.join(k.args)}): ticking it changes no flag. " if who else ""
        items.append({
            "id": k.id, "label": k.label, "description": said + k.description, "selected": on,
            "disabled": False, "reason": None, "query": base.with_values(advanced=list(new) or None).query(),
            "in_force": who or "",
        })
    return {"advanced": items}


def role_layers(ctx: RecipeContext, sel: Selection) -> list:
    """The ``ArgvBuilder`` of each role of ``sel`` (the head's; for P/D each
    pool's), composed without the topology (``composer.layers.compose_layers``
    with no spec: no knob sets it), once per page for ``in_force``."""
    from composer.layers import CommandSpec, compose_layers

    specs = [CommandSpec(p, 0, (), p) for p in POOLS] if ctx.strategy(sel.strategy).deploy_type == "pd_cluster" else [None]
    return [compose_layers(ctx, sel, spec)[0] for spec in specs]


def in_force(ctx: RecipeContext, composed: list, args) -> str | None:
    """Who sets every flag of ``args`` (an Advanced knob's tokens) with the
    same value in every role's composed argv (``composed``: ``role_layers``)
    — the person's name of the first one's layer
    (``composer.plan.source_label``) — or None when a command lacks one or
    has another value."""
    from composer.argv import parse_tokens
    from composer.plan import source_label

    try:
        units = parse_tokens(list(args))
    except ValueError:
        return None
    who = None
    for argv in composed:
        for unit in units:
            entry = argv.get(unit.key)
            if entry is None or entry.unit != unit:
                return None
            who = who or source_label(ctx, entry.source)
    return who


def _advanced_pairs(ctx: RecipeContext, sel: Selection, opts: dict[str, list[dict]]) -> None:
    """An Advanced knob disabled by an error whose fix names a flag another
    knob sets says so when ticking both works ("Tick Advanced
    max-num-batched-tokens 8192 first: with both, it works."): a fresh user was told to
    raise --max-num-batched-tokens beside a knob that does exactly that.
    Costs a plan only for such a pair."""
    items = opts.get("advanced", [])
    knobs = {k.id: k for k in ctx.advanced_knobs(sel.strategy)}
    for item in items:
        if not item["disabled"] or not item["reason"]:
            continue
        for other in items:
            if other is item or other["selected"] or other["disabled"]:
                continue
            knob = knobs.get(other["id"])
            flag = knob.args[0] if knob and knob.args else None
            if not flag or flag not in item["reason"]:
                continue
            both = parse_query(item["query"])
            both = both.with_values(advanced=[a for a in (both.get("advanced") or "").split(",") if a] + [other["id"]])
            if _error(ctx, both) is None:
                # a fresh user read "(tick both)" on a box that cannot be ticked as a puzzle: the order is said
                item["reason"] += f" Tick Advanced {other['label']} first: with both, it works."
                break


def _task(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """vLLM-Omni recipes with several tasks: the task."""
    if not (ctx.is_omni and len(ctx.omni_tasks()) > 1):
        return {}
    return {"task": [{
        "id": t.ident, "label": t.label or t.id, "description": t.description, "selected": t.ident == sel.task,
        "disabled": False, "reason": None, "query": base.with_values(task=t.ident).query(),
    } for t in ctx.omni_tasks()]}


def _kv_offload(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """Off, then every KV offload option; one the strategy does not allow is
    offered with a strategy that does, when one composes here."""
    items = [{"id": "off", "label": "Off", "description": "KV cache stays in GPU HBM.",
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
            else:
                reason += _strategies_unavailable(ctx, sel, base, [
                    s for s in ctx.strategies if s != sel.strategy and ctx.kv_block_reason(kid, s, sel.hardware) is None])
        opt = ctx.catalog.taxonomy.kv_offload.get(kid)
        desc = opt.description if opt else ctx.strategy(kid).description
        items.append({
            "id": kid, "label": ctx.kv_label(kid), "description": desc, "selected": kid == sel.kv_offload,
            "disabled": reason is not None, "reason": reason, "query": query.query(),
        })
    return {"kv_offload": items}


def _instances(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """A KV-store deployment outside P/D: how many vLLM instances share the store."""
    from composer.resolve import MAX_INSTANCES

    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    if store is None or store.deploy_type != "kv_store_lb" or ctx.strategy(sel.strategy).deploy_type == "pd_cluster":
        return {}
    return {"instances": [{
        "id": str(k), "label": str(k), "selected": k == sel.instances, "disabled": False, "reason": None,
        "description": f"{k} vLLM instance{'s' if k > 1 else ''} of {sel.nodes} node(s) each, sharing the store"
                       + (" behind a cache-aware router." if k > 1 else "."),
        "query": base.with_values(instances=k).query(),
    } for k in range(1, MAX_INSTANCES + 1)]}


def _forms(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """"Run with": every output form of the registry (``composer.forms``)."""
    from composer.forms import FORMS

    image = run.docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, sel.cuda)
    items = []
    for form in FORMS.values():
        blocked = form.needs_image and image is None
        items.append({
            "id": form.id, "label": form.label, "description": form.describe(image), "selected": sel.form == form.id,
            "disabled": blocked, "reason": run.docker_reason(ctx, sel.hardware, sel.variant, sel.kv_offload) if blocked else None,
            "query": base.with_values(install=form.id).query(),
        })
    return {"install": items}


def _cuda(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """The CUDA version of the container image, where the recipe offers images
    for several (semantics §10 "CUDA toggle"); ``cuda=`` in the URL."""
    out = []
    for c in run.cuda_choices(ctx, sel.hardware, sel.variant):
        digits = c[2:]
        label = f"CUDA {digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) >= 2 else c
        image = run.docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, c)
        out.append({"id": c, "label": label, "description": f"Container image {image}.", "selected": c == sel.cuda,
                    "disabled": False, "reason": None, "query": base.with_values(cuda=c).query()})
    return {"cuda": out} if out else {}


def _context(ctx: RecipeContext, sel: Selection, base: Request) -> dict[str, list[dict]]:
    """The context the capacity line states a concurrency for
    (``composer.dimensions.CONTEXTS``); it changes no command."""
    from composer.dimensions import CONTEXTS

    if ctx.is_omni:  # no KV-cache figures to state it for (memory.OMNI_STAGES)
        return {"context": []}
    return {"context": [{"id": c, "label": f"{n:,} tokens", "description": f"Maximum concurrency at {n:,} tokens per request.",
                         "selected": c == sel.context, "disabled": False, "reason": None,
                         "query": base.with_values(context=c).query()} for c, n in CONTEXTS.items()]}


BUILDERS = (
    ("hardware", _hardware), ("variant", _variant), ("nodes", _nodes), ("strategy", _strategy),
    ("prefill_mode", _pools), ("features", _features), ("fmode", _feature_modes), ("advanced", _advanced),
    ("task", _task), ("kv_offload", _kv_offload), ("instances", _instances), ("install", _forms), ("cuda", _cuda),
    ("context", _context),
)
"""One builder per control, in page order (``composer.dimensions.DIMENSIONS``;
``_pools`` gives the four P/D pool groups, ``_feature_modes`` one group per
moded feature). A test checks the order against the table."""


def _error(ctx: RecipeContext, query: Request, base: Request | None = None) -> str | None:
    """The first error the plan of ``query`` has, or None: the resolver's, the
    capacity's and vLLM's start-up checks on its commands
    (``composer.plan.plan_error_notice``, cached). With ``base`` (the current
    page's query), None too when the current plan already has an error of that
    code (e.g. a recipe's ``--chat-template examples/…`` with pip): the click
    does not lead there, and the user must be able to leave the page."""
    found = plan_error_notice(ctx, dict(query.values))
    if found is None:
        return None
    if base is not None:
        now = plan_error_notice(ctx, dict(base.values))
        if now is not None and now[0] == found[0]:
            return None
    return found[1]


CHECKED_AFTER = ("features", "advanced", "kv_offload", "instances", "install", "cuda", "task")
"""Groups whose builders gate options by declarations only (a feature's
strategies, a knob's condition): ``_disable_errors`` then disables each option
whose plan would be an error the current plan does not have, with that error
as the reason (feature modes ``fmode.*`` too)."""


def _disable_errors(ctx: RecipeContext, sel: Selection, base: Request, opts: dict[str, list[dict]]) -> None:
    """An option of ``CHECKED_AFTER`` that leads to an error plan (a launch
    rule vLLM enforces, a capacity error) is disabled with that error as its
    reason, unless the current plan has the same error (the click does not
    make it worse, and the user must be able to leave it)."""
    for dim, items in opts.items():
        if dim not in CHECKED_AFTER and not dim.startswith("fmode."):
            continue
        for item in items:
            if item["disabled"] or item["query"] == base.query():
                continue
            why = _error(ctx, parse_query(item["query"]), base)
            if why is not None:
                item["disabled"], item["reason"] = True, why


def _working(query: Request, ctx: RecipeContext, fallback: dict, base: Request | None = None) -> tuple[Request, str | None]:
    """``(query, None)`` when ``query`` composes without an error; else the
    query with ``fallback`` applied (e.g. the recommended strategy instead of
    the current one) when that does; else ``(query, the error)`` (None when the
    current page ``base`` has an error of that code): an option never leads to
    an error page without saying so (fresh-user finding)."""
    why = _error(ctx, query)
    if why is None:
        return query, None
    other = query.with_values(**fallback)
    if other.values != query.values and _error(ctx, other) is None:
        return other, None
    return query, _error(ctx, query, base)


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


def _strategies_unavailable(ctx: RecipeContext, sel: Selection, base: Request, strategies: list[str]) -> str:
    """" <strategy>, which it is offered with, cannot run here: <why>" for
    the first of ``strategies`` (those an option is offered with), or "" when
    there are none: a reason "offered only with Single-node TP" must not send
    the user to an option that is itself disabled (GLM-5.1 on H100, a new
    user's finding), and the sentence names its link to the option (a later
    fresh user read "Here Single-node TP is unavailable" after LMCache's P/D
    reason as a stray line). The why is the strategy's own block reason on
    this hardware or its plan's first error."""
    for s in strategies:
        why = ctx.strategy_block_reason(s, sel.hardware)
        if why is None:
            query = base.with_values(strategy=s, nodes=None, hardware=sel.hardware, **PD_KEYS)
            why = _error(ctx, query)
        if why:
            return f" {ctx.strategy_label(s)}, which it is offered with, cannot run here: {lower_first(why)}"
    return ""


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
            "advanced": set(sel.advanced), "kv_offload": {sel.kv_offload or "off"}, "install": {sel.form},
            "instances": {str(sel.instances)}, "cuda": {sel.cuda or ""}, "context": {sel.context}}
    for name in POOLS:
        pool = sel.pool(name)
        vals[f"{name}_mode"] = {pool.mode} if pool else set()
        vals[f"{name}_nodes"] = {str(pool.nodes)} if pool else set()
    for fid, mode in sel.modes:
        vals[f"fmode.{fid}"] = {mode}
    return vals


def _mark_defaults_and_effects(ctx: RecipeContext, sel: Selection, opts: dict) -> None:
    """``default`` marks the option(s) the recipe default selects, ``changed`` an
    option whose state differs from it; ``effects`` says, before the click, what
    else a click would switch (e.g. "also: strategy → Multi-node TP, nodes → 2")."""
    # what a link of the option opens: the strategy fallback too (composer.plan.working_values)
    default = _dim_values(resolved_selection(ctx, working_values(ctx, {})[0]))
    current = _dim_values(sel)
    for dim, items in opts.items():
        for item in items:
            item["default"] = item["id"] in default.get(dim, set())
            item["changed"] = item["selected"] != item["default"]
            item["effects"] = ""
            if item["selected"] or item["disabled"]:
                continue
            got = _dim_values(resolved_selection(ctx, working_values(ctx, parse_query(item["query"]).values)[0]))
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
                        ctx.variant_label(value) if d == "variant" else
                        pool_size_label(int(value)) if d in ("prefill_nodes", "decode_nodes") else value)
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
    out = {d.name: {"legend": d.legend, "help": d.help} for d in DIMENSIONS if d.legend}
    if ctx is None:
        return out
    for fid in moded_features(ctx):
        out[f"fmode.{fid}"] = {"legend": f"{feature_label(ctx, fid)}: method",
                               "help": ctx.recipe.features[fid].description or "One method of this feature is used at a time."}
    return out


def group_kinds(ctx: RecipeContext | None = None) -> dict:
    """How the page draws and edits each control group (from
    ``composer.dimensions``): ``control`` (radio | checkbox), ``shown_from``
    (the fewest options for which the group is shown), the URL ``param`` it
    sets and, for a feature's method row, the ``item`` it sets in ``fmode``'s
    ``feature:mode`` list, and ``resets``: the parameters a change of it clears
    (the page script reads these from the rendered ``data-*`` attributes)."""
    out = {d.name: {"control": d.control, "shown_from": d.shown_from, "param": d.name, "item": "",
                    "resets": " ".join(d.resets)} for d in DIMENSIONS if d.legend}
    for fid in moded_features(ctx) if ctx is not None else ():
        out[f"fmode.{fid}"] = {"control": "radio", "shown_from": 1, "param": "fmode", "item": fid, "resets": ""}
    return out
