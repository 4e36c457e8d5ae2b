"""The memory model: does a layout hold the weights, and how much KV cache is left.

Two rules, both per replica and counting only the GPUs the layout uses (idle
GPUs are not capacity; README, "Memory model"):

* **weights fit** (``weights_fit``, the one sizing rule, also asked per node by
  ``RecipeContext.fits_one_node``) when ``vram_minimum_gb`` ≤ the vendor HBM of
  those GPUs (decimal GB). The recipe figure already includes headroom (the
  seed: 2.8T × 0.5 byte × 1.2 = 1680 GB), so it is applied once, without the
  utilization on top (as the public site does);
* **the KV cache**, computed the way vLLM 0.33.0 computes it at start-up, per
  GPU in GiB, one term per line of its profiler (``vllm/v1/worker/gpu_worker.py``
  ``determine_available_memory``, lines 641-818, and
  ``vllm/utils/mem_utils.py`` ``memory_profiling``, lines 230-321)::

      Available KV cache memory =  torch-visible memory × --gpu-memory-utilization
                                   − weights per rank
                                   − non-torch memory
                                   − activation peak (forward vs sampler)
                                   − CUDA-graph memory (none with --enforce-eager)
                                   − encoder profiling (multimodal models)

  then split into blocks over the layers that hold KV (``kv_cache``) the way
  ``vllm/v1/core/kv_cache_planning.py`` and ``kv_cache_utils.py`` do, giving
  vLLM's own log line ``GPU KV cache size: N tokens, Maximum concurrency for
  L tokens per request: X.XXx`` (``kv_cache_utils.py:1136-1153``).

Each constant below names its source: a vLLM 0.33.0 source line (the wheel in
``.cache/vllm``) or a published measurement. What is an estimate, and what it
assumes, is said in ``Capacity.assumptions`` (shown with the plan).

"KV offload moves KV cache, never weights" (seed): offload never enters here.
A layout (``composer.parallel.Layout``) tells this module its TP, PP and DP
sizes and how many GPUs hold one replica; nothing here reads a strategy's id.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import TYPE_CHECKING, Mapping, Optional

from composer.model_facts import MAX_LAYERS, model_facts, positive_int as _pos  # at import: the browser's memory snapshot holds only imported modules

if TYPE_CHECKING:  # pragma: no cover - annotations only (no import cycle at run time)
    from composer.context import RecipeContext
    from composer.model_facts import ModelFacts
    from composer.parallel import Layout
    from composer.schema import HardwareProfile

GIB = 1024 ** 3
"""vLLM prints every memory figure of its start-up in GiB (``format_gib``)."""
DEFAULT_GPU_UTIL = 0.92
"""vLLM's default ``--gpu-memory-utilization`` (``vllm/config/cache.py:215``:
``Field(default=0.92, gt=0, le=1)``)."""
DEFAULT_HEADROOM = 1.2
"""Headroom factor a ``vram_minimum_gb`` includes when the variant gives none
(the seed's estimate: parameters × bytes per parameter × 1.2)."""
KV_MIN_SHARE = 0.05
"""Smallest KV cache, as a share of the requested memory, for which the TP
auto-fit takes fewer GPUs (when the model's geometry is not given). Our
policy, not a vLLM rule: vLLM starts with any positive KV room; below 5 % a
plan would serve a handful of short requests."""
KV_DTYPE_BYTES = {"fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0, "fp8_ds_mla": 1.0, "int8_per_token_head": 1.0,
                  "fp8_per_token_head": 1.0, "nvfp4": 0.5625, "nvfp4_ds_mla": 0.5625}
"""Bytes per KV element by ``--kv-cache-dtype`` (``vllm/config/cache.py:44-66``
``CacheDType``): the fp8 and 8-bit kinds one byte, NVFP4 half a byte plus one
fp8 scale per 16 values (0.5625); auto, bfloat16, float16 and the kinds not
listed (TurboQuant, Octave, UltraQuant, int4: their packing is not modelled)
two, which can only under-count the tokens."""
FP8_DS_MLA_TOKEN_BYTES = 656
"""Bytes per token and layer of the ``fp8_ds_mla`` cache: 512 fp8 latent values,
four fp32 scales and a 64-wide bf16 rope key
(``vllm/v1/attention/backends/mla/flashmla_sparse.py:79``)."""
BLOCK_SIZE = 16
"""Tokens per KV block when ``--block-size`` is unset
(``vllm/config/cache.py:185`` ``DEFAULT_BLOCK_SIZE``)."""
HYBRID_BLOCK_ALIGN = 16
"""A hybrid model's attention block is widened until its page holds a
linear-attention state (``kv_cache_planning.py:346-409``
``unify_kv_cache_spec_page_size``), in multiples of this many tokens: a public
vLLM log of Qwen3-Next on 2 × H200 (7,162 blocks of 47,878,721,024 bytes over
12 layers, 557 KB per layer page) shows a 544-token block for a 536-token state."""
ASYNC_BATCHES = 2
"""Batches in flight with async scheduling (vLLM's default) and PP 1
(``vllm/config/vllm.py:588-598`` ``max_concurrent_batches``; PP stages
otherwise): a sliding-window layer holds ``window − 1 + batches ×
max_num_batched_tokens`` tokens per request (``kv_cache_interface.py:918-944``)."""


def batches_in_flight(pp: int) -> int:
    """Batches vLLM keeps in flight at PP size ``pp`` (``ASYNC_BATCHES`` at PP
    1, one per stage otherwise): the capacity model and the launch rule
    ``kv-cache-holds-one-sequence`` both read it."""
    return ASYNC_BATCHES if max(1, pp) == 1 else pp


TORCH_SHARE_OF_VENDOR = 0.99
"""Torch-visible GiB per vendor "GB" of HBM, for a profile neither the
taxonomy nor ``composer/data/gpu_memory.json`` gives a figure for: H100
79.18 / 80 = 0.990, H200 139.81 / 141 = 0.992 (published start-up logs; HBM
is sold in binary units and the driver keeps about 1 % of it)."""
SAMPLER_BYTES_PER_LOGIT = 38.5
"""Peak bytes per (sequence × vocabulary entry) of the dummy sampler run
(``gpu_model_runner.py:5866-5930`` ``_dummy_sampler_run``: float32 logits,
top-k/top-p sorting). Measured: llm-d's H100 profiles (1,024 sequences) give
5.56 GiB for Qwen3 (vocab 151,936: 38.4 B), 4.76 GiB for Llama 3.1
(128,256: 38.9 B), 7.38 GiB for gpt-oss (201,088: 38.5 B); a public Qwen3-Next
log on H200 gives 5.58 GiB (38.5 B). Source:
https://github.com/llm-d/llm-d-benchmark/blob/main/config_explorer/empirical-vllm-memory-results.md"""
FORWARD_BYTES_PER_TOKEN_HIDDEN = 32
"""Estimate: bytes live at the peak of the profile forward pass per batched
token and unit of ``hidden_size`` (about sixteen bf16 hidden-wide tensors:
residual, norms, QKV and MLP intermediates). Only decides the activation peak
when it beats the sampler run; none of the published profiles do (Llama 3.3
70B at 8,192 tokens: ≤ 2 GiB against 4.84 GiB measured)."""
NON_TORCH_GIB = (0.13, 0.55)
"""Non-torch memory per GPU (CUDA context, cuBLAS workspaces; NCCL and custom
all-reduce buffers once a GPU talks to others), in GiB: alone, and in a TP/DP/EP
group. Measured by llm-d on H100 (0.13 at TP 1 for every model, 0.55 at TP 2).
An estimate for larger groups: a public H200 TP 2 log shows 1.38."""
CUDAGRAPH_GIB = (0.5, 1.5)
"""Estimate of ``profile_cudagraph_memory`` (``gpu_model_runner.py:6268``,
subtracted by default since 0.21: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``,
``envs.py:2219``), alone and in a group, in GiB: llm-d's H100 graphs took 0.1 to
1.03 GiB on one GPU; a public H200 TP 2 log, 2.37 GiB (134 graphs, MoE)."""
ENCODER_GIB = 1.0
"""Estimate of the encoder profiling of a multimodal model
(``gpu_model_runner.py:6073-6130``: a dummy batch at the encoder budget), in
GiB; none with ``--language-model-only``. Not measured here: expect ± 1 GiB."""
BATCH_DEFAULTS = ((160.0, 16384, 1024), (70.0, 8192, 1024), (0.0, 2048, 256))
"""vLLM's ``--max-num-batched-tokens`` / ``--max-num-seqs`` for the API server
when unset, by the GPU's torch-visible memory in GiB (``vllm/engine/arg_utils.py:2973-3006``
``get_batch_defaults``: ≥ 160 GiB, ≥ 70 GiB (not A100 or GB10), else)."""


def context_state(context: int | None, max_model_len: int | None, concurrency: float | None) -> str | None:
    """What the capacity line can say of the ``context`` (tokens per request)
    the page asks about: "refused" where it is longer than ``max_model_len``
    (vLLM refuses such a request), "figure" where ``concurrency`` is known and
    it is not the max-model-len itself (whose figure vLLM logs), else None."""
    if context and max_model_len and context > max_model_len:
        return "refused"
    if concurrency is not None and context != max_model_len:
        return "figure"
    return None


def context_line(cap: Mapping) -> tuple[str, bool]:
    """The capacity check ``cap`` (a ``CapacityCheck`` as JSON)'s sentence on
    the Context choice, shown over the folded account, and whether it says
    vLLM refuses such requests: ``("", False)`` where it has none to say, or
    where the whole deployment's total line (``total``) already gives it."""
    said = context_state(cap.get("context"), cap.get("max_model_len"), cap.get("context_concurrency"))
    if said == "refused":
        return (f"The {cap['context']:,}-token requests asked for (Context) are longer than --max-model-len "
                f"{cap['max_model_len']:,}: vLLM refuses them.", True)
    if said == "figure" and not cap.get("total"):
        scope = f" {cap['log_scope']}" if cap.get("log_scope") else ""
        return f"Concurrency for {cap['context']:,}-token requests (Context): {cap['context_concurrency']:.2f}x{scope}", False
    return "", False


def weights_fit(weights_gb: float | None, hbm_gb: float) -> bool:
    """Whether ``weights_gb`` (a recipe's ``vram_minimum_gb``, headroom included;
    None: unknown) fit in ``hbm_gb`` of GPU memory (GB). The one rule: no
    utilization is applied on top of the recipe's headroom (module docstring)."""
    return weights_gb is None or weights_gb <= hbm_gb


# ----- the command's memory flags ---------------------------------------------

@dataclass(frozen=True)
class Flags:
    """The flags of a command the memory model reads (None: vLLM's default).
    ``max_model_len`` is the raw value (``128k``, ``auto``)."""

    util: float = DEFAULT_GPU_UTIL
    kv_dtype: Optional[str] = None
    max_model_len: Optional[str] = None
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    enforce_eager: bool = False
    dcp: int = 1
    block_size: Optional[int] = None
    language_model_only: bool = False

    @classmethod
    def from_values(cls, values: Mapping[str, Optional[str]], util: float | None = None) -> "Flags":
        """From canonical flag names → value (None for a boolean switched on;
        absent: unset). ``util`` overrides ``gpu-memory-utilization``."""
        from composer.vllm_cli import human_int

        def num(key: str) -> int | None:
            v = values.get(key)
            n = human_int(str(v)) if v is not None else None
            return n if n is not None and n > 0 else None

        if util is None:
            try:
                util = float(values.get("gpu-memory-utilization") or DEFAULT_GPU_UTIL)
            except ValueError:
                util = DEFAULT_GPU_UTIL
        return cls(util=util, kv_dtype=values.get("kv-cache-dtype"), max_model_len=values.get("max-model-len"),
                   max_num_seqs=num("max-num-seqs"), max_num_batched_tokens=num("max-num-batched-tokens"),
                   enforce_eager="enforce-eager" in values and values["enforce-eager"] in (None, "true", "True", "1"),
                   dcp=num("decode-context-parallel-size") or 1, block_size=num("block-size"),
                   language_model_only="language-model-only" in values)

    @classmethod
    def from_argv(cls, argv, util: float | None = None) -> "Flags":
        """From a composed command's argv (``vllm serve <model> --flag value …``)."""
        from composer.argv import ArgvError, parse_tokens

        try:
            units = parse_tokens([t for t in argv[3:]])
        except ArgvError:
            return cls(util=util if util is not None else DEFAULT_GPU_UTIL)
        values: dict[str, Optional[str]] = {}
        for u in units:
            if u.enabled:
                values[u.key] = u.value
            else:
                values.pop(u.key, None)
        return cls.from_values(values, util)


# ----- the result ---------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    """One line of vLLM's memory profile, per GPU: ``name``, ``gib``, and
    ``source`` (the vLLM line or measurement it follows; "estimate" when it is one)."""

    name: str
    gib: float
    source: str


@dataclass(frozen=True)
class Lever:
    """What a change would give: ``change`` in words, the KV tokens and the
    maximum concurrency at the max-model-len in force after it."""

    change: str
    kv_tokens: Optional[int]
    concurrency: Optional[float]
    why: str = ""
    """Why the figure moves the way it does, when a reader would not expect it
    (the message only; the plan's ``CapacityLever`` carries the figures)."""


GEOMETRY_UNKNOWN = "the model's attention geometry is unknown"
LENGTH_UNKNOWN = "the model's context length is unknown (no config.json max_position_embeddings, no recipe context_length)"
OMNI_STAGES = ("vLLM-Omni runs the model as stages, each its own engine with the share of GPU memory its deploy "
               "config gives (gpu_memory_utilization per stage, vllm_omni/deploy/*.yaml in vLLM-Omni 0.30.0), and "
               "only its autoregressive stages hold a token KV cache (a diffusion stage holds none): one engine's "
               "KV-cache figures would not be what it logs, so none are given")
NO_AUTO_FIT = ("--max-model-len auto finds no length that fits, and vLLM stops: \"Cannot auto-fit max_model_len: "
               "not enough GPU memory available\" (v1/core/kv_cache_planning.py:1380-1384)")


@dataclass(frozen=True)
class Capacity:
    """Weights and KV cache of one replica on the GPUs that hold it.

    Recipe sizes in GB (10^9 bytes): ``weights_gb`` (with headroom), ``hbm_gb``
    (the vendor HBM of the replica's ``gpus``). vLLM's terms per GPU in GiB:
    ``torch_gib`` × ``util`` = ``requested_gib``; ``weights_gib`` (per rank),
    ``terms`` (every subtraction), ``kv_gib`` (available KV cache memory);
    ``kv_tokens`` and ``concurrency`` as vLLM logs them (per DP rank for DEP:
    ``token_scope``); ``world_size`` the GPUs all of the deployment's ranks use."""

    weights_gb: float | None
    gpus: int
    hbm_gb: float
    util: float
    usable_gb: float
    weights_raw_gb: float | None = None
    overhead_gb: float = 0.0
    kv_gb: float | None = None
    kv_tokens: int | None = None
    max_model_len: int | None = None
    max_model_len_explicit: bool = False
    token_scope: str = ""
    torch_gib: float = 0.0
    requested_gib: float = 0.0
    weights_gib: float | None = None
    kv_gib: float | None = None
    terms: tuple[Term, ...] = ()
    concurrency: float | None = None
    context: int | None = None
    context_concurrency: float | None = None
    assumptions: tuple[str, ...] = ()
    levers: tuple[Lever, ...] = ()
    world_size: int = 0
    no_tokens_reason: str = ""
    """Why ``kv_tokens`` is None (``GEOMETRY_UNKNOWN``, ``LENGTH_UNKNOWN``, ``NO_AUTO_FIT``)."""
    auto_fit_from: int | None = None
    """With ``--max-model-len auto`` (or -1): the model's length vLLM fits
    down from; ``max_model_len`` is then the length it fits
    (``auto_fit_length``)."""
    tokens_for: Optional[object] = field(default=None, compare=False, repr=False)
    """``(kv_gib) -> (tokens, concurrency)`` at the max-model-len in force (the
    block geometry of this capacity), for levers and fixes."""
    holds_for: Optional[object] = field(default=None, compare=False, repr=False)
    """``(kv_gib, length) -> bool``: ``KvGeometry.holds_one`` of this geometry
    at the max-model-len in force (vLLM's start-up check, null block held back)."""
    dp_ranks: int = 1
    """DP ranks of the replica when ``kv_tokens`` counts one of them
    (``token_scope``), else 1."""
    replicas: int = 1
    """Replicas of the deployment when each node holds one (TP+DP:
    ``StrategyKind.replica_per_node``, ``Layout.dp``): the figures are one
    replica's, and a node more is a replica more."""
    fixed_per_request: bool = False
    """Whether part of each request's cache does not grow with its length (a
    linear-attention state, sliding-window blocks): a shorter max-model-len
    then lowers the logged token figure (the lever says why)."""

    @property
    def log_scope(self) -> str:
        """Whose figures the log lines and the levers are: "per DP rank" (each
        DP rank is an engine and logs its own cache), "per replica" (TP+DP: a
        node's engine), or "" (one engine: the deployment's or the pool's)."""
        if self.dp_ranks > 1:
            return "per DP rank"
        return "per replica" if self.replicas > 1 else ""

    @property
    def weights_fit(self) -> bool:
        return weights_fit(self.weights_gb, self.hbm_gb)

    @property
    def holds_one_sequence(self) -> bool:
        """Whether the KV cache holds one sequence of the max-model-len in force
        (True when either is unknown): vLLM refuses to start otherwise
        (``kv_cache_planning.py:50-87`` ``_check_enough_kv_cache_memory``)."""
        if self.holds_for is not None and self.kv_gib is not None:
            return self.holds_for(self.kv_gib)  # type: ignore[operator]
        return self.concurrency is None or not self.max_model_len or self.concurrency >= 1.0

    @property
    def fits(self) -> bool:
        """The weights fit, leave room for KV cache, and (with the geometry) it
        holds one sequence of the max-model-len in force, explicit or the model's."""
        if not self.weights_fit:
            return False
        if self.kv_gib is not None and self.kv_gib <= 0:
            return False
        return self.holds_one_sequence

    @property
    def share(self) -> float | None:
        return None if self.weights_gb is None or not self.hbm_gb else self.weights_gb / self.hbm_gb

    def log_lines(self) -> tuple[str, ...]:
        """What vLLM would print at start, per GPU, in its own words and number
        format (``format_gib``): ``gpu_model_runner.py:5089`` (the start of its
        line: the load time is not estimated), ``gpu_worker.py:773``,
        ``kv_cache_planning.py:1393-1410`` with ``--max-model-len auto`` and
        ``kv_cache_utils.py:1146-1153``. None where a rank's weights exceed its
        GPU's memory: loading them fails before any of these lines (a fresh
        user saw "Model loading took 162.98 GiB" for an 80 GiB H100)."""
        if self.kv_gib is None or (self.torch_gib and (self.weights_gib or 0) > self.torch_gib):
            return ()
        kv = f"{format_gib(self.kv_gib)} GiB GPU"
        lines = [f"Model loading took {format_gib(self.weights_gib)} GiB memory",
                 f"Available KV cache memory: {format_gib(self.kv_gib)} GiB"]
        if self.auto_fit_from and self.max_model_len:
            lines.append(f"Auto-fit max_model_len: full model context length {self.auto_fit_from} fits in available KV "
                         f"cache memory ({kv})" if self.max_model_len >= self.auto_fit_from else
                         f"Auto-fit max_model_len: reduced from {self.auto_fit_from} to {self.max_model_len} to fit in "
                         f"available KV cache memory ({kv})")
        if self.kv_tokens is not None and self.max_model_len and self.concurrency is not None:
            lines.append(f"GPU KV cache size: {self.kv_tokens:,} tokens, Maximum concurrency for "
                         f"{self.max_model_len:,} tokens per request: {self.concurrency:.2f}x")
        return tuple(lines)

    def shortfall(self, where: str) -> str:
        """Why this capacity does not hold the weights or leaves no KV-cache
        room on ``where`` (e.g. "2 × H100"), in one clause of one unit: the
        node-count reasons list one per count (a fresh user read the whole
        ``describe`` per count as one paragraph mixing GB and GiB). The
        weights are compared in the recipe's and the taxonomy's GB (the
        node-count rule's figures), the KV room in vLLM's GiB per GPU."""
        if self.weights_gb is not None and not self.weights_fit:
            return (f"the weights do not fit on {where}: {size_text(self.weights_gb, self.weights_raw_gb)} is "
                    f"{round(100 * (self.share or 0))} % of its {self.hbm_gb:g} GB (the vendors' figure).")
        if self.kv_gib is not None and self.kv_gib <= 0:
            return (f"no memory is left for the KV cache on {where}: {self.kv_gib:.2f} GiB per GPU once vLLM "
                    "subtracts the weights, the activation peak and the CUDA graphs.")
        return self.describe(where)

    def describe(self, where: str) -> str:
        if self.weights_gb is None:
            return f"The recipe gives no weight size; capacity on {where} was not checked."
        pct = round(100 * (self.share or 0))
        gpus = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}"
        # The recipe's size includes headroom; vLLM's per-GPU figures below are of the
        # weights themselves: say both, or the two numbers do not reconcile (a
        # fresh user's finding: 1680 GB over 32 GPUs is not 40.75 GiB per GPU).
        size = size_text(self.weights_gb, self.weights_raw_gb)
        # The fit rule compares the recipe's GB with the taxonomy's vendor GB; vLLM
        # counts torch's GiB: name both, each with its unit, so neither reads as the other.
        per = f" × {self.torch_gib:g} GiB as torch reports them" if self.torch_gib else ""
        text = (f"{size} on {where}: {gpus}{per}; {pct} % of the {self.hbm_gb:g} GB the taxonomy lists (the vendors' "
                f"figures, which the node-count rule compares)")
        if self.kv_gib is None:
            return text + (f"; {self.no_tokens_reason}." if self.no_tokens_reason else ".")
        if not self.weights_fit:
            return text + ": the weights do not fit."
        subtract = ", ".join(f"{t.gib:.2f} {t.name}" for t in self.terms)
        text += (f". Per GPU, as vLLM counts it: {self.torch_gib:g} GiB × gpu-memory-utilization {self.util:g} = "
                 f"{self.requested_gib:.2f} GiB, minus {subtract} leaves {self.kv_gib:.2f} GiB for the KV cache")
        if self.kv_gib <= 0:
            return text + ": no room for the KV cache."
        if self.kv_tokens is not None and self.concurrency is not None and self.max_model_len:
            if self.auto_fit_from:
                text += (f"; --max-model-len auto: vLLM fits {self.max_model_len:,} of the model's "
                         f"{self.auto_fit_from:,} tokens" if self.max_model_len < self.auto_fit_from else
                         f"; --max-model-len auto: the model's {self.auto_fit_from:,} tokens fit")
            # Per DP rank or replica, as each logs it, said before the figures (a fresh user read the first
            # figure and the levers as the deployment's): the totals are a line of their own (total_text).
            text += (f": {self.log_scope[:1].upper() + self.log_scope[1:] + ', ' if self.log_scope else ''}GPU KV cache size "
                     f"{self.kv_tokens:,} tokens, maximum concurrency for {self.max_model_len:,} tokens per request "
                     f"{self.concurrency:.2f}x")
            # A context longer than --max-model-len is no figure: vLLM refuses such a request (adversarial finding:
            # "8,192 tokens per request 337.14x (84.29x for 32,768-token requests)").
            said = context_state(self.context, self.max_model_len, self.context_concurrency)
            if said == "figure":
                text += f" ({self.context_concurrency:.2f}x for {self.context:,}-token requests)"
            elif said == "refused":
                text += (f" (the {self.context:,}-token requests asked for are longer than --max-model-len "
                         f"{self.max_model_len:,}: vLLM refuses them)")
        else:
            text += f" (tokens not estimated: {self.no_tokens_reason or GEOMETRY_UNKNOWN})"
        text += "."
        if self.levers:
            # "X gives N tokens (Cx)", never "X → N": a reader took "--max-model-len 524,288 → 2,458,192 tokens"
            # for a new max-model-len (a fresh user's finding)
            each = f" {self.log_scope}" if self.log_scope else ""
            text += " What changes it most: " + "; ".join(
                f"{lv.change} gives {lv.kv_tokens:,} tokens{each} ({lv.concurrency:.2f}x{lv.why})" if lv.kv_tokens is not None and lv.concurrency is not None
                else f"{lv.change}: not estimated" for lv in self.levers) + "."
        return text

    def total_text(self, scope: str) -> str:
        """The whole deployment's (``scope`` "deployment") or pool's KV cache
        when several engines each log their own (DP ranks, TP+DP replicas), as
        a line of its own: "Whole decode pool: 77,594,624 tokens in all (the 16
        DP ranks each hold their own), 73.92x of 1,048,576-token requests,
        1,184.00x of 32,768-token requests." Empty with one engine or no
        figures. A fresh user found the total mid-paragraph, a few words from
        the per-rank figure for the other length (88.33x vs 88.32x)."""
        copies = self.dp_ranks if self.dp_ranks > 1 else self.replicas
        if copies <= 1 or self.kv_tokens is None or self.concurrency is None or not self.max_model_len:
            return ""
        # The totals multiply the figure shown per rank or replica (as vLLM logs it, 2 decimals): "6.00x each,
        # 12.01x in all" read as an error (an adversarial finding). Both lengths get their total: a fresh user
        # read "74.00x for 32,768" (one rank) beside "73.92x … in all" (the whole, at 1,048,576) as one figure.
        who = (f"the {self.dp_ranks} DP ranks" if self.dp_ranks > 1 else
               f"the {self.replicas} replicas, one per node,")  # a fresh user read one rank's figure as the deployment's
        text = (f"Whole {'deployment' if scope == 'deployment' else scope + ' pool'}: "
                f"{self.kv_tokens * copies:,} tokens in all ({who} each hold their own), "
                f"{round(self.concurrency, 2) * copies:,.2f}x of {self.max_model_len:,}-token requests")
        if self.context_concurrency is not None and self.context != self.max_model_len:
            text += f", {round(self.context_concurrency, 2) * copies:,.2f}x of {self.context:,}-token requests"
        if self.dp_ranks <= 1:  # a fresh user did not see that TP+DP's lever is more nodes, i.e. replicas
            text += "; each node more adds a replica"
        return text + "."

    def check(self, scope: str, where: str, host_gib_per_node: float | None = None):
        """The plan's ``CapacityCheck`` of this capacity for ``scope`` on ``where``."""
        from composer.outputs import CapacityCheck, CapacityLever, MemoryTerm

        return CapacityCheck(
            scope, where, self.weights_gb, self.hbm_gb, self.util, self.usable_gb, self.fits,
            None if self.share is None else round(self.share, 4), self.describe(where),
            gpus=self.gpus, kv_gb=self.kv_gb, kv_tokens=self.kv_tokens, world_size=self.world_size,
            torch_gib=self.torch_gib, requested_gib=_r(self.requested_gib), weights_gib=_r(self.weights_gib),
            kv_gib=_r(self.kv_gib), terms=tuple(MemoryTerm(t.name, _r(t.gib), t.source) for t in self.terms),
            max_model_len=self.max_model_len, max_model_len_explicit=self.max_model_len_explicit,
            max_concurrency=_r(self.concurrency), context=self.context, context_concurrency=_r(self.context_concurrency),
            log=self.log_lines(), levers=tuple(CapacityLever(lv.change, lv.kv_tokens, _r(lv.concurrency)) for lv in self.levers),
            assumptions=self.assumptions, host_kv_gib_per_node=host_gib_per_node,
            kv_tokens_per_dp_rank=bool(self.token_scope), log_scope=self.log_scope, total=self.total_text(scope))


def format_gib(gib: float | None) -> str:
    """A GiB figure as vLLM logs it (``vllm/utils/mem_utils.py`` ``format_gib``:
    ``round(bytes / GiB, 2)`` printed as Python prints a float, so ``10.5``,
    not ``10.50``)."""
    return "?" if gib is None else f"{round(gib, 2)}"


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


# ----- the terms ----------------------------------------------------------------

GPU_MEMORY: Mapping[str, Mapping] = json.loads(
    resources.files("composer").joinpath("data", "gpu_memory.json").read_text(encoding="utf-8"))["profiles"]
"""``composer/data/gpu_memory.json``: torch's GiB per GPU by public taxonomy
hardware id, each with the vendor figures it applies to and its source."""


def torch_memory(hw_id: str, hw: "HardwareProfile") -> tuple[float, str]:
    """``(GiB torch reports per GPU, where the figure comes from)`` for
    profile ``hw`` of id ``hw_id``: the profile's own ``torch_memory_gib``;
    else our data's entry for that id when the profile's vendor GB per GPU is
    one the entry lists (``GPU_MEMORY``: measured start-up logs, or nvidia-smi
    totals less the measured gap); else ``TORCH_SHARE_OF_VENDOR`` × the
    vendor figure read as GiB. vLLM multiplies it by
    ``--gpu-memory-utilization`` (``v1/worker/utils.py:716-726``) and picks
    its batch defaults by it (``engine/arg_utils.py:2973-3006``)."""
    if hw.torch_memory_gib:
        return float(hw.torch_memory_gib), hw.torch_memory_source or "the taxonomy"
    entry = GPU_MEMORY.get(hw_id)
    if entry and any(abs(hw.gb_per_gpu - v) < 0.5 for v in entry["vendor_gb"]):
        return float(entry["torch_memory_gib"]), entry["source"]
    return (round(hw.gb_per_gpu * TORCH_SHARE_OF_VENDOR, 2),
            f"derived: {TORCH_SHARE_OF_VENDOR:g} × the taxonomy's {hw.gb_per_gpu:g} GB per GPU")


def torch_gib(ctx: RecipeContext, hw_id: str) -> float:
    """Memory torch reports per GPU (``torch.cuda.mem_get_info`` total), GiB
    (``torch_memory``)."""
    return torch_memory(hw_id, ctx.hw(hw_id))[0]


def batch_defaults(total_gib: float, small: bool = False) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` vLLM's API server takes when
    unset, for a GPU of ``total_gib`` (``BATCH_DEFAULTS``); ``small``: an A100
    or a GB10 (compute capability 12.1), which vLLM keeps out of the ≥ 70 GiB
    tier (``engine/arg_utils.py:2960-2986``; the ≥ 160 GiB tier has no such
    exclusion). The one table: ``composer.launch.budget`` reads it too."""
    for floor, tokens, seqs in BATCH_DEFAULTS:
        if total_gib >= floor and not (small and floor == 70.0):
            return tokens, seqs
    return BATCH_DEFAULTS[-1][1], BATCH_DEFAULTS[-1][2]


def scheduler_defaults(ctx: RecipeContext, hw_id: str) -> dict[str, str]:
    """vLLM's own ``--max-num-batched-tokens`` and ``--max-num-seqs`` for the
    API server on ``hw_id`` when a command sets neither (``batch_defaults``),
    as flag name → value text."""
    from composer.launch import CUDA_CAPABILITY  # at call time: composer.launch imports this module

    hw = ctx.hw(hw_id)
    tokens, seqs = batch_defaults(torch_gib(ctx, hw_id), small_batch_tier(hw.display_name, CUDA_CAPABILITY.get(hw_id)))
    return {"max-num-batched-tokens": str(tokens), "max-num-seqs": str(seqs)}


def small_batch_tier(device: str, capability: tuple[int, int] | None) -> bool:
    """Whether vLLM keeps a GPU on the small batch tier despite its memory:
    an A100 by name, a GB10 by compute capability 12.1
    (``engine/arg_utils.py:2960-2986``)."""
    return "a100" in (device or "").lower() or capability == (12, 1)


def size_text(weights_gb: float, raw_gb: float | None) -> str:
    """The recipe's size in words: ``"1680 GB (1400 GB of weights + the
    recipe's headroom)"`` when it includes headroom, else ``"… GB of
    weights"`` (a fresh user read "1680 GB of weights" beside "1400 GB of
    weights" as a contradiction)."""
    if raw_gb and abs(raw_gb - weights_gb) > 0.01 * weights_gb:
        return f"{weights_gb:g} GB ({raw_gb:.0f} GB of weights + the recipe's headroom)"
    return f"{weights_gb:g} GB of weights"


def recipe_size_text(ctx: RecipeContext, variant_id: str, task: str | None = None, hw_id: str | None = None) -> str:
    """``size_text`` of a variant's ``vram_minimum_gb`` (``raw_weights_gb``)."""
    weights = ctx.weights_gb(variant_id, task, hw_id)
    if weights is None:
        return "the weights"
    return size_text(weights, raw_weights_gb(ctx, variant_id, task, hw_id)[0])


def raw_weights_gb(ctx: RecipeContext, variant_id: str, task: str | None, hw_id: str | None) -> tuple[float | None, str]:
    """``(GB, where from)`` of the weights themselves: the variant's
    ``checkpoint_gb`` (the checkpoint's real size) when given, else
    ``vram_minimum_gb`` ÷ its ``headroom`` (the seed's 1.2 when unset)."""
    v = ctx.variant(variant_id)
    own = getattr(v, "checkpoint_gb", None)
    if own and not ctx.is_omni:
        return float(own), "the checkpoint's size (variant checkpoint_gb)"
    weights = ctx.weights_gb(variant_id, task, hw_id)
    if weights is None:
        return None, ""
    hr = v.headroom or DEFAULT_HEADROOM
    return weights / hr, f"vram_minimum_gb {weights:g} ÷ headroom {hr:g}"


def _and(parts: tuple[str, ...]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def replicated_params(facts: ModelFacts) -> tuple[float, tuple[str, ...]] | None:
    """``(parameters, what they are)`` that every DP rank of a DP+EP deployment
    holds whole, or None without the hidden size, vocabulary and layer count.
    vLLM splits only the routed experts over the EP ranks; every other weight
    is loaded whole by each DP rank. Counted from the geometry, per layer kind
    (``ModelFacts.layer_sequence``), as vLLM 0.33.0 builds the layers:

    - embeddings and LM head: ``vocab_size × hidden_size``, twice unless tied;
    - MLA (``kv_lora_rank``; ``models/deepseek_v2.py:1051-1113``): fused
      q_a/kv_a ``h × (q_lora_rank + kv_lora_rank + qk_rope_head_dim)``, q_b
      ``q_lora_rank × heads × (qk_nope + qk_rope)`` (or q ``h × heads × …``
      without a q LoRA), kv_b ``kv_lora_rank × heads × (qk_nope + v_head)``, o
      ``heads × v_head × h``;
    - GQA: q and o ``h × heads × head_dim``, k and v ``h × kv_heads × head_dim``;
    - Kimi Delta Attention (``linear_attn_config``;
      ``models/kimi_k3/nvidia/kda.py:634-663,878-884``): q, k, v and o
      ``h × num_heads × head_dim`` (the gates' projections are not counted);
    - Gated DeltaNet (``linear_num_key_heads`` …;
      ``layers/mamba/gdn/qwen_gdn_linear_attn.py:572-574,675-680,805-850``):
      qkvz ``h × (2 × key_dim + 2 × value_dim)``, ba ``h × 2 × v_heads``,
      out ``value_dim × h``;
    - shared experts (``models/deepseek_v2.py:359-366``): ``n_shared_experts ×
      3 × h × moe_intermediate_size`` on every layer.

    A lower bound: dense MLP layers (DeepSeek's first layers), norms, biases
    and gates are not counted, nor any kind whose widths are unknown (an MLA
    model type without its ranks, ``ModelFacts.use_mla`` None)."""
    h, v, n = facts.get("hidden_size"), facts.get("vocab_size"), facts.get("num_hidden_layers")
    if not (_pos(h) and _pos(v) and _pos(n)) or n > MAX_LAYERS:
        return None  # past any model's layer count the layout is unknown (a hostile 2^31 built a 16 GiB tuple)
    total = float(v * h * (1 if facts.get("tie_word_embeddings") else 2))
    parts = ["embeddings"]
    kinds = facts.layer_kinds()
    linear_layers = kinds["linear"] if kinds else 0
    attn_layers = n - linear_layers
    heads = facts.num_attention_heads
    if facts.use_mla:
        q_lora, kv_lora = facts.get("q_lora_rank"), facts.get("kv_lora_rank")
        rope, nope, vh = facts.get("qk_rope_head_dim"), facts.get("qk_nope_head_dim"), facts.get("v_head_dim")
        if _pos(heads) and _pos(kv_lora) and _pos(rope) and _pos(nope) and _pos(vh):
            q = (h * q_lora + q_lora * heads * (nope + rope)) if _pos(q_lora) else h * heads * (nope + rope)
            per = q + h * (kv_lora + rope) + kv_lora * heads * (nope + vh) + heads * vh * h
            total += attn_layers * per
            parts.append(f"MLA projections of {attn_layers} layers")
    elif facts.use_mla is False:  # None: an MLA model type whose ranks are unknown, not counted
        kv, hd = facts.num_key_value_heads, facts.head_dim()
        if _pos(heads) and _pos(kv) and _pos(hd):
            total += attn_layers * (2 * h * heads * hd + 2 * h * kv * hd)
            parts.append(f"attention of {attn_layers} layers")
    if linear_layers:
        la = facts.get("linear_attn_config")
        nk, nv = facts.get("linear_num_key_heads"), facts.get("linear_num_value_heads")
        dk, dv = facts.get("linear_key_head_dim"), facts.get("linear_value_head_dim")
        if isinstance(la, Mapping) and _pos(la.get("num_heads")) and _pos(la.get("head_dim")):
            total += linear_layers * 4 * h * la["num_heads"] * la["head_dim"]
            parts.append(f"Kimi Delta Attention projections of {linear_layers} layers")
        elif _pos(nk) and _pos(nv) and _pos(dk) and _pos(dv):
            total += linear_layers * (h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + nv * dv * h)
            parts.append(f"Gated DeltaNet projections of {linear_layers} layers")
    shared, inter = facts.get("n_shared_experts"), facts.get("moe_intermediate_size")
    if _pos(shared) and _pos(inter):
        total += n * shared * 3 * h * inter
        parts.append("shared experts")
    return total, tuple(parts)


def weights_per_gpu(ctx: RecipeContext, lay: Layout, raw_gb: float, facts: ModelFacts,
                    params_b: float | None) -> tuple[float, str | None]:
    """Weights the fullest rank holds, GiB, and the assumptions behind it (or
    None). TP and PP split the weights (each rank 1/(TP × PP)); with DP + EP
    the routed experts split over all EP ranks while attention and embeddings
    are replicated on every DP rank (vLLM loads the non-expert weights per DP
    rank). Experts that EP does not divide go one more to each of the first
    ranks (``model_executor/layers/fused_moe/expert_map_manager.py:66-76``
    ``determine_expert_map``), so the fullest rank holds ``cdiv(experts, EP)``
    and bounds its DP rank's KV cache."""
    raw_gib = raw_gb * 1e9 / GIB
    shard = max(1, lay.tp) * max(1, lay.pp)
    if not (lay.kind.kv_per_dp_rank and lay.dp > 1):
        return raw_gib / shard, None
    ep = max(1, lay.dp) * max(1, lay.tp)
    experts = facts.routed_experts
    per_rank = 1 / ep
    uneven = ""
    if experts and experts % ep:
        per_rank = _cdiv(experts, ep) / experts
        uneven = (f"; {experts} experts over EP {ep}: {experts % ep} ranks hold {_cdiv(experts, ep)}, the rest "
                  f"{experts // ep} (vLLM's determine_expert_map), and the fullest rank is counted")
    rep = replicated_params(facts)
    if rep is None or not params_b:
        return raw_gib * per_rank, ("the share of non-expert weights is unknown: the weights are taken as split "
                                    f"over the {ep} DP × EP ranks (a lower bound: attention and embeddings are "
                                    "replicated on every DP rank)" + uneven)
    params, parts = rep
    if params > params_b * 1e9:  # the geometry and the parameter count disagree: neither can be trusted here
        return raw_gib * per_rank, (f"the model's geometry gives {params / 1e9:.1f}B replicated parameters, more than "
                                    f"its {params_b:g}B in all: the weights are taken as split over the {ep} DP × EP "
                                    "ranks (a lower bound)" + uneven)
    share = params / (params_b * 1e9)
    per = raw_gib * share / shard + raw_gib * (1 - share) * per_rank
    return per, (f"{_and(parts)} (~{params / 1e9:.1f}B of {params_b:g}B parameters, from the model's geometry) "
                 f"are replicated on every DP rank, the rest split over {ep} EP ranks; a lower bound (dense MLP "
                 "layers, norms and gates are not counted) taken at the checkpoint's average bytes per parameter"
                 + uneven)


def activation_gib(facts: ModelFacts, batched: int, seqs: int) -> tuple[float, str, str | None]:
    """``(GiB, which run, assumption)`` of the profile run's activation peak:
    the larger of the forward pass at ``batched`` tokens and the sampler run
    over ``seqs`` × vocabulary (``gpu_model_runner.py:6132-6139``: ``_dummy_run(
    max_num_tokens)`` then ``_dummy_sampler_run`` on one row per sequence)."""
    vocab, hidden = facts.get("vocab_size"), facts.get("hidden_size")
    note = None
    if not vocab:
        vocab, note = 152064, "the vocabulary size is unknown: 152,064 is assumed (the sampler run tracks it)"
    sampler = seqs * vocab * SAMPLER_BYTES_PER_LOGIT / GIB
    forward = batched * (hidden or 0) * FORWARD_BYTES_PER_TOKEN_HIDDEN / GIB
    if forward > sampler:
        return forward, f"forward pass at {batched:,} batched tokens (estimate)", note
    return sampler, f"sampler run over {seqs:,} sequences × {vocab:,} vocabulary", note


# ----- KV geometry ----------------------------------------------------------------

@dataclass(frozen=True)
class KvGeometry:
    """The KV layout of one rank: layer counts by kind on the rank's stage
    (``full``, ``sliding``, ``linear``: under PP the most any stage holds of
    each kind), bytes per token of one attention layer (``token_bytes``), the
    linear-attention state of one layer and request (``state_bytes``), the
    sliding ``window`` and the block size. ``groups`` are the whole model's KV
    cache groups by kind and ``page_layers`` the layers whose pages make one
    block of the shared pool on the stage with the smallest pool (both derived
    from the counts when not given, as without PP)."""

    full: int
    sliding: int
    linear: int
    token_bytes: float
    state_bytes: float
    window: int
    block: int
    assumptions: tuple[str, ...] = ()
    groups: tuple[int, int, int] | None = None
    page_layers: int | None = None

    def _groups(self) -> tuple[int, int, int, int]:
        """``(layers per block, full groups, sliding groups, linear groups)``:
        the given ``groups``/``page_layers`` (PP), else from the counts
        (``group_layout``)."""
        if self.groups is not None and self.page_layers is not None:
            return (self.page_layers, *self.groups)
        size, groups = group_layout(self.full, self.sliding, self.linear)
        return (size, *groups)

    @property
    def page_layers_in_force(self) -> int:
        """Layers whose pages make one block of the pool (the group size, or
        under PP the fullest projected group of the bounding stage)."""
        return self._groups()[0]

    def num_blocks(self, kv_gib: float) -> int:
        """Blocks of the shared pool: available memory ÷ (page × group size)
        (``kv_cache_planning.py:681``); 0 for memory that is not a finite
        positive figure."""
        if not (kv_gib > 0 and math.isfinite(kv_gib)):
            return 0
        size, *_ = self._groups()
        return int(kv_gib * GIB // (self.block * self.token_bytes * size))

    def blocks_per_request(self, length: int, dcp: int, batched: int, batches: int) -> int:
        """Blocks one request of ``length`` tokens takes over all groups
        (``kv_cache_utils.py:1061-1093``): full attention ``cdiv(cdiv(len,
        DCP), block)`` (``kv_cache_interface.py:643-648``), sliding window its
        window plus the in-flight tokens (``:918-944``), linear attention one
        state block (``:1135-1141``, ``mamba_cache_mode`` none)."""
        _, gf, gs, gl = self._groups()
        full = _cdiv(_cdiv(length, max(1, dcp)), self.block)
        slide = _cdiv(min(self.window - 1 + batches * batched, length), self.block) + 1 if gs else 0
        return gf * full + gs * slide + gl

    def holds_one(self, kv_gib: float, length: int, dcp: int, batched: int, batches: int) -> bool:
        """Whether one request of ``length`` tokens fits: vLLM checks it (and
        auto-fits the length) against the pool less the null block the block
        pool holds back for good (``kv_cache_planning.py:1533-1549``
        ``check_memory``), so a pool of exactly one request's blocks is refused
        although the logged concurrency says 1.00x."""
        return kv_gib > 0 and self.num_blocks(kv_gib) - 1 >= self.blocks_per_request(length, dcp, batched, batches)

    def capacity(self, kv_gib: float, length: int, dcp: int, batched: int, batches: int) -> tuple[int, float]:
        """``(GPU KV cache size in tokens, maximum concurrency)`` for
        ``length`` tokens per request (``kv_cache_utils.py:1120-1127``:
        ``int(concurrency × max_model_len)``)."""
        per = self.blocks_per_request(length, dcp, batched, batches)
        if per <= 0 or kv_gib <= 0:
            return 0, 0.0
        conc = self.num_blocks(kv_gib) / per
        return int(conc * length), conc


def kv_geometry(facts: ModelFacts, lay: Layout, kv_dtype: str | None, block: int | None) -> KvGeometry | None:
    """The KV layout of one rank of ``lay`` (``kv_geometry_of`` at its TP and PP)."""
    return kv_geometry_of(facts, lay.tp, lay.pp, kv_dtype, block)


def kv_geometry_of(facts: ModelFacts, tp: int, pp: int, kv_dtype: str | None, block: int | None) -> KvGeometry | None:
    """``_kv_geometry_of``, made once per facts value and arguments (``ModelFacts.derived``)."""
    return facts.derived.get(("kv-geometry", tp, pp, kv_dtype, block),
                             lambda: _kv_geometry_of(facts, tp, pp, kv_dtype, block))


def _kv_geometry_of(facts: ModelFacts, tp: int, pp: int, kv_dtype: str | None, block: int | None) -> KvGeometry | None:
    """The KV layout of one rank at tensor-parallel size ``tp`` and
    pipeline-parallel size ``pp`` from the model facts, or None when the
    attention geometry is unknown. MLA caches one latent (``kv_lora_rank`` +
    ``qk_rope_head_dim``) whole on every TP rank; GQA splits its KV heads over
    TP down to one per rank (``config/model.py`` ``get_num_kv_heads``); PP
    splits the layers into stages as vLLM does (``pp_stage_layers``: the stage
    with the fewest blocks bounds the pool). The one KV geometry of the project: the capacity model and the
    launch rule ``kv-cache-holds-one-sequence`` (``composer.launch``) both read it."""
    kinds = facts.layer_kinds()
    if not kinds or facts.use_mla is None and facts.get("model_type"):
        return None  # an MLA model whose latent width is unknown (ModelFacts.use_mla)
    dtype = kv_dtype or "auto"
    elem = KV_DTYPE_BYTES.get(dtype, 2.0)
    notes: list[str] = []
    if facts.get("kv_lora_rank"):
        per = FP8_DS_MLA_TOKEN_BYTES if dtype == "fp8_ds_mla" else (facts.get("kv_lora_rank") + (facts.get("qk_rope_head_dim") or 0)) * elem
    else:
        kv, hd = facts.num_key_value_heads, facts.head_dim()
        if not (kv and hd):
            return None
        per = 2 * max(1, -(-kv // max(1, tp))) * hd * elem
    state = 0.0
    bs = block or BLOCK_SIZE
    counted = {"full": "full", "sliding": "sliding", "linear": "linear"}  # the kind each layer is counted as
    if kinds["linear"]:
        found = linear_state_bytes(facts, tp)
        if found is None:
            notes.append(f"the state size of the {kinds['linear']} linear-attention layers is unknown: they are not counted")
            counted["linear"] = ""
        else:
            state = found
            bs = max(bs, _cdiv(math.ceil(state / per), HYBRID_BLOCK_ALIGN) * HYBRID_BLOCK_ALIGN)
    window = facts.sliding_window or 0
    if kinds["sliding"] and not window:
        notes.append("the sliding window is unknown: sliding layers are counted as full attention")
        counted["sliding"] = "full"
    sequence = tuple(counted[k] for k in facts.layer_sequence() or ())
    full, sliding, linear = (sequence.count(k) for k in ("full", "sliding", "linear"))
    groups = page_layers = None
    if max(1, pp) > 1:
        (full, sliding, linear), groups, page_layers = pp_stage_layers(sequence, pp)
    return KvGeometry(full, sliding, linear, per, state, window, bs, tuple(notes), groups, page_layers)


@lru_cache(maxsize=1024)  # a pure function of three counts, asked ~30 times per capacity
def group_layout(full: int, sliding: int, linear: int) -> tuple[int, tuple[int, int, int]]:
    """``(group size, (full, sliding, linear) group counts)`` of vLLM's KV
    cache groups for layer counts by kind (``kv_cache_planning.py:521-541``
    ``_get_kv_cache_groups_uniform_page_size``: the group size is the fewest
    layers of a kind, or the most when no kind has 1.5 × the fewest; each kind
    splits into ``cdiv(count, size)`` groups)."""
    counts = [c for c in (full, sliding, linear) if c]
    if not counts:
        return 1, (0, 0, 0)
    lo, hi = min(counts), max(counts)
    size = hi if hi < lo * 1.5 else lo
    return size, (_cdiv(full, size), _cdiv(sliding, size), _cdiv(linear, size))


def pp_partitions(layers: int, pp: int) -> list[int]:
    """Decoder layers of each of ``pp`` pipeline stages, as vLLM splits them
    (``distributed/utils.py:198-238`` ``get_pp_indices``: ``layers // pp``
    each, the remainder one more on each stage before the last, counted back
    from the second-to-last; ``VLLM_PP_LAYER_PARTITION`` is not read here)."""
    pp = max(1, pp)
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def pp_stage_layers(sequence: tuple[str, ...], pp: int
                    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """For the layer kinds ``sequence`` (``ModelFacts.layer_sequence``) split
    over ``pp`` stages: ``((most full, sliding, linear layers on one stage),
    (full, sliding, linear) group counts of the whole model, layers per block
    on the stage with the smallest pool)``.

    vLLM forms the KV cache groups over the whole model, each kind's layers
    dealt round-robin into its groups (``kv_cache_planning.py:543-556``:
    ``layers[i::num_groups]``), projects them onto each stage's layers
    (``:1413-1458``); a stage's block holds the pages of its fullest projected
    group (``:574-605`` ``_get_kv_cache_bytes_per_block``), and every stage
    takes the smallest stage's block count (``:1580-1594``). Stages are
    assumed to have the same memory for KV. Layers of another kind (``""``:
    not counted) keep their place in the split. Linear in the layers (a PP
    larger than the layer count leaves one layer a stage, the rest empty)."""
    n = len(sequence)
    pp = max(1, pp)
    if pp >= n:
        stage_of = list(range(n))  # get_pp_indices: at most one layer a stage
    else:
        stage_of = []
        for st, size in enumerate(pp_partitions(n, pp)):
            stage_of.extend([st] * size)
    kinds = ("full", "sliding", "linear")
    where = {k: [i for i, t in enumerate(sequence) if t == k] for k in kinds}
    _size, counts = group_layout(*(len(where[k]) for k in kinds))
    most = [0, 0, 0]
    page = 0
    for j, k in enumerate(kinds):
        per_stage: dict[int, int] = {}
        per_group: dict[tuple[int, int], int] = {}
        groups = max(1, counts[j])
        for pos, i in enumerate(where[k]):
            st = stage_of[i]
            per_stage[st] = per_stage.get(st, 0) + 1
            key = (st, pos % groups)
            per_group[key] = per_group.get(key, 0) + 1
        most[j] = max(per_stage.values(), default=0)
        page = max([page, *per_group.values()])
    return (most[0], most[1], most[2]), counts, max(1, page)


def _cdiv(a: int, b: int) -> int:
    """Ceiling division, as vLLM's ``cdiv``."""
    return -(-a // b)


def linear_state_bytes(facts: ModelFacts, tp: int) -> float | None:
    """Bytes of one linear-attention layer's state for one request on one TP
    rank: Kimi Delta Attention from ``linear_attn_config`` (below), else Gated
    DeltaNet
    (``vllm/model_executor/layers/mamba/mamba_utils.py:272-293``
    ``gated_delta_net_state_shape``: conv state (kernel − 1) × (2·k_heads·k_dim +
    v_heads·v_dim)/TP, temporal state v_heads/TP × v_dim × k_dim, both in the
    model dtype, ``:98-110``), or None without the ``linear_*`` facts."""
    la = facts.get("linear_attn_config")
    if la is not None:
        sizes = [la.get("num_heads"), la.get("head_dim"), la.get("short_conv_kernel_size", 4)] if isinstance(la, dict) else []
        if not sizes or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            return None  # a KDA block without positive integer sizes: unknown, never a negative state
        if la["num_heads"] % max(1, tp):
            return None  # vLLM's divide() refuses KDA heads TP does not divide (mamba_utils.py:318)
        # Kimi Delta Attention (Kimi Linear / K3): mamba_utils.py:296-319 kda_state_shape — conv state
        # (kernel − 1) × (q + k + v widths, 3 · heads · head_dim) / TP in the model dtype, recurrent state
        # heads/TP × head_dim × head_dim in float32 (kda_state_dtype, :133-149, mamba_ssm_cache_dtype auto).
        heads, hd, kern = sizes
        tp = max(1, tp)
        return (kern - 1) * 3 * heads * hd / tp * 2 + (heads / tp) * hd * hd * 4
    nk, nv = facts.get("linear_num_key_heads"), facts.get("linear_num_value_heads")
    dk, dv, kern = facts.get("linear_key_head_dim"), facts.get("linear_value_head_dim"), facts.get("linear_conv_kernel_dim")
    if not (nk and nv and dk and dv and kern):
        return None
    tp = max(1, tp)
    conv = (kern - 1) * (dk * nk * 2 + dv * nv) / tp
    temporal = (nv / tp) * dv * dk
    return (conv + temporal) * 2


# ----- the model ------------------------------------------------------------------

def capacity(ctx: RecipeContext, lay: Layout, hw_id: str, variant_id: str, util: float, task: str | None = None,
             kv_dtype: str | None = None, max_model_len: str | None = None, flags: Flags | None = None,
             context: int | None = None) -> Capacity:
    """The memory model (module docstring) of one replica of ``lay`` on
    ``hw_id``. ``flags`` are the command's memory flags (else built from
    ``util``, ``kv_dtype``, ``max_model_len``: vLLM's defaults for the rest);
    ``context`` a length to state the concurrency for as well.

    Pure, so cached per recipe context (region ``capacity``): a page's
    controls ask the same layouts again for every option they check."""
    if flags is None:
        flags = Flags(util=util, kv_dtype=kv_dtype, max_model_len=max_model_len)
    return ctx.cache("capacity").get((lay, hw_id, variant_id, task, flags, context),
                                     lambda: _capacity(ctx, lay, hw_id, variant_id, task, flags, context))


def _capacity(ctx: RecipeContext, lay: Layout, hw_id: str, variant_id: str, task: str | None, flags: Flags,
              context: int | None) -> Capacity:
    hw = ctx.hw(hw_id)
    gpus = lay.replica_gpus
    hbm = round(hw.gb_per_gpu * gpus, 1)
    weights = ctx.weights_gb(variant_id, task, hw_id)
    total = torch_gib(ctx, hw_id)
    requested = total * flags.util
    usable = round(hbm * flags.util, 1)
    world = _world_size(lay)
    mml, explicit = _max_model_len(ctx, flags.max_model_len, variant_id)
    if weights is None:
        return Capacity(None, gpus, hbm, flags.util, usable, torch_gib=total, requested_gib=requested, world_size=world,
                        max_model_len=mml, max_model_len_explicit=explicit)
    raw_gb, raw_from = raw_weights_gb(ctx, variant_id, task, hw_id)
    assert raw_gb is not None
    if ctx.is_omni:  # the weights' fit only: vLLM-Omni's stages are engines of their own (OMNI_STAGES)
        return Capacity(weights, gpus, hbm, flags.util, usable, round(raw_gb, 1), torch_gib=total,
                        requested_gib=requested, world_size=world, no_tokens_reason=OMNI_STAGES)
    facts = model_facts(ctx, variant_id)
    notes: list[str] = [f"torch sees {total:g} GiB per {hw.display_name} GPU ({torch_memory(hw_id, hw)[1]})",
                        f"weights: {raw_from}"]
    w_gib, w_note = weights_per_gpu(ctx, lay, raw_gb, facts, _params_b(ctx, variant_id))
    if w_note:
        notes.append(w_note)
    from composer.launch import CUDA_CAPABILITY  # at call time: composer.launch imports this module

    d_batched, d_seqs = batch_defaults(total, small_batch_tier(hw.display_name, CUDA_CAPABILITY.get(hw_id)))
    batched = flags.max_num_batched_tokens or d_batched
    seqs = flags.max_num_seqs or d_seqs
    unset = [f"--max-num-batched-tokens {d_batched}"] if not flags.max_num_batched_tokens else []
    unset += [f"--max-num-seqs {d_seqs}"] if not flags.max_num_seqs else []
    if unset:  # only the defaults the command leaves in force (a fresh user saw 16384 beside the command's 32768)
        notes.append(f"vLLM's default{'s' if len(unset) > 1 else ''} for a {total:g} GiB GPU, which the command does "
                     f"not set: {', '.join(unset)} (engine/arg_utils.py:2973-3006)")
    group = world > 1
    non_torch = NON_TORCH_GIB[1 if group else 0]
    act, act_run, act_note = activation_gib(facts, batched, seqs)
    if act_note:
        notes.append(act_note)
    terms = [Term("GiB weights per rank", w_gib, "model_runner.model_memory_usage"),
             Term("GiB non-torch memory", non_torch, "llm-d H100 measurement" + (" (estimate beyond TP 2)" if group else "")),
             Term(f"GiB activation peak ({act_run})", act, "gpu_model_runner.py:6132-6139 profile_run")]
    if not flags.enforce_eager:
        terms.append(Term("GiB CUDA-graph memory", CUDAGRAPH_GIB[1 if group else 0],
                          "gpu_worker.py:702-724, estimate (none with --enforce-eager)"))
    if _multimodal(ctx) and not flags.language_model_only:
        terms.append(Term("GiB encoder profiling", ENCODER_GIB, "gpu_model_runner.py:6073-6130, estimate"))
        notes.append("multimodal: the encoder's profile run is estimated at 1 GiB")
    kv_gib = requested - sum(t.gib for t in terms)
    kv_gb = round(kv_gib * GIB * gpus / 1e9, 1)
    geo = kv_geometry(facts, lay, flags.kv_dtype, flags.block_size)
    batches = batches_in_flight(lay.pp)
    tokens = conc = ctx_conc = None
    fn = holds = None
    auto_from = None
    why_none = "" if geo is not None else GEOMETRY_UNKNOWN
    if geo is not None and mml is None and flags.max_model_len is not None:  # auto / -1
        auto_from = _max_model_len(ctx, None, variant_id)[0]
        if auto_from:
            mml = auto_fit_length(geo, kv_gib, auto_from, flags.dcp, batched, batches) or None
            notes.append(f"--max-model-len auto: vLLM fits the longest length whose one sequence the KV cache holds, "
                         f"up to the model's {auto_from:,} (v1/core/kv_cache_planning.py:1337-1410)")
            why_none = "" if mml else NO_AUTO_FIT
    if geo is not None and not mml and not why_none:
        why_none = LENGTH_UNKNOWN
    if geo is not None and mml:
        notes.extend(geo.assumptions)
        if geo.linear or geo.sliding:  # a fresh user found a shorter --max-model-len lowering the token figure
            notes.append("with linear-attention or sliding-window layers a request also takes blocks that do not grow "
                         "with its length, and vLLM logs the KV cache size as concurrency × max-model-len "
                         "(kv_cache_utils.py:1120-1127): a shorter --max-model-len can lower the token figure although "
                         "the memory is the same and the concurrency rises")
        if flags.dcp > 1:
            notes.append(f"decode context parallel {flags.dcp}: each rank holds 1/{flags.dcp} of a sequence's KV")
        if not flags.block_size and geo.block == BLOCK_SIZE:  # a backend's own size (flashmla.py:57-58: 64; cutlass_mla.py:49-50: 128)
            notes.append(f"KV blocks of {BLOCK_SIZE} tokens (vLLM's default, config/cache.py:185); where the attention "
                         "backend needs another size (FlashMLA 64, CUTLASS MLA 128) vLLM uses it, which changes only "
                         "how each request rounds up to whole blocks")

        def fn(kv: float, length: int = mml, _g=geo) -> tuple[int, float]:
            return _g.capacity(kv, length, flags.dcp, batched, batches)

        tokens, conc = fn(kv_gib) if kv_gib > 0 else (0, 0.0)

        def holds(kv: float, length: int = mml, _g=geo) -> bool:
            return _g.holds_one(kv, length, flags.dcp, batched, batches)
        if context and context <= mml:  # vLLM refuses a request longer than max-model-len: no figure for it
            ctx_conc = geo.capacity(kv_gib, context, flags.dcp, batched, batches)[1] if kv_gib > 0 else 0.0
    elif geo is None:
        notes.append("the model's attention geometry is unknown: KV tokens are not estimated")
    return Capacity(weights, gpus, hbm, flags.util, usable, round(raw_gb, 1), 0.0, kv_gb, tokens, mml, explicit,
                    lay.token_scope, total, requested, w_gib, kv_gib, tuple(terms), conc, context, ctx_conc,
                    tuple(notes), (), world, why_none, auto_from, fn, holds,
                    lay.dp if lay.token_scope else 1, lay.dp if lay.kind.replica_per_node else 1,
                    bool(geo is not None and (geo.linear or geo.sliding)))


def auto_fit_length(geo: "KvGeometry", kv_gib: float, original: int, dcp: int, batched: int, batches: int) -> int:
    """The ``max_model_len`` vLLM's auto-fit picks (``--max-model-len auto``
    or -1): the largest length in [1, ``original``] (the model's derived
    length) whose one sequence the KV cache of ``kv_gib`` GiB per GPU holds,
    by vLLM's own binary search over whole tokens
    (``v1/core/kv_cache_planning.py:97-149`` ``estimate_max_model_len``,
    ``:1337-1410`` ``_auto_fit_max_model_len``); 0 when not even one token fits
    (vLLM then stops: "Cannot auto-fit max_model_len")."""
    if kv_gib <= 0 or original <= 0:
        return 0

    def fits(length: int) -> bool:  # against the pool less the null block, as vLLM checks (KvGeometry.holds_one)
        return geo.holds_one(kv_gib, length, dcp, batched, batches)

    if not fits(1):
        return 0
    left, right, result = 1, original, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def with_levers(cap: Capacity, extra: tuple[tuple[str, Capacity | None], ...] = ()) -> Capacity:
    """``cap`` with the changes that move it most, each with its figure:
    gpu-memory-utilization 0.95 (when lower), half the max-model-len (when
    above 8k), and the ``extra`` alternatives the caller computed (an fp8 KV
    cache, more GPUs: ``(label, capacity)``); only those whose figures differ
    from ``cap``'s."""
    fn = cap.tokens_for
    if fn is None or cap.kv_gib is None or not cap.max_model_len:
        return cap
    out: list[Lever] = []
    if cap.util < 0.95:
        kv = cap.kv_gib + cap.torch_gib * (0.95 - cap.util)
        out.append(Lever("gpu-memory-utilization 0.95", *fn(kv)))  # type: ignore[operator]
    for label, other in extra:
        if other is not None and other.kv_tokens is not None and other.concurrency is not None:
            out.append(Lever(label, other.kv_tokens, other.concurrency))
    if cap.max_model_len > 8192 and not cap.auto_fit_from:  # with auto, vLLM picks the length
        half = cap.max_model_len // 2
        t, c = fn(cap.kv_gib, half) if cap.kv_gib > 0 else (0, 0.0)  # type: ignore[operator]
        # A shorter length fits more requests but, when part of a request's cache does not shrink with its length
        # (a linear-attention layer's state, a sliding-window layer's blocks), fewer tokens in all: a fresh user
        # read the lower token figure as a mistake.
        why = ("; the same memory holds more requests, but vLLM logs the token figure as concurrency × "
               "max-model-len and part of each request's cache, its linear-attention state or sliding-window blocks, "
               "does not shrink with its length") if (cap.fixed_per_request and cap.kv_tokens is not None
                                            and t < cap.kv_tokens * 0.999) else ""
        out.append(Lever(f"--max-model-len {half:,}", t, c, why))
    # A change that gives the figure in force is no lever (a fresh user's finding: TP+DP "3 nodes gives" the
    # same tokens, a TP+DP node being a replica; 0.95 utilization where the weights still leave no KV room).
    out = [lv for lv in out if (lv.kv_tokens, lv.concurrency) != (cap.kv_tokens, cap.concurrency)]
    return replace(cap, levers=cap.levers + tuple(out))


def _params_b(ctx: RecipeContext, variant_id: str) -> float | None:
    """Parameters in billions: the variant's ``parameter_count_b``, else the
    model's ``parameter_count`` ("235B", "2.8T", 70.6); None unless a finite
    positive number (adversarial finding: "-0.001B" gave negative weights)."""
    got = _params_b_raw(ctx, variant_id)
    return got if got is not None and math.isfinite(got) and got > 0 else None


def _params_b_raw(ctx: RecipeContext, variant_id: str) -> float | None:
    v = ctx.variant(variant_id).parameter_count_b
    if v:
        return float(v)
    raw = ctx.recipe.model.parameter_count
    if raw is None:
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    s = str(raw).strip().upper()
    mult = {"B": 1.0, "T": 1000.0, "M": 0.001}.get(s[-1:], None)
    try:
        return float(s[:-1]) * mult if mult else float(s)
    except ValueError:
        return None


def _multimodal(ctx: RecipeContext) -> bool:
    """The recipe serves images or audio (``meta.tasks`` has ``multimodal``)."""
    return "multimodal" in (ctx.recipe.meta.tasks or ())


def _world_size(lay: Layout) -> int:
    """GPUs all ranks of the layout use: TP × PP × DP (a TP+DP layout's DP is
    one replica per node)."""
    return max(1, lay.tp) * max(1, lay.pp) * max(1, lay.dp)


def _max_model_len(ctx: RecipeContext, value: str | None, variant_id: str | None = None) -> tuple[int | None, bool]:
    """``(max-model-len in force, set by the command)``: the command's number,
    else vLLM's derived length from the model facts (``config/model.py``
    ``_get_and_verify_max_len``, ``ModelFacts.derived_max_model_len``), else the
    recipe's declared context."""
    if value is not None:
        from composer.vllm_cli import human_int

        n = human_int(value)  # 131072, 128k, 128K as vLLM reads them
        if n is None or n < 0:
            return None, False  # "auto" / -1: vLLM fits it to the KV cache
        return n, True
    derived = model_facts(ctx, variant_id).derived_max_model_len()
    return derived or ctx.recipe.model.context_length, False


def kv_tokens(ctx: RecipeContext, lay: Layout, kv_gb: float, kv_dtype: str | None) -> int | None:
    """KV cache capacity in tokens of one replica (one DP rank for DEP) for a
    replica total of ``kv_gb`` GB, at one block per 16 tokens over every layer
    that holds KV (``kv_geometry``), or None without the geometry."""
    geo = kv_geometry(model_facts(ctx), lay, kv_dtype, None)
    if geo is None:
        return None
    per_gpu = kv_gb * 1e9 / GIB / max(1, lay.replica_gpus)
    return geo.num_blocks(per_gpu) * geo.block if per_gpu > 0 else 0


def single_node_tp(ctx: RecipeContext, hw_id: str, variant_id: str, util: float,
                   kv_dtype: str | None = None, max_model_len: str | None = None) -> int:
    """TP of a single-node TP deployment (semantics §4.1): the recipe's
    (``variants.<v>.tp``, ``strategy_overrides.single_node_tp.tp``, a hardware
    override's ``--tensor-parallel-size``; capped at the node's GPUs) when it
    gives one; else the smallest power-of-two TP whose GPUs hold the weights and
    divide the attention heads (when given) and whose KV cache holds one
    sequence of the max-model-len in force (with the attention geometry) or,
    without it, at least ``KV_MIN_SHARE`` of the requested memory; else every GPU.
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
        if cap.weights_fit and cap.kv_gib is not None and cap.kv_gib > 0 and not (heads and heads % tp):
            if cap.concurrency is not None and cap.max_model_len:
                if cap.concurrency >= 1.0:
                    return tp
            elif cap.kv_gib >= KV_MIN_SHARE * cap.requested_gib:
                return tp
        tp *= 2
    return hw.gpu_count


def fits_length(cap: Capacity) -> int | None:
    """The longest ``--max-model-len`` (a multiple of 1,024 tokens, at least
    1,024) whose one sequence the KV cache of ``cap`` holds, or None when it
    holds none or the geometry is unknown (vLLM's own ``estimate_max_model_len``,
    ``kv_cache_planning.py:97-149``, searches the same way)."""
    holds = cap.holds_for
    if holds is None or not cap.kv_gib or cap.kv_gib <= 0 or not cap.max_model_len:
        return None
    lo, hi = 0, max(1, cap.max_model_len // 1024)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(cap.kv_gib, mid * 1024):  # type: ignore[operator]
            lo = mid
        else:
            hi = mid - 1
    return lo * 1024 if lo else None


__all__ = ["Capacity", "Flags", "capacity", "weights_fit", "single_node_tp", "kv_geometry", "fits_length",
           "with_levers"]
