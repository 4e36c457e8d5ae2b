"""Issue 23.5: bad input is named where it is — file, key path and words."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from composer.buildtime.checks import validate
from composer.buildtime.loader import MAX_DEPTH, RecipeLoadError
from tests.conftest import k3_recipes_copy, recipe_errors as _errors, recipes_copy

ROOT = Path(__file__).resolve().parent.parent
K3_FILE = "models/moonshotai/Kimi-K3.yaml"




def test_a_misspelt_key_is_named_first_with_the_closest_known_key(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d.__setitem__("compatible_strategy", d.pop("compatible_strategies")))
    _, _, problems = validate(recipes, keep_going=True)
    found = [e for e in problems if e.file == K3_FILE]
    first = found[0]
    assert first.key == "compatible_strategy" and "did you mean compatible_strategies?" in first.message
    assert "without compatible_strategies the recipe declares none" in first.message
    # what the missing key breaks comes after, as an error
    assert any(e.key == "default_strategy" and e.level == "error" for e in found[1:])


def test_a_bad_deploy_type_names_the_strategy_file(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "strategies" / "single_node_tp.yaml"
    data = yaml.safe_load(path.read_text())
    data["deploy_type"] = "bogus"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    (err,) = info.value.errors
    assert (err.file, err.key) == ("strategies/single_node_tp.yaml", "deploy_type") and "'single_node'" in err.message


def test_a_kv_store_env_name_names_the_kv_store_file(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "kv_store" / "kv_store_distributed_mooncake.yaml"
    data = yaml.safe_load(path.read_text())
    data.setdefault("vllm", {}).setdefault("env", {})["PATH"] = "/x"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert any(e.file == "kv_store/kv_store_distributed_mooncake.yaml" and e.key == "vllm.env.PATH"
               and "must not set it" in e.message for e in info.value.errors), info.value.errors


def test_an_alias_bomb_names_the_key_that_holds_it(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    body = "".join(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10))
    bomb = "anchors:\n  a0: &a0 [\"--x\"]\n" + body + "meta: {title: bomb}\nmodel: {model_id: a/b, base_args: *a9}\n"
    assert len(bomb) < 800
    (recipes / "models" / "moonshotai" / "Bomb.yaml").write_text(bomb)
    errs = [e for e in _errors(recipes) if e.file.endswith("Bomb.yaml")]
    # a5 is the first anchor past the limit (10^5 values); model.base_args holds the *a9 reference
    assert {e.key for e in errs} == {"anchors.a5", "model.base_args"} and all("aliases" in e.message for e in errs)


def test_deep_nesting_names_the_key_path(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    (recipes / "models" / "moonshotai" / "Deep.yaml").write_text(
        "meta: {title: x}\nmodel: {model_id: a/b, base_args: " + "[" * 200 + "]" * 200 + "}\n")
    (err,) = [e for e in _errors(recipes) if e.file.endswith("Deep.yaml")]
    assert err.key.startswith("model.base_args[0][0]") and f"more than {MAX_DEPTH} levels" in err.message


def test_an_oversized_file_names_the_file_and_the_limit(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    (recipes / "models" / "moonshotai" / "Big.yaml").write_text("meta: {title: x}\n# " + "x" * (1 << 20) + "\n")
    (err,) = [e for e in _errors(recipes) if e.file.endswith("Big.yaml")]
    assert err.key == "" and str(err).startswith("models/moonshotai/Big.yaml: (top level):") and "at most 1,048,576" in err.message


@pytest.mark.parametrize("field, value", [("vram_minimum_gb", 1e308), ("vram_minimum_gb", float("inf")),
                                          ("parameter_count_b", 1e308), ("bytes_per_param", 1e308)])
def test_extreme_numbers_are_errors_at_their_key_path(tmp_path, field, value):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["variants"]["default"].update({field: value}))
    errs = _errors(recipes)
    assert any(e.file == K3_FILE and e.key == f"variants.default.{field}" and ("less than or equal" in e.message
               or "finite" in e.message) for e in errs), errs


def test_a_recipe_key_with_control_characters_is_printed_escaped():
    """Adversarial finding: a key "evil\\x1b]0;pwned\\x07\\x1b[2J" went raw to the terminal (retitled and cleared it)."""
    from composer.buildtime.loader import RecipeError

    text = str(RecipeError("models/a/b.yaml", "meta.evil\x1b]0;pwned\x07\x1b[2J", "unknown key", "warning"))
    assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;pwned\\x07" in text
    assert text.isprintable()


def _edited_catalog(tmp_path: Path, rel: str, edit) -> Path:
    return recipes_copy(tmp_path, rel, edit)


@pytest.mark.parametrize("rel, edit, key, near", [
    ("strategies/multi_node_tp.yaml", lambda d: d.__setitem__("parallel_flg", "--tensor-parallel-size"),
     "parallel_flg", "parallel_flag"),
    ("kv_store/kv_store_distributed_mooncake.yaml", lambda d: d.__setitem__("envv", {"A": "1"}), "envv", "env"),
    ("taxonomy.yaml", lambda d: d["hardware_profiles"]["h100"].__setitem__("vram_gbb", 80),
     "hardware_profiles.h100.vram_gbb", "vram_gb"),
])
def test_a_misspelt_key_of_a_strategy_kv_store_or_taxonomy_file_names_that_file(tmp_path, rel, edit, key, near):
    """Adversarial finding (issue 23): unknown keys of the catalogue's files were
    never reported, even with --strict. A warning naming the file, the key and
    the closest known one; an error for this project's own files (strict)."""
    recipes = _edited_catalog(tmp_path, rel, edit)
    _, _, problems = validate(recipes, keep_going=True)
    (found,) = [e for e in problems if e.file == rel and e.key == key]
    assert found.level == "warning" and f"did you mean {near}?" in found.message
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes, strict=True)
    assert any(e.file == rel and e.key == key for e in info.value.errors)


@pytest.mark.parametrize("rel, edit, key", [
    ("taxonomy.yaml", lambda d: d["hardware_profiles"]["h100"].__setitem__("gpu_count", 10**38),
     "hardware_profiles.h100.gpu_count"),
    (K3_FILE, lambda d: d["model"].__setitem__("num_attention_heads", 10**38), "model.num_attention_heads"),
    (K3_FILE, lambda d: d["variants"]["default"].__setitem__("tp", {"h100": 10**38}), "variants.default.tp.h100"),
])
def test_extreme_whole_numbers_are_errors_at_their_key_path(tmp_path, rel, edit, key):
    """Adversarial finding (issue 23): integer fields took any size (a taxonomy's
    gpu_count of 10^38 reached the page as a 39-digit GPU count)."""
    recipes = _edited_catalog(tmp_path, rel, edit)
    errs = _errors(recipes)
    assert any(e.file == rel and e.key == key and "less than or equal" in e.message for e in errs), errs
