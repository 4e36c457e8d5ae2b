"""Parallel layouts and the memory model: how many GPUs hold what, and does it fit.

A layout is the TP/PP/DP shape of one deployment (or one P/D pool) on ``nodes``
nodes of one hardware profile. The memory model (README, "Memory model"), per
replica, counting only the GPUs the layout uses (idle GPUs are not capacity):

* **weights fit** when ``vram_minimum_gb`` ≤ the HBM of those GPUs. The recipe
  figure already includes headroom (the seed: 2.8T × 0.5 byte × 1.2 = 1680 GB),
  so it is applied once, without the utilization on top (as the public site
  does: Qwen3-30B-A3B's 74 GB fit one 80 GB H100);
* **KV cache** = HBM × ``--gpu-memory-utilization`` − the raw weights
  (``vram_minimum_gb`` / headroom; the variant's ``headroom``, else the seed's
  1.2) − a runtime overhead of ``RUNTIME_OVERHEAD_GB`` per GPU (CUDA context,
  NCCL buffers, the activation peak vLLM profiles at start-up). It must be
  positive; with the model's attention geometry it is also given in tokens
  (``kv_tokens``) and checked against ``--max-model-len``.

"KV offload moves KV cache, never weights" (seed): offload never enters here.
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

    @property
    def used_per_node(self) -> int:
        """GPUs of a node the layout runs ranks on (the rest are idle)."""
        if self.mode == "dep":
            return min(self.gpus_per_node, self.tp * self.dp_local)
        if self.mode in ("tp", "tep") and self.nodes == 1:
            return min(self.gpus_per_node, self.tp)
        return self.gpus_per_node

    @property
    def replica_gpus(self) -> int:
        """GPUs that together hold one copy of the weights."""
        if self.mode == "tp_dp":
            return self.gpus_per_node
        return self.replica_nodes * self.used_per_node


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
                util: float = DEFAULT_GPU_UTIL, kv_dtype: str | None = None, max_model_len: str | None = None) -> Layout:
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
        tp = single_node_tp(ctx, hw_id, variant_id, util, kv_dtype, max_model_len)
    return Layout(mode, nodes, g, tp=tp, replica_nodes=nodes)


def single_node_tp(ctx: RecipeContext, hw_id: str, variant_id: str, util: float,
                   kv_dtype: str | None = None, max_model_len: str | None = None) -> int:
    """TP of ``single_node_tp`` (semantics §4.1): the recipe's (``variants.<v>.tp``,
    ``strategy_overrides.single_node_tp.tp``, a hardware override's
    ``--tensor-parallel-size``; capped at the node's GPUs) when it gives one;
    else the smallest power-of-two TP whose GPUs hold the weights and divide
    the attention heads (when given) and whose KV cache holds one sequence of
    the max-model-len in force (with the attention geometry) or, without it,
    at least ``KV_MIN_SHARE`` of the usable memory; else every GPU. It depends
    on the utilization only through the KV room; the plan says when the
    utilization in force moves it (``plan``, notice ``tp-utilization``)."""
    hw = ctx.hw(hw_id)
    given = ctx.recipe_tp(hw_id, variant_id)
    if given is not None:
        return given
    weights = ctx.weights_gb(variant_id)
    if weights is None or not hw.vram_gb:
        return hw.gpu_count
    heads = ctx.recipe.model.num_attention_heads
    tp = 1
    while tp < hw.gpu_count:
        lay = Layout("tp", 1, hw.gpu_count, tp=tp)
        cap = capacity(ctx, lay, hw_id, variant_id, util, None, kv_dtype, max_model_len)
        if cap.weights_fit and cap.kv_gb is not None and cap.kv_gb > 0 and not (heads and heads % tp):
            if cap.kv_tokens is not None and cap.max_model_len:
                if cap.kv_tokens >= cap.max_model_len:
                    return tp
            elif cap.kv_gb >= KV_MIN_SHARE * cap.usable_gb:
                return tp
        tp *= 2
    return hw.gpu_count


DEFAULT_HEADROOM = 1.2
"""Headroom factor a ``vram_minimum_gb`` includes when the variant gives none
(the seed's estimate: parameters × bytes per parameter × 1.2)."""
RUNTIME_OVERHEAD_GB = 2.0
"""GPU memory per GPU that is neither weights nor KV cache (CUDA context, NCCL
buffers, activation peak), in GB: a round figure of vLLM's start-up profiling."""
KV_MIN_SHARE = 0.05
"""Smallest KV cache, as a share of the usable memory, for which the TP
auto-fit takes fewer GPUs (when the model's geometry is not given)."""


@dataclass(frozen=True)
class Capacity:
    """Weights and KV cache of one replica on the GPUs that hold it. Sizes in
    GB (10^9 bytes); ``util`` is the ``--gpu-memory-utilization`` in force."""

    weights_gb: float | None
    gpus: int
    hbm_gb: float
    util: float
    usable_gb: float
    weights_raw_gb: float | None = None
    overhead_gb: float = 0.0
    kv_gb: float | None = None
    kv_tokens: int | None = None
    """KV cache capacity in tokens per replica (per DP rank for DEP), when the
    recipe gives the attention geometry."""
    max_model_len: int | None = None
    max_model_len_explicit: bool = False
    token_scope: str = ""
    """What ``kv_tokens`` counts when it is not the whole replica (" per DP rank")."""

    @property
    def weights_fit(self) -> bool:
        return self.weights_gb is None or self.weights_gb <= self.hbm_gb

    @property
    def fits(self) -> bool:
        """The weights fit and leave room for KV cache (and, when the command
        sets ``--max-model-len`` and the geometry is known, one sequence of it)."""
        if not self.weights_fit:
            return False
        if self.kv_gb is not None and self.kv_gb <= 0:
            return False
        return not (self.max_model_len_explicit and self.kv_tokens is not None and self.max_model_len
                    and self.kv_tokens < self.max_model_len)

    @property
    def share(self) -> float | None:
        return None if self.weights_gb is None or not self.hbm_gb else self.weights_gb / self.hbm_gb

    def describe(self, where: str) -> str:
        if self.weights_gb is None:
            return f"The recipe gives no weight size; capacity on {where} was not checked."
        pct = round(100 * (self.share or 0))
        gpus = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}"
        text = f"{self.weights_gb:g} GB of weights on {where}: {gpus}, {self.hbm_gb:g} GB of HBM, {pct} %"
        if self.kv_gb is None:
            return text + "."
        if not self.weights_fit:
            return text + ": the weights do not fit."
        text += (f"; at gpu-memory-utilization {self.util:g}, {self.usable_gb:g} GB usable minus {self.weights_raw_gb:g} GB of "
                 f"raw weights (without the recipe's headroom) and {self.overhead_gb:g} GB of runtime overhead leaves "
                 f"{self.kv_gb:g} GB for the KV cache")
        if self.kv_gb <= 0:
            return text + ": no room for the KV cache."
        if self.kv_tokens is not None:
            text += f" (~{self.kv_tokens:,} tokens{self.token_scope})"
        else:
            text += " (tokens not estimated: the recipe gives no attention geometry)"
        return text + "."

    def check(self, scope: str, where: str):
        """The plan's ``CapacityCheck`` of this capacity for ``scope`` on ``where``."""
        from composer.outputs import CapacityCheck

        return CapacityCheck(scope, where, self.weights_gb, self.hbm_gb, self.util, self.usable_gb, self.fits,
                             None if self.share is None else round(self.share, 4), self.describe(where),
                             gpus=self.gpus, kv_gb=self.kv_gb, kv_tokens=self.kv_tokens)


def capacity(ctx: RecipeContext, lay: Layout, hw_id: str, variant_id: str, util: float, task: str | None = None,
             kv_dtype: str | None = None, max_model_len: str | None = None) -> Capacity:
    """The memory model (module docstring) of one replica of ``lay``.
    ``kv_dtype`` and ``max_model_len`` are the command's ``--kv-cache-dtype``
    and ``--max-model-len`` values when known (None: vLLM's defaults)."""
    hw = ctx.hw(hw_id)
    gpus = lay.replica_gpus
    hbm = round(hw.gb_per_gpu * gpus, 1)
    weights = ctx.weights_gb(variant_id, task, hw_id)
    usable = round(hbm * util, 1)
    if weights is None:
        return Capacity(None, gpus, hbm, util, usable)
    raw = round(weights / (ctx.variant(variant_id).headroom or DEFAULT_HEADROOM), 1)
    overhead = round(RUNTIME_OVERHEAD_GB * gpus, 1)
    kv = round(usable - raw - overhead, 1)
    tokens = kv_tokens(ctx, lay, kv, kv_dtype) if kv > 0 else None
    mml, explicit = _max_model_len(ctx, max_model_len)
    scope = " per DP rank" if lay.mode == "dep" and lay.dp > 1 else ""
    return Capacity(weights, gpus, hbm, util, usable, raw, overhead, kv, tokens, mml, explicit, scope)


def _max_model_len(ctx: RecipeContext, value: str | None) -> tuple[int | None, bool]:
    """``(max-model-len in force, set by the command)``: the command's number,
    else the model's declared context (vLLM's default is the model's maximum)."""
    if value is not None:
        from composer.vllm_cli import human_int

        n = human_int(value)  # 131072, 128k, 128K as vLLM reads them
        if n is None or n < 0:
            return None, False  # "auto" / -1: vLLM fits it to the KV cache
        return n, True
    return ctx.recipe.model.context_length, False


KV_DTYPE_BYTES = {"fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0, "fp8_ds_mla": 1.0, "int8_per_token_head": 1.0,
                  "fp8_per_token_head": 1.0, "nvfp4": 0.5625, "nvfp4_ds_mla": 0.5625}
"""Bytes per KV element by ``--kv-cache-dtype`` (auto, bfloat16, float16: 2)."""


def kv_tokens(ctx: RecipeContext, lay: Layout, kv_gb: float, kv_dtype: str | None) -> int | None:
    """KV cache capacity in tokens of one replica (one DP rank for DEP), from
    the model's attention geometry (``model.num_hidden_layers`` with
    ``kv_lora_rank`` + ``qk_rope_head_dim`` for MLA, whose latent cache every
    TP rank holds whole, or ``num_key_value_heads`` × ``head_dim`` for MHA/GQA,
    split over TP down to one head per rank; PP splits the layers), or None."""
    m = ctx.recipe.model
    if not m.num_hidden_layers:
        return None
    elem = KV_DTYPE_BYTES.get(kv_dtype or "auto", 2.0)
    tp = max(1, lay.tp)
    layers_per_gpu = m.num_hidden_layers / max(1, lay.pp)
    if m.kv_lora_rank:
        per_gpu_token = layers_per_gpu * (m.kv_lora_rank + (m.qk_rope_head_dim or 0)) * elem
    elif m.num_key_value_heads and m.head_dim:
        per_gpu_token = layers_per_gpu * 2 * max(1.0, m.num_key_value_heads / tp) * m.head_dim * elem
    else:
        return None
    kv_per_gpu = kv_gb * 1e9 / lay.replica_gpus
    # A replica's GPUs share one token's KV over its TP × PP ranks; for DEP a
    # DP rank (TP ranks of its own) keeps its own sequences.
    return int(kv_per_gpu / per_gpu_token)


def layout_problem(ctx: RecipeContext, lay: Layout) -> str | None:
    """Why a layout is invalid for the model: TP must divide the attention heads
    (``model.num_attention_heads``, when the recipe gives it)."""
    heads = ctx.recipe.model.num_attention_heads
    if heads and lay.tp > 1 and heads % lay.tp:
        return f"TP {lay.tp} does not divide the model's {heads} attention heads."
    return None
