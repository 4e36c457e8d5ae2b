"""Parallel layouts and capacity: how many GPUs hold what, and does it fit.

A layout is the TP/PP/DP shape of one deployment (or one P/D pool) on ``nodes``
nodes of one hardware profile. The capacity rule is the seed's: weights must fit
in the GPU memory that holds them ("KV offload moves KV cache, never weights"),
counted with the ``--gpu-memory-utilization`` in force, because vLLM allocates
weights, activations and KV cache inside that share.
"""

from __future__ import annotations

from dataclasses import dataclass

from composer.argv import parse_tokens
from composer.context import RecipeContext

DEFAULT_GPU_UTIL = 0.9
"""vLLM's default ``--gpu-memory-utilization``."""


@dataclass(frozen=True)
class Layout:
    """Shape of one deployment or pool.

    ``replica_nodes`` is how many nodes hold one full copy of the weights (all of
    them, except TP+DP where each node is a replica).
    """

    mode: str  # tp | tep | dep | tp_pp | tp_dp
    nodes: int
    gpus_per_node: int
    tp: int
    pp: int = 1
    dp: int = 1
    dp_local: int = 1
    replica_nodes: int = 1

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def strategy_mode(ctx: RecipeContext, sid: str) -> str:
    """The layout mode of a (non-P/D) strategy id."""
    s = ctx.strategy(sid)
    if sid == "omni":
        return "omni"
    if s.parallelism in ("tp_pp", "tp_dp"):
        return s.parallelism
    if sid.endswith("dep"):
        return "dep"
    if sid.endswith("tep"):
        return "tep"
    return "tp"


def dp_local_override(ctx: RecipeContext, sid: str, hw_id: str) -> int | None:
    """A recipe's ``--data-parallel-size-local`` for DEP, from its strategy
    overrides; applied to both the DP size and the start ranks (fixes upstream W13)."""
    so = ctx.recipe.strategy_overrides.get(sid)
    if so is None:
        return None
    found = None
    tokens = list(so.vllm_args) + list(so.extra_args)
    from composer.lookup import lookup_blocks

    for _, block in lookup_blocks(so.hardware_overrides, hw_id, ctx.hw(hw_id)):
        tokens += list(block.extra_args)
    try:
        for u in parse_tokens(tokens):
            if u.key == "data-parallel-size-local" and u.value and u.value.isdigit():
                found = int(u.value)
    except ValueError:
        return None
    return found


def make_layout(ctx: RecipeContext, mode: str, hw_id: str, variant_id: str, nodes: int,
                single_node: bool = False, role_tp: int | None = None, sid: str | None = None,
                util: float = DEFAULT_GPU_UTIL) -> Layout:
    """The layout of ``mode`` on ``nodes`` nodes of ``hw_id`` (semantics §4.2, §5.2)."""
    g = ctx.hw(hw_id).gpu_count
    if mode == "omni":
        return Layout(mode, 1, g, tp=g, replica_nodes=1)
    if mode == "tp_pp":
        return Layout(mode, nodes, g, tp=g, pp=nodes, replica_nodes=nodes)
    if mode == "tp_dp":
        return Layout(mode, nodes, g, tp=g, dp=nodes, dp_local=1, replica_nodes=1)
    if mode == "dep":
        local = (dp_local_override(ctx, sid, hw_id) if sid else None)
        if local is None and role_tp:
            local = max(1, g // role_tp)
        local = local or g
        local = max(1, min(local, g))
        return Layout(mode, nodes, g, tp=max(1, g // local), dp=nodes * local, dp_local=local, replica_nodes=nodes)
    tp = nodes * g
    if single_node and sid == "single_node_tp":
        tp = ctx.single_node_tp(hw_id, variant_id, util)
    return Layout(mode, nodes, g, tp=tp, replica_nodes=nodes)


@dataclass(frozen=True)
class Capacity:
    """Weights against the GPU memory that holds one replica, in GB (10^9 bytes)."""

    weights_gb: float | None
    hbm_gb: float
    util: float
    usable_gb: float

    @property
    def fits(self) -> bool:
        return self.weights_gb is None or self.weights_gb <= self.usable_gb

    @property
    def share(self) -> float | None:
        return None if self.weights_gb is None or not self.usable_gb else self.weights_gb / self.usable_gb

    def describe(self, where: str) -> str:
        if self.weights_gb is None:
            return f"The recipe gives no weight size; capacity on {where} was not checked."
        pct = round(100 * (self.share or 0))
        return (f"{self.weights_gb:g} GB of weights on {where}: {self.hbm_gb:g} GB of HBM, "
                f"{self.usable_gb:g} GB usable at gpu-memory-utilization {self.util:g} ({pct} %).")

    def check(self, scope: str, where: str):
        """The plan's ``CapacityCheck`` of this capacity for ``scope`` on ``where``."""
        from composer.outputs import CapacityCheck

        return CapacityCheck(scope, where, self.weights_gb, self.hbm_gb, self.util, self.usable_gb, self.fits,
                             None if self.share is None else round(self.share, 4), self.describe(where))


def capacity(ctx: RecipeContext, lay: Layout, hw_id: str, variant_id: str, util: float, task: str | None = None) -> Capacity:
    hbm = ctx.hw(hw_id).vram_gb * lay.replica_nodes
    if lay.mode == "tp" and lay.nodes == 1 and lay.tp < lay.gpus_per_node:
        hbm = ctx.hw(hw_id).gb_per_gpu * lay.tp
    return Capacity(ctx.weights_gb(variant_id, task, hw_id), round(hbm, 1), util, round(hbm * util, 1))


def layout_problem(ctx: RecipeContext, lay: Layout) -> str | None:
    """Why a layout is invalid for the model: TP must divide the attention heads
    (``model.num_attention_heads``, when the recipe gives it)."""
    heads = ctx.recipe.model.num_attention_heads
    if heads and lay.tp > 1 and heads % lay.tp:
        return f"TP {lay.tp} does not divide the model's {heads} attention heads."
    return None
