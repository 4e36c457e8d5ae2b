"""The memory model: does a layout hold the weights, and how much KV cache is left.

Per replica, counting only the GPUs the layout uses (idle GPUs are not
capacity; README, "Memory model"):

* **weights fit** (``weights_fit``, the one rule, also asked per node by
  ``RecipeContext.fits_one_node``) when ``vram_minimum_gb`` ≤ the HBM of those
  GPUs. The recipe figure already includes headroom (the seed: 2.8T × 0.5 byte
  × 1.2 = 1680 GB), so it is applied once, without the utilization on top (as
  the public site does: Qwen3-30B-A3B's 74 GB fit one 80 GB H100);
* **KV cache** = HBM × ``--gpu-memory-utilization`` − the raw weights
  (``vram_minimum_gb`` / headroom; the variant's ``headroom``, else the seed's
  1.2) − a runtime overhead of ``RUNTIME_OVERHEAD_GB`` per GPU (CUDA context,
  NCCL buffers, the activation peak vLLM profiles at start-up). It must be
  positive; with the model's attention geometry it is also given in tokens
  (``kv_tokens``) and checked against ``--max-model-len``;
* the **single-node TP auto-fit** (``single_node_tp``) is the smallest TP for
  which both hold.

"KV offload moves KV cache, never weights" (seed): offload never enters here.
A layout (``composer.parallel.Layout``) tells this module how many GPUs hold
one replica (``replica_gpus``), its TP and PP sizes and what its token count
counts (``token_scope``); nothing here depends on the parallel kind itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - annotations only (no import cycle at run time)
    from composer.context import RecipeContext
    from composer.parallel import Layout

DEFAULT_GPU_UTIL = 0.9
"""vLLM's default ``--gpu-memory-utilization``."""
DEFAULT_HEADROOM = 1.2
"""Headroom factor a ``vram_minimum_gb`` includes when the variant gives none
(the seed's estimate: parameters × bytes per parameter × 1.2)."""
RUNTIME_OVERHEAD_GB = 2.0
"""GPU memory per GPU that is neither weights nor KV cache (CUDA context, NCCL
buffers, activation peak), in GB: a round figure of vLLM's start-up profiling."""
KV_MIN_SHARE = 0.05
"""Smallest KV cache, as a share of the usable memory, for which the TP
auto-fit takes fewer GPUs (when the model's geometry is not given)."""
KV_DTYPE_BYTES = {"fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0, "fp8_ds_mla": 1.0, "int8_per_token_head": 1.0,
                  "fp8_per_token_head": 1.0, "nvfp4": 0.5625, "nvfp4_ds_mla": 0.5625}
"""Bytes per KV element by ``--kv-cache-dtype`` (auto, bfloat16, float16: 2)."""


def weights_fit(weights_gb: float | None, hbm_gb: float) -> bool:
    """Whether ``weights_gb`` (a recipe's ``vram_minimum_gb``, headroom included;
    None: unknown) fit in ``hbm_gb`` of GPU memory (GB). The one rule: no
    utilization is applied on top of the recipe's headroom (module docstring)."""
    return weights_gb is None or weights_gb <= hbm_gb


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
        return weights_fit(self.weights_gb, self.hbm_gb)

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
    return Capacity(weights, gpus, hbm, util, usable, raw, overhead, kv, tokens, mml, explicit, lay.token_scope)


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


def single_node_tp(ctx: RecipeContext, hw_id: str, variant_id: str, util: float,
                   kv_dtype: str | None = None, max_model_len: str | None = None) -> int:
    """TP of a single-node TP deployment (semantics §4.1): the recipe's
    (``variants.<v>.tp``, ``strategy_overrides.single_node_tp.tp``, a hardware
    override's ``--tensor-parallel-size``; capped at the node's GPUs) when it
    gives one; else the smallest power-of-two TP whose GPUs hold the weights and
    divide the attention heads (when given) and whose KV cache holds one
    sequence of the max-model-len in force (with the attention geometry) or,
    without it, at least ``KV_MIN_SHARE`` of the usable memory; else every GPU.
    It depends on the utilization only through the KV room; the plan says when
    the utilization in force moves it (``plan``, notice ``tp-utilization``)."""
    from composer.parallel import Layout

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
