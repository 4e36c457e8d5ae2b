"""The plans the form tests walk: every recipe of ours with its selection
space, and every corpus recipe (for its default plan)."""

from __future__ import annotations

from pathlib import Path

from composer.api import compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


def our_plans():
    """``(recipe id, context)`` of every recipe under ``recipes/``."""
    recipes = ROOT / "recipes"
    catalog = load_catalog(recipes)
    for rid in recipe_paths(recipes):
        ctx = make_context(rid, load_recipe(recipes, rid), catalog)
        yield rid, ctx


def corpus_contexts():
    """``(recipe id, context)`` of every recipe of the public corpus."""
    catalog = load_catalog(CORPUS)
    for rid in recipe_paths(CORPUS):
        yield rid, make_context(rid, load_recipe(CORPUS, rid), catalog)


def selection_space(ctx):
    """Queries over every variant × hardware × strategy, then every enabled
    choice of nodes, pool modes and sizes, KV offload and instances from each
    of those, and every feature on."""
    seen = set()
    for n, variant in enumerate(ctx.recipe.variants):
        for hw in ctx.listed_hardware:
            if ctx.hardware_block_reason(hw, variant):
                continue
            for sid in ctx.strategies:
                page = compose_page(ctx, {"hardware": hw, "strategy": sid, "variant": variant})
                queries = [page["query"]]
                # Features change flags, not the shape: toggled for the first variant only.
                for dim in ("nodes", "prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes", "kv_offload",
                            "instances") + (("features",) if n == 0 else ()):
                    queries += [o["query"] for o in page["options"].get(dim, ()) if not o["disabled"] and not o["selected"]]
                for q in queries:
                    if q not in seen:
                        seen.add(q)
                        yield q


def plan_gpus(argv: list[str]) -> int:
    """GPUs one serve command uses on its node, from its own parallel flags."""
    def val(flag, default=1):
        return int(argv[argv.index(flag) + 1]) if flag in argv else default

    tp, pp = val("--tensor-parallel-size"), val("--pipeline-parallel-size")
    if "--data-parallel-size-local" in argv:
        return tp * val("--data-parallel-size-local")
    if "--nnodes" in argv:
        return tp * pp // val("--nnodes")
    return tp * pp * val("--data-parallel-size")
