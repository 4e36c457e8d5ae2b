"""Our own recipes beyond K3, the published JSON Schema, and composer rules that
every recipe relies on (feature ownership by value, dense models without EP)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

import build
from composer.api import compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(RECIPES)


def ctx_for(rid, catalog):
    return make_context(rid, load_recipe(RECIPES, rid), catalog)


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def test_site_is_not_k3_only():
    ids = set(recipe_paths(RECIPES))
    assert {"moonshotai/Kimi-K3", "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-235B-A22B-Instruct-2507"} <= ids
    kinds = {load_recipe(RECIPES, r).model.architecture for r in ids}
    assert {"dense", "moe"} <= kinds


def test_dense_model_offers_no_expert_parallel(catalog):
    ctx = ctx_for("meta-llama/Llama-3.3-70B-Instruct", catalog)
    assert not any(s.endswith(("tep", "dep")) for s in ctx.strategies)
    plan = compose_page(ctx, "")
    assert plan["status"] == "ok"
    argv = plan["commands"][0]["argv"]
    assert "--enable-expert-parallel" not in argv
    assert flag(argv, "--tensor-parallel-size") == "2"  # variant tp map: default 2


def test_variant_drives_checkpoint_and_capacity(catalog):
    ctx = ctx_for("meta-llama/Llama-3.3-70B-Instruct", catalog)
    bf16 = compose_page(ctx, "hardware=h100")
    fp8 = compose_page(ctx, "hardware=h100&variant=fp8")
    assert bf16["commands"][0]["argv"][2] == "meta-llama/Llama-3.3-70B-Instruct"
    assert fp8["commands"][0]["argv"][2] == "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"
    assert bf16["capacity"][0]["weights_gb"] == 169.4 and fp8["capacity"][0]["weights_gb"] == 87.2
    assert flag(bf16["commands"][0]["argv"], "--tensor-parallel-size") == "4"
    assert flag(fp8["commands"][0]["argv"], "--tensor-parallel-size") == "2"


def test_feature_off_keeps_a_different_value_of_the_same_flag(catalog):
    # Failing input found while writing the Qwen recipe: an opt-in long-context
    # feature sets --max-model-len 1010000; being off must not delete the base 262144.
    ctx = ctx_for("Qwen/Qwen3-235B-A22B-Instruct-2507", catalog)
    off = compose_page(ctx, "")
    assert flag(off["commands"][0]["argv"], "--max-model-len") == "262144"
    assert not [n for n in off["notices"] if n["code"] == "feature-owned-flag"]
    on = compose_page(ctx, "features=tool_calling,long_context")
    assert flag((on["commands"] or on["blocked_commands"])[0]["argv"], "--max-model-len") == "1010000"


def test_bf16_moe_needs_more_than_one_h100_node_only_when_it_does_not_fit(catalog):
    ctx = ctx_for("Qwen/Qwen3-235B-A22B-Instruct-2507", catalog)
    plan = compose_page(ctx, "hardware=h100&strategy=multi_node_dep&nodes=2")
    # DEP floor 16 GPUs; but on 2 nodes each DP rank (TP 1: all 4 KV heads, and
    # attention + embeddings replicated per DP rank, issue 19) cannot hold one
    # 262144-token sequence, so more nodes, with the reason.
    n = plan["selection"]["nodes"]
    assert n > 2
    (raised,) = [x for x in plan["notices"] if x["code"] == "nodes-raised"]
    assert "262,144" in raised["reason"] and raised["old"] == "2" and raised["new"] == str(n)
    argv = plan["commands"][1]["argv"]
    assert flag(argv, "--data-parallel-start-rank") == "8"
    assert any("replicated on every DP rank" in a for a in plan["capacity"][0]["assumptions"])


def _schema():
    return build.recipe_schema()


@pytest.mark.parametrize("path", sorted((RECIPES / "models").glob("*/*.yaml")), ids=lambda p: p.stem)
def test_own_recipes_validate_against_published_schema(path):
    jsonschema.validate(yaml.safe_load(path.read_text()), _schema())


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_every_corpus_recipe_validates_against_the_schema():
    schema = _schema()
    validator = jsonschema.Draft202012Validator(schema)
    bad = {}
    for path in sorted((CORPUS / "models").glob("*/*.yaml")):
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        if errors:
            bad[path.name] = errors[0].message
    assert not bad


def test_schema_and_build_validation_agree_on_a_bad_recipe():
    data = yaml.safe_load((RECIPES / "models/moonshotai/Kimi-K3.yaml").read_text())
    data["variants"]["default"]["vram_minimum_gb"] = "a lot"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, _schema())
    from pydantic import ValidationError
    from composer.buildtime.validate import validate_recipe
    with pytest.raises(ValidationError):
        validate_recipe(data)


def test_json_api_documents(tmp_path):
    out = tmp_path / "site"
    build.build(RECIPES, out, neighbours=0, precompress=False)
    index = json.loads((out / "api/index.json").read_text())
    ids = {r["id"] for r in index["recipes"]}
    assert "moonshotai/Kimi-K3" in ids
    k3 = next(r for r in index["recipes"] if r["id"] == "moonshotai/Kimi-K3")
    assert "b300" in k3["verified_hardware"] and k3["precisions"] == ["MXFP4"]
    doc = json.loads((out / k3["json"]).read_text())
    assert doc["recipe"]["meta"]["default_hardware"] == "b300"
    assert set(doc["by_hardware"]) == {"h100", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x"}
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(RECIPES, "moonshotai/Kimi-K3"), load_catalog(RECIPES))
    for hw, plan in doc["by_hardware"].items():
        cli = compose_page(ctx, {"hardware": hw})
        assert [c["argv"] for c in plan["commands"]] == [c["argv"] for c in cli["commands"]]
        if plan["status"] == "ok":
            assert all(c["fits"] for c in plan["capacity"])
        else:  # K3 on H100: no TP count holds one 1M-token sequence; the fixes are one click each
            assert hw == "h100" and any(n["code"] == "kv-capacity" and n["fixes"] for n in plan["notices"])
    schema = json.loads((out / "schema/recipe.schema.json").read_text())
    assert schema["title"] == "vLLM recipe" and "meta" in schema["properties"]


@pytest.mark.parametrize("query, verified, words", [
    ("", True, "Verified on B300 · Single-node TP"),
    ("strategy=multi_node_tp", False, "verified with Single-node TP, Multi-node TP + PP; this strategy is composed"),
    ("hardware=h100", False, "Composed, not verified"),               # GPU not verified at all
    ("hardware=h200&strategy=multi_node_tep", True, "Verified on H200"),
    ("hardware=gb200&strategy=pd_cluster", True, "Prefill/Decode"),
    # issue 21: a verified run is the recipe's defaults; what the person changed is not part of it
    ("hardware=gb200&strategy=pd_cluster&features=spec_decoding,tool_calling,reasoning", False,
     "Composed, not verified: differs (Speculative decoding) from the recipe's verified run on GB200 NVL4 · Prefill/"),
    ("kv_offload=lmcache&advanced=kv_fp8", False, "differs (KV offload LMCache) from"),  # fp8 is in force already
    ("features=tool_calling", False, "(no Reasoning)"),
    ("hardware=h200&strategy=multi_node_tep&nodes=3", False, "Composed, not verified: differs (3 nodes) from"),
    # a knob whose flag the run's commands already have changes nothing (a fresh user's finding)
    ("hardware=gb200&strategy=pd_cluster&advanced=gpu_mem_095", True, "Verified on GB200 NVL4 · Prefill/Decode"),
    ("install=k8s&context=128k", True, "Verified on B300 · Single-node TP"),  # how it is shown does not count
])
def test_verified_mark_only_for_verified_combinations(catalog, query, verified, words):
    plan = compose_page(ctx_for("moonshotai/Kimi-K3", catalog), query)
    assert plan["verified"] is verified
    assert words in plan["verification"]
    # the tooltip speaks of the recorded run where there is one: this plan's, or the one it differs from
    assert ("records a run" in plan["verification_detail"]) is (plan["verified"] or "verified run" in plan["verification"])
    assert ("was not part of that run" in plan["verification_detail"]) is ("verified run" in plan["verification"])


def test_a_hardware_level_run_is_of_the_recipes_default_strategy():
    """An adversarial finding: GLM-4.5 marks H200 verified and lists no
    verified_configs, so the run is its default strategy (the rule of the
    capacity check, ``_verified_exactly``); another strategy was green
    "Verified on H200" with a tooltip saying the recipe ran the choices shown,
    while the estimate refused it."""
    public = load_catalog(CORPUS)
    glm = make_context("zai-org/GLM-4.5", load_recipe(CORPUS, "zai-org/GLM-4.5"), public)
    plan = compose_page(glm, "hardware=h200&strategy=single_node_dep")
    assert plan["verified"] is False and plan["verification"].startswith("Composed, not verified: differs (strategy ")
    assert compose_page(glm, "hardware=h200")["verified"] is True
    # the strategy the page opens on that GPU is the run: a single-node strategy that cannot load the weights
    # there is not (the second adversarial pass: DeepSeek-R1's single-node TP on GB200 was the green one)
    r1 = make_context("deepseek-ai/DeepSeek-R1", load_recipe(CORPUS, "deepseek-ai/DeepSeek-R1"), public)
    opened = compose_page(r1, "hardware=gb200")
    assert opened["status"] == "ok" and opened["verified"] is True
    single = compose_page(r1, "hardware=gb200&strategy=single_node_tp")
    assert single["status"] == "error" and single["verified"] is False and "1 node)" in single["verification"]


def test_a_knob_that_restates_vllms_default_is_no_difference(catalog):
    """The second adversarial pass: max-num-batched-tokens 8192 is vLLM's own
    default on an H100 (memory.scheduler_defaults, arg_utils.py
    get_batch_defaults), so on MiniMax-M2's verified H100 run, whose commands
    leave it unset, ticking it changes nothing; on a B300 (≥ 160 GiB: 16384)
    it is a difference."""
    public = load_catalog(CORPUS)
    m2 = make_context("MiniMaxAI/MiniMax-M2", load_recipe(CORPUS, "MiniMaxAI/MiniMax-M2"), public)
    assert compose_page(m2, "hardware=h100&advanced=max_batched_8k")["verified"] is True
    assert compose_page(m2, "hardware=h100&advanced=max_num_seqs_256")["verified"] is False  # 1024 there
    k3 = compose_page(ctx_for("moonshotai/Kimi-K3", catalog), "advanced=max_batched_8k")
    assert k3["verified"] is False and "differs (max-num-batched-tokens 8192)" in k3["verification"]


def test_a_method_is_named_with_the_feature(catalog):
    """A feature switched on with a method other than its default names the
    method (its label), as the page shows it."""
    llama = ctx_for("meta-llama/Llama-3.3-70B-Instruct", catalog)
    on = compose_page(llama, "hardware=h200&features=spec_decoding&fmode=spec_decoding:eagle3")
    assert on["verified"] is False and "differs (Speculative decoding (EAGLE-3), no Tool calling) from" in on["verification"]


def test_capacity_doubt_of_a_run_holds_only_where_the_run_is_short_too(tmp_path):
    """The kv-capacity error becomes the warning kv-capacity-disagrees on a
    recorded run only when the estimate finds the run itself short too: then
    the run shows the estimate wrong. A change that makes a run that fits
    short (here a recipe knob lowering --gpu-memory-utilization on K3's
    verified B300 single-node TP) is the error it is (an adversarial finding:
    a change the run never had was let through on the run's word)."""
    shutil.copytree(RECIPES, tmp_path / "r")
    path = tmp_path / "r" / "models" / "moonshotai" / "Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    data["advanced_options"] = [{"id": "low_util", "label": "low util", "args": ["--gpu-memory-utilization", "0.67"]}]
    path.write_text(yaml.safe_dump(data))
    k3 = make_context("moonshotai/Kimi-K3", load_recipe(tmp_path / "r", "moonshotai/Kimi-K3"), load_catalog(tmp_path / "r"))
    assert compose_page(k3, "")["verified"] is True
    low = compose_page(k3, "advanced=low_util&strategy=single_node_tp&nodes=1")
    codes = [n["code"] for n in low["notices"]]
    assert "kv-capacity" in codes and "kv-capacity-disagrees" not in codes and low["status"] == "error"


def test_switching_variant_or_hardware_keeps_what_still_works(catalog):
    # Found by a fresh-user trial: FP8 threw away the chosen H100; H200 threw away TEP.
    qwen = ctx_for("Qwen/Qwen3-235B-A22B-Instruct-2507", catalog)
    plan = compose_page(qwen, "hardware=h100")
    fp8 = next(o for o in plan["options"]["variant"] if o["id"] == "fp8")
    assert compose_page(qwen, fp8["query"])["selection"]["hardware"] == "h100"
    k3 = ctx_for("moonshotai/Kimi-K3", catalog)
    plan = compose_page(k3, "hardware=b200&strategy=multi_node_tep&nodes=4")
    h200 = next(o for o in plan["options"]["hardware"] if o["id"] == "h200")
    after = compose_page(k3, h200["query"])["selection"]
    assert (after["hardware"], after["strategy"]) == ("h200", "multi_node_tep")
    pd = compose_page(k3, "hardware=b300&strategy=pd_cluster&prefill_nodes=6")  # TEP: TP 48 divides 96 heads
    dep = next(o for o in pd["options"]["prefill_mode"] if o["id"] == "dep")
    assert compose_page(k3, dep["query"])["selection"]["prefill_nodes"] == 6
    assert pd["options"]["nodes"] == []  # P/D sizes its pools instead


def test_verified_strategies_are_marked_and_named(catalog):
    plan = compose_page(ctx_for("moonshotai/Kimi-K3", catalog), "hardware=h200")
    marked = [o["id"] for o in plan["options"]["strategy"] if o.get("verified")]
    assert marked == ["multi_node_tep"]
    assert "Multi-node TEP" in plan["verification"]
