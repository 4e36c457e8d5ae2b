"""Feature modes (issue 12.1; semantics §7.2): one method per feature, chosen
with ``fmode=feature:mode``, gated by variant and hardware, never swapped
silently."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "upstream-recipes"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CORPUS)


def raw(rid: str) -> dict:
    return yaml.safe_load((CORPUS / "models" / f"{rid}.yaml").read_text())


def spec_config(plan: dict) -> str | None:
    argv = plan["commands"][0]["argv"]
    return argv[argv.index("--speculative-config") + 1] if "--speculative-config" in argv else None


@pytest.fixture(scope="module")
def glm(catalog):
    return make_context("zai-org/GLM-5.2", raw("zai-org/GLM-5.2"), catalog)


@pytest.fixture(scope="module")
def gated(catalog):
    # GLM-5.2 with DSpark unsupported on Hopper: the hardware gate of a mode.
    data = copy.deepcopy(raw("zai-org/GLM-5.2"))
    data["features"]["spec_decoding"]["modes"]["dspark"]["hardware"] = {"hopper": "unsupported"}
    return make_context("zai-org/GLM-5.2", data, catalog)


def test_mode_choice_changes_argv_and_query(glm):
    base = compose(glm, "features=spec_decoding", every_form=False)
    dspark = compose(glm, "features=spec_decoding&fmode=spec_decoding:dspark", every_form=False)
    assert '"method":"mtp"' in spec_config(base)
    assert '"method": "dspark"' in spec_config(dspark)
    assert "fmode=spec_decoding:dspark" in dspark["query"]
    assert "fmode=spec_decoding:mtp" in base["query"]  # pinned (v=2) even when it is the default
    assert compose(glm, base["query"], every_form=False)["selection"] == base["selection"]
    assert dspark["selection"]["modes"] == {"spec_decoding": "dspark"}
    assert not [n for n in dspark["notices"] if n["level"] != "info"]


def test_method_row_offers_every_mode_of_an_enabled_feature(glm):
    page = compose_page(glm, "features=spec_decoding")
    opts = page["options"]["fmode.spec_decoding"]
    assert [o["id"] for o in opts] == list(glm.recipe.features["spec_decoding"].modes)
    assert [o["selected"] for o in opts] == [True, False]
    # The option's query is the plan it promises.
    assert '"method": "dspark"' in spec_config(compose(glm, opts[1]["query"], every_form=False))
    assert "fmode.spec_decoding" in page["groups"]
    assert "fmode.spec_decoding" not in compose_page(glm, "features=reasoning")["options"]


def test_mode_gated_by_variant_says_why(glm):
    from composer.modes import mode_block_reason

    assert "MXFP4" in mode_block_reason(glm, "spec_decoding", "dspark", "mi355x", "mxfp4")
    # A switch to a variant without the chosen mode moves to a usable one, and says so.
    moved = compose(glm, "variant=mxfp4&hardware=mi355x&features=spec_decoding&fmode=spec_decoding:dspark", every_form=False)
    assert '"method":"mtp"' in spec_config(moved)
    notice = next(n for n in moved["notices"] if n["code"] == "mode-unavailable")
    assert "DSpark" in notice["message"] and "MTP" in notice["message"]


def test_mode_gated_by_hardware(gated):
    on_h200 = compose_page(gated, "hardware=h200&features=spec_decoding&fmode=spec_decoding:dspark")
    assert '"method":"mtp"' in spec_config(on_h200)
    assert any(n["code"] == "mode-unavailable" and "H200" in n["message"] for n in on_h200["notices"])
    dspark = next(o for o in on_h200["options"]["fmode.spec_decoding"] if o["id"] == "dspark")
    assert dspark["disabled"] and "H200" in dspark["reason"]
    on_b200 = compose(gated, "hardware=b200&features=spec_decoding&fmode=spec_decoding:dspark", every_form=False)
    assert '"method": "dspark"' in spec_config(on_b200)
    # The hardware pill that would drop the chosen mode says so before the click.
    page = compose_page(gated, "hardware=b200&features=spec_decoding&fmode=spec_decoding:dspark")
    h200 = next(o for o in page["options"]["hardware"] if o["id"] == "h200")
    assert "MTP" in h200["effects"]


@pytest.mark.parametrize("query,code", [
    ("features=spec_decoding&fmode=spec_decoding:nope", "invalid-fmode"),
    ("fmode=nothere:mtp", "invalid-fmode"),
    ("fmode=garbage", "query-ignored"),
    ("fmode=:,:x,y:", "query-ignored"),
])
def test_bad_fmode_values_are_reported_not_fatal(glm, query, code):
    plan = compose(glm, query, every_form=False)
    assert plan["status"] == "ok"
    assert any(n["code"] == code for n in plan["notices"])


def test_every_corpus_mode_composes(catalog):
    from composer.buildtime.loader import load_recipe, recipe_paths

    seen = 0
    for rid in recipe_paths(CORPUS):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        for fid, f in ctx.recipe.features.items():
            for mode in f.modes or {}:
                for variant in ctx.recipe.variants:
                    plan = compose(ctx, {"variant": variant, "features": fid, "fmode": f"{fid}:{mode}"}, every_form=False)
                    used = plan["selection"]["modes"][fid]
                    args = (f.modes[used].args or ())
                    argv = (plan["commands"] or plan["blocked_commands"])[0]["argv"]
                    if args and plan["commands"]:
                        assert args[0] in argv, (rid, fid, mode, variant)
                    seen += 1
    assert seen >= 6


def test_a_mode_another_checkpoint_offers_is_offered_with_the_variant_switch(glm):
    # Issue 12.6, "the same rule for every dimension": DSpark is only for the
    # default (FP8) checkpoint; on MXFP4 + MI355X... the FP8 checkpoint also runs
    # on MI355X, so DSpark is offered and its click switches the variant.
    page = compose_page(glm, "variant=mxfp4&hardware=mi355x&features=spec_decoding")
    dspark = next(o for o in page["options"]["fmode.spec_decoding"] if o["id"] == "dspark")
    if glm.hardware_block_reason("mi355x", "default") is None:
        assert not dspark["disabled"] and "variant" in dspark["effects"]
        after = compose(glm, dspark["query"], every_form=False)
        assert after["selection"]["variant"] == "default" and after["selection"]["hardware"] == "mi355x"
        assert '"method": "dspark"' in spec_config(after)
    else:
        assert dspark["disabled"]


def test_a_mode_for_a_feature_that_is_off_is_ignored_and_said(glm):
    # Found by the adversarial pass: the mode of a disabled feature was kept in
    # the selection but not in the link, so one address gave two plans.
    plan = compose(glm, "features=tool_calling&fmode=spec_decoding:dspark", every_form=False)
    assert plan["selection"]["modes"]["spec_decoding"] == "mtp"
    assert any(n["code"] == "query-ignored" and "off" in n["message"] for n in plan["notices"])
    assert compose(glm, plan["url"], every_form=False)["selection"] == plan["selection"]


@pytest.mark.parametrize("key,where", [("features", "spec,dec"), ("modes", "eagle,3"), ("modes", "m:x"),
                                       ("variants", "fp 8")])
def test_ids_a_url_cannot_carry_are_refused(catalog, key, where):
    import pydantic

    data = copy.deepcopy(raw("zai-org/GLM-5.2"))
    if key == "features":
        data["features"][where] = data["features"].pop("spec_decoding")
    elif key == "modes":
        modes = data["features"]["spec_decoding"]["modes"]
        modes[where] = modes.pop("dspark")
    else:
        data["variants"][where] = data["variants"].pop("mxfp4")
    with pytest.raises(pydantic.ValidationError, match="URL can carry"):
        make_context("zai-org/GLM-5.2", data, catalog)
