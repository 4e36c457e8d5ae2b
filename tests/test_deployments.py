"""Issue 3: P/D on GB200 with the recipe defaults, TP+PP and TP+DP launch
modes, KV offload memory figures, provenance of the seed's override chains,
install forms and scripts."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from composer.run_forms import VLLM_RELEASE
from tests import shellwords
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def flags(argv, name):
    return [argv[i + 1] for i, t in enumerate(argv[:-1]) if t == name]


def test_pd_on_gb200_with_defaults(plan):
    p = plan("hardware=gb200&strategy=pd_cluster")
    assert p["status"] == "ok"
    sel = p["selection"]
    # TEP prefill: 2 trays cannot hold 1680 GB, 3 trays give TP 12 (it divides
    # K3's 96 heads); DEP decode: floor of 16 GPUs = 4 trays.
    assert (sel["prefill_mode"], sel["prefill_nodes"], sel["decode_mode"], sel["decode_nodes"]) == ("tep", 3, "dep", 4)
    prefill = [c for c in p["commands"] if c["pool"] == "prefill"]
    decode = [c for c in p["commands"] if c["pool"] == "decode"]
    (router,) = [c for c in p["commands"] if c["role"] == "router"]
    for i, c in enumerate(prefill):
        a = c["argv"]
        assert flag(a, "--tensor-parallel-size") == "12" and flag(a, "--node-rank") == str(i)
        assert flag(a, "--master-addr") == "$PREFILL_NODE_1"
        assert ("--headless" in a) is (i > 0)
        assert c["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == f"$PREFILL_NODE_{i + 1}"
        assert c["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5557" and flag(a, "--port") == "8001"
        assert json.loads(flag(a, "--kv-transfer-config"))["kv_role"] == "kv_producer"
    for i, c in enumerate(decode):
        a = c["argv"]
        assert flag(a, "--data-parallel-size") == "16" and flag(a, "--data-parallel-size-local") == "4"
        assert flag(a, "--data-parallel-start-rank") == str(4 * i)
        assert flag(a, "--data-parallel-address") == "$DECODE_NODE_1"
        assert c["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == f"$DECODE_NODE_{i + 1}"
        assert flag(a, "--port") == "8002" and "--headless" not in a
    # The router lists exactly the endpoints that serve HTTP: the TEP head, every DEP node.
    assert flags(router["argv"], "--prefill") == ["http://$PREFILL_NODE_1:8001"]
    assert flags(router["argv"], "--decode") == [f"http://$DECODE_NODE_{i}:8002" for i in range(1, 5)]
    assert [c["scope"] for c in p["capacity"]] == ["prefill", "decode"] and all(c["fits"] for c in p["capacity"])


def test_pd_pool_that_cannot_hold_the_weights_is_raised_with_the_reason(plan):
    p = plan("hardware=gb200&strategy=pd_cluster&prefill_nodes=2&prefill_mode=tep")
    assert p["selection"]["prefill_nodes"] == 3
    (n,) = [n for n in p["notices"] if n["code"] == "nodes-raised"]
    assert "from 2 to 3" in n["message"] and "109 % of its 1536 GB" in n["message"] and "GiB" not in n["message"] and "do not fit" in n["message"]
    opt = next(o for o in p["options"]["prefill_nodes"] if o["id"] == "2")
    assert opt["disabled"] and "1536 GB" in opt["reason"]
    # 5 trays' TP 20 does not divide K3's 96 attention heads.
    p = plan("hardware=gb200&strategy=pd_cluster&prefill_nodes=5&prefill_mode=tep")
    (n,) = [n for n in p["notices"] if n["code"] in ("nodes-raised", "nodes-tp-divides-heads", "nodes-lowered")]
    assert "TP 20" in n["message"] and "96 attention heads" in n["message"] and p["selection"]["prefill_nodes"] != 5


@pytest.mark.parametrize("hw, gpus", [("b200", 8), ("gb300", 4)])
def test_tp_pp_launch_mode(plan, hw, gpus):
    p = plan(f"hardware={hw}&strategy=multi_node_tp_pp")
    nodes = p["selection"]["nodes"]
    assert nodes * gpus >= 16
    for rank, c in enumerate(p["commands"]):
        a = c["argv"]
        assert flag(a, "--tensor-parallel-size") == str(gpus)
        assert flag(a, "--pipeline-parallel-size") == str(nodes)
        assert flag(a, "--nnodes") == str(nodes) and flag(a, "--node-rank") == str(rank)
        assert ("--headless" in a) is (rank > 0)
    assert "--speculative-config" not in " ".join(plan(f"hardware={hw}&strategy=multi_node_tp_pp&features=spec_decoding")["commands"][0]["argv"])


def test_tp_dp_followers_are_headless(plan):
    # vLLM's multi-node data-parallel docs: followers run --headless with their start rank (upstream W22).
    p = plan("hardware=b300&strategy=multi_node_tp_dp")
    head, *workers = p["commands"]
    assert flag(head["argv"], "--data-parallel-size") == str(p["selection"]["nodes"])
    assert flag(head["argv"], "--data-parallel-size-local") == "1" and "--headless" not in head["argv"]
    for r, w in enumerate(workers, start=1):
        assert "--headless" in w["argv"] and flag(w["argv"], "--data-parallel-start-rank") == str(r)
    assert p["capacity"][0]["where"].startswith("each replica")


@pytest.mark.parametrize("hw, per_node, nodes", [("h200", 1760, 2), ("gb300", 880, 2)])
def test_simple_offload_memory_per_node_and_cluster(plan, hw, per_node, nodes):
    p = plan(f"hardware={hw}&kv_offload=simple")
    assert p["selection"]["nodes"] == nodes
    (n,) = [n for n in p["notices"] if n["code"] == "kv-host-memory"]
    assert "220 GiB" in n["message"] and f"{per_node} GiB on each" in n["message"]
    ranks = per_node // 220 * nodes
    assert f"{per_node * nodes} GiB for the {ranks} ranks of the deployment" in n["message"]


def test_offload_memory_counts_the_ranks_that_run_not_idle_gpus():
    # Found by the fresh-user trial: TP 1 on an 8-GPU B200 node was said to
    # reserve 8 ranks' worth of host memory.
    from composer.api import compose, make_context
    from composer.buildtime.loader import load_catalog, load_recipe

    recipes = ROOT / "recipes"
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    ctx = make_context(rid, load_recipe(recipes, rid), load_catalog(recipes))
    p = compose(ctx, "variant=nvfp4&hardware=b200&kv_offload=simple", every_form=False)
    (n,) = [n for n in p["notices"] if n["code"] == "kv-host-memory"]
    assert "(1 rank)" in n["message"] and "220 GiB for the 1 rank" in n["message"]


def test_mooncake_request_is_refused_with_its_reason(plan):
    p = plan("kv_offload=kv_store_distributed_mooncake")
    assert p["selection"]["kv_offload"] == "off"
    (n,) = [n for n in p["notices"] if n["code"] == "kv-offload-unavailable"]
    assert "does not support Mooncake" in n["message"]
    opt = next(o for o in p["options"]["kv_offload"] if o["id"] == "kv_store_distributed_mooncake")
    assert opt["disabled"] and "does not support Mooncake on any hardware" in opt["reason"]  # unsupported everywhere (issue 21)
    assert not any("MooncakeStoreConnector" in " ".join(c["argv"]) for c in p["commands"])


def test_override_chain_provenance(plan):
    # Seed: "the override chain becomes Advanced → Features" (NVIDIA: 256 then 32).
    p = plan("hardware=b300&features=spec_decoding&advanced=max_num_seqs_256,max_batched_8k")
    prov = {f["flag"]: f for f in p["commands"][0]["provenance"]}
    seqs = prov["--max-num-seqs"]
    assert (seqs["value"], seqs["layer"]) == ("32", "features")
    assert seqs["key"] == "features.spec_decoding.hardware_overrides.nvidia.args"
    assert [(r["value"], r["layer"]) for r in seqs["replaced"]] == [("256", "advanced")]
    tokens = prov["--max-num-batched-tokens"]
    assert (tokens["value"], tokens["layer"]) == ("8192", "advanced")
    assert [(r["value"], r["key"]) for r in tokens["replaced"]] == [("32768", "hardware_overrides.blackwell.extra_args")]
    msgs = [n["message"] for n in p["notices"] if n["code"] == "value-replaced"]
    assert any("--max-num-seqs 256 from Advanced was replaced by 32 from Speculative decoding" in m for m in msgs)


def test_docker_form_and_scripts(plan):
    multi = plan("hardware=h200&install=docker")
    for c in multi["commands"]:
        d = c["docker_argv"]
        assert d[:2] == ["docker", "run"] and "--network" in d and flag(d, "--network") == "host"
        assert "-p" not in d
        assert d[d.index(f"vllm/vllm-openai:v{VLLM_RELEASE}") + 1:] == c["argv"][2:]
        assert shellwords.split(c["text"]) == d
        assert ': "${HEAD_IP:?' in c["script"] and ': "${IFACE_NAME:?' in c["script"]
    # Across nodes the container needs the RDMA devices to be fast; the plan says so (a fresh user's finding)
    assert any(n["code"] == "docker-rdma" and "--device=/dev/infiniband" in n["message"] for n in multi["notices"])
    single = plan("hardware=mi355x&install=docker")
    assert not any(n["code"] == "docker-rdma" for n in single["notices"])
    assert not any(n["code"] == "docker-rdma" for n in plan("hardware=h200")["notices"])  # pip: nothing to add
    d = single["commands"][0]["docker_argv"]
    assert "--device=/dev/kfd" in d and flag(d, "-p") == "8000:8000"
    assert f"vllm/vllm-openai-rocm:v{VLLM_RELEASE}" in d and not any(w.endswith(":latest") for w in d)
    assert single["install"]["docker"] == f"docker pull vllm/vllm-openai-rocm:v{VLLM_RELEASE}"
    pd = plan("hardware=gb200&strategy=pd_cluster")
    assert pd["client"]["curl_argv"][1] == "http://$ROUTER_HOST:30000/v1/chat/completions"
    assert re.search(r"vllm bench serve --model moonshotai/Kimi-K3 --host \$ROUTER_HOST --port 30000", pd["client"]["bench"])


def test_lmcache_brings_its_server_and_install(plan):
    p = plan("kv_offload=lmcache")
    (comp,) = p["companions"]
    assert shlex.split(comp["command"].replace("\\\n", " "))[:4] == ["lmcache", "server", "--port", "5555"]
    assert "uv pip install lmcache==0.5.6" in p["install"]["extras"]  # as vLLM 0.33.0 pins it (requirements/kv_connectors_cu12.txt)
    cfg = json.loads(flag(p["commands"][0]["argv"], "--kv-transfer-config"))
    assert cfg["kv_connector_extra_config"]["lmcache.mp.port"] == 5555


def test_tp_dp_where_one_node_cannot_hold_a_replica_is_an_error_and_disabled(plan):
    p = plan("hardware=h200&strategy=multi_node_tp_dp")
    assert p["status"] == "error" and p["commands"] == []
    assert p["capacity"][0]["fits"] is False and "each replica" in p["capacity"][0]["where"]
    opt = next(o for o in plan("hardware=h200")["options"]["strategy"] if o["id"] == "multi_node_tp_dp")
    assert opt["disabled"] and "room for the weights" in opt["reason"]


# ---- inputs found by adversarial testing (kept as regression tests) ----
CORPUS_ROOT = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "upstream-recipes"
needs_corpus = pytest.mark.skipif(not CORPUS_ROOT.exists(), reason="shared corpus not present")


def corpus_plan(rid, query):
    from composer.api import compose_page, make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    return compose_page(make_context(rid, load_recipe(CORPUS_ROOT, rid), load_catalog(CORPUS_ROOT)), query)


@needs_corpus
def test_recipe_tp_flag_cannot_contradict_the_computed_layout():
    # MiniMax-M2's AMD block sets --tensor-parallel-size 2; on 2 nodes the layout is TP 16.
    p = corpus_plan("MiniMaxAI/MiniMax-M2", "hardware=mi300x&strategy=multi_node_tp&nodes=2")
    for c in p["commands"]:
        assert flag(c["argv"], "--tensor-parallel-size") == "16" and c["argv"].count("--tensor-parallel-size") == 1
    assert "TP 16" in p["summary"]
    assert any(n["code"] == "topology-kept" and "--tensor-parallel-size 2" in n["message"] for n in p["notices"])


@needs_corpus
def test_single_node_tp_never_shrinks_when_utilization_changes():
    # Issue 10: 170 GB on B200 was TP 8 at 0.9 and silently TP 1 at 0.95.
    # vram_minimum_gb includes headroom: 170 GB fit one 180 GB GPU, but at TP 1
    # the KV cache left (vLLM's terms, issue 19) holds less than one
    # 131,072-token sequence at either utilization, so TP 2 at both.
    base = corpus_plan("meta-llama/Llama-3.3-70B-Instruct", "hardware=b200")
    more = corpus_plan("meta-llama/Llama-3.3-70B-Instruct", "hardware=b200&advanced=gpu_mem_095")
    tps = {int(flag(p["commands"][0]["argv"], "--tensor-parallel-size")) for p in (base, more)}
    assert tps == {2}
    cap = base["capacity"][0]
    assert cap["fits"] and cap["gpus"] == 2 and cap["hbm_gb"] == 360
    assert cap["kv_gib"] == pytest.approx(cap["requested_gib"] - sum(t["gib"] for t in cap["terms"]), abs=0.03)
    assert cap["max_concurrency"] >= 1
    for p in (base, more):  # the 6 idle GPUs are said, not hidden
        (idle,) = [n for n in p["notices"] if n["code"] == "idle-gpus"]
        assert idle["old"] == "8" and idle["new"] == "2"


def test_headroom_is_counted_once_and_kv_is_estimated(plan):
    # K3: 1680 GB (2.8T × 0.5 × 1.2) on one B300 node (8 × 288 GB = 2304 GB).
    p = plan("hardware=b300")
    cap = p["capacity"][0]
    assert cap["fits"] and cap["hbm_gb"] == 2304 and cap["gpus"] == 8
    # Per GPU in GiB (issue 19): torch's 267.88 × 0.95 (K3 base args), weights
    # 1680 / 1.2 GB over 8 ranks, then vLLM's other terms.
    weights = 1400e9 / 2 ** 30 / 8
    assert cap["weights_gib"] == pytest.approx(weights, abs=0.01)
    assert cap["requested_gib"] == pytest.approx(cap["torch_gib"] * 0.95, abs=0.01)
    assert cap["kv_gib"] == pytest.approx(cap["requested_gib"] - sum(t["gib"] for t in cap["terms"]), abs=0.03)
    # MLA latent 512 + rope 64 per token on the 24 MLA layers of 93 (fp8 KV on Blackwell: 576 bytes), held by
    # each of the 8 TP ranks; the 69 KDA layers take one state block per sequence, not per token (< 1 % here).
    per_token = 24 * 576
    assert 0.99 < cap["kv_tokens"] / (cap["kv_gib"] * 2 ** 30 / per_token) <= 1.0




def test_a_recommended_strategy_that_cannot_serve_gives_way(plan):
    # A new user found H100 disabled on the Kimi K3 page. With K3's real layout (24 MLA layers) the
    # recommended Multi-node TP holds one 1M-token sequence on 6 nodes, so it is shown, and said; no
    # fallback (test_memory and test_links cover a strategy that gives way).
    p = plan("hardware=h100")
    assert p["status"] == "ok" and p["selection"]["strategy"] == "multi_node_tp" and p["selection"]["nodes"] == 6
    assert not [n for n in p["notices"] if n["code"] == "strategy-fallback"]
    assert p["notices"][0]["code"] == "strategy-auto"
    assert plan(p["url"])["selection"] == p["selection"]
    # A switch to a GPU one node of which holds the weights gets that GPU's verified single-node default.
    options = {o["id"]: o for o in p["options"]["hardware"]}
    for hw in ("b300", "mi355x"):
        assert plan(options[hw]["query"])["selection"]["strategy"] == plan(f"hardware={hw}")["selection"]["strategy"] == "single_node_tp"
    assert not [o for o in p["options"]["features"] if "strategy=" in o["query"]]
    assert not [o for o in plan("")["options"]["hardware"] if o["disabled"]]


def test_request_above_every_valid_count_comes_down(plan):
    p = plan("strategy=multi_node_tp&nodes=13")  # TP 104 … 128 never divide 96 heads: TP 96 on 12 nodes
    assert p["status"] == "ok" and p["selection"]["nodes"] == 12
    assert any(n["code"] == "nodes-lowered" for n in p["notices"])


def test_hybrid_lb_needs_local_dp_ranks(plan, tmp_path):
    # A recipe that adds --data-parallel-hybrid-lb to TP+DP (one DP rank per node):
    # vLLM needs --data-parallel-size-local > 1 for hybrid LB and never takes it
    # with --headless, so it is dropped with a notice and followers stay headless.
    import shutil
    import yaml
    from composer.api import compose_page, make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    root = tmp_path / "recipes"
    shutil.copytree(__import__("pathlib").Path(__file__).resolve().parents[1] / "recipes", root)
    path = root / "models/moonshotai/Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    data.setdefault("strategy_overrides", {})["multi_node_tp_dp"] = {"extra_args": ["--data-parallel-hybrid-lb"]}
    path.write_text(yaml.safe_dump(data))
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(root, "moonshotai/Kimi-K3"), load_catalog(root))
    p = compose_page(ctx, "hardware=b300&strategy=multi_node_tp_dp")
    for c in p["commands"]:
        assert "--data-parallel-hybrid-lb" not in c["argv"]
        assert ("--headless" in c["argv"]) == (c["node_rank"] > 0)
    assert any(n["code"] == "topology-kept" and "--data-parallel-hybrid-lb" in n["message"] for n in p["notices"])


@needs_corpus
def test_one_local_dp_rank_followers_are_headless():
    # Found by the adversarial pass: a DEP follower with a start rank and no
    # --headless makes vLLM infer hybrid LB and, with one local rank, switch to
    # external LB. With one DP rank per node the followers are headless.
    p = corpus_plan("Qwen/Qwen3.6-35B-A3B", "hardware=dgx_spark_gb10&strategy=multi_node_dep")
    for c in p["commands"]:
        assert ("--headless" in c["argv"]) == (c["node_rank"] > 0)
        assert "--data-parallel-hybrid-lb" not in c["argv"]


def test_data_parallel_rank_and_api_server_count_on_followers_are_dropped(plan, tmp_path):
    import shutil
    import yaml
    from composer.api import compose_page, make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    root = tmp_path / "recipes"
    shutil.copytree(__import__("pathlib").Path(__file__).resolve().parents[1] / "recipes", root)
    path = root / "models/moonshotai/Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    data["model"]["base_args"] += ["--data-parallel-rank", "3", "--api-server-count", "4"]
    path.write_text(yaml.safe_dump(data))
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(root, "moonshotai/Kimi-K3"), load_catalog(root))
    p = compose_page(ctx, "hardware=h200&strategy=multi_node_tp")
    for c in p["commands"]:
        assert "--data-parallel-rank" not in c["argv"]
        assert ("--api-server-count" in c["argv"]) == (c["node_rank"] == 0)


def test_auto_fit_tp_holds_one_sequence_of_the_context(catalog=None):
    # Qwen3 235B on H200 with the 1M-context feature: TP 4 cannot hold one
    # 1,010,000-token sequence; TP 8 can, so TP 8 (not an error).
    from composer.api import compose_page, make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    root = __import__("pathlib").Path(__file__).resolve().parents[1] / "recipes"
    ctx = make_context("Qwen/Qwen3-235B-A22B-Instruct-2507", load_recipe(root, "Qwen/Qwen3-235B-A22B-Instruct-2507"), load_catalog(root))
    p = compose_page(ctx, "hardware=h200&features=tool_calling,long_context")
    assert p["status"] == "ok" and "TP 8" in p["summary"]
    assert p["capacity"][0]["kv_tokens"] >= 1_010_000
    # 262,144 tokens: TP 4 leaves ~259k tokens of KV cache (issue 19's terms), so TP 8 too.
    assert compose_page(ctx, "hardware=h200")["summary"].count("TP 8") == 1


def test_human_readable_max_model_len_is_checked(plan):
    p = plan("hardware=mi325x&advanced=max_model_len_auto")
    assert not [n for n in p["notices"] if n["code"] == "kv-capacity"]
    from composer.vllm_cli import human_int
    assert (human_int("2000k"), human_int("2M"), human_int("1.5K"), human_int("128")) == (2_000_000, 2_097_152, None, 128)


@needs_corpus
def test_mooncake_centralized_runs_its_instances_behind_a_cache_aware_router():
    # Issue 10: the kv_store file asks for default_instances: 2 and a cache-aware router.
    p = corpus_plan("moonshotai/Kimi-K3", "hardware=b300&kv_offload=kv_store_centralized_mooncake")
    assert p["selection"]["instances"] == 2
    serve = [c for c in p["commands"] if c["role"] != "router"]
    (router,) = [c for c in p["commands"] if c["role"] == "router"]
    assert [c["label"] for c in serve] == ["Instance 1 · Node", "Instance 2 · Node"]
    assert router["argv"][:3] == ["vllm-router", "--policy", "cache_aware"]
    urls = router["argv"][router["argv"].index("--worker-urls") + 1:router["argv"].index("--host")]
    assert urls == ["http://$INSTANCE_1_IP:8000", "http://$INSTANCE_2_IP:8000"]
    assert flag(router["argv"], "--port") == "30080"
    assert "30080" in p["client"]["curl"]
    three = corpus_plan("moonshotai/Kimi-K3", "hardware=b300&kv_offload=kv_store_centralized_mooncake&instances=3")
    assert len([c for c in three["commands"] if c["role"] != "router"]) == 3 and "instances=3" in three["url"]
    one = corpus_plan("moonshotai/Kimi-K3", "hardware=b300&kv_offload=kv_store_centralized_mooncake&instances=1")
    assert not [c for c in one["commands"] if c["role"] == "router"] and "instances=1" in one["url"]
    again = corpus_plan("moonshotai/Kimi-K3", p["url"])
    assert again["selection"] == p["selection"] and "instances=2" in p["url"]  # pinned, even the default


@needs_corpus
def test_multi_node_instances_have_their_own_heads():
    p = corpus_plan("moonshotai/Kimi-K3", "hardware=h200&kv_offload=kv_store_centralized_mooncake")
    heads = {flag(c["argv"], "--master-addr") for c in p["commands"] if c["role"] in ("head", "worker")}
    assert heads == {"$INSTANCE_1_HEAD_IP", "$INSTANCE_2_HEAD_IP"}
    (router,) = [c for c in p["commands"] if c["role"] == "router"]
    assert "http://$INSTANCE_1_HEAD_IP:8000" in router["argv"]


def test_instances_outside_a_kv_store_is_ignored_with_a_notice(plan):
    p = plan("hardware=b300&instances=3")
    assert "instances" not in p["selection"]
    assert any(n["code"] == "query-ignored" and "instances" in n["message"] for n in p["notices"])


def test_a_capacity_hint_names_only_a_strategy_that_serves(plan, k3):
    # A fresh user's finding: "Why 1 unavailable" on Kimi K3 H100 advised Multi-node TP, itself disabled there
    # (it cannot hold a 1M-token sequence). Every hint "S on N nodes holds them" of a capacity error must name a
    # plan that composes without an error.
    import re

    from composer.api import compose

    labels = {k3.strategy_label(s): s for s in k3.strategies}
    seen = 0
    for query in ("hardware=h100", "hardware=h100&strategy=single_node_tp", "hardware=h200&strategy=single_node_tp",
                  "hardware=mi300x&strategy=single_node_tp", "hardware=h100&strategy=multi_node_tp_dp"):
        page = plan(query)
        reasons = [o.get("reason") or "" for opts in page["options"].values() for o in opts]
        reasons += [n["message"] for n in page["notices"]]
        for text in reasons:
            for m in re.finditer(r"On ([^,]+), (.+?) on (\d+) nodes holds them\.", text):
                sid = labels[m.group(2)]
                hw = next(h for h in k3.listed_hardware if k3.hw(h).display_name == m.group(1))
                got = compose(k3, f"hardware={hw}&strategy={sid}&nodes={m.group(3)}", every_form=False)
                assert got["status"] == "ok", (query, text, [n["message"] for n in got["notices"] if n["level"] == "error"])
                seen += 1
    assert seen >= 2
    # the fewest nodes that serve: TP + PP holds K3 on 3 × H100, Multi-node TP needs 6
    assert "Multi-node TP + PP on 3 nodes holds them" in plan("hardware=h100&strategy=single_node_tp")["notices"][0]["message"]


K3, QWEN = "moonshotai/Kimi-K3", "Qwen/Qwen3-235B-A22B-Instruct-2507"


@pytest.mark.parametrize("rid,query", [(K3, "hardware=gb200&strategy=pd_cluster"),
                                       (K3, "hardware=h200&strategy=multi_node_dep&nodes=2"),
                                       (QWEN, "kv_offload=kv_store_distributed_mooncake&instances=2")])
def test_every_router_installs_the_pinned_release(rid, query):
    """P/D, hybrid-LB DP and a KV store's instances: the Router tab installs
    vllm-router at ``ROUTER_RELEASE`` (our kv_store recipe names the same line),
    never an unpinned "latest"."""
    from composer.api import compose
    from composer.run_forms import ROUTER_INSTALL, ROUTER_RELEASE
    from tests.plan_space import our_plans

    p = compose(dict(our_plans())[rid], query, every_form=False)
    routers = [c for c in p["commands"] if c["role"] == "router"]
    assert routers, query
    for r in routers:
        assert r["install"] == ROUTER_INSTALL == f"uv pip install vllm-router=={ROUTER_RELEASE}"
        assert ROUTER_INSTALL in r["text"]


@pytest.mark.parametrize("query", ["hardware=h200&nodes=2&strategy=bogus", "hardware=h200&strategy=bogus"])
def test_a_refused_strategy_names_the_one_shown(plan, query):
    """A fresh user's finding: "the recommended strategy is shown" while the
    controls' ★ marked another (with a node count asked, the recommendation
    reads it). The notice names the strategy shown, and the node count."""
    p = plan(query)
    (n,) = [n for n in p["notices"] if n["code"] == "invalid-strategy"]
    shown = next(o["label"] for o in p["options"]["strategy"] if o["selected"])
    assert f"{shown} is shown, the recommended strategy" in n["message"]
    assert ("for 2 nodes" in n["message"]) == ("nodes=2" in query)


def test_every_pd_pool_mode_option_says_what_the_mode_does():
    """A fresh user's finding: the P/D pool modes (TP, TEP, DEP) had no tooltip.
    Each option carries its kind's ``pool_help`` (composer.parallel.KINDS),
    distinct per mode, and the page renders it as the option's title."""
    from composer.api import compose_page
    from composer.parallel import KINDS
    from tests import golden

    ctx = golden.context("ours", "moonshotai/Kimi-K3")
    page = compose_page(ctx, "hardware=gb200&strategy=pd_cluster")
    for pool in ("prefill", "decode"):
        opts = page["options"][f"{pool}_mode"]
        assert len(opts) >= 2
        assert all(o["description"] == KINDS[o["id"]].pool_help != "" for o in opts)
        assert len({o["description"] for o in opts}) == len(opts)
    assert all(k.pool_help for k in KINDS.values() if k.pool)


@pytest.mark.parametrize("nodes", [2, 3])
def test_tp_dp_capacity_counts_every_replica_and_names_the_lever(plan, nodes):
    """Fresh-user finding: TP+DP's capacity line gave one replica's tokens and
    never said that the deployment holds one per node, nor that a node more is
    a replica more (the one lever of that strategy besides the flags)."""
    p = plan(f"hardware=b300&strategy=multi_node_tp_dp&nodes={nodes}")
    (cap,) = p["capacity"]
    assert p["selection"]["nodes"] == nodes and cap["kv_tokens"]
    assert cap["total"].startswith(f"Whole deployment: {cap['kv_tokens'] * nodes:,} tokens in all (the {nodes} "
                                   "replicas, one per node, each hold their own)")
    assert "each node more adds a replica" in cap["total"] and "replicas" not in cap["message"]
    single = plan("hardware=b300&strategy=single_node_tp")
    assert "replicas" not in single["capacity"][0]["message"] and single["capacity"][0]["total"] == ""
