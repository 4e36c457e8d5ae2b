"""One-line explanations: of each control group (seed article) and of common
vLLM flags (vLLM's engine-argument docs), shown on demand on the page."""

from __future__ import annotations

GROUPS = {
    "hardware": ("Hardware", "Which GPUs, per node. Decides whether the weights fit at all and which kernels and backends run (CUDA or ROCm, Hopper or Blackwell paths)."),
    "variant": ("Variant", "Which checkpoint: its precision sets the weight memory, and some precisions need specific GPUs."),
    "nodes": ("Nodes", "How many machines (or NVL4 trays). Weights must fit in the GPUs that hold them; more nodes mean more inter-node traffic."),
    "strategy": ("Strategy", "How the model (TP splits layers, EP spreads experts, PP splits layer ranges) and the requests (DP replicas) are spread over GPUs. Each strategy has a floor: the fewest GPUs it needs."),
    "prefill_mode": ("Prefill pool mode", "Parallelism of the prefill pool, which reads prompts and builds the KV cache: it drives TTFT."),
    "prefill_nodes": ("Prefill pool nodes", "Nodes in the prefill pool; the pool alone must hold the weights."),
    "decode_mode": ("Decode pool mode", "Parallelism of the decode pool, which generates tokens from the transferred KV cache: it drives ITL."),
    "decode_nodes": ("Decode pool nodes", "Nodes in the decode pool; the pool alone must hold the weights."),
    "features": ("Features", "Optional behaviour: parsers, speculative decoding, text only. A feature that is off also removes the flags it owns."),
    "advanced": ("Advanced", "Generic knobs. They override the recipe's tuned values for hardware and strategy; features applied later can override them in turn."),
    "kv_offload": ("KV offload", "Where KV cache may spill: host DRAM or an external store. It moves KV cache, never weights, so it cannot make a model fit."),
    "task": ("Task", "What the vLLM-Omni server is set up to generate: each task may use its own checkpoint and arguments."),
    "install": ("Run with", "Show the commands for a pip install on the host, or wrapped in the vLLM container (host networking for multi-node)."),
}

FLAGS = {
    "tensor-parallel-size": "Split every layer across this many GPUs (TP); all of them compute each token together.",
    "pipeline-parallel-size": "Split the layers into this many consecutive stages (PP), usually one per node.",
    "data-parallel-size": "Number of model replicas (DP ranks) serving different requests.",
    "data-parallel-size-local": "DP ranks started on this node.",
    "data-parallel-address": "Address of the DP coordinator (the head node).",
    "data-parallel-rpc-port": "Port of the DP coordinator.",
    "data-parallel-start-rank": "First global DP rank on this node.",
    "data-parallel-hybrid-lb": "Every node runs its own API server and balances over its local ranks.",
    "enable-expert-parallel": "Spread MoE experts over the ranks (EP) instead of splitting each expert.",
    "nnodes": "Number of nodes in the distributed group.",
    "node-rank": "This node's rank in the group (0 = head).",
    "master-addr": "Address of the head node for the torch.distributed rendezvous.",
    "headless": "Run engine workers only, no API server (followers of a multi-node group).",
    "gpu-memory-utilization": "Share of each GPU's memory vLLM may use for weights, activations and KV cache.",
    "max-model-len": "Longest context (prompt + output) accepted; 'auto' lets vLLM fit it to the free KV cache.",
    "max-num-seqs": "Most sequences processed concurrently per engine step.",
    "max-num-batched-tokens": "Most tokens scheduled per engine step (chunked prefill budget).",
    "kv-cache-dtype": "Data type of the KV cache (fp8 halves its memory).",
    "attention-backend": "Attention kernel implementation.",
    "attention-config": "Attention options as JSON (e.g. the MLA prefill backend).",
    "moe-backend": "MoE kernel implementation.",
    "trust-remote-code": "Allow the model repository's own Python code.",
    "enable-auto-tool-choice": "Let the model decide when to call tools.",
    "tool-call-parser": "Parser that turns model output into tool calls.",
    "reasoning-parser": "Parser that separates reasoning content from the answer.",
    "speculative-config": "Speculative decoding: draft model or method and tokens proposed per step, as JSON.",
    "language-model-only": "Skip the vision encoder: text-only serving.",
    "kv-transfer-config": "KV connector (P/D transfer or KV offload) as JSON.",
    "enable-prefix-caching": "Reuse KV cache of shared prompt prefixes.",
    "port": "HTTP port of the API server.",
    "compilation-config": "torch.compile and CUDA graph options as JSON.",
    "load-format": "How weights are loaded from disk.",
    "decode-context-parallel-size": "Shard the decode KV cache across TP ranks (DCP).",
    "hf-overrides": "Override values of the model's Hugging Face config.",
}


def flag_help(name: str) -> str:
    """One line about flag ``name`` (canonical, without dashes), or ""."""
    return FLAGS.get(name, "")
