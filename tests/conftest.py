"""Shared fixtures for the composer unit tests: the Kimi K3 context and ``plan``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the package is used from the checkout, not installed
    sys.path.insert(0, str(ROOT))

import composer.api  # noqa: E402
import composer.buildtime.loader  # noqa: E402

K3_ID = "moonshotai/Kimi-K3"


@pytest.fixture(scope="session")
def k3():
    """The Kimi K3 recipe bound to the catalogue of ``recipes/``."""
    recipes = ROOT / "recipes"
    return composer.api.make_context(
        K3_ID, composer.buildtime.loader.load_recipe(recipes, K3_ID), composer.buildtime.loader.load_catalog(recipes)
    )


@pytest.fixture(scope="session")
def plan(k3):
    """``plan(query)``: what the page shows for ``query`` on Kimi K3 (the plan
    dict plus its ``options``; ``composer.api.compose`` alone has no options)."""

    def _plan(query=None):
        return composer.api.compose_page(k3, query)

    return _plan


def k3_recipes_copy(tmp_path: Path, edit) -> Path:
    """A copy of ``recipes/`` under ``tmp_path`` whose Kimi K3 recipe data went
    through ``edit(data)`` (a recipe fault planted for a test); returns the copy."""
    import shutil

    import yaml

    dst = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", dst)
    path = dst / "models" / "moonshotai" / "Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))
    return dst


def recipes_copy(tmp_path: Path, rel: str | None = None, edit=None) -> Path:
    """A copy of ``recipes/`` under ``tmp_path`` whose file ``rel`` (a model,
    strategy, KV-store or the taxonomy file; created when missing) went
    through ``edit(data)``; returns the copy."""
    import shutil

    import yaml

    dst = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", dst)
    if rel is not None:
        path = dst / rel
        data = yaml.safe_load(path.read_text()) if path.exists() else {}
        edit(data)
        path.write_text(yaml.safe_dump(data))
    return dst


def recipe_errors(recipes: Path) -> list:
    """The error-level findings of validating the recipes folder ``recipes``
    (``composer.buildtime.checks.validate`` with keep-going; a load error's
    own list when loading stops)."""
    from composer.buildtime.checks import validate
    from composer.buildtime.loader import RecipeLoadError

    try:
        _, _, problems = validate(recipes, keep_going=True)
    except RecipeLoadError as exc:
        problems = exc.errors
    return [p for p in problems if p.level == "error"]
