"""The adversarial pass of 2026-12-05 (issue 23) on strategy, KV-store and
taxonomy files, ``model.hf_config`` and the build's writes: each fault it
found, kept with its input. A file from a stranger may never write outside
``--out``, export a platform name, drop what it meant without a word, blow up
memory or end in a traceback; every error names the file and the key."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import build
from composer.api import compose, make_context
from composer.buildtime.checks import validate
from composer.buildtime.loader import RecipeLoadError, load_catalog

ROOT = Path(__file__).resolve().parent.parent
QWEN = "Qwen/Qwen3-235B-A22B-Instruct-2507"
STORE = "kv_store/kv_store_distributed_mooncake.yaml"


def _recipes(tmp_path: Path, rel: str | None = None, edit=None) -> Path:
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    if rel is not None:
        path = recipes / rel
        data = yaml.safe_load(path.read_text()) if path.exists() else {}
        edit(data)
        path.write_text(yaml.safe_dump(data))
    return recipes


def _problems(recipes: Path) -> list:
    try:
        _, _, problems = validate(recipes, keep_going=True)
    except RecipeLoadError as exc:
        problems = exc.errors
    return problems


def test_a_strategy_name_that_is_a_path_is_refused_and_nothing_is_written_outside_out(tmp_path):
    recipes = _recipes(tmp_path)
    (recipes / "strategies" / "zz.yaml").write_text(yaml.safe_dump(
        {"name": "../../../escaped", "kind": "tp", "deploy_type": "single_node"}))
    errs = _problems(recipes)
    assert any(e.file == "strategies/zz.yaml" and e.key == "name" and "names files of the site" in e.message
               for e in errs), errs
    with pytest.raises(RecipeLoadError):
        build.build(recipes, tmp_path / "a" / "b" / "out", neighbours=0, precompress=False)
    assert not list(tmp_path.rglob("escaped*"))
    with pytest.raises(build.BuildError, match="not a path inside the site"):
        build._site_path(tmp_path / "site", "strategies/../../x.json")


def test_a_hardware_id_that_is_a_path_is_refused(tmp_path):
    recipes = _recipes(tmp_path, "taxonomy.yaml",
                       lambda d: d["hardware_profiles"].__setitem__("../x", d["hardware_profiles"]["h100"]))
    errs = _problems(recipes)
    assert any(e.file == "taxonomy.yaml" and e.key.startswith("hardware_profiles") and "letters, digits" in e.message
               for e in errs), errs


def test_a_taxonomy_kv_option_cannot_export_a_platform_name_or_inject_an_option(tmp_path):
    def edit(d):
        d["kv_offload"]["simple"].setdefault("env", {})["PATH"] = "/tmp/evil"
        d["kv_offload"]["simple"]["args"] = list(d["kv_offload"]["simple"].get("args") or []) + ["--port", "80a"]
    errs = _problems(_recipes(tmp_path, "taxonomy.yaml", edit))
    assert any(e.file == "taxonomy.yaml" and e.key == "kv_offload.simple.env.PATH" and "must not set it" in e.message
               for e in errs), errs
    assert any(e.file == "taxonomy.yaml" and e.key == "kv_offload.simple.args" and "TCP port" in e.message for e in errs)


@pytest.mark.parametrize("edit, key, words, level", [
    (lambda d: d["vllm"].__setitem__("vllm_argz", d["vllm"].pop("vllm_args")), "vllm.vllm_argz",
     "did you mean vllm_args?", "warning"),
    (lambda d: d["router"].__setitem__("polcy", "x"), "router.polcy", "did you mean policy?", "warning"),
    (lambda d: d["router"].__setitem__("policy", ["--privileged"]), "router.policy", "one policy name", "error"),
    (lambda d: d["vllm"].__setitem__("vllm_args", "--privileged"), "vllm.vllm_args", "must be a list", "error"),
    (lambda d: d["router"].__setitem__("install", "uv pip install 'vllm-router"), "router.install", "", "error"),
    (lambda d: d["router"].__setitem__("install", "   "), "router.install", "is empty", "error"),
    (lambda d: d["mooncake_master"].__setitem__("command", "mooncake_master --x 'a"), "mooncake_master.command", "",
     "error"),
])
def test_a_kv_store_files_blocks_are_checked_where_they_are(tmp_path, edit, key, words, level):
    errs = [e for e in _problems(_recipes(tmp_path, STORE, edit)) if e.file == STORE and e.key == key]
    assert errs and errs[0].level == level and words in errs[0].message, errs


def test_a_huge_layer_count_costs_nothing_and_a_negative_parameter_count_sizes_nothing(tmp_path):
    from composer.memory import replicated_params
    from composer.model_facts import facts_for

    big = type("M", (), {"model_id": QWEN, "hf_config": {"num_hidden_layers": 2**31 - 1}})()
    assert replicated_params(facts_for(QWEN, big)) is None  # a layout past MAX_LAYERS is unknown, never built
    data = yaml.safe_load((ROOT / "recipes" / "models" / f"{QWEN}.yaml").read_text())
    data["model"]["num_hidden_layers"] = 2**31 - 1
    for v in data["variants"].values():
        v.pop("parameter_count_b", None)
    data["model"]["parameter_count"] = "-0.001B"
    ctx = make_context(QWEN, data, load_catalog(ROOT / "recipes"))
    plan = compose(ctx, "hardware=h200&strategy=multi_node_dep&nodes=2", every_form=False)
    assert all(c["weights_gib"] is None or c["weights_gib"] >= 0 for c in plan["capacity"]), plan["capacity"]


def test_hf_config_values_of_the_wrong_shape_are_recipe_errors_not_tracebacks(tmp_path):
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    for bad in ({"rope_scaling": "linear", "max_position_embeddings": 4096}, {"model_type": ["a"]},
                {"rope_scaling": {"type": "dynamic", "factor": -3}}):
        recipes = _recipes(tmp_path / str(len(str(bad))), f"models/{rid}.yaml",
                           lambda d, bad=bad: d["model"].__setitem__("hf_config", bad))
        res = subprocess.run([sys.executable, "-m", "composer", "check", str(recipes)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode != 0 and "Traceback" not in res.stderr and f"models/{rid}.yaml: model.hf_config:" in res.stdout
        assert "Value error," not in res.stdout  # pydantic's prefix is not ours to print


def test_recipe_ids_that_differ_only_in_case_build_once(tmp_path):
    recipes = _recipes(tmp_path)
    src = recipes / "models" / "meta-llama" / "Llama-3.3-70B-Instruct.yaml"
    (recipes / "models" / "Meta-Llama").mkdir()
    shutil.copy(src, recipes / "models" / "Meta-Llama" / "Llama-3.3-70B-Instruct.yaml")
    summary = build.build(recipes, tmp_path / "site", keep_going=True, neighbours=0, precompress=False)
    (err,) = [e for e in summary["errors"] if "letter case" in e.message]
    assert err.file == "models/meta-llama/Llama-3.3-70B-Instruct.yaml" and "'Meta-Llama/Llama-3.3-70B-Instruct'" in err.message
    assert summary["recipes"] == 3
