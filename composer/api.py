"""The composer's public API: one call from recipe data and a query to a plan.

``compose`` takes pydantic models (CLI, build, tests); ``compose_json`` takes the
JSON the build writes for the browser, so Pyodide runs the very same code.
"""

from __future__ import annotations

import json
from functools import lru_cache

from composer.context import RecipeContext
from composer.convert import from_json
from composer.plan import build_plan
from composer.schema import Catalog, Recipe


def make_context(recipe_id: str, recipe: Recipe | dict, catalog: Catalog | dict) -> RecipeContext:
    """Bind a recipe to a catalogue. Raw dicts are validated with pydantic
    (``composer.validate``; raises ``pydantic.ValidationError`` on bad data), so
    this form is for CPython only; the browser uses ``compose_json``."""
    if not isinstance(recipe, Recipe) or not isinstance(catalog, Catalog):
        from composer.validate import validate_catalog, validate_recipe

        recipe, catalog = validate_recipe(recipe), validate_catalog(catalog)
    return RecipeContext(recipe_id, recipe, catalog)


def compose(ctx: RecipeContext, query: str | dict | None = None, options: bool = True) -> dict:
    """The plan dict for ``query`` (see ``composer.plan.build_plan``)."""
    return build_plan(ctx, query, options=options)


@lru_cache(maxsize=8)
def _context_from_json(recipe_text: str, catalog_text: str) -> RecipeContext:
    data = json.loads(recipe_text)
    return RecipeContext(data["id"], from_json(Recipe, data["recipe"]), from_json(Catalog, json.loads(catalog_text)))


def compose_json(recipe_json: str, catalog_json: str, query: str | None) -> str:
    """Browser entry point: ``recipe_json`` is the build's ``{id, recipe}``
    document and ``catalog_json`` its catalogue, both validated by the build;
    returns the plan as JSON text."""
    return json.dumps(compose(_context_from_json(recipe_json, catalog_json), query))
