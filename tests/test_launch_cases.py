"""Issue 18's cases, each with its exact input, composed by today's composer:
every one of these plans is shown as ready (status ok) and the launch
validator (composer.launch.check_plan) flags it. When the validator is wired
into plan/resolve, the status assertions flip (the plan is then an error or
chose a layout that passes) and the validator assertions stay as the
property "no ok plan breaks a rule"."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.api import compose, make_context
from composer.launch import Target, check_command, check_plan
from composer.buildtime.loader import load_catalog, load_recipe
from composer.model_facts import model_facts

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
_CTX: dict = {}


def ctx(source: Path, rid: str):
    if (source, rid) not in _CTX:
        _CTX[(source, rid)] = make_context(rid, load_recipe(source, rid), load_catalog(source))
    return _CTX[(source, rid)]


def flagged(source: Path, rid: str, query: str) -> tuple[dict, dict[str, list]]:
    c = ctx(source, rid)
    plan = compose(c, query, every_form=False)
    out: dict[str, list] = {}
    for v in check_plan(c, plan):
        out.setdefault(v.rule, []).append(v)
    return plan, out


def tp(plan: dict, i: int = 0) -> int:
    argv = plan["commands"][i]["argv"]
    return int(argv[argv.index("--tensor-parallel-size") + 1])


@corpus
@pytest.mark.parametrize("rid,query,tp_size", [
    ("moonshotai/Kimi-K3", "hardware=gb200&strategy=pd_cluster", 12),
    ("moonshotai/Kimi-K3", "hardware=gb200&strategy=pd_cluster&decode_mode=tp", 12),
    ("meta-llama/Llama-3.3-70B-Instruct", "hardware=h100&strategy=multi_node_tp&nodes=3", 24),
    ("meta-llama/Llama-3.3-70B-Instruct", "hardware=h100&strategy=multi_node_tp&nodes=6", 48),
    ("Qwen/Qwen3.6-35B-A3B", "hardware=dgx_spark_gb10&strategy=multi_node_tp&nodes=3", 3),
])
def test_tp_that_does_not_divide_the_heads(rid, query, tp_size):
    plan, found = flagged(CORPUS, rid, query)
    assert plan["status"] == "ok" and tp(plan) == tp_size
    v = found["tp-divides-heads"][0]
    assert v.level == "error"
    facts = model_facts(ctx(CORPUS, rid), plan["selection"]["variant"])
    if facts.num_attention_heads:  # Llama: 64 heads from our model facts
        assert v.message == (f"Total number of attention heads ({facts.num_attention_heads}) must be divisible by "
                             f"tensor parallel size ({tp_size}).") and not v.assumed
    else:  # K3, Qwen3.6: head count unknown, only power-of-two TP assumed safe
        assert "head count unknown" in v.assumed


@corpus
def test_pd_dep_pools_with_one_rank_per_node():
    plan, found = flagged(CORPUS, "moonshotai/Kimi-K3", "hardware=b200&strategy=pd_cluster&prefill_mode=dep&decode_mode=dep")
    assert plan["status"] == "ok"
    prefill = [c for c in plan["commands"] if c["pool"] == "prefill"]
    assert "--data-parallel-start-rank" in prefill[0]["argv"] and "--headless" in prefill[1]["argv"]
    # vLLM infers hybrid LB from the start rank and switches it to external LB (local size 1) …
    assert found["hybrid-lb-local-one"][0].command == 0
    # … and then the head refuses the --headless follower (v1/engine/utils.py:1502-1509).
    [v] = found["dp-remote-headless"]
    assert v.level == "error" and v.command == 1
    assert v.message.startswith("Remote engine 1 must not use --headless in external or hybrid dp lb mode")
    # Were it to start, only rank 0's API server is routed: 1/2 of the prefill pool.
    assert "1/2" in found["dp-ranks-receive-requests"][0].message


@corpus
def test_batched_tokens_below_max_num_seqs():
    plan, found = flagged(CORPUS, "moonshotai/Kimi-K3",
                          "hardware=mi355x&strategy=pd_cluster&features=tool_calling,reasoning,spec_decoding")
    assert plan["status"] == "ok"
    decode = [i for i, c in enumerate(plan["commands"]) if c["pool"] == "decode"]
    hits = found["batched-tokens-ge-seqs"]
    assert sorted(v.command for v in hits) == decode
    assert hits[0].level == "error"
    assert hits[0].message == "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (128)."


@corpus
def test_dcp_larger_than_tp():
    plan, found = flagged(CORPUS, "moonshotai/Kimi-K2-Instruct", "hardware=gb200&strategy=multi_node_tp_pp&nodes=2")
    assert plan["status"] == "ok" and tp(plan) == 4
    assert "--decode-context-parallel-size" in plan["commands"][0]["argv"]
    v = found["dcp-divides-tp"][0]
    assert v.level == "error" and v.message == "tp_size=4 must be divisible by dcp_size=8."


def test_blackwell_only_moe_kernels_on_sm_12x():
    # The variant-level Blackwell block survives on DGX Spark (issue 18, bullet 5): its argv shape, on GB10
    # (compute capability 12.1). vLLM 0.33.0's device checks: the TRT-LLM and CuteDSL MoE kernels are 10.x only
    # (experts/trtllm_*_moe.py, flashinfer_cutedsl_moe.py), so they abort at model load on sm_120/121; the
    # issue's own example, flashinfer_cutlass, lists the 12.x family (flashinfer_cutlass_moe.py:128-139) and starts.
    gb10 = Target("cuda", (12, 1), 1, 119.2, "DGX Spark (GB10)")
    facts = model_facts(ctx(ROOT / "recipes", "moonshotai/Kimi-K3"))
    for backend in ("flashinfer_trtllm", "flashinfer_cutedsl"):
        argv = ["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "1", "--moe-backend", backend,
                "--kv-cache-dtype", "fp8"]
        [v] = [v for v in check_command(argv, {}, facts, gb10) if v.rule == "moe-backend-device"]
        assert v.level == "error" and "compute capability 12.1" in v.message
    argv = ["vllm", "serve", "moonshotai/Kimi-K3", "--moe-backend", "flashinfer_cutlass", "--kv-cache-dtype", "fp8"]
    assert not [v for v in check_command(argv, {}, facts, gb10) if v.rule == "moe-backend-device"]


@corpus
@pytest.mark.parametrize("rid", ["deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.1"])
def test_chat_template_from_vllms_source_tree_with_pip(rid):
    plan, found = flagged(CORPUS, rid, "install=pip")
    assert plan["status"] == "ok"
    [v] = found["chat-template-exists"]
    assert v.level == "error" and "appears path-like, but doesn't exist!" in v.message
    _, docker = flagged(CORPUS, rid, "install=docker")
    assert "chat-template-exists" not in docker


@pytest.mark.parametrize("query,status,nodes", [
    ("hardware=h100&strategy=multi_node_tp&nodes=4", "error", 4),  # no TP count holds it: an error with fixes
    ("hardware=h100&strategy=multi_node_tp_pp&nodes=3", "ok", 4),  # PP splits the layers: 4 stages hold it
    ("hardware=h200&nodes=2&strategy=multi_node_tp", "ok", 4),  # the README's first CLI example
])
def test_context_the_kv_cache_cannot_hold(query, status, nodes):
    """Issue 18's cases of a model context (1M tokens, no --max-model-len)
    the KV cache cannot hold, handled by the memory model (issue 19): the
    composer sizes the nodes that hold it, or the plan is an error (``kv-capacity``)
    whose fixes are one click each — never a ready plan vLLM refuses."""
    plan, found = flagged(ROOT / "recipes", "moonshotai/Kimi-K3", query)
    assert plan["status"] == status and plan["selection"]["nodes"] == nodes
    kv = [n for n in plan["notices"] if n["code"] == "kv-capacity"]
    if status == "ok":
        assert not kv and all(c["max_concurrency"] >= 1 for c in plan["capacity"])
    else:
        assert kv[0]["level"] == "error" and kv[0]["fixes"] and not plan["commands"]


def test_typed_plan_and_its_json_give_the_same_violations():
    from composer.outputs import to_json
    from composer.plan import plan_and_selection

    c = ctx(ROOT / "recipes", "moonshotai/Kimi-K3")
    plan, _, _ = plan_and_selection(c, "hardware=h100&strategy=multi_node_tp&nodes=4", every_form=False)
    typed = check_plan(c, plan)
    assert typed and typed == check_plan(c, to_json(plan))
