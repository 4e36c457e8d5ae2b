"""Recipe checking as one library call: the build, ``python -m composer check``
and the CLI's compose command run exactly these checks, so nothing the build
refuses composes on the command line.

* ``check_catalog`` / ``load_catalog_checked``: the taxonomy, strategies and
  KV stores (a strategy file without ``kind`` is a warning, an error with
  ``strict``);
* ``check_recipe``: one recipe against the schema (pydantic), the catalogue
  (ids it names), its own arg lists (parse, no contradiction), a composed
  default plan, vLLM's CLI (warnings) and vLLM's start-up checks on the
  default plan of every listed hardware (``launch_problems``);
* ``validate``: every recipe of a directory.

Every problem is a ``RecipeError`` with file, key path, message and level.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from composer.api import compose, make_context
from composer.argv import ArgvError
from composer.context import RecipeContext
from composer.layers import TOPOLOGY_SOURCE
from composer.buildtime.loader import RecipeError, RecipeLoadError, _validation_errors, catalog_validation_errors, load_catalog_data, load_recipe_data, recipe_paths, unsafe_recipe_files
from composer.positions import check
from composer.schema import Catalog, Recipe
from composer.buildtime.validate import check_recipe_args, check_recipe_commands, check_recipe_positions, check_recipe_references, lint_recipe, unknown_keys_found, validate_catalog, validate_recipe


def load_catalog_checked(recipes_dir: Path, strict: bool = False) -> Catalog:
    """The validated catalogue (taxonomy, strategies, KV stores); raises
    RecipeLoadError with every error found (``check_catalog``)."""
    return check_catalog(recipes_dir, strict)[0]


def check_catalog(recipes_dir: Path, strict: bool = False) -> tuple[Catalog, list[RecipeError]]:
    """``(catalogue, warnings)``: the validated taxonomy, strategies and KV
    stores, and the warnings about them (a strategy file that declares no
    ``kind``). With ``strict`` (this project's own recipes) those warnings are
    errors: our files must declare their kind. Raises RecipeLoadError with
    every error found."""
    files: dict[str, str] = {}
    cat_data, problems = load_catalog_data(recipes_dir, files)
    level = "error" if strict else "warning"
    warnings = [RecipeError(p.file, p.key, p.message, level) for p in problems if p.level == "warning"]
    errors = [p for p in problems if p.level == "error"] + (warnings if strict else [])
    if not errors:
        try:
            catalog = validate_catalog(cat_data)
        except ValidationError as exc:
            errors += catalog_validation_errors(exc, files)
        else:
            # Strategy and KV-store env reaches `export` lines and containers: names
            # must be shell identifiers and never a name the platform provides.
            for sid, st in catalog.strategies.items():
                blocks = [("env", st.env), ("vllm.env", (st.vllm or {}).get("env") or {})]
                for key, env in blocks:
                    for name in env:
                        problem = check(str(name), "env-name")
                        if problem:
                            errors.append(RecipeError(files.get(sid, f"strategies/{sid}.yaml"), f"{key}.{name}",
                                                      f"environment variable: {problem}"))
            if not errors:
                return catalog, warnings
    raise RecipeLoadError(errors)


def check_recipe(recipes_dir: Path, rid: str, path: Path, catalog: Catalog, strict: bool = False) -> tuple[Recipe | None, list[RecipeError]]:
    """One recipe, validated against the schema and the catalogue and linted
    against vLLM's CLI: ``(recipe, warnings)``, or ``(None, problems)`` when
    any problem is an error. Every problem names the file and key path."""
    rel = str(path.relative_to(recipes_dir))
    try:
        data = load_recipe_data(recipes_dir, rid, path)
        recipe = validate_recipe(data)
    except RecipeLoadError as exc:
        return None, exc.errors
    except ValidationError as exc:
        return None, _validation_errors(exc, rel)
    # Unknown keys first: a misspelt key (compatible_strategy) is the cause of the
    # reference errors its absence brings (default_strategy … not offered).
    level = "error" if strict else "warning"
    problems = [RecipeError(rel, key, message, level) for key, message, _ in unknown_keys_found(data)]
    problems += check_references(rid, recipe, catalog, recipes_dir, strict)
    if any(p.level == "error" for p in problems):
        return None, problems
    return recipe, problems


def validate(recipes_dir: Path, keep_going: bool = False, strict: bool = False) -> tuple[Catalog, dict[str, Recipe], list[RecipeError]]:
    """Load and validate the catalogue and every recipe, collecting every problem.

    Returns ``(catalog, good recipes, problems)`` (warnings, and with
    ``keep_going`` the errors of the recipes left out). Raises RecipeLoadError with all
    problems when the catalogue is bad, or when any recipe is bad and
    ``keep_going`` is False (the default: a bad recipe stops the build).
    """
    catalog, warnings = check_catalog(recipes_dir, strict)
    paths = recipe_paths(recipes_dir)
    if not paths:
        raise RecipeLoadError([RecipeError("models/", "", "no recipes found (expected models/<org>/<repo>.yaml)")])
    recipes, problems = {}, warnings + unsafe_recipe_files(recipes_dir)
    for rid, path in paths.items():
        recipe, found = check_recipe(recipes_dir, rid, path, catalog, strict)
        problems += found
        if recipe is not None:
            recipes[rid] = recipe
    errors = [p for p in problems if p.level == "error"]
    if errors and not keep_going:
        raise RecipeLoadError(errors)
    return catalog, recipes, problems


def check_references(rid: str, recipe: Recipe, catalog: Catalog, recipes_dir: Path, strict: bool = False) -> list[RecipeError]:
    """Cross-file checks: ids a recipe names must exist, its arg lists must parse
    without contradicting themselves, and its default plan must compose
    (errors); then what vLLM's CLI would refuse or ignore (``lint_recipe``:
    warnings, since recipes of others are real data we do not own; errors
    with ``strict``, as for this project's own recipes)."""
    file = f"models/{rid}.yaml"
    errs = [RecipeError(file, key, message) for key, message in check_recipe_references(recipe, catalog)]
    errs += [RecipeError(file, key, message) for key, message in check_recipe_args(recipe)]
    errs += [RecipeError(file, key, message) for key, message in check_recipe_commands(recipe)]
    errs += [RecipeError(file, key, message) for key, message in check_recipe_positions(recipe)]
    if errs:
        return errs
    level = "error" if strict else "warning"
    errs += [RecipeError(file, key, message, level) for key, message, _ in lint_recipe(recipe)]
    try:
        ctx = make_context(rid, recipe, catalog)
        compose(ctx, "")
    except ArgvError as exc:
        errs.append(RecipeError(file, "(args)", str(exc)))
        return errs
    errs += [RecipeError(file, key, message, level) for key, message in launch_problems(ctx)]
    return errs


NOT_RECIPE_KEYS = (TOPOLOGY_SOURCE, "strategies/", "kv_store/", "advanced.", "composer")
"""Key path prefixes of values the recipe does not write (the computed
topology, the catalogue's strategy templates and KV stores, built-in Advanced
knobs): a launch rule they break is the composer's or the catalogue's fault,
reported by their own tests, not a recipe lint."""


def launch_problems(ctx: RecipeContext) -> list[tuple[str, str]]:
    """``(recipe key path, message)`` of each vLLM start-up rule
    (``composer.launch``; the plan's ``launch-<rule>`` error notices) that a
    recipe's own args break in the default plan of the recipe, of each
    listed hardware (``?hardware=<id>``: the plans the JSON API publishes)
    and of each offered strategy on the default hardware
    (``?strategy=<id>``).
    The key path is the one that set the first deciding flag
    (``Notice.key``); the message names the plan's query, vLLM's words and
    the fix. Errors only: a degraded start is the plan's warning."""
    found: dict[tuple[str, str], str] = {}
    queries = [""] + [f"hardware={h}" for h in ctx.listed_hardware] + [f"strategy={s}" for s in ctx.strategies]
    for query in queries:
        plan = compose(ctx, query, every_form=False)
        for n in plan["notices"]:
            if n["level"] != "error" or not n["code"].startswith("launch-"):
                continue
            key = n.get("key") or ""
            if not key or key.startswith(NOT_RECIPE_KEYS):
                continue
            found.setdefault((key, n["rule"]), f"?{query or '(default)'}: {n['message']}")
    return [(key, message) for (key, _), message in found.items()]
