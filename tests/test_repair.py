"""A stranger's recipe value with exactly one reading is read so, with a
warning; one without stays an error (``composer.buildtime.repair``). The two
corpus recipes that were left out of the site for such values (a fresh user's
finding, 2026-12-02) are kept here as tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.api import compose, make_context
from composer.buildtime.checks import check_recipe, validate
from composer.buildtime.loader import RecipeLoadError, load_catalog, recipe_paths
from composer.buildtime.repair import pulled_image, repair, split_word
from tests.conftest import k3_recipes_copy, recipe_errors

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
K3_FILE = "models/moonshotai/Kimi-K3.yaml"


@pytest.mark.parametrize("token, words", [
    ("--max-model-len auto", ("--max-model-len", "auto")),
    ("--gpu-memory-utilization 0.97", ("--gpu-memory-utilization", "0.97")),
    ("-tp  8", ("-tp", "8")),
    ("--enforce-eager", None),              # no blank
    ("auto value", None),                   # not a flag first
    ("--x 'a b'", None),                    # quoting: a guess
    ("--x $HOME", None),                    # an expansion: a guess
    ("--x=1 2", None),                      # an inline value with a blank
    ("--x\n--privileged", None),           # a line break: not one option and its value
    ("--x\t1", ("--x", "1")),
    (8, None),
])
def test_split_word_reads_only_an_option_and_its_plain_value(token, words):
    assert split_word(token) == words


@pytest.mark.parametrize("value, image", [
    ("docker pull vllm/vllm-openai-rocm:nightly", "vllm/vllm-openai-rocm:nightly"),
    ("  docker  pull repo@sha256:" + "a" * 64, "repo@sha256:" + "a" * 64),
    ("docker pull --privileged", None),
    ("docker pull a b", None),
    ("docker run vllm/x:1", None),
    ("vllm/x:1", None),
])
def test_pulled_image_reads_only_docker_pull_of_an_image(value, image):
    assert pulled_image(value) == image


def test_repair_never_changes_its_input_and_strict_repairs_nothing():
    data = {"model": {"base_args": ["--trust-remote-code", "--max-model-len auto"], "docker_image": "docker pull x/y:1"}}
    fixed, notes = repair(data)
    assert data["model"]["base_args"] == ["--trust-remote-code", "--max-model-len auto"]
    assert fixed["model"]["base_args"] == ["--trust-remote-code", "--max-model-len", "auto"]
    assert fixed["model"]["docker_image"] == "x/y:1"
    assert [k for k, _ in notes] == ["model.base_args[1]", "model.docker_image"]
    assert repair(data, strict=True) == (data, [])
    same, none = repair({"model": {"base_args": ["--a", "1"]}})
    assert none == [] and same == {"model": {"base_args": ["--a", "1"]}}


def test_brand_maps_and_hardware_blocks_are_repaired_where_they_are():
    data = {"model": {"docker_image": {"amd": "docker pull rocm/x:1", "nvidia": {"cu130": "docker pull n/x:2"}}},
            "variants": {"v": {"hardware_overrides": {"mi300x": {"docker_image": "docker pull r/y:3",
                                                                  "extra_args": ["--attention-backend ROCM_AITER_FA"]}}}}}
    fixed, notes = repair(data)
    assert fixed["model"]["docker_image"] == {"amd": "rocm/x:1", "nvidia": {"cu130": "n/x:2"}}
    block = fixed["variants"]["v"]["hardware_overrides"]["mi300x"]
    assert block == {"docker_image": "r/y:3", "extra_args": ["--attention-backend", "ROCM_AITER_FA"]}
    assert {k for k, _ in notes} == {"model.docker_image.amd", "model.docker_image.nvidia.cu130",
                                     "variants.v.hardware_overrides.mi300x.docker_image",
                                     "variants.v.hardware_overrides.mi300x.extra_args[0]"}


def test_a_repaired_recipe_is_a_warning_with_its_key_path_and_an_error_when_strict(tmp_path):
    def plant(d):
        d["model"]["base_args"].append("--max-num-seqs 64")
        d["model"]["docker_image"] = "docker pull vllm/vllm-openai:v0.33.0"

    recipes = k3_recipes_copy(tmp_path, plant)
    assert recipe_errors(recipes) == []
    catalog, good, problems = validate(recipes)
    mine = {(p.key, p.level) for p in problems if p.file == K3_FILE}
    assert ("model.docker_image", "warning") in mine and any(k.startswith("model.base_args[") for k, _ in mine)
    plan = compose(make_context("moonshotai/Kimi-K3", good["moonshotai/Kimi-K3"], catalog), "hardware=h200&install=docker")
    argv = plan["commands"][0]["argv"]
    assert argv[argv.index("--max-num-seqs") + 1] == "64" and "--max-num-seqs 64" not in argv
    assert plan["install"]["image"] == "vllm/vllm-openai:v0.33.0"
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes, strict=True)
    keys = {e.key for e in info.value.errors if e.file == K3_FILE}
    assert "model.docker_image" in keys and any(k.startswith("model.base_args") for k in keys)


def test_a_value_without_one_reading_stays_an_error(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["model"].update(docker_image="docker pull x; touch canary"))
    assert any(e.key == "model.docker_image" for e in recipe_errors(recipes))


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
@pytest.mark.parametrize("rid, key, flag_or_image", [
    ("MiniMaxAI/MiniMax-M3", "variants.mxfp8.hardware_overrides.mi300x.docker_image", "vllm/vllm-openai-rocm:nightly"),
    ("XiaomiMiMo/MiMo-V2.5-Pro", "model.base_args", "--max-model-len"),
])
def test_the_corpus_recipes_once_left_out_are_built(rid, key, flag_or_image):
    catalog = load_catalog(CORPUS)
    recipe, problems = check_recipe(CORPUS, rid, recipe_paths(CORPUS)[rid], catalog)
    assert recipe is not None, [str(p) for p in problems]
    assert any(p.key.startswith(key) and p.level == "warning" for p in problems)
    ctx = make_context(rid, recipe, catalog)
    if flag_or_image.startswith("--"):
        argv = compose(ctx, "", every_form=False)["commands"][0]["argv"]
        assert argv[argv.index(flag_or_image) + 1] == "auto"
    else:
        hw = key.split(".")[3]
        plan = compose(ctx, f"hardware={hw}&variant=mxfp8&install=docker")
        assert plan["install"]["image"] == flag_or_image, plan["install"]


@pytest.mark.parametrize("tokens, repaired", [
    (["--trust-remote-code", "--max-model-len auto"], ["--trust-remote-code", "--max-model-len", "auto"]),
    # argparse reads a word with a blank as the value of an option that takes one: that reading, no repair
    (["--served-model-name", "--max-model-len auto"], None),
    # the words would not start: a switch and a stray word
    (["--enforce-eager evil/model"], None),
    (["--max-model-len 128k", "--enforce-eager"], ["--max-model-len", "128k", "--enforce-eager"]),
])
def test_a_split_needs_one_reading_and_words_vllm_accepts(tokens, repaired):
    # Adversarial findings: both refused cases were built as pages whose command vLLM rejects.
    data = {"model": {"base_args": tokens}}
    fixed, notes = repair(data)
    assert fixed["model"]["base_args"] == (repaired or tokens)
    assert [k for k, _ in notes] == ([f"model.base_args[{tokens.index(next(t for t in tokens if ' ' in t))}]"] if repaired else [])
