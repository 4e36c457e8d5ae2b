"""``python -m composer RECIPE_ID [--query QUERY] [--json] [--explain] [--recipes DIR]``.

A thin layer over one API call (``composer.api.compose``): load the recipes
directory, compose, print. Exit status 0 for a plan without errors, 1 for a plan
whose notices hold an error (e.g. the weights do not fit), 2 for bad input
(unknown recipe, unreadable or invalid recipe files).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from composer.api import compose, make_context
from composer.argv import ArgvError
from composer.loader import RecipeLoadError, load_catalog, load_recipe

DEFAULT_RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def render_text(plan: dict, explain: bool = False) -> str:
    """What a person copies: per command a header, env exports and the command."""
    out = [f"# {plan['recipe']['title']}: {plan['summary']}"]
    for n in plan["notices"]:
        out.append(f"# [{n['level']}] {n['message']}")
    for c in plan["capacity"]:
        out.append(f"# capacity: {c['message']}")
    cmds = plan["commands"] or plan["blocked_commands"]
    if not plan["commands"]:
        out.append("# The plan has errors; the commands below are NOT expected to work.")
    for c in cmds:
        out.append("")
        out.append(f"# --- {c['label']} ({c['role']}) ---")
        out.append(c["text"])
        if explain:
            for f in c["provenance"]:
                line = f"#   {f['flag']}{' ' + f['value'] if f['value'] is not None else ''}  <- {f['layer']}: {f['key']}"
                for r in f["replaced"]:
                    line += f"  (replaced {r['value']} from {r['layer']}: {r['key']})"
                out.append(line)
            for e in c["env_provenance"]:
                line = f"#   {e['name']}={e['value']}  <- {e['layer']}: {e['key']}"
                for r in e["replaced"]:
                    line += f"  (replaced {r['value']} from {r['layer']}: {r['key']})"
                out.append(line)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m composer", description="Compose vLLM launch commands from a recipe.")
    ap.add_argument("recipe_id", help="recipe id, e.g. moonshotai/Kimi-K3")
    ap.add_argument("--query", default="", help="page query, e.g. 'hardware=h200&nodes=2&strategy=multi_node_tp'")
    ap.add_argument("--json", action="store_true", help="print the whole plan as one JSON object")
    ap.add_argument("--explain", action="store_true", help="show which layer set every flag and env var")
    ap.add_argument("--recipes", type=Path, default=DEFAULT_RECIPES, help="recipes directory (default: recipes/)")
    args = ap.parse_args(argv)
    try:
        ctx = make_context(args.recipe_id, load_recipe(args.recipes, args.recipe_id), load_catalog(args.recipes))
        plan = compose(ctx, args.query)
    except RecipeLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ArgvError as exc:
        print(f"error: models/{args.recipe_id}.yaml: {exc} (run `python build.py --recipes {args.recipes}` for every check)", file=sys.stderr)
        return 2
    if args.json:
        plan = {k: v for k, v in plan.items() if k != "options"}
        print(json.dumps(plan, indent=2))
    else:
        print(render_text(plan, args.explain))
    return 1 if plan["status"] == "error" else 0
