"""Explanations shown on demand on the page: of each control group (seed
article), and of vLLM's flags (vLLM's own help text, from its release)."""

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
    "instances": ("Instances", "vLLM instances sharing the KV store, each a full copy of the deployment above; a cache-aware router sends a prompt to the instance that holds its prefix."),
    "task": ("Task", "What the vLLM-Omni server is set up to generate: each task may use its own checkpoint and arguments."),
    "cuda": ("CUDA version", "Which CUDA build of the container image to run: pick the one your driver supports (CUDA 13 needs a newer driver than CUDA 12.9)."),
    "install": ("Run with", "Show the commands for a pip install on the host, wrapped in the vLLM container (host networking for multi-node), or as Kubernetes manifests."),
}

def flag_help(name: str) -> str:
    """vLLM's own one-paragraph help for option ``name`` (canonical, without
    dashes; a dotted ``--x.y`` gets the help of ``--x``), from the table
    generated from the pinned vLLM release (``composer.vllm_cli``), or ""."""
    from composer import vllm_cli

    key = name.split(".", 1)[0]
    text = vllm_cli.help_text(key)
    choices = vllm_cli.OPTIONS.get(key, {}).get("choices")
    if text.endswith(":") and choices:  # the list vLLM's help leads into
        text += " " + ", ".join(str(c) for c in choices) + "."
    return text
