"""Choices that would work are offered (issue 12.6): a GPU the selected
checkpoint cannot use is enabled when another variant runs there, and the
click switches the variant, said before the click."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from tests.plan_space import sample

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "upstream-recipes"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
RID = "thinkingmachines/Inkling"  # NVFP4 default; its MXFP4 variant lists AMD GPUs


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CORPUS)


@pytest.fixture(scope="module")
def inkling(catalog):
    return make_context(RID, load_recipe(CORPUS, RID), catalog)


def test_mi355x_is_offered_with_the_mxfp4_checkpoint(inkling):
    page = compose_page(inkling, "")
    assert page["selection"]["variant"] == "default"
    mi = next(o for o in page["options"]["hardware"] if o["id"] == "mi355x")
    assert not mi["disabled"], mi["reason"]
    assert "MXFP4" in mi["effects"]  # said before the click
    after = compose(inkling, mi["query"], every_form=False)
    assert after["selection"]["hardware"] == "mi355x" and after["selection"]["variant"] == "mxfp4"
    assert after["status"] == "ok"


def test_a_link_naming_only_the_gpu_opens_the_checkpoint_that_runs_there(inkling):
    plan = compose(inkling, "hardware=mi355x", every_form=False)
    assert plan["selection"]["hardware"] == "mi355x" and plan["selection"]["variant"] == "mxfp4"
    assert any(n["code"] == "variant-switched" for n in plan["notices"])
    # An explicit variant is kept: the GPU gives way, as before.
    kept = compose(inkling, "hardware=mi355x&variant=default", every_form=False)
    assert kept["selection"]["variant"] == "default" and kept["selection"]["hardware"] != "mi355x"


def test_no_pill_is_disabled_when_some_variant_runs_there():
    catalog = load_catalog(CORPUS)
    for rid in sample(recipe_paths(CORPUS), "hardware-pills"):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        page = compose_page(ctx, "")
        for o in page["options"]["hardware"]:
            if o["disabled"]:
                # Disabled only when no variant runs there, or when it runs but
                # no plan starts there (the option then says the error).
                runs = [v for v in ctx.recipe.variants if not ctx.hardware_block_reason(o["id"], v)]
                assert not runs or compose(ctx, f"hardware={o['id']}", every_form=False)["status"] == "error", (rid, o["id"])
            else:
                got = compose(ctx, o["query"], every_form=False)["selection"]
                assert got["hardware"] == o["id"], (rid, o["id"])


def test_a_feature_the_strategy_does_not_allow_is_offered_with_one_that_does(k3):
    # "The same rule for every dimension": K3's spec decoding is not for TP+PP.
    page = compose_page(k3, "hardware=h200&strategy=multi_node_tp_pp")
    spec = next(o for o in page["options"]["features"] if o["id"] == "spec_decoding")
    assert not spec["disabled"] and "strategy →" in spec["effects"]
    after = compose(k3, spec["query"], every_form=False)
    assert "spec_decoding" in after["selection"]["features"] and after["selection"]["strategy"] != "multi_node_tp_pp"
    assert after["selection"]["hardware"] == "h200" and after["status"] == "ok"
    assert all("--speculative-config" in c["argv"] for c in after["commands"])


def test_kv_offload_is_offered_with_a_strategy_only_where_one_works(k3):
    page = compose_page(k3, "hardware=h200&strategy=multi_node_tp_pp")
    lmcache = next(o for o in page["options"]["kv_offload"] if o["id"] == "lmcache")
    assert lmcache["disabled"]  # only single-node TP allows it, and one H200 cannot hold K3
    # On B300 one node holds K3: from multi-node TEP, LMCache comes with single-node TP.
    b300 = compose_page(k3, "hardware=b300&strategy=multi_node_tep")
    lm = next(o for o in b300["options"]["kv_offload"] if o["id"] == "lmcache")
    assert not lm["disabled"] and "Single-node TP" in lm["effects"]
    got = compose(k3, lm["query"], every_form=False)
    assert got["selection"]["kv_offload"] == "lmcache" and got["selection"]["strategy"] == "single_node_tp"
    assert got["status"] == "ok"


def test_a_feature_that_is_on_but_not_emitted_can_be_turned_off(k3):
    page = compose_page(k3, "hardware=h200&strategy=multi_node_tp_pp&features=tool_calling,spec_decoding")
    spec = next(o for o in page["options"]["features"] if o["id"] == "spec_decoding")
    assert spec["selected"] and not spec["disabled"] and "Not emitted" in spec["description"]
    off = compose(k3, spec["query"], every_form=False)
    assert "spec_decoding" not in off["selection"]["features"]


def test_no_enabled_option_leads_to_an_error_page(k3):
    # Found by the second pass: from TP+DP on B300, H100 kept TP+DP and landed
    # on "no node count works"; an option now brings a strategy that works, or
    # is disabled with the error.
    for query in ("hardware=b300&strategy=multi_node_tp_dp", "hardware=h200&strategy=multi_node_tp_pp", ""):
        page = compose_page(k3, query)
        for dim in ("hardware", "variant", "strategy", "features", "kv_offload"):
            for o in page["options"].get(dim, ()):
                if not o["disabled"] and not o["selected"]:
                    assert compose(k3, o["query"], every_form=False)["status"] == "ok", (query, dim, o["id"])


def test_a_variant_click_keeps_the_gpu_it_runs_on():
    # Found by the second pass: Llama NVFP4 on B200 → BF16 moved to H200 (the
    # recipe's default GPU), though BF16 runs on B200.
    from pathlib import Path

    recipes = Path(__file__).resolve().parents[1] / "recipes"
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    ctx = make_context(rid, load_recipe(recipes, rid), load_catalog(recipes))
    page = compose_page(ctx, "hardware=b200&variant=nvfp4")
    for o in page["options"]["variant"]:
        assert compose(ctx, o["query"], every_form=False)["selection"]["hardware"] == "b200", o["id"]


def test_no_enabled_option_of_a_corpus_default_page_leads_to_an_error(catalog):
    bad = []
    for rid in sample(recipe_paths(CORPUS), "enabled-options"):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        page = compose_page(ctx, "")
        # A recipe-forced error of the default plan (e.g. --chat-template examples/… with pip) stays on
        # the options that keep it: they do not lead there, and disabling them would trap the user.
        here = {n["code"] for n in compose(ctx, "", every_form=False)["notices"] if n["level"] == "error"}
        for dim in ("hardware", "variant", "strategy", "features", "kv_offload", "nodes"):
            for o in page["options"].get(dim, ()):
                if not o["disabled"] and not o["selected"]:
                    plan = compose(ctx, o["query"], every_form=False)
                    new = {n["code"] for n in plan["notices"] if n["level"] == "error"} - here
                    if plan["status"] != "ok" and new:
                        bad.append((rid, dim, o["id"], sorted(new)))
    assert not bad, bad[:10]


def _form_queries():
    """Our recipes' shapes (``plan_space.shape_queries``) and a corpus sample's
    default page with every strategy."""
    from tests.plan_space import our_plans, shape_queries

    for _rid, ctx in our_plans():
        yield from ((ctx, q) for q in shape_queries(ctx))
    catalog = load_catalog(CORPUS)
    for rid in sample(recipe_paths(CORPUS), "form-free", share=6):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        yield from ((ctx, f"strategy={s}") for s in ctx.strategies)


def test_a_plans_error_is_the_same_in_every_output_form():
    """The controls ask one lean plan per selection whatever its output form
    (``composer.plan._plan_error`` keys it without ``install``): each form's
    own lean composition must give that same error, or none alike."""
    from composer.canonical import resolved_with_notices
    from composer.forms import FORMS
    from composer.plan import lite_plan_error, plan_error_notice, working_values
    from composer.query import parse_query

    checked, errors = 0, 0
    for ctx, query in _form_queries():
        values = dict(parse_query(query).values)
        for form in FORMS:
            asked = {**values, "install": form}
            got = plan_error_notice(ctx, asked)
            sel, notices = resolved_with_notices(ctx, working_values(ctx, asked)[0])
            if any(n.level == "error" for n in notices):
                continue
            assert sel.form == form
            assert got == lite_plan_error(ctx, sel), (ctx.recipe_id, query, form)
            checked += 1
            errors += got is not None
    assert checked > 200 and errors > 0  # errors of several kinds are among them
