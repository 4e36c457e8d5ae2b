"""vLLM's own start-up checks, applied to the commands of a plan before anyone
runs them: every rule vLLM 0.33.0 enforces between ``vllm serve`` and the first
request that a command's argv, its environment, the model's facts and the
hardware decide, as data (``RULES``) and one validator.

* ``check_command(argv, env, facts, target)``: one ``vllm serve <model> …``
  command (``argv`` as a plan's ``commands[i]["argv"]``) → the rules it breaks;
* ``check_commands(commands, facts, targets)``: every command of a plan (each
  node and role, P/D pools, followers) plus the rules that only a set of
  commands can break (a DP group's ranks, which of them receive requests);
* ``check_plan(ctx, plan)``: the same for a composed plan dict, with the model
  facts (``composer.model_facts``) and the targets (hardware profile, install
  form, the memory model's KV cache per GPU) taken from the recipe context and
  the plan — the one call an integration needs.

Each result is a ``Violation`` (rule id, level, message with the values, fix
hint, the command's index). ``error`` is what vLLM refuses at start (it raises
before serving); ``warning`` is what starts but runs degraded, with the cost
named. A rule whose ``static`` text is not empty depends on something only the
running machine knows (memory profiling, installed kernels, files): we check it
from the hardware profile and the memory model, and say so.

Where a model fact is unknown the rule assumes the safe form and the violation
says so (``assumed``): an unknown head count admits only power-of-two TP sizes.

Sources: the vLLM 0.33.0 wheel (``composer.vllm_cli.VERSION``), each rule
citing the file and lines it mirrors. Argv is read with the project's own
parser (``composer.argv.parse_tokens``) and vLLM's CLI table
(``composer.vllm_cli``). Pure logic over frozen values; no I/O.

Where it runs (issue 18):

* ``composer.plan.launch_notices`` runs ``check_selection`` on every command
  of every plan (CLI, build, JSON API, page): each ``error`` is an error
  notice ``launch-<rule>`` (the plan's status is then ``error``), each
  ``warning`` a warning notice naming ``RULE[v.rule].cost``; the notice
  carries the rule, the deciding values, the recipe key path that set the
  first of them (the command's provenance), the fix and ``source``.
  ``composer.plan.LAUNCH_ELSEWHERE`` names the rules another step reports
  (``kv-cache-holds-one-sequence``: the KV-capacity notice, issue 18 item 3).
* ``composer.parallel.layout_problem`` asks the model facts for the head
  count (unknown → only a power-of-two TP), so the node counts and pool
  sizes the composer chooses pass ``tp-divides-heads``; ``_dep_flags`` uses
  the internal-LB form for one DP rank per node (no start rank on the head).
* ``composer.controls``: an option whose plan has an error is disabled with
  that error as its reason (``composer.plan.plan_error``).
* ``composer.buildtime.checks.launch_problems``: the lint of the default
  plans of a recipe, by recipe key path.
"""

from __future__ import annotations

import builtins
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from composer import vllm_cli
from composer.argv import ArgvError, flag_value, parse_tokens
from composer.memory import BLOCK_SIZE, batch_defaults, batches_in_flight, kv_geometry_of, small_batch_tier, torch_memory
from composer.model_facts import ModelFacts, facts_for

VERSION = vllm_cli.VERSION


@dataclass(frozen=True)
class Rule:
    """One start-up check of vLLM.

    ``id`` is stable (tests and notices match on it); ``level`` ``error`` (vLLM
    refuses to start) or ``warning`` (it starts, degraded: ``cost`` says how);
    ``scope`` ``command`` (one argv decides it) or ``plan`` (a set of commands
    does); ``source`` the vLLM 0.33.0 file:lines it mirrors; ``vllm_message``
    vLLM's own message (its placeholders in braces); ``static`` empty when the
    rule reproduces vLLM's arithmetic exactly from argv, env and model facts,
    else what only the running machine can confirm.
    """

    id: str
    level: str
    scope: str
    source: str
    vllm_message: str
    cost: str = ""
    static: str = ""
    flags: tuple[str, ...] = ()
    """The options (canonical names) and environment variables whose values
    decide the rule: what a fix changes, and where an integration finds the
    recipe key path (a command's provenance)."""


SPEC_SUBOPTIMAL_BELOW = 8192
"""With speculative decoding vLLM warns that a step budget below this many
tokens "may lead to suboptimal performance" (vllm/config/vllm.py:2359-2367)."""

RULES: tuple[Rule, ...] = (
    # ── Model × parallelism (config/model.py, config/parallel.py) ──
    Rule("tp-divides-heads", "error", "command", "vllm/config/model.py:1557-1564",
         "Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp})."),
    Rule("tp-divides-mamba-heads", "error", "command", "vllm/model_executor/layers/mamba/mamba_mixer2.py:316-323",
         "Tensor parallel world size must divide num heads. / If tensor parallel world size does not divide "
         "num_groups, then num_groups must equal 1."),
    Rule("dcp-divides-tp", "error", "command", "vllm/config/parallel.py:594-607",
         "tp_size={tp} must be divisible by dcp_size={dcp}."),
    Rule("dcp-gqa-kv-heads", "error", "command", "vllm/config/model.py:1578-1607",
         "Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` ({tp}) to be greater than the "
         "model's total number of KV heads ({kv}). / `--decode-context-parallel-size` ({dcp}) exceeds the maximum "
         "supported value ({max}) … / The model's number of query heads per KV head ({q}) must be divisible by "
         "`--decode-context-parallel-size` ({dcp}) for GQA/MQA."),
    Rule("ep-needs-moe", "error", "command", "vllm/config/model.py:1498-1503,1566-1567",
         "Number of experts in the model must be greater than 0 when expert parallelism is enabled."),
    Rule("eplb-needs-ep", "error", "command", "vllm/config/parallel.py:563-584",
         "enable_expert_parallel must be True to use EPLB. / EPLB requires tensor, prefill-context, or data "
         "parallelism, but got TP={tp}, PCP={pcp}, DP={dp}."),
    Rule("max-model-len-over-derived", "error", "command", "vllm/config/model.py:2655-2683",
         "User-specified max_model_len ({mml}) is greater than the derived max_model_len ({key}={derived} or "
         "model_max_length=None in model's config.json). To allow overriding this maximum, set the env var "
         "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
         static="vLLM also caps the derived length at the tokenizer's model_max_length, which we do not read"),
    Rule("max-model-len-over-derived-allowed", "warning", "command", "vllm/config/model.py:2669-2678",
         "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position "
         "encoding (RoPE), positions exceeding derived_max_model_len lead to nan.",
         cost="requests longer than the model's trained context return garbage (NaN logits)"),
    Rule("gpu-memory-utilization-range", "error", "command", "vllm/config/cache.py:215",
         "gpu_memory_utilization: Input should be greater than 0 / less than or equal to 1 (pydantic Field(gt=0, le=1))."),
    # ── Scheduler (config/scheduler.py, engine/arg_utils.py defaults) ──
    Rule("batched-tokens-ge-seqs", "error", "command", "vllm/config/scheduler.py:331-336",
         "max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs ({seqs})."),
    Rule("batched-tokens-ge-model-len", "error", "command", "vllm/config/scheduler.py:318-329",
         "max_num_batched_tokens ({tokens}) is smaller than max_model_len ({mml}). This effectively limits the "
         "maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
         "increase max_num_batched_tokens or decrease max_model_len."),
    Rule("active-seqs-le-seqs", "error", "command", "vllm/config/scheduler.py:338-345",
         "max_num_active_seqs ({active}) cannot be greater than max_num_seqs ({seqs})."),
    Rule("long-prefill-threshold-le-model-len", "error", "command", "vllm/config/scheduler.py:355-360",
         "long_prefill_token_threshold ({threshold}) cannot be greater than the max_model_len ({mml})."),
    Rule("batched-tokens-over-seqs-times-len", "warning", "command", "vllm/config/scheduler.py:347-353",
         "max_num_batched_tokens ({tokens}) exceeds max_num_seqs * max_model_len ({product}). This may lead to "
         "unexpected behavior.",
         cost="the part of the token budget above max_num_seqs × max_model_len can never be scheduled"),
    # ── Speculative decoding (config/speculative.py, config/vllm.py) ──
    Rule("spec-tokens-positive", "error", "command", "vllm/config/speculative.py:1946-1971",
         "Expected num_speculative_tokens to be greater than zero ({n})."),
    Rule("spec-no-tp-key", "error", "command", "vllm/config/speculative.py:1940-1944",
         "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass "
         "'draft_tensor_parallel_size' instead."),
    Rule("spec-draft-tp", "error", "command", "vllm/config/speculative.py:1862-1869",
         "speculative_draft_tensor_parallel_size={n} cannot be other value than 1 or target model tensor_parallel_size"),
    Rule("spec-needs-model", "error", "command", "vllm/config/speculative.py:1240-1295",
         "num_speculative_tokens was provided but without speculative model."),
    Rule("spec-lookahead-slots", "error", "command", "vllm/config/vllm.py:2369-2377,626-655",
         "VllmConfig does not have enough slots to schedule a token and support the speculative decoding settings. "
         "Got max_num_batched_tokens={tokens} and num_lookahead_tokens={lookahead}."),
    Rule("spec-lora-budget", "error", "command", "vllm/engine/arg_utils.py:2712-2724",
         "Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens"),
    Rule("spec-small-token-budget", "warning", "command", "vllm/config/vllm.py:2359-2367",
         "max_num_scheduled_tokens is set to {tokens} based on the speculative decoding settings. This may lead to "
         "suboptimal performance. Consider increasing max_num_batched_tokens to accommodate the additional draft "
         "token slots, or decrease num_speculative_tokens.",
         cost=f"each step schedules fewer than {SPEC_SUBOPTIMAL_BELOW} tokens including draft slots, which vLLM calls "
              "suboptimal"),
    # ── Data-parallel launch modes (entrypoints/cli/serve.py, engine/arg_utils.py) ──
    Rule("dp-one-lb-mode", "error", "command", "vllm/entrypoints/cli/serve.py:79-105; vllm/engine/arg_utils.py:2383-2389",
         "Cannot use more than one data parallel load balancing mode. Choose one of: "
         "--data-parallel-multi-port-external-lb, --data-parallel-external-lb (or --data-parallel-rank), "
         "--data-parallel-hybrid-lb (or --data-parallel-start-rank)."),
    Rule("headless-no-api-servers", "error", "command", "vllm/entrypoints/cli/serve.py:69-77",
         "--api-server-count={n} cannot be used with --headless (no API servers are started in headless mode)."),
    Rule("headless-no-hybrid-lb", "error", "command", "vllm/entrypoints/cli/serve.py:196-197; vllm/engine/arg_utils.py:2380-2382",
         "data_parallel_hybrid_lb is not applicable in headless mode"),
    Rule("headless-local-size", "error", "command", "vllm/entrypoints/cli/serve.py:200-203",
         "data_parallel_size_local must be > 0 in headless mode"),
    Rule("dp-local-le-size", "error", "command", "vllm/config/parallel.py:545-549",
         "data_parallel_size_local ({local}) must be <= data_parallel_size ({dp})"),
    Rule("dp-rank-in-range", "error", "command", "vllm/config/parallel.py:1017-1021",
         "data_parallel_rank ({rank}) must be in the range [0, {dp})"),
    Rule("external-lb-needs-dp", "error", "command", "vllm/config/parallel.py:551-554",
         "data_parallel_external_lb can only be set when data_parallel_size > 1"),
    Rule("external-lb-needs-moe", "error", "command", "vllm/engine/arg_utils.py:2456-2465",
         "Non-MoE models do not support external data parallel mode. For external load balancing, launch "
         "independent vLLM instances without --data-parallel-* arguments."),
    Rule("external-lb-needs-rank", "error", "command", "vllm/engine/arg_utils.py:2467-2475",
         "Invalid data-parallel launch options: `--data-parallel-external-lb` requires a data-parallel rank."),
    Rule("external-lb-local-one", "error", "command", "vllm/engine/arg_utils.py:2476-2482",
         "Invalid data-parallel launch options: an external data-parallel rank requires "
         "`--data-parallel-size-local 1`; got {local}."),
    Rule("hybrid-lb-needs-local-size", "error", "command", "vllm/engine/arg_utils.py:2518-2525",
         "Invalid data-parallel launch options: `--data-parallel-hybrid-lb` requires `--data-parallel-size-local`."),
    Rule("hybrid-lb-local-one", "warning", "command", "vllm/engine/arg_utils.py:2486-2501",
         "data_parallel_hybrid_lb is not eligible when data_parallel_size_local = 1, autoswitch to "
         "data_parallel_external_lb.",
         cost="the node's API server then serves only its own DP rank: every rank needs its own API server "
              "and a load-balancer entry, or the pool runs at 1/N"),
    Rule("internal-lb-rank-zero", "error", "command", "vllm/v1/engine/utils.py:1327-1332",
         "Attempting to launch core_engines from dp_rank > 0, but found internal DPLB, which is incompatible."),
    Rule("nnodes-needs-mp", "error", "command", "vllm/engine/arg_utils.py:2390-2397",
         "Invalid data-parallel launch options: `--nnodes {nnodes}` requires `--data-parallel-backend mp`."),
    Rule("nnodes-divides-world", "error", "command", "vllm/engine/arg_utils.py:2399-2413",
         "Invalid data-parallel launch options: `--nnodes {nnodes}` must evenly divide the total world size ({world})."),
    Rule("node-rank-in-range", "error", "command", "vllm/engine/arg_utils.py:2414-2420",
         "Invalid data-parallel launch options: `--node-rank` must be between 0 and {last}; got `--node-rank {rank}`."),
    Rule("world-size-fits-node", "error", "command", "vllm/config/parallel.py:1054-1077",
         "World size ({world}) is larger than the number of available GPUs ({gpus}) in this node.",
         static="the GPUs a node shows (CUDA_VISIBLE_DEVICES, the hardware profile's GPU count)"),
    Rule("dp-ranks-fit-node", "error", "command", "vllm/v1/engine/utils.py:439-483",
         "Error computing device indices for CUDA_VISIBLE_DEVICES: local range: [{start}, {stop}) …",
         static="the GPUs a node shows (CUDA_VISIBLE_DEVICES, the hardware profile's GPU count)"),
    # ── KV transfer and KV cache ──
    Rule("kv-role-required", "error", "command", "vllm/config/kv_transfer.py:114-124",
         "Please specify kv_role when kv_connector is set, supported roles are "
         "('kv_producer', 'kv_consumer', 'kv_both')"),
    Rule("kv-connector-expandable-segments", "error", "command", "vllm/config/vllm.py:1246-1300",
         "KV connector {connector} is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless "
         "enable_cumem_allocator is also enabled."),
    Rule("nixl-dcp", "error", "command", "vllm/config/vllm.py:1572-1590",
         "decode_context_parallel_size={dcp} must be 1 or equal to the NIXL transfer parallel size={size}. / "
         "PD with decode_context_parallel_size > 1 is only supported for MLA models."),
    Rule("kv-cache-holds-one-sequence", "error", "command",
         "vllm/v1/core/kv_cache_planning.py:49-86,151-179; vllm/v1/kv_cache_interface.py:643-648,946-956",
         "To serve at least one request with the model's max seq len ({mml}), ({needed} GiB KV cache is needed, "
         "which is larger than the available KV cache memory ({available} GiB). Try increasing "
         "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
         static="the available KV cache is the memory model's estimate; vLLM measures it by profiling at start"),
    # ── Front end (entrypoints/common/cli_args.py, renderers/chat_utils) ──
    Rule("chat-template-exists", "error", "command",
         "vllm/renderers/chat_utils/chat_template.py:21-47 (called from vllm/entrypoints/common/cli_args.py:538-539)",
         "The supplied chat template string ({path}) appears path-like, but doesn't exist! Tried: {path} and "
         "…/vllm/transformers_utils/chat_templates/{path}",
         static="files on the node: a file of vLLM's source tree (examples/) is in its container, and a host install "
                "fetches it (composer.run_forms.source_fetches); any other examples/ path exists nowhere"),
    Rule("auto-tool-choice-needs-parser", "error", "command", "vllm/entrypoints/common/cli_args.py:552-554",
         "Error: --enable-auto-tool-choice requires --tool-call-parser"),
    Rule("log-outputs-needs-log-requests", "error", "command", "vllm/entrypoints/common/cli_args.py:555-556",
         "Error: --enable-log-outputs requires --enable-log-requests"),
    # ── Kernels (model_executor/layers/fused_moe) ──
    Rule("moe-backend-device", "error", "command",
         "vllm/model_executor/layers/fused_moe/oracle/unquantized.py:270-296 (and fp8.py:429-452, nvfp4.py:249-273, "
         "mxfp4.py:565-611); device checks: experts/trtllm_*_moe.py, experts/flashinfer_cutlass_moe.py:128-139, "
         "experts/flashinfer_cutedsl_moe.py, experts/flashinfer_b12x_moe.py, b12x.py:499-508, "
         "experts/rocm_aiter_moe.py; vllm/platforms/cuda.py:691-697 (DeepGEMM)",
         "Unquantized MoE backend '{backend}' does not support the deployment configuration since the current "
         "device is not supported.",
         static="the kernel package must also be installed (FlashInfer, DeepGEMM, AITER); we check the GPU only"),
    Rule("attention-backend-device", "error", "command",
         "vllm/platforms/cuda.py:430-446 (a selected backend is validated, never replaced); vllm/v1/attention/"
         "backend.py:328-329; supports_compute_capability of backends/mla/flashinfer_mla.py:220-221, cutlass_mla.py:"
         "65-66, flashmla.py:73-74, flashattn_mla.py:69-70, flashmla_sparse.py:203-204, flashinfer_mla_sparse.py:"
         "105-106 and 192-193, flashinfer_mla_sparse_sm90.py:189-190, flashattn_mla_sparse.py:82-83, tokenspeed_mla.py:125-126",
         "Selected backend {backend} is not valid for this configuration. Reason: ['compute capability not supported']",
         static="the GPU only: head size and KV-cache dtype are attention-backend-config's, the model dtype and block size are not checked"),
    Rule("attention-backend-config", "error", "command",
         "vllm/platforms/cuda.py:430-446 (a selected backend is validated, never replaced); vllm/v1/attention/"
         "backend.py:306-318 (validate_configuration: kv_cache_dtype, MLA / non-MLA); each backend's "
         "supported_kv_cache_dtypes (ATTENTION_BACKEND_KINDS); the layer passes cache_dtype, 'auto' unset "
         "(model_executor/layers/attention/attention.py:277-279)",
         "Selected backend {backend} is not valid for this configuration. Reason: ['kv_cache_dtype not supported']",
         static="a backend's own device-dependent limits beyond its list (FlashAttention's fp8 KV needs FA3, its "
                "heads over 256 FA4), sinks, sparse attention and block size are not checked; the head size only "
                "where the model's head_dim (or MLA ranks) is known"),
    # ── Plan-level: a set of commands ──
    Rule("dp-group-same-config", "error", "plan", "vllm/v1/engine/utils.py:1565-1580; vllm/config/parallel.py:906-960",
         "Configuration mismatch detected for engine {rank}. All DP workers must have identical configurations for "
         "parameters that affect collective communication."),
    Rule("dp-ranks-complete", "error", "plan", "vllm/v1/engine/utils.py:1319-1336,1439-1452",
         "Waiting for {n} remote core engine proc(s) to connect. (rank 0 waits for every DP engine)"),
    Rule("dp-remote-headless", "error", "plan", "vllm/v1/engine/utils.py:1419-1422,1502-1515",
         "Remote engine {rank} must not use --headless in external or hybrid dp lb mode / Remote engine {rank} must "
         "use --headless unless in external or hybrid dp lb mode"),
    Rule("dp-ranks-receive-requests", "warning", "plan",
         "vllm/config/parallel.py:652-657 (local_engines_only); vllm/entrypoints/cli/serve.py:79-130",
         "Client manages local EngineCores in hybrid and external LB case.",
         cost="ranks whose API server no router or client reaches stay idle: the pool serves at k/N capacity"),
)
_TP, _DP = "tensor-parallel-size", "data-parallel-size"
_FLAGS = {
    "tp-divides-heads": (_TP,), "tp-divides-mamba-heads": (_TP,), "dcp-divides-tp": (_TP, "decode-context-parallel-size", "prefill-context-parallel-size"),
    "dcp-gqa-kv-heads": (_TP, "decode-context-parallel-size"), "ep-needs-moe": ("enable-expert-parallel",),
    "eplb-needs-ep": ("enable-eplb", "enable-expert-parallel"), "max-model-len-over-derived": ("max-model-len",),
    "max-model-len-over-derived-allowed": ("max-model-len", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
    "gpu-memory-utilization-range": ("gpu-memory-utilization",),
    "batched-tokens-ge-seqs": ("max-num-batched-tokens", "max-num-seqs"),
    "batched-tokens-ge-model-len": ("max-num-batched-tokens", "max-model-len", "enable-chunked-prefill"),
    "active-seqs-le-seqs": ("max-num-active-seqs", "max-num-seqs"),
    "long-prefill-threshold-le-model-len": ("long-prefill-token-threshold", "max-model-len"),
    "batched-tokens-over-seqs-times-len": ("max-num-batched-tokens", "max-num-seqs", "max-model-len"),
    "spec-tokens-positive": ("speculative-config",), "spec-no-tp-key": ("speculative-config",),
    "spec-draft-tp": ("speculative-config", _TP), "spec-needs-model": ("speculative-config",),
    "spec-lookahead-slots": ("speculative-config", "max-num-batched-tokens"),
    "spec-lora-budget": ("enable-lora", "speculative-config", "max-num-batched-tokens", "max-num-seqs"),
    "spec-small-token-budget": ("speculative-config", "max-num-batched-tokens"),
    "dp-one-lb-mode": ("data-parallel-rank", "data-parallel-start-rank", "data-parallel-hybrid-lb",
                       "data-parallel-external-lb", "data-parallel-multi-port-external-lb"),
    "headless-no-api-servers": ("headless", "api-server-count"), "headless-no-hybrid-lb": ("headless", "data-parallel-hybrid-lb"),
    "headless-local-size": ("headless", "data-parallel-size-local"), "dp-local-le-size": ("data-parallel-size-local", _DP),
    "dp-rank-in-range": ("data-parallel-start-rank", "data-parallel-rank", _DP),
    "external-lb-needs-dp": ("data-parallel-external-lb", "data-parallel-rank", _DP),
    "external-lb-needs-moe": ("data-parallel-external-lb", "data-parallel-rank"),
    "external-lb-needs-rank": ("data-parallel-external-lb", "data-parallel-rank"),
    "external-lb-local-one": ("data-parallel-size-local", "data-parallel-rank"),
    "hybrid-lb-needs-local-size": ("data-parallel-hybrid-lb", "data-parallel-size-local"),
    "hybrid-lb-local-one": ("data-parallel-start-rank", "data-parallel-size-local", "data-parallel-hybrid-lb"),
    "internal-lb-rank-zero": ("data-parallel-start-rank", "headless", "data-parallel-hybrid-lb"),
    "nnodes-needs-mp": ("nnodes", "data-parallel-backend"), "nnodes-divides-world": ("nnodes", _TP, "pipeline-parallel-size", _DP),
    "node-rank-in-range": ("node-rank", "nnodes"), "world-size-fits-node": (_TP, "pipeline-parallel-size", "nnodes"),
    "dp-ranks-fit-node": ("data-parallel-size-local", _TP, "pipeline-parallel-size", "CUDA_VISIBLE_DEVICES"),
    "kv-role-required": ("kv-transfer-config",),
    "kv-connector-expandable-segments": ("kv-transfer-config", "PYTORCH_CUDA_ALLOC_CONF", "enable-cumem-allocator"),
    "nixl-dcp": ("kv-transfer-config", "decode-context-parallel-size"),
    "kv-cache-holds-one-sequence": ("max-model-len", "kv-cache-dtype", "gpu-memory-utilization", _TP, "pipeline-parallel-size"),
    "chat-template-exists": ("chat-template",), "auto-tool-choice-needs-parser": ("enable-auto-tool-choice", "tool-call-parser"),
    "log-outputs-needs-log-requests": ("enable-log-outputs", "enable-log-requests"), "moe-backend-device": ("moe-backend",),
    "attention-backend-device": ("attention-backend",), "attention-backend-config": ("attention-backend", "kv-cache-dtype"),
    "dp-group-same-config": (_TP, "pipeline-parallel-size", _DP, "enable-expert-parallel"),
    "dp-ranks-complete": ("data-parallel-start-rank", "data-parallel-size-local", _DP),
    "dp-remote-headless": ("headless", "data-parallel-start-rank", "data-parallel-size-local", "data-parallel-hybrid-lb"),
    "dp-ranks-receive-requests": ("data-parallel-start-rank", "data-parallel-hybrid-lb", "data-parallel-rank"),
}
RULES = tuple(replace(r, flags=_FLAGS[r.id]) for r in RULES)
"""Every rule, in the order they are checked."""

RULE: Mapping[str, Rule] = {r.id: r for r in RULES}


@dataclass(frozen=True)
class Violation:
    """One rule a command (or a plan) breaks: ``rule`` id, ``level``,
    ``message`` (vLLM's words with the values), ``fix`` (what makes it start),
    ``command`` the index of the command in the plan (None for a single
    command), ``assumed`` the safe assumption made for an unknown model fact
    ("" when every fact was known)."""

    rule: str
    level: str
    message: str
    fix: str
    command: Optional[int] = None
    assumed: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rule": self.rule, "level": self.level, "message": self.message, "fix": self.fix,
             "source": RULE[self.rule].source}
        if self.command is not None:
            d["command"] = self.command
        if self.assumed:
            d["assumed"] = self.assumed
        return d


# ── Where a command runs ─────────────────────────────────────────────────────

CUDA_CAPABILITY: Mapping[str, tuple[int, int]] = {
    "h100": (9, 0), "h200": (9, 0),
    "b200": (10, 0), "gb200": (10, 0),
    "b300": (10, 3), "gb300": (10, 3), "dgx_station_gb300": (10, 3),
    "rtx_pro_6000": (12, 0), "rtx_pro_6000_2x": (12, 0), "rtx_pro_6000_8x": (12, 0),
    "rtx_pro_5000": (12, 0), "rtx_pro_5000_4x": (12, 0), "rtx_5090": (12, 0), "rtx_5090_2x": (12, 0),
    "dgx_spark_gb10": (12, 1),
    "rtx_4090_2x": (8, 9),
}
"""CUDA compute capability of the NVIDIA hardware profiles of our and the
public taxonomy (https://developer.nvidia.com/cuda-gpus: H100/H200 9.0, B200/
GB200 10.0, B300/GB300 10.3, RTX PRO 6000/5000 Blackwell and RTX 5090 12.0,
GB10 12.1, RTX 4090 8.9)."""

PLATFORM_BY_BRAND = {"nvidia": "cuda", "amd": "rocm", "google": "tpu", "huawei": "npu"}


@dataclass(frozen=True)
class Target:
    """Where one command runs, as far as the rules need it.

    ``platform``: cuda | rocm | tpu | cpu | xpu | npu (None: unknown);
    ``capability``: CUDA compute capability (major, minor) or None;
    ``gpus_per_node``: GPUs a node shows; ``gpu_gib``: memory of one GPU in
    GiB as torch reports it (vLLM's batch defaults depend on it); ``device``:
    the GPU's name; ``install``: pip | docker | k8s (None: unknown);
    ``kv_cache_gib``: the KV cache memory one GPU gets, in GiB, from the memory
    model (None: not estimated, the KV rule is then not checked)."""

    platform: Optional[str] = None
    capability: Optional[tuple[int, int]] = None
    gpus_per_node: Optional[int] = None
    gpu_gib: Optional[float] = None
    device: str = ""
    install: Optional[str] = None
    kv_cache_gib: Optional[float] = None


def target_for(hw_id: str, hw: Any, install: str | None = None, kv_cache_gib: float | None = None) -> Target:
    """The ``Target`` of hardware profile ``hw`` (``composer.schema.HardwareProfile``)
    with id ``hw_id``; GPU memory is what torch reports (``composer.memory.torch_memory``),
    as vLLM reads it for its batch defaults."""
    brand = (hw.brand or "").lower()
    platform = PLATFORM_BY_BRAND.get(brand)
    gen = (hw.gen or "").lower()
    if brand == "intel":
        platform = "xpu" if gen == "xpu" else "cpu"
    gib = torch_memory(hw_id, hw)[0] if hw.vram_gb else None
    return Target(platform, CUDA_CAPABILITY.get(hw_id), hw.gpu_count, gib, hw.display_name or hw_id, install, kv_cache_gib)


# ── One command, read as vLLM reads it ───────────────────────────────────────

@dataclass(frozen=True)
class Serve:
    """One ``vllm serve`` command: the ``model`` (positional), every option by
    canonical name (``opts``: a string value, or True/False for a switch; the
    last occurrence wins, as with argparse), JSON-valued options merged with
    their dotted forms (``configs``), and the environment."""

    model: str
    opts: Mapping[str, Any]
    configs: Mapping[str, Mapping[str, Any]]
    env: Mapping[str, str]

    def has(self, name: str) -> bool:
        return name in self.opts

    def int(self, name: str) -> Optional[int]:
        v = self.opts.get(name)
        if v is None or isinstance(v, bool):
            return None
        n = vllm_cli.human_int(str(v))
        return n

    def float(self, name: str) -> Optional[float]:
        v = self.opts.get(name)
        if v is None or isinstance(v, bool):
            return None
        try:
            return float(v)
        except ValueError:
            return None

    def flag(self, name: str) -> Optional[bool]:
        """True/False for a switch given as ``--x`` / ``--no-x``, None unset."""
        v = self.opts.get(name)
        return v if isinstance(v, bool) else None

    def str(self, name: str) -> Optional[builtins.str]:
        v = self.opts.get(name)
        return None if v is None or isinstance(v, bool) else builtins.str(v)

    def conf(self, name: builtins.str) -> Mapping[builtins.str, Any]:
        return self.configs.get(name, {})


def _json_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_serve(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Optional[Serve]:
    """``argv`` (``["vllm", "serve", <model>, <flags>…]``) as a ``Serve``, or
    None when it is not a ``vllm serve`` command or its flags do not parse
    (the lint of ``composer.vllm_cli`` reports those)."""
    argv = list(argv)
    if len(argv) < 2 or argv[0] != "vllm" or argv[1] != "serve":
        return None
    rest = argv[2:]
    model = ""
    if rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    try:
        units = parse_tokens(rest)
    except ArgvError:
        return None
    opts: dict[str, Any] = {}
    configs: dict[str, dict] = {}
    for u in units:
        head, dot, path = u.key.partition(".")
        kind = vllm_cli.OPTIONS.get(head, {}).get("kind")
        if dot:
            conf = configs.setdefault(head, {})
            keys = path.split(".")
            for k in keys[:-1]:
                conf = conf.setdefault(k, {}) if isinstance(conf.get(k, {}), dict) else {}
            conf[keys[-1]] = _json_value(u.value) if u.value is not None else True
            continue
        if u.value is None:
            opts[u.key] = u.enabled
            continue
        opts[u.key] = u.value
        if kind in ("json", "json_or_str"):
            data = _json_value(u.value)
            if isinstance(data, dict):
                configs[u.key] = dict(data)
    if model == "" and isinstance(opts.get("model"), str):
        model = opts["model"]
    return Serve(model, opts, configs, dict(env or {}))


# ── What vLLM derives from the flags ─────────────────────────────────────────

@dataclass(frozen=True)
class DataParallel:
    """A command's data-parallel launch as vLLM resolves it
    (``engine/arg_utils.py:2380-2535``, ``entrypoints/cli/serve.py:69-130``).

    ``mode``: none (DP 1) | internal | hybrid | external | multi_port;
    ``rank``/``local``: the first DP rank this process starts and how many;
    ``auto_external``: hybrid LB switched to external because local is 1;
    ``api_servers``: API server processes (0 for --headless)."""

    size: int
    local: int
    rank: int
    mode: str
    headless: bool
    api_servers: int
    auto_external: bool = False
    explicit_local: Optional[int] = None
    start_rank: Optional[int] = None
    rank_arg: Optional[int] = None

    def ranks(self) -> range:
        return range(self.rank, self.rank + max(0, self.local))

    def served_ranks(self) -> range:
        """DP ranks this command's API server sends requests to."""
        if self.api_servers <= 0:
            return range(0)
        if self.mode in ("internal", "none"):
            return range(0, self.size)
        return self.ranks()


def parallel_sizes(s: Serve) -> tuple[int, int, int, int]:
    """(TP, PP, PCP, DCP) with vLLM's defaults of 1."""
    return (s.int("tensor-parallel-size") or 1, s.int("pipeline-parallel-size") or 1,
            s.int("prefill-context-parallel-size") or 1, s.int("decode-context-parallel-size") or 1)


def _rust_frontend(s: Serve) -> bool:
    return str(s.env.get("VLLM_USE_RUST_FRONTEND", "0")).strip() not in ("", "0")


def data_parallel(s: Serve) -> DataParallel:
    """The ``DataParallel`` of command ``s``, mirroring vLLM's order of inference."""
    tp, pp, pcp, _ = parallel_sizes(s)
    dp = s.int("data-parallel-size") or 1
    nnodes = s.int("nnodes") or 1
    node_rank = s.int("node-rank") or 0
    headless = bool(s.flag("headless"))
    rank_arg = s.int("data-parallel-rank")
    rank = rank_arg
    start = s.int("data-parallel-start-rank")
    local = s.int("data-parallel-size-local")
    explicit_local = local
    hybrid = bool(s.flag("data-parallel-hybrid-lb"))
    external = bool(s.flag("data-parallel-external-lb"))
    multi = bool(s.flag("data-parallel-multi-port-external-lb"))
    inferred = 0
    if nnodes > 1:
        within = pp * tp * pcp
        world = dp * within
        if world % nnodes == 0 and 0 <= node_rank < nnodes:
            local_world = world // nnodes
            inferred = (node_rank * local_world) // within
            if dp > 1 and external:
                if rank is None and nnodes % dp == 0:
                    rank = inferred
            elif local is None:
                local = max(local_world // within, 1)
    ext = external or rank is not None
    auto = False
    if ext:
        eff_local, eff_rank, hyb = 1, rank or 0, False
    elif local is not None:
        eff_local, hyb = local, hybrid
        if start is not None and not headless:
            hyb = True
        if hyb and eff_local == 1:
            ext, hyb, auto = True, False, True
        if eff_local == dp:
            hyb = False
        eff_rank = start if start is not None else inferred
    else:
        eff_local, eff_rank, hyb = dp, 0, hybrid
    if dp <= 1 and not ext:
        mode = "none"
    elif multi:
        mode = "multi_port"
    else:
        mode = "external" if ext else "hybrid" if hyb else "internal"
    # API servers (serve.py:69-130), from the arguments as given.
    count = s.int("api-server-count")
    if headless:
        api = 0
    elif count is not None:
        api = count
    else:
        s_ext = external or rank_arg is not None
        s_hyb = (start is not None) if not (hybrid or multi) else hybrid
        if multi or s_ext or _rust_frontend(s):
            api = 1
        elif s_hyb:
            api = explicit_local or 1
        else:
            api = dp
    return DataParallel(dp, eff_local, eff_rank, mode, headless, api, auto, explicit_local, start, rank_arg)


@dataclass(frozen=True)
class Budget:
    """The scheduler budget in force: ``tokens`` (max_num_batched_tokens) and
    ``seqs`` (max_num_seqs), whether each was given, and the max_model_len
    used (None: unknown, then the defaults that depend on it are not exact)."""

    tokens: Optional[int]
    seqs: Optional[int]
    tokens_given: bool
    seqs_given: bool
    max_model_len: Optional[int]
    chunked_prefill: bool


def max_model_len(s: Serve, facts: ModelFacts) -> tuple[Optional[int], str]:
    """``(max_model_len in force, where it comes from)``: the command's
    ``--max-model-len`` (``explicit``), else vLLM's derived length from the
    model facts (``derived``), else the recipe's declared context
    (``recipe``); ``auto`` / -1 (vLLM fits it to memory) and unknown give None."""
    given = s.str("max-model-len")
    if given is not None:
        n = vllm_cli.human_int(given)
        if n is None or n < 0:
            return None, "auto"
        return n, "explicit"
    d = facts.derived_max_model_len()
    if d:
        return d, "derived"
    if facts.context_length:
        return facts.context_length, "recipe"
    return None, "unknown"


def budget(s: Serve, facts: ModelFacts, target: Target) -> Budget:
    """vLLM's ``_set_default_max_num_seqs_and_batched_tokens_args``
    (``engine/arg_utils.py:3151-3240``) for command ``s`` on ``target``."""
    tokens, seqs = s.int("max-num-batched-tokens"), s.int("max-num-seqs")
    t_given, s_given = tokens is not None, seqs is not None
    mml, _ = max_model_len(s, facts)
    chunked = s.flag("enable-chunked-prefill") is not False
    if t_given and s_given:
        return Budget(tokens, seqs, True, True, mml, chunked)
    gib = target.gpu_gib
    if gib is None:
        d_tokens, d_seqs = None, None
    else:
        # vLLM's defaults by torch's total (the memory model's one table; SchedulerConfig keeps
        # 2048 / 128 when the device cannot be queried, config/scheduler.py:41-43)
        d_tokens, d_seqs = batch_defaults(gib, small_batch_tier(target.device, target.capability))
    dp = s.int("data-parallel-size") or 1
    batched_dp = (s.str("all2all-backend") in ("deepep_low_latency", "nixl_ep") and bool(s.flag("enable-expert-parallel"))
                  and dp > 1)
    if not t_given:
        tokens = 256 if batched_dp else d_tokens
    if not s_given:
        seqs = d_seqs
    if s.str("performance-mode") == "throughput":
        tokens = tokens * 2 if not t_given and tokens else tokens
        seqs = seqs * 2 if not s_given and seqs else seqs
    if not t_given and tokens is not None and mml:
        if not chunked:
            tokens = max(mml, tokens)
        if seqs is not None:
            tokens = min(seqs * mml, tokens)
    if not s_given and seqs is not None and tokens is not None:
        seqs = min(seqs, tokens)
    return Budget(tokens, seqs, t_given, s_given, mml, chunked)


MTP_METHODS = frozenset(c for c in vllm_cli.CONFIGS.get("SpeculativeConfig", {}).get("method", {}).get("choices", [])
                        if c.endswith("_mtp")) | {"mtp"}


def speculative(s: Serve) -> Optional[Mapping[str, Any]]:
    """The ``--speculative-config`` JSON (with its dotted forms), or None."""
    conf = s.conf("speculative-config")
    if conf:
        return conf
    text = s.str("speculative-config")
    return {} if text is not None else None


def lookahead_tokens(spec: Mapping[str, Any]) -> int:
    """``VllmConfig.num_lookahead_tokens`` (``config/vllm.py:626-655``): the
    speculative tokens for EAGLE / MTP / draft-model methods, one more for
    DFlash, none for n-gram and suffix decoding."""
    n = spec.get("num_speculative_tokens")
    if not isinstance(n, int):
        return 0
    method = spec.get("method") or ("ngram" if spec.get("model") in ("ngram", "[ngram]") else "draft_model")
    if method == "dflash":
        return n + 1
    if method in ("eagle", "eagle3", "draft_model", "dspark") or method in MTP_METHODS:
        return n
    return 0


# ── Rule checks: one command ─────────────────────────────────────────────────

def _v(rule: str, message: str, fix: str, assumed: str = "") -> Violation:
    return Violation(rule, RULE[rule].level, message, fix, None, assumed)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _divisors_up_to(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def mamba_tp_problem(f: ModelFacts, tp: int) -> str | None:
    """vLLM's words when ``tp`` does not fit a Mamba-2 hybrid's mixer
    (``mamba_mixer2.py:316-323``: TP divides the Mamba heads, and the groups
    unless there is one), else None; None too when the facts give no Mamba
    heads and groups (``ModelFacts.mamba_heads_and_groups``)."""
    found = f.mamba_heads_and_groups
    if found is None or tp <= 1:
        return None
    heads, groups = found
    if heads % tp:
        return f"Tensor parallel world size must divide num heads (TP {tp}, {heads} Mamba heads)."
    if groups % tp and groups != 1:
        return (f"If tensor parallel world size does not divide num_groups, then num_groups must equal 1 "
                f"(TP {tp}, {groups} Mamba groups).")
    return None


def _check_model_parallel(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    tp, pp, pcp, dcp = parallel_sizes(s)
    heads = f.num_attention_heads
    if heads:
        if heads % tp:
            ok = ", ".join(str(d) for d in _divisors_up_to(heads, 64) if d > 1)
            yield _v("tp-divides-heads",
                     f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}).",
                     f"use a --tensor-parallel-size that divides {heads} (e.g. {ok}), and scale with PP or DP instead")
    elif not _is_pow2(tp):
        yield _v("tp-divides-heads",
                 f"--tensor-parallel-size {tp} is not a power of two and the model's attention head count is unknown; "
                 f"vLLM refuses a TP that does not divide the heads.",
                 "use a power-of-two --tensor-parallel-size (or give model.num_attention_heads in the recipe)",
                 assumed="head count unknown: only power-of-two TP sizes are assumed to divide it")
    why = mamba_tp_problem(f, tp)
    if why:
        heads, groups = f.mamba_heads_and_groups or (0, 0)
        ok = ", ".join(str(d) for d in _divisors_up_to(groups if groups > 1 else heads, 64) if d > 1 and heads % d == 0)
        yield _v("tp-divides-mamba-heads", why,
                 f"use a --tensor-parallel-size that divides the Mamba heads and groups ({ok}), and scale with PP or DP")
    if pcp == 1 and tp % dcp:
        yield _v("dcp-divides-tp", f"tp_size={tp} must be divisible by dcp_size={dcp}.",
                 f"use a --decode-context-parallel-size that divides {tp}, or drop it")
    elif pcp > 1 and dcp not in (1, pcp, tp * pcp):
        yield _v("dcp-divides-tp",
                 f"When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x PCP axis. "
                 f"Got TP={tp}, PCP={pcp}, DCP={dcp}; valid DCP sizes are {sorted({1, pcp, tp * pcp})}.",
                 f"set --decode-context-parallel-size to one of {sorted({1, pcp, tp * pcp})}")
    kv = f.num_key_value_heads
    if dcp > 1 and f.use_mla is False and kv:
        if tp <= kv:
            yield _v("dcp-gqa-kv-heads",
                     f"Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` ({tp}) to be greater "
                     f"than the model's total number of KV heads ({kv}). Increase `--tensor-parallel-size` or set "
                     f"`--decode-context-parallel-size 1`.",
                     "drop --decode-context-parallel-size (DCP on a GQA model needs TP above its KV heads)")
        elif dcp > tp // kv:
            yield _v("dcp-gqa-kv-heads",
                     f"`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported value ({tp // kv}) for "
                     f"`--tensor-parallel-size` ({tp}) and {kv} model KV heads.",
                     f"use --decode-context-parallel-size {tp // kv} or less")
        elif heads and (heads // kv) % dcp:
            yield _v("dcp-gqa-kv-heads",
                     f"The model's number of query heads per KV head ({heads // kv}) must be divisible by "
                     f"`--decode-context-parallel-size` ({dcp}) for GQA/MQA.",
                     f"use a --decode-context-parallel-size that divides {heads // kv}")
    if s.flag("enable-expert-parallel") and f.is_moe is False:
        yield _v("ep-needs-moe",
                 "Number of experts in the model must be greater than 0 when expert parallelism is enabled.",
                 "drop --enable-expert-parallel: the model has no experts")
    if s.flag("enable-eplb"):
        dp = s.int("data-parallel-size") or 1
        if not s.flag("enable-expert-parallel"):
            yield _v("eplb-needs-ep", "enable_expert_parallel must be True to use EPLB.",
                     "add --enable-expert-parallel or drop --enable-eplb")
        elif tp * pcp * dp <= 1:
            yield _v("eplb-needs-ep", f"EPLB requires tensor, prefill-context, or data parallelism, but got TP={tp}, "
                                      f"PCP={pcp}, DP={dp}.", "drop --enable-eplb on a single GPU")


def _check_max_model_len(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    given = s.str("max-model-len")
    n = vllm_cli.human_int(given) if given is not None else None
    if n is None or n < 0:
        return
    overrides = s.str("hf-overrides") or ""
    if "max_position_embeddings" in overrides or "rope" in overrides:
        return
    derived = f.derived_max_model_len()
    if not derived or n <= derived:
        return
    allow = str(s.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")).strip().lower() in ("1", "true")
    if allow:
        yield _v("max-model-len-over-derived-allowed",
                 f"--max-model-len {n} is above the model's derived maximum ({derived}); VLLM_ALLOW_LONG_MAX_MODEL_LEN "
                 f"lets vLLM start, and positions beyond {derived} lead to NaN with RoPE.",
                 f"use --max-model-len {derived} or less, or extend the context with the model's RoPE scaling (--hf-overrides)")
        return
    yield _v("max-model-len-over-derived",
             f"User-specified max_model_len ({n}) is greater than the derived max_model_len "
             f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
             f"overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
             f"use --max-model-len {derived} or less (or the model's documented RoPE scaling via --hf-overrides)")


def _check_cache(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    u = s.float("gpu-memory-utilization")
    if u is not None and not 0 < u <= 1:
        yield _v("gpu-memory-utilization-range",
                 f"gpu_memory_utilization must be greater than 0 and at most 1; got {u:g}.",
                 "use a --gpu-memory-utilization in (0, 1], e.g. 0.9")


def _check_scheduler(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    b = budget(s, f, t)
    if b.tokens is not None and b.seqs is not None and b.tokens < b.seqs:
        yield _v("batched-tokens-ge-seqs",
                 f"max_num_batched_tokens ({b.tokens}) must be greater than or equal to max_num_seqs ({b.seqs}).",
                 f"raise --max-num-batched-tokens to at least {b.seqs} or lower --max-num-seqs to {b.tokens}")
    mml = b.max_model_len
    if b.tokens_given and b.tokens is not None and not b.chunked_prefill and mml and b.tokens < mml:
        yield _v("batched-tokens-ge-model-len",
                 f"max_num_batched_tokens ({b.tokens}) is smaller than max_model_len ({mml}). This effectively limits "
                 f"the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences.",
                 f"raise --max-num-batched-tokens to {mml}, lower --max-model-len, or keep chunked prefill on")
    active = s.int("max-num-active-seqs")
    if active is not None and b.seqs is not None and active > b.seqs:
        yield _v("active-seqs-le-seqs", f"max_num_active_seqs ({active}) cannot be greater than max_num_seqs ({b.seqs}).",
                 f"lower --max-num-active-seqs to {b.seqs} or raise --max-num-seqs")
    thr = s.int("long-prefill-token-threshold")
    if thr and mml and thr > mml:
        yield _v("long-prefill-threshold-le-model-len",
                 f"long_prefill_token_threshold ({thr}) cannot be greater than the max_model_len ({mml}).",
                 f"use --long-prefill-token-threshold {mml} or less")
    if b.tokens_given and b.tokens is not None and b.seqs is not None and mml and b.tokens > b.seqs * mml:
        yield _v("batched-tokens-over-seqs-times-len",
                 f"max_num_batched_tokens ({b.tokens}) exceeds max_num_seqs * max_model_len ({b.seqs * mml}). "
                 f"This may lead to unexpected behavior.",
                 f"lower --max-num-batched-tokens to {b.seqs * mml}")


def _check_speculative(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    spec = speculative(s)
    if spec is None:
        return
    tp = s.int("tensor-parallel-size") or 1
    if "tensor_parallel_size" in spec:
        yield _v("spec-no-tp-key",
                 "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass "
                 "'draft_tensor_parallel_size' instead.", "rename tensor_parallel_size to draft_tensor_parallel_size")
    n = spec.get("num_speculative_tokens")
    method = spec.get("method")
    if method is None and spec.get("model") is None and n is not None:
        yield _v("spec-needs-model", "num_speculative_tokens was provided but without speculative model.",
                 "give a \"method\" (e.g. mtp, ngram) or a draft \"model\" in --speculative-config")
    if isinstance(n, int) and n <= 0:
        yield _v("spec-tokens-positive", f"Expected num_speculative_tokens to be greater than zero ({n}).",
                 "set num_speculative_tokens to 1 or more")
    dtp = spec.get("draft_tensor_parallel_size")
    if isinstance(dtp, int) and dtp not in (1, tp):
        yield _v("spec-draft-tp",
                 f"speculative_draft_tensor_parallel_size={dtp} cannot be other value than 1 or target model "
                 f"tensor_parallel_size", f"set draft_tensor_parallel_size to 1 or {tp}")
    b = budget(s, f, t)
    look = lookahead_tokens(spec)
    if b.tokens is not None and look and b.tokens <= look:
        yield _v("spec-lookahead-slots",
                 f"VllmConfig does not have enough slots to schedule a token and support the speculative decoding "
                 f"settings. Got max_num_batched_tokens={b.tokens} and num_lookahead_tokens={look}.",
                 f"raise --max-num-batched-tokens above {look}")
    if s.flag("enable-lora") and isinstance(n, int) and b.tokens is not None and b.seqs is not None \
            and b.tokens < b.seqs * (n + 1):
        yield _v("spec-lora-budget",
                 f"Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens "
                 f"(LoRA with speculative decoding needs max_num_batched_tokens {b.tokens} ≥ max_num_seqs {b.seqs} × "
                 f"(num_speculative_tokens {n} + 1) = {b.seqs * (n + 1)}).",
                 f"raise --max-num-batched-tokens to {b.seqs * (n + 1)} or lower --max-num-seqs")
    scheduled = s.int("max-num-scheduled-tokens") or b.tokens
    if scheduled is not None and 0 < scheduled < SPEC_SUBOPTIMAL_BELOW:
        yield _v("spec-small-token-budget",
                 f"max_num_scheduled_tokens is set to {scheduled} based on the speculative decoding settings. This "
                 f"may lead to suboptimal performance.",
                 f"raise --max-num-batched-tokens to {SPEC_SUBOPTIMAL_BELOW} or more for speculative decoding, or "
                 "accept the warning")


def _check_data_parallel(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    d = data_parallel(s)
    hybrid = bool(s.flag("data-parallel-hybrid-lb"))
    external = bool(s.flag("data-parallel-external-lb"))
    multi = bool(s.flag("data-parallel-multi-port-external-lb"))
    s_ext = external or d.rank_arg is not None
    s_hyb = (d.start_rank is not None) if not (hybrid or multi) else hybrid
    if sum([multi, s_ext, s_hyb]) > 1 or (hybrid and external):
        yield _v("dp-one-lb-mode",
                 "Cannot use more than one data parallel load balancing mode. Choose one of: "
                 "--data-parallel-multi-port-external-lb, --data-parallel-external-lb (or --data-parallel-rank), "
                 "--data-parallel-hybrid-lb (or --data-parallel-start-rank).",
                 "keep one of --data-parallel-rank (external LB) and --data-parallel-start-rank (hybrid LB / followers)")
    count = s.int("api-server-count")
    if d.headless and count is not None and count > 0:
        yield _v("headless-no-api-servers",
                 f"--api-server-count={count} cannot be used with --headless (no API servers are started in headless mode).",
                 "drop --api-server-count from the headless command")
    if d.headless and hybrid:
        yield _v("headless-no-hybrid-lb", "data_parallel_hybrid_lb is not applicable in headless mode",
                 "drop --data-parallel-hybrid-lb from the headless command")
    if d.headless and d.explicit_local is not None and d.explicit_local <= 0:
        yield _v("headless-local-size", "data_parallel_size_local must be > 0 in headless mode",
                 "give the headless node --data-parallel-size-local 1 or more")
    if d.local > d.size:
        yield _v("dp-local-le-size", f"data_parallel_size_local ({d.local}) must be <= data_parallel_size ({d.size})",
                 f"use --data-parallel-size-local {d.size} or less")
    if d.size > 1 and not 0 <= d.rank < d.size:
        yield _v("dp-rank-in-range", f"data_parallel_rank ({d.rank}) must be in the range [0, {d.size})",
                 f"use a start rank below {d.size}")
    if d.mode == "external" and not d.auto_external:
        if d.size <= 1:
            yield _v("external-lb-needs-dp", "data_parallel_external_lb can only be set when data_parallel_size > 1",
                     "drop --data-parallel-external-lb / --data-parallel-rank, or set --data-parallel-size")
        elif f.is_moe is False:
            yield _v("external-lb-needs-moe",
                     "Non-MoE models do not support external data parallel mode. For external load balancing, launch "
                     "independent vLLM instances without --data-parallel-* arguments.",
                     "run independent replicas without --data-parallel-* arguments")
        if d.rank_arg is None and external and (s.int("nnodes") or 1) <= 1:
            yield _v("external-lb-needs-rank",
                     "Invalid data-parallel launch options: `--data-parallel-external-lb` requires a data-parallel rank.",
                     "give each external-LB process its --data-parallel-rank")
        if d.explicit_local not in (None, 1):
            yield _v("external-lb-local-one",
                     f"Invalid data-parallel launch options: an external data-parallel rank requires "
                     f"`--data-parallel-size-local 1`; got {d.explicit_local}.", "use --data-parallel-size-local 1 or omit it")
    if hybrid and d.explicit_local is None and not s_ext and (s.int("nnodes") or 1) <= 1:
        yield _v("hybrid-lb-needs-local-size",
                 "Invalid data-parallel launch options: `--data-parallel-hybrid-lb` requires `--data-parallel-size-local`.",
                 "add --data-parallel-size-local (the DP ranks on this node)")
    if d.auto_external:
        yield _v("hybrid-lb-local-one",
                 f"data_parallel_hybrid_lb is not eligible when data_parallel_size_local = 1, autoswitch to "
                 f"data_parallel_external_lb (DP rank {d.rank} of {d.size}).",
                 "with one DP rank per node, either start the head without --data-parallel-start-rank (internal LB, "
                 "followers --headless), or run every node as its own API server with --data-parallel-rank and list "
                 "every node in the router")
    if d.mode == "internal" and d.rank > 0 and not d.headless and d.size > 1:
        yield _v("internal-lb-rank-zero",
                 f"Attempting to launch core_engines from dp_rank > 0 (rank {d.rank}), but found internal DPLB, which "
                 f"is incompatible.", "start this node --headless, or with --data-parallel-hybrid-lb")
    tp, pp, pcp, _ = parallel_sizes(s)
    nnodes = s.int("nnodes") or 1
    node_rank = s.int("node-rank") or 0
    if nnodes > 1:
        backend = s.str("data-parallel-backend") or "mp"
        if backend != "mp":
            yield _v("nnodes-needs-mp", f"Invalid data-parallel launch options: `--nnodes {nnodes}` requires "
                                        f"`--data-parallel-backend mp`; got `--data-parallel-backend {backend}`.",
                     "use --data-parallel-backend mp or --nnodes 1")
        world = d.size * tp * pp * pcp
        if world % nnodes:
            yield _v("nnodes-divides-world", f"Invalid data-parallel launch options: `--nnodes {nnodes}` must evenly "
                                             f"divide the total world size ({world}).",
                     "make DP × TP × PP × PCP a multiple of --nnodes")
        if not 0 <= node_rank < nnodes:
            yield _v("node-rank-in-range", f"Invalid data-parallel launch options: `--node-rank` must be between 0 and "
                                           f"{nnodes - 1}; got `--node-rank {node_rank}`.", "number the nodes 0 … nnodes-1")


def _visible_gpus(s: Serve, t: Target) -> Optional[int]:
    vis = s.env.get("CUDA_VISIBLE_DEVICES") if t.platform == "cuda" else None
    if vis is not None and re.fullmatch(r"[0-9, ]*", vis):
        return len([x for x in vis.split(",") if x.strip()])
    return t.gpus_per_node


def _check_devices(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    gpus = _visible_gpus(s, t)
    if not gpus or t.platform not in ("cuda", "rocm") or (s.str("distributed-executor-backend") or "mp") == "ray":
        return
    tp, pp, pcp, _ = parallel_sizes(s)
    world = tp * pp * pcp
    nnodes = s.int("nnodes") or 1
    d = data_parallel(s)
    if nnodes == 1 and world > gpus and t.platform == "cuda":
        yield _v("world-size-fits-node",
                 f"World size ({world}) is larger than the number of available GPUs ({gpus}) in this node.",
                 f"spread the command over nodes (--nnodes with --node-rank, one command per node) or lower TP × PP to {gpus}")
        return
    if d.size > 1 or d.mode != "none":
        nodes_within = max(1, nnodes // max(1, d.size // max(1, d.local))) if nnodes > 1 else 1
        local_world = world // nodes_within
        stop = (max(1, d.local) - 1) * world + local_world
        if stop > gpus:
            yield _v("dp-ranks-fit-node",
                     f"{d.local} local DP rank(s) × world size {world} need GPUs [0, {stop}) but the node shows {gpus}.",
                     f"use --data-parallel-size-local {max(1, gpus // world)} on this node (or fewer GPUs per rank)")


def _check_kv_transfer(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    conf = s.conf("kv-transfer-config")
    connector = conf.get("kv_connector")
    if not connector:
        return
    role = conf.get("kv_role")
    if role is None:
        yield _v("kv-role-required", "Please specify kv_role when kv_connector is set, supported roles are "
                                     "('kv_producer', 'kv_consumer', 'kv_both')",
                 "add \"kv_role\" to --kv-transfer-config")
    elif role not in ("kv_producer", "kv_consumer", "kv_both"):
        yield _v("kv-role-required", f"Unsupported kv_role: {role}. Supported roles are ('kv_producer', 'kv_consumer', 'kv_both')",
                 "use kv_producer, kv_consumer or kv_both")
    alloc = s.env.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if "expandable_segments:True" in alloc and not s.flag("enable-cumem-allocator") and not s.flag("enable-sleep-mode"):
        yield _v("kv-connector-expandable-segments",
                 f"KV connector {connector} is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless "
                 f"enable_cumem_allocator is also enabled.",
                 "drop expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF or add --enable-cumem-allocator")
    connectors = [connector] + [c.get("kv_connector") for c in (conf.get("kv_connector_extra_config") or {}).get("connectors", [])
                                if isinstance(c, dict)]
    if "NixlConnector" in connectors:
        tp, _, pcp, dcp = parallel_sizes(s)
        size = max(tp, pcp)
        if dcp not in (1, size):
            yield _v("nixl-dcp", f"decode_context_parallel_size={dcp} must be 1 or equal to the NIXL transfer parallel "
                                 f"size={size}.", f"use --decode-context-parallel-size 1 or {size} with NIXL")
        elif dcp > 1 and f.use_mla is False:
            yield _v("nixl-dcp", "PD with decode_context_parallel_size > 1 is only supported for MLA models.",
                     "drop --decode-context-parallel-size on P/D for this (non-MLA) model")




def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_bytes_one_sequence(s: Serve, f: ModelFacts, mml: int, tokens_budget: Optional[int]) -> Optional[tuple[float, str]]:
    """``(bytes of KV cache one GPU needs for one sequence of mml tokens, what
    was left out)``, as vLLM 0.33.0 charges it at start
    (``v1/core/kv_cache_planning.py:1253-1285`` ``_max_memory_usage_bytes_from_groups``):
    the stage's bytes per block (the pages of its fullest group) times the
    blocks one request takes over every KV cache group
    (``composer.memory.KvGeometry.blocks_per_request``: full attention
    ``cdiv(cdiv(mml, DCP), block)``, sliding window its window plus the
    in-flight tokens, linear attention one state block), over the layers and
    per-token bytes of ``composer.memory.kv_geometry_of`` (the project's one
    KV geometry: MLA's latent on every TP rank, GQA's KV heads split over TP,
    PP's stages as vLLM splits them). MTP draft layers, and linear-attention
    layers whose state size is unknown, are left out (said in the second
    element). None when the geometry is unknown."""
    tp, pp, _, dcp = parallel_sizes(s)
    geo = kv_geometry_of(f, tp, pp, s.str("kv-cache-dtype"), BLOCK_SIZE)
    if geo is None:
        return None
    blocks = geo.blocks_per_request(mml, dcp, tokens_budget or 0, batches_in_flight(pp))
    total = blocks * geo.block * geo.token_bytes * geo.page_layers_in_force
    left = []
    linear = (f.layer_kinds() or {}).get("linear")
    if linear and not geo.linear:
        left.append(f"{linear} linear-attention layers' state (its size is unknown)")
    if f.get("num_nextn_predict_layers") and speculative(s) is not None:
        left.append("the MTP draft layers")
    return total, ", ".join(left)


def _check_kv_fit(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    if t.kv_cache_gib is None:
        return
    mml, where = max_model_len(s, f)
    if not mml:
        return
    b = budget(s, f, t)
    found = kv_bytes_one_sequence(s, f, mml, b.tokens)
    if found is None:
        return
    need, left = found
    avail = t.kv_cache_gib * 2 ** 30
    said = {"explicit": "--max-model-len", "derived": "the model's config.json (no --max-model-len set)",
            "recipe": "the recipe's context_length (no --max-model-len set)"}[where]
    if avail <= 0:
        yield _v("kv-cache-holds-one-sequence",
                 "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
                 "the engine.", "raise --gpu-memory-utilization, use more GPUs (TP/PP) or a smaller checkpoint",
                 assumed="available KV cache from the memory model's estimate")
        return
    if need > avail:
        fit = int(mml * avail / need) // 1024 * 1024
        extra = f" (not counted: {left})" if left else ""
        yield _v("kv-cache-holds-one-sequence",
                 f"To serve at least one request with the model's max seq len ({mml}, from {said}), "
                 f"({need / 2 ** 30:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
                 f"({t.kv_cache_gib:.2f} GiB){extra}.",
                 f"set --max-model-len {fit} or less, use an fp8 KV cache (--kv-cache-dtype fp8), or spread the model "
                 f"over more GPUs" if fit > 0 else "use more GPUs or a smaller checkpoint",
                 assumed="available KV cache per GPU from the memory model's estimate")


BUILTIN_CHAT_TEMPLATES = frozenset({"template_basic.jinja", "template_blip2.jinja", "template_chatml.jinja",
                                    "template_deepseek_ocr.jinja", "template_deepseek_vl2.jinja",
                                    "template_kimi_audio.jinja", "template_minicpmv45.jinja"})
"""Chat templates the vLLM 0.33.0 wheel ships (``vllm/transformers_utils/chat_templates/``)."""


SOURCE_TEMPLATES = frozenset({
    "examples/pooling/embed/template/dse_qwen2_vl.jinja", "examples/pooling/embed/template/nemotron_embed_vl.jinja", "examples/pooling/embed/template/vlm2vec_phi3v.jinja",
    "examples/pooling/embed/template/vlm2vec_qwen2vl.jinja", "examples/pooling/score/template/bge-reranker-v2-gemma.jinja", "examples/pooling/score/template/mxbai_rerank_v2.jinja",
    "examples/pooling/score/template/nemotron-rerank.jinja", "examples/pooling/score/template/nemotron-vl-rerank.jinja", "examples/pooling/score/template/qwen3_reranker.jinja",
    "examples/pooling/score/template/qwen3_vl_reranker.jinja", "examples/pooling/score/template/zerank2.jinja", "examples/template_alpaca.jinja",
    "examples/template_chatglm.jinja", "examples/template_chatglm2.jinja", "examples/template_chatml.jinja",
    "examples/template_falcon.jinja", "examples/template_falcon_180b.jinja", "examples/template_inkbot.jinja",
    "examples/template_teleflm.jinja", "examples/tool_chat_template_apertus.jinja", "examples/tool_chat_template_deepseekr1.jinja",
    "examples/tool_chat_template_deepseekv3.jinja", "examples/tool_chat_template_deepseekv31.jinja", "examples/tool_chat_template_functiongemma.jinja",
    "examples/tool_chat_template_gemma3_pythonic.jinja", "examples/tool_chat_template_gemma4.jinja", "examples/tool_chat_template_glm4.jinja",
    "examples/tool_chat_template_granite.jinja", "examples/tool_chat_template_granite_20b_fc.jinja", "examples/tool_chat_template_hermes.jinja",
    "examples/tool_chat_template_hunyuan_a13b.jinja", "examples/tool_chat_template_internlm2_tool.jinja", "examples/tool_chat_template_llama3.1_json.jinja",
    "examples/tool_chat_template_llama3.2_json.jinja", "examples/tool_chat_template_llama3.2_pythonic.jinja", "examples/tool_chat_template_llama4_json.jinja",
    "examples/tool_chat_template_llama4_pythonic.jinja", "examples/tool_chat_template_mistral.jinja", "examples/tool_chat_template_mistral3.jinja",
    "examples/tool_chat_template_mistral_parallel.jinja", "examples/tool_chat_template_muse_glimmer.jinja", "examples/tool_chat_template_phi4_mini.jinja",
    "examples/tool_chat_template_qwen3coder.jinja", "examples/tool_chat_template_toolace.jinja", "examples/tool_chat_template_xlam_llama.jinja",
    "examples/tool_chat_template_xlam_qwen.jinja",
})
"""Jinja templates under ``examples/`` in vLLM 0.33.0's source tree (the
sdist ``vllm-0.33.0.tar.gz``, paths from its root): in the Docker image (work
directory ``/vllm-workspace``), not in the wheel. A host install fetches the
ones a command names (``composer.run_forms.source_fetches``)."""


def source_template(argv: Sequence[str]) -> Optional[str]:
    """The ``--chat-template`` value of a composed ``argv`` (the last one, as
    vLLM takes it) when it names a file of vLLM's source tree
    (``SOURCE_TEMPLATES``, a leading ``./`` dropped), else None."""
    value = flag_value(argv, "--chat-template")
    path = value.removeprefix("./") if value is not None else None
    return path if path in SOURCE_TEMPLATES else None


def _check_frontend(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    tmpl = s.str("chat-template")
    if tmpl and not any(c in tmpl for c in "{}\n"):
        path = tmpl.removeprefix("./")
        if path.startswith("examples/") and path not in SOURCE_TEMPLATES:
            # Not in vLLM's source tree: neither the image nor a host install has it.
            yield _v("chat-template-exists",
                     f"The supplied chat template string ({tmpl}) appears path-like, but doesn't exist! Tried: {tmpl} "
                     f"and …/vllm/transformers_utils/chat_templates/{tmpl} (vLLM {VERSION}'s source tree has no "
                     f"{path}).",
                     "name a template of vLLM's examples/ directory, a file on the node by its absolute path, or drop "
                     "--chat-template to use the model's own template")
    if s.flag("enable-auto-tool-choice") and not s.str("tool-call-parser"):
        yield _v("auto-tool-choice-needs-parser", "Error: --enable-auto-tool-choice requires --tool-call-parser",
                 "add --tool-call-parser <parser>")
    if s.flag("enable-log-outputs") and not s.flag("enable-log-requests"):
        yield _v("log-outputs-needs-log-requests", "Error: --enable-log-outputs requires --enable-log-requests",
                 "add --enable-log-requests")


MOE_BACKEND_DEVICES: Mapping[str, tuple[str, tuple]] = {
    "flashinfer_trtllm": ("cuda", ((10, None),)),
    "flashinfer_cutedsl": ("cuda", ((10, None),)),
    "flashinfer_b12x": ("cuda", ((12, None),)),
    "b12x": ("cuda", ((12, None),)),
    "flashinfer_cutlass": ("cuda", ((9, 0), (10, None), (12, None))),
    "deep_gemm": ("cuda", ((9, 0), (10, None), (12, None))),
    "aiter": ("rocm", ()),
    "aiter_mega_moe": ("rocm", ()),
}
"""Devices each ``--moe-backend`` can run on in vLLM 0.33.0: platform and the
CUDA capabilities (major, minor; minor None = the whole family), from the
experts' ``_supports_current_device`` (FlashInfer TRT-LLM and CuteDSL: 10.x;
b12x: 12.x; FlashInfer CUTLASS: 9.0, 10.x, 12.x — not 11.x; DeepGEMM: 9.0,
10.x, 12.x and ``VLLM_USE_DEEP_GEMM``; AITER: ROCm). An explicitly requested
backend that does not support the device raises at model load."""


def _capability_ok(cap: tuple[int, int], allowed: tuple) -> bool:
    return any(cap[0] == major and (minor is None or cap[1] == minor) for major, minor in allowed)


def _check_kernels(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    backend = s.str("moe-backend")
    if not backend or backend not in MOE_BACKEND_DEVICES or f.is_moe is False or t.platform is None:
        return
    platform, allowed = MOE_BACKEND_DEVICES[backend]
    where = t.device or t.platform
    bad = t.platform != platform
    if not bad and platform == "cuda" and t.capability is not None:
        bad = not _capability_ok(t.capability, allowed)
    if not bad and backend == "deep_gemm" and str(s.env.get("VLLM_USE_DEEP_GEMM", "1")).strip() == "0":
        bad = True
        where += " with VLLM_USE_DEEP_GEMM=0"
    if bad:
        cap = f" (compute capability {t.capability[0]}.{t.capability[1]})" if t.capability else ""
        yield _v("moe-backend-device",
                 f"MoE backend '{backend}' does not support the deployment configuration since the current device "
                 f"is not supported: {where}{cap}.",
                 "drop --moe-backend (vLLM then picks a kernel the GPU runs) or name one this GPU supports")


ATTENTION_BACKEND_DEVICES: Mapping[str, tuple] = {
    **dict.fromkeys(("FLASHINFER_MLA", "CUTLASS_MLA", "TOKENSPEED_MLA", "FLASHINFER_MLA_SPARSE"), ((10, None),)),
    **dict.fromkeys(("FLASHMLA", "FLASHMLA_SPARSE"), ((9, None), (10, None))),
    **dict.fromkeys(("FLASH_ATTN_MLA", "FLASH_ATTN_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90"), ((9, None),)),
    "FLASHINFER_MLA_SPARSE_SM120": ((12, None),),
}
"""The CUDA capabilities (as in ``MOE_BACKEND_DEVICES``) each
``--attention-backend`` with a major-version gate runs on in vLLM 0.33.0 (its
``supports_compute_capability``: FlashInfer MLA, CUTLASS MLA, TokenSpeed MLA:
10.x, Blackwell datacenter; FlashMLA: 9.x and 10.x; FlashAttention MLA: 9.x,
Hopper). A backend the command selects is validated and vLLM raises when it
does not support the GPU; backends without such a gate (TRITON_MLA,
FLASH_ATTN from 8.0, FLASHINFER) are not listed."""


ATTENTION_BACKEND_KINDS: Mapping[str, tuple[bool, tuple[str, ...]]] = {
    "FLASH_ATTN": (False, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")),
    "TRITON_ATTN": (False, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "int4_per_token_head",
                            "int8_per_token_head", "fp8_per_token_head")),
    "FLASHINFER": (False, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "nvfp4_4over6")),
    "FLEX_ATTENTION": (False, ("auto", "float16", "bfloat16")),
    "FLASHINFER_MLA": (True, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")),
    "TOKENSPEED_MLA": (True, ("fp8", "fp8_e4m3")),
    "TRITON_MLA": (True, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")),
    "CUTLASS_MLA": (True, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")),
    "FLASHMLA": (True, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")),
    "FLASH_ATTN_MLA": (True, ("auto", "float16", "bfloat16")),
    "FLASHMLA_SPARSE": (True, ("auto", "bfloat16", "fp8_ds_mla", "fp8", "nvfp4_ds_mla")),
    "FLASHINFER_MLA_SPARSE": (True, ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")),
    "FLASHINFER_MLA_SPARSE_SM90": (True, ("auto", "bfloat16", "fp8", "fp8_e4m3")),
    "FLASHINFER_MLA_SPARSE_SM120": (True, ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla")),
    "FLASH_ATTN_MLA_SPARSE": (True, ("auto", "float16", "bfloat16")),
}
"""CUDA attention backends of vLLM 0.33.0 by ``--attention-backend`` name:
``(is_mla, supported_kv_cache_dtypes)`` — MLA for the classes under
``v1/attention/backends/mla/`` (``MLACommonBackend.is_mla``), the dtype list
as each class (or the base it inherits it from) declares it, read from the
wheel (``v1/attention/backends/registry.py`` ``AttentionBackendEnum`` → class;
``tests/test_launch.py`` re-reads them and compares). ``validate_configuration``
(``v1/attention/backend.py:306-318``) refuses a kv_cache_dtype outside the list
and a model whose MLA-ness differs from the backend's."""


ATTENTION_BACKEND_HEAD_SIZES: Mapping[str, tuple[int, ...]] = {
    "FLASHINFER": (64, 128, 256, 512), "FLEX_ATTENTION": (),
    "FLASHINFER_MLA": (320, 512, 576), "TOKENSPEED_MLA": (320, 512, 576), "TRITON_MLA": (),
    "CUTLASS_MLA": (320, 512, 576), "FLASHMLA": (320, 512, 576), "FLASH_ATTN_MLA": (320, 512, 576),
    "FLASHMLA_SPARSE": (576, 512), "FLASHINFER_MLA_SPARSE": (512, 576), "FLASHINFER_MLA_SPARSE_SM90": (512, 576),
    "FLASHINFER_MLA_SPARSE_SM120": (512, 576), "FLASH_ATTN_MLA_SPARSE": (),
}
"""The head sizes each CUDA backend takes, as its class (or the base it
inherits from) lists them in ``get_supported_head_sizes`` (vLLM 0.33.0;
``()``: any, ``AttentionBackend.supports_head_size``,
``v1/attention/backend.py:101-107``; the MLA backends' base
``MLACommonBackend`` lists 320, 512 and 576,
``model_executor/layers/attention/mla_attention.py:1623-1624``). FLASH_ATTN
and TRITON_ATTN decide by rule instead (``_head_size_ok``).
``tests/test_launch.py`` re-reads every list from the wheel."""


def _head_size_ok(backend: str, size: int) -> bool | None:
    """Whether ``backend`` takes attention heads of ``size``
    (``supports_head_size``), None when it depends on more than the size:
    FLASH_ATTN takes multiples of 8 up to 256, and up to 512 where
    FlashAttention 4 runs (the GPU and the build decide:
    ``v1/attention/backends/flash_attn.py:425-435``); TRITON_ATTN takes 32 and
    more (``triton_attn.py:379-380``)."""
    if backend == "FLASH_ATTN":
        if size % 8 or size > 512:
            return False
        return True if size <= 256 else None
    if backend == "TRITON_ATTN":
        return size >= 32
    sizes = ATTENTION_BACKEND_HEAD_SIZES.get(backend)
    if sizes is None:
        return None
    return not sizes or size in sizes


def _check_attention_backend(s: Serve, f: ModelFacts, t: Target) -> Iterable[Violation]:
    """What ``validate_configuration`` (``v1/attention/backend.py:279-339``)
    says of a selected backend on a CUDA GPU, one rule per kind of reason:
    the compute capability (``ATTENTION_BACKEND_DEVICES``, rule
    ``attention-backend-device``), the head size (``_head_size_ok``), the
    KV-cache dtype and the model's kind of attention
    (``ATTENTION_BACKEND_KINDS``, rule ``attention-backend-config``)."""
    backend = (s.str("attention-backend") or "").upper()
    if t.platform != "cuda" or not backend:
        return
    head = f"Selected backend AttentionBackendEnum.{backend} is not valid for this configuration. Reason: "
    allowed = ATTENTION_BACKEND_DEVICES.get(backend)
    if allowed is not None and t.capability is not None and not _capability_ok(t.capability, allowed):
        yield _v("attention-backend-device",
                 head + f"['compute capability not supported'] ({t.device or 'this GPU'}: compute capability "
                 f"{t.capability[0]}.{t.capability[1]}; {backend} runs on {' and '.join(f'{m}.x' for m, _ in allowed)}).",
                 "drop --attention-backend on this GPU (vLLM then picks a backend it supports) or name one it runs")
    kind = ATTENTION_BACKEND_KINDS.get(backend)
    if kind is None:
        return
    is_mla, dtypes = kind
    dtype = s.str("kv-cache-dtype") or "auto"
    found = []  # (vLLM's reason, what it means here), in validate_configuration's order
    size = f.attention_head_size
    if size is not None and _head_size_ok(backend, size) is False:
        found.append(("head_size not supported", f"the model's attention heads are {size} wide"))
    if dtype not in dtypes:
        found.append(("kv_cache_dtype not supported", f"--kv-cache-dtype {dtype} ({backend} takes {', '.join(dtypes)})"))
    if f.use_mla is not None and f.use_mla != is_mla:
        found.append(("MLA not supported", "the model uses multi-head latent attention") if f.use_mla else
                     ("non-MLA not supported", "the model does not use multi-head latent attention"))
    if found:
        yield _v("attention-backend-config", head + f"{[r for r, _ in found]} ({'; '.join(w for _, w in found)}).",
                 "drop --attention-backend (vLLM then picks a backend that fits) or give one that takes this model and "
                 "KV-cache dtype" + (f" (e.g. --kv-cache-dtype {dtypes[0]})" if "auto" not in dtypes else ""))


COMMAND_CHECKS = (_check_model_parallel, _check_max_model_len, _check_cache, _check_scheduler, _check_speculative,
                  _check_data_parallel, _check_devices, _check_kv_transfer, _check_kv_fit, _check_frontend,
                  _check_attention_backend,
                  _check_kernels)


def check_command(argv: Sequence[str], env: Mapping[str, str] | None = None, facts: ModelFacts | None = None,
                  target: Target | None = None) -> tuple[Violation, ...]:
    """The command-scope rules ``argv`` breaks (``["vllm", "serve", model,
    …]``; anything else, e.g. the router, gives ``()``). ``env``: the
    command's environment; ``facts``: the model's (default: our data for the
    positional model id); ``target``: where it runs (default: unknown, so the
    hardware-dependent rules are skipped)."""
    s = parse_serve(argv, env)
    if s is None:
        return ()
    f = facts if facts is not None else facts_for(s.model)
    t = target or Target()
    out: list[Violation] = []
    for check in COMMAND_CHECKS:
        out.extend(check(s, f, t))
    return tuple(out)


# ── Rule checks: a set of commands ───────────────────────────────────────────

HASH_IGNORED = frozenset({
    "data-parallel-rank", "data-parallel-size-local", "data-parallel-backend", "data-parallel-external-lb",
    "data-parallel-hybrid-lb", "data-parallel-address", "data-parallel-rpc-port", "data-parallel-start-rank",
    "master-addr", "master-port", "node-rank", "nnodes", "max-parallel-loading-workers", "disable-custom-all-reduce",
    "enable-shm-tensor-arena", "ray-workers-use-nsight", "distributed-executor-backend", "worker-cls",
    "worker-extension-cls", "numa-bind", "numa-bind-nodes", "numa-bind-cpus", "device-ids",
    "distributed-timeout-seconds", "cpu-distributed-timeout-seconds", "data-parallel-multi-port-external-lb",
})
"""``ParallelConfig`` options left out of the hash DP ranks compare
(``config/parallel.py:916-955``, by their CLI names)."""


HASHED = tuple(name for name, o in vllm_cli.OPTIONS.items()
               if o.get("group") == "ParallelConfig" and name not in HASH_IGNORED)
"""The ``ParallelConfig`` options DP ranks compare, by CLI name."""


def _hash_options(s: Serve) -> dict[str, Any]:
    out = {}
    for name in HASHED:
        v = s.opts.get(name)
        if v is not None:
            out[name] = v
    for name in ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size",
                 "decode-context-parallel-size", "prefill-context-parallel-size"):
        out.setdefault(name, "1")
        out[name] = str(out[name])
    return out


@dataclass(frozen=True)
class _Cmd:
    """One command of a plan as the plan rules read it (``serve`` None: not a
    ``vllm serve`` command, e.g. the router)."""

    index: int
    role: str
    pool: Optional[str]
    node_rank: int
    serve: Optional[Serve]
    argv: tuple[str, ...]

    @property
    def s(self) -> Serve:
        """The parsed ``vllm serve`` command (only called on those)."""
        assert self.serve is not None
        return self.serve


def _group_key(c: _Cmd) -> tuple:
    """Commands of one DP group share the head's ``--data-parallel-address``
    (and RPC port); without an address a command talks only to its own node
    (vLLM's default 127.0.0.1), so it is a group of its own (e.g. one of
    several independent instances behind a router)."""
    s = c.s
    address = s.str("data-parallel-address")
    if address is None:
        return ("solo", c.index)
    return (c.pool, address, s.str("data-parallel-rpc-port"), s.str("data-parallel-size"))


def _router_endpoints(cmds: Sequence[_Cmd]) -> Optional[dict[str, int]]:
    """``{"prefill": n, "decode": n, "workers": n}``: the URLs a router lists
    (P/D's ``--prefill``/``--decode``, and ``--worker-urls`` — each value up to
    the next flag), or None without a router."""
    found = None
    for c in cmds:
        if c.argv and c.argv[0] == "vllm-router":
            found = found or {"prefill": 0, "decode": 0, "workers": 0}
            key = None
            for tok in c.argv[1:]:
                if tok.startswith("--"):
                    key = {"--prefill": "prefill", "--decode": "decode", "--worker-urls": "workers"}.get(tok)
                elif key is not None:
                    found[key] += 1
                    key = key if key == "workers" else None
    return found


def _check_groups(cmds: Sequence[_Cmd], facts_of: Callable[[_Cmd], ModelFacts]) -> Iterable[Violation]:
    groups: dict[tuple, list[_Cmd]] = {}
    for c in cmds:
        if c.serve is None:
            continue
        d = data_parallel(c.serve)
        if d.size <= 1:
            continue
        groups.setdefault(_group_key(c), []).append(c)
    router = _router_endpoints(cmds)
    for _key, members in groups.items():
        members = sorted(members, key=lambda c: c.node_rank)
        dps = {c.index: data_parallel(c.s) for c in members}
        size = next(iter(dps.values())).size
        moe = facts_of(members[0]).is_moe
        # Same collective-affecting configuration on every rank (MoE DP only: dense ranks run independently).
        if moe is not False:
            ref = _hash_options(members[0].s)
            for c in members[1:]:
                other = _hash_options(c.s)
                diff = sorted(k for k in set(ref) | set(other) if ref.get(k) != other.get(k))
                if diff:
                    shown = ", ".join(f"--{k} {ref.get(k)!s} vs {other.get(k)!s}" for k in diff[:4])
                    yield Violation("dp-group-same-config", "error",
                                    f"Configuration mismatch detected for engine {dps[c.index].rank}. All DP workers must "
                                    f"have identical configurations for parameters that affect collective communication "
                                    f"({shown}).", "give every node of the DP group the same parallel flags", c.index)
        multinode = any((c.s.int("nnodes") or 1) > 1 for c in members)
        if not multinode:
            seen: dict[int, int] = {}
            for c in members:
                for r in dps[c.index].ranks():
                    if r in seen:
                        yield Violation("dp-ranks-complete", "error",
                                        f"DP rank {r} of {size} is started by two commands (#{seen[r]} and #{c.index}); "
                                        f"the head accepts one engine per rank.",
                                        "give each node its own --data-parallel-start-rank", c.index)
                    seen.setdefault(r, c.index)
            missing = [r for r in range(size) if r not in seen]
            if missing:
                head = next((c for c in members if dps[c.index].rank == 0), members[0])
                yield Violation("dp-ranks-complete", "error",
                                f"Waiting for {len(missing)} remote core engine proc(s) to connect: DP ranks "
                                f"{_ranges(missing)} of {size} are started by no command, and rank 0 waits for every "
                                f"DP engine.", "add the nodes that start the missing ranks, or lower --data-parallel-size",
                                head.index)
        api_head = next((c for c in members if dps[c.index].rank == 0 and not dps[c.index].headless), None)
        if api_head is not None:
            hd = dps[api_head.index]
            remote_headless = hd.mode == "internal"
            for c in members:
                if c is api_head:
                    continue
                d = dps[c.index]
                if d.headless != remote_headless:
                    if d.headless:
                        why = ("the head's --data-parallel-start-rank 0 with --data-parallel-size-local 1 switches it "
                               "to external LB" if hd.auto_external else f"the head runs {hd.mode} LB")
                        yield Violation("dp-remote-headless", "error",
                                        f"Remote engine {d.rank} must not use --headless in external or hybrid dp lb "
                                        f"mode ({why}).",
                                        "start the head without --data-parallel-start-rank so it runs internal LB "
                                        "(followers stay --headless with their start rank), or run every node as its "
                                        "own API server (no --headless, --data-parallel-rank) and list each in the router",
                                        c.index)
                    else:
                        yield Violation("dp-remote-headless", "error",
                                        f"Remote engine {d.rank} must use --headless unless in external or hybrid dp lb "
                                        f"mode (the head runs internal LB).",
                                        "add --headless to the follower, or run the group in hybrid LB "
                                        "(--data-parallel-hybrid-lb on every node)", c.index)
        # Which ranks receive requests.
        servers = [c for c in members if dps[c.index].api_servers > 0]
        if not servers:
            continue
        pool = members[0].pool
        if router is not None and pool in ("prefill", "decode"):
            listed = router.get(pool, 0)
            reached = servers[:listed]
            how = f"the router lists {listed} {pool} endpoint{'s' if listed != 1 else ''}"
        elif router is not None and router["workers"] and len(servers) > 1:
            # --worker-urls, taken by the groups in plan order (a KV store's instances, one each)
            listed = min(router["workers"], len(servers))
            router["workers"] -= listed
            reached = servers[:listed]
            how = f"the router lists {listed} of the group's {len(servers)} API servers"
        elif len(servers) > 1:
            reached = servers[:1]
            how = "requests go to one endpoint (no router or load balancer lists the others)"
        else:
            reached = servers
            how = ""
        ranks: set[int] = set()
        for c in reached:
            ranks.update(dps[c.index].served_ranks())
        if len(ranks) < size:
            yield Violation("dp-ranks-receive-requests", "warning",
                            f"Only {len(ranks)} of {size} DP ranks receive requests: in hybrid and external LB each API "
                            f"server sends to its own node's engines, and {how}; the pool serves at "
                            f"{len(ranks)}/{size} of its capacity.",
                            "list every node's API server in the router (or a load balancer), or run the group with "
                            "internal LB (head without --data-parallel-start-rank, followers --headless)",
                            servers[0].index)


def _ranges(nums: list[int]) -> str:
    if len(nums) <= 4:
        return ", ".join(map(str, nums))
    return f"{nums[0]}–{nums[-1]}" if nums == list(range(nums[0], nums[-1] + 1)) else ", ".join(map(str, nums[:4])) + ", …"


def _field(obj, name: str, default=None):
    """``obj[name]`` of a plan dict or ``obj.name`` of a typed output value
    (``composer.outputs.Plan`` / ``Command`` / ``CapacityCheck``)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def check_commands(commands: Sequence[Any], facts: ModelFacts | Mapping[str, ModelFacts] | None = None,
                   targets: Target | Mapping[Optional[str], Target] | None = None,
                   plan_rules: bool = True) -> tuple[Violation, ...]:
    """Every rule the commands of one plan break: the command rules on each
    ``vllm serve`` command (``commands[i]``: a mapping with ``argv``, ``env``,
    and optionally ``role``, ``pool``, ``node_rank``, as a plan's
    ``commands``, or a typed ``composer.outputs.Command``), then the plan
    rules over them. ``facts``: one
    ``ModelFacts`` or a mapping model id → facts (default: our data per
    positional model); ``targets``: one ``Target`` or a mapping pool (None for
    a deployment without pools) → target. Each violation carries its
    command's index."""
    cmds = []
    for i, c in enumerate(commands):
        argv = tuple(_field(c, "argv") or ())
        cmds.append(_Cmd(i, _field(c, "role", ""), _field(c, "pool"), int(_field(c, "node_rank") or 0),
                         parse_serve(argv, _field(c, "env") or {}), argv))

    def facts_of(c: _Cmd) -> ModelFacts:
        if isinstance(facts, ModelFacts):
            return facts
        if isinstance(facts, Mapping) and c.s.model in facts:
            return facts[c.s.model]
        return facts_for(c.s.model)

    def target_of(c: _Cmd) -> Target:
        if isinstance(targets, Target):
            return targets
        if isinstance(targets, Mapping):
            return targets.get(c.pool) or targets.get(None) or Target()
        return Target()

    out: list[Violation] = []
    for c in cmds:
        if c.serve is None:
            continue
        f, t = facts_of(c), target_of(c)
        for check in COMMAND_CHECKS:
            for v in check(c.serve, f, t):
                out.append(Violation(v.rule, v.level, v.message, v.fix, c.index, v.assumed))
    if plan_rules:  # False: the command rules only
        out.extend(_check_groups(cmds, facts_of))
    return tuple(out)


def plan_targets(ctx: Any, plan: Any) -> dict[Optional[str], Target]:
    """Targets of a composed plan (the dict of ``composer.api.compose`` or a
    typed ``composer.outputs.Plan``): ``selection_targets`` of its selection
    and capacity records."""
    return selection_targets(ctx, _field(plan, "selection") or {}, _field(plan, "capacity") or ())


def selection_targets(ctx: Any, sel: Mapping[str, Any], capacity: Sequence[Any] = ()) -> dict[Optional[str], Target]:
    """Targets of a selection (``Selection.to_dict()``: its ``hardware`` and
    ``install``) with its capacity records (``composer.outputs.CapacityCheck``
    or their JSON): per capacity scope (deployment → None, prefill, decode)
    the memory model's KV cache per GPU (``kv_gb`` over ``gpus``, GB → GiB).
    An unknown hardware id gives a target with the install form only."""
    hw_id = sel.get("hardware")
    if not hw_id or hw_id not in ctx.catalog.taxonomy.hardware_profiles:
        return {None: Target(install=sel.get("install"))}
    hw = ctx.hw(hw_id)
    out: dict[Optional[str], Target] = {}
    for cap in capacity:
        kv = _field(cap, "kv_gb")
        gpus = _field(cap, "gpus") or 0
        kv_gib = kv * 1e9 / 2 ** 30 / gpus if kv is not None and gpus else None
        scope = _field(cap, "scope")
        out[None if scope == "deployment" else scope] = target_for(hw_id, hw, sel.get("install"), kv_gib)
    out.setdefault(None, target_for(hw_id, hw, sel.get("install")))
    return out


def check_plan(ctx: Any, plan: Any) -> tuple[Violation, ...]:
    """Every rule a composed plan breaks (``plan``: the dict of
    ``composer.api.compose`` or a typed ``composer.outputs.Plan``; its
    ``commands``, else its ``blocked_commands``), with the recipe's model
    facts (``ctx``: the ``RecipeContext``; ``composer.model_facts.model_facts``
    for the selected variant) and the plan's targets (``plan_targets``).
    Never raises."""
    commands = _field(plan, "commands") or _field(plan, "blocked_commands") or ()
    return check_selection(ctx, _field(plan, "selection") or {}, commands, _field(plan, "capacity") or ())


def check_selection(ctx: Any, sel: Mapping[str, Any], commands: Sequence[Any],
                    capacity: Sequence[Any] = (), plan_rules: bool = True) -> tuple[Violation, ...]:
    """Every rule the ``commands`` composed for selection ``sel``
    (``Selection.to_dict()``) break, with the selected variant's model facts
    and ``selection_targets(ctx, sel, capacity)``: what ``composer.plan``
    runs before it decides a plan's status. Never raises."""
    from composer.model_facts import model_facts

    facts = model_facts(ctx, sel.get("variant"))
    return check_commands(commands, facts, selection_targets(ctx, sel, capacity), plan_rules)
