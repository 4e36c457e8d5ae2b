"""The seed's layer order, for one command.

base → variant → strategy → hardware → Advanced → Features → KV offload
(seed, "Features and Advanced: The Override Order"). Each layer adds argv units
and env entries; a later layer wins per flag identity / env name and the
builders record what it replaced (``composer.argv``).

Deliberate differences from upstream (semantics §16): hardware blocks are
additive from the least to the most specific key (no block silently replaces
another, W8/W9); KV-option env is applied after every recipe env (W9); features
own their flags (W11); hidden Advanced knobs are never emitted (W29).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from composer.argv import ArgvBuilder, Source, Unit, parse_tokens
from composer.context import RecipeContext
from composer.parallel import Layout
from composer.lookup import lookup_blocks
from composer.modes import default_mode, mode_block_reason
from composer.schema import scalar_to_str

LAYERS = ("base", "variant", "strategy", "hardware", "advanced", "features", "kv_offload")


@dataclass
class EnvEntry:
    value: str
    source: Source
    replaced: list[tuple[str, Source]] = field(default_factory=list)


class EnvBuilder:
    """Environment with last-writer-wins per name and provenance."""

    def __init__(self) -> None:
        self.entries: dict[str, EnvEntry] = {}

    def add(self, env: Mapping[str, str], source: Source) -> None:
        for k, v in env.items():
            old = self.entries.pop(k, None)
            e = EnvEntry(v, source)
            if old is not None:
                e.replaced = old.replaced + [(old.value, old.source)]
            self.entries[k] = e

    def values(self) -> dict[str, str]:
        return {k: e.value for k, e in self.entries.items()}


@dataclass(frozen=True)
class CommandSpec:
    """What one command is: its role, node rank in its pool, and the topology units."""

    role: str  # serve | head | worker | prefill | decode
    rank: int
    topology: tuple[Unit, ...]
    pool: str | None = None  # prefill | decode for P/D


def feature_arg_sets(ctx: RecipeContext, fid: str) -> list[tuple[str, list[str]]]:
    """Every ``(key path, args)`` a feature can emit: plain args, modes, overrides."""
    f = ctx.recipe.features[fid]
    sets = []
    if f.args:
        sets.append((f"features.{fid}.args", list(f.args)))
    for hk, block in f.hardware_overrides.items():
        if block.args:
            sets.append((f"features.{fid}.hardware_overrides.{hk}.args", list(block.args)))
    for mk, mode in (f.modes or {}).items():
        if mode.args:
            sets.append((f"features.{fid}.modes.{mk}.args", list(mode.args)))
        for hk, block in mode.hardware_overrides.items():
            if block.args:
                sets.append((f"features.{fid}.modes.{mk}.hardware_overrides.{hk}.args", list(block.args)))
    return sets


def feature_args(ctx: RecipeContext, fid: str, hw_id: str, variant_id: str, mode_id: str | None = None) -> tuple[str, list[str]]:
    """``(recipe key path, args)`` feature ``fid`` emits on ``hw_id``: a hardware
    override (most specific key wins) replaces the plain args; a moded feature
    emits ``mode_id`` (default: its default mode here, ``composer.modes``)."""
    from composer.lookup import lookup_value

    hw = ctx.hw(hw_id)
    f = ctx.recipe.features[fid]
    if f.modes:
        if mode_id is None or mode_id not in f.modes:
            mode_id = default_mode(ctx, fid, hw_id, variant_id)
        mode = f.modes[mode_id]
        found = lookup_value({k: b for k, b in mode.hardware_overrides.items() if b.args}, hw_id, hw)
        if found:
            return f"features.{fid}.modes.{mode_id}.hardware_overrides.{found[0]}.args", list(found[1].args)
        return f"features.{fid}.modes.{mode_id}.args", list(mode.args)
    found = lookup_value({k: b for k, b in f.hardware_overrides.items() if b.args}, hw_id, hw)
    if found:
        return f"features.{fid}.hardware_overrides.{found[0]}.args", list(found[1].args)
    return f"features.{fid}.args", list(f.args)


def feature_emitted(ctx: RecipeContext, sel, fid: str) -> bool:
    """Whether an enabled feature emits its args: it exists, its ``strategies``
    allow the strategy, and (with modes) the mode in force can run here."""
    if fid not in ctx.recipe.features or ctx.feature_block_reason(fid, sel.strategy):
        return False
    mode = sel.mode(fid)
    return mode is None or mode_block_reason(ctx, fid, mode, sel.hardware, sel.variant) is None


def owned_units(ctx: RecipeContext, fid: str) -> frozenset[Unit]:
    """Flag settings a feature owns: those (flag and value) present in every arg
    set it can emit. Spec decoding owns its ``--speculative-config`` value, not
    the ``--max-num-seqs`` cap only its AMD override sets; a context-length
    feature does not own the base ``--max-model-len`` it replaces."""
    cache = ctx.__dict__.setdefault("_owned_units", {})
    if fid not in cache:
        units = None
        for _, args in feature_arg_sets(ctx, fid):
            try:
                found = set(parse_tokens(args))
            except ValueError:
                continue
            units = found if units is None else units & found
        cache[fid] = frozenset(units or ())
    return cache[fid]


def compose_layers(ctx: RecipeContext, sel, spec: CommandSpec | None, lay: Layout | None):
    """Build argv units and env for one command of selection ``sel``.

    ``spec`` carries the topology units (None: compose without them, e.g. to read
    the gpu-memory-utilization in force before the node count is known).
    Returns ``(ArgvBuilder, EnvBuilder, removed)``; ``removed`` lists
    ``(feature id, Entry)`` for flags dropped because their feature is off.
    Raises ``composer.argv.ArgvError`` on malformed recipe args.
    """
    r = ctx.recipe
    hw_id, hw = sel.hardware, ctx.hw(sel.hardware)
    sid = sel.strategy
    strat = ctx.strategy(sid)
    so = r.strategy_overrides.get(sid)
    pool = spec.pool if spec else None
    variant = ctx.variant(sel.variant)
    vkey = f"variants.{sel.variant}"
    argv, env = ArgvBuilder(), EnvBuilder()

    # 1 base
    argv.add_tokens(r.model.base_args, Source("base", "model.base_args"))
    env.add(r.model.base_env, Source("base", "model.base_env"))
    # 2 variant
    argv.add_tokens(variant.extra_args, Source("variant", f"{vkey}.extra_args"))
    env.add(variant.extra_env, Source("variant", f"{vkey}.extra_env"))
    # 3 strategy: the strategy's template args and the computed topology
    skey = f"strategies/{sid}"
    role = getattr(strat, pool) if pool else None
    role_so = getattr(so, pool, None) if (so is not None and pool) else None
    if not pool:
        argv.add_tokens(strat.vllm_args, Source("strategy", f"{skey}.vllm_args"))
        env.add(strat.env, Source("strategy", f"{skey}.env"))
    if spec is not None:
        argv.add(list(spec.topology), Source("strategy", f"{TOPOLOGY_SOURCE} of {_node_name(spec)}"))
    if strat.kind == "omni":
        _omni_layer(ctx, sel, argv)
    # 4 hardware, recipe-wide: recipe and variant blocks, least → most specific.
    # A strategy-level block that declares args for the same key replaces the
    # recipe-level one for this strategy (issue 10: written to drop a flag).
    replaced = {k for k, b in (so.hardware_overrides.items() if so is not None else ()) if b.extra_args or b.args}
    for prefix, blocks in (("hardware_overrides", r.hardware_overrides), (f"{vkey}.hardware_overrides", variant.hardware_overrides)):
        for key, block in lookup_blocks(blocks, hw_id, hw):
            if prefix == "hardware_overrides" and key in replaced:
                continue
            _hardware_block(argv, env, f"{prefix}.{key}", block)
    # ... then what is specific to this strategy and P/D role wins over them:
    # the role's template args, the recipe's strategy and role overrides, and
    # their hardware blocks (a decode pool's --no-enable-prefix-caching is not
    # undone by the recipe's Blackwell block).
    if role is not None:
        argv.add_tokens(role.vllm_args, Source("strategy", f"{skey}.{pool}.vllm_args"))
        env.add(_gate_env(ctx, hw_id, role.env), Source("strategy", f"{skey}.{pool}.env"))
    if so is not None:
        okey = f"strategy_overrides.{sid}"
        argv.add_tokens(so.extra_args, Source("strategy", f"{okey}.extra_args"))
        argv.add_tokens(so.vllm_args, Source("strategy", f"{okey}.vllm_args"))
        env.add(so.env, Source("strategy", f"{okey}.env"))
        env.add(so.extra_env, Source("strategy", f"{okey}.extra_env"))
        if role_so is not None:
            argv.add_tokens(role_so.extra_args, Source("strategy", f"{okey}.{pool}.extra_args"))
            argv.add_tokens(role_so.vllm_args, Source("strategy", f"{okey}.{pool}.vllm_args"))
            env.add(role_so.env, Source("strategy", f"{okey}.{pool}.env"))
        for key, block in lookup_blocks(so.hardware_overrides, hw_id, hw):
            _hardware_block(argv, env, f"{okey}.hardware_overrides.{key}", block)
        if role_so is not None:
            for key, block in lookup_blocks(role_so.hardware_overrides, hw_id, hw):
                _hardware_block(argv, env, f"{okey}.{pool}.hardware_overrides.{key}", block)
    # 5 advanced
    knobs = {k.id: k for k in ctx.advanced_knobs(sid)}
    for aid in sel.advanced:
        if aid in knobs:
            argv.add_tokens(knobs[aid].args, Source("advanced", knobs[aid].key))
    # 6 features
    enabled = [f for f in sel.features if feature_emitted(ctx, sel, f)]
    for fid in enabled:
        key, args = feature_args(ctx, fid, hw_id, sel.variant, sel.mode(fid))
        argv.add_tokens(args, Source("features", key))
    # A feature that is off removes the settings it owns even when another layer
    # emits them (upstream W11: K3's AMD block kept --reasoning-parser on).
    removed: list[tuple[str | None, object]] = []
    enabled_owned = set().union(*(owned_units(ctx, f) for f in enabled)) if enabled else set()
    for fid in r.features:
        if fid in enabled:
            continue
        for unit in sorted(owned_units(ctx, fid) - enabled_owned, key=lambda u: u.key):
            entry = argv.get(unit.key)
            if entry is not None and entry.unit == unit and entry.source.layer != "features":
                argv.remove(unit.key)
                removed.append((fid, entry))
    # 7 KV offload
    kv = sel.kv_offload
    if kv:
        opt = ctx.catalog.taxonomy.kv_offload.get(kv)
        if opt is not None:
            argv.add_tokens(opt.args, Source("kv_offload", f"kv_offload.{kv}.args"))
            env.add(opt.env, Source("kv_offload", f"kv_offload.{kv}.env"))
        else:
            store = ctx.strategy(kv)
            vllm = store.vllm or {}
            pd_args = store.pd[pool].args if pool and pool in store.pd else None
            if pd_args:
                # P/D keeps its NIXL transfer: a MultiConnector combines it with the store.
                argv.add_tokens([str(x) for x in pd_args], Source("kv_offload", f"kv_store/{kv}.pd.{pool}.args"))
            else:
                argv.add_tokens([str(x) for x in vllm.get("vllm_args", [])], Source("kv_offload", f"kv_store/{kv}.vllm.vllm_args"))
            env.add({str(k): str(scalar_to_str(v)) for k, v in (vllm.get("env") or {}).items()}, Source("kv_offload", f"kv_store/{kv}.vllm.env"))
    if spec is not None:
        removed += _reassert_topology(argv, spec)
    return argv, env, removed


def _hardware_block(argv: ArgvBuilder, env: EnvBuilder, prefix: str, block) -> None:
    """One hardware block; each list under its own key path (the lint and
    Explain name the same one)."""
    argv.add_tokens(block.extra_args, Source("hardware", f"{prefix}.extra_args"))
    argv.add_tokens(block.args, Source("hardware", f"{prefix}.args"))
    env.add(block.extra_env, Source("hardware", f"{prefix}.extra_env"))


MNNVL_ENV = frozenset({"NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE", "UCX_NET_DEVICES"})
"""Tuning for multi-node NVLink domains (GB200/GB300 NVL trays) that P/D
templates carry for every node; elsewhere it is dropped (``_gate_env``)."""


def _gate_env(ctx: RecipeContext, hw_id: str, env) -> dict:
    """A P/D template's env without the multi-node-NVLink tuning on hardware
    that has no such NVLink domain (``HardwareProfile.mnnvl``)."""
    if ctx.hw(hw_id).has_mnnvl:
        return dict(env)
    return {k: v for k, v in env.items() if k not in MNNVL_ENV}


def _omni_layer(ctx: RecipeContext, sel, argv: ArgvBuilder) -> None:
    """vLLM-Omni: the task's extra args (refined per hardware) and the recipe's
    ``omni.port`` (semantics §14)."""
    task = ctx.omni_task(sel.task)
    if task is not None:
        i = ctx.omni_tasks().index(task)
        argv.add_tokens(task.extra_args, Source("strategy", f"omni.tasks[{i}].extra_args"))
        block = task.hardware_overrides.get(sel.hardware)
        if block is not None:
            argv.add_tokens(block.extra_args, Source("strategy", f"omni.tasks[{i}].hardware_overrides.{sel.hardware}.extra_args"))
    if ctx.recipe.omni and ctx.recipe.omni.port:
        argv.add_tokens(["--port", str(ctx.recipe.omni.port)], Source("strategy", "omni.port"))


TOPOLOGY_KEYS = frozenset({
    "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "data-parallel-size-local",
    "data-parallel-address", "data-parallel-rpc-port", "data-parallel-start-rank", "nnodes", "node-rank",
    "master-addr", "headless",
})
"""Flags that describe the parallel layout and rendezvous: the composer computes
them from the strategy, hardware and node count, and no recipe layer may change
them afterwards (the summary and the capacity check describe that layout)."""
TOPOLOGY_SOURCE = "composer: topology"


def _node_name(spec: CommandSpec) -> str:
    """The node as its tab names it: P/D pool nodes count from 1, others from 0 (head)."""
    return f"{spec.role} node {spec.rank + 1}" if spec.pool else f"{spec.role} node {spec.rank}"


def _reassert_topology(argv: ArgvBuilder, spec: CommandSpec) -> list[tuple[str | None, object]]:
    """Put the computed topology back over any recipe value for the same flags,
    drop topology flags the layout does not use, and apply vLLM's launch rules
    for load balancing. Returns the displaced entries as ``(None, Entry)`` for
    notices.

    Launch rules, from vLLM 0.33's own checks (``EngineArgs.create_engine_config``
    in vllm/engine/arg_utils.py, ``run_headless`` in vllm/entrypoints/cli/serve.py):

    * ``--data-parallel-hybrid-lb`` needs ``--data-parallel-size-local`` ("requires
      --data-parallel-size-local"), and with a local size of 1 vLLM switches to
      external LB: it is kept only for DP layouts with more than one local rank
      spread over several nodes;
    * ``--data-parallel-external-lb`` and ``--data-parallel-rank`` (which implies
      it) need a DP rank per process, which none of our layouts assigns: never kept;
    * ``--api-server-count`` is refused in headless mode: dropped on followers;
    * ``--headless`` never goes with hybrid LB ("not applicable in headless
      mode"): hybrid is only kept for DP layouts, whose nodes all serve their API;
    * followers of a multi-node TP/TEP/PP group always run ``--headless``.
    """
    displaced: list[tuple[str | None, object]] = []
    wanted = {u.key: u for u in spec.topology}
    local = wanted.get("data-parallel-size-local")
    size = wanted.get("data-parallel-size")
    hybrid_ok = (local is not None and size is not None and int(local.value or 0) > 1 and int(size.value or 0) > int(local.value or 0)
                 and "headless" not in wanted)
    for key in ("data-parallel-hybrid-lb", "data-parallel-external-lb", "data-parallel-rank", "api-server-count"):
        entry = argv.get(key)
        if entry is None or not entry.unit.enabled:
            continue
        if key == "data-parallel-hybrid-lb" and hybrid_ok:
            continue
        if key == "api-server-count" and "headless" not in wanted:
            continue  # only a headless follower may not set it (run_headless refuses)
        argv.remove(key)
        if not entry.source.key.startswith(TOPOLOGY_SOURCE):
            displaced.append((None, entry))
    for key in TOPOLOGY_KEYS:
        entry = argv.get(key)
        if entry is None:
            continue
        if key not in wanted:
            argv.remove(key)
            if not entry.source.key.startswith(TOPOLOGY_SOURCE):
                displaced.append((None, entry))
        elif entry.unit != wanted[key] or not entry.source.key.startswith(TOPOLOGY_SOURCE):
            if entry.unit != wanted[key]:
                displaced.append((None, entry))
            argv.add([wanted[key]], Source("strategy", f"{TOPOLOGY_SOURCE} of {_node_name(spec)}"))
    return displaced
