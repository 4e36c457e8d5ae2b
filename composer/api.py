"""The composer's public API: one call from recipe data and a query to a plan.

``make_context`` binds validated recipe data (CLI, build, tests);
``context_from_json`` binds the JSON the build writes, so Pyodide runs the very
same code without pydantic. ``compose`` gives the plan (CLI, JSON API);
``compose_page`` adds the page's controls.
"""

from __future__ import annotations

import json
from functools import lru_cache

from composer.cache import MODULE_BOUNDS
from composer.context import RecipeContext
from composer.convert import from_json
from composer.controls import build_options, group_kinds, groups
from composer.outputs import to_json
from composer.plan import build_plan, plan_and_selection
from composer.schema import Catalog, Recipe


def make_context(recipe_id: str, recipe: Recipe | dict, catalog: Catalog | dict) -> RecipeContext:
    """Bind a recipe to a catalogue. Raw dicts are validated with pydantic
    (``composer.buildtime.validate``; raises ``pydantic.ValidationError`` on bad data), so
    this form is for CPython only; the browser binds the build's JSON with
    ``context_from_json``."""
    if not isinstance(recipe, Recipe) or not isinstance(catalog, Catalog):
        from composer.buildtime.validate import validate_catalog, validate_recipe

        recipe, catalog = validate_recipe(recipe), validate_catalog(catalog)
    return RecipeContext(recipe_id, recipe, catalog)


def compose(ctx: RecipeContext, query: str | dict | None = None, every_form: bool = True) -> dict:
    """The plan dict for ``query`` (see ``composer.plan.build_plan``): what the
    CLI prints and the JSON API serves, with every output form's structured
    result (the Kubernetes manifests) unless ``every_form`` is False. Never
    raises for any query."""
    return build_plan(ctx, query, every_form)


def compose_page(ctx: RecipeContext, query: str | dict | None = None) -> dict:
    """What the page shows for ``query``: the plan dict plus ``options`` (every
    control with its state, ``composer.controls``) and ``groups`` (legends and
    help) and ``kinds`` (how each group is drawn, ``group_kinds``). The page
    renders it with the macros of ``site_src/_macros.html``."""
    plan, sel, canon = plan_and_selection(ctx, query)
    return {**to_json(plan), "options": to_json(build_options(ctx, sel, canon)), "groups": groups(ctx),
            "kinds": group_kinds(ctx)}


@lru_cache(maxsize=MODULE_BOUNDS["api.context_from_json"])
def context_from_json(recipe_text: str, catalog_text: str) -> RecipeContext:
    data = json.loads(recipe_text)
    return RecipeContext(data["id"], from_json(Recipe, data["recipe"]), from_json(Catalog, json.loads(catalog_text)))
