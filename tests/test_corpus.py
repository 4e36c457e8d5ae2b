"""The public recipes corpus (../shared/upstream-recipes, read in place, never
copied): every recipe × offered hardware × offered strategy × variant composes
with default features, and every plan passes our own checks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from composer import run_forms
from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from tests import shellwords
from tests.plan_space import sample

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "upstream-recipes"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")


def flag_ids(argv: list[str]) -> list[str]:
    return [t[2:].removeprefix("no-").replace("_", "-").split("=")[0] for t in argv[3:] if t.startswith("--")]


def check_plan(plan: dict) -> None:
    for cmd in plan["commands"] + plan["blocked_commands"]:
        if cmd["role"] == "router":
            continue
        assert shellwords.split(cmd["command"]) == cmd["argv"]
        dup = [k for k, c in Counter(flag_ids(cmd["argv"])).items() if c > 1]
        assert not dup, dup
    if plan["status"] == "ok":
        # A plan the recipe marks verified stays ok where the memory model disagrees, and says so
        # (issue 19: kv-capacity-disagrees; found on corpus Qwen3-VL-235B, multi-node DEP on 2 × H100).
        disagrees = any(n["code"] == "kv-capacity-disagrees" for n in plan["notices"])
        assert all(c["fits"] for c in plan["capacity"]) or disagrees
    else:
        assert any(n["level"] == "error" for n in plan["notices"])


def _recipes():
    return list(recipe_paths(CORPUS)) if CORPUS.exists() else []


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CORPUS)


@pytest.mark.parametrize("rid", sample(_recipes(), "offered-choices", share=4))
def test_every_offered_choice_composes(rid, catalog):
    ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
    count = 0
    for variant in ctx.recipe.variants:
        for hw in ctx.listed_hardware:
            if ctx.hardware_block_reason(hw, variant):
                continue
            for sid in ctx.strategies:
                # the plan only (the page's options of each are the golden file's and test_offered's)
                plan = compose(ctx, {"hardware": hw, "strategy": sid, "variant": variant}, every_form=False)
                check_plan(plan)
                count += 1
    default = compose_page(ctx, "")
    check_plan(default)
    assert count > 0 or not ctx.strategies


def test_every_corpus_recipe_default_page_is_a_working_plan(catalog):
    # Found by adversarial testing: omni (TTS, video, image) recipes opened on an
    # error page, and a 1320 GB model landed on a node that holds it only at 100 %.
    broken = {}
    for rid in _recipes():
        plan = compose_page(make_context(rid, load_recipe(CORPUS, rid), catalog), "")
        if plan["status"] != "ok":
            broken[rid] = [n for n in plan["notices"] if n["level"] == "error"]
    # The only errors a landing page may have are vLLM 0.33.0 refusing an option
    # the recipe itself sets (Ring-1T-FP8's use_inductor): said, with the key.
    ours = {rid: [n["message"] for n in errs if not (n["code"] == "vllm-rejects" and n["key"])]
            for rid, errs in broken.items()}
    assert not {rid: m for rid, m in ours.items() if m}
    assert len(broken) <= 3, sorted(broken)


def test_omni_recipe_serves_its_task(catalog):
    ctx = make_context("nvidia/Cosmos3-Super", load_recipe(CORPUS, "nvidia/Cosmos3-Super"), catalog)
    plan = compose_page(ctx, "task=i2v&install=pip")
    argv = plan["commands"][0]["argv"]
    assert argv[:3] == ["vllm", "serve", "nvidia/Cosmos3-Super"] and argv[-1] == "--omni"
    assert "--tensor-parallel-size" not in argv  # the recipe's own args carry its parallelism
    assert plan["selection"]["task"] == "i2v" and "/v1/videos/sync" in plan["client"]["curl"]
    assert [o["id"] for o in plan["options"]["task"]] == ["t2v", "i2v"]


def test_mooncake_on_a_corpus_recipe_brings_master_config_and_install(catalog):
    ctx = make_context("Qwen/Qwen3-32B", load_recipe(CORPUS, "Qwen/Qwen3-32B"), catalog)
    plan = compose_page(ctx, "kv_offload=kv_store_distributed_mooncake")
    assert plan["selection"]["kv_offload"] == "kv_store_distributed_mooncake"
    labels = [c["label"] for c in plan["companions"]]
    assert labels == ["Mooncake master", "Mooncake config"]
    assert 'cat > "$MOONCAKE_CONFIG_PATH" <<EOF' in plan["companions"][1]["command"]
    assert any("mooncake-transfer-engine" in x for x in plan["install"]["extras"])
    assert plan["install"]["min_vllm_version"] == "0.21.0"  # the store's minimum beats the recipe's
    assert f"vllm=={run_forms.VLLM_RELEASE}" in plan["install"]["pip"]  # and the release the commands are checked against meets it
    pd = compose_page(ctx, "strategy=pd_cluster&kv_offload=kv_store_distributed_mooncake")
    for c in pd["commands"]:
        if c["role"] in ("prefill", "decode"):
            cfg = c["argv"][c["argv"].index("--kv-transfer-config") + 1]
            assert "MultiConnector" in cfg and "NixlConnector" in cfg  # P/D keeps its KV transfer


def test_default_hardware_follows_the_public_sites_rule(catalog):
    # Issue 12.11 (semantics §2.2): without meta.default_hardware the public site
    # lands on H200 unless the precision needs Blackwell (then B200, then GB200).
    landed = Counter()
    for rid in _recipes():
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        if ctx.recipe.meta.default_hardware or ctx.is_omni:
            continue
        variant = "default" if "default" in ctx.recipe.variants else next(iter(ctx.recipe.variants))
        hw, problem = ctx.default_hardware(variant)
        assert problem is None
        assert ctx.hardware_block_reason(hw, variant) is None
        _, gens = ctx.precision_constraint(variant)
        h200_ok = ctx.hardware_block_reason("h200", variant) is None and ctx.can_hold("h200", variant)
        if "blackwell" in gens:
            assert ctx.hw(hw).gen == "blackwell", (rid, hw)
            if ctx.hardware_block_reason("b200", variant) is None and ctx.can_hold("b200", variant):
                assert hw == "b200", (rid, hw)
        elif h200_ok:
            assert hw == "h200", (rid, hw)
        landed[hw] += 1
        # The landing page is a plan that starts (never the public site's bump to
        # a strategy the recipe does not offer).
        plan = compose(ctx, "", every_form=False)
        assert plan["status"] == "ok" or all(n["code"] == "vllm-rejects" and n["key"] for n in plan["notices"]
                                             if n["level"] == "error"), rid
    assert landed.most_common(1)[0][0] == "h200", landed


def test_default_hardware_skips_gpus_that_cannot_hold_the_weights(catalog):
    # MiMo-V2.5-Pro (1224 GB, single-node strategies and P/D only) would land on
    # one H200 node (1128 GB) under the public site's rule and fail to start.
    rid = "XiaomiMiMo/MiMo-V2.5-Pro"
    ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
    hw, _ = ctx.default_hardware("default")
    assert not ctx.can_hold("h200", "default")
    assert hw != "h200" and ctx.fits_one_node(hw, "default")


def test_omni_recipes_install_the_vllm_their_image_runs():
    """pip and Docker install one vLLM for a vLLM-Omni recipe: the release
    vLLM-Omni is built on, also when the recipe's own dependency step
    installs vLLM-Omni (adversarial finding: pip pinned 0.33.0 beside the
    v0.30.0 Omni image)."""
    import re

    if not CORPUS.exists():
        pytest.skip("shared corpus not present")
    catalog = load_catalog(CORPUS)
    seen = 0
    for rid in recipe_paths(CORPUS):
        try:
            ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        except Exception:
            continue
        if not ctx.is_omni:
            continue
        plan = compose(ctx, "install=docker", every_form=False)
        image, pip = plan["install"].get("image") or "", plan["install"].get("pip") or ""
        tag = re.search(r"vllm-omni(?:-rocm)?:v([\d.]+)$", image)
        pinned = re.search(r"\bvllm==([\w.]+)", pip)
        if tag and pinned and not plan["install"]["nightly"]:
            seen += 1
            assert pinned.group(1) == tag.group(1), (rid, image, pip)
    assert seen >= 3


def test_every_variant_has_a_name_of_its_own(catalog):
    """A fresh user found five identical "BF16" buttons on Qwen3-TTS, whose
    variants are five checkpoints: where unlabelled variants share a
    precision, each leads with its checkpoint's name (then its description's
    head, then its id), and a label or a lone precision stays as it is."""
    seen = 0
    for rid in _recipes():
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        labels = {v: ctx.variant_label(v) for v in ctx.recipe.variants}
        assert len(set(labels.values())) == len(labels), (rid, labels)
        for v, label in labels.items():
            variant = ctx.variant(v)
            alone = sum(ctx.variant(o).precision == variant.precision for o in labels) == 1
            if variant.label or alone:
                assert label == (variant.label or (variant.precision.upper() if variant.precision else v)), (rid, v)
            else:
                seen += 1
    assert seen > 10
    tts = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
    plan = compose_page(make_context(tts, load_recipe(CORPUS, tts), catalog), "variant=base-1.7b")
    assert plan["summary"].endswith("Qwen3-TTS-12Hz-1.7B-Base · BF16")
