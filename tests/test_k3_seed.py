"""The seed article's statements about Kimi K3, checked on composed plans.

Seed: shared/seed/000_230e8cbad44554ae.txt ("What Kimi K3's vLLM Configuration
Tells Us"). Each test names the statement it checks. Assertions are made on the
composed plan (argv lists, env dicts, selection, notice codes, capacity
records), never on rendered text alone.
"""

from __future__ import annotations

import json
import math

import pytest

ALL_HW = ("h100", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x")
HOPPER = ("h100", "h200")
BLACKWELL = ("b200", "b300", "gb200", "gb300")
NVIDIA = HOPPER + BLACKWELL
AMD = ("mi300x", "mi325x", "mi355x")
SINGLE_NODE_HOLDERS = ("b300", "mi325x", "mi355x")
EIGHT_GPU = tuple(h for h in ALL_HW if h not in ("gb200", "gb300"))
MULTI_NODE = ("multi_node_tp", "multi_node_tep", "multi_node_dep", "multi_node_tp_pp", "multi_node_tp_dp")
FEATURES = ("tool_calling", "reasoning", "spec_decoding", "text_only")
MOONCAKE = "kv_store_distributed_mooncake"
SPEC_MODEL = "Inferact/Kimi-K3-DSpark"


# ----------------------------------------------------------------- helpers
def flag_values(argv: list[str], flag: str) -> list[str | None]:
    """Every value given to ``flag`` in ``argv`` (``--f v`` or ``--f=v``); a flag
    without a value (a boolean, or followed by another flag) yields None."""
    out: list[str | None] = []
    for i, tok in enumerate(argv):
        if tok == flag:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out.append(None if nxt is None or nxt.startswith("--") else nxt)
        elif tok.startswith(flag + "="):
            out.append(tok[len(flag) + 1:])
    return out


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``argv``; None if absent. Fails if the flag is
    given more than once (a composed command states every option once)."""
    vals = flag_values(argv, flag)
    assert len(vals) <= 1, f"{flag} appears {len(vals)} times in {argv}"
    return vals[0] if vals else None


def has_flag(argv: list[str], flag: str) -> bool:
    return bool(flag_values(argv, flag))


def codes(p: dict) -> list[str]:
    return [n["code"] for n in p["notices"]]


def notices_with(p: dict, code: str) -> list[dict]:
    return [n for n in p["notices"] if n["code"] == code]


def cmds(p: dict) -> list[dict]:
    """The vLLM commands of a plan, shown or blocked (router excluded)."""
    return [c for c in (p["commands"] or p["blocked_commands"]) if c["role"] != "router"]


def only_cmd(p: dict) -> dict:
    cs = cmds(p)
    assert len(cs) == 1, [c["role"] for c in cs]
    return cs[0]


def option_ids(p: dict, name: str) -> list[str]:
    return [o["id"] for o in p["options"][name]]


def option(p: dict, name: str, oid: str) -> dict:
    return next(o for o in p["options"][name] if o["id"] == oid)


# ------------------------------------------------- the model and its weight
def test_model_is_moe_with_896_routed_16_active_and_a_shared_expert(k3):
    # "896 routed experts in total, with 16 activated per token, plus a shared expert"
    m = k3.recipe.model
    assert m.architecture == "moe"
    assert (m.routed_experts, m.active_experts, m.shared_experts) == (896, 16, 1)


def test_single_variant_mxfp4_weights_mxfp8_activations(k3, plan):
    # "K3 currently ships a single model variant: MXFP4 weights, MXFP8 activations"
    assert list(k3.recipe.variants) == ["default"]
    v = k3.recipe.variants["default"]
    assert v.precision == "mxfp4" and v.label == "MXFP4"
    assert k3.recipe.model.weight_precision == "MXFP4"
    assert k3.recipe.model.activation_precision == "MXFP8"
    assert option_ids(plan(""), "variant") == ["default"]


def test_weight_estimate_is_2_8T_x_half_byte_x_1_2_headroom_1680_gb(k3, plan):
    # "2.8T × 0.5 byte/param × 1.2 headroom ≈ 1680GB"
    v = k3.recipe.variants["default"]
    assert v.parameter_count_b == 2800
    assert v.bytes_per_param == 0.5
    assert v.headroom == 1.2
    estimate = v.parameter_count_b * v.bytes_per_param * v.headroom
    assert math.isclose(estimate, 1680)
    assert v.vram_minimum_gb == 1680
    assert k3.weights_gb("default") == 1680
    for rec in plan("")["capacity"]:
        assert rec["weights_gb"] == 1680


def test_weights_must_all_be_loaded_sparse_activation_does_not_shrink_memory(plan):
    # "all 896 expert weights must still be loaded": every capacity record counts
    # the full 1680 GB, in every strategy, P/D pool included.
    for q in ("", "hardware=h200", "hardware=h200&strategy=multi_node_dep",
              "hardware=b300&strategy=pd_cluster", "hardware=mi355x&strategy=multi_node_tep"):
        for rec in plan(q)["capacity"]:
            assert rec["weights_gb"] == 1680, (q, rec)


# --------------------------------------------------------------- hardware
def test_nine_hardware_options_gb200_gb300_are_four_gpu_nvl4(k3, plan):
    # "The vLLM page offers 9 hardware options" / GB200, GB300: 4-GPU NVL4 units
    p = plan("")
    assert sorted(option_ids(p, "hardware")) == sorted(ALL_HW)
    for o in p["options"]["hardware"]:
        assert o["gpus"] == (4 if o["id"] in ("gb200", "gb300") else 8), o
        assert o["group"] == ("AMD" if o["id"] in AMD else "NVIDIA")


def test_only_b300_mi325x_mi355x_hold_1680_gb_on_one_node(k3):
    # "only B300, MI325X, and MI355X exceed this threshold with a single node's VRAM"
    holders = {h for h in ALL_HW if k3.hw(h).vram_gb >= 1680}
    assert holders == set(SINGLE_NODE_HOLDERS)


@pytest.mark.parametrize("hw", ALL_HW)
def test_single_node_tp_fits_only_on_the_three_holders(plan, hw):
    # "All other hardware requires multiple nodes or multiple NVL4 units"
    p = plan(f"hardware={hw}&strategy=single_node_tp")
    assert p["selection"]["hardware"] == hw
    assert p["selection"]["strategy"] == "single_node_tp"
    assert p["selection"]["nodes"] == 1
    if hw in SINGLE_NODE_HOLDERS:
        assert p["status"] == "ok"
        assert p["commands"] and not p["blocked_commands"]
        assert all(rec["fits"] for rec in p["capacity"])
        assert flag_value(only_cmd(p)["argv"], "--tensor-parallel-size") == "8"
    else:
        assert p["status"] == "error"
        assert not p["commands"] and p["blocked_commands"]
        errs = [n for n in p["notices"] if n["level"] == "error"]
        assert [n["code"] for n in errs] == ["capacity"]
        assert not p["capacity"][0]["fits"]


@pytest.mark.parametrize("hw", ALL_HW)
def test_one_node_and_single_node_tp_disabled_where_weights_do_not_fit(plan, hw):
    p = plan(f"hardware={hw}")
    one = option(p, "nodes", "1")
    sn = option(p, "strategy", "single_node_tp")
    assert one["disabled"] is (hw not in SINGLE_NODE_HOLDERS)
    assert sn["disabled"] is (hw not in SINGLE_NODE_HOLDERS)


def test_b300_single_node_tp8(plan):
    p = plan("hardware=b300&strategy=single_node_tp")
    assert p["status"] == "ok"
    c = only_cmd(p)
    assert c["role"] == "serve"
    assert flag_value(c["argv"], "--tensor-parallel-size") == "8"
    assert p["capacity"][0]["fits"] is True
    assert p["capacity"][0]["hbm_gb"] == 2304


def test_no_parameter_visit_lands_on_recipe_default_b300_single_node_tp8(k3, plan):
    # "The recipe YAML specifies default_hardware: b300" (the page must honour it,
    # not fall back to H200 × 2 Multi-node TP as the upstream frontend did)
    assert k3.recipe.meta.default_hardware == "b300"
    for q in ("", None, "?"):
        p = plan(q)
        sel = p["selection"]
        assert (sel["hardware"], sel["nodes"], sel["strategy"]) == ("b300", 1, "single_node_tp")
        assert p["status"] == "ok"
        assert p["notices"] == []
        assert p["url"] == ""
        c = only_cmd(p)
        assert c["argv"][:3] == ["vllm", "serve", "moonshotai/Kimi-K3"]
        assert flag_value(c["argv"], "--tensor-parallel-size") == "8"


@pytest.mark.parametrize("hw", ALL_HW)
def test_verified_marker_follows_the_recipe(k3, plan, hw):
    # "the verified marker indicates whether a given configuration has been recipe-verified"
    # The hardware pill marks verified hardware; the plan's mark also needs the
    # strategy to be one the recipe verified there (meta.verified_configs).
    p = plan(f"hardware={hw}")
    hw_ok = k3.recipe.meta.hardware[hw] == "verified"
    assert option(p, "hardware", hw)["verified"] is hw_ok
    configs = [c for c in k3.recipe.meta.verified_configs if c.hardware == hw]
    expect = hw_ok and (not configs or any(c.strategy == p["selection"]["strategy"] for c in configs))
    assert p["verified"] is expect


# ------------------------------------------------------------- TP / multi-node
def test_b200_multi_node_tp_gives_two_node_tp16(plan):
    # "two 8-GPU servers correspond to TP=16. The head node serves the HTTP API,
    # while the other nodes participate in compute only via --headless"
    # (The seed's example is H200; issue 19: 2 × H200 hold ~0.6 of one 1M-token
    # sequence, so vLLM would refuse to start and the composer sizes 4 nodes —
    # tests/test_memory.py. Two B200 nodes hold it. B200 alone now opens the
    # strategy the recipe verified there, TP+PP: test_a_bare_gpu_opens_what_the_recipe_verified.)
    p = plan("hardware=b200&strategy=multi_node_tp")
    assert p["status"] == "ok"
    sel = p["selection"]
    assert (sel["hardware"], sel["strategy"], sel["nodes"]) == ("b200", "multi_node_tp", 2)
    head, worker = cmds(p)
    assert (head["role"], head["node_rank"]) == ("head", 0)
    assert (worker["role"], worker["node_rank"]) == ("worker", 1)
    for c in (head, worker):
        assert flag_value(c["argv"], "--tensor-parallel-size") == "16"
        assert flag_value(c["argv"], "--nnodes") == "2"
        assert flag_value(c["argv"], "--master-addr") == "$HEAD_IP"
    assert flag_value(head["argv"], "--node-rank") == "0"
    assert not has_flag(head["argv"], "--headless")
    assert flag_value(worker["argv"], "--node-rank") == "1"
    assert has_flag(worker["argv"], "--headless")
    assert flag_value(worker["argv"], "--headless") is None


def test_multi_node_tep_adds_expert_parallel_to_tp16(plan):
    # "TEP builds on TP by additionally applying EP (Expert Parallel) at the MoE layers"
    p = plan("hardware=b200&strategy=multi_node_tep")  # H200: 4 nodes for the 1M context (issue 19)
    assert p["status"] == "ok" and p["selection"]["nodes"] == 2
    for c in cmds(p):
        assert flag_value(c["argv"], "--tensor-parallel-size") == "16"
        assert has_flag(c["argv"], "--enable-expert-parallel")


# ------------------------------------------------------------------- DEP
def test_dep_two_eight_gpu_nodes_flags(plan):
    # "two 8-GPU nodes generate: --data-parallel-size 16 --data-parallel-size-local 8
    # --data-parallel-hybrid-lb --enable-expert-parallel" and "TP=1"
    p = plan("hardware=b200&strategy=multi_node_dep&nodes=2")  # H200: 3 nodes for the 1M context (issue 19)
    assert p["status"] == "ok"
    assert p["selection"]["nodes"] == 2
    head, worker = cmds(p)
    for c in (head, worker):
        a = c["argv"]
        assert flag_value(a, "--data-parallel-size") == "16"
        assert flag_value(a, "--data-parallel-size-local") == "8"
        assert has_flag(a, "--data-parallel-hybrid-lb")
        assert has_flag(a, "--enable-expert-parallel")
        assert not has_flag(a, "--tensor-parallel-size")
        assert not has_flag(a, "-tp")
    assert flag_value(worker["argv"], "--data-parallel-start-rank") == "8"
    assert flag_value(head["argv"], "--data-parallel-start-rank") in (None, "0")


@pytest.mark.parametrize("hw", [h for h in EIGHT_GPU if h not in ("h100", "h200")])  # Hopper: more for the 1M context
def test_dep_floor_is_two_eight_gpu_nodes(plan, hw):
    # "when using DEP on 8-GPU nodes, the floor is 2 nodes — meaning at least 16 GPUs"
    base = plan(f"hardware={hw}&strategy=multi_node_dep")
    assert base["selection"]["nodes"] == 2
    assert option(base, "strategy", "multi_node_dep")["min_gpus"] == 16
    p = plan(f"hardware={hw}&strategy=multi_node_dep&nodes=1")
    assert p["selection"]["strategy"] == "multi_node_dep"
    assert p["selection"]["nodes"] == 2
    assert "nodes-raised" in codes(p)
    assert notices_with(p, "nodes-raised")[0]["level"] == "warning"


def test_dep_on_h100_needs_more_than_the_floor_for_capacity(plan):
    # floor 2 × 8 GPUs, but 2 × H100 = 1280 GB < 1680 GB: raised further, to
    # the fewest nodes that hold the weights (and, where a count does, one
    # 1M-token sequence per DP rank: 24 MLA layers' latent on every rank plus
    # the KDA state); else an error whose fixes are one click each (issue 18.3).
    p = plan("hardware=h100&strategy=multi_node_dep")
    assert p["selection"]["nodes"] > 2 and {"nodes-raised", "nodes-set"} & set(codes(p))
    assert all(rec["weights_gb"] <= rec["hbm_gb"] for rec in p["capacity"])
    if p["status"] == "error":
        (kv,) = notices_with(p, "kv-capacity")
        assert kv["fixes"]
    else:
        assert all(rec["fits"] for rec in p["capacity"])


@pytest.mark.parametrize("hw", ["gb200", "gb300"])
def test_dep_floor_is_four_nvl4_trays(plan, hw):
    # "for 4-GPU nodes (GB200/GB300), at least 4 nodes are required"
    p = plan(f"hardware={hw}&strategy=multi_node_dep")
    assert p["selection"]["nodes"] == 4
    assert option(p, "strategy", "multi_node_dep")["min_gpus"] == 16
    for c in cmds(p):
        assert flag_value(c["argv"], "--data-parallel-size") == "16"
        assert flag_value(c["argv"], "--data-parallel-size-local") == "4"


@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_dep_on_gb200_raises_short_node_counts_to_four(plan, nodes):
    # "if the user's GPU count falls short, the generator automatically raises it"
    p = plan(f"hardware=gb200&strategy=multi_node_dep&nodes={nodes}")
    assert p["selection"]["strategy"] == "multi_node_dep"
    assert p["selection"]["nodes"] == 4
    raised = notices_with(p, "nodes-raised")
    assert len(raised) == 1 and raised[0]["level"] == "warning"
    assert f"from {nodes} to 4" in raised[0]["message"]
    assert len(cmds(p)) == 4
    assert [flag_value(c["argv"], "--data-parallel-start-rank") for c in cmds(p)][1:] == ["4", "8", "12"]


# -------------------------------------------------------------- capacity
def test_two_h100_and_two_gb200_total_1280_and_1536_gb(k3):
    # "2×H100 yields 1280GB total, and 2×GB200 NVL4 yields 1536GB"
    assert 2 * k3.hw("h100").vram_gb == 1280
    assert 2 * k3.hw("gb200").vram_gb == 1536


@pytest.mark.parametrize("strategy", MULTI_NODE)
@pytest.mark.parametrize("hw", ["h100", "gb200"])
def test_two_nodes_that_cannot_hold_the_weights_are_never_presented_as_fine(plan, hw, strategy):
    # "neither can hold the weights, yet the page may still generate a launch command"
    p = plan(f"hardware={hw}&nodes=2&strategy={strategy}")
    assert p["selection"]["strategy"] == strategy
    if p["status"] == "ok":
        assert p["selection"]["nodes"] > 2
        assert "nodes-raised" in codes(p)
        assert all(rec["fits"] for rec in p["capacity"])
    else:
        assert {"capacity", "kv-capacity"} & set(codes(p))  # kv-capacity: weights fit, one 1M sequence does not
        assert p["commands"] == [] and p["blocked_commands"]


@pytest.mark.parametrize("hw,total", [("h100", "1280 GB"), ("gb200", "1536 GB")])
def test_nodes_raised_notice_states_the_missing_capacity(plan, hw, total):
    p = plan(f"hardware={hw}&nodes=2&strategy=multi_node_tp")
    # Raised to the fewest nodes whose TP divides K3's 96 heads and that hold the
    # weights and one 1M-token sequence (H100: 3 and 4 nodes do not hold it, 5
    # gives TP 40): the plan serves, and the notice says why 2 did not.
    nodes = p["selection"]["nodes"]
    assert nodes > 2 and p["status"] == "ok" and all(rec["fits"] for rec in p["capacity"])
    for fewer in range(3, nodes):
        assert plan(f"hardware={hw}&nodes={fewer}&strategy=multi_node_tp")["selection"]["nodes"] == nodes
    (n,) = notices_with(p, "nodes-raised")
    assert total in n["message"] and "1680 GB" in n["message"]


@pytest.mark.parametrize("hw", ["h100", "gb200"])
def test_two_node_pd_pools_that_cannot_hold_the_weights_are_raised(plan, hw):
    p = plan(f"hardware={hw}&strategy=pd_cluster&prefill_nodes=2&decode_nodes=2")
    sel = p["selection"]
    assert sel["prefill_nodes"] > 2 and sel["decode_nodes"] > 2
    assert len(notices_with(p, "nodes-raised")) == 2
    assert all(rec["weights_gb"] <= rec["hbm_gb"] for rec in p["capacity"])
    assert p["status"] == "ok" and all(rec["fits"] for rec in p["capacity"])


# ----------------------------------------------------- hardware overrides
@pytest.mark.parametrize("hw", HOPPER)
def test_hopper_uses_marlin_moe_backend(plan, hw):
    # "Hopper (H100/H200) mandates the marlin MoE backend"
    p = plan(f"hardware={hw}")
    for c in cmds(p):
        assert flag_value(c["argv"], "--moe-backend") == "marlin"
        prov = next(f for f in c["provenance"] if f["flag"] == "--moe-backend")
        assert prov["layer"] == "hardware"


@pytest.mark.parametrize("hw", BLACKWELL)
def test_blackwell_uses_trtllm_ragged_mla_1m_context_32k_batched(plan, hw):
    # "Blackwell mandates TRT-LLM Ragged MLA" (+ 1M context, 32768 batched tokens)
    p = plan(f"hardware={hw}")
    for c in cmds(p):
        a = c["argv"]
        cfg = flag_value(a, "--attention-config")
        assert cfg is not None and "TRTLLM_RAGGED" in cfg
        assert json.loads(cfg) == {"mla_prefill_backend": "TRTLLM_RAGGED"}
        assert flag_value(a, "--max-model-len") == "1048576"
        assert flag_value(a, "--max-num-batched-tokens") == "32768"
        assert not has_flag(a, "--moe-backend")
        assert "VLLM_ROCM_USE_AITER" not in c["env"]


@pytest.mark.parametrize("hw", AMD)
def test_amd_uses_aiter_and_128_seqs(plan, hw):
    # "AMD uses the AITER path" (+ max-num-seqs 128)
    p = plan(f"hardware={hw}")
    for c in cmds(p):
        assert c["env"].get("VLLM_ROCM_USE_AITER") == "1"
        assert flag_value(c["argv"], "--max-num-seqs") == "128"
        assert not has_flag(c["argv"], "--moe-backend")
        assert not has_flag(c["argv"], "--attention-config")


@pytest.mark.parametrize("hw", NVIDIA)
def test_nvidia_has_no_aiter(plan, hw):
    for c in cmds(plan(f"hardware={hw}")):
        assert "VLLM_ROCM_USE_AITER" not in c["env"]


# ------------------------------------------------------ Advanced overrides
def test_max_batched_8k_replaces_blackwell_32768(plan):
    # "max-num-batched-tokens=8192: Overrides ... Blackwell's 32768"
    p = plan("hardware=b300&advanced=max_batched_8k")
    assert p["selection"]["advanced"] == ["max_batched_8k"]
    assert flag_value(only_cmd(p)["argv"], "--max-num-batched-tokens") == "8192"
    msgs = [n["message"] for n in notices_with(p, "value-replaced")]
    assert any("32768" in m and "8192" in m for m in msgs), msgs


def test_max_batched_8k_replaces_pd_prefill_16384_and_decode_32(plan):
    # "Overrides PD Prefill's 16384, PD Decode's 32, and Blackwell's 32768"
    without = plan("hardware=b300&strategy=pd_cluster")
    by_pool = {c["pool"]: flag_value(c["argv"], "--max-num-batched-tokens") for c in cmds(without)}
    assert by_pool == {"prefill": "16384", "decode": "32"}
    p = plan("hardware=b300&strategy=pd_cluster&advanced=max_batched_8k")
    for c in cmds(p):
        assert flag_value(c["argv"], "--max-num-batched-tokens") == "8192", c["label"]
    msgs = " | ".join(n["message"] for n in notices_with(p, "value-replaced"))
    # Notices name the value each step replaced: the P/D role values (which had
    # themselves replaced Blackwell's 32768, a recipe-internal step).
    for old in ("16384", "--max-num-batched-tokens 32 "):
        assert old in msgs
    prefill = next(c for c in cmds(p) if c["pool"] == "prefill")
    chain = next(f["replaced"] for f in prefill["provenance"] if f["flag"] == "--max-num-batched-tokens")
    assert [r["value"] for r in chain] == ["32768", "16384"]


@pytest.mark.parametrize("hw", AMD)
def test_max_num_seqs_256_replaces_amd_128(plan, hw):
    # "max-num-seqs=256: Overrides AMD's default of 128"
    p = plan(f"hardware={hw}&advanced=max_num_seqs_256")
    for c in cmds(p):
        assert flag_value(c["argv"], "--max-num-seqs") == "256"
    assert any("128" in n["message"] and "256" in n["message"] for n in notices_with(p, "value-replaced"))


def test_max_num_seqs_256_replaces_pd_decode_32(plan):
    # "... and PD Decode's 32"
    without = plan("hardware=b300&strategy=pd_cluster")
    assert {flag_value(c["argv"], "--max-num-seqs") for c in cmds(without) if c["pool"] == "decode"} == {"32"}
    p = plan("hardware=b300&strategy=pd_cluster&advanced=max_num_seqs_256")
    for c in cmds(p):
        if c["pool"] == "decode":
            assert flag_value(c["argv"], "--max-num-seqs") == "256"


@pytest.mark.parametrize("hw", NVIDIA)
def test_spec_decoding_caps_max_num_seqs_256_back_to_32_on_nvidia(plan, hw):
    # "if Spec Decoding is also enabled, the Feature layer will then override this
    # with NVIDIA 32 ... the override chain becomes Advanced → Features"
    p = plan(f"hardware={hw}&advanced=max_num_seqs_256&features=spec_decoding")
    for c in cmds(p):
        assert flag_value(c["argv"], "--max-num-seqs") == "32"
        prov = next(f for f in c["provenance"] if f["flag"] == "--max-num-seqs")
        assert prov["layer"] == "features"
        assert prov["replaced"][-1]["layer"] == "advanced" and prov["replaced"][-1]["value"] == "256"
    msgs = [n["message"] for n in notices_with(p, "value-replaced")]
    assert any("256" in m and "32" in m for m in msgs), msgs


@pytest.mark.parametrize("hw", AMD)
def test_spec_decoding_sets_max_num_seqs_256_to_128_on_amd(plan, hw):
    # "... or AMD 128"
    p = plan(f"hardware={hw}&advanced=max_num_seqs_256&features=spec_decoding")
    for c in cmds(p):
        assert flag_value(c["argv"], "--max-num-seqs") == "128"
        prov = next(f for f in c["provenance"] if f["flag"] == "--max-num-seqs")
        assert prov["layer"] == "features"
        assert [r["layer"] for r in prov["replaced"]] == ["hardware", "advanced"]
    msgs = [n["message"] for n in notices_with(p, "value-replaced")]
    assert any("256" in m and "128" in m for m in msgs), msgs


def _units(argv: list[str]) -> dict[str, str | None]:
    """argv[3:] as {flag: value}, for order-insensitive comparisons."""
    out: dict[str, str | None] = {}
    rest = argv[3:]
    i = 0
    while i < len(rest):
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            out[rest[i]] = rest[i + 1]
            i += 2
        else:
            out[rest[i]] = None
            i += 1
    return out


@pytest.mark.parametrize("query", ["", "hardware=h200", "hardware=mi355x", "hardware=b300&strategy=pd_cluster"])
def test_gpu_mem_095_sets_the_same_options_and_says_so(plan, query):
    # "K3's base configuration already uses 0.95, so toggling this typically won't
    # change the final command, but it does produce a different UI state"
    sep = "&" if query else ""
    a, b = plan(query), plan(query + sep + "advanced=gpu_mem_095")
    assert b["selection"]["advanced"] == ["gpu_mem_095"]
    assert b["url"] != a["url"]  # a different UI state
    assert [_units(c["argv"]) for c in cmds(a)] == [_units(c["argv"]) for c in cmds(b)]
    assert [c["env"] for c in cmds(a)] == [c["env"] for c in cmds(b)]
    assert "value-unchanged" in codes(b)
    assert "value-replaced" not in codes(b)


def test_gpu_mem_095_leaves_argv_unchanged(plan):
    a, b = plan(""), plan("advanced=gpu_mem_095")
    assert [c["argv"] for c in cmds(a)] == [c["argv"] for c in cmds(b)]
    assert [c["command"] for c in cmds(a)] == [c["command"] for c in cmds(b)]


@pytest.mark.parametrize("hw", list(NVIDIA) + list(AMD))
def test_max_num_seqs_256_under_spec_decoding_leaves_argv_unchanged(plan, hw):
    # "if Spec Decoding is also enabled, the Feature layer will then override this":
    # the final flags and values are the ones spec decoding gives on its own. A flag
    # keeps the position of the first layer that set it, so only its place may differ.
    a = plan(f"hardware={hw}&features=spec_decoding")
    b = plan(f"hardware={hw}&features=spec_decoding&advanced=max_num_seqs_256")
    assert [_units(c["argv"]) for c in cmds(a)] == [_units(c["argv"]) for c in cmds(b)]


def test_max_model_len_auto_replaces_blackwell_1m(plan):
    # "max-model-len=auto: Overrides Blackwell's default 1M context window limit"
    p = plan("hardware=b300&advanced=max_model_len_auto")
    a = only_cmd(p)["argv"]
    assert flag_value(a, "--max-model-len") == "auto"
    assert "1048576" not in a
    assert any("1048576" in n["message"] and "auto" in n["message"] for n in notices_with(p, "value-replaced"))


# ---------------------------------------------------------------- features
def test_tool_calling_uses_the_kimi_k3_parser(plan):
    # "Tool Calling: Enables the API to accept a tools parameter and uses the Kimi K3 parser"
    a = only_cmd(plan("features=tool_calling"))["argv"]
    assert has_flag(a, "--enable-auto-tool-choice")
    assert flag_value(a, "--enable-auto-tool-choice") is None
    assert flag_value(a, "--tool-call-parser") == "kimi_k3"
    assert not has_flag(a, "--reasoning-parser")


def test_reasoning_uses_the_kimi_k3_reasoning_parser(plan):
    # "Reasoning: Uses the kimi_k3 reasoning parser"
    a = only_cmd(plan("features=reasoning"))["argv"]
    assert flag_value(a, "--reasoning-parser") == "kimi_k3"
    assert not has_flag(a, "--tool-call-parser")


@pytest.mark.parametrize("hw", ALL_HW)
def test_spec_decoding_loads_dspark_with_7_tokens_and_the_brand_backend(plan, hw):
    # "Loads Inferact/Kimi-K3-DSpark ... proposes up to 7 candidate tokens ... NVIDIA
    # uses the FLASHINFER_MLA backend; AMD uses TRITON_MLA ... on NVIDIA,
    # max-num-seqs is also capped at 32". Deliberately not on Hopper: vLLM 0.33.0's
    # FlashInfer MLA runs on compute capability 10.x only and a selected backend that
    # does not is refused at start (launch rule attention-backend-device), so H100/H200
    # leave the backend to vLLM (a fresh user's finding).
    p = plan(f"hardware={hw}&features=spec_decoding")
    assert p["selection"]["features"] == ["spec_decoding"]
    for c in cmds(p):
        a = c["argv"]
        cfg = json.loads(flag_value(a, "--speculative-config"))
        assert cfg["model"] == SPEC_MODEL
        assert cfg["num_speculative_tokens"] == 7
        backend = flag_value(a, "--attention-backend")
        assert backend == ("TRITON_MLA" if hw in AMD else None if hw in HOPPER else "FLASHINFER_MLA")
        assert flag_value(a, "--max-num-seqs") == ("128" if hw in AMD else "32")


def test_text_only_adds_language_model_only(plan):
    # "Text Only: Adds --language-model-only, skipping the vision encoder"
    a = only_cmd(plan("features=text_only"))["argv"]
    assert has_flag(a, "--language-model-only")
    assert flag_value(a, "--language-model-only") is None


FEATURE_FLAGS = {
    "tool_calling": ("--enable-auto-tool-choice", "--tool-call-parser"),
    "reasoning": ("--reasoning-parser",),
    "spec_decoding": ("--speculative-config", "--attention-backend"),
    "text_only": ("--language-model-only",),
}


@pytest.mark.parametrize("hw", ["b300", "h200", "mi355x"])
@pytest.mark.parametrize("feature", FEATURES)
def test_turning_a_feature_off_removes_its_flags(plan, hw, feature):
    all_on = plan(f"hardware={hw}&features=" + ",".join(FEATURES))
    rest = [f for f in FEATURES if f != feature]
    off = plan(f"hardware={hw}&features=" + ",".join(rest))
    assert off["selection"]["features"] == rest
    for c in cmds(all_on):
        for flag in FEATURE_FLAGS[feature]:
            if not (hw in HOPPER and flag == "--attention-backend"):  # vLLM's own choice there (see above)
                assert has_flag(c["argv"], flag), (feature, flag)
    for c in cmds(off):
        for flag in FEATURE_FLAGS[feature]:
            assert not has_flag(c["argv"], flag), (feature, flag)


def test_spec_decoding_off_restores_the_hardware_max_num_seqs(plan):
    assert flag_value(only_cmd(plan("hardware=mi355x&features="))["argv"], "--max-num-seqs") == "128"
    assert not has_flag(only_cmd(plan("hardware=b300&features="))["argv"], "--max-num-seqs")


def test_all_features_off_leaves_no_feature_flags(plan):
    p = plan("features=")
    assert p["selection"]["features"] == []
    a = only_cmd(p)["argv"]
    for flags in FEATURE_FLAGS.values():
        for flag in flags:
            assert not has_flag(a, flag)


def test_features_override_advanced_which_overrides_hardware(plan):
    # "base → variant → strategy → hardware → Advanced → Features → KV Offload"
    p = plan("hardware=mi325x&advanced=max_num_seqs_256&features=spec_decoding&kv_offload=simple")
    c = only_cmd(p)
    prov = {f["flag"]: f for f in c["provenance"]}
    assert prov["--max-num-seqs"]["layer"] == "features"
    assert prov["--kv-transfer-config"]["layer"] == "kv_offload"
    assert prov["--gpu-memory-utilization"]["layer"] == "base"
    assert prov["--tensor-parallel-size"]["layer"] == "strategy"
    # provenance follows argv order, and KV offload is written last
    assert c["argv"][-2] == "--kv-transfer-config"


# --------------------------------------------------------------- KV offload
def test_kv_offload_lists_off_simple_mooncake_lmcache(plan):
    # "The page lists four options: Off, Simple, Mooncake, LMCache"
    p = plan("")
    assert sorted(option_ids(p, "kv_offload")) == sorted(["off", "simple", MOONCAKE, "lmcache"])
    assert {o["label"] for o in p["options"]["kv_offload"]} == {"Off", "Simple", "Mooncake", "LMCache"}


@pytest.mark.parametrize("hw", ALL_HW)
def test_mooncake_is_unavailable_on_all_nine_hardware(plan, hw):
    # "Mooncake is marked as unsupported across all 9 hardware options for K3"
    p = plan(f"hardware={hw}&kv_offload={MOONCAKE}")
    assert p["selection"]["hardware"] == hw
    assert p["selection"]["kv_offload"] == "off"
    assert "kv-offload-unavailable" in codes(p)
    assert option(p, "kv_offload", MOONCAKE)["disabled"] is True
    for c in cmds(p):
        assert not has_flag(c["argv"], "--kv-transfer-config")
        assert "MOONCAKE_CONFIG_PATH" not in c["env"]


def test_simple_offload_reserves_220_gib_per_rank(plan):
    # "Enabling Simple also reserves roughly 220 GiB of CPU memory per rank"
    p = plan("kv_offload=simple")
    assert p["selection"]["kv_offload"] == "simple"
    cfg = json.loads(flag_value(only_cmd(p)["argv"], "--kv-transfer-config"))
    assert cfg["kv_connector"] == "SimpleCPUOffloadConnector"
    assert cfg["kv_connector_extra_config"]["cpu_bytes_to_use_per_rank"] == 220 * 2**30


@pytest.mark.parametrize("kv", ["simple", "lmcache"])
@pytest.mark.parametrize("hw", ["h100", "h200"])
def test_kv_offload_never_makes_a_single_node_fit(plan, hw, kv):
    # "enabling KV Offload still won't let a single 8×H100 node fit Kimi K3"
    p = plan(f"hardware={hw}&strategy=single_node_tp&kv_offload={kv}")
    assert p["selection"]["kv_offload"] == kv
    assert p["status"] == "error"
    assert "capacity" in codes(p)
    assert p["capacity"][0]["fits"] is False
    assert p["commands"] == []


@pytest.mark.parametrize("query", ["hardware=h200", "hardware=h200&strategy=single_node_tp",
                                   "hardware=b300", "hardware=gb200&strategy=multi_node_dep"])
def test_kv_offload_does_not_change_the_capacity_records(plan, query):
    # "KV Offload ... cannot solve the 2.8T model weight capacity problem"
    a, b = plan(query), plan(query + "&kv_offload=simple")
    assert b["selection"]["kv_offload"] == "simple"

    def gpu_side(caps):  # the host memory the offload reserves is its own field
        return [{k: v for k, v in c.items() if k != "host_kv_gib_per_node"} for c in caps]

    assert gpu_side(a["capacity"]) == gpu_side(b["capacity"])
    assert a["status"] == b["status"]
    assert a["selection"]["nodes"] == b["selection"]["nodes"]


# --------------------------------------------------- P/D disaggregation
def test_pd_defaults_tep_prefill_dep_decode_ports_and_nixl(plan):
    # "The K3 recipe defaults to TEP for Prefill and DEP for Decode. The two roles use
    # separate HTTP ports (default 8001/8002), NIXL side-channel ports (5557/5558)
    # ... with a Router directing requests to the appropriate endpoint"
    p = plan("hardware=b300&strategy=pd_cluster")
    assert p["status"] == "ok"
    sel = p["selection"]
    assert (sel["prefill_mode"], sel["decode_mode"]) == ("tep", "dep")
    roles = {}
    for c in cmds(p):
        roles.setdefault(c["pool"], []).append(c)
        a = c["argv"]
        port = {"prefill": "8001", "decode": "8002"}[c["pool"]]
        side = {"prefill": "5557", "decode": "5558"}[c["pool"]]
        assert flag_value(a, "--port") == port
        assert c["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] == side
        cfg = json.loads(flag_value(a, "--kv-transfer-config"))
        assert cfg["kv_connector"] == "NixlConnector"
        assert cfg["kv_role"] == {"prefill": "kv_producer", "decode": "kv_consumer"}[c["pool"]]
    assert set(roles) == {"prefill", "decode"}
    assert len(roles["prefill"]) == sel["prefill_nodes"] and len(roles["decode"]) == sel["decode_nodes"]
    for c in roles["prefill"]:
        assert has_flag(c["argv"], "--enable-expert-parallel") and has_flag(c["argv"], "--tensor-parallel-size")
    for c in roles["decode"]:
        assert has_flag(c["argv"], "--enable-expert-parallel") and has_flag(c["argv"], "--data-parallel-size")
        assert not has_flag(c["argv"], "--tensor-parallel-size")
    (router,) = [c for c in p["commands"] if c["role"] == "router"]
    assert flag_values(router["argv"], "--prefill") == ["http://$PREFILL_NODE_1:8001"]
    assert len(flag_values(router["argv"], "--decode")) == sel["decode_nodes"]
    assert all(u.endswith(":8002") for u in flag_values(router["argv"], "--decode"))


def test_pd_pools_choose_tp_tep_dep_and_1_to_16_nodes(plan):
    # "Both Prefill and Decode can independently choose TP, TEP, or DEP, with 1 to 16
    # nodes configurable for each"
    p = plan("hardware=b300&strategy=pd_cluster")
    for pool in ("prefill", "decode"):
        assert option_ids(p, f"{pool}_mode") == ["tp", "tep", "dep"]
        assert option_ids(p, f"{pool}_nodes") == [str(k) for k in range(1, 17)]
    q = plan("hardware=b300&strategy=pd_cluster&prefill_mode=dep&prefill_nodes=3&decode_mode=tp&decode_nodes=1")
    sel = q["selection"]
    assert (sel["prefill_mode"], sel["prefill_nodes"], sel["decode_mode"], sel["decode_nodes"]) == ("dep", 3, "tp", 1)
    assert q["status"] == "ok"
    assert "nodes-raised" not in codes(q)


def test_pd_does_not_compose_with_local_kv_offload(plan):
    # "Not all strategies support the same offload methods": P/D already uses
    # --kv-transfer-config for NIXL, so Simple is refused rather than replacing it.
    p = plan("hardware=b300&strategy=pd_cluster&kv_offload=simple")
    assert p["selection"]["kv_offload"] == "off"
    assert "kv-offload-unavailable" in codes(p)
    for c in cmds(p):
        assert json.loads(flag_value(c["argv"], "--kv-transfer-config"))["kv_connector"] == "NixlConnector"


# -------------------------------------------- contradictions and overrides
@pytest.mark.parametrize("query", [
    "", "hardware=h200", "hardware=mi355x&features=spec_decoding&advanced=max_num_seqs_256",
    "hardware=b300&strategy=pd_cluster&advanced=max_batched_8k,max_num_seqs_256,max_model_len_auto",
    "hardware=gb300&strategy=multi_node_dep&features=tool_calling,reasoning,spec_decoding,text_only&kv_offload=simple",
])
def test_no_flag_twice_and_no_contradictory_booleans(plan, query):
    # "verify ... whether contradictory boolean flags appear simultaneously"
    for c in cmds(plan(query)):
        flags = [t.split("=", 1)[0] for t in c["argv"][3:] if t.startswith("--")]
        assert len(flags) == len(set(flags)), flags
        for f in flags:
            if f.startswith("--no-"):
                assert "--" + f[5:] not in flags


def test_silent_overrides_are_reported(plan):
    # "whether any value was silently overridden by a later configuration layer"
    p = plan("hardware=b300&advanced=max_batched_8k,max_model_len_auto")
    c = only_cmd(p)
    replaced = {f["flag"]: f["replaced"] for f in c["provenance"] if f["replaced"]}
    assert set(replaced) == {"--max-num-batched-tokens", "--max-model-len"}
    assert replaced["--max-num-batched-tokens"] == [
        {"value": "32768", "layer": "hardware", "key": "hardware_overrides.blackwell.extra_args"}]
    assert len(notices_with(p, "value-replaced")) == 2


# -------------------------------------------------- other composer bugs
def test_nodes_raised_past_the_floor_names_the_capacity_reason(plan):
    p = plan("hardware=gb200&strategy=multi_node_tp&nodes=1")
    assert p["selection"]["nodes"] == 3  # 3 trays: 2304 GB hold 1680 GB, TP 12 divides 96 heads
    (n,) = notices_with(p, "nodes-raised")
    assert "fit" in n["message"], n["message"]


def test_no_value_unchanged_notice_when_the_value_changed(plan):
    p = plan("hardware=mi355x&advanced=max_num_seqs_256&features=spec_decoding")
    assert "value-unchanged" not in codes(p), notices_with(p, "value-unchanged")


def test_a_bare_gpu_opens_what_the_recipe_verified(plan, k3):
    """A GPU chosen without a strategy opens the strategy the recipe verified
    on it (``meta.verified_configs``; composer.resolve.recommend), and the
    star is on it; P/D is never chosen for the user (GB200: its notice names it)."""
    for hw in ("b200", "h200"):
        p = plan(f"hardware={hw}")
        want = next(c.strategy for c in k3.recipe.meta.verified_configs
                    if c.hardware == hw and k3.strategy(c.strategy).deploy_type == "multi_node")
        assert p["status"] == "ok" and p["selection"]["strategy"] == want and p["verified"], hw
        auto = next(n["message"] for n in p["notices"] if n["code"] == "strategy-auto")
        assert "the strategy the recipe verified on" in auto
    gb = plan("hardware=gb200")
    assert gb["selection"]["strategy"] != "pd_cluster"
    assert "The recipe verified Prefill/Decode disaggregation on GB200 NVL4" in next(
        n["message"] for n in gb["notices"] if n["code"] == "strategy-auto")
    # A node count asked for keeps its own recommendation (the verified one is for a bare GPU).
    assert plan("hardware=b200&nodes=2")["selection"]["strategy"] == "multi_node_tp"
