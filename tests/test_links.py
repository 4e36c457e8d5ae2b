"""Links keep their meaning (issue 12.5): the address bar and Share pin every
dimension (``v=2``), so a bookmark opens the same plan after the recipe's
defaults change; ``v=1`` links (defaults omitted) still open what they did."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings

from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from tests.test_properties import queries
from tests.plan_space import sample

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


def warnings(plan: dict) -> set[str]:
    return {n["message"] for n in plan["notices"] if n["level"] != "info"}


def assert_pins(ctx, query) -> dict:
    plan = compose(ctx, query, every_form=False)
    again = compose(ctx, plan["share_url"], every_form=False)
    assert again["selection"] == plan["selection"], query
    assert again["url"] == plan["share_url"]
    # Stating every dimension raises nothing the person did not already see.
    assert warnings(again) <= warnings(plan) | {n for n in warnings(again) if "not emitted" in n}, query
    if plan["url"]:
        assert plan["url"] == plan["share_url"]
    return plan


@settings(max_examples=60, deadline=None)
@given(query=queries())
def test_pinned_links_resolve_to_the_same_selection(k3, query):
    assert_pins(k3, query)


def test_every_corpus_default_and_option_pins(request):
    if not CORPUS.exists():
        pytest.skip("shared corpus not present")
    catalog = load_catalog(CORPUS)
    for rid in sample(recipe_paths(CORPUS), "pins"):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        page = compose_page(ctx, "")
        # The bare landing URL stays bare, even when the recipe's default cannot serve and another
        # strategy is shown (plan.working_values): a fallback's strategy is derived, never written.
        fallback = any(n["code"] == "strategy-fallback" for n in page["notices"])
        assert page["url"] == "" or (fallback and "strategy=" not in page["url"]), (rid, page["url"])
        assert_pins(ctx, "")
        for o in page["options"]["hardware"][:3] + page["options"]["strategy"]:
            if not o["disabled"]:
                assert_pins(ctx, o["query"])


def _k3_raw() -> dict:
    return yaml.safe_load((ROOT / "recipes" / "models" / "moonshotai" / "Kimi-K3.yaml").read_text())


@pytest.mark.parametrize("change", ["default_hardware", "default_strategy", "opt_in_features"])
def test_a_bookmark_survives_a_change_of_the_recipes_defaults(change):
    catalog = load_catalog(ROOT / "recipes")
    before = make_context("moonshotai/Kimi-K3", _k3_raw(), catalog)
    data = copy.deepcopy(_k3_raw())
    if change == "default_hardware":
        data["meta"]["default_hardware"] = "mi355x"
    elif change == "default_strategy":
        data["default_strategy"] = "multi_node_tep"
    else:
        data["opt_in_features"] = ["reasoning"]
    after = make_context("moonshotai/Kimi-K3", data, catalog)
    assert compose(after, "", every_form=False)["selection"] != compose(before, "", every_form=False)["selection"]  # the change matters
    for query in ("hardware=b300&nodes=2&strategy=multi_node_dep", "hardware=h200", "features=reasoning", ""):
        plan = compose(before, query, every_form=False)
        bookmark = plan["url"] or plan["share_url"]
        assert compose(after, bookmark, every_form=False)["selection"] == plan["selection"], (change, query)
        for c_before, c_after in zip(plan["commands"], compose(after, bookmark, every_form=False)["commands"]):
            assert c_before["argv"] == c_after["argv"]


def test_version_1_links_keep_working(k3):
    old = compose(k3, "v=1&strategy=multi_node_dep", every_form=False)  # as the example was shared
    assert old["selection"]["strategy"] == "multi_node_dep"
    assert not [n for n in old["notices"] if n["code"] == "query-version"]
    future = compose(k3, "v=9&hardware=h200", every_form=False)
    assert any(n["code"] == "query-version" for n in future["notices"])
    assert future["selection"]["hardware"] == "h200"
