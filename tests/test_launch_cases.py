"""Issue 18's cases, each with its exact input. Before the validator was wired
into composition every one of these plans was shown as ready; now, where the
composer chose the value it chooses one that passes and says so, and where
the recipe forces it the plan is an error with the rule, the values, the
recipe key path and the fix, and the option that leads there is disabled."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from composer.api import compose, compose_page, make_context
from composer.launch import BUILTIN_CHAT_TEMPLATES, SOURCE_TEMPLATES, VERSION, Target, check_command, check_plan
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


def heads_ok(c, variant: str, tp_size: int) -> bool:
    """What vLLM requires of TP (config/model.py:1557-1564), with the safe
    form for an unknown head count (a power of two)."""
    heads = model_facts(c, variant).num_attention_heads
    return heads % tp_size == 0 if heads else tp_size & (tp_size - 1) == 0


@corpus
@pytest.mark.parametrize("rid,query,was,subject", [
    # K3 has 96 heads (its config.json): GB200's 3-tray TP 12 divides them, 5 trays' TP 20 does not.
    ("moonshotai/Kimi-K3", "hardware=gb200&strategy=multi_node_tp&nodes=5", 20, "nodes"),
    ("moonshotai/Kimi-K3", "hardware=h100&strategy=multi_node_tp&nodes=5", 40, "nodes"),
    ("meta-llama/Llama-3.3-70B-Instruct", "hardware=h100&strategy=multi_node_tp&nodes=3", 24, "nodes"),
    ("meta-llama/Llama-3.3-70B-Instruct", "hardware=h100&strategy=multi_node_tp&nodes=6", 48, "nodes"),
    ("Qwen/Qwen3.6-35B-A3B", "hardware=dgx_spark_gb10&strategy=multi_node_tp&nodes=3", 3, "nodes"),
])
def test_tp_that_does_not_divide_the_heads(rid, query, was, subject):
    # Issue 18 bullet 1: the composer chose (or was asked for) a node count whose TP vLLM refuses. Now it
    # takes the next count whose TP divides the heads (unknown heads: a power of two) and says so.
    c = ctx(CORPUS, rid)
    plan, found = flagged(CORPUS, rid, query)
    assert plan["status"] == "ok" and "tp-divides-heads" not in found
    sizes = {int(cmd["argv"][cmd["argv"].index("--tensor-parallel-size") + 1]) for cmd in plan["commands"]
             if "--tensor-parallel-size" in cmd["argv"]}
    assert sizes and was not in sizes and all(heads_ok(c, plan["selection"]["variant"], t) for t in sizes)
    [said] = [n for n in plan["notices"] if n.get("subject") == subject and n["code"] in ("nodes-raised", "nodes-tp-divides-heads", "nodes-set")]
    assert f"TP {was} " in said["message"] and int(said["new"]) > int(said["old"])
    if not model_facts(c, plan["selection"]["variant"]).num_attention_heads:
        assert "head count is unknown" in said["message"] and "power of two" in said["message"]


@corpus
def test_pd_dep_pools_with_one_rank_per_node():
    # Issue 18 bullet 2: the head now runs internal LB (no --data-parallel-start-rank); its followers are
    # --headless with their start rank, and the head's API servers reach every DP rank.
    from composer.launch import data_parallel, parse_serve

    plan, found = flagged(CORPUS, "moonshotai/Kimi-K3", "hardware=b200&strategy=pd_cluster&prefill_mode=dep&decode_mode=dep")
    assert plan["status"] == "ok" and not found
    cmds = [c for c in plan["commands"] if c["pool"] == "prefill"]  # TP 8 per rank: one DP rank per node
    assert len(cmds) == 2
    assert "--data-parallel-start-rank" not in cmds[0]["argv"] and "--headless" not in cmds[0]["argv"]
    follower = cmds[1]["argv"]
    assert follower[follower.index("--data-parallel-start-rank") + 1] == "1" and "--headless" in follower
    head = data_parallel(parse_serve(cmds[0]["argv"]))
    assert head.mode == "internal" and list(head.served_ranks()) == [0, 1]
    assert plan["commands"][-1]["argv"].count("--prefill") == 1  # the router lists the head, which reaches both
    # Decode (TP 1: eight DP ranks per node) keeps hybrid LB: every node serves its own ranks and is listed.
    decode = [c for c in plan["commands"] if c["pool"] == "decode"]
    assert all("--data-parallel-hybrid-lb" in c["argv"] for c in decode)
    assert plan["commands"][-1]["argv"].count("--decode") == len(decode)


@corpus
def test_batched_tokens_below_max_num_seqs():
    # Issue 18 bullet 3: the recipe forces it (the decode role's 32; spec decoding's AMD block sets 128
    # sequences): an error plan with the rule, the values, the recipe key path and the fix …
    query = "hardware=mi355x&strategy=pd_cluster&features=tool_calling,reasoning,spec_decoding"
    plan, found = flagged(CORPUS, "moonshotai/Kimi-K3", query)
    assert plan["status"] == "error" and not plan["commands"]
    decode = [i for i, c in enumerate(plan["blocked_commands"]) if c["pool"] == "decode"]
    hits = found["batched-tokens-ge-seqs"]
    assert sorted(v.command for v in hits) == decode
    assert hits[0].message == "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (128)."
    [n] = [n for n in plan["notices"] if n["code"] == "launch-batched-tokens-ge-seqs"]
    assert n["level"] == "error" and n["rule"] == "batched-tokens-ge-seqs"
    assert n["values"] == {"--max-num-batched-tokens": "32", "--max-num-seqs": "128"}
    assert n["key"] == "strategy_overrides.pd_cluster.decode.vllm_args" and n["source"] == "vllm/config/scheduler.py:331-336"
    assert "--max-num-batched-tokens" in n["fix"] and n["message"].startswith("Both decode nodes: ")
    assert not [x for x in plan["notices"] if x["code"] == "scheduler-budget"]  # one rule, one place
    # … and the option that leads there is disabled with that reason.
    page = compose_page(ctx(CORPUS, "moonshotai/Kimi-K3"), "hardware=mi355x&strategy=pd_cluster")
    [spec] = [o for o in page["options"]["features"] if o["id"] == "spec_decoding"]
    assert spec["disabled"] and spec["reason"] == n["message"]



def test_a_rule_every_node_of_a_pool_breaks_names_the_pool_once():
    """Kimi K3 on H100, P/D with 4 decode nodes: Advanced max-num-seqs 256
    breaks vLLM's budget rule on every decode node. The option's reason comes
    from a lean plan that builds only the head and the first follower; it must
    say all four, not list the two it built ("Decode node 1/4, Decode node
    2/4"), and the full plan says the same."""
    c = ctx(ROOT / "recipes", "moonshotai/Kimi-K3")
    page = compose_page(c, "hardware=h100&strategy=pd_cluster")
    n_decode = page["selection"]["decode_nodes"]
    assert n_decode > 2  # more nodes than the lean plan builds (6 since DP+EP counts the replicated weights)
    [opt] = [o for o in page["options"]["advanced"] if o["id"] == "max_num_seqs_256"]
    assert opt["disabled"] and opt["reason"].startswith(f"All {n_decode} decode nodes: vLLM 0.33.0 refuses to start")
    plan = compose(c, "hardware=h100&strategy=pd_cluster&advanced=max_num_seqs_256", every_form=False)
    [n] = [n for n in plan["notices"] if n["code"] == "launch-batched-tokens-ge-seqs"]
    # the option's reason is the plan's notice, then (controls._advanced_pairs) the knob that fixes it
    assert opt["reason"] == n["message"] + " Tick Advanced max-num-batched-tokens 8192 first: with both, it works."

@corpus
def test_dcp_larger_than_tp():
    # Issue 18 bullet 4: the recipe's multi_node_tp_pp override forces DCP 8 on TP 4 (GB200 trays).
    plan, found = flagged(CORPUS, "moonshotai/Kimi-K2-Instruct", "hardware=gb200&strategy=multi_node_tp_pp&nodes=2")
    assert plan["status"] == "error"
    v = found["dcp-divides-tp"][0]
    assert v.level == "error" and v.message == "tp_size=4 must be divisible by dcp_size=8."
    [n] = [n for n in plan["notices"] if n["code"] == "launch-dcp-divides-tp"]
    assert n["subject"] == "--decode-context-parallel-size" and n["key"] == "strategy_overrides.multi_node_tp_pp.vllm_args"
    assert n["values"] == {"--tensor-parallel-size": "4", "--decode-context-parallel-size": "8"}
    page = compose_page(ctx(CORPUS, "moonshotai/Kimi-K2-Instruct"), "hardware=gb200")
    [opt] = [o for o in page["options"]["strategy"] if o["id"] == "multi_node_tp_pp"]
    # The strategy is disabled with the plan's first error as the reason: here
    # vLLM 0.33.0 also refuses the override's --disable-log-requests, added first.
    first = next(n for n in plan["notices"] if n["level"] == "error")
    assert first["code"] == "vllm-rejects" and first["subject"] == "--disable-log-requests"
    assert opt["disabled"] and first["message"] in opt["reason"]


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
@pytest.mark.parametrize("rid", ["deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "Google/gemma-4-31B-it"])
@pytest.mark.parametrize("form", ["pip", "config", "slurm"])
def test_chat_template_from_vllms_source_tree_is_fetched_by_a_host_install(rid, form):
    # Issue 18 bullet 6: examples/… is in vLLM's source tree and its image (/vllm-workspace), not in
    # the wheel; CI found every gemma-4 and DeepSeek default page an error plan. A host install now
    # fetches the file to the same relative path (composer.run_forms.source_fetches), so the argv runs.
    plan, found = flagged(CORPUS, rid, f"install={form}")
    assert plan["status"] == "ok" and "chat-template-exists" not in found
    [path] = {c["argv"][i + 1] for c in plan["commands"] for i, a in enumerate(c["argv"]) if a == "--chat-template"}
    assert path in SOURCE_TEMPLATES
    [fetch] = [line for line in plan["install"]["pip"].splitlines() if "curl" in line]
    assert shlex.split(fetch)[-3:] == ["-o", path, f"https://raw.githubusercontent.com/vllm-project/vllm/v{VERSION}/{path}"]
    docker, in_docker = flagged(CORPUS, rid, "install=docker")
    assert "chat-template-exists" not in in_docker and docker["status"] == "ok"


def test_source_templates_are_vllms_examples():
    # The list is read off vLLM 0.33.0's sdist (examples/**/*.jinja); the wheel's own templates are another set.
    assert "examples/tool_chat_template_deepseekr1.jinja" in SOURCE_TEMPLATES
    assert all(p.startswith("examples/") and p.endswith(".jinja") for p in SOURCE_TEMPLATES)
    assert not {p.rsplit("/", 1)[1] for p in SOURCE_TEMPLATES} & BUILTIN_CHAT_TEMPLATES - {"template_chatml.jinja"}


def _recipe_with_template(tmp_path: Path, path: str) -> Path:
    """A copy of the corpus with gemma-4-26B's --chat-template replaced by ``path``."""
    shutil.copytree(CORPUS, tmp_path / "c")
    f = tmp_path / "c" / "models" / "Google" / "gemma-4-26B-A4B-it.yaml"
    f.write_text(f.read_text().replace("examples/tool_chat_template_gemma4.jinja", path))
    return tmp_path / "c"


@pytest.mark.parametrize("query,status,nodes", [
    # K3's real layout (24 MLA layers of 93, the rest KDA with a fixed state): 4 × H100 (TP 32) hold the weights
    # but not one 1M-token sequence, 5 nodes' TP 40 does not divide the 96 heads: 6 nodes (TP 48).
    ("hardware=h100&strategy=multi_node_tp&nodes=4", "ok", 6),
    ("hardware=h100&strategy=multi_node_tp_pp&nodes=3", "ok", 3),  # PP splits the layers: 3 stages hold it
    ("hardware=h200&nodes=2&strategy=multi_node_tp", "ok", 2),  # the public page's default H200 × 2 now serves
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
    # The decode pool's --max-num-batched-tokens 32 under Advanced's --max-num-seqs 256: vLLM refuses it.
    plan, _, _ = plan_and_selection(c, "hardware=h100&strategy=pd_cluster&advanced=max_num_seqs_256", every_form=False)
    typed = check_plan(c, plan)
    assert typed and typed == check_plan(c, to_json(plan))


def test_recipe_args_that_break_a_rule_are_lint_errors(tmp_path):
    # Issue 18 "Recipe args that break a rule are lint errors": a planted fault in a copy of our Kimi-K3 is
    # reported by the check the build and `python -m composer check --strict` run, with file and key path.
    from composer.buildtime.checks import check_recipe
    from tests.conftest import k3_recipes_copy

    def edit(data):
        data.setdefault("strategy_overrides", {}).setdefault("multi_node_tp", {})["extra_args"] = [
            "--max-num-batched-tokens", "64", "--max-num-seqs", "256"]

    root = k3_recipes_copy(tmp_path, edit)
    catalog = load_catalog(root)
    path = root / "models" / "moonshotai" / "Kimi-K3.yaml"
    recipe, problems = check_recipe(root, "moonshotai/Kimi-K3", path, catalog, strict=True)
    hits = [p for p in problems if "max_num_batched_tokens (64) must be greater than or equal to max_num_seqs" in p.message]
    assert recipe is None and hits and hits[0].level == "error"
    assert hits[0].file == "models/moonshotai/Kimi-K3.yaml"
    assert hits[0].key == "strategy_overrides.multi_node_tp.extra_args"
    assert hits[0].message.startswith("?") and "refuses to start" in hits[0].message  # the plan it was seen in
    _, clean = check_recipe(ROOT / "recipes", "moonshotai/Kimi-K3", ROOT / "recipes" / "models" / "moonshotai" / "Kimi-K3.yaml",
                            load_catalog(ROOT / "recipes"), strict=True)
    assert not [p for p in clean if "refuses to start" in p.message]


@corpus
@pytest.mark.parametrize("rid, query", [
    ("moonshotai/Kimi-K2-Instruct", "hardware=gb200&strategy=multi_node_tp_pp&nodes=4"),
    ("moonshotai/Kimi-K3", "hardware=b200&strategy=pd_cluster&prefill_mode=dep&decode_mode=dep"),
    ("moonshotai/Kimi-K3", "hardware=mi355x&strategy=pd_cluster&features=tool_calling,reasoning,spec_decoding"),
])
def test_node_count_options_disabled_exactly_when_their_plan_is_an_error(rid, query):
    # plan_error composes only the head and first follower of each group (lite) and
    # the command rules: its verdict on a node count must be the full plan's status.
    c = ctx(CORPUS, rid)
    page = compose_page(c, query)
    here = {n["code"] for n in compose(c, query, every_form=False)["notices"] if n["level"] == "error"}
    checked = 0
    for control in ("nodes", "prefill_nodes", "decode_nodes"):
        for o in page["options"].get(control, []):
            plan = compose(c, o["query"], every_form=False)
            new = {n["code"] for n in plan["notices"] if n["level"] == "error"} - here
            status = plan["status"] if new or plan["status"] != "error" else "the current error"
            if o["disabled"]:
                # a node count the resolver would raise is disabled although its (raised) plan may be ok
                # (its plan says so with a nodes-raised/-lowered notice; issue 21 took "Becomes N:" off disabled options)
                moved = any(n["code"] in ("nodes-raised", "nodes-lowered") for n in plan["notices"])
                kept = not moved and "cannot run this deployment" not in o["reason"]
                assert status == "error" or not kept, (control, o["id"], o["reason"])
            else:
                assert status != "error", (control, o["id"], o["query"])  # or only the error the page has
            checked += 1
    assert checked


@corpus
def test_a_recipe_forced_error_does_not_disable_every_option(tmp_path):
    # A recipe whose base args name an examples/ file vLLM's source tree lacks: every plan is that
    # error, on every install form; the options keep it (they do not lead there), so they stay enabled.
    c = make_context("Google/gemma-4-26B-A4B-it", load_recipe(_recipe_with_template(tmp_path, "examples/no_such.jinja"),
                     "Google/gemma-4-26B-A4B-it"), load_catalog(CORPUS))
    for form in ("pip", "docker"):
        plan = compose(c, f"install={form}", every_form=False)
        [n] = [n for n in plan["notices"] if n["code"] == "launch-chat-template-exists"]
        assert plan["status"] == "error" and "source tree has no examples/no_such.jinja" in n["message"]
    page = compose_page(c, "")
    for control in ("hardware", "strategy"):
        enabled = [o["id"] for o in page["options"][control] if not o["disabled"]]
        assert len(enabled) > 1, control


def test_every_kv_capacity_fix_composes_to_a_plan_that_starts():
    # Found by an adversarial pass (2026-12-02) once Macaron had model facts (64 heads): the "9 nodes"
    # fix of multi-node TP on H100 named a count whose TP 72 the resolver lowers again to 8, an error that
    # offered "9 nodes" once more, and it hid the TP + PP fix that works.
    c = ctx(CORPUS, "mindlab-research/Macaron-V1-Coding-Venti")
    plan = compose(c, "hardware=h100&strategy=multi_node_tp", every_form=False)
    (kv,) = [n for n in plan["notices"] if n["code"] == "kv-capacity"]
    assert kv["fixes"] and not any(f["label"] == "9 nodes" for f in kv["fixes"])
    for fix in kv["fixes"]:
        assert compose(c, fix["query"], every_form=False)["status"] == "ok", fix


def test_a_hardware_mark_does_not_verify_every_strategy():
    # Same pass: corpus GLM-4.5 marks H200 verified and lists no verified_configs; single-node DEP holds
    # 0.32x of one sequence there. Only the recipe's default (here: single-node TP) may be the
    # "estimate and recipe disagree" warning; DEP stays an error vLLM would refuse.
    c = ctx(CORPUS, "zai-org/GLM-4.5")
    dep = compose(c, "strategy=single_node_dep", every_form=False)
    assert dep["status"] == "error" and [n for n in dep["notices"] if n["code"] == "kv-capacity"]
