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


def compose_page(ctx: RecipeContext, query: str | dict | None = None, every_form: bool = False) -> dict:
    """What the page shows for ``query``: the plan dict plus ``options`` (every
    control with its state, ``composer.controls``) and ``groups`` (legends and
    help) and ``kinds`` (how each group is drawn, ``group_kinds``). The page
    renders it with the macros of ``site_src/_macros.html``. ``every_form``:
    the plan part is ``compose``'s (every output form's structured result)."""
    plan, sel, canon = plan_and_selection(ctx, query, every_form=every_form)
    return {**to_json(plan), "options": to_json(build_options(ctx, sel, canon, plan.notices)), "groups": groups(ctx),
            "kinds": group_kinds(ctx)}


@lru_cache(maxsize=MODULE_BOUNDS["api.context_from_json"])
def context_from_json(recipe_text: str, catalog_text: str) -> RecipeContext:
    data = json.loads(recipe_text)
    return RecipeContext(data["id"], from_json(Recipe, data["recipe"]), from_json(Catalog, json.loads(catalog_text)))


def import_report(text: str, find_context, hint: str | None = None, hardware: str | None = None) -> dict:
    """Import pasted commands (``composer.importer``): read ``text``, find
    the recipe by the model the commands serve (``find_context(model_id)`` →
    a ``RecipeContext`` or None: the CLI looks through a recipes directory,
    the page offers its own recipe), and report the closest plan with the
    differences (``ImportReport.to_json``). ``hint``: a query whose hardware
    wins a tie (the page's plan); ``hardware``: a hardware id to keep. Never
    raises for any text; problems are in the report."""
    from composer import importer

    reading = importer.read_text(text)
    models = importer.model_ids(reading)
    ctx = find_context(models[0]) if len(models) == 1 else None
    if ctx is None:
        problems = list(reading.problems)
        if len(models) == 1:
            problems.append(importer.Problem("error", "no-recipe", f"No recipe serves {importer._short(models[0], 80)}."))
        elif len(models) > 1:
            problems.append(importer.Problem("error", "two-models", "The commands serve more than one model ("
                                             + ", ".join(importer._short(m, 50) for m in models[:4])
                                             + "); paste the commands of one deployment."))
        elif not any(p.level == "error" for p in problems):
            problems.append(importer.Problem("error", "no-model", "No model id was found after `vllm serve`."))
        return importer.ImportReport(None, tuple(problems), reading.commands).to_json()
    if hardware is not None and hardware not in ctx.catalog.taxonomy.hardware_profiles:
        hardware = None
    return importer.import_commands(ctx, reading, hint, hardware).to_json()


def compare(ctx: RecipeContext, query_a: str, query_b: str) -> dict:
    """Two plans side by side (``composer.compare.compare_plans``): per node
    and role the argv/env differences, per pool capacity and concurrency, the
    notices only one has. Never raises for any queries."""
    from composer.compare import compare_plans

    return compare_plans(ctx, query_a, query_b).to_json()
