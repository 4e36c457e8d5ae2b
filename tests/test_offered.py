"""Choices that would work are offered (issue 12.6): a GPU the selected
checkpoint cannot use is enabled when another variant runs there, and the
click switches the variant, said before the click."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.api import compose, compose_page, make_context
from composer.loader import load_catalog, load_recipe, recipe_paths

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
    after = compose(inkling, mi["query"])
    assert after["selection"]["hardware"] == "mi355x" and after["selection"]["variant"] == "mxfp4"
    assert after["status"] == "ok"


def test_a_link_naming_only_the_gpu_opens_the_checkpoint_that_runs_there(inkling):
    plan = compose(inkling, "hardware=mi355x")
    assert plan["selection"]["hardware"] == "mi355x" and plan["selection"]["variant"] == "mxfp4"
    assert any(n["code"] == "variant-switched" for n in plan["notices"])
    # An explicit variant is kept: the GPU gives way, as before.
    kept = compose(inkling, "hardware=mi355x&variant=default")
    assert kept["selection"]["variant"] == "default" and kept["selection"]["hardware"] != "mi355x"


def test_no_pill_is_disabled_when_some_variant_runs_there():
    catalog = load_catalog(CORPUS)
    for rid in recipe_paths(CORPUS):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        page = compose_page(ctx, "")
        for o in page["options"]["hardware"]:
            if o["disabled"]:
                assert all(ctx.hardware_block_reason(o["id"], v) for v in ctx.recipe.variants), (rid, o["id"])
            else:
                got = compose(ctx, o["query"])["selection"]
                assert got["hardware"] == o["id"], (rid, o["id"])
