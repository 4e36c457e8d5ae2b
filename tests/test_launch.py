"""The launch validator (composer/launch.py), rule by rule on hand-written
argv: for each rule one command vLLM 0.33.0 accepts and one it refuses (or
warns about), with vLLM's message; the plan rules on hand-written command
sets; the DP launch modes as vLLM resolves them."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from composer.launch import (RULE, RULES, Target, budget, check_command, check_commands, data_parallel,
                             kv_bytes_one_sequence, lookahead_tokens, parse_serve)
from composer.model_facts import ModelFacts

H200 = Target("cuda", (9, 0), 8, 131.3, "H200")
B200 = Target("cuda", (10, 0), 8, 167.6, "B200")
GB10 = Target("cuda", (12, 1), 1, 119.2, "DGX Spark (GB10)")
MI355X = Target("rocm", None, 8, 268.2, "MI355X")


def facts(**values) -> ModelFacts:
    return ModelFacts("org/model", MappingProxyType(values), MappingProxyType({k: "data:org/model" for k in values}))


GQA = facts(num_attention_heads=64, num_key_value_heads=8, head_dim=128, num_hidden_layers=80, model_type="llama",
            max_position_embeddings=131072, rope_scaling={"rope_type": "llama3", "factor": 8.0})
MLA = facts(num_attention_heads=128, num_key_value_heads=128, num_hidden_layers=61, kv_lora_rank=512, qk_rope_head_dim=64,
            model_type="deepseek_v3", n_routed_experts=256, max_position_embeddings=163840,
            rope_scaling={"type": "yarn", "factor": 40})
DENSE = facts(num_attention_heads=32, num_key_value_heads=8, head_dim=128, num_hidden_layers=32, model_type="llama")
UNKNOWN = ModelFacts("org/unknown")


def serve(*flags: str) -> list[str]:
    return ["vllm", "serve", "org/model", *flags]


def rules(argv, env=None, f=GQA, t=H200) -> dict[str, str]:
    return {v.rule: v.message for v in check_command(argv, env or {}, f, t)}


# (rule, refused argv, accepted argv, vLLM's words in the message, facts, target, env)
MAMBA = facts(num_attention_heads=40, num_key_value_heads=8, head_dim=128, model_type="nemotron_h", mamba_num_heads=96,
              n_groups=8)

CASES = [
    ("tp-divides-heads", serve("-tp", "12"), serve("-tp", "16"),
     "Total number of attention heads (64) must be divisible by tensor parallel size (12).", GQA, H200, {}),
    ("tp-divides-mamba-heads", serve("-tp", "16"), serve("-tp", "8"),
     "If tensor parallel world size does not divide num_groups, then num_groups must equal 1", MAMBA, H200, {}),
    ("dcp-divides-tp", serve("--tensor-parallel-size", "4", "--decode-context-parallel-size", "8"),
     serve("--tensor-parallel-size", "8", "--decode-context-parallel-size", "8"),
     "tp_size=4 must be divisible by dcp_size=8.", MLA, B200, {}),
    ("dcp-gqa-kv-heads", serve("-tp", "8", "-dcp", "2"), serve("-tp", "16", "-dcp", "2"),
     "requires `--tensor-parallel-size` (8) to be greater than the model's total number of KV heads (8)", GQA, B200, {}),
    ("ep-needs-moe", serve("--enable-expert-parallel"), serve(),
     "Number of experts in the model must be greater than 0 when expert parallelism is enabled.", DENSE, H200, {}),
    ("eplb-needs-ep", serve("-tp", "8", "--enable-eplb"), serve("-tp", "8", "--enable-eplb", "--enable-expert-parallel"),
     "enable_expert_parallel must be True to use EPLB.", MLA, H200, {}),
    ("max-model-len-over-derived", serve("--max-model-len", "262144"), serve("--max-model-len", "131072"),
     "User-specified max_model_len (262144) is greater than the derived max_model_len", GQA, H200, {}),
    ("max-model-len-over-derived-allowed", serve("--max-model-len", "262144"), serve("--max-model-len", "128k"),
     "VLLM_ALLOW_LONG_MAX_MODEL_LEN", GQA, H200, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    ("gpu-memory-utilization-range", serve("--gpu-memory-utilization", "1.2"), serve("--gpu-memory-utilization", "0.95"),
     "gpu_memory_utilization must be greater than 0 and at most 1; got 1.2.", GQA, H200, {}),
    ("batched-tokens-ge-seqs", serve("--max-num-seqs", "128", "--max-num-batched-tokens", "32"),
     serve("--max-num-batched-tokens", "32"),
     "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (128).", MLA, MI355X, {}),
    ("batched-tokens-ge-model-len", serve("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192",
                                           "--max-model-len", "32768"),
     serve("--max-num-batched-tokens", "8192", "--max-model-len", "32768"),
     "max_num_batched_tokens (8192) is smaller than max_model_len (32768).", GQA, H200, {}),
    ("active-seqs-le-seqs", serve("--max-num-seqs", "64", "--max-num-active-seqs", "128"),
     serve("--max-num-seqs", "64", "--max-num-active-seqs", "32"),
     "max_num_active_seqs (128) cannot be greater than max_num_seqs (64).", GQA, H200, {}),
    ("long-prefill-threshold-le-model-len", serve("--max-model-len", "4096", "--long-prefill-token-threshold", "8192"),
     serve("--max-model-len", "4096", "--long-prefill-token-threshold", "1024"),
     "long_prefill_token_threshold (8192) cannot be greater than the max_model_len (4096).", GQA, H200, {}),
    ("batched-tokens-over-seqs-times-len", serve("--max-model-len", "1024", "--max-num-seqs", "2",
                                                  "--max-num-batched-tokens", "8192"),
     serve("--max-model-len", "1024", "--max-num-seqs", "8", "--max-num-batched-tokens", "8192"),
     "max_num_batched_tokens (8192) exceeds max_num_seqs * max_model_len (2048).", GQA, H200, {}),
    ("spec-tokens-positive", serve("--speculative-config", '{"method":"mtp","num_speculative_tokens":0}'),
     serve("--speculative-config", '{"method":"mtp","num_speculative_tokens":1}'),
     "Expected num_speculative_tokens to be greater than zero (0).", MLA, B200, {}),
    ("spec-no-tp-key", serve("--speculative-config", '{"method":"mtp","num_speculative_tokens":1,"tensor_parallel_size":8}'),
     serve("--speculative-config", '{"method":"mtp","num_speculative_tokens":1,"draft_tensor_parallel_size":1}'),
     "'tensor_parallel_size' is not a valid argument in the speculative_config.", MLA, B200, {}),
    ("spec-draft-tp", serve("-tp", "8", "--speculative-config", '{"model":"org/draft","num_speculative_tokens":2,'
                                                                '"draft_tensor_parallel_size":4}'),
     serve("-tp", "8", "--speculative-config", '{"model":"org/draft","num_speculative_tokens":2,"draft_tensor_parallel_size":8}'),
     "speculative_draft_tensor_parallel_size=4 cannot be other value than 1 or target model tensor_parallel_size",
     GQA, H200, {}),
    ("spec-needs-model", serve("--speculative-config", '{"num_speculative_tokens":3}'),
     serve("--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "3"),
     "num_speculative_tokens was provided but without speculative model.", GQA, H200, {}),
    ("spec-lookahead-slots", serve("--max-num-seqs", "2", "--max-num-batched-tokens", "3",
                                   "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'),
     serve("--max-num-seqs", "2", "--max-num-batched-tokens", "4",
           "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'),
     "Got max_num_batched_tokens=3 and num_lookahead_tokens=3.", MLA, B200, {}),
    ("spec-lora-budget", serve("--enable-lora", "--max-num-seqs", "256", "--max-num-batched-tokens", "512",
                               "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}'),
     serve("--enable-lora", "--max-num-seqs", "256", "--max-num-batched-tokens", "1024",
           "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}'),
     "Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens", GQA, H200, {}),
    ("spec-small-token-budget", serve("--max-num-batched-tokens", "4096", "--speculative-config",
                                      '{"method":"mtp","num_speculative_tokens":1}'),
     serve("--max-num-batched-tokens", "8192", "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}'),
     "max_num_scheduled_tokens is set to 4096 based on the speculative decoding settings.", MLA, B200, {}),
    ("dp-one-lb-mode", serve("-dp", "2", "--data-parallel-rank", "0", "--data-parallel-start-rank", "0"),
     serve("-dp", "2", "--data-parallel-rank", "0"),
     "Cannot use more than one data parallel load balancing mode.", MLA, B200, {}),
    ("headless-no-api-servers", serve("-dp", "2", "--headless", "--api-server-count", "2"),
     serve("-dp", "2", "--headless"),
     "--api-server-count=2 cannot be used with --headless", MLA, B200, {}),
    ("headless-no-hybrid-lb", serve("-dp", "16", "--data-parallel-size-local", "8", "--data-parallel-start-rank", "8",
                                    "--headless", "--data-parallel-hybrid-lb"),
     serve("-dp", "16", "--data-parallel-size-local", "8", "--data-parallel-start-rank", "8", "--headless"),
     "data_parallel_hybrid_lb is not applicable in headless mode", MLA, B200, {}),
    ("headless-local-size", serve("-dp", "2", "--headless", "--data-parallel-size-local", "0"),
     serve("-dp", "2", "--headless", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "1"),
     "data_parallel_size_local must be > 0 in headless mode", MLA, B200, {}),
    ("dp-local-le-size", serve("-dp", "4", "--data-parallel-size-local", "8"), serve("-dp", "8", "--data-parallel-size-local", "8"),
     "data_parallel_size_local (8) must be <= data_parallel_size (4)", MLA, B200, {}),
    ("dp-rank-in-range", serve("-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "2", "--headless"),
     serve("-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "1", "--headless"),
     "data_parallel_rank (2) must be in the range [0, 2)", MLA, B200, {}),
    ("external-lb-needs-dp", serve("--data-parallel-rank", "0"), serve("-dp", "2", "--data-parallel-rank", "0"),
     "data_parallel_external_lb can only be set when data_parallel_size > 1", MLA, B200, {}),
    ("external-lb-needs-moe", serve("-dp", "2", "--data-parallel-rank", "1"), serve("-dp", "2"),
     "Non-MoE models do not support external data parallel mode.", DENSE, H200, {}),
    ("external-lb-needs-rank", serve("-dp", "2", "--data-parallel-external-lb"),
     serve("-dp", "2", "--data-parallel-external-lb", "--data-parallel-rank", "1"),
     "`--data-parallel-external-lb` requires a data-parallel rank.", MLA, B200, {}),
    ("external-lb-local-one", serve("-dp", "4", "--data-parallel-rank", "1", "--data-parallel-size-local", "2"),
     serve("-dp", "4", "--data-parallel-rank", "1", "--data-parallel-size-local", "1"),
     "an external data-parallel rank requires `--data-parallel-size-local 1`; got 2.", MLA, B200, {}),
    ("hybrid-lb-needs-local-size", serve("-dp", "16", "--data-parallel-hybrid-lb"),
     serve("-dp", "16", "--data-parallel-hybrid-lb", "--data-parallel-size-local", "8"),
     "`--data-parallel-hybrid-lb` requires `--data-parallel-size-local`.", MLA, B200, {}),
    ("hybrid-lb-local-one", serve("-tp", "8", "-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "0"),
     serve("-tp", "8", "-dp", "2", "--data-parallel-size-local", "1"),
     "data_parallel_hybrid_lb is not eligible when data_parallel_size_local = 1, autoswitch to data_parallel_external_lb",
     MLA, B200, {}),
    ("internal-lb-rank-zero", serve("-dp", "4", "--data-parallel-size-local", "4", "--data-parallel-start-rank", "1"),
     serve("-dp", "4", "--data-parallel-size-local", "2", "--data-parallel-start-rank", "2", "--headless"),
     "Attempting to launch core_engines from dp_rank > 0", MLA, B200, {}),
    ("nnodes-needs-mp", serve("-tp", "16", "--nnodes", "2", "--data-parallel-backend", "ray"),
     serve("-tp", "16", "--nnodes", "2"), "`--nnodes 2` requires `--data-parallel-backend mp`", GQA, H200, {}),
    ("nnodes-divides-world", serve("-tp", "8", "--nnodes", "3"), serve("-tp", "8", "-pp", "3", "--nnodes", "3"),
     "`--nnodes 3` must evenly divide the total world size (8).", GQA, H200, {}),
    ("node-rank-in-range", serve("-tp", "16", "--nnodes", "2", "--node-rank", "2"),
     serve("-tp", "16", "--nnodes", "2", "--node-rank", "1"),
     "`--node-rank` must be between 0 and 1; got `--node-rank 2`.", GQA, H200, {}),
    ("world-size-fits-node", serve("-tp", "16"), serve("-tp", "16", "--nnodes", "2"),
     "World size (16) is larger than the number of available GPUs (8) in this node.", GQA, H200, {}),
    ("dp-ranks-fit-node", serve("-tp", "2", "-dp", "8"), serve("-tp", "1", "-dp", "8"),
     "8 local DP rank(s) × world size 2 need GPUs [0, 16) but the node shows 8.", MLA, B200, {}),
    ("kv-role-required", serve("--kv-transfer-config", '{"kv_connector":"NixlConnector"}'),
     serve("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
     "Please specify kv_role when kv_connector is set", MLA, B200, {}),
    ("kv-connector-expandable-segments", serve("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
     serve("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}', "--enable-cumem-allocator"),
     "KV connector NixlConnector is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", MLA, B200,
     {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("nixl-dcp", serve("-tp", "8", "-dcp", "4", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
     serve("-tp", "8", "-dcp", "8", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
     "decode_context_parallel_size=4 must be 1 or equal to the NIXL transfer parallel size=8.", MLA, B200, {}),
    ("kv-cache-holds-one-sequence", serve("-tp", "8"), serve("-tp", "8", "--max-model-len", "8192"),
     "To serve at least one request with the model's max seq len (163840", MLA,
     Target("cuda", (9, 0), 8, 131.3, "H200", kv_cache_gib=1.0), {}),
    ("chat-template-exists", serve("--chat-template", "examples/tool_chat_template_deepseek_r9.jinja"),
     serve("--chat-template", "examples/tool_chat_template_deepseekr1.jinja"),
     "The supplied chat template string (examples/tool_chat_template_deepseek_r9.jinja) appears path-like, but doesn't exist!",
     MLA, Target("cuda", (9, 0), 8, 131.3, "H200", install="pip"), {}),
    ("auto-tool-choice-needs-parser", serve("--enable-auto-tool-choice"),
     serve("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
     "Error: --enable-auto-tool-choice requires --tool-call-parser", GQA, H200, {}),
    ("log-outputs-needs-log-requests", serve("--enable-log-outputs"), serve("--enable-log-outputs", "--enable-log-requests"),
     "Error: --enable-log-outputs requires --enable-log-requests", GQA, H200, {}),
    ("moe-backend-device", serve("--moe-backend", "flashinfer_trtllm"), serve("--moe-backend", "flashinfer_cutlass"),
     "MoE backend 'flashinfer_trtllm' does not support the deployment configuration since the current device is not "
     "supported", MLA, GB10, {}),
    ("attention-backend-device", serve("--attention-backend", "FLASHINFER_MLA"), serve("--attention-backend", "FLASHMLA"),
     "Selected backend AttentionBackendEnum.FLASHINFER_MLA is not valid for this configuration. Reason: "
     "['compute capability not supported']", MLA, H200, {}),
    # TokenSpeed MLA takes only an fp8 KV cache (mla/tokenspeed_mla.py:103-106); unset, the layer passes 'auto'.
    ("attention-backend-config", serve("--attention-backend", "TOKENSPEED_MLA"),
     serve("--attention-backend", "TOKENSPEED_MLA", "--kv-cache-dtype", "fp8"),
     "Selected backend AttentionBackendEnum.TOKENSPEED_MLA is not valid for this configuration. Reason: "
     "['kv_cache_dtype not supported']", MLA, B200, {}),
]


def test_every_command_rule_has_a_case():
    command_rules = {r.id for r in RULES if r.scope == "command"}
    assert command_rules == {c[0] for c in CASES}


def test_rules_are_data_with_sources():
    assert len({r.id for r in RULES}) == len(RULES)
    for r in RULES:
        assert r.level in ("error", "warning") and r.scope in ("command", "plan")
        assert r.source.startswith("vllm/") and ":" in r.source, r.id
        assert r.vllm_message
        assert bool(r.cost) == (r.level == "warning"), r.id  # a warning names its cost


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule_refuses_and_accepts(case):
    rule, refused, accepted, words, f, t, env = case
    found = rules(refused, env, f, t)
    assert rule in found, found
    assert words in found[rule]
    assert rule not in rules(accepted, env, f, t)
    v = next(v for v in check_command(refused, env, f, t) if v.rule == rule)
    assert v.level == RULE[rule].level and v.fix


def test_unknown_heads_admit_only_power_of_two_tp():
    found = {v.rule: v for v in check_command(serve("-tp", "12"), {}, UNKNOWN, H200)}
    assert "tp-divides-heads" in found and "head count unknown" in found["tp-divides-heads"].assumed
    assert not check_command(serve("-tp", "16", "--nnodes", "2"), {}, UNKNOWN, H200)


def test_batch_defaults_follow_the_gpu_memory_tier():
    # engine/arg_utils.py:2973-3006: ≥160 GiB → 16384/1024, ≥70 GiB → 8192/1024, GB10 and small GPUs → 2048/256.
    s = parse_serve(serve())
    assert (budget(s, GQA, B200).tokens, budget(s, GQA, B200).seqs) == (16384, 1024)
    assert (budget(s, GQA, H200).tokens, budget(s, GQA, H200).seqs) == (8192, 1024)
    assert (budget(s, GQA, GB10).tokens, budget(s, GQA, GB10).seqs) == (2048, 256)
    # A default max_num_seqs is capped at an explicit token budget (arg_utils.py:3232-3234): no error.
    s = parse_serve(serve("--max-num-batched-tokens", "32"))
    assert budget(s, GQA, B200).seqs == 32
    assert "batched-tokens-ge-seqs" not in rules(serve("--max-num-batched-tokens", "32"), t=B200)


def test_dp_modes_as_vllm_resolves_them():
    # Head of a one-rank-per-node group with a start rank: hybrid inferred, then external (arg_utils.py:2489-2501).
    d = data_parallel(parse_serve(serve("-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "0")))
    assert (d.mode, d.auto_external, d.api_servers, list(d.served_ranks())) == ("external", True, 1, [0])
    # The same head without a start rank: internal LB, one API server per DP rank, reaching every rank.
    d = data_parallel(parse_serve(serve("-dp", "2", "--data-parallel-size-local", "1")))
    assert (d.mode, d.api_servers, list(d.served_ranks())) == ("internal", 2, [0, 1])
    # Hybrid follower (not headless): its own API server for its 8 ranks.
    d = data_parallel(parse_serve(serve("-dp", "16", "--data-parallel-size-local", "8", "--data-parallel-start-rank", "8",
                                        "--data-parallel-hybrid-lb")))
    assert (d.mode, d.rank, d.api_servers, list(d.served_ranks())) == ("hybrid", 8, 8, list(range(8, 16)))
    # Headless follower: no API server; hybrid is not inferred in headless mode.
    d = data_parallel(parse_serve(serve("-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "1",
                                        "--headless")))
    assert (d.mode, d.rank, d.api_servers) == ("internal", 1, 0)
    # The Rust front end runs one API server (serve.py:113-115).
    d = data_parallel(parse_serve(serve("-dp", "8"), {"VLLM_USE_RUST_FRONTEND": "1"}))
    assert d.api_servers == 1


def test_lookahead_slots_by_method():
    assert lookahead_tokens({"method": "mtp", "num_speculative_tokens": 3}) == 3
    assert lookahead_tokens({"method": "deepseek_mtp", "num_speculative_tokens": 2}) == 2
    assert lookahead_tokens({"method": "dflash", "num_speculative_tokens": 4}) == 5
    assert lookahead_tokens({"method": "ngram", "num_speculative_tokens": 4}) == 0


def test_kv_bytes_per_sequence_in_vllms_terms():
    # MLA: (512 + 64) × 2 bytes × 61 layers per token on every TP rank (Kimi K2 / DeepSeek V3: 70,272 B).
    s = parse_serve(serve("-tp", "8"))
    need, left = kv_bytes_one_sequence(s, MLA, 1024, None)
    assert need == 61 * 576 * 2 * 1024 and left == ""
    # fp8 halves it; PP 2 keeps the larger stage (31 of 61 layers); DCP 8 splits the tokens.
    s = parse_serve(serve("-tp", "8", "-pp", "2", "-dcp", "8", "--kv-cache-dtype", "fp8"))
    assert kv_bytes_one_sequence(s, MLA, 1024, None)[0] == 31 * 576 * 1 * 128
    # GQA: 8 KV heads over TP 4 → 2 per rank × (K and V) × 128 × 2 bytes × 80 layers.
    s = parse_serve(serve("-tp", "4"))
    assert kv_bytes_one_sequence(s, GQA, 1024, None)[0] == 80 * 2 * 2 * 128 * 2 * 1024
    # Sliding-window layers hold window - 1 + the tokens in flight (two batches of the token budget with async
    # scheduling, vllm/config/vllm.py max_concurrent_batches; rounded to blocks, + 1 block), not the context; the
    # full and sliding groups (1 layer each) each take their blocks (kv_cache_planning.py:1253-1285).
    swa = facts(num_attention_heads=64, num_key_value_heads=8, head_dim=64, num_hidden_layers=2, sliding_window=128,
                layer_types=["sliding_attention", "full_attention"], model_type="gpt_oss")
    s = parse_serve(serve())
    need, _ = kv_bytes_one_sequence(s, swa, 131072, 2048)
    per_token = 2 * 8 * 64 * 2
    assert need == per_token * (131072 + (-(-(127 + 2 * 2048) // 16) + 1) * 16)
    # Linear-attention layers whose state size is unknown are said to be left out.
    hybrid = facts(num_attention_heads=16, num_key_value_heads=2, head_dim=256, num_hidden_layers=48,
                   full_attention_interval=4, model_type="qwen3_next")
    need, left = kv_bytes_one_sequence(s, hybrid, 1024, None)
    assert need == 12 * 2 * 2 * 256 * 2 * 1024 and "36 linear-attention layers' state (its size is unknown)" in left


def test_kv_fit_offers_a_max_model_len_that_fits():
    t = Target("cuda", (9, 0), 8, 131.3, "H200", kv_cache_gib=1.0)
    v = next(v for v in check_command(serve("-tp", "8"), {}, MLA, t) if v.rule == "kv-cache-holds-one-sequence")
    assert "from the model's config.json (no --max-model-len set)" in v.message
    fit = int(v.fix.split("--max-model-len ")[1].split()[0])
    assert "kv-cache-holds-one-sequence" not in rules(serve("-tp", "8", "--max-model-len", str(fit)), f=MLA, t=t)
    assert "fp8" in v.fix and v.assumed
    # Without the memory model's figure the rule is not checked.
    assert "kv-cache-holds-one-sequence" not in rules(serve("-tp", "8"), f=MLA, t=H200)


def test_router_and_other_commands_are_not_vllm_serve():
    assert check_command(["vllm-router", "--port", "30000"]) == ()
    assert check_command(["vllm", "serve", "m", "stray"]) == ()  # does not parse: the CLI lint reports it


# ── Plan rules ──

def cmd(role, pool, rank, *flags, env=None):
    return {"role": role, "pool": pool, "node_rank": rank, "argv": serve(*flags), "env": env or {}}


ONE_RANK_PER_NODE = ("-tp", "8", "-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-address", "$P1",
                     "--enable-expert-parallel")


def router(prefill: int, decode: int):
    argv = ["vllm-router", "--vllm-pd-disaggregation"]
    argv += [x for i in range(prefill) for x in ("--prefill", f"http://$P{i + 1}:8001")]
    argv += [x for i in range(decode) for x in ("--decode", f"http://$D{i + 1}:8002")]
    return {"role": "router", "pool": None, "node_rank": 0, "argv": argv, "env": {}}


def plan_rules(commands, f=MLA, t=B200):
    return [(v.rule, v.level, v.command, v.message) for v in check_commands(commands, f, t)]


def test_remote_headless_in_external_lb_is_refused():
    # The P/D DEP prefill pool of today's composer: head with start rank 0, follower --headless.
    bad = [cmd("prefill", "prefill", 0, *ONE_RANK_PER_NODE, "--data-parallel-start-rank", "0"),
           cmd("prefill", "prefill", 1, *ONE_RANK_PER_NODE, "--data-parallel-start-rank", "1", "--headless"),
           router(1, 1)]
    found = plan_rules(bad)
    assert ("dp-remote-headless", "error", 1,
            "Remote engine 1 must not use --headless in external or hybrid dp lb mode (the head's "
            "--data-parallel-start-rank 0 with --data-parallel-size-local 1 switches it to external LB).") in found
    assert any(r == "dp-ranks-receive-requests" and "1/2" in m for r, _, _, m in found)
    # Internal LB: the head without a start rank, the follower headless — accepted, every rank reached.
    good = [cmd("prefill", "prefill", 0, *ONE_RANK_PER_NODE),
            cmd("prefill", "prefill", 1, *ONE_RANK_PER_NODE, "--data-parallel-start-rank", "1", "--headless"),
            router(1, 1)]
    assert plan_rules(good) == []


def test_follower_must_be_headless_under_internal_lb():
    bad = [cmd("head", None, 0, *ONE_RANK_PER_NODE),
           cmd("worker", None, 1, *ONE_RANK_PER_NODE, "--data-parallel-start-rank", "1", "--data-parallel-hybrid-lb")]
    assert any(r == "dp-remote-headless" and "must use --headless unless" in m for r, _, _, m in plan_rules(bad))


def test_missing_and_duplicate_ranks():
    flags = ("-dp", "16", "--data-parallel-size-local", "8", "--data-parallel-address", "$H", "--data-parallel-hybrid-lb",
             "--enable-expert-parallel")
    missing = [cmd("head", None, 0, *flags)]
    assert any(r == "dp-ranks-complete" and "DP ranks 8–15 of 16 are started by no command" in m
               for r, _, _, m in plan_rules(missing))
    dup = [cmd("head", None, 0, *flags), cmd("worker", None, 1, *flags)]
    assert any(r == "dp-ranks-complete" and "started by two commands" in m for r, _, _, m in plan_rules(dup))


def test_dp_group_configuration_must_match():
    flags = ("-dp", "2", "--data-parallel-size-local", "1", "--data-parallel-address", "$H")
    bad = [cmd("head", None, 0, *flags, "-tp", "8", "--enable-expert-parallel"),
           cmd("worker", None, 1, *flags, "-tp", "4", "--data-parallel-start-rank", "1", "--headless")]
    found = plan_rules(bad)
    assert any(r == "dp-group-same-config" and "--tensor-parallel-size 8 vs 4" in m for r, _, c, m in found)
    same = [cmd("head", None, 0, *flags, "-tp", "8", "--enable-expert-parallel"),
            cmd("worker", None, 1, *flags, "-tp", "8", "--enable-expert-parallel", "--data-parallel-start-rank", "1",
                "--headless")]
    assert not [f for f in plan_rules(same) if f[0] == "dp-group-same-config"]


def test_hybrid_lb_without_a_balancer_reaches_one_node():
    flags = ("-dp", "16", "--data-parallel-size-local", "8", "--data-parallel-address", "$H", "--data-parallel-hybrid-lb",
             "--enable-expert-parallel")
    two = [cmd("head", None, 0, *flags), cmd("worker", None, 1, *flags, "--data-parallel-start-rank", "8")]
    found = plan_rules(two)
    assert [(r, lvl) for r, lvl, _, _ in found] == [("dp-ranks-receive-requests", "warning")]
    assert "8 of 16 DP ranks receive requests" in found[0][3]
    # A P/D router that lists both decode nodes reaches every rank.
    pd = [dict(c, pool="decode", role="decode") for c in two] + [router(1, 2)]
    assert plan_rules(pd) == []


def test_independent_instances_are_separate_dp_groups():
    # Three replicas of one-node DEP behind a router (no --data-parallel-address): each is its own DP group.
    one = ("-dp", "8", "--enable-expert-parallel")
    plan = [cmd("serve", None, 0, *one), cmd("serve", None, 0, *one), cmd("serve", None, 0, *one),
            {"role": "router", "pool": None, "node_rank": 0, "argv": ["vllm-router", "--port", "30080"], "env": {}}]
    assert plan_rules(plan) == []


def test_every_rule_names_the_options_it_reads():
    from composer import vllm_cli

    for r in RULES:
        assert r.flags, r.id
        for f in r.flags:
            assert f in vllm_cli.OPTIONS or f in vllm_cli.ENV or f in ("PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES"), (r.id, f)


def test_a_selected_attention_backend_must_fit_the_models_attention():
    """validate_configuration (v1/attention/backend.py:314-318): an MLA
    backend for a GQA model is "non-MLA not supported", a non-MLA one for an
    MLA model "MLA not supported"; FlashAttention MLA takes no fp8 cache."""
    found = rules(serve("--attention-backend", "FLASHINFER_MLA"), {}, GQA, B200)
    assert "non-MLA not supported" in found["attention-backend-config"]
    found = rules(serve("--attention-backend", "FLASH_ATTN"), {}, MLA, H200)
    assert "'MLA not supported'" in found["attention-backend-config"]
    found = rules(serve("--attention-backend", "FLASH_ATTN_MLA", "--kv-cache-dtype", "fp8"), {}, MLA, H200)
    assert "kv_cache_dtype not supported" in found["attention-backend-config"]
    assert "attention-backend-config" not in rules(serve("--attention-backend", "flashinfer", "--kv-cache-dtype", "fp8"),
                                                   {}, GQA, B200)
    assert "attention-backend-config" not in rules(serve("--attention-backend", "FLASH_ATTN"), {}, UNKNOWN, H200)


@pytest.mark.parametrize("tp, heads, groups, refused", [
    (5, 96, 8, "must divide num heads"),      # mamba_mixer2.py:316-318
    (16, 96, 8, "num_groups must equal 1"),   # mamba_mixer2.py:320-323
    (16, 96, 1, None),                        # one group: replicated across TP ranks
    (8, 128, 8, None),
])
def test_a_mamba_hybrids_tp_must_fit_its_mamba_heads_and_groups(tp, heads, groups, refused):
    f = facts(num_attention_heads=80, num_key_value_heads=8, head_dim=128, model_type="nemotron_h",
              mamba_num_heads=heads, n_groups=groups)
    found = rules(serve("-tp", str(tp)), {}, f, H200)
    if refused:
        assert refused in found["tp-divides-mamba-heads"]
    else:
        assert "tp-divides-mamba-heads" not in found


@pytest.mark.parametrize("backend, facts_, refused", [
    ("FLASHINFER", dict(head_dim=128), False),
    ("FLASHINFER", dict(head_dim=96), True),            # flashinfer.py:691-693: 64, 128, 256, 512
    ("FLASH_ATTN", dict(head_dim=100), True),           # flash_attn.py:426: a multiple of 8
    ("FLASH_ATTN", dict(head_dim=384), False),          # over 256: FlashAttention 4's GPUs only, not decided here
    ("FLASH_ATTN", dict(head_dim=640), True),           # over 512 on every GPU
    ("TRITON_ATTN", dict(head_dim=16), True),           # triton_attn.py:379-380: 32 and more
    ("FLEX_ATTENTION", dict(head_dim=72), False),       # any size
    ("FLASH_ATTN_MLA", dict(kv_lora_rank=512, qk_rope_head_dim=64), False),   # 576
    ("FLASHMLA", dict(kv_lora_rank=256, qk_rope_head_dim=32), True),          # 288: MLACommonBackend 320/512/576
    ("TRITON_MLA", dict(kv_lora_rank=256, qk_rope_head_dim=32), False),       # any size
    ("FLASHINFER", dict(hidden_size=4096, num_attention_heads=96), False),    # no head_dim stated: not derived
])
def test_a_selected_attention_backend_must_take_the_models_head_size(backend, facts_, refused):
    """validate_configuration (v1/attention/backend.py:302-303) refuses a head
    size the backend does not list; MLA's head size is kv_lora_rank +
    qk_rope_head_dim (mla_attention.py:480)."""
    mla = "kv_lora_rank" in facts_
    f = facts(**{"num_attention_heads": 64, "num_key_value_heads": 64 if mla else 8, "num_hidden_layers": 32,
                 "model_type": "deepseek_v3" if mla else "llama", **facts_})
    found = rules(serve("--attention-backend", backend), {}, f, B200)
    assert ("head_size not supported" in found.get("attention-backend-config", "")) is refused, found


def test_the_attention_backend_table_is_what_the_vllm_wheel_declares():
    """ATTENTION_BACKEND_KINDS, re-read from the pinned wheel: each name's class
    in AttentionBackendEnum (v1/attention/backends/registry.py), MLA when it
    lives under backends/mla/, its supported_kv_cache_dtypes as the class (or
    a base class in its module) declares them."""
    import ast
    import zipfile

    from composer.buildtime import vllm_cli_gen
    from composer.launch import ATTENTION_BACKEND_HEAD_SIZES, ATTENTION_BACKEND_KINDS

    with zipfile.ZipFile(vllm_cli_gen.fetch("vllm", vllm_cli_gen.VLLM_VERSION)) as zf:
        def module(path):
            return ast.parse(zf.read(path.replace(".", "/") + ".py").decode())

        enum = next(n for n in module("vllm.v1.attention.backends.registry").body
                    if isinstance(n, ast.ClassDef) and n.name == "AttentionBackendEnum")
        paths = {}
        for st in enum.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                try:
                    paths[st.targets[0].id] = ast.literal_eval(st.value)
                except ValueError:
                    pass

        def dtypes(mod, name):
            classes = {n.name: n for n in mod.body if isinstance(n, ast.ClassDef)}
            cls = classes[name]
            for st in cls.body:
                target = st.target if isinstance(st, ast.AnnAssign) else st.targets[0] if isinstance(st, ast.Assign) else None
                if isinstance(target, ast.Name) and target.id == "supported_kv_cache_dtypes":
                    return tuple(ast.literal_eval(st.value))
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id in classes:
                    return dtypes(mod, base.id)
            return None

        def head_sizes(mod, name):
            """The literal list of get_supported_head_sizes in the class or its bases (MLACommonBackend's
            module for the MLA ones); "rule" when the class decides by supports_head_size."""
            classes = {n.name: n for n in mod.body if isinstance(n, ast.ClassDef)}
            cls = classes[name]
            for st in cls.body:
                if isinstance(st, ast.FunctionDef) and st.name == "supports_head_size":
                    return "rule"
                if isinstance(st, ast.FunctionDef) and st.name == "get_supported_head_sizes":
                    return tuple(ast.literal_eval(next(n for n in ast.walk(st) if isinstance(n, ast.Return)).value))
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id in classes:
                    return head_sizes(mod, base.id)
                if isinstance(base, ast.Name) and base.id == "MLACommonBackend":
                    return head_sizes(module("vllm.model_executor.layers.attention.mla_attention"), base.id)
            return ()

        for name, (is_mla, listed) in ATTENTION_BACKEND_KINDS.items():
            mod, _, cls = paths[name].rpartition(".")
            assert (".mla." in mod) == is_mla, name
            assert dtypes(module(mod), cls) == listed, name
            got = head_sizes(module(mod), cls)
            assert got == ("rule" if name in ("FLASH_ATTN", "TRITON_ATTN") else ATTENTION_BACKEND_HEAD_SIZES[name]), name
