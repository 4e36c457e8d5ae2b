"""Issue 18's property: no plan with status ok breaks a rule vLLM 0.33.0
enforces at start (``composer.launch``), over our recipes' selection space (the
selections ``tests/golden.py`` characterizes: every default, every option of
every default page, seeded click walks; a third of them in CI's run,
``golden.sampled``) and every option of every corpus
recipe's default page; and every degraded start of an ok plan is said in a
warning notice. Rules another step of the plan reports
(``composer.plan.LAUNCH_ELSEWHERE``) are left out."""

from __future__ import annotations

from collections import defaultdict

import pytest

from composer.api import compose, compose_page
from composer.launch import check_plan
from composer.plan import LAUNCH_ELSEWHERE
from tests.golden import CORPUS, context, load, sampled
from tests.plan_space import sample

corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")


def _ours() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for row in sampled(load(), 2):  # every default and the third block of 24 in three (all with COMPOSER_FULL_TESTS=1)
        if row["source"] == "ours":
            out[row["recipe"]].append(row["query"])
    return dict(out)


OURS = _ours()


def _corpus_ids() -> list[str]:
    from composer.buildtime.loader import recipe_paths

    return sorted(recipe_paths(CORPUS)) if CORPUS.exists() else []


def broken(source: str, rid: str, query: str) -> list[str]:
    """What an ok plan of ``query`` breaks: error rules, and warning rules
    without their notice; [] for a plan that is an error (it says why)."""
    ctx = context(source, rid)
    plan = compose(ctx, query, every_form=False)
    if plan["status"] != "ok":
        return []
    said = {n["code"] for n in plan["notices"]}
    out = []
    for v in check_plan(ctx, plan):
        if v.rule in LAUNCH_ELSEWHERE:
            continue
        if v.level == "error":
            out.append(f"?{query}: {v.rule}: {v.message}")
        elif f"launch-{v.rule}" not in said:
            out.append(f"?{query}: {v.rule} (warning) has no notice")
    return out


@pytest.mark.parametrize("rid", sorted(OURS))
def test_no_ok_plan_of_ours_breaks_a_launch_rule(rid):
    found = [b for q in OURS[rid] for b in broken("ours", rid, q)]
    assert not found, "\n".join(found[:10])


@corpus
@pytest.mark.parametrize("rid", sample(_corpus_ids(), "launch-rules", share=4))
def test_no_ok_plan_of_a_corpus_default_page_breaks_a_launch_rule(rid):
    page = compose_page(context("corpus", rid), "")
    queries = [""] + [o["query"] for items in page["options"].values() for o in items]
    found = [b for q in dict.fromkeys(queries) for b in broken("corpus", rid, q)]
    assert not found, "\n".join(found[:10])


def test_the_property_can_fail():
    # A plan the validator refuses is never ok: the check above would report it (issue 18 bullet 3's input).
    if not CORPUS.exists():
        pytest.skip("shared corpus not present")
    query = "hardware=mi355x&strategy=pd_cluster&features=tool_calling,reasoning,spec_decoding"
    ctx = context("corpus", "moonshotai/Kimi-K3")
    plan = compose(ctx, query, every_form=False)
    assert plan["status"] == "error"
    assert any(v.level == "error" for v in check_plan(ctx, plan))
