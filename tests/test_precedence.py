"""Precedence inside the strategy and hardware layers (``composer.layers.TABLE``
docstring, the one place it is written): one test per rule, against the recipes
that rely on it — the public corpus's where it documents the rule, else the
exact input of issue 18 planted in a copy of our recipes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from composer.api import compose, make_context
from composer.buildtime.loader import load_catalog, load_recipe

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
_CTX: dict = {}


def k3_corpus():
    if "k3" not in _CTX:
        _CTX["k3"] = make_context("moonshotai/Kimi-K3", load_recipe(CORPUS, "moonshotai/Kimi-K3"), load_catalog(CORPUS))
    return _CTX["k3"]


def argv_of(plan: dict, i: int = 0) -> list[str]:
    return (plan["commands"] or plan["blocked_commands"])[i]["argv"]


def value(argv: list[str], flag: str) -> str | None:
    """The last value of ``flag`` (argparse's last-wins), None when absent."""
    found = None
    for i, tok in enumerate(argv[:-1]):
        if tok == flag:
            found = argv[i + 1]
    return found


@corpus
@pytest.mark.parametrize("hw,util,tokens", [
    ("mi355x", "0.95", "4096"),  # the AMD block's tuning beats the override's 0.90 / 8192
    ("h200", "0.97", "4096"),    # the Hopper block's
    ("b200", "0.90", "8192"),    # the Blackwell baseline sets neither: the override's survive
])
def test_recipe_hardware_blocks_beat_a_strategy_overrides_plain_args(hw, util, tokens):
    # Rule 2: corpus Kimi-K3, strategy_overrides.multi_node_tp_pp ("plain strategy args … emit before
    # hardware overrides … Hopper/AMD keep their own memory-utilization and batched-token tuning by
    # last-wins dedupe").
    plan = compose(k3_corpus(), f"hardware={hw}&strategy=multi_node_tp_pp", every_form=False)
    argv = argv_of(plan)
    assert value(argv, "--gpu-memory-utilization") == util
    assert value(argv, "--max-num-batched-tokens") == tokens
    prov = {f["name"]: f for f in (plan["commands"] or plan["blocked_commands"])[0]["provenance"]}
    if hw != "b200":
        assert prov["gpu-memory-utilization"]["key"].startswith("hardware_overrides.")
        assert "strategy_overrides.multi_node_tp_pp.extra_args" in [r["key"] for r in prov["gpu-memory-utilization"]["replaced"]]
    else:
        assert prov["gpu-memory-utilization"]["key"] == "strategy_overrides.multi_node_tp_pp.extra_args"
    # Env of the override stays (the baseline's hardware env is added after it).
    assert (plan["commands"] or plan["blocked_commands"])[0]["env"]["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "1800"


def _planted(tmp_path: Path, rid: str, edit) -> tuple[Path, str]:
    """A copy of ``recipes/`` whose recipe ``rid`` went through ``edit(data)``."""
    dst = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", dst)
    path = dst / "models" / f"{rid}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))
    return dst, rid


ISSUE_VARIANT_BLOCK = {"blackwell": {"extra_args": ["--moe-backend", "flashinfer_cutlass"]}}
ISSUE_STRATEGY_BLOCK = {"blackwell": {"extra_args": ["--kv-cache-dtype", "fp8"]}}


def _issue_edit(data: dict) -> None:
    """Issue 18 bullet 5's exact input: a variant-level Blackwell block and the
    single-node TP strategy's Blackwell block."""
    data["variants"]["default"].setdefault("hardware_overrides", {}).update(ISSUE_VARIANT_BLOCK)
    data.setdefault("strategy_overrides", {}).setdefault("single_node_tp", {})["hardware_overrides"] = ISSUE_STRATEGY_BLOCK


def test_a_strategy_block_replaces_the_variants_block_of_its_key(tmp_path):
    # Rule 3 (semantics §3.2 step 5a): with variants.default.hardware_overrides.blackwell.extra_args
    # [--moe-backend, flashinfer_cutlass] and strategy_overrides.single_node_tp.hardware_overrides.blackwell
    # .extra_args [--kv-cache-dtype, fp8], ?hardware=dgx_spark_gb10&strategy=single_node_tp emits no MoE backend.
    root, rid = _planted(tmp_path, "moonshotai/Kimi-K3", _issue_edit)
    ctx = make_context(rid, load_recipe(root, rid), load_catalog(root))
    plan = compose(ctx, "hardware=dgx_spark_gb10&strategy=single_node_tp", every_form=False)
    argv = argv_of(plan)
    assert "--moe-backend" not in argv and value(argv, "--kv-cache-dtype") == "fp8"
    # Another strategy, without a Blackwell block of its own, keeps the variant's block.
    other = compose(ctx, "hardware=b200&strategy=single_node_tep", every_form=False)
    assert value(argv_of(other), "--moe-backend") == "flashinfer_cutlass"


def test_a_strategy_block_replaces_the_recipes_block_of_its_key(tmp_path):
    # Rule 3, recipe level (issue 10): our Kimi-K3's hardware_overrides.blackwell block, replaced for the
    # strategy whose block of the same key declares args.
    def edit(data):
        data.setdefault("strategy_overrides", {}).setdefault("single_node_tp", {})["hardware_overrides"] = ISSUE_STRATEGY_BLOCK

    root, rid = _planted(tmp_path, "moonshotai/Kimi-K3", edit)
    ctx = make_context(rid, load_recipe(root, rid), load_catalog(root))
    def keys(c) -> set[str]:
        plan = compose(c, "hardware=b300&strategy=single_node_tp", every_form=False)
        return {f["key"] for f in (plan["commands"] or plan["blocked_commands"])[0]["provenance"]}

    assert not any(k.startswith("hardware_overrides.blackwell") for k in keys(ctx))
    assert "strategy_overrides.single_node_tp.hardware_overrides.blackwell.extra_args" in keys(ctx)
    base = make_context(rid, load_recipe(ROOT / "recipes", rid), load_catalog(ROOT / "recipes"))
    assert any(k.startswith("hardware_overrides.blackwell") for k in keys(base))


def test_a_variant_block_for_an_exact_hardware_id_is_not_replaced(tmp_path):
    # Rule 3's exception (semantics §3.2 step 2: the exact-id variant args come with the variant, before the
    # strategy): a strategy's b200 block does not drop the variant's b200 block.
    def edit(data):
        data["variants"]["default"].setdefault("hardware_overrides", {})["b200"] = {
            "extra_args": ["--moe-backend", "flashinfer_cutlass"]}
        data.setdefault("strategy_overrides", {}).setdefault("single_node_tp", {})["hardware_overrides"] = {
            "b200": {"extra_args": ["--kv-cache-dtype", "fp8"]}}

    root, rid = _planted(tmp_path, "moonshotai/Kimi-K3", edit)
    ctx = make_context(rid, load_recipe(root, rid), load_catalog(root))
    argv = argv_of(compose(ctx, "hardware=b200&strategy=single_node_tp", every_form=False))
    assert value(argv, "--moe-backend") == "flashinfer_cutlass" and value(argv, "--kv-cache-dtype") == "fp8"


@corpus
def test_pd_role_blocks_beat_the_recipes_hardware_blocks():
    # Rule 4: corpus Kimi-K3's decode role sets --no-enable-prefix-caching and --max-num-batched-tokens 32;
    # the recipe's Blackwell block sets --enable-prefix-caching, its AMD block 4096. The role wins.
    b200 = compose(k3_corpus(), "hardware=b200&strategy=pd_cluster", every_form=False)
    decode = [c for c in b200["commands"] if c["pool"] == "decode"][0]["argv"]
    assert "--no-enable-prefix-caching" in decode and "--enable-prefix-caching" not in decode
    mi355x = compose(k3_corpus(), "hardware=mi355x&strategy=pd_cluster", every_form=False)
    decode = [c for c in mi355x["commands"] if c["pool"] == "decode"][0]["argv"]
    assert value(decode, "--max-num-batched-tokens") == "32"


@corpus
@pytest.mark.parametrize("query,pool", [
    ("hardware=gb200&strategy=multi_node_dep", None),  # strategy_overrides.multi_node_dep.hardware_overrides.gb200
    ("hardware=gb200&strategy=pd_cluster&decode_mode=dep", "decode"),  # …pd_cluster.decode.hardware_overrides.gb200
])
def test_strategy_and_role_hardware_blocks_come_last(query, pool):
    # Rule 5: the strategy-level (then the P/D role's) exact-id blocks are applied after everything else of
    # the recipe: corpus Kimi-K3's MegaMoE on GB200 ("Use MegaMoE for DEP on GB200/GB300 NVL trays").
    plan = compose(k3_corpus(), query, every_form=False)
    cmds = [c for c in (plan["commands"] or plan["blocked_commands"]) if c["pool"] == pool and c["role"] != "router"]
    assert cmds and all(value(c["argv"], "--moe-backend") == "deep_gemm_mega_moe" for c in cmds)
    b200 = compose(k3_corpus(), query.replace("gb200", "b200"), every_form=False)
    assert all("--moe-backend" not in c["argv"] for c in (b200["commands"] or b200["blocked_commands"]) if c["pool"] == pool)
