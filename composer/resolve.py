"""From a ``Request`` to a ``Selection``: every dimension checked and completed.

Precedence when the query is silent: ``meta.default_hardware`` (seed: honoured on
a visit with no parameters), the recipe's ``default_strategy`` (its multi-node
sibling when one node cannot hold the weights), the smallest node count that
meets the strategy floor, holds the weights and gives a valid TP. When the query
asks for something impossible the resolver picks what works and says so in a
notice; it never raises.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from composer.dimensions import CONTEXTS, DEFAULT_CONTEXT, HALF_NODE, POOLS, Pool, Selection
from composer.context import HALF_NODE_BRANDS, MAX_NODES, OMNI_NO_BUILTINS, RecipeContext
from composer.layers import compose_layers
from composer.memory import DEFAULT_GPU_UTIL, Flags, capacity, recipe_size_text
from composer.modes import available_modes, default_mode, mode_block_reason, mode_label, moded_features, parse_fmode, preferred_mode
from composer.notices import Notices, lower_first
from composer.parallel import KINDS, POOL_KINDS, Layout, layout_problem, make_layout
from composer.query import KNOWN_VERSIONS, SCHEMA_VERSION, Request, _short



def util_in_force(ctx: RecipeContext, sel: Selection, pool: str | None = None) -> float:
    """The final ``--gpu-memory-utilization`` of the composed command (vLLM default 0.9)."""
    return memory_flags(ctx, sel, pool)[0]


def memory_flags(ctx: RecipeContext, sel: Selection, pool: str | None = None) -> tuple[float, str | None, str | None]:
    """``(gpu-memory-utilization, --kv-cache-dtype, --max-model-len)`` of the
    composed command, as the memory model needs them before the node count is
    known (``memory_settings``)."""
    f = memory_settings(ctx, sel, pool)
    return f.util, f.kv_dtype, f.max_model_len


def memory_settings(ctx: RecipeContext, sel: Selection, pool: str | None = None) -> Flags:
    """Every flag of the composed command the memory model reads
    (``composer.memory.Flags``). Topology flags never set them, so they are
    cached per selection without its node counts."""
    key = (sel.hardware, sel.variant, sel.strategy, sel.features, sel.modes, sel.advanced, sel.kv_offload, sel.task, pool)
    return ctx.cache("memory-flags").get(key, lambda: _memory_settings(ctx, sel, pool))


def _memory_settings(ctx: RecipeContext, sel: Selection, pool: str | None) -> Flags:
    from composer.layers import CommandSpec

    spec = CommandSpec(pool or "serve", 0, (), pool)
    try:
        argv, _, _ = compose_layers(ctx, sel, spec, None)
    except ValueError:
        return Flags()
    values = {e.unit.key: e.unit.value for e in argv.entries() if e.unit.enabled}
    return Flags.from_values(values)


def layout_for(ctx: RecipeContext, sel: Selection, nodes: int) -> Layout:
    """The layout of ``sel``'s (non-P/D) strategy on ``nodes`` nodes, by its kind."""
    sid = sel.strategy
    strat = ctx.strategy(sid)
    single = strat.deploy_type == "single_node"
    util, kv_dtype, mml = memory_flags(ctx, sel) if single else (DEFAULT_GPU_UTIL, None, None)
    return make_layout(ctx, str(strat.kind), sel.hardware, sel.variant, nodes, single_node=single, sid=sid,
                       util=util, kv_dtype=kv_dtype, max_model_len=mml)


def half_devices(ctx: RecipeContext, hw_id: str, name: str) -> tuple[int, ...]:
    """The GPU indices of the half node a co-located P/D pool ``name`` runs on
    (``HALF_NODE``): prefill the first ⌊G/2⌋ of the node's G GPUs, decode the
    next ⌊G/2⌋ (semantics §3.3 step 6); () when a node has fewer than 2 GPUs."""
    half = ctx.hw(hw_id).gpu_count // 2
    if half < 1:
        return ()
    start = 0 if name == POOLS[0] else half
    return tuple(range(start, start + half))


def pool_layout(ctx: RecipeContext, sel: Selection, name: str, mode: str, nodes: int) -> Layout:
    """The layout of P/D pool ``name`` of kind ``mode`` on ``nodes`` nodes (the
    role's ``tp``, recipe override first, sizes a DEP pool's DP ranks).
    ``HALF_NODE`` (0): one node's ``half_devices``, the layout's
    ``gpus_per_node`` those (a DEP pool's local DP ranks fit them: upstream
    W35 claimed the whole node's). Raises ValueError for a half node of a
    GPU with fewer than 2 per node (the resolver never asks for one)."""
    role_so = getattr(ctx.recipe.strategy_overrides.get("pd_cluster"), name, None)
    role_st = getattr(ctx.strategy("pd_cluster"), name, None)
    role_tp = (role_so.tp if role_so and role_so.tp else None) or (role_st.tp if role_st and role_st.tp else None)
    if nodes == HALF_NODE:
        devices = half_devices(ctx, sel.hardware, name)
        if not devices:
            raise ValueError(f"a {ctx.hw(sel.hardware).display_name} node has no half to run a pool on")
        return make_layout(ctx, mode, sel.hardware, sel.variant, 1, role_tp=role_tp, devices=devices)
    return make_layout(ctx, mode, sel.hardware, sel.variant, nodes, role_tp=role_tp)


def layout_ok(ctx: RecipeContext, sel: Selection, lay: Layout, pool: str | None = None, sequence: bool = True,
              valid_only: bool = True) -> str | None:
    """None if ``lay`` holds the weights, leaves KV room (one sequence of the
    max-model-len in force, explicit or the model's: vLLM refuses to start
    otherwise) and is valid for the model, else why not. The memory flags are
    those of ``sel``'s composed command (of ``pool`` for P/D). ``sequence``
    False: the weights and some KV room only (the fallback when no count holds
    a sequence: the plan then says so, with its fixes, ``plan._kv_capacity_notice``).
    ``valid_only=False`` checks the capacity only (not ``layout_problem``)."""
    problem = layout_problem(ctx, lay, sel.variant) if valid_only else None
    if problem:
        return problem
    flags = memory_settings(ctx, sel, pool)
    cap = capacity(ctx, lay, sel.hardware, sel.variant, flags.util, sel.task, flags=flags)
    if not cap.fits and (sequence or not cap.weights_fit or (cap.kv_gib or 0) <= 0):
        hwname = ctx.hw(sel.hardware).display_name
        where = (f"half a node ({lay.gpus_per_node} × {hwname})" if lay.devices
                 else f"{lay.replica_nodes} × {hwname}")
        if cap.weights_fit and (cap.kv_gib or 0) > 0:
            return (f"on {where} the KV cache holds {cap.concurrency or 0:.2f}x of one sequence of "
                    f"--max-model-len {cap.max_model_len:,} (~{cap.kv_tokens or 0:,} tokens).")
        return cap.shortfall(where)
    return None


def smallest_nodes(ctx: RecipeContext, sel: Selection, lower: int, make, floor: int = 1, pool: str | None = None) -> int | None:
    """Smallest n in [lower, MAX_NODES] whose layout ``make(n)`` is ok; if there
    is none, the largest ok n in [floor, lower) (a request above every valid
    count comes down to the nearest one); if no count holds one sequence of
    the max-model-len in force, the same search for the weights alone (the plan
    is then an error with one-click fixes); else None."""
    for sequence in (True, False):
        for n in range(max(1, lower), MAX_NODES + 1):
            if layout_ok(ctx, sel, make(n), pool, sequence) is None:
                return n
        for n in range(min(lower, MAX_NODES + 1) - 1, max(1, floor) - 1, -1):
            if layout_ok(ctx, sel, make(n), pool, sequence) is None:
                return n
    return None


class _Draft(NamedTuple):
    """A selection being resolved: each step of ``STEPS`` fills its fields
    (``_replace``: a named tuple, for speed; a resolve makes ~15 drafts).
    ``want_nodes`` is the query's node count once checked, ``supported`` the
    offered strategies that run on the hardware."""

    variant: str = "default"
    hardware: str = ""
    strategy: str = ""
    want_nodes: int | None = None
    supported: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    modes: tuple[tuple[str, str], ...] = ()
    advanced: tuple[str, ...] = ()
    kv_offload: str = ""
    form: str = "pip"
    task: str | None = None
    instances: int = 1
    cuda: str | None = None
    context: str = DEFAULT_CONTEXT


def resolve(ctx: RecipeContext, req: Request) -> tuple[Selection, Notices]:
    """Resolve ``req`` into a Selection plus notices: the steps of ``STEPS``
    in order (each dimension's step reads what earlier ones decided), then the
    deployment's shape (nodes or P/D pools). Never raises on user input."""
    sel, want_nodes, n = _steps(ctx, req)
    return _shape(ctx, req, sel, want_nodes, n)


def _steps(ctx: RecipeContext, req: Request) -> tuple[Selection, int | None, Notices]:
    """The steps of ``STEPS``: ``(Selection before its shape (1 node, no
    pools), the node count asked for once checked, their notices)``."""
    n = Notices()
    for p in req.problems:
        n.add("warning", "query-ignored", p)
    d = _Draft()
    for _, step in STEPS:
        d = step(ctx, req, d, n)
    sel = Selection(d.hardware, d.variant, d.strategy, 1, d.features, d.advanced, d.kv_offload, form=d.form,
                    task=d.task, instances=d.instances, modes=d.modes, cuda=d.cuda, context=d.context)
    return sel, d.want_nodes, n


def before_shape(ctx: RecipeContext, req: Request) -> Selection:
    """What ``resolve(ctx, req)`` decides before the deployment's shape: its
    Selection with 1 node and no P/D pools. The shape step changes only
    those fields, so two requests whose ``before_shape`` differ never resolve
    to one Selection (``composer.canonical`` skips the node search for them)."""
    return _steps(ctx, req)[0]


SHAPE_PARAMS = ("prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes")
"""The query parameters ``_resolve_shape`` reads besides the node count."""


def _shape(ctx: RecipeContext, req: Request, sel: Selection, want_nodes: int | None,
           n: Notices) -> tuple[Selection, Notices]:
    """``_resolve_shape``, cached on the context (region ``shape``) by what it
    reads: the selection without its shape, the node count asked and the P/D
    pool parameters. The canonical link and the page's options resolve many
    queries that differ only where the shape does not look (the output form,
    the context, a parameter stated or left to its default); the node search
    is most of a resolve. Its notices are replayed in order (``Notices.extend``)."""
    key = (sel, want_nodes, tuple(req.get(k) for k in SHAPE_PARAMS))

    def make() -> tuple[Selection, tuple]:
        own = Notices()
        got, _ = _resolve_shape(ctx, req, sel, want_nodes, own)
        return got, tuple(own.items())

    got, added = ctx.cache("shape").get(key, make)
    n.extend(added)
    return got, n


def _step_version(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    version = req.get("v")
    if version is not None and version not in KNOWN_VERSIONS:
        n.add("warning", "query-version", f"This link was written for query version {_short(version)}; it was read as version {SCHEMA_VERSION}.")
    return d


def _by_case(value: str | None, ids, what: str, n: Notices) -> str | None:
    """``value`` as given when it is one of ``ids``, else the one id it
    names in another case (``H200`` → ``h200``, said in an info notice
    ``id-case``; the page's link then carries the id), else as given."""
    if value is None or value in ids:
        return value
    found = [i for i in ids if i.lower() == value.lower()]
    if len(found) != 1:
        return value
    n.add("info", "id-case", f"{what} {_short(value)} was read as {found[0]}.", subject=what.lower(), old=value,
          new=found[0])
    return found[0]


def _step_variant(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    r = ctx.recipe
    variant = _by_case(req.get("variant"), r.variants, "Variant", n) or "default"
    if variant not in r.variants:
        n.add("warning", "invalid-variant", f"Variant {_short(variant)} is not in this recipe; the default variant is shown.")
        variant = "default" if "default" in r.variants else next(iter(r.variants))
    return d._replace(variant=variant)


def _step_hardware(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    """The GPU; asked for without a variant, it brings the checkpoint that
    runs there (issue 12.6: an NVFP4 default does not make MI355X unusable)."""
    hw, variant = _by_case(req.get("hardware"), ctx.listed_hardware, "Hardware", n), d.variant
    if hw in ctx.listed_hardware and req.get("variant") is None and ctx.hardware_block_reason(hw, variant):
        runs = ctx.variant_for(hw)
        if runs is not None:
            n.add("info", "variant-switched", f"{ctx.hw(hw).display_name}: {ctx.hardware_block_reason(hw, variant)} The "
                  f"{ctx.variant_label(runs)} checkpoint, which runs there, is shown.",
                  subject="variant", old=variant, new=runs)
            variant = runs
    default_hw, problem = ctx.default_hardware(variant)
    if problem and hw is None:  # said only where the default is what is shown
        n.add("info", "default-hardware", f"{problem} {ctx.hw(default_hw).display_name} is shown.")
    if hw is None:
        return d._replace(variant=variant, hardware=default_hw)
    if hw not in ctx.listed_hardware:
        n.add("warning", "invalid-hardware", f"Hardware {_short(hw)} is not offered for this recipe; {ctx.hw(default_hw).display_name} is shown.")
        hw = default_hw
    else:
        reason = ctx.hardware_block_reason(hw, variant)
        if reason:
            n.add("warning", "hardware-unavailable", f"{ctx.hw(hw).display_name}: {reason} {ctx.hw(default_hw).display_name} is shown instead.")
            hw = default_hw
    return d._replace(variant=variant, hardware=hw)


def _step_strategy(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    """The strategy asked for when it runs here, else the recommended one
    (``recommend``, which reads the node count asked for)."""
    hw, variant = d.hardware, d.variant
    offered = ctx.strategies
    supported = [s for s in offered if ctx.strategy_block_reason(s, hw) is None]
    want_nodes = req.get_int("nodes")
    if want_nodes is not None and not 1 <= want_nodes <= MAX_NODES:
        n.add("warning", "invalid-nodes", f"The value nodes={want_nodes} is outside 1–{MAX_NODES} and was ignored.")
        want_nodes = None
    sid = _by_case(req.get("strategy"), offered, "Strategy", n)
    refused: tuple[str, str] | None = None  # (code, why) of a strategy asked for that is not shown
    if sid is not None:
        if sid not in offered:
            refused, sid = ("invalid-strategy", f"Strategy {_short(sid)} is not offered by this recipe;"), None
        elif sid not in supported:
            refused, sid = ("strategy-unavailable", str(ctx.strategy_block_reason(sid, hw))), None
    if sid is None:
        sid = recommend(ctx, hw, variant, want_nodes, supported, req)
        if refused is not None:
            # Name what is shown: with a node count asked, the recommendation reads it, so it may differ
            # from the strategy the controls mark recommended (a fresh user's finding on ?nodes=2&strategy=bogus).
            shown = (f"{ctx.strategy_label(sid)} is shown, the recommended strategy"
                     + (f" for {want_nodes} node{'s' if want_nodes > 1 else ''}." if want_nodes else ".")) if sid else ""
            n.add("warning", refused[0], f"{refused[1]} {shown}".strip())
        if sid and want_nodes is None:
            _say_strategy_auto(ctx, hw, variant, sid, supported, n)
        if sid is None:
            n.add("error", "no-strategy", f"This recipe offers no strategy that runs on {ctx.hw(hw).display_name}.")
            sid = offered[0] if offered else "single_node_tp"
    return d._replace(strategy=sid, want_nodes=want_nodes, supported=tuple(supported))


def _say_strategy_auto(ctx: RecipeContext, hw: str, variant: str, sid: str, supported: list[str], n: Notices) -> None:
    """The notice for a single-node default replaced by a multi-node strategy
    because one node cannot hold the weights (naming what the recipe verified)."""
    default = ctx.recipe.default_strategy
    if not (default in supported and sid != default and ctx.strategy(default).deploy_type == "single_node"
            and ctx.strategy(sid).deploy_type == "multi_node"):
        return
    verified = [c.strategy for c in ctx.recipe.meta.verified_configs
                if c.hardware == hw and c.strategy != sid and c.strategy in supported]
    also = (f" The recipe verified {', '.join(ctx.strategy_label(v) for v in verified)} on "
            f"{ctx.hw(hw).display_name}; pick it under Strategy." if verified else "")
    ran = any(c.hardware == hw and c.strategy == sid for c in ctx.recipe.meta.verified_configs)
    n.add("info", "strategy-auto",
          f"One {ctx.hw(hw).display_name} node ({ctx.hw(hw).vram_gb:g} GB) cannot hold {recipe_size_text(ctx, variant)}, "
          f"so {ctx.strategy_label(sid)}{', the strategy the recipe verified on ' + ctx.hw(hw).display_name + ',' if ran else ''} "
          f"is shown instead of the recipe's default {ctx.strategy_label(default)}.{also}")


def _step_features(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    """Features (before nodes: they move gpu-memory-utilization): unknown ids
    reported, of mutually exclusive ones the last listed wins, recipe order."""
    r = ctx.recipe
    feats = req.get_list("features")
    if feats is None:
        default = ctx.default_features(d.hardware, d.variant)
        return d._replace(features=tuple(f for f in r.features if f in default))
    unknown = [f for f in feats if f not in r.features]
    known = tuple(f for f in feats if f in r.features)
    if unknown and not known:
        n.add("warning", "invalid-feature", f"Unknown feature(s) {', '.join(_short(f) for f in unknown)}: the recipe's default features are shown.")
        known = ctx.default_features(d.hardware, d.variant)
    elif unknown:
        n.add("warning", "invalid-feature", f"Unknown feature(s) {', '.join(_short(f) for f in unknown)} ignored.")
    # Mutually exclusive features: the one listed last (the latest toggle) wins.
    kept: list[str] = []
    for f in reversed(known):
        clash = [k for k in kept if k in ctx.exclusive_with(f)]
        if clash:
            n.add("warning", "feature-exclusive", f"{feature_label(ctx, f)} cannot be combined with {feature_label(ctx, clash[0])}; it was turned off.")
            continue
        kept.append(f)
    feats = tuple(reversed(kept))
    for f in feats:
        why = ctx.feature_block_reason(f, d.strategy)
        if why:
            n.add("warning", "feature-unavailable", f"{feature_label(ctx, f)}: {why} It is not emitted.")
    # Recipe order, whatever the order of the query: one selection, one URL, one argv.
    return d._replace(features=tuple(f for f in r.features if f in feats))


def _step_modes(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    return d._replace(modes=resolve_modes(ctx, req, d.hardware, d.variant, d.features, n))


def _step_advanced(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    """Advanced knobs the strategy shows; hidden or unknown ones reported (W29)."""
    adv = req.get_list("advanced") or ()
    visible = {k.id for k in ctx.advanced_knobs(d.strategy)}
    hidden = [a for a in adv if a not in visible and a in ctx.all_advanced_ids]
    if hidden and ctx.is_omni:  # one notice for them all: the reason is the recipe's, not the knob's
        n.add("warning", "advanced-unavailable", f"Advanced {_or([ctx.advanced_label(a) for a in hidden], 'and')} "
              f"{'is' if len(hidden) == 1 else 'are'} not emitted. {OMNI_NO_BUILTINS}")
    for a in adv:
        if a in visible:
            continue
        if a in ctx.all_advanced_ids:
            if not ctx.is_omni:
                n.add("warning", "advanced-unavailable", f"Advanced option {ctx.advanced_label(a)} does not apply to {ctx.strategy_label(d.strategy)} and is not emitted.")
        else:
            n.add("warning", "invalid-advanced", f"Unknown Advanced option {_short(a)} ignored.")
    return d._replace(advanced=tuple(a for a in adv if a in visible))


def _step_kv_offload(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    kv = req.get("kv_offload") or ""
    if kv in ("off", "none"):
        kv = ""
    if kv and ctx.is_omni:
        n.add("warning", "kv-offload-unavailable", "vLLM-Omni recipes run without KV offload; it is off.")
        kv = ""
    if kv and kv not in ctx.kv_options():
        n.add("warning", "invalid-kv-offload", f"KV offload {_short(kv)} is not an option; KV offload is off.")
        kv = ""
    if kv:
        why = ctx.kv_block_reason(kv, d.strategy, d.hardware)
        if why:
            n.add("warning", "kv-offload-unavailable", f"{why} KV offload is off.")
            kv = ""
    return d._replace(kv_offload=kv)


def _step_form(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    """The output form (``install=``, ``composer.forms``): the query's when
    it is one and available here, else the recipe's default."""
    from composer.forms import FORMS, default_form, form_block_reason

    form = default_form(ctx)
    want = req.get("install")
    if want is not None:
        if want not in FORMS:
            n.add("warning", "invalid-install", f"The value install={_short(want)} is not {_or(list(FORMS))}; {form} is shown.")
        else:
            form = want
    why = form_block_reason(ctx, form, d.hardware, d.variant, d.kv_offload)
    if why:
        n.add("warning", "install-unavailable", f"{why} The pip commands are shown.")
        form = "pip"
    return d._replace(form=form)


def _or(words: list[str], conj: str = "or") -> str:
    """``a, b or c`` (``conj`` "and": ``a, b and c``)."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {conj} " + words[-1]


def _step_task(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    want = req.get("task")
    if not (ctx.is_omni and ctx.omni_tasks()):
        if want is not None:
            n.add("warning", "query-ignored", "The parameter task applies only to vLLM-Omni recipes and was ignored.")
        return d
    idents = [t.ident for t in ctx.omni_tasks()]
    if want is not None and want not in idents:
        n.add("warning", "invalid-task", f"Task {_short(want)} is not one of this recipe's ({', '.join(idents)}); the first is shown.")
    return d._replace(task=want if want in idents else idents[0])


def _step_instances(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    return d._replace(instances=resolve_instances(ctx, req, d.kv_offload, ctx.strategy(d.strategy).deploy_type, n))


def _step_cuda(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    return d._replace(cuda=resolve_cuda(ctx, req, d.hardware, d.variant, n))


def _step_context(ctx: RecipeContext, req: Request, d: _Draft, n: Notices) -> _Draft:
    """The context the capacity line states a concurrency for (``CONTEXTS``)."""
    want = req.get("context")
    if want is None:
        return d
    if ctx.is_omni:  # no KV-cache figures to state a concurrency for (memory.OMNI_STAGES)
        n.add("warning", "query-ignored", "The parameter context applies only where the capacity line gives KV-cache "
              "figures, which vLLM-Omni recipes do not; it was ignored.")
        return d
    if want not in CONTEXTS:
        n.add("warning", "invalid-context", f"The value context={_short(want)} is not {_or(list(CONTEXTS))}; "
              f"{DEFAULT_CONTEXT} is shown.")
        return d
    return d._replace(context=want)


STEPS = (
    ("v", _step_version), ("variant", _step_variant), ("hardware", _step_hardware), ("strategy", _step_strategy),
    ("features", _step_features), ("fmode", _step_modes), ("advanced", _step_advanced),
    ("kv_offload", _step_kv_offload), ("install", _step_form), ("task", _step_task),
    ("instances", _step_instances), ("cuda", _step_cuda), ("context", _step_context),
)
"""One resolver step per dimension (``composer.dimensions``), in the order of
their data dependencies: the variant before the GPU (a GPU may switch it), the
strategy before the features and knobs it gates, everything before the shape
(``_resolve_shape``: nodes, or the P/D pools, sized with the memory flags of
the final command)."""


def _resolve_shape(ctx: RecipeContext, req: Request, sel: Selection, want_nodes: int | None,
                   n: Notices) -> tuple[Selection, Notices]:
    """The node count (or, for P/D, both pools): the smallest that meets the
    strategy floor, holds the weights and gives a valid layout; a count asked
    for that does not work is raised or lowered with the reason."""
    sid = sel.strategy
    deploy = ctx.strategy(sid).deploy_type
    pool_params = [k for k in ("prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes") if req.get(k) is not None]
    if deploy != "pd_cluster" and pool_params:
        n.add("warning", "query-ignored", f"The parameter(s) {', '.join(pool_params)} apply only to P/D disaggregation and were ignored.")
    if deploy == "pd_cluster" and want_nodes is not None:
        n.add("warning", "query-ignored", f"The parameter nodes={want_nodes} does not apply to P/D disaggregation: its pools are sized by prefill_nodes and decode_nodes.")
    if deploy == "pd_cluster":
        return resolve_pd(ctx, sel, req, n)
    if deploy == "single_node":
        if want_nodes not in (None, 1):
            n.add("warning", "nodes-adjusted", f"{ctx.strategy_label(sid)} runs on one node; nodes={want_nodes} was set to 1.")
        # sequence=False: weights that fit with KV room short of one sequence are the plan's kv-capacity
        # notice, as on several nodes (smallest_nodes): with its one-click fixes, a warning where the
        # recipe verified the configuration.
        why = layout_ok(ctx, sel, layout_for(ctx, sel, 1), sequence=False)
        if why:
            n.add("error", "capacity", why if ctx.strategy(sid).kind == "omni" else f"{why} {fit_hint(ctx, sel)}")
        return sel, n
    return _resolve_nodes(ctx, sel, want_nodes, n), n


def _resolve_nodes(ctx: RecipeContext, sel: Selection, want_nodes: int | None, n: Notices) -> Selection:
    """The node count of a multi-node strategy (``_resolve_shape``)."""
    sid, hw = sel.strategy, sel.hardware
    hwname = ctx.hw(hw).display_name
    floor = max(2, ctx.floor_nodes(sid, hw))
    lower = max(floor, want_nodes or 1)
    nodes = smallest_nodes(ctx, sel, lower, lambda k: layout_for(ctx, sel, k), floor)
    if nodes is None:
        n.add("error", "capacity", f"No node count up to {MAX_NODES} of {hwname} gives {ctx.strategy_label(sid)} a valid layout with room for the weights and the KV cache. {fit_hint(ctx, sel)}")
        nodes = lower if lower <= MAX_NODES else MAX_NODES
    elif want_nodes is not None and nodes != want_nodes:
        floor_msg = f"{ctx.strategy_label(sid)} needs at least {floor} nodes ({max(ctx.floor_gpus(sid, hw), 2 * ctx.hw(hw).gpu_count) if floor == 2 else ctx.floor_gpus(sid, hw)} GPUs)."
        why, counts = raise_reasons(ctx, sel, want_nodes, floor, nodes, floor_msg, lambda k: layout_for(ctx, sel, k))
        if nodes > want_nodes:
            n.add("warning", "nodes-raised", f"Nodes raised from {want_nodes} to {nodes}: {why}",
                  subject="nodes", old=want_nodes, new=nodes, reason=why, per_count=counts)
        else:
            own = layout_ok(ctx, sel, layout_for(ctx, sel, want_nodes)) or ""
            why = f"{own} No larger count up to {MAX_NODES} works."
            n.add("warning", "nodes-lowered", f"Nodes lowered from {want_nodes} to {nodes}: {why}",
                  subject="nodes", old=want_nodes, new=nodes, reason=why, per_count=((want_nodes, own),))
    if nodes is not None and nodes > floor and (want_nodes is None or want_nodes == nodes) and (
            want_nodes is None or smallest_nodes(ctx, sel, floor, lambda k: layout_for(ctx, sel, k), floor) == nodes):
        # (A count the composer chose itself is said here only: these reasons
        # include every count skipped for a TP vLLM refuses, issue 18.)
        # A count above the strategy's floor that is the fewest that work is
        # said with the reasons a link's raised count gets, whether it was
        # chosen here (a click on a GPU, a link without nodes=) or asked for
        # (the pinned link of that click): issue 21, the same state reads the
        # same however it was reached.
        why, _ = raise_reasons(ctx, sel, floor, floor, nodes, "", lambda k: layout_for(ctx, sel, k))
        # The strategy named: it is the strategy's floor here, not the GPU's (a fresh user read "the fewest
        # that work on H100" as the GPU's limit, while TP+PP runs on 3).
        n.add("info", "nodes-set", f"{nodes} nodes are the fewest that work for {ctx.strategy_label(sid)} on {hwname}: {why}",
              subject="nodes", old=floor, new=nodes, reason=why)
    return replace(sel, nodes=nodes)


def resolve_modes(ctx: RecipeContext, req: Request, hw: str, variant: str, feats: tuple[str, ...],
                  n: Notices) -> tuple[tuple[str, str], ...]:
    """The mode in force for every moded feature (``composer.modes``): the
    query's ``fmode`` pick when it can be used, else the recipe's default.
    A pick or a preferred mode that cannot be used here is reported (for an
    enabled feature), naming the mode used instead; unknown ids are reported."""
    picks, bad = parse_fmode(req.get("fmode"))
    for item in bad:
        n.add("warning", "query-ignored", f"The feature mode {_short(item)} is not of the form feature:mode and was ignored.")
    moded = moded_features(ctx)
    for fid in picks:
        if fid not in moded:
            n.add("warning", "invalid-fmode", f"Feature {_short(fid)} has no modes; its fmode value was ignored.")
    out = []
    for fid in moded:
        modes = ctx.recipe.features[fid].modes or {}
        fallback = default_mode(ctx, fid, hw, variant)
        want = picks.get(fid)
        label = feature_label(ctx, fid)
        if want is not None and fid not in feats:
            # A link states modes of features that are on only (one URL, one plan).
            n.add("warning", "query-ignored", f"{label} is off, so its mode {_short(want)} was ignored.")
            want = None
        if want is not None and want not in modes:
            n.add("warning", "invalid-fmode", f"{label} has no mode {_short(want)} (it has {', '.join(modes)}); "
                                              f"{mode_label(ctx, fid, fallback)} is used.")
            want = None
        if want is None:
            want = preferred_mode(ctx, fid, variant)
            explicit = False
        else:
            explicit = True
        mode = want if want is not None and want in modes else fallback
        why = mode_block_reason(ctx, fid, mode, hw, variant)
        if why:
            mode = fallback
            if (fid in feats or explicit) and available_modes(ctx, fid, hw, variant):
                n.add("warning" if explicit else "info", "mode-unavailable",
                      f"{label}: {why} {mode_label(ctx, fid, mode)} is used instead.",
                      subject=f"fmode.{fid}", old=want, new=mode, reason=why)
        if fid in feats and mode_block_reason(ctx, fid, mode, hw, variant):
            n.add("warning", "feature-unavailable", f"{label}: none of its modes runs with the {ctx.variant_label(variant)} "
                                                    f"checkpoint on {ctx.hw(hw).display_name}. It is not emitted.")
        out.append((fid, mode))
    return tuple(out)


MAX_INSTANCES = 8
"""Most vLLM instances offered behind a KV store's router."""


def resolve_instances(ctx: RecipeContext, req: Request, kv: str, deploy: str, n: Notices) -> int:
    """Instances of a KV-store deployment (``kv_store/<id>.yaml``: a cluster of
    vLLM instances sharing one store behind a router): the query's
    ``instances``, else the store's ``default_instances``; 1 for everything
    else (P/D keeps its own pools and router)."""
    want = req.get_int("instances")
    store = ctx.catalog.strategies.get(kv) if kv else None
    if store is None or store.deploy_type != "kv_store_lb" or deploy == "pd_cluster":
        if want is not None:
            n.add("warning", "query-ignored", "The parameter instances applies only to a KV store deployment without "
                                              "P/D and was ignored.")
        return 1
    default = max(1, min(MAX_INSTANCES, store.default_instances or 1))
    if want is None:
        return default
    if not 1 <= want <= MAX_INSTANCES:
        n.add("warning", "invalid-instances", f"The value instances={want} is outside 1–{MAX_INSTANCES}; {default} is shown.")
        return default
    return want


def _say_tp_skipped(ctx: RecipeContext, sel: Selection, lower: int, got: int, make, subject: str, label: str,
                    n: Notices, pool: str | None = None) -> None:
    """When the composer chose ``got`` nodes itself (no count was asked for)
    and a smaller count from ``lower`` held the weights but gave a TP vLLM
    refuses (``composer.parallel.layout_problem``), say which counts were
    skipped and why (issue 18: a chosen value that changes is said)."""
    skipped = []
    for k in range(max(1, lower), got):
        lay = make(k)
        why = layout_problem(ctx, lay, sel.variant)
        if why and layout_ok(ctx, sel, lay, pool, valid_only=False) is None:
            skipped.append((k, why))
    if skipped:
        # the counts skipped hold the weights: say so, or "6, not 5" reads as arbitrary (a fresh user's finding)
        if len(skipped) == 1:
            reason = f"{skipped[0][0]} nodes would hold the weights, but {lower_first(skipped[0][1])}"
        else:
            counts = ", ".join(str(k) for k, _ in skipped[:-1]) + f" and {skipped[-1][0]}"
            reason = (f"{counts} nodes would hold the weights, but vLLM refuses their layouts: "
                      + " ".join(f"{k} nodes: {why}" for k, why in skipped))
        n.add("info", "nodes-tp-divides-heads", f"{label}: {got}, not {skipped[0][0]}. {reason}",
              subject=subject, old=skipped[0][0], new=got, reason=reason)



def raise_reasons(ctx: RecipeContext, sel: Selection, want: int, floor: int, got: int, floor_msg: str, make,
                  pool: str | None = None) -> tuple[str, tuple[tuple[int, str], ...]]:
    """Why every node count from ``want`` up to ``got - 1`` does not work:
    ``(text, per_count)``, the text the strategy floor's ``floor_msg`` then
    ``"<k> nodes: <why>"`` per count at or above the floor with a capacity or
    layout problem; ``per_count`` the same per count (``Notice.per_count``:
    ``floor_msg`` for each count below ``floor``)."""
    below = [(k, floor_msg) for k in range(want, min(floor, got))] if floor_msg else []
    above = []
    for k in range(max(want, floor), got):
        why = layout_ok(ctx, sel, make(k), pool)
        if why:
            above.append((k, why))
    text = " ".join(([floor_msg] if want < floor else []) + [f"{k} node{'s' if k != 1 else ''}: {why}" for k, why in above])
    return text, tuple(below + above)  # each reason one sentence (``Capacity.shortfall``)


def resolve_cuda(ctx: RecipeContext, req: Request, hw: str, variant: str, n: Notices) -> str | None:
    """The CUDA version of the container image (``cuda=``): one the recipe
    offers an image for on this hardware and variant (``run_forms.cuda_choices``),
    by default cu130; None where the recipe offers no choice."""
    from composer.run_forms import cuda_choices, default_cuda

    choices = cuda_choices(ctx, hw, variant)
    want = req.get("cuda")
    if not choices:
        if want is not None:
            n.add("warning", "query-ignored", "The parameter cuda applies only where the recipe offers container "
                                              "images per CUDA version, and was ignored.")
        return None
    if want is not None and want not in choices:
        n.add("warning", "invalid-cuda", f"CUDA {_short(want)} is not one the recipe offers an image for "
                                         f"({', '.join(choices)}); {default_cuda(choices)} is shown.")
        want = None
    return want or default_cuda(choices)


def recommend(ctx: RecipeContext, hw: str, variant: str, want_nodes: int | None, supported: list[str],
              req: Request | None = None) -> str | None:
    """The strategy shown when the query names none (semantics §2.5, with the
    seed's capacity rule: a single-node default that cannot hold the weights
    yields the multi-node strategy of its kind), else the first supported
    strategy of the wanted deploy type by kind (``RECOMMENDED_MULTI``,
    ``RECOMMENDED_SINGLE``). Where the recipe's default does not apply and no
    node count is asked for, before both: the first strategy the recipe
    verified on ``hw`` (``meta.verified_configs``, in its order) of the deploy
    type wanted — what its authors ran beats a heuristic (Kimi K3 on
    B200: TP+PP, not multi-node TP 16; on H200: TEP) — unless it would drop
    a choice of ``req`` (the request: a feature, Advanced knob or KV offload
    the strategy does not offer; without ``req``, the hardware's default
    features). P/D is never chosen for the user (``working_values``)."""
    if not supported:
        return None
    default = ctx.recipe.default_strategy
    single_fits = ctx.fits_one_node(hw, variant) and ctx.floor_nodes(default or "single_node_tp", hw) <= 1
    multi_wanted = (want_nodes is not None and want_nodes > 1) or (want_nodes is None and not single_fits)
    if default in supported:
        deploy = ctx.strategy(default).deploy_type
        if not (multi_wanted and deploy == "single_node"):
            if not (want_nodes == 1 and deploy == "multi_node"):
                return default
    # The recipe's default does not apply here: what its authors verified on this GPU comes first.
    if want_nodes is None:
        wanted = "multi_node" if multi_wanted else "single_node"
        for c in ctx.recipe.meta.verified_configs:
            if (c.hardware == hw and c.strategy in supported and ctx.strategy(c.strategy).deploy_type == wanted
                    and _keeps_choices(ctx, c.strategy, hw, variant, req)):
                return c.strategy
    if default in supported:
        if multi_wanted:  # the multi-node strategy of the default's kind
            sibling = _of_kind(ctx, supported, "multi_node", (str(ctx.strategy(default).kind),))
            if sibling is not None:
                return sibling
    deploy = "single_node" if not multi_wanted else "multi_node"
    preferred = _of_kind(ctx, supported, deploy, RECOMMENDED_MULTI if multi_wanted else RECOMMENDED_SINGLE)
    if preferred is not None:
        return preferred
    same = [s for s in supported if ctx.strategy(s).deploy_type == deploy]
    return (same or supported)[0]


def _keeps_choices(ctx: RecipeContext, sid: str, hw: str, variant: str, req: Request | None) -> bool:
    """Whether strategy ``sid`` offers every feature, Advanced knob and KV
    offload ``req`` asks for (features: the hardware's defaults when it names
    none), so ``recommend`` choosing it drops nothing (the same rule as
    ``plan.working_values``: never at the cost of a choice)."""
    asked = req.get_list("features") if req is not None else None
    feats = list(asked) if asked is not None else list(ctx.default_features(hw, variant))
    if any(f in ctx.recipe.features and ctx.feature_block_reason(f, sid) for f in feats):
        return False
    if req is None:
        return True
    knobs = {k.id for k in ctx.advanced_knobs(sid)}
    if any(a in ctx.all_advanced_ids and a not in knobs for a in req.get_list("advanced") or []):
        return False
    kv = req.get("kv_offload")
    return not (kv and kv != "off" and kv in ctx.kv_options() and ctx.kv_block_reason(kv, sid, hw))


RECOMMENDED_MULTI = ("tp", "dep", "tep")
"""Kinds ``recommend`` prefers, in order, when several nodes are wanted."""
RECOMMENDED_SINGLE = ("tp",)
"""Kinds ``recommend`` prefers on one node."""


def _of_kind(ctx: RecipeContext, sids: list[str], deploy: str, kinds: tuple[str, ...]) -> str | None:
    """The first of ``sids`` of ``deploy`` type whose kind comes first in ``kinds``, or None."""
    for kind in kinds:
        for s in sids:
            if ctx.strategy(s).deploy_type == deploy and ctx.strategy(s).kind == kind:
                return s
    return None


def fit_hint(ctx: RecipeContext, sel: Selection) -> str:
    """What would fit instead, as one or two sentences ("" when the weights'
    size is unknown): the other multi-node strategy of the recipe that
    serves here on the fewest nodes — a node count whose layout is valid and holds the weights
    and one sequence of the max-model-len in force (``smallest_nodes``'
    first pass, so the count named is the one the strategy would get) — and
    the listed hardware one node of which holds the weights. A strategy that
    would itself be a capacity error is never advised (a fresh user's finding:
    Kimi K3 on H100 advised Multi-node TP, which cannot hold a 1M-token
    sequence there); of those that serve, the one on the fewest nodes (the
    recipe's order breaks a tie: K3 on H100 → TP + PP on 3 nodes, not
    Multi-node TP on 6)."""
    weights = ctx.weights_gb(sel.variant)
    if weights is None:
        return ""
    hold = [ctx.hw(h).display_name for h in ctx.listed_hardware if h != sel.hardware
            and ctx.hardware_block_reason(h, sel.variant) is None and ctx.fits_one_node(h, sel.variant)]
    hw = ctx.hw(sel.hardware)
    parts = []
    best: tuple[int, str] | None = None  # the fewest nodes wins; the recipe's strategy order breaks a tie
    for sid in ctx.strategies:
        if sid == sel.strategy or ctx.strategy(sid).deploy_type != "multi_node" or ctx.strategy_block_reason(sid, sel.hardware):
            continue
        other = replace(sel, strategy=sid)
        found = next((k for k in range(max(2, ctx.floor_nodes(sid, sel.hardware)), MAX_NODES + 1)
                      if (best is None or k < best[0]) and layout_ok(ctx, other, layout_for(ctx, other, k)) is None), None)
        if found is not None and (best is None or found < best[0]):
            best = (found, sid)
    if best is not None:
        parts.append(f"On {hw.display_name}, {ctx.strategy_label(best[1])} on {best[0]} nodes holds them.")
    if hold:
        parts.append(f"One node of {', '.join(hold)} holds {weights:g} GB.")
    return " ".join(parts)


def feature_label(ctx: RecipeContext, fid: str) -> str:
    f = ctx.recipe.features.get(fid)
    return (f.label if f and f.label else fid.replace("_", " ").capitalize())


def pd_default_mode(ctx: RecipeContext, pool: str, offered: list[str]) -> str:
    so = ctx.recipe.strategy_overrides.get("pd_cluster")
    role_so = getattr(so, pool, None) if so else None
    role_st = getattr(ctx.strategy("pd_cluster"), pool, None)
    for cand in ((role_so.parallelism if role_so else None), (role_st.parallelism if role_st else None), "tp"):
        if cand in offered:
            return cand
    return offered[0]


def pd_modes(ctx: RecipeContext, hw: str) -> list[str]:
    """Pool modes offered (semantics §5.1): from the recipe's strategies, narrowed
    by ``strategy_overrides.pd_cluster.pool_modes``, reachable on ``hw``."""
    found = {KINDS[str(ctx.strategy(s).kind)].pool_offer for s in ctx.strategies}
    modes = [m for m in POOL_KINDS if m in found] or ["tp"]
    so = ctx.recipe.strategy_overrides.get("pd_cluster")
    if so and so.pool_modes:
        narrowed = [m for m in modes if m in so.pool_modes]
        modes = narrowed or modes
    reachable = [m for m in modes if ctx.floor_nodes(m, hw) <= MAX_NODES]
    return reachable or modes


def half_problem(ctx: RecipeContext, sel: Selection, name: str, mode: str) -> str | None:
    """Why P/D pool ``name`` of kind ``mode`` cannot run on half a node
    (``HALF_NODE``), or None: GPUs not picked by ``CUDA_VISIBLE_DEVICES``
    (``context.HALF_NODE_BRANDS``), a node of fewer than 2 GPUs, a KV offload
    whose connector two servers on one host cannot share
    (``RecipeContext.shares_host_socket``), the kind's floor needing more GPUs
    than the half has, or a half that cannot hold the weights and a
    sequence's KV cache with a valid layout (``layout_ok``)."""
    hw = ctx.hw(sel.hardware)
    half = hw.gpu_count // 2
    if hw.brand not in HALF_NODE_BRANDS:
        return f"Half a node needs GPUs picked by CUDA_VISIBLE_DEVICES (NVIDIA or AMD), not {hw.brand} hardware."
    if half < 1:
        return f"A {hw.display_name} node has {hw.gpu_count} GPU: there is no half node to run the pool on."
    shared = ctx.shares_host_socket(sel.kv_offload)
    if shared:
        return f"Not on half a node with this KV offload: {shared}"
    need = ctx.floor_gpus(mode, sel.hardware)
    if need > half:
        return f"{KINDS[mode].label} needs at least {need} GPUs; half a {hw.display_name} node has {half}."
    why = layout_ok(ctx, sel, pool_layout(ctx, sel, name, mode, HALF_NODE), name)
    return (why[:1].upper() + why[1:]) if why else None


def resolve_pd(ctx: RecipeContext, sel: Selection, req: Request, n: Notices) -> tuple[Selection, Notices]:
    """Resolve both P/D pools: mode, then the smallest node count meeting the mode
    floor, the capacity of that pool alone and a valid TP (issue 3). A pool
    asked for on half a node (``HALF_NODE``, by the query or the recipe's
    ``pd_cluster.<role>.nodes: 0``) keeps it where ``half_problem`` finds
    nothing, else gets the smallest count that works, with the reason."""
    from composer.lookup import hw_value

    hw = sel.hardware
    offered = pd_modes(ctx, hw)
    pools = {}
    so = ctx.recipe.strategy_overrides.get("pd_cluster")
    for name in POOLS:
        mode = req.get(f"{name}_mode")
        if mode is not None and mode not in offered:
            n.add("warning", "invalid-pool-mode", f"{name.capitalize()} mode {_short(mode)} is not offered ({', '.join(offered)}); the recipe default is shown.")
            mode = None
        mode = mode or pd_default_mode(ctx, name, offered)
        want = req.get_int(f"{name}_nodes")
        if want is not None and not HALF_NODE <= want <= MAX_NODES:
            n.add("warning", "invalid-nodes", f"The value {name}_nodes={want} is outside {HALF_NODE} (half a node) "
                                              f"to {MAX_NODES} and was ignored.")
            want = None
        role_so = getattr(so, name, None) if so else None
        recipe_nodes = hw_value(role_so.nodes, hw, ctx.hw(hw)) if role_so and role_so.nodes is not None else None
        sel_p = Selection(**{**sel.__dict__, name: Pool(mode, 1)})
        label = f"{name.capitalize()} pool ({KINDS[mode].label})"
        asked = want if want is not None else recipe_nodes
        half_why = None
        if asked == HALF_NODE:
            half_why = half_problem(ctx, sel_p, name, mode)
            if half_why is None:
                pools[name] = Pool(mode, HALF_NODE)
                continue
        floor = ctx.floor_nodes(mode, hw)
        lower = max(floor, asked or 1)
        nodes = smallest_nodes(ctx, sel_p, lower, lambda k, m=mode, nm=name: pool_layout(ctx, sel, nm, m, k), floor, name)
        if nodes is None:
            n.add("error", "capacity", f"{label}: no node count up to {MAX_NODES} of {ctx.hw(hw).display_name} has room for the weights and the KV cache with a valid layout.")
            nodes = min(lower, MAX_NODES)
        elif half_why is not None:
            floor_msg = f"{KINDS[mode].label} needs at least {ctx.floor_gpus(mode, hw)} GPUs."
            why, counts = raise_reasons(ctx, sel_p, 1, floor, nodes, floor_msg,
                                        lambda k, m=mode, nm=name: pool_layout(ctx, sel, nm, m, k), name)
            # the half's own reason first, unless it is the kind's floor, which the text already starts with
            if not (why.startswith(floor_msg) and half_why.startswith(floor_msg[:-1])):
                why = " ".join(x for x in (half_why, why) if x)
            n.add("warning" if want is not None else "info", "nodes-raised",
                  f"{label}: nodes raised from ½ (half a node) to {nodes}: {why}",
                  subject=f"{name}_nodes", old=HALF_NODE, new=nodes, reason=why, per_count=((HALF_NODE, half_why), *counts))
        elif want is None:
            _say_tp_skipped(ctx, sel_p, lower, nodes, lambda k, m=mode, nm=name: pool_layout(ctx, sel, nm, m, k),
                            f"{name}_nodes", f"{label} nodes", n, name)
        elif want is not None and nodes != want:
            floor_msg = f"{KINDS[mode].label} needs at least {ctx.floor_gpus(mode, hw)} GPUs."
            if nodes > want:
                why, counts = raise_reasons(ctx, sel_p, want, floor, nodes, floor_msg,
                                            lambda k, m=mode, nm=name: pool_layout(ctx, sel, nm, m, k), name)
                n.add("warning", "nodes-raised", f"{label}: nodes raised from {want} to {nodes}: {why}",
                      subject=f"{name}_nodes", old=want, new=nodes, reason=why, per_count=counts)
            else:
                own = layout_ok(ctx, sel_p, pool_layout(ctx, sel, name, mode, want), name) or ""
                why = f"{own} No larger count up to {MAX_NODES} works."
                n.add("warning", "nodes-lowered", f"{label}: nodes lowered from {want} to {nodes}: {why}",
                      subject=f"{name}_nodes", old=want, new=nodes, reason=why, per_count=((want, own),))
        pools[name] = Pool(mode, nodes)
    return Selection(**{**sel.__dict__, "nodes": pd_node_count(pools.values()), **pools}), n


def pd_node_count(pools) -> int:
    """GPU nodes of P/D ``pools`` (``Pool`` values): their node counts, plus
    one node for the pools on half a node (two halves share it)."""
    pools = list(pools)
    return sum(p.nodes for p in pools) + (1 if any(p.half for p in pools) else 0)
