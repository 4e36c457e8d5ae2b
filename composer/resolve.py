"""From a ``Request`` to a ``Selection``: every dimension checked and completed.

Precedence when the query is silent: ``meta.default_hardware`` (seed: honoured on
a visit with no parameters), the recipe's ``default_strategy`` (its multi-node
sibling when one node cannot hold the weights), the smallest node count that
meets the strategy floor, holds the weights and gives a valid TP. When the query
asks for something impossible the resolver picks what works and says so in a
notice; it never raises.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from composer.context import MAX_NODES, MULTI_NODE_SIBLING, RecipeContext
from composer.layers import compose_layers
from composer.layout import DEFAULT_GPU_UTIL, Layout, capacity, layout_problem, make_layout, strategy_mode
from composer.modes import available_modes, default_mode, mode_block_reason, mode_label, moded_features, parse_fmode, preferred_mode
from composer.notices import Notices
from composer.query import KNOWN_VERSIONS, SCHEMA_VERSION, Request, _short

POOLS = ("prefill", "decode")
POOL_MODES = ("tp", "tep", "dep")


@dataclass(frozen=True)
class Pool:
    mode: str
    nodes: int


@dataclass(frozen=True)
class Selection:
    """A complete, valid choice in every dimension (ids as in the query)."""

    hardware: str
    variant: str
    strategy: str
    nodes: int
    features: tuple[str, ...]
    advanced: tuple[str, ...]
    kv_offload: str  # "" = off
    prefill: Pool | None = None
    decode: Pool | None = None
    install: str = "pip"  # pip | docker | k8s: how commands are shown
    task: str | None = None  # omni recipes: the task (its key or id)
    instances: int = 1  # vLLM instances behind a KV store's router (kv_store_lb)
    modes: tuple[tuple[str, str], ...] = ()  # (feature id, mode) of every moded feature, recipe order
    cuda: str | None = None  # CUDA version of the container image, where the recipe offers several

    def mode(self, fid: str) -> str | None:
        """The mode in force for feature ``fid`` (None: the feature has no modes)."""
        return dict(self.modes).get(fid)

    def pool(self, name: str) -> Pool | None:
        return getattr(self, name)

    def to_dict(self) -> dict:
        d = {
            "hardware": self.hardware, "variant": self.variant, "strategy": self.strategy,
            "nodes": self.nodes, "features": list(self.features), "advanced": list(self.advanced),
            "kv_offload": self.kv_offload or "off", "install": self.install,
        }
        if self.task is not None:
            d["task"] = self.task
        if self.instances != 1:
            d["instances"] = self.instances
        if self.modes:
            d["modes"] = dict(self.modes)
        if self.cuda is not None:
            d["cuda"] = self.cuda
        for p in POOLS:
            pool = self.pool(p)
            if pool:
                d[f"{p}_mode"] = pool.mode
                d[f"{p}_nodes"] = pool.nodes
        return d


def util_in_force(ctx: RecipeContext, sel: Selection, pool: str | None = None) -> float:
    """The final ``--gpu-memory-utilization`` of the composed command (vLLM default 0.9)."""
    return memory_flags(ctx, sel, pool)[0]


def memory_flags(ctx: RecipeContext, sel: Selection, pool: str | None = None) -> tuple[float, str | None, str | None]:
    """``(gpu-memory-utilization, --kv-cache-dtype, --max-model-len)`` of the
    composed command, as the memory model needs them before the node count is
    known. Topology flags never set them, so they are cached per selection
    without its node counts."""
    key = (sel.hardware, sel.variant, sel.strategy, sel.features, sel.advanced, sel.kv_offload, pool)
    cache = ctx.__dict__.setdefault("_memory_flags_cache", {})
    if key not in cache:
        cache[key] = _memory_flags(ctx, sel, pool)
    return cache[key]


def _memory_flags(ctx: RecipeContext, sel: Selection, pool: str | None) -> tuple[float, str | None, str | None]:
    from composer.layers import CommandSpec

    spec = CommandSpec(pool or "serve", 0, (), pool)
    try:
        argv, _, _ = compose_layers(ctx, sel, spec, None)
    except ValueError:
        return DEFAULT_GPU_UTIL, None, None

    def value(key: str) -> str | None:
        e = argv.get(key)
        return e.unit.value if e is not None else None

    try:
        util = float(value("gpu-memory-utilization") or DEFAULT_GPU_UTIL)
    except ValueError:
        util = DEFAULT_GPU_UTIL
    return util, value("kv-cache-dtype"), value("max-model-len")


def layout_for(ctx: RecipeContext, sel: Selection, nodes: int) -> Layout:
    sid = sel.strategy
    single = ctx.strategy(sid).deploy_type == "single_node"
    util, kv_dtype, mml = memory_flags(ctx, sel) if single else (DEFAULT_GPU_UTIL, None, None)
    return make_layout(ctx, strategy_mode(ctx, sid), sel.hardware, sel.variant, nodes, single_node=single, sid=sid,
                       util=util, kv_dtype=kv_dtype, max_model_len=mml)


def pool_layout(ctx: RecipeContext, sel: Selection, name: str, mode: str, nodes: int) -> Layout:
    role_so = getattr(ctx.recipe.strategy_overrides.get("pd_cluster"), name, None)
    role_st = getattr(ctx.strategy("pd_cluster"), name, None)
    role_tp = (role_so.tp if role_so and role_so.tp else None) or (role_st.tp if role_st and role_st.tp else None)
    return make_layout(ctx, mode, sel.hardware, sel.variant, nodes, role_tp=role_tp if mode == "dep" else None)


def layout_ok(ctx: RecipeContext, sel: Selection, lay: Layout, pool: str | None = None) -> str | None:
    """None if ``lay`` holds the weights, leaves KV room (one sequence of an
    explicit ``--max-model-len``) and is valid for the model, else why not.
    The utilization, KV dtype and max-model-len are those of ``sel``'s
    composed command (of ``pool`` for P/D)."""
    problem = layout_problem(ctx, lay)
    if problem:
        return problem
    util, kv_dtype, mml = memory_flags(ctx, sel, pool)
    cap = capacity(ctx, lay, sel.hardware, sel.variant, util, sel.task, kv_dtype, mml)
    if not cap.fits:
        where = f"{lay.replica_nodes} × {ctx.hw(sel.hardware).display_name}"
        if cap.weights_fit and (cap.kv_gb or 0) > 0:
            return (f"on {where} the KV cache holds ~{cap.kv_tokens:,} tokens, less than one sequence of "
                    f"--max-model-len {cap.max_model_len:,}.")
        return cap.describe(where)
    return None


def smallest_nodes(ctx: RecipeContext, sel: Selection, lower: int, make, floor: int = 1, pool: str | None = None) -> int | None:
    """Smallest n in [lower, MAX_NODES] whose layout ``make(n)`` is ok; if there
    is none, the largest ok n in [floor, lower) (a request above every valid
    count comes down to the nearest one); else None."""
    for n in range(max(1, lower), MAX_NODES + 1):
        if layout_ok(ctx, sel, make(n), pool) is None:
            return n
    for n in range(min(lower, MAX_NODES + 1) - 1, max(1, floor) - 1, -1):
        if layout_ok(ctx, sel, make(n), pool) is None:
            return n
    return None


def resolve(ctx: RecipeContext, req: Request) -> tuple[Selection, Notices]:
    """Resolve ``req`` into a Selection plus notices. Never raises on user input."""
    n = Notices()
    for p in req.problems:
        n.add("warning", "query-ignored", p)
    r = ctx.recipe
    version = req.get("v")
    if version is not None and version not in KNOWN_VERSIONS:
        n.add("warning", "query-version", f"This link was written for query version {_short(version)}; it was read as version {SCHEMA_VERSION}.")

    # variant
    variant = req.get("variant") or "default"
    if variant not in r.variants:
        n.add("warning", "invalid-variant", f"Variant {_short(variant)} is not in this recipe; the default variant is shown.")
        variant = "default" if "default" in r.variants else next(iter(r.variants))

    # hardware: a GPU asked for without a variant brings the checkpoint that
    # runs there (issue 12.6: an NVFP4 default does not make MI355X unusable).
    hw = req.get("hardware")
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
    if hw is not None:
        if hw not in ctx.listed_hardware:
            n.add("warning", "invalid-hardware", f"Hardware {_short(hw)} is not offered for this recipe; {ctx.hw(default_hw).display_name} is shown.")
            hw = default_hw
        else:
            reason = ctx.hardware_block_reason(hw, variant)
            if reason:
                n.add("warning", "hardware-unavailable", f"{ctx.hw(hw).display_name}: {reason} {ctx.hw(default_hw).display_name} is shown instead.")
                hw = default_hw
    else:
        hw = default_hw

    # strategy
    offered = ctx.strategies
    supported = [s for s in offered if ctx.strategy_block_reason(s, hw) is None]
    want_nodes = req.get_int("nodes")
    if want_nodes is not None and not 1 <= want_nodes <= MAX_NODES:
        n.add("warning", "invalid-nodes", f"The value nodes={want_nodes} is outside 1–{MAX_NODES} and was ignored.")
        want_nodes = None
    sid = req.get("strategy")
    if sid is not None:
        if sid not in offered:
            n.add("warning", "invalid-strategy", f"Strategy {_short(sid)} is not offered by this recipe; the recommended strategy is shown.")
            sid = None
        elif sid not in supported:
            n.add("warning", "strategy-unavailable", f"{ctx.strategy_block_reason(sid, hw)} The recommended strategy is shown.")
            sid = None
    if sid is None:
        sid = recommend(ctx, hw, variant, want_nodes, supported)
        default = r.default_strategy
        if (sid and want_nodes is None and default in supported and sid != default
                and ctx.strategy(default).deploy_type == "single_node" and ctx.strategy(sid).deploy_type == "multi_node"):
            weights = ctx.weights_gb(variant)
            verified = [c.strategy for c in r.meta.verified_configs
                        if c.hardware == hw and c.strategy != sid and c.strategy in supported]
            also = (f" The recipe verified {', '.join(ctx.strategy_label(v) for v in verified)} on "
                    f"{ctx.hw(hw).display_name}; pick it under Strategy." if verified else "")
            n.add("info", "strategy-auto",
                  f"One {ctx.hw(hw).display_name} node ({ctx.hw(hw).vram_gb:g} GB) cannot hold {weights:g} GB of weights, "
                  f"so {ctx.strategy_label(sid)} is shown instead of the recipe's default {ctx.strategy_label(default)}.{also}")
        if sid is None:
            n.add("error", "no-strategy", f"This recipe offers no strategy that runs on {ctx.hw(hw).display_name}.")
            sid = offered[0] if offered else "single_node_tp"

    # features and advanced (before nodes: they move gpu-memory-utilization)
    feats = req.get_list("features")
    if feats is None:
        feats = ctx.default_features(hw, variant)
    else:
        unknown = [f for f in feats if f not in r.features]
        known = tuple(f for f in feats if f in r.features)
        if unknown and not known:
            n.add("warning", "invalid-feature", f"Unknown feature(s) {', '.join(_short(f) for f in unknown)}: the recipe's default features are shown.")
            known = ctx.default_features(hw, variant)
        elif unknown:
            n.add("warning", "invalid-feature", f"Unknown feature(s) {', '.join(_short(f) for f in unknown)} ignored.")
        feats = known
        # Mutually exclusive features: the one listed last (the latest toggle) wins.
        kept: list[str] = []
        for f in reversed(feats):
            clash = [k for k in kept if k in ctx.exclusive_with(f)]
            if clash:
                n.add("warning", "feature-exclusive", f"{feature_label(ctx, f)} cannot be combined with {feature_label(ctx, clash[0])}; it was turned off.")
                continue
            kept.append(f)
        feats = tuple(reversed(kept))
        for f in feats:
            why = ctx.feature_block_reason(f, sid)
            if why:
                n.add("warning", "feature-unavailable", f"{feature_label(ctx, f)}: {why} It is not emitted.")
    # Recipe order, whatever the order of the query: one selection, one URL, one argv.
    feats = tuple(f for f in r.features if f in feats)
    modes = resolve_modes(ctx, req, hw, variant, feats, n)
    adv = req.get_list("advanced") or ()
    visible = {k.id for k in ctx.advanced_knobs(sid)}
    bad = [a for a in adv if a not in visible]
    for a in bad:
        if a in ctx.all_advanced_ids:
            n.add("warning", "advanced-unavailable", f"Advanced option {ctx.advanced_label(a)} does not apply to {ctx.strategy_label(sid)} and is not emitted.")
        else:
            n.add("warning", "invalid-advanced", f"Unknown Advanced option {_short(a)} ignored.")
    adv = tuple(a for a in adv if a in visible)

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
        why = ctx.kv_block_reason(kv, sid, hw)
        if why:
            n.add("warning", "kv-offload-unavailable", f"{why} KV offload is off.")
            kv = ""

    install = default_install(ctx)
    want_install = req.get("install")
    if want_install is not None:
        if want_install not in ("pip", "docker", "k8s"):
            n.add("warning", "invalid-install", f"The value install={_short(want_install)} is not pip, docker or k8s; {install} is shown.")
        else:
            install = want_install
    if install in ("docker", "k8s"):
        from composer.run_forms import docker_image, docker_reason
        if docker_image(ctx, hw, variant, kv) is None:
            n.add("warning", "install-unavailable", f"{docker_reason(ctx, hw, variant, kv)} The pip commands are shown.")
            install = "pip"
    task = None
    if ctx.is_omni and ctx.omni_tasks():
        want_task = req.get("task")
        idents = [t.ident for t in ctx.omni_tasks()]
        if want_task is not None and want_task not in idents:
            n.add("warning", "invalid-task", f"Task {_short(want_task)} is not one of this recipe's ({', '.join(idents)}); the first is shown.")
        task = want_task if want_task in idents else idents[0]
    elif req.get("task") is not None:
        n.add("warning", "query-ignored", "The parameter task applies only to vLLM-Omni recipes and was ignored.")
    instances = resolve_instances(ctx, req, kv, ctx.strategy(sid).deploy_type, n)
    cuda = resolve_cuda(ctx, req, hw, variant, n)
    sel = Selection(hw, variant, sid, 1, tuple(feats), adv, kv, install=install, task=task, instances=instances,
                    modes=modes, cuda=cuda)
    deploy = ctx.strategy(sid).deploy_type
    pool_params = [k for k in ("prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes") if req.get(k) is not None]
    if deploy != "pd_cluster" and pool_params:
        n.add("warning", "query-ignored", f"The parameter(s) {', '.join(pool_params)} apply only to P/D disaggregation and were ignored.")
    if deploy == "pd_cluster" and want_nodes is not None:
        n.add("warning", "query-ignored", f"The parameter nodes={want_nodes} does not apply to P/D disaggregation: its pools are sized by prefill_nodes and decode_nodes.")
    if deploy == "pd_cluster":
        return resolve_pd(ctx, sel, req, n)
    hwname = ctx.hw(hw).display_name
    if deploy == "single_node":
        if want_nodes not in (None, 1):
            n.add("warning", "nodes-adjusted", f"{ctx.strategy_label(sid)} runs on one node; nodes={want_nodes} was set to 1.")
        lay = layout_for(ctx, sel, 1)
        why = layout_ok(ctx, sel, lay)
        if sid == "omni" and why:
            n.add("error", "capacity", why)
            return sel, n
        if why:
            n.add("error", "capacity", f"{why} {fit_hint(ctx, sel)}")
        return sel, n
    floor = max(2, ctx.floor_nodes(sid, hw))
    lower = max(floor, want_nodes or 1)
    nodes = smallest_nodes(ctx, sel, lower, lambda k: layout_for(ctx, sel, k), floor)
    if nodes is None:
        n.add("error", "capacity", f"No node count up to {MAX_NODES} of {hwname} gives {ctx.strategy_label(sid)} a valid layout with room for the weights and the KV cache. {fit_hint(ctx, sel)}")
        nodes = lower if lower <= MAX_NODES else MAX_NODES
    elif want_nodes is not None and nodes != want_nodes:
        floor_msg = f"{ctx.strategy_label(sid)} needs at least {floor} nodes ({max(ctx.floor_gpus(sid, hw), 2 * ctx.hw(hw).gpu_count) if floor == 2 else ctx.floor_gpus(sid, hw)} GPUs)."
        why = raise_reasons(ctx, sel, want_nodes, floor, nodes, floor_msg, lambda k: layout_for(ctx, sel, k))
        if nodes > want_nodes:
            n.add("warning", "nodes-raised", f"Nodes raised from {want_nodes} to {nodes}: {why}",
                  subject="nodes", old=want_nodes, new=nodes, reason=why)
        else:
            why = f"{layout_ok(ctx, sel, layout_for(ctx, sel, want_nodes))} No larger count up to {MAX_NODES} works."
            n.add("warning", "nodes-lowered", f"Nodes lowered from {want_nodes} to {nodes}: {why}",
                  subject="nodes", old=want_nodes, new=nodes, reason=why)
    return replace(sel, nodes=nodes), n


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


def raise_reasons(ctx: RecipeContext, sel: Selection, want: int, floor: int, got: int, floor_msg: str, make,
                  pool: str | None = None) -> str:
    """Why every node count from ``want`` up to ``got - 1`` does not work: the
    strategy floor, then per count the capacity or layout problem."""
    reasons = [floor_msg] if want < floor else []
    for k in range(max(want, floor), got):
        why = layout_ok(ctx, sel, make(k), pool)
        if why:
            reasons.append(f"{k} nodes: {why}")
    return " ".join(reasons)


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


def default_install(ctx: RecipeContext) -> str:
    """``docker`` when the recipe's ``model.install`` lists docker before pip or
    disables pip (semantics §2.1), else ``pip``."""
    inst = ctx.recipe.model.install
    if isinstance(inst, dict):
        keys = [k for k in inst if k in ("pip", "docker")]
        if inst.get("pip") is False or (keys and keys[0] == "docker" and inst.get("docker") is not False):
            return "docker"
    return "pip"


def recommend(ctx: RecipeContext, hw: str, variant: str, want_nodes: int | None, supported: list[str]) -> str | None:
    """The strategy shown when the query names none (semantics §2.5, with the
    seed's capacity rule: a single-node default that cannot hold the weights
    yields its multi-node sibling)."""
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
        sibling = MULTI_NODE_SIBLING.get(default)
        if multi_wanted and sibling in supported:
            return sibling
    for cand in (("multi_node_tp", "multi_node_dep", "multi_node_tep") if multi_wanted else ("single_node_tp",)):
        if cand in supported:
            return cand
    kind = "single_node" if not multi_wanted else "multi_node"
    same = [s for s in supported if ctx.strategy(s).deploy_type == kind]
    return (same or supported)[0]


def fit_hint(ctx: RecipeContext, sel: Selection) -> str:
    """What would fit instead: single nodes that hold the weights, or a node count."""
    weights = ctx.weights_gb(sel.variant)
    if weights is None:
        return ""
    hold = [ctx.hw(h).display_name for h in ctx.listed_hardware if h != sel.hardware
            and ctx.hardware_block_reason(h, sel.variant) is None and ctx.fits_one_node(h, sel.variant)]
    hw = ctx.hw(sel.hardware)
    parts = []
    multi = [s for s in ctx.strategies if ctx.strategy(s).deploy_type == "multi_node" and ctx.strategy_block_reason(s, sel.hardware) is None]
    if multi:
        parts.append(f"On {hw.display_name}, choose a multi-node strategy ({ctx.strategy_label(multi[0])}).")
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
    found = set()
    for s in ctx.strategies:
        if s == "pd_cluster":
            continue
        if s.endswith("dep"):
            found.add("dep")
        elif s.endswith("tep"):
            found.add("tep")
        else:
            found.add("tp")
    modes = [m for m in POOL_MODES if m in found] or ["tp"]
    so = ctx.recipe.strategy_overrides.get("pd_cluster")
    if so and so.pool_modes:
        narrowed = [m for m in modes if m in so.pool_modes]
        modes = narrowed or modes
    reachable = [m for m in modes if ctx.floor_nodes(m, hw) <= MAX_NODES]
    return reachable or modes


def resolve_pd(ctx: RecipeContext, sel: Selection, req: Request, n: Notices) -> tuple[Selection, Notices]:
    """Resolve both P/D pools: mode, then the smallest node count meeting the mode
    floor, the capacity of that pool alone and a valid TP (issue 3)."""
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
        if want is not None and not 1 <= want <= MAX_NODES:
            n.add("warning", "invalid-nodes", f"The value {name}_nodes={want} is outside 1–{MAX_NODES} and was ignored.")
            want = None
        role_so = getattr(so, name, None) if so else None
        recipe_nodes = hw_value(role_so.nodes, hw, ctx.hw(hw)) if role_so and role_so.nodes is not None else None
        sel_p = Selection(**{**sel.__dict__, name: Pool(mode, 1)})
        floor = ctx.floor_nodes(mode, hw)
        lower = max(floor, want or recipe_nodes or 1)
        nodes = smallest_nodes(ctx, sel_p, lower, lambda k, m=mode, nm=name: pool_layout(ctx, sel, nm, m, k), floor, name)
        label = f"{name.capitalize()} pool ({mode.upper()})"
        if nodes is None:
            n.add("error", "capacity", f"{label}: no node count up to {MAX_NODES} of {ctx.hw(hw).display_name} has room for the weights and the KV cache with a valid layout.")
            nodes = min(lower, MAX_NODES)
        elif want is not None and nodes != want:
            floor_msg = f"{mode.upper()} needs at least {ctx.floor_gpus(mode, hw)} GPUs."
            if nodes > want:
                why = raise_reasons(ctx, sel_p, want, floor, nodes, floor_msg,
                                    lambda k, m=mode, nm=name: pool_layout(ctx, sel, nm, m, k), name)
                n.add("warning", "nodes-raised", f"{label}: nodes raised from {want} to {nodes}: {why}",
                      subject=f"{name}_nodes", old=want, new=nodes, reason=why)
            else:
                why = f"{layout_ok(ctx, sel_p, pool_layout(ctx, sel, name, mode, want), name)} No larger count up to {MAX_NODES} works."
                n.add("warning", "nodes-lowered", f"{label}: nodes lowered from {want} to {nodes}: {why}",
                      subject=f"{name}_nodes", old=want, new=nodes, reason=why)
        pools[name] = Pool(mode, nodes)
    return Selection(**{**sel.__dict__, "nodes": pools["prefill"].nodes + pools["decode"].nodes, **pools}), n
