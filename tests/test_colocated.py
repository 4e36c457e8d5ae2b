"""Co-located P/D (issue 21): both pools on one node, each on half of its
GPUs (``prefill_nodes=0&decode_nodes=0``, the public site's legacy
``nodes: 0``, semantics §3.3 step 6 and §5.2): what each command is given,
the ports two processes on one host must not share, the controls that offer
it, and what a half that cannot hold the pool turns into."""

from __future__ import annotations

import re

import pytest

import composer.api
import composer.buildtime.loader
from composer.api import compose, compose_page
from composer.positions import device_indices
from tests.conftest import ROOT, recipes_copy
from tests.plan_space import our_plans, shape_queries

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


def _ctx(recipes, rid):
    return composer.api.make_context(rid, composer.buildtime.loader.load_recipe(recipes, rid),
                                     composer.buildtime.loader.load_catalog(recipes))


@pytest.fixture(scope="module")
def llama():
    return _ctx(ROOT / "recipes", LLAMA)


@pytest.fixture(scope="module")
def minimax():
    if not CORPUS.is_dir():
        pytest.skip("the public corpus is not beside the project")
    return _ctx(CORPUS, "MiniMaxAI/MiniMax-M2")


def _flag(argv, name):
    argv = list(argv)
    return argv[argv.index(name) + 1] if name in argv else None


def _gpus(c):
    return device_indices("CUDA_VISIBLE_DEVICES", c["env"]["CUDA_VISIBLE_DEVICES"])


def assert_shares_node_safely(plan: dict, gpu_count: int) -> None:
    """Two pools on one node: disjoint GPU lists inside the node, each
    command's parallel size equal to its list, and no port both bind (HTTP,
    DP RPC, the NIXL side channel's base + DP rank range)."""
    serve = [c for c in plan["commands"] if c["argv"][:2] == ["vllm", "serve"]]
    halves = [c for c in serve if "CUDA_VISIBLE_DEVICES" in c["env"]]
    assert len(halves) == 2, [c["label"] for c in serve]
    lists = [_gpus(c) for c in halves]
    assert all(lists) and not set(lists[0]) & set(lists[1]), lists
    assert all(max(ids) < gpu_count for ids in lists)
    assert {len(ids) for ids in lists} == {gpu_count // 2}
    ports: list[set[int]] = []
    for c, ids in zip(halves, lists):
        tp = int(_flag(c["argv"], "--tensor-parallel-size") or 1)
        dp_local = int(_flag(c["argv"], "--data-parallel-size-local") or _flag(c["argv"], "--data-parallel-size") or 1)
        assert tp * dp_local == len(ids), (c["label"], tp, dp_local, ids)  # upstream W35: DEP claimed the whole node
        dp = int(_flag(c["argv"], "--data-parallel-size") or 1)
        base = int(c["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"])
        mine = {int(_flag(c["argv"], "--port"))} | set(range(base, base + dp))
        if _flag(c["argv"], "--data-parallel-rpc-port"):
            mine.add(int(_flag(c["argv"], "--data-parallel-rpc-port")))
        ports.append(mine)
    assert not ports[0] & ports[1], ports


def test_both_pools_on_one_node_each_on_its_half(llama):
    plan = compose(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    assert plan["status"] == "ok"  # the launch checks (composer.launch) found nothing
    sel = plan["selection"]
    assert (sel["prefill_nodes"], sel["decode_nodes"], sel["nodes"]) == (0, 0, 1)
    assert plan["summary"].startswith("1 × H200 node · P/D co-located: prefill ½ × TP + decode ½ × TP")
    assert_shares_node_safely(plan, 8)
    by_pool = {c["pool"]: c for c in plan["commands"] if c["pool"]}
    assert by_pool["prefill"]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert by_pool["decode"]["env"]["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    note = next(n for n in plan["notices"] if n["code"] == "pd-colocated")
    assert "PREFILL_NODE_1 and DECODE_NODE_1 are both that node's address" in note["message"]
    assert [c["scope"] for c in plan["capacity"]] == ["prefill", "decode"]
    assert {c["gpus"] for c in plan["capacity"]} == {4}
    assert all("half of the H200 node" in c["where"] for c in plan["capacity"])


def test_two_dep_pools_on_one_node_bind_different_ports(minimax):
    plan = compose(minimax, "hardware=b200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0"
                            "&prefill_mode=dep&decode_mode=dep")
    assert plan["status"] == "ok", [n["message"] for n in plan["notices"] if n["level"] == "error"]
    assert_shares_node_safely(plan, 8)
    rpc = [_flag(c["argv"], "--data-parallel-rpc-port") for c in plan["commands"] if c["pool"]]
    assert rpc == ["13345", "13346"]
    # The decode pool's side channel moves past the prefill pool's 4 DP ranks (5557-5560).
    assert [c["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] for c in plan["commands"] if c["pool"]] == ["5557", "5561"]


@pytest.mark.parametrize("rid", [rid for rid, _ in our_plans()])
def test_every_co_located_plan_of_the_space_shares_its_node_safely(rid):
    ctx = dict(our_plans())[rid]
    seen = 0
    for q in shape_queries(ctx):
        plan = compose(ctx, q, every_form=False)
        sel = plan["selection"]
        if sel.get("prefill_nodes") == 0 and sel.get("decode_nodes") == 0 and plan["commands"]:
            assert_shares_node_safely(plan, ctx.hw(sel["hardware"]).gpu_count)
            seen += 1
    if rid == LLAMA:
        assert seen, "no co-located plan in Llama's space"


def test_the_half_option_sets_both_pools_and_is_refused_with_its_reason(llama, k3):
    page = compose_page(llama, "hardware=h200&strategy=pd_cluster")
    half = page["options"]["prefill_nodes"][0]
    assert (half["id"], half["label"], half["disabled"]) == ("0", "½", False)
    assert "prefill_nodes=0" in half["query"] and "decode_nodes=0" in half["query"]
    assert "decode nodes → ½" in half["effects"]
    # Kimi K3 (1.68 TB) never fits half a node: no ½ option (the seed's 1-16 stay as they were); a link
    # that asks for it gets the fewest nodes that work and the reason.
    page = compose_page(k3, "hardware=b300&strategy=pd_cluster")
    assert [o["id"] for o in page["options"]["decode_nodes"]][0] == "1"
    got = compose(k3, "hardware=b300&strategy=pd_cluster&decode_nodes=0")
    raised = [n for n in got["notices"] if n["code"] == "nodes-raised" and str(n["old"]) == "0"]
    assert raised and raised[0]["level"] == "warning" and "raised from ½ (half a node)" in raised[0]["message"]


@pytest.fixture(scope="module")
def qwen():
    return _ctx(ROOT / "recipes", "Qwen/Qwen3-235B-A22B-Instruct-2507")


def test_a_half_that_cannot_hold_the_pool_is_raised_with_why(qwen):
    # Qwen3 235B in BF16 (470 GB of weights) does not fit half an H100 node (4 × 80 GB).
    plan = compose(qwen, "hardware=h100&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    assert plan["selection"]["prefill_nodes"] >= 1 and plan["selection"]["decode_nodes"] >= 1
    msgs = [n["message"] for n in plan["notices"] if n["code"] == "nodes-raised"]
    assert len(msgs) == 2 and all("raised from ½ (half a node)" in m and "The weights do not fit on half a node "
                                  "(4 × H100)" in m for m in msgs), msgs
    assert not any("CUDA_VISIBLE_DEVICES" in c["env"] for c in plan["commands"])
    # Where half a node cannot hold the weights, no ½ option; where it holds them but not one sequence's KV
    # cache (H200: 564 GB), the option is refused with that half's own reason, not the whole-node counts'.
    assert compose_page(qwen, "hardware=h100&strategy=pd_cluster")["options"]["prefill_nodes"][0]["id"] == "1"
    opt = compose_page(qwen, "hardware=h200&strategy=pd_cluster")["options"]["prefill_nodes"][0]
    assert opt["id"] == "0" and opt["disabled"]
    assert opt["reason"].startswith("On half a node (4 × H200) the KV cache holds"), opt["reason"]


def test_one_pool_on_half_a_node_says_the_other_half_is_idle(llama):
    plan = compose(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=1")
    assert plan["selection"]["nodes"] == 2 and plan["summary"].startswith("2 × H200 nodes · P/D: prefill ½ × TP")
    note = next(n for n in plan["notices"] if n["code"] == "pd-half-node")
    assert "the other half stays idle" in note["message"]
    assert [c["env"].get("CUDA_VISIBLE_DEVICES") for c in plan["commands"] if c["pool"]] == ["0,1,2,3", None]


def test_a_pool_size_outside_half_to_the_maximum_is_ignored(llama):
    plan = compose(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=17")
    assert any(n["code"] == "invalid-nodes" and "0 (half a node)" in n["message"] for n in plan["notices"])
    plan = compose(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=-1")
    assert plan["selection"]["prefill_nodes"] == 1 and any(n["code"] == "query-ignored" for n in plan["notices"])


def test_the_recipe_legacy_nodes_0_opens_co_located(tmp_path):
    def edit(data):
        so = data.setdefault("strategy_overrides", {}).setdefault("pd_cluster", {})
        so["prefill"] = {**(so.get("prefill") or {}), "nodes": 0}
        so["decode"] = {**(so.get("decode") or {}), "nodes": 0}

    rid = "Qwen/Qwen3-235B-A22B-Instruct-2507"
    ctx = _ctx(recipes_copy(tmp_path, f"models/{rid}.yaml", edit), rid)
    plan = compose(ctx, "hardware=b200&strategy=pd_cluster&variant=fp8")
    assert (plan["selection"]["prefill_nodes"], plan["selection"]["decode_nodes"]) == (0, 0), plan["notices"]
    # Where the half cannot hold the pool (H100), the default is the fewest whole nodes, said as info.
    plan = compose(ctx, "hardware=h100&strategy=pd_cluster")
    assert plan["selection"]["prefill_nodes"] >= 1
    assert any(n["code"] == "nodes-raised" and n["level"] == "info" for n in plan["notices"])


def test_forms_ask_for_half_a_node(llama):
    q = "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0"
    k8s = compose(llama, q + "&install=k8s")["output"]
    text = "\n".join(a["text"] for a in k8s["artifacts"])
    assert re.findall(r"nvidia\.com/gpu: (\d+)", text) and set(re.findall(r"nvidia\.com/gpu: (\d+)", text)) == {"4"}
    assert "the pod sees the 4 it requests as 0–3" in text
    slurm = compose(llama, q + "&install=slurm")["output"]
    for a in slurm["artifacts"]:
        if a["file_name"] in ("prefill.sbatch", "decode.sbatch"):
            assert "#SBATCH --gpus-per-node=4" in a["text"] and "#SBATCH --exclusive" not in a["text"]
    pip = compose(llama, q)["output"]
    assert {a["file_name"] for a in pip["artifacts"]} >= {"prefill-gpus-0-3.sh", "decode-gpus-4-7.sh"}


@pytest.mark.parametrize("install", ["pip", "docker"])
def test_pasting_a_co_located_plan_brings_it_back(llama, install):
    from composer import importer
    from tests.importer_roundtrip import command_text

    plan = compose(llama, f"hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0&install={install}",
                   every_form=False)
    r = importer.import_commands(llama, importer.read_text(command_text(plan)))
    assert r.plan is not None and r.differences == 0 and not r.unpasted and not r.unmatched
    assert (r.plan["selection"]["prefill_nodes"], r.plan["selection"]["decode_nodes"]) == (0, 0)


def test_two_pools_that_ask_for_one_http_port_on_one_node_get_two(tmp_path):
    # A recipe whose roles both say --port 8001 (adversarial finding: the notice said "its own ports").
    def edit(data):
        so = data.setdefault("strategy_overrides", {}).setdefault("pd_cluster", {})
        so["decode"] = {**(so.get("decode") or {}), "vllm_args": ["--port", "8001"]}

    ctx = _ctx(recipes_copy(tmp_path, f"models/{LLAMA}.yaml", edit), LLAMA)
    plan = compose(ctx, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    assert_shares_node_safely(plan, 8)
    ports = [_flag(c["argv"], "--port") for c in plan["commands"] if c["pool"]]
    assert ports == ["8001", "8002"], ports
    router = next(c for c in plan["commands"] if c["role"] == "router")
    assert "http://$DECODE_NODE_1:8002" in router["argv"]
    # Whole nodes: each pool has its host, the recipe's port stays.
    plan = compose(ctx, "hardware=h200&strategy=pd_cluster")
    assert [_flag(c["argv"], "--port") for c in plan["commands"] if c["pool"]] == ["8001", "8001"]


def test_mooncake_kv_offload_keeps_the_pools_on_their_own_nodes(minimax):
    # MooncakeStoreConnector names its lookup socket after the host and the DP rank (vllm 0.33
    # mooncake/store/worker.py:2467-2480): two pools on one host would take over each other's.
    q = "hardware=b200&strategy=pd_cluster&kv_offload=kv_store_distributed_mooncake"
    plan = compose(minimax, q + "&prefill_nodes=0&decode_nodes=0")
    assert plan["selection"]["kv_offload"] == "kv_store_distributed_mooncake"
    assert plan["selection"]["prefill_nodes"] >= 1 and plan["selection"]["decode_nodes"] >= 1
    assert any(n["code"] == "nodes-raised" and "lookup socket" in n["message"] for n in plan["notices"])
    opt = compose_page(minimax, q)["options"]["prefill_nodes"][0]
    assert opt["id"] == "0" and opt["disabled"] and "lookup socket" in opt["reason"]


def test_the_half_option_is_refused_when_the_other_pool_cannot_take_the_other_half(qwen):
    # Qwen3 235B FP8 on B200: a TP pool fits half a node, a DEP pool needs 16 GPUs. ½ on the prefill pool
    # would leave prefill on half a node and decode on a whole one: two nodes with half of one idle.
    page = compose_page(qwen, "hardware=b200&variant=fp8&strategy=pd_cluster&prefill_mode=tp&decode_mode=dep")
    half = page["options"]["prefill_nodes"][0]
    assert half["id"] == "0" and half["disabled"]
    assert half["reason"].startswith("The decode pool cannot run on the other half: DEP needs at least 16 GPUs")


def test_leaving_co_location_sizes_the_other_pool_afresh(llama):
    page = compose_page(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    one = next(o for o in page["options"]["prefill_nodes"] if o["id"] == "1")
    assert "decode_nodes" not in one["query"]
    got = compose(llama, one["query"])
    assert (got["selection"]["prefill_nodes"], got["selection"]["decode_nodes"]) == (1, 1)


def test_a_half_pool_slurm_job_asks_for_cpus_and_memory(llama):
    out = compose(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0&install=slurm")["output"]
    for a in out["artifacts"]:
        if a["file_name"] in ("prefill.sbatch", "decode.sbatch"):
            assert re.search(r"^#SBATCH --cpus-per-gpu=\d+$", a["text"], re.M)
            assert re.search(r"^#SBATCH --mem-per-gpu=\d+G$", a["text"], re.M)


def test_the_shared_nodes_address_is_asked_once(llama):
    plan = compose(llama, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    ph = {p["name"]: p for p in plan["placeholders"]}
    assert ph["DECODE_NODE_1"]["same_as"] == "PREFILL_NODE_1"
    assert ph["DECODE_NODE_1"]["example"] == ph["PREFILL_NODE_1"]["example"]
    whole = compose(llama, "hardware=h200&strategy=pd_cluster")
    assert all(p["same_as"] == "" for p in whole["placeholders"])


def test_one_node_docker_says_nothing_of_cross_node_rdma(llama):
    q = "hardware=h200&strategy=pd_cluster&install=docker"
    assert not any(n["code"] == "docker-rdma" for n in compose(llama, q + "&prefill_nodes=0&decode_nodes=0")["notices"])
    assert any(n["code"] == "docker-rdma" for n in compose(llama, q)["notices"])


def test_a_half_refused_by_the_floor_says_so_before_the_whole_counts(k3):
    got = compose(k3, "hardware=b300&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    msg = next(n["message"] for n in got["notices"] if n["code"] == "nodes-raised" and n["subject"] == "prefill_nodes")
    assert "half a B300 node has 4" in msg, msg


def test_a_recipes_own_gpu_list_on_a_whole_node_pool_is_no_half(tmp_path):
    # Review finding: the half-node notice was read from the commands' CUDA_VISIBLE_DEVICES, so a recipe that
    # sets one on a whole-node pool got "runs on half a node".
    def edit(data):
        so = data.setdefault("strategy_overrides", {}).setdefault("pd_cluster", {})
        so["prefill"] = {**(so.get("prefill") or {}), "env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}}

    ctx = _ctx(recipes_copy(tmp_path, f"models/{LLAMA}.yaml", edit), LLAMA)
    plan = compose(ctx, "hardware=h200&strategy=pd_cluster")
    assert not any(n["code"] in ("pd-half-node", "pd-colocated") for n in plan["notices"])
    plan = compose(ctx, "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0")
    note = next(n["message"] for n in plan["notices"] if n["code"] == "pd-colocated")
    assert "prefill on GPUs 0,1,2,3, decode on GPUs 4,5,6,7" in note
