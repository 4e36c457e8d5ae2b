"""The public recipes corpus (../shared/upstream-recipes, read in place, never
copied): every recipe × offered hardware × offered strategy × variant composes
with default features, and every plan passes our own checks."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path

import pytest

from composer.api import compose, make_context
from composer.loader import load_catalog, load_recipe, recipe_paths

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "upstream-recipes"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")


def flag_ids(argv: list[str]) -> list[str]:
    return [t[2:].removeprefix("no-").replace("_", "-").split("=")[0] for t in argv[3:] if t.startswith("--")]


def check_plan(plan: dict) -> None:
    for cmd in plan["commands"] + plan["blocked_commands"]:
        if cmd["role"] == "router":
            continue
        assert shlex.split(cmd["command"].replace("\\\n", "")) == cmd["argv"]
        dup = [k for k, c in Counter(flag_ids(cmd["argv"])).items() if c > 1]
        assert not dup, dup
    if plan["status"] == "ok":
        assert all(c["fits"] for c in plan["capacity"])
    else:
        assert any(n["level"] == "error" for n in plan["notices"])


def _recipes():
    return list(recipe_paths(CORPUS)) if CORPUS.exists() else []


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CORPUS)


@pytest.mark.parametrize("rid", _recipes())
def test_every_offered_choice_composes(rid, catalog):
    ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
    count = 0
    for variant in ctx.recipe.variants:
        for hw in ctx.listed_hardware:
            if ctx.hardware_block_reason(hw, variant):
                continue
            for sid in ctx.strategies:
                plan = compose(ctx, {"hardware": hw, "strategy": sid, "variant": variant})
                check_plan(plan)
                count += 1
    default = compose(ctx, "")
    check_plan(default)
    assert count > 0 or not ctx.strategies
