"""The seed's layer order, for one command, as a table.

base → variant → strategy → hardware → Advanced → Features → KV offload
(seed, "Features and Advanced: The Override Order"). ``TABLE`` lists the
layers in that order as data: each entry names its layer, the recipe key path
patterns it reads (``composer.keypaths``) and how to obtain its lists for one
command (``pick``) or for any selection (``every``). Composing runs the table
for a selection (``compose_layers``); the every-key mode (``declared``) walks
every list a recipe declares, which validation and the lint check, under the
same key paths Explain shows. A later layer wins per flag identity / env name
and the builders record what it replaced (``composer.argv``).

Deliberate differences from upstream (semantics §16): hardware blocks are
additive from the least to the most specific key (no block silently replaces
another, W8/W9); KV-option env is applied after every recipe env (W9); features
own their flags (W11); hidden Advanced knobs are never emitted (W29).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from composer.argv import ArgvBuilder, EnvBuilder, Source, Unit, parse_tokens
from composer.context import BUILTIN_ADVANCED, OMNI_STRATEGY, RecipeContext
from composer.dimensions import POOLS
from composer.keypaths import KeyPath, KeyPattern, patterns
from composer.lookup import lookup_blocks, lookup_value
from composer.modes import default_mode, mode_block_reason
from composer.schema import (
    Catalog,
    Feature,
    HardwareProfile,
    Recipe,
    RoleSpec,
    Strategy,
    StrategyOverride,
    scalar_to_str,
)

if TYPE_CHECKING:
    from composer.parallel import Layout

LAYERS = ("base", "variant", "strategy", "hardware", "advanced", "features", "kv_offload")
"""The seed's layer names (``Source.layer``), in order."""


@dataclass(frozen=True)
class CommandSpec:
    """What one command is: its role, node rank in its pool, and the topology units."""

    role: str  # serve | head | worker | prefill | decode
    rank: int
    topology: tuple[Unit, ...]
    pool: str | None = None  # prefill | decode for P/D


TOPOLOGY_SOURCE = "composer: topology"
"""The key under which the computed topology is reported (not a recipe key)."""


# ----- the key path patterns, one per list a layer reads --------------------
# The last segment of a pattern names the field it reads (``composer.keypaths``).

HW_FIELDS = ("extra_args", "args", "extra_env")
"""The lists of a hardware block, in the order they are applied."""

BASE = patterns("model", "base_args", "base_env", subject="base")
VARIANT = patterns("variants.<variant>", "extra_args", "extra_env", subject="variant")
TEMPLATE = patterns("strategies/<strategy>", "vllm_args", "env")
TOPOLOGY = KeyPattern(TOPOLOGY_SOURCE + " of <node>", kind="units")
OMNI_TASK = patterns("omni.tasks[<task>]", "extra_args")
OMNI_TASK_HW = patterns("omni.tasks[<task>].hardware_overrides.<hw>", "extra_args")
OMNI_PORT = KeyPattern("omni.port")
RECIPE_HW = patterns("hardware_overrides.<hw>", *HW_FIELDS, subject="recipe")
VARIANT_HW = patterns("variants.<variant>.hardware_overrides.<hw>", *HW_FIELDS, subject="variant")
ROLE_TEMPLATE = patterns("strategies/<strategy>.<role>", "vllm_args", "env")
OVERRIDE = patterns("strategy_overrides.<strategy>", "extra_args", "vllm_args", "env", "extra_env", subject="strategy_override")
ROLE_OVERRIDE = patterns("strategy_overrides.<strategy>.<role>", "extra_args", "vllm_args", "env", subject="strategy_override")
OVERRIDE_HW = patterns("strategy_overrides.<strategy>.hardware_overrides.<hw>", *HW_FIELDS, subject="strategy_override")
ROLE_OVERRIDE_HW = patterns("strategy_overrides.<strategy>.<role>.hardware_overrides.<hw>", *HW_FIELDS,
                            subject="strategy_override")
ADVANCED_OWN = patterns("advanced_options[<index>]", "args")
ADVANCED_BUILTIN = KeyPattern("advanced.<knob>")
FEATURE = patterns("features.<feature>", "args")
FEATURE_HW = patterns("features.<feature>.hardware_overrides.<hw>", "args")
FEATURE_MODE = patterns("features.<feature>.modes.<mode>", "args")
FEATURE_MODE_HW = patterns("features.<feature>.modes.<mode>.hardware_overrides.<hw>", "args")
KV_OPTION = patterns("kv_offload.<kv>", "args", "env")
KV_STORE_PD = patterns("kv_store/<kv>.pd.<role>", "args")
KV_STORE = patterns("kv_store/<kv>.vllm", "vllm_args", "env")

Value = tuple | Mapping
"""What a key holds: argv tokens (a tuple of str), an env mapping, or (the
topology) a tuple of ``Unit``."""
Found = Iterator[tuple[KeyPath, Value]]


@dataclass(frozen=True)
class Declared:
    """One list at its key path, as the every-key walk yields it: the seed
    layer it is reported under (``Source.layer``), the key and its value."""

    layer: str
    path: KeyPath
    value: Value

    @property
    def key(self) -> str:
        return self.path.text

    @property
    def kind(self) -> str:
        return self.path.kind


@dataclass(frozen=True)
class Pick:
    """One command of a selection as the layers read it: the recipe context,
    the selection (``composer.resolve.Selection``, which lives above this
    module) and the command (None: compose without the topology)."""

    ctx: RecipeContext
    sel: Any
    spec: CommandSpec | None

    @property
    def pool(self) -> str | None:
        return self.spec.pool if self.spec else None

    @property
    def hw(self) -> HardwareProfile:
        return self.ctx.hw(self.sel.hardware)

    @property
    def so(self) -> StrategyOverride | None:
        return self.ctx.recipe.strategy_overrides.get(self.sel.strategy)

    @property
    def role_so(self) -> RoleSpec | None:
        so, pool = self.so, self.pool
        return getattr(so, pool, None) if (so is not None and pool) else None

    def blocks(self, mapping) -> list:
        """``(key, block)`` of a hardware-keyed map for this hardware, least specific first."""
        return lookup_blocks(mapping, self.sel.hardware, self.hw)

    @cached_property
    def enabled(self) -> list[str]:
        """The selected features that emit their args here (``feature_emitted``)."""
        return [f for f in self.sel.features if feature_emitted(self.ctx, self.sel, f)]


def _read(pats: tuple[KeyPattern, ...], block, **holes: Any) -> Found:
    """Each pattern's list of ``block`` (the field its last segment names)."""
    for p in pats:
        yield p.path(**holes), getattr(block, p.field_name)


@dataclass(frozen=True)
class Layer:
    """One entry of the layer table: ``name``, the seed layer its values are
    reported under (``seed``, ``Source.layer``), the key path ``patterns`` it
    reads, what it reads for one command (``pick(Pick)``) and every list it can
    read whatever the selection (``every(recipe, catalog)``; with no catalogue,
    only the recipe's own lists). Both yield ``(KeyPath, value)``."""

    name: str
    seed: str
    patterns: tuple[KeyPattern, ...]
    pick: Callable[[Pick], Found]
    every: Callable[[Recipe, Catalog | None], Found]

    def __post_init__(self) -> None:
        if self.seed not in LAYERS:
            raise ValueError(f"layer {self.name!r}: seed layer {self.seed!r} is not one of {LAYERS}")


@dataclass(frozen=True)
class Rule:
    """A table entry that edits the command built so far instead of adding to
    it: ``apply(Pick, argv)`` returns the displaced ``(feature id or None, Entry)``."""

    name: str
    apply: Callable[[Pick, ArgvBuilder], list]


# ----- base, variant, strategy ---------------------------------------------

def _base(c: Pick) -> Found:
    yield from _read(BASE, c.ctx.recipe.model)


def _base_every(r: Recipe, cat: Catalog | None) -> Found:
    yield from _read(BASE, r.model)


def _variant(c: Pick) -> Found:
    yield from _read(VARIANT, c.ctx.variant(c.sel.variant), variant=c.sel.variant)


def _variant_every(r: Recipe, cat: Catalog | None) -> Found:
    for vid, v in r.variants.items():
        yield from _read(VARIANT, v, variant=vid)


def _template(c: Pick) -> Found:
    """The strategy's template args; a P/D pool reads its role's instead."""
    if not c.pool:
        yield from _read(TEMPLATE, c.ctx.strategy(c.sel.strategy), strategy=c.sel.strategy)


def _serving_strategies(cat: Catalog | None) -> list[tuple[str, Strategy]]:
    """Every serving strategy of the catalogue (KV stores left out), vLLM-Omni's included."""
    if cat is None:
        return []
    found = {OMNI_STRATEGY.name: OMNI_STRATEGY} | dict(cat.strategies)
    return [(sid, st) for sid, st in found.items() if st.deploy_type != "kv_store_lb"]


def _template_every(r: Recipe, cat: Catalog | None) -> Found:
    for sid, st in _serving_strategies(cat):
        yield from _read(TEMPLATE, st, strategy=sid)


def _topology(c: Pick) -> Found:
    """The computed topology units of this node (``CommandSpec.topology``)."""
    if c.spec is not None:
        yield TOPOLOGY.path(node=_node_name(c.spec)), tuple(c.spec.topology)


def _nothing(r: Recipe, cat: Catalog | None) -> Found:
    """No list of any file: the composer computes this layer."""
    return iter(())


def _omni(c: Pick) -> Found:
    """vLLM-Omni: the task's extra args (refined for the exact hardware id) and
    the recipe's ``omni.port`` (semantics §14)."""
    if c.ctx.strategy(c.sel.strategy).kind != "omni":
        return
    task = c.ctx.omni_task(c.sel.task)
    if task is not None:
        i = c.ctx.omni_tasks().index(task)
        yield from _read(OMNI_TASK, task, task=i)
        block = task.hardware_overrides.get(c.sel.hardware)
        if block is not None:
            yield from _read(OMNI_TASK_HW, block, task=i, hw=c.sel.hardware)
    yield from _omni_port(c.ctx.recipe)


def _omni_port(r: Recipe) -> Found:
    if r.omni and r.omni.port:
        yield OMNI_PORT.path(), ("--port", str(r.omni.port))


def _omni_every(r: Recipe, cat: Catalog | None) -> Found:
    for i, task in enumerate(r.omni.tasks if r.omni else ()):
        yield from _read(OMNI_TASK, task, task=i)
        for hk, block in task.hardware_overrides.items():
            yield from _read(OMNI_TASK_HW, block, task=i, hw=hk)
    yield from _omni_port(r)


# ----- hardware, then what is specific to the strategy and P/D role ---------

def _replaced_keys(c: Pick) -> set[str]:
    """Hardware keys whose strategy-level block (``strategy_overrides.<s>.
    hardware_overrides.<key>``) declares args: for this strategy such a block
    replaces the recipe-level and the variant-level block of the same key
    (issue 10: written to drop a flag; semantics §3.2 step 5a)."""
    so = c.so
    return {k for k, b in (so.hardware_overrides.items() if so is not None else ()) if b.extra_args or b.args}


def _recipe_hw(c: Pick) -> Found:
    """The recipe's hardware blocks, least → most specific, but those a
    strategy-level block replaces (``_replaced_keys``)."""
    replaced = _replaced_keys(c)
    for key, block in c.blocks(c.ctx.recipe.hardware_overrides):
        if key not in replaced:
            yield from _read(RECIPE_HW, block, hw=key)


def _recipe_hw_every(r: Recipe, cat: Catalog | None) -> Found:
    for hk, block in r.hardware_overrides.items():
        yield from _read(RECIPE_HW, block, hw=hk)


def _variant_hw(c: Pick) -> Found:
    """The variant's hardware blocks, least → most specific, but a generation,
    brand or ``default`` block a strategy-level block replaces
    (``_replaced_keys``; issue 18: a variant's Blackwell MoE backend survived
    the strategy's Blackwell block on GB10). A block for an exact hardware id
    is never replaced: upstream applies it with the variant's args, before the
    strategy (semantics §3.2 step 2)."""
    replaced = _replaced_keys(c) - set(c.ctx.catalog.taxonomy.hardware_profiles)
    for key, block in c.blocks(c.ctx.variant(c.sel.variant).hardware_overrides):
        if key not in replaced:
            yield from _read(VARIANT_HW, block, variant=c.sel.variant, hw=key)


def _variant_hw_every(r: Recipe, cat: Catalog | None) -> Found:
    for vid, v in r.variants.items():
        for hk, block in v.hardware_overrides.items():
            yield from _read(VARIANT_HW, block, variant=vid, hw=hk)


def _role_template(c: Pick) -> Found:
    """A P/D pool's template args and env (its multi-node-NVLink tuning only
    where the hardware has such a domain, ``_gate_env``)."""
    role = getattr(c.ctx.strategy(c.sel.strategy), c.pool) if c.pool else None
    if role is not None:
        args, env = ROLE_TEMPLATE
        holes = {"strategy": c.sel.strategy, "role": c.pool}
        yield args.path(**holes), role.vllm_args
        yield env.path(**holes), _gate_env(c.ctx, c.sel.hardware, role.env)


def _role_template_every(r: Recipe, cat: Catalog | None) -> Found:
    for sid, st in _serving_strategies(cat):
        for pool in POOLS:
            if getattr(st, pool) is not None:
                yield from _read(ROLE_TEMPLATE, getattr(st, pool), strategy=sid, role=pool)


def _override(c: Pick) -> Found:
    if c.so is not None:
        yield from _read(OVERRIDE, c.so, strategy=c.sel.strategy)


def _override_every(r: Recipe, cat: Catalog | None) -> Found:
    for sid, so in r.strategy_overrides.items():
        yield from _read(OVERRIDE, so, strategy=sid)


def _role_override(c: Pick) -> Found:
    if c.role_so is not None:
        yield from _read(ROLE_OVERRIDE, c.role_so, strategy=c.sel.strategy, role=c.pool)


def _roles(r: Recipe) -> Iterator[tuple[str, str, RoleSpec]]:
    """``(strategy id, pool, role block)`` of every P/D role override."""
    for sid, so in r.strategy_overrides.items():
        for pool in POOLS:
            if getattr(so, pool) is not None:
                yield sid, pool, getattr(so, pool)


def _role_override_every(r: Recipe, cat: Catalog | None) -> Found:
    for sid, pool, role in _roles(r):
        yield from _read(ROLE_OVERRIDE, role, strategy=sid, role=pool)


def _override_hw(c: Pick) -> Found:
    if c.so is not None:
        for key, block in c.blocks(c.so.hardware_overrides):
            yield from _read(OVERRIDE_HW, block, strategy=c.sel.strategy, hw=key)


def _override_hw_every(r: Recipe, cat: Catalog | None) -> Found:
    for sid, so in r.strategy_overrides.items():
        for hk, block in so.hardware_overrides.items():
            yield from _read(OVERRIDE_HW, block, strategy=sid, hw=hk)


def _role_override_hw(c: Pick) -> Found:
    if c.role_so is not None:
        for key, block in c.blocks(c.role_so.hardware_overrides):
            yield from _read(ROLE_OVERRIDE_HW, block, strategy=c.sel.strategy, role=c.pool, hw=key)


def _role_override_hw_every(r: Recipe, cat: Catalog | None) -> Found:
    for sid, pool, role in _roles(r):
        for hk, block in role.hardware_overrides.items():
            yield from _read(ROLE_OVERRIDE_HW, block, strategy=sid, role=pool, hw=hk)


# ----- Advanced, Features, KV offload ----------------------------------------

def _advanced(c: Pick) -> Found:
    """The selected Advanced knobs visible for the strategy
    (``RecipeContext.advanced_knobs``): the recipe's own under
    ``advanced_options[i].args`` (the later of equal ids wins, as there), the
    built-ins under ``advanced.<id>``."""
    knobs = {k.id: k for k in c.ctx.advanced_knobs(c.sel.strategy)}
    own = {o.id: i for i, o in enumerate(c.ctx.recipe.advanced_options)}
    for aid in c.sel.advanced:
        if aid in own:
            yield from _read(ADVANCED_OWN, c.ctx.recipe.advanced_options[own[aid]], index=own[aid])
        elif aid in knobs:
            yield ADVANCED_BUILTIN.path(knob=aid), tuple(knobs[aid].args)


def _advanced_every(r: Recipe, cat: Catalog | None) -> Found:
    for i, opt in enumerate(r.advanced_options):
        yield from _read(ADVANCED_OWN, opt, index=i)
    if cat is not None:
        for kid, _label, args, *_ in BUILTIN_ADVANCED:
            yield ADVANCED_BUILTIN.path(knob=kid), tuple(args)


def _features(c: Pick) -> Found:
    """Each enabled feature's args (``feature_args``), in the order selected."""
    for fid in c.enabled:
        yield feature_args(c.ctx, fid, c.sel.hardware, c.sel.variant, c.sel.mode(fid))


def _feature_every(fid: str, f: Feature) -> Found:
    """Every list feature ``fid`` can emit: plain args, hardware blocks, modes."""
    yield from _read(FEATURE, f, feature=fid)
    for hk, block in f.hardware_overrides.items():
        yield from _read(FEATURE_HW, block, feature=fid, hw=hk)
    for mk, mode in (f.modes or {}).items():
        yield from _read(FEATURE_MODE, mode, feature=fid, mode=mk)
        for hk, block in mode.hardware_overrides.items():
            yield from _read(FEATURE_MODE_HW, block, feature=fid, mode=mk, hw=hk)


def _features_every(r: Recipe, cat: Catalog | None) -> Found:
    for fid, f in r.features.items():
        yield from _feature_every(fid, f)


def _remove_unowned(c: Pick, argv: ArgvBuilder) -> list:
    """A feature that is off removes the settings it owns (``owned_units``)
    even when another layer emits them (upstream W11: K3's AMD block kept
    --reasoning-parser on); a setting an enabled feature also owns stays."""
    removed = []
    enabled_owned = set().union(*(owned_units(c.ctx, f) for f in c.enabled)) if c.enabled else set()
    for fid in c.ctx.recipe.features:
        if fid in c.enabled:
            continue
        for unit in sorted(owned_units(c.ctx, fid) - enabled_owned, key=lambda u: u.key):
            entry = argv.get(unit.key)
            if entry is not None and entry.unit == unit and entry.source.layer != "features":
                argv.remove(unit.key)
                removed.append((fid, entry))
    return removed


def _kv_store_env(vllm: Mapping) -> dict[str, str]:
    return {str(k): str(scalar_to_str(v)) for k, v in (vllm.get("env") or {}).items()}


def _kv_offload(c: Pick) -> Found:
    """A taxonomy KV offload option's args and env; or a KV store's: its P/D
    form for a pool that has one (a MultiConnector keeps P/D's NIXL transfer),
    else its ``vllm`` args; then its env."""
    kv = c.sel.kv_offload
    if not kv:
        return
    opt = c.ctx.catalog.taxonomy.kv_offload.get(kv)
    if opt is not None:
        yield from _read(KV_OPTION, opt, kv=kv)
        return
    store = c.ctx.strategy(kv)
    vllm = store.vllm or {}
    pool = c.pool
    pd_args = store.pd[pool].args if pool and pool in store.pd else None
    if pool and pd_args:
        yield KV_STORE_PD[0].path(kv=kv, role=pool), tuple(str(x) for x in pd_args)
    else:
        yield KV_STORE[0].path(kv=kv), tuple(str(x) for x in vllm.get("vllm_args", []))
    yield KV_STORE[1].path(kv=kv), _kv_store_env(vllm)


def _kv_offload_every(r: Recipe, cat: Catalog | None) -> Found:
    if cat is None:
        return
    for kv, opt in cat.taxonomy.kv_offload.items():
        yield from _read(KV_OPTION, opt, kv=kv)
    for kv, store in cat.strategies.items():
        if store.deploy_type == "kv_store_lb":
            for pool, form in store.pd.items():
                yield KV_STORE_PD[0].path(kv=kv, role=pool), tuple(str(x) for x in form.args)
            vllm = store.vllm or {}
            yield KV_STORE[0].path(kv=kv), tuple(str(x) for x in vllm.get("vllm_args", []))
            yield KV_STORE[1].path(kv=kv), _kv_store_env(vllm)


def _reassert(c: Pick, argv: ArgvBuilder) -> list:
    return _reassert_topology(argv, c.spec) if c.spec is not None else []


# ----- the table -------------------------------------------------------------

TABLE: tuple[Layer | Rule, ...] = (
    Layer("base", "base", BASE, _base, _base_every),
    Layer("variant", "variant", VARIANT, _variant, _variant_every),
    Layer("strategy template", "strategy", TEMPLATE, _template, _template_every),
    Layer("topology", "strategy", (TOPOLOGY,), _topology, _nothing),
    Layer("vLLM-Omni task", "strategy", OMNI_TASK + OMNI_TASK_HW + (OMNI_PORT,), _omni, _omni_every),
    Layer("strategy override", "strategy", OVERRIDE, _override, _override_every),
    Layer("recipe hardware", "hardware", RECIPE_HW, _recipe_hw, _recipe_hw_every),
    Layer("variant hardware", "hardware", VARIANT_HW, _variant_hw, _variant_hw_every),
    Layer("P/D role template", "strategy", ROLE_TEMPLATE, _role_template, _role_template_every),
    Layer("P/D role override", "strategy", ROLE_OVERRIDE, _role_override, _role_override_every),
    Layer("strategy hardware", "hardware", OVERRIDE_HW, _override_hw, _override_hw_every),
    Layer("P/D role hardware", "hardware", ROLE_OVERRIDE_HW, _role_override_hw, _role_override_hw_every),
    Layer("Advanced", "advanced", ADVANCED_OWN + (ADVANCED_BUILTIN,), _advanced, _advanced_every),
    Layer("features", "features", FEATURE + FEATURE_HW + FEATURE_MODE + FEATURE_MODE_HW, _features, _features_every),
    Rule("feature-owned settings removal", _remove_unowned),
    Layer("KV offload", "kv_offload", KV_OPTION + KV_STORE_PD + KV_STORE, _kv_offload, _kv_offload_every),
    Rule("topology re-assertion", _reassert),
)
"""The seed's layer order as data (seed, "Features and Advanced: The Override
Order"; in the spirit of pydantic-settings' ordered sources): a later entry
wins per flag identity / env name. The two rules edit what came before.

Precedence, written once (the one place; README "Launch rules" points here).
The seed's layers: base → variant → strategy → hardware → Advanced →
Features → KV offload. Inside the strategy and hardware layers, from first
(weakest) to last (strongest):

1. the strategy's template args (``strategies/<s>.vllm_args``), the computed
   topology, a vLLM-Omni task's args;
2. the strategy override's plain args and env (``strategy_overrides.<s>.
   extra_args`` / ``vllm_args`` / ``env`` / ``extra_env``): before every
   hardware block, so a recipe's hardware tuning beats them — semantics §3.2
   steps 4-5, and the corpus Kimi-K3 relies on it ("Hopper/AMD keep their own
   memory-utilization and batched-token tuning by last-wins dedupe":
   MI355X TP+PP keeps the AMD block's 0.95 / 4096 over the override's 0.90 /
   8192; tests/test_precedence.py);
3. the recipe's hardware blocks (``hardware_overrides.<key>``), then the
   variant's (``variants.<v>.hardware_overrides.<key>``), each least → most
   specific key (default → brand → generation → exact id; additive, W8/W9).
   A strategy-level block of the same key that declares args REPLACES the
   recipe's and the variant's block of that key (semantics §3.2 step 5a; the
   corpus Kimi-K3 multi_node_tp_pp comment: "that keyspace REPLACES the
   recipe Blackwell baseline"); a variant block for an exact hardware id is
   never replaced (upstream applies it with the variant, step 2);
4. what is specific to a P/D role: its template (``strategies/pd_cluster.
   <role>``) and the recipe's role override (``strategy_overrides.pd_cluster.
   <role>``). Deliberately after the recipe-wide hardware blocks (upstream
   puts them before, step 3-4): a decode pool's ``--no-enable-prefix-caching``
   is not undone by the recipe's Blackwell ``--enable-prefix-caching``;
5. the strategy-level hardware blocks (``strategy_overrides.<s>.
   hardware_overrides.<key>``), then the P/D role's
   (``strategy_overrides.pd_cluster.<role>.hardware_overrides.<key>``),
   least → most specific (step 5c, 5d).

After them the user's layers (Advanced, Features, KV offload) win over every
recipe layer, and the topology is put back last (``_reassert_topology``).
Tests: tests/test_precedence.py, one per rule against the recipes that rely
on it."""


def compose_layers(ctx: RecipeContext, sel, spec: CommandSpec | None, lay: Layout | None = None):
    """Build argv units and env for one command of selection ``sel`` by
    running ``TABLE`` in order.

    ``spec`` carries the topology units (None: compose without them, e.g. to read
    the gpu-memory-utilization in force before the node count is known).
    Returns ``(ArgvBuilder, EnvBuilder, removed)``; ``removed`` lists
    ``(feature id or None, Entry)`` for flags dropped because their feature is
    off or the topology displaced them. ``lay`` is not read.
    Raises ``composer.argv.ArgvError`` on malformed recipe args.
    """
    pick = Pick(ctx, sel, spec)
    argv, env = ArgvBuilder(), EnvBuilder()
    removed: list = []
    for step in TABLE:
        if isinstance(step, Rule):
            removed += step.apply(pick, argv)
            continue
        for path, value in step.pick(pick):
            source = Source(step.seed, path.text, path)
            if path.kind == "env":
                env.add(dict(value), source)
            elif path.kind == "units":
                argv.add(list(value), source)
            else:
                argv.add_tokens(list(value), source)
    return argv, env, removed


def declared(recipe: Recipe, catalog: Catalog | None = None) -> Iterator[Declared]:
    """The every-key mode of ``TABLE``: every list the recipe declares, at the
    key path composing names it under, whatever the selection (empty lists of
    a declared block included, so every block's key is seen). With a
    ``catalog``, also what the catalogue's strategy templates and KV offload
    options and the composer's built-in Advanced knobs can add. Validation,
    the lint (``composer.buildtime.validate``) and the owned settings of a feature walk
    this; Explain names the same paths because composing runs the same table.
    The topology is computed, never declared."""
    for step in TABLE:
        if isinstance(step, Layer):
            for path, value in step.every(recipe, catalog):
                yield Declared(step.seed, path, value)


# ----- features ----------------------------------------------------------------

def feature_args(ctx: RecipeContext, fid: str, hw_id: str, variant_id: str, mode_id: str | None = None) -> tuple[KeyPath, Value]:
    """``(key path, args)`` feature ``fid`` emits on ``hw_id``: a hardware
    override (most specific key wins) replaces the plain args; a moded feature
    emits ``mode_id`` (default: its default mode here, ``composer.modes``)."""
    hw = ctx.hw(hw_id)
    f = ctx.recipe.features[fid]
    if f.modes:
        if mode_id is None or mode_id not in f.modes:
            mode_id = default_mode(ctx, fid, hw_id, variant_id)
        mode = f.modes[mode_id]
        found = lookup_value({k: b for k, b in mode.hardware_overrides.items() if b.args}, hw_id, hw)
        if found:
            return next(_read(FEATURE_MODE_HW, found[1], feature=fid, mode=mode_id, hw=found[0]))
        return next(_read(FEATURE_MODE, mode, feature=fid, mode=mode_id))
    found = lookup_value({k: b for k, b in f.hardware_overrides.items() if b.args}, hw_id, hw)
    if found:
        return next(_read(FEATURE_HW, found[1], feature=fid, hw=found[0]))
    return next(_read(FEATURE, f, feature=fid))


def feature_emitted(ctx: RecipeContext, sel, fid: str) -> bool:
    """Whether an enabled feature emits its args: it exists, its ``strategies``
    allow the strategy, and (with modes) the mode in force can run here."""
    if fid not in ctx.recipe.features or ctx.feature_block_reason(fid, sel.strategy):
        return False
    mode = sel.mode(fid)
    return mode is None or mode_block_reason(ctx, fid, mode, sel.hardware, sel.variant) is None


def owned_units(ctx: RecipeContext, fid: str) -> frozenset[Unit]:
    """Flag settings a feature owns: those (flag and value) present in every
    non-empty arg list it can emit (``_feature_every``). Spec decoding owns its
    ``--speculative-config`` value, not the ``--max-num-seqs`` cap only its AMD
    override sets; a context-length feature does not own the base
    ``--max-model-len`` it replaces."""
    def make() -> frozenset[Unit]:
        units = None
        for _, args in _feature_every(fid, ctx.recipe.features[fid]):
            if not args:
                continue
            try:
                found = set(parse_tokens(list(args)))
            except ValueError:
                continue
            units = found if units is None else units & found
        return frozenset(units or ())

    return ctx.cache("owned-units").get(fid, make)


MNNVL_ENV = frozenset({"NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE", "UCX_NET_DEVICES"})
"""Tuning for multi-node NVLink domains (GB200/GB300 NVL trays) that P/D
templates carry for every node; elsewhere it is dropped (``_gate_env``)."""


def _gate_env(ctx: RecipeContext, hw_id: str, env) -> dict:
    """A P/D template's env without the multi-node-NVLink tuning on hardware
    that has no such NVLink domain (``HardwareProfile.mnnvl``)."""
    if ctx.hw(hw_id).has_mnnvl:
        return dict(env)
    return {k: v for k, v in env.items() if k not in MNNVL_ENV}


TOPOLOGY_KEYS = frozenset({
    "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "data-parallel-size-local",
    "data-parallel-address", "data-parallel-rpc-port", "data-parallel-start-rank", "nnodes", "node-rank",
    "master-addr", "headless",
})
"""Flags that describe the parallel layout and rendezvous: the composer computes
them from the strategy, hardware and node count, and no recipe layer may change
them afterwards (the summary and the capacity check describe that layout)."""


PLACEMENT_KEYS = frozenset({"port"})
"""Flags the composer sets only where two servers share a host (the second of
two co-located P/D pools that ask for one ``--port``, ``composer.plan``): in a
command's topology they are put back over the recipe's value like the
topology's own; where the topology has none, the recipe's value stays."""


def _topology_source(spec: CommandSpec) -> Source:
    path = TOPOLOGY.path(node=_node_name(spec))
    return Source("strategy", path.text, path)


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
            argv.add([wanted[key]], _topology_source(spec))
    for key in PLACEMENT_KEYS & wanted.keys():
        entry = argv.get(key)
        if entry is None or entry.unit != wanted[key]:
            if entry is not None:
                displaced.append((None, entry))
            argv.add([wanted[key]], _topology_source(spec))
    return displaced
