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
from composer.buildtime.repair import repair
from composer.schema import Catalog, Recipe, Strategy, Taxonomy
from composer.buildtime.validate import catalog_block_problems, catalog_position_problems, kv_option_problems, check_recipe_args, check_recipe_commands, check_recipe_positions, check_recipe_references, lint_recipe, unknown_keys, unknown_keys_found, validate_catalog, validate_recipe


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
    # A misspelt key (parallel_flg, envv, vram_gbb) would vanish without a word, as in a recipe.
    problems += [RecipeError("taxonomy.yaml", key, message, "warning")
                 for key, message in unknown_keys(cat_data["taxonomy"], Taxonomy)]
    problems += [RecipeError(files.get(sid, f"strategies/{sid}.yaml"), key, message, "warning")
                 for sid, data in cat_data["strategies"].items() for key, message in unknown_keys(data, Strategy)]
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
            for kid, option in catalog.taxonomy.kv_offload.items():
                errors += [RecipeError("taxonomy.yaml", key, message) for key, message in kv_option_problems(kid, option)]
            for sid, st in catalog.strategies.items():
                rel = files.get(sid, f"strategies/{sid}.yaml")
                errors += [RecipeError(rel, key, message) for key, message in catalog_position_problems(st)]
                for key, message, lvl in catalog_block_problems(st):
                    if lvl == "error":
                        errors.append(RecipeError(rel, key, message))
                    else:
                        warnings.append(RecipeError(rel, key, message, level))
            if not errors:
                return catalog, warnings
    raise RecipeLoadError(errors)


def check_recipe(recipes_dir: Path, rid: str, path: Path, catalog: Catalog, strict: bool = False) -> tuple[Recipe | None, list[RecipeError]]:
    """One recipe, validated against the schema and the catalogue and linted
    against vLLM's CLI: ``(recipe, warnings)``, or ``(None, problems)`` when
    any problem is an error. Every problem names the file and key path."""
    rel = str(path.relative_to(recipes_dir))
    try:
        data, repairs = repair(load_recipe_data(recipes_dir, rid, path), strict)
        recipe = validate_recipe(data)
    except RecipeLoadError as exc:
        return None, exc.errors
    except ValidationError as exc:
        return None, _validation_errors(exc, rel)
    # Unknown keys first: a misspelt key (compatible_strategy) is the cause of the
    # reference errors its absence brings (default_strategy … not offered).
    level = "error" if strict else "warning"
    problems = [RecipeError(rel, key, message, "warning") for key, message in repairs]
    problems += [RecipeError(rel, key, message, level) for key, message, _ in unknown_keys_found(data)]
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


PRECISION_BYTES = {"bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0, "fp8": 1.0, "int8": 1.0, "w8a8": 1.0,
                   "mxfp4": 0.5, "fp4": 0.5, "int4": 0.5, "nvfp4": 0.5}
"""Nominal bytes per parameter of a variant ``precision`` the weight lint
trusts (4-bit formats at 0.5 B: the public recipes size NVFP4 so; its FP8
scales add 1/16, which a variant states with ``bytes_per_param: 0.5625``)."""
WEIGHT_FLOOR = 0.9
"""A ``vram_minimum_gb`` below this multiple of parameters × bytes per
parameter × headroom cannot be right: it leaves out the headroom (or part of
the weights). A larger figure is only conservative (small models carry fixed
overheads), so it is not reported."""


def _params_b(value) -> float | None:
    """Parameters in billions from ``parameter_count_b`` or ``model.parameter_count``
    (70.6, "235B", "2.8T"), or None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().upper()
    mult = {"B": 1.0, "T": 1000.0, "M": 0.001}.get(text[-1:])
    try:
        return float(text[:-1]) * mult if mult else float(text)
    except ValueError:
        return None


def weight_findings(recipe: Recipe) -> list[tuple[str, str]]:
    """``(key path, message)`` for each variant whose ``vram_minimum_gb``
    cannot be right: below ``WEIGHT_FLOOR`` × parameters × bytes per
    parameter × headroom, where parameters (``parameter_count_b``, else
    ``model.parameter_count`` for a variant that serves the recipe's model or
    a checkpoint named after it) and bytes (``bytes_per_param``, else the
    ``precision``'s ``PRECISION_BYTES``) are both known. The figure includes
    the headroom (``headroom``, else 1.2): a raw size is divided by it again
    by the memory model (issue 19: Llama 3.3 70B's FP8 weights came out 17 % low)."""
    from composer.memory import DEFAULT_HEADROOM

    out = []
    for vid, v in recipe.variants.items():
        if v.vram_minimum_gb is None:
            continue
        own = v.model_id is None or recipe.model.model_id.rsplit("/", 1)[-1].lower() in v.model_id.lower()
        params = _params_b(v.parameter_count_b) or (_params_b(recipe.model.parameter_count) if own else None)
        per = v.bytes_per_param or PRECISION_BYTES.get((v.precision or "").lower())
        if not params or not per:
            continue
        headroom = v.headroom or DEFAULT_HEADROOM
        expected = params * per * headroom
        ratio = v.vram_minimum_gb / expected
        if ratio >= WEIGHT_FLOOR:
            continue
        raw = params * per
        why = (" — it looks like the raw size without the headroom" if abs(v.vram_minimum_gb - raw) <= 0.1 * raw
               else "")
        out.append((f"variants.{vid}.vram_minimum_gb",
                    f"{v.vram_minimum_gb:g} GB cannot be right for {params:g}B parameters × {per:g} bytes × headroom "
                    f"{headroom:g} = {expected:.1f} GB ({ratio:.2f}×, at least {WEIGHT_FLOOR:g}× expected){why}: "
                    "vram_minimum_gb includes the headroom (give headroom: 1.0 for a figure that already has it, "
                    "checkpoint_gb for the checkpoint's real size)"))
    return out


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
    errs += [RecipeError(file, key, message, level) for key, message in weight_findings(recipe)]
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
