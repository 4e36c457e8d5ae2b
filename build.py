"""Build the static site: ``python build.py [--recipes DIR] [--out DIR] [--serve]``.

1. Validate every recipe of DIR (all errors collected, each with file, key path
   and reason); a bad recipe stops the build before anything is written.
2. Compose each recipe's default plan (the page shows it before any script runs).
3. Render one page per recipe at ``/<org>/<repo>/`` and an index with Jinja2
   from ``site_src/``; write the browser bundle (recipe + catalogue JSON).
4. Ship the pinned Pyodide runtime (npm ``pyodide``, see package-lock.json), the
   pinned wasm wheels (requirements-wasm.txt) and the composer package.

The site is assembled in a temporary directory next to ``--out`` and moved into
place only when complete, so a failed build never leaves a half-written site.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError

from composer.api import compose, make_context
from composer.argv import ArgvError
from composer.loader import RecipeError, RecipeLoadError, _validation_errors, load_catalog_data, load_recipe_data, recipe_paths
from composer.schema import Catalog, Recipe
from composer.validate import check_recipe_args

ROOT = Path(__file__).resolve().parent
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
PYODIDE_FILES = ("pyodide.js", "pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
WHEEL_CACHE = ROOT / ".cache" / "wheels"
WASM_REQUIREMENTS = ROOT / "requirements-wasm.txt"
BROWSER_MODULES = ("__init__.py", "api.py", "argv.py", "context.py", "layers.py", "layout.py", "lookup.py",
                   "notices.py", "plan.py", "request.py", "resolve.py", "schema.py", "shell.py", "topology.py")


class BuildError(Exception):
    """A build that cannot finish; the message says what to do."""


def validate(recipes_dir: Path) -> tuple[Catalog, dict[str, Recipe]]:
    """Load and validate the catalogue and every recipe; raise RecipeLoadError with
    all problems found (not just the first)."""
    cat_data, errors = load_catalog_data(recipes_dir)
    catalog = None
    if not errors:
        try:
            catalog = Catalog.model_validate(cat_data)
        except ValidationError as exc:
            errors += _validation_errors(exc, "taxonomy.yaml / strategies")
    recipes: dict[str, Recipe] = {}
    paths = recipe_paths(recipes_dir)
    if not paths:
        errors.append(RecipeError("models/", "", "no recipes found (expected models/<org>/<repo>.yaml)"))
    for rid, path in paths.items():
        rel = str(path.relative_to(recipes_dir))
        try:
            recipes[rid] = Recipe.model_validate(load_recipe_data(recipes_dir, rid))
        except RecipeLoadError as exc:
            errors += exc.errors
        except ValidationError as exc:
            errors += _validation_errors(exc, rel)
    if catalog is not None:
        for rid, recipe in recipes.items():
            errors += check_references(rid, recipe, catalog, recipes_dir)
    if errors:
        raise RecipeLoadError(errors)
    return catalog, recipes


def check_references(rid: str, recipe: Recipe, catalog: Catalog, recipes_dir: Path) -> list[RecipeError]:
    """Cross-file checks: ids a recipe names must exist, and its args must parse
    and compose (a broken arg list is reported with the recipe file)."""
    file = f"models/{rid}.yaml"
    errs = []
    hw = catalog.taxonomy.hardware_profiles
    if recipe.meta.default_hardware and recipe.meta.default_hardware not in hw:
        errs.append(RecipeError(file, "meta.default_hardware", f"{recipe.meta.default_hardware!r} is not a hardware profile of taxonomy.yaml"))
    for key, message in check_recipe_args(recipe):
        errs.append(RecipeError(file, key, message))
    if errs:
        return errs
    try:
        ctx = make_context(rid, recipe, catalog)
        compose(ctx, "")
    except ArgvError as exc:
        errs.append(RecipeError(file, "(args)", str(exc)))
    return errs


def fetch_wheels() -> list[Path]:
    """The pinned wasm wheels, downloaded once into .cache/wheels (hash-checked)."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    names = [line.split("==")[0].strip() for line in WASM_REQUIREMENTS.read_text().splitlines()
             if line.strip() and not line.startswith("#")]

    def have() -> list[Path]:
        found = []
        for name in names:
            norm = name.replace("-", "_")
            hits = [p for p in WHEEL_CACHE.glob("*.whl") if p.name.lower().startswith(norm.lower() + "-")]
            if hits:
                found.append(hits[0])
        return found

    if len(have()) < len(names):
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
               "--only-binary=:all:", "--platform", "pyemscripten_2026_0_wasm32", "--python-version", "3.14",
               "--implementation", "cp", "--abi", "cp314", "-d", str(WHEEL_CACHE), "-r", str(WASM_REQUIREMENTS)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildError("could not download the browser wheels listed in requirements-wasm.txt:\n" + res.stderr[-2000:])
    wheels = have()
    if len(wheels) < len(names):
        raise BuildError(f"wheels missing from {WHEEL_CACHE}; expected {names}")
    return wheels


def composer_zip(dest: Path) -> str:
    """Zip the browser part of the composer package; returns its sha256 (cache key)."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in BROWSER_MODULES:
            zf.write(ROOT / "composer" / name, f"composer/{name}")
    return hashlib.sha256(dest.read_bytes()).hexdigest()[:16]


def bundle(rid: str, recipe: Recipe, catalog: Catalog) -> dict:
    """The JSON the browser composes from (same data the CLI validates)."""
    return {"id": rid, "recipe": recipe.model_dump(mode="json", exclude_none=True),
            "catalog": catalog.model_dump(mode="json", exclude_none=True)}


def build(recipes_dir: Path, out: Path) -> dict:
    """Build the whole site into ``out``; returns a summary dict. Raises
    RecipeLoadError (bad recipes) or BuildError (missing runtime pieces)."""
    catalog, recipes = validate(recipes_dir)
    if not (PYODIDE_DIR / "pyodide.js").exists():
        raise BuildError(f"Pyodide is not installed at {PYODIDE_DIR}: run `npm ci` in {ROOT}")
    wheels = fetch_wheels()
    env = Environment(loader=FileSystemLoader(ROOT / "site_src"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        (tmp / "assets").mkdir()
        for asset in (ROOT / "site_src" / "assets").iterdir():
            shutil.copy2(asset, tmp / "assets" / asset.name)
        (tmp / "pyodide").mkdir()
        for name in PYODIDE_FILES:
            shutil.copy2(PYODIDE_DIR / name, tmp / "pyodide" / name)
        (tmp / "wheels").mkdir()
        for w in wheels:
            shutil.copy2(w, tmp / "wheels" / w.name)
        composer_hash = composer_zip(tmp / "wheels" / "composer.zip")
        runtime = {"wheels": [f"wheels/{w.name}" for w in wheels], "composer": f"wheels/composer.zip?h={composer_hash}"}
        index_entries = []
        page = env.get_template("recipe.html")
        for rid, recipe in recipes.items():
            ctx = make_context(rid, recipe, catalog)
            plan = compose(ctx, "")
            data_path = tmp / "data" / f"{rid}.json"
            data_path.parent.mkdir(parents=True, exist_ok=True)
            data_path.write_text(json.dumps(bundle(rid, recipe, catalog), separators=(",", ":")))
            depth = rid.count("/") + 1
            prefix = "../" * depth
            html = page.render(plan=plan, recipe=recipe, rid=rid, prefix=prefix, runtime=runtime,
                               plan_json=json.dumps(plan), data_url=f"{prefix}data/{rid}.json")
            page_dir = tmp / rid
            page_dir.mkdir(parents=True, exist_ok=True)
            (page_dir / "index.html").write_text(html)
            index_entries.append({"id": rid, "title": recipe.meta.title, "provider": recipe.meta.provider,
                                  "description": recipe.meta.description, "summary": plan["summary"]})
        (tmp / "index.html").write_text(env.get_template("index.html").render(recipes=index_entries, prefix=""))
        if out.exists():
            old = out.with_name(out.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"recipes": len(recipes), "out": str(out)}


def serve(directory: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer((host, port), handler) as httpd:
        print(f"Serving {directory} at http://{host}:{port}/ (Ctrl-C to stop)")
        httpd.serve_forever()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build the vLLM recipe configurator site.")
    ap.add_argument("--recipes", type=Path, default=ROOT / "recipes")
    ap.add_argument("--out", type=Path, default=ROOT / "dist")
    ap.add_argument("--serve", action="store_true", help="serve the built site at http://127.0.0.1:PORT/")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = ap.parse_args(argv)
    try:
        summary = build(args.recipes, args.out)
    except RecipeLoadError as exc:
        print(f"build failed: {len(exc.errors)} problem(s) in {args.recipes}:", file=sys.stderr)
        for e in exc.errors:
            print(f"  {e}", file=sys.stderr)
        return 1
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    print(f"built {summary['recipes']} recipe page(s) into {summary['out']}")
    if args.serve:
        serve(args.out, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
