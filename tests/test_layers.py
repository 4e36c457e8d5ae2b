"""The layer table (composer.layers.TABLE): one declaration that composes a
command and, in every-key mode (``declared``), walks every list a recipe
declares — so validation, the lint and Explain cannot disagree about key paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.api import compose, make_context
from composer.argv import parse_tokens
from composer.buildtime.checks import check_recipe, load_catalog_checked
from composer.layers import TABLE, TOPOLOGY_SOURCE, Layer, declared
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from tests.golden import GOLDEN, SOURCES, context
from tests.conftest import k3_recipes_copy
from tests.plan_space import FULL

ROOT = Path(__file__).resolve().parent.parent
K3 = "moonshotai/Kimi-K3"
COMPOSER_KEYS = (TOPOLOGY_SOURCE, "composer: ")
"""Keys the composer makes itself (the computed topology, the per-node
placement): no file declares them, so the walk does not yield them."""


def _selections(source: str) -> list[tuple[str, str]]:
    """``(recipe id, query)`` of every golden selection of ``source`` (every
    default, every option of our default pages, seeded click walks)."""
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    rows = [r for r in rows if r["source"] == source]
    # CI's run: every default and every other walk step (COMPOSER_FULL_TESTS=1: every line)
    return [(r["recipe"], r["query"]) for i, r in enumerate(rows) if FULL or not r["query"] or i % 2 == 0]


def _entries(cmd: dict):
    """Every ``(layer, key, flag or env name)`` a command's Explain shows:
    the sources in force and the ones they replaced."""
    for e in cmd["provenance"]:
        yield e["layer"], e["key"], ("args", e["name"])
        for r in e["replaced"]:
            yield r["layer"], r["key"], ("args", e["name"])
    for e in cmd["env_provenance"]:
        yield e["layer"], e["key"], ("env", e["name"])
        for r in e["replaced"]:
            yield r["layer"], r["key"], ("env", e["name"])


def _names(value, kind: str) -> set[str]:
    """Flag identities of an arg list, or the names of an env mapping."""
    if kind == "env":
        return set(value)
    return {u.key for u in parse_tokens(list(value))}


@pytest.mark.skipif(not SOURCES["corpus"].exists(), reason="shared corpus not present")
@pytest.mark.parametrize("source", ["ours", "corpus"])
def test_every_key_explain_reports_is_one_the_walk_yields(source):
    """For every golden selection of our recipes and of the corpus, each key
    path in a command's provenance (in force or replaced) is one the
    every-key walk yields, under the same seed layer, and the walk's list at
    that key holds the flag or variable Explain attributes to it."""
    walks: dict = {}
    seen = 0
    for rid, query in _selections(source):
        ctx = context(source, rid)
        if rid not in walks:
            walks[rid] = {d.key: d for d in declared(ctx.recipe, ctx.catalog)}
        walk = walks[rid]
        plan = compose(ctx, query, every_form=False)
        for cmd in plan["commands"] + plan["blocked_commands"]:
            for layer, key, (kind, name) in _entries(cmd):
                if key.startswith(COMPOSER_KEYS):
                    continue
                assert key in walk, (rid, query, key)
                d = walk[key]
                assert d.layer == layer, (rid, query, key, layer)
                assert d.kind == kind and name in _names(d.value, kind), (rid, query, key, name)
                seen += 1
    assert seen > 10_000


def test_the_walk_yields_only_the_patterns_its_layer_declares():
    """Each table entry's every-key walk stays inside its own patterns, no
    pattern belongs to two entries, and the recipe-only walk (what validation
    checks) is the part of the full walk that no catalogue adds."""
    owners = [p.text for step in TABLE if isinstance(step, Layer) for p in step.patterns]
    assert len(owners) == len(set(owners))
    for root in (ROOT / "recipes", SOURCES["corpus"]):
        if not root.exists():
            continue
        catalog = load_catalog(root)
        for rid in recipe_paths(root):
            recipe = load_recipe(root, rid)
            for step in TABLE:
                if isinstance(step, Layer):
                    for path, _ in step.every(recipe, catalog):
                        assert path.pattern in step.patterns, (rid, step.name, path.text)
            own = [d.key for d in declared(recipe)]
            full = [d.key for d in declared(recipe, catalog)]
            assert set(own) < set(full)
            assert not [k for k in full if k not in own and not k.startswith(("strategies/", "kv_store/", "kv_offload.", "advanced."))]




def _extend(data: dict, where: tuple, items):
    """Add ``items`` (a list of tokens or an env mapping) to the list or
    mapping at ``where`` of raw recipe data, creating what is missing."""
    node = data
    for k in where[:-1]:
        node = node.setdefault(k, {})
    if isinstance(items, dict):
        node.setdefault(where[-1], {}).update(items)
    else:
        node.setdefault(where[-1], []).extend(items)


BAD_FLAG = ["--tokenizer-mode", "bogus"]  # not one of vLLM's choices: the lint reports it; K3 sets no tokenizer mode
BAD_ENV = {"VLLM_NO_SUCH_VARIABLE": "1"}  # not a vLLM variable: the lint reports it
CASES = [
    (("model", "base_args"), "", "model.base_args"),
    (("variants", "default", "extra_args"), "", "variants.default.extra_args"),
    (("hardware_overrides", "hopper", "args"), "hardware=h200", "hardware_overrides.hopper.args"),
    (("variants", "default", "hardware_overrides", "b300", "extra_args"), "hardware=b300",
     "variants.default.hardware_overrides.b300.extra_args"),
    (("strategy_overrides", "pd_cluster", "extra_args"), "strategy=pd_cluster", "strategy_overrides.pd_cluster.extra_args"),
    (("strategy_overrides", "pd_cluster", "decode", "vllm_args"), "strategy=pd_cluster",
     "strategy_overrides.pd_cluster.decode.vllm_args"),
    (("strategy_overrides", "pd_cluster", "decode", "hardware_overrides", "default", "extra_args"), "strategy=pd_cluster",
     "strategy_overrides.pd_cluster.decode.hardware_overrides.default.extra_args"),
    (("strategy_overrides", "multi_node_tp", "hardware_overrides", "blackwell", "args"), "hardware=b300&strategy=multi_node_tp",
     "strategy_overrides.multi_node_tp.hardware_overrides.blackwell.args"),
    (("features", "spec_decoding", "hardware_overrides", "nvidia", "args"), "hardware=b300&features=spec_decoding",
     "features.spec_decoding.hardware_overrides.nvidia.args"),
    (("model", "base_env"), "", "model.base_env"),
    (("hardware_overrides", "amd", "extra_env"), "hardware=mi355x", "hardware_overrides.amd.extra_env"),
    (("strategy_overrides", "pd_cluster", "prefill", "env"), "strategy=pd_cluster", "strategy_overrides.pd_cluster.prefill.env"),
]


@pytest.mark.parametrize("where,query,key", CASES, ids=[c[2] for c in CASES])
def test_validation_names_the_key_path_explain_shows(tmp_path, where, query, key):
    """A fault planted in one list of K3 is reported by the lint under the
    key path Explain shows for the value it adds (env: ``<key>.<name>``)."""
    env = where[-1].endswith("env")
    recipes = k3_recipes_copy(tmp_path, lambda d: _extend(d, where, BAD_ENV if env else list(BAD_FLAG)))
    recipe, problems = check_recipe(recipes, K3, recipes / "models" / "moonshotai" / "Kimi-K3.yaml",
                                    load_catalog_checked(recipes), strict=False)
    assert recipe is not None
    name = next(iter(BAD_ENV)) if env else "tokenizer-mode"
    lint_key = f"{key}.{name}" if env else key
    assert [p.key for p in problems] == [lint_key]
    plan = compose(make_context(K3, recipe, load_catalog(recipes)), query)
    # vLLM's parser refuses the bad flag's value, so the plan is an error whose
    # commands are held back (blocked_commands) and whose notice names the key.
    assert plan["status"] == ("ok" if env else "error")
    shown = {k for cmd in plan["commands"] + plan["blocked_commands"] for _, k, (_, n) in _entries(cmd) if n == name}
    assert shown == {key}
    if not env:
        assert {n["key"] for n in plan["notices"] if n["code"] == "vllm-rejects"} == {key}


def test_a_recipes_own_advanced_knob_is_named_as_validation_names_it(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d.setdefault("advanced_options", []).append(
        {"id": "bad_cache", "label": "bad cache", "args": list(BAD_FLAG)}))
    recipe, problems = check_recipe(recipes, K3, recipes / "models" / "moonshotai" / "Kimi-K3.yaml",
                                    load_catalog_checked(recipes), strict=False)
    assert [p.key for p in problems] == ["advanced_options[0].args"]
    plan = compose(make_context(K3, recipe, load_catalog(recipes)), "advanced=bad_cache")
    assert plan["status"] == "error"
    (f,) = [f for f in plan["blocked_commands"][0]["provenance"] if f["name"] == "tokenizer-mode"]
    assert (f["layer"], f["key"]) == ("advanced", "advanced_options[0].args")
