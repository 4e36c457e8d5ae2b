"""The browser's converter rebuilds exactly what pydantic validated: for every
recipe we build (ours and the public corpus) and both catalogues,
``from_json(T, dump(x))`` has the same repr as ``x`` (same values *and* types:
an int where pydantic gave a float would change the plan JSON's bytes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.convert import from_json
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.schema import Catalog, HardwareProfile, Recipe
from composer.buildtime.validate import dump, validate_recipe

ROOT = Path(__file__).resolve().parent.parent
DIRS = [ROOT / "recipes", ROOT.parent / "shared" / "upstream-recipes"]


@pytest.mark.parametrize("root", DIRS, ids=["ours", "corpus"])
def test_round_trip_of_every_recipe_and_catalog(root):
    catalog = load_catalog(root)
    back = from_json(Catalog, json.loads(json.dumps(dump(catalog))))
    assert repr(back) == repr(catalog)
    for rid in recipe_paths(root):
        recipe = load_recipe(root, rid)
        back = from_json(Recipe, json.loads(json.dumps(dump(recipe))))
        assert repr(back) == repr(recipe), rid


def test_sequences_are_tuples_and_values_frozen():
    r = validate_recipe({"meta": {"title": "t"}, "model": {"model_id": "a/b", "base_args": ["--x", 8, True]}})
    assert r.model.base_args == ("--x", "8", "true")
    with pytest.raises(AttributeError):
        r.model.model_id = "c/d"  # frozen dataclass


def test_missing_keys_take_the_dataclass_defaults():
    hw = from_json(HardwareProfile, {"brand": "NVIDIA", "display_name": "X"})
    assert (hw.gpu_count, hw.vram_gb, hw.scalable) == (1, 0, True)
