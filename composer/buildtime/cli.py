"""``python -m composer RECIPE_ID [--query QUERY] [--format text|json|FORM] [--json] [--explain] [--compare QUERY] [--recipes DIR]``,
``python -m composer check [DIR] [--strict]`` and ``python -m composer import [FILE]``
(``composer.buildtime.import_cli``).

Thin layers over library calls: ``composer.buildtime.checks`` (the very checks the build
runs) then ``composer.api.compose``. Exit status 0 for a plan without errors,
1 for a plan whose notices hold an error (e.g. the weights do not fit), 2 for
bad input (unknown recipe, unreadable or invalid recipe files: the same
problems, with file and key path, that make the build refuse the recipe) and,
with ``--format FORM`` (an output form of ``composer.forms``), for a plan that
form cannot show (the reason goes to stderr).
``check`` prints every problem of every recipe and exits 2 if any is an error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from composer.api import compose, compose_page, make_context
from composer.argv import ArgvError
from composer.forms import FORMS
from composer.buildtime.checks import check_recipe, load_catalog_checked, validate
from composer.buildtime.loader import RecipeError, RecipeLoadError, recipe_paths
from composer.buildtime.routes import find_recipe_id
from composer.plan_text import plan_text as render_text

DEFAULT_RECIPES = Path(__file__).resolve().parents[2] / "recipes"


SAFE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}\Z")
"""A file name ``--out`` writes: one path segment, no leading dot."""


WRITTEN = ".vllm-composer-files"
"""The list of file names ``--out`` wrote into a directory, one per line, so the
next ``--out`` into it removes what the previous plan had and this one has not
(a 4-node plan's ``node-3.sh`` after switching to 2 nodes) and nothing else."""


def _drop_previous(out_dir: Path, names: set[str]) -> None:
    """Remove the files a previous ``--out`` wrote (``WRITTEN``) that the plan
    written now does not have — only plain file names of that list, only
    regular files (never a link or a directory), each one said — and record
    ``names`` as this write's list. Raises ``OSError`` as the writes do."""
    listed = out_dir / WRITTEN
    before = listed.read_text(encoding="utf-8").split() if listed.is_file() and not listed.is_symlink() else []
    for name in sorted(set(before) - names):
        old = out_dir / name
        if SAFE_FILE.match(name) and old.is_file() and not old.is_symlink():
            old.unlink()
            print(f"removed {old} (written for the previous plan)")
    if listed.is_symlink():
        raise OSError(f"refusing to write {listed}: it is a symbolic link")
    listed.write_text("".join(f"{n}\n" for n in sorted(names)), encoding="utf-8")


def print_form(ctx, query: str, form_id: str, out_dir: Path | None = None) -> int:
    """``--format FORM``: the plan of ``query`` in output form ``form_id``
    (``composer.forms``): the form's own files (the Kubernetes manifests), or,
    for a form without any, every command's script — with the scripts of the
    plan's companion processes first unless the form's files run them
    (``OutputForm.runs_companions``) — each after a
    ``# ==> name <==`` line when there are several. With ``out_dir`` the
    files are written there instead (created if missing; a file of the same
    name is replaced, a symbolic link refused; scripts executable), as the
    page's Download saves them, and their paths are listed; files an earlier
    ``--out`` wrote there for another plan are removed (``_drop_previous``). Exit 2 with the reason on stderr when the form
    cannot show this plan (or a file cannot be written), else as for the plan."""
    from composer.forms import FORMS, form_block_reason
    from composer.query import parse_query

    req = parse_query(query)
    plan = compose(ctx, req.with_values(install=form_id).query(), every_form=False)
    sel = plan["selection"]
    why = form_block_reason(ctx, form_id, sel["hardware"], sel["variant"],
                            "" if sel["kv_offload"] == "off" else sel["kv_offload"])
    out = plan["output"]
    own = [a for a in out["artifacts"] if a["command"] is None and a["companion"] is None]
    companions = [] if FORMS[form_id].runs_companions else [a for a in out["artifacts"] if a["companion"] is not None]
    # The form's own files, else every command's script; with the companions' scripts first (they start
    # first; a fresh user's finding: a plan with LMCache printed only lmcache-server.sh, no vllm serve).
    files = companions + own if own else ([] if out["reason"] else
                                          companions + [a for a in out["artifacts"] if a["command"] is not None])
    if why or not files:
        print(f"error: {why or out['reason'] or 'the plan has no commands'}", file=sys.stderr)
        return 2
    if out_dir is not None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            for a in files:
                if not SAFE_FILE.match(a["file_name"]):
                    raise OSError(f"refusing to write {a['file_name']!r}: not a plain file name")
                target = out_dir / a["file_name"]
                if target.is_symlink():
                    raise OSError(f"refusing to write {target}: it is a symbolic link")
                if target.exists() and not target.is_file():
                    raise OSError(f"refusing to write {target}: it is not a regular file")
                # a new file renamed into place: a hard link to someone's file there is replaced, never written through
                tmp = out_dir / f".{a['file_name']}.{os.getpid()}.tmp"
                tmp.write_text(a["text"] if a["text"].endswith("\n") else a["text"] + "\n")
                tmp.chmod(0o755 if target.suffix in (".sh", ".sbatch") else 0o644)
                tmp.replace(target)
                print(f"wrote {target}")
            _drop_previous(out_dir, {a["file_name"] for a in files})
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 1 if plan["status"] == "error" else 0
    for a in files:
        if len(files) > 1:
            sys.stdout.write(f"# ==> {a['file_name']} <==\n")
        sys.stdout.write(a["text"] if a["text"].endswith("\n") else a["text"] + "\n")
    return 1 if plan["status"] == "error" else 0


def _checkpoint_recipe(recipes: Path, paths, name: str) -> tuple[str | None, str | None]:
    """``(recipe id, variant key)`` whose checkpoint is ``name`` (any case), the
    rule of the site's redirects (``composer.buildtime.routes``); ``(None, None)`` when
    no recipe, or more than one, serves it."""
    from composer.buildtime.loader import load_recipe
    from composer.buildtime.routes import checkpoints, variant_routes

    served = {}
    for rid in paths:
        try:
            served[rid] = checkpoints(rid, load_recipe(recipes, rid))
        except RecipeLoadError:
            continue  # a broken recipe is reported when it is asked for
    routes = {k.lower(): v for k, v in variant_routes(served).items()}
    hit = routes.get(name.lower())
    return (hit["id"], hit["variant"]) if hit else (None, None)


def check_main(argv: list[str]) -> int:
    """``python -m composer check [DIR] [--strict]``: every problem of every recipe."""
    ap = argparse.ArgumentParser(prog="python -m composer check",
                                 description="Check a recipes directory exactly as the build does.")
    ap.add_argument("recipes", nargs="?", type=Path, default=DEFAULT_RECIPES)
    ap.add_argument("--strict", action="store_true", help="what vLLM's CLI would refuse or ignore, and a strategy file without a kind, is an error")
    args = ap.parse_args(argv)
    try:
        _, recipes, problems = validate(args.recipes, keep_going=True, strict=args.strict)
    except RecipeLoadError as exc:
        problems, recipes = exc.errors, {}
    for p in problems:
        print(p)
    errors = sum(1 for p in problems if p.level == "error")
    # every recipe file counts, the refused ones too (a fresh user read "2 checked" for 3 files)
    checked = len(recipe_paths(args.recipes)) if args.recipes.is_dir() else len(recipes)
    print(f"{checked} recipe(s) checked ({len(recipes)} valid): {errors} error(s), {len(problems) - errors} warning(s)")
    return 2 if errors else 0


_LINK = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
"""How a page link starts (a scheme); a "://" inside a value ("x=http://a") is a query."""


def linked_recipe(text: str, paths) -> str | None:
    """The recipe id a page link's path names (``…/<org>/<repo>/…`` matching
    one of ``paths``' ids, case-insensitively), or None for a bare query or a
    path naming no recipe: a link to another recipe's page must not be read as
    a selection of this one (a fresh user's finding)."""
    text = (text or "").strip()
    if not (_LINK.match(text) or text.startswith("/")):
        return None
    try:
        segments = [s for s in urlsplit(text).path.split("/") if s]
    except ValueError:
        return None
    known = {rid.lower(): rid for rid in paths}
    for a, b in zip(segments, segments[1:]):
        if f"{a}/{b}".lower() in known:
            return known[f"{a}/{b}".lower()]
    return None


def page_query(text: str) -> str:
    """The page query of ``--query``/``--compare`` as a user may paste it: a
    bare query (``hardware=h200&nodes=2``), one with its ``?``, or a whole page
    link (``https://host/moonshotai/Kimi-K3/?v=2&hardware=h200#…``), whose
    query part is taken (``urllib.parse.urlsplit``; the recipe is still the
    positional id). Other text is returned as is, so the composer reports its
    unknown parameters as for any query."""
    text = (text or "").strip()
    if _LINK.match(text) or text.startswith(("/", "?")):
        try:
            return urlsplit(text).query
        except ValueError as exc:  # "https://[::1/…": say so, never a traceback
            raise ValueError(f"not a page link: {text!r} ({exc})") from None
    return text


EPILOG = """other commands:
  python -m composer check [DIR] [--strict]    run the build's checks on a recipes directory
  python -m composer import [FILE]             read a "vllm serve" command you already run (stdin
                                               or FILE; never run) and compare it with the recipe
                                               (python -m composer import --help)

--query and --compare take a page query or a whole page link (its query is used).
exit status: 0 the plan is ok, 1 the plan has errors (its [error] lines say why),
2 bad input (a recipe error, an unknown recipe)."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check"]:
        return check_main(argv[1:])
    if argv[:1] == ["import"]:
        from composer.buildtime.import_cli import import_main
        return import_main(argv[1:], DEFAULT_RECIPES)
    ap = argparse.ArgumentParser(prog="python -m composer", description="Compose vLLM launch commands from a recipe.",
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe_id", help="recipe id, e.g. moonshotai/Kimi-K3")
    ap.add_argument("--query", default="", help="page query, e.g. 'hardware=h200&nodes=2&strategy=multi_node_tp'")
    ap.add_argument("--format", choices=("text", "json", *FORMS), default=None,
                    help="text (default): commands; json: the whole plan as one JSON object; or an output form's "
                         "files (" + "; ".join(f"{f.id}: {f.label}" for f in FORMS.values()) + "): its own files "
                         "(k8s: the manifests as multi-document YAML), else one script per command")
    ap.add_argument("--json", action="store_true", help="the same as --format json")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="with --format FORM: write the form's files into DIR (as the page's Download saves them) "
                         "instead of printing them; files an earlier --out wrote there for another plan are removed "
                         "(listed in DIR/.vllm-composer-files), nothing else")
    ap.add_argument("--explain", action="store_true", help="show which layer set every flag and env var")
    ap.add_argument("--options", action="store_true",
                    help="with --json: add every control's choices as the page shows them (options: per dimension, "
                         "each choice with disabled and the reason, the link it opens and what it changes)")
    ap.add_argument("--recipes", type=Path, default=DEFAULT_RECIPES, help="recipes directory (default: recipes/)")
    ap.add_argument("--compare", default=None, metavar="QUERY",
                    help="show the plan of --query (A) beside QUERY's (B): argv/env per node, capacity, notices")
    args = ap.parse_args(argv)
    raw_queries = [q for q in (args.query, args.compare) if q]
    try:
        args.query = page_query(args.query)
        args.compare = None if args.compare is None else page_query(args.compare)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        catalog = load_catalog_checked(args.recipes)
        paths = recipe_paths(args.recipes)
        rid = find_recipe_id(paths, args.recipe_id)  # a recipe id typed in another case is found too
        if rid is None:  # a variant's checkpoint id, as the page's addresses accept it
            rid, variant = _checkpoint_recipe(args.recipes, paths, args.recipe_id)
            if rid is not None and variant and "variant=" not in (args.query or ""):
                args.query = "&".join(x for x in (args.query, f"variant={variant}") if x)
        if rid is None:  # a fresh user typed "list": say which ids there are (the closest first)
            import difflib

            near = difflib.get_close_matches(args.recipe_id, list(paths), n=3, cutoff=0.5)
            known = near or sorted(paths)[:12]
            raise RecipeLoadError([RecipeError(
                f"models/{args.recipe_id}.yaml", "",
                f"no such recipe in {args.recipes}; {'did you mean' if near else 'its recipes are'} "
                + ", ".join(known) + ("" if near or len(paths) <= 12 else f" … ({len(paths)} in all)"))])
        for raw in raw_queries:
            other = linked_recipe(raw, paths)
            if other is not None and other != rid:
                print(f"error: the link is a page of {other}, not of {rid}: run `python -m composer {other} --query …`"
                      " or give this recipe's link", file=sys.stderr)
                return 2
        args.recipe_id, path = rid, paths[rid]
        recipe, problems = check_recipe(args.recipes, args.recipe_id, path, catalog)
        if recipe is None:
            raise RecipeLoadError([p for p in problems if p.level == "error"])
        for p in problems:  # what the build lists too (repairs, lint findings), on stderr beside the output
            print(p, file=sys.stderr)
        ctx = make_context(args.recipe_id, recipe, catalog)
        plan = compose(ctx, args.query)
    except RecipeLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ArgvError as exc:
        print(f"error: models/{args.recipe_id}.yaml: {exc} (run `python build.py --recipes {args.recipes}` for every check)", file=sys.stderr)
        return 2
    fmt = args.format or ("json" if args.json else "text")
    if args.compare is not None:
        from composer.buildtime.import_cli import print_compare
        return print_compare(ctx, args.query, args.compare, fmt)
    if args.out is not None and fmt not in FORMS:
        print(f"error: --out needs --format with an output form ({', '.join(FORMS)})", file=sys.stderr)
        return 2
    if fmt in FORMS:
        return print_form(ctx, args.query, fmt, args.out)
    if args.options and fmt != "json":
        print("error: --options needs --json (or --format json)", file=sys.stderr)
        return 2
    if fmt == "json":
        plan = {k: v for k, v in plan.items() if k != "options"}
        if args.options:  # the page's controls (composer.controls), the same answer the page renders
            plan["options"] = compose_page(ctx, args.query)["options"]
        print(json.dumps(plan, indent=2))
    else:
        print(render_text(plan, args.explain))
    return 1 if plan["status"] == "error" else 0
