"""Commands vLLM accepts (issue 9): the CLI table, the recipe lint, flag
identity from the table, and every composed plan checked against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer import vllm_cli
from composer.api import compose, make_context
from composer.argv import parse_tokens
from composer.buildtime.checks import check_recipe, load_catalog_checked, validate
from composer.buildtime.cli import main as cli_main
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.buildtime.validate import lint_recipe, validate_recipe
from tests.conftest import k3_recipes_copy

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
K3 = "moonshotai/Kimi-K3"


# ------------------------------------------------------------- the table
def test_table_names_its_source_and_knows_the_basics():
    t = vllm_cli.TABLE
    assert t["source"]["package"] == "vllm" and t["source"]["version"] == vllm_cli.VERSION
    assert t["regenerate"].startswith("python -m composer.buildtime.vllm_cli_gen")
    tp = vllm_cli.OPTIONS["tensor-parallel-size"]
    assert tp["kind"] == "int" and "-tp" in tp["spellings"]
    assert vllm_cli.OPTIONS["enable-expert-parallel"]["kind"] == "bool"
    assert vllm_cli.OPTIONS["speculative-config"]["config"] == "SpeculativeConfig"
    assert "fp8" in vllm_cli.OPTIONS["kv-cache-dtype"]["choices"]
    assert {"hermes", "kimi_k2"} <= set(t["tool_parsers"])
    assert "deepseek_r1" in t["reasoning_parsers"]
    assert {"NixlConnector", "LMCacheConnectorV1", "MooncakeStoreConnector", "MultiConnector"} <= set(t["kv_connectors"])
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT" in vllm_cli.ENV
    assert "omni" in vllm_cli.OMNI_OPTIONS


def _wheel(package: str, version: str) -> Path:
    from composer.buildtime import vllm_cli_gen

    return vllm_cli_gen.fetch(package, version)


def test_generator_on_the_pinned_wheels_reproduces_the_committed_table():
    from composer.buildtime import vllm_cli_gen

    wheel = _wheel("vllm", vllm_cli_gen.VLLM_VERSION)
    table = vllm_cli_gen.generate(wheel, vllm_cli_gen.VLLM_VERSION)
    table["omni"] = vllm_cli_gen.omni_flags(_wheel("vllm-omni", vllm_cli_gen.OMNI_VERSION), vllm_cli_gen.OMNI_VERSION)
    assert json.loads(json.dumps(table)) == vllm_cli.TABLE
    assert table["serve"]["tensor-parallel-size"]["spellings"] == ["--tensor-parallel-size", "-tp"]
    assert table["serve"]["tool-call-parser"]["kind"] == "str"
    assert "hermes" in table["tool_parsers"] and "NixlConnector" in table["kv_connectors"]


# ------------------------------------------------------------ flag identity
@pytest.mark.parametrize("tokens, key, value", [
    (["-cc.pass_config.fuse_rope_kvcache=True"], "compilation-config.pass_config.fuse_rope_kvcache", "True"),
    (["-sc", "{}"], "speculative-config", "{}"),
    (["-O3"], "optimization-level", "3"),
    (["-dpb", "ray"], "data-parallel-backend", "ray"),
    (["--max_num_seqs", "8"], "max-num-seqs", "8"),
    (["--device-memory-utilization", "0.9"], "gpu-memory-utilization", "0.9"),
])
def test_spellings_resolve_as_vllm_resolves_them(tokens, key, value):
    (unit,) = parse_tokens(tokens)
    assert (unit.key, unit.value) == (key, value)
    assert not vllm_cli.check_unit(unit.key, unit.value, unit.enabled)


def test_a_spelling_vllm_does_not_accept_is_reported_not_rewritten():
    (unit,) = parse_tokens(["-zz", "1"])
    assert unit.tokens() == ["-zz", "1"]  # not turned into --zz
    (finding,) = vllm_cli.check_unit(unit.key, unit.value)
    assert finding.level == "error" and finding.flag == "-zz"


# ------------------------------------------------ the five cases, as recipes


def _findings(recipes: Path, strict: bool = True):
    catalog = load_catalog_checked(recipes)
    path = recipes / "models" / "moonshotai" / "Kimi-K3.yaml"
    return check_recipe(recipes, K3, path, catalog, strict)


def test_short_dotted_alias_is_composed_as_vllm_reads_it(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["hardware_overrides"].setdefault("amd", {}).setdefault("extra_args", []).extend(
        ["-cc.pass_config.fuse_rope_kvcache=True", "-O3"]))
    recipe, problems = _findings(recipes)
    assert recipe is not None and problems == []
    ctx = make_context(K3, recipe, load_catalog(recipes))
    argv = compose(ctx, "hardware=mi355x", every_form=False)["commands"][0]["argv"]
    i = argv.index("--compilation-config.pass_config.fuse_rope_kvcache")
    assert argv[i + 1] == "True"
    assert argv[argv.index("--optimization-level") + 1] == "3"
    assert "--cc.pass_config.fuse_rope_kvcache" not in argv


def test_model_in_args_is_refused_with_its_key_path(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["model"]["base_args"].extend(["--model", "org/model"]))
    recipe, problems = _findings(recipes)
    assert recipe is None
    assert any(p.key == "model.base_args" and "--model" in p.message and p.level == "error" for p in problems), problems
    # Without --strict it builds, and the plan says vLLM rejects it.
    recipe, problems = _findings(recipes, strict=False)
    plan = compose(make_context(K3, recipe, load_catalog(recipes)), "")
    assert any(n["code"] == "vllm-rejects" and n["subject"] == "--model" for n in plan["notices"])


def test_truncated_json_is_refused(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["features"]["spec_decoding"].setdefault("hardware_overrides", {}).update(
        {"nvidia": {"args": ["--speculative-config", '{"model": "org/draft",']}}))
    recipe, problems = _findings(recipes)
    assert recipe is None
    assert any(p.key == "features.spec_decoding.hardware_overrides.nvidia.args" and "does not parse" in p.message
               for p in problems), problems


def test_tool_parser_without_auto_tool_choice_is_a_warning(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["features"]["tool_calling"].update(args=["--tool-call-parser", "hermes"]))
    recipe, problems = _findings(recipes, strict=False)
    assert recipe is not None
    assert any(p.key == "features.tool_calling.args" and "--enable-auto-tool-choice" in p.message and p.level == "warning"
               for p in problems), problems


def test_auto_tool_choice_without_parser_is_refused_in_the_plan():
    findings = vllm_cli.check_command([("enable-auto-tool-choice", None, True)])
    assert any(f.level == "error" and "--tool-call-parser" in f.message for f in findings)


def test_dotted_option_without_value_is_refused(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["hardware_overrides"].setdefault("blackwell", {}).setdefault("extra_args", []).extend(
        ["--attention-config.use_trtllm_ragged_deepseek_prefill", "--kv-cache-dtype", "fp8"]))
    recipe, problems = _findings(recipes)
    assert recipe is None
    assert any(p.key == "hardware_overrides.blackwell.extra_args" and "needs a value" in p.message for p in problems), problems


@pytest.mark.parametrize("args, words", [
    (["--kv-cache-dtype", "fp9"], "not one of vLLM's choices"),
    (["--max-num-seqs", "many"], "whole number"),
    (["--enable-expert-parallel", "true"], "takes no value"),
    (["--tool-call-parser", "hermess"], "did you mean hermes"),
    (["--speculative-config", '{"num_speculative_tokens": "x"}'], "must be a number"),
    (["--speculative-config", '{"modle": "a/b"}'], "no field 'modle'"),
    (["--speculative-config", '{"num_speculative_tokens": ' + "9" * 5000 + "}"], "does not parse (Exceeds the limit"),
    (["--hf-overrides", '{"n": ' + "9" * 5000 + "}"], "does not parse (Exceeds the limit"),
    (["--max-model-len", "'32768'"], "carries its own quotes"),
    (["--served-model-name", "k3 --port 9000"], "holds another flag"),
    (["--no-headless"], "cannot be negated"),
    (["--maxx-num-seqs", "4"], "did you mean --max-num-seqs"),
])
def test_lint_finds_what_vllm_refuses(args, words):
    recipe = validate_recipe({"meta": {"title": "t"}, "model": {"model_id": "a/b", "base_args": args}})
    found = lint_recipe(recipe)
    assert any(key == "model.base_args" and words in msg for key, msg, _ in found), found


def test_json_boolean_written_as_string_is_a_warning():
    recipe = validate_recipe({"meta": {"title": "t"}, "model": {"model_id": "a/b", "base_args": [
        "--compilation-config", '{"pass_config": {"fuse_rope_kvcache": "false"}}']}})
    (found,) = lint_recipe(recipe)
    assert found[2] == "warning" and "write false" in found[1]


def test_unknown_vllm_env_var_is_a_warning():
    recipe = validate_recipe({"meta": {"title": "t"}, "model": {"model_id": "a/b", "base_env": {"VLLM_ATTENTON_BACKEND": "x"}}})
    (found,) = lint_recipe(recipe)
    assert found[0] == "model.base_env.VLLM_ATTENTON_BACKEND" and found[2] == "warning"


# ------------------------------------------------------------- our recipes
def test_our_recipes_are_clean_and_check_is_one_call(capsys):
    _, recipes, problems = validate(ROOT / "recipes", strict=True)
    assert problems == [] and len(recipes) == 3
    assert cli_main(["check", str(ROOT / "recipes"), "--strict"]) == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().out


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_corpus_findings_are_warnings_and_none_come_from_our_code():
    catalog, recipes, problems = validate(CORPUS, keep_going=True)
    # Every finding is a warning: the two values that did not fit their place (issue 23: an image
    # "docker pull …", "--max-model-len auto" as one word) are read as meant (composer.buildtime.repair).
    assert problems and all(p.level == "warning" for p in problems)
    assert len(recipes) == len(recipe_paths(CORPUS)) >= 150
    # Every recipe is validated above; the flags the composer decides itself are checked on a half
    # (tests/plan_space.sample: deterministic, the named recipes always; COMPOSER_FULL_TESTS=1: all).
    from tests.plan_space import sample

    for rid in sample([r for r in recipe_paths(CORPUS) if r in recipes], "composer-flags"):
        ctx = make_context(rid, recipes[rid], catalog)
        for query in ("", "strategy=pd_cluster", "hardware=mi355x"):
            plan = compose(ctx, query, every_form=False)
            for c in plan["commands"] or plan["blocked_commands"]:
                if c["argv"][:2] != ["vllm", "serve"]:
                    continue
                for f in c["provenance"]:
                    if f["key"].startswith("composer:"):  # flags the composer itself decides
                        assert not [x for x in vllm_cli.check_unit(f["name"], f["value"], f["flag"].startswith("--no-") is False)
                                    if x.level == "error"], (rid, query, f)


def test_every_reachable_plan_of_our_recipes_passes_the_table():
    """Click through every control of every recipe of ours (breadth-first over
    the option queries, bounded): no plan carries a vLLM finding."""
    from composer.api import compose_page

    catalog = load_catalog(ROOT / "recipes")
    for rid in recipe_paths(ROOT / "recipes"):
        ctx = make_context(rid, load_recipe(ROOT / "recipes", rid), catalog)
        seen, frontier = set(), [""]
        while frontier and len(seen) < 120:
            query = frontier.pop(0)
            if query in seen:
                continue
            seen.add(query)
            view = compose_page(ctx, query)
            assert not [n for n in view["notices"] if n["code"].startswith("vllm-")], (rid, query)
            frontier += [o["query"] for items in view["options"].values() for o in items if not o["disabled"]]


def test_explain_names_the_key_path_the_lint_uses(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["hardware_overrides"].setdefault("hopper", {}).update(args=["--kv-cache-dtype", "fp9"]))
    recipe, problems = _findings(recipes, strict=False)
    assert [p.key for p in problems] == ["hardware_overrides.hopper.args"]
    plan = compose(make_context(K3, recipe, load_catalog(recipes)), "hardware=h200")
    # vLLM's parser refuses the value: the plan is an error and its notice names
    # the same key path as the lint (an error plan has no commands to Explain).
    assert plan["status"] == "error" and not plan["commands"]
    (n,) = [n for n in plan["notices"] if n["code"] == "vllm-rejects"]
    assert n["level"] == "error" and n["subject"] == "--kv-cache-dtype"
    assert n["key"] == "hardware_overrides.hopper.args" and "Hopper" in n["message"]


def test_one_walker_names_the_key_paths_provenance_uses(plan):
    """Every recipe key path in a plan's provenance is one the walker
    (``layers.declared``) yields: validation, lint and Explain agree."""
    from composer.layers import declared

    recipe = load_recipe(ROOT / "recipes", K3)
    known = {d.key for d in declared(recipe)}
    recipe_roots = ("model.", "variants.", "hardware_overrides.", "strategy_overrides.", "features.", "advanced_options[")
    seen = 0
    for q in ("", "hardware=h200", "hardware=mi355x&features=spec_decoding", "hardware=gb200&strategy=pd_cluster",
              "hardware=b200&strategy=multi_node_tp_pp&advanced=max_batched_8k"):
        p = plan(q)
        for c in p["commands"]:
            for entry in c["provenance"] + c["env_provenance"]:
                if entry["key"].startswith(recipe_roots):
                    assert entry["key"] in known, entry["key"]
                    seen += 1
    assert seen > 20


def test_misspelt_keys_are_reported_with_a_suggestion(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: (d.__setitem__("hardware_overides", d.pop("hardware_overrides")),
                                            d["meta"].__setitem__("bogus_key", 1)))
    recipe, problems = _findings(recipes, strict=False)
    assert recipe is not None
    keys = {p.key: p.message for p in problems}
    assert "did you mean hardware_overrides" in keys["hardware_overides"]
    assert "unknown key" in keys["meta.bogus_key"]
    recipe, problems = _findings(recipes, strict=True)
    assert recipe is None  # --strict: our own recipes may not carry unknown keys
