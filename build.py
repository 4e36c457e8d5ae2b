"""Build the static site: ``python build.py [--recipes DIR] [--out DIR] [--serve]``.

1. Validate every recipe of DIR (all errors collected, each with file, key path
   and reason); a bad recipe stops the build before anything is written.
2. Compose each recipe's default plan (the page shows it before any script runs).
3. Render one page per recipe at ``/<org>/<repo>/`` and an index with Jinja2
   from ``site_src/``; write the browser data (recipe and catalogue JSON), the
   JSON API (``api/index.json``, ``api/<org>/<repo>.json``) and the recipe JSON
   Schema (``schema/recipe.schema.json``).
4. Ship the pinned Pyodide runtime (npm ``pyodide``, see package-lock.json), a
   zip of the site's pure Python (the composer without its file and pydantic
   edges, Jinja2, MarkupSafe, the templates) and a Pyodide memory snapshot of
   that Python already imported (``site_src/snapshot.mjs``, run with Node),
   all under content-hashed names in ``runtime/``.

The site is assembled in a temporary directory next to ``--out`` and moved into
place only when complete, so a failed build never leaves a half-written site.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import importlib.util
import io
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from jinja2 import FileSystemLoader

from composer.api import compose, compose_page, make_context
from composer import vllm_cli
from composer.render import environment
from composer.loader import RecipeError, RecipeLoadError, recipe_paths, unsafe_recipe_files
from composer.schema import Recipe
from composer.checks import check_recipe, load_catalog_checked
from composer.validate import dump, recipe_json_schema as schema_of_recipes

ROOT = Path(__file__).resolve().parent
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
SNAPSHOT_CACHE = ROOT / ".cache" / "snapshots"
# The browser gets the composer's pure logic and the renderer; not the modules
# that read files, validate with pydantic or parse the command line.
NOT_IN_BROWSER = {"cli.py", "loader.py", "validate.py", "checks.py", "vllm_cli_gen.py", "__main__.py"}
# Pure-Python packages the browser's renderer needs (pinned in pyproject.toml);
# MarkupSafe's optional C speedups are left out (a snapshot cannot hold them).
BROWSER_PACKAGES = ("jinja2", "markupsafe")
BROWSER_TEMPLATES = ("_macros.html",)


class BuildError(Exception):
    """A build that cannot finish; the message says what to do."""


def _package_files(name: str) -> list[tuple[Path, str]]:
    """``(file, name in the zip)`` for the ``.py`` files of an installed package."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"the package {name} is not installed (pip install -e '.[build]')")
    base = Path(next(iter(spec.submodule_search_locations)))
    return [(p, f"{name}/{p.relative_to(base).as_posix()}") for p in sorted(base.rglob("*.py"))]


def site_python_zip() -> bytes:
    """The site's Python as a zip (deterministic bytes: fixed timestamps): the
    browser part of ``composer``, Jinja2 and MarkupSafe (``.py`` files only) and
    the templates the worker renders (under ``site_templates/``)."""
    files = [(p, f"composer/{p.name}") for p in sorted((ROOT / "composer").glob("*.py")) if p.name not in NOT_IN_BROWSER]
    files += [(p, f"composer/data/{p.name}") for p in sorted((ROOT / "composer" / "data").glob("*.json"))]
    for pkg in BROWSER_PACKAGES:
        files += _package_files(pkg)
    files += [(ROOT / "site_src" / t, f"site_templates/{t}") for t in BROWSER_TEMPLATES]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, name in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def pyodide_version() -> str:
    """The pinned Pyodide version (node_modules/pyodide/package.json)."""
    return json.loads((PYODIDE_DIR / "package.json").read_text())["version"]


def make_snapshot(python_zip: bytes) -> bytes:
    """A Pyodide memory snapshot with the site's Python imported and its
    templates compiled (``site_src/snapshot.mjs``, run with Node). Cached in
    ``.cache/snapshots`` by the hash of everything that goes into it."""
    script = ROOT / "site_src" / "snapshot.mjs"
    key = hashlib.sha256(python_zip + pyodide_version().encode() + script.read_bytes()
                         + (ROOT / "site_src" / "assets" / "boot-python.mjs").read_bytes()).hexdigest()[:24]
    cached = SNAPSHOT_CACHE / f"{key}.bin"
    digest_file = cached.with_suffix(".sha256")
    if cached.exists() and digest_file.exists():
        data = cached.read_bytes()
        if hashlib.sha256(data).hexdigest() == digest_file.read_text().strip():
            return data  # a damaged cache entry is made again, never shipped
    node = shutil.which("node")
    if node is None:
        raise BuildError("node is needed to make the Pyodide memory snapshot (install Node.js 20 or newer)")
    SNAPSHOT_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        zip_path, out_path = Path(tmp) / "site-python.zip", Path(tmp) / "snapshot.bin"
        zip_path.write_bytes(python_zip)
        try:
            res = subprocess.run([node, str(script), str(PYODIDE_DIR), str(zip_path), str(out_path)],
                                 capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise BuildError("making the Pyodide memory snapshot with node took more than 300 s; stopped") from None
        if res.returncode != 0 or not out_path.exists():
            # Pyodide prints its minified source around an error: keep the Python traceback.
            text = res.stderr or res.stdout
            start = max(text.rfind("Traceback (most recent call last)"), text.rfind("Error:"))
            raise BuildError(f"could not make the Pyodide memory snapshot (node exited with {res.returncode}):\n"
                             + ((text[start:] if start >= 0 else text)[-2000:] or "(no output)"))
        data = out_path.read_bytes()
    # Unique temporary names: concurrent builds never write into one file.
    for path, content in ((cached, data), (digest_file, hashlib.sha256(data).hexdigest().encode())):
        fd, tmp_name = tempfile.mkstemp(dir=SNAPSHOT_CACHE, prefix=path.name + ".")
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.replace(tmp_name, path)
    return data


def write_runtime(tmp: Path) -> dict:
    """Write the browser runtime into ``tmp/runtime`` under content-hashed names
    (cacheable forever: a changed file gets a new name) and return the URLs
    and facts the page needs (relative to the site root)."""
    core = hashlib.sha256(b"".join((PYODIDE_DIR / n).read_bytes() for n in PYODIDE_FILES)).hexdigest()[:12]
    pyodide_dir = tmp / "runtime" / f"pyodide-{core}"
    pyodide_dir.mkdir(parents=True)
    for name in PYODIDE_FILES:
        shutil.copy2(PYODIDE_DIR / name, pyodide_dir / name)
    python_zip = site_python_zip()
    snapshot = make_snapshot(python_zip)
    names = {"python": f"python-{hashlib.sha256(python_zip).hexdigest()[:12]}.zip",
             "snapshot": f"snapshot-{hashlib.sha256(snapshot).hexdigest()[:12]}.bin"}
    (tmp / "runtime" / names["python"]).write_bytes(python_zip)
    (tmp / "runtime" / names["snapshot"]).write_bytes(snapshot)
    return {"index": f"runtime/pyodide-{core}/", "python": f"runtime/{names['python']}",
            "snapshot": f"runtime/{names['snapshot']}", "snapshot_size": len(snapshot),
            "snapshot_sha256": hashlib.sha256(snapshot).hexdigest(), "pyodide_version": pyodide_version()}


def api_plan(plan: dict) -> dict:
    """The part of a plan scripts need: no page controls."""
    keep = ("selection", "summary", "status", "commands", "blocked_commands", "notices", "capacity", "verified", "url")
    out = {k: plan[k] for k in keep}
    for key in ("commands", "blocked_commands"):
        out[key] = [{k: c[k] for k in ("role", "node_rank", "label", "argv", "env", "text", "provenance", "env_provenance")
                     if k in c} for c in plan[key]]
    return out


def recipe_api(ctx, recipe: Recipe, plan: dict) -> dict:
    """``api/<org>/<repo>.json``: the validated recipe and, for every offered
    hardware, the plan the page shows when that hardware is picked."""
    variant = "default" if "default" in recipe.variants else next(iter(recipe.variants))
    by_hw = {}
    for hw in ctx.listed_hardware:
        if ctx.hardware_block_reason(hw, variant):
            continue
        same = plan["selection"]["hardware"] == hw
        by_hw[hw] = api_plan(plan if same else compose(ctx, {"hardware": hw}, kubernetes=False))
    return {"id": ctx.recipe_id, "recipe": dump(recipe),
            "default_plan": api_plan(plan), "by_hardware": by_hw}


def index_entry(ctx, recipe: Recipe, plan: dict) -> dict:
    """One row of the index page and of ``api/index.json``."""
    precisions = sorted({v.precision.upper() for v in recipe.variants.values() if v.precision})
    return {
        "id": ctx.recipe_id, "title": recipe.meta.title, "provider": recipe.meta.provider,
        "description": recipe.meta.description, "tasks": list(recipe.meta.tasks),
        "size": str(recipe.model.parameter_count or ""), "precisions": precisions,
        "verified_hardware": [h for h in ctx.listed_hardware if ctx.is_verified(h)],
        "default_summary": plan["summary"], "page": f"{ctx.recipe_id}/", "json": f"api/{ctx.recipe_id}.json",
    }


def script_json(data) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&``
    are escaped so recipe text can never close the element or open a comment."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def recipe_schema() -> dict:
    """JSON Schema of a recipe file, generated from the pydantic models (the same
    models the build validates with)."""
    return schema_of_recipes()


_JOB: dict = {}
"""State shared with the page-building worker processes (set before they fork)."""


def _recipe_job(rid: str) -> tuple[str, dict | None, list[RecipeError]]:
    """Validate one recipe and, if it is good, write its page, browser data and
    API document into the build directory. Runs in a worker process."""
    try:
        return _render_recipe(rid)
    except Exception as exc:  # a recipe the checks let through must still not crash the build
        return rid, None, [RecipeError(f"models/{rid}.yaml", "", f"could not be composed: {type(exc).__name__}: {exc}")]


def _render_recipe(rid: str) -> tuple[str, dict | None, list[RecipeError]]:
    job = _JOB
    recipe, problems = check_recipe(job["recipes_dir"], rid, job["paths"][rid], job["catalog"], job["strict"])
    if recipe is None:
        return rid, None, problems
    tmp, runtime = job["tmp"], job["runtime"]
    ctx = make_context(rid, recipe, job["catalog"])
    plan = compose_page(ctx, "")
    recipe_text = json.dumps({"id": rid, "recipe": dump(recipe)}, separators=(",", ":"))
    api_text = json.dumps(recipe_api(ctx, recipe, plan), separators=(",", ":"))
    for sub, text in (("data", recipe_text), ("api", api_text)):
        path = tmp / sub / f"{rid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    prefix = "../" * (rid.count("/") + 1)
    data_url = f"{prefix}data/{rid}.json?h={_short_hash(recipe_text)}"
    html = job["env"].get_template("recipe.html").render(plan=plan, recipe=recipe, rid=rid, prefix=prefix, runtime=runtime,
                                                         plan_json=script_json(plan), data_url=data_url)
    (tmp / rid).mkdir(parents=True, exist_ok=True)
    (tmp / rid / "index.html").write_text(html)
    return rid, index_entry(ctx, recipe, plan), problems


def build(recipes_dir: Path, out: Path, keep_going: bool = False, jobs: int | None = None, strict: bool = False) -> dict:
    """Build the whole site into ``out``; returns ``{recipes, out, errors, warnings}``.

    ``warnings`` lists what vLLM's CLI would refuse or ignore in the recipes
    (``composer.validate.lint_recipe``); with ``strict`` those are errors.

    Recipes are validated and rendered in ``jobs`` worker processes (default:
    one per CPU). Raises RecipeLoadError (bad recipes, unless ``keep_going``;
    every problem of every recipe is listed) or BuildError (missing runtime
    pieces). Nothing is written to ``out`` unless the build completes.
    """
    catalog = load_catalog_checked(recipes_dir)
    paths = recipe_paths(recipes_dir)
    if not paths:
        raise RecipeLoadError([RecipeError("models/", "", "no recipes found (expected models/<org>/<repo>.yaml)")])
    missing = [n for n in PYODIDE_FILES + ("package.json",) if not (PYODIDE_DIR / n).is_file()]
    if missing:
        raise BuildError(f"Pyodide is not (fully) installed at {PYODIDE_DIR} (missing {', '.join(missing)}): run `npm ci` in {ROOT}")
    env = environment(FileSystemLoader(ROOT / "site_src"))
    out = out.resolve()
    check_output_dir(out, recipes_dir.resolve())
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(out.parent)
    _remove_stale_builds(out.parent)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        (tmp / SITE_MARKER).write_text("Built by build.py; this directory is replaced by the next build.\n")
        for sub in ("assets", "data", "api", "schema"):
            (tmp / sub).mkdir()
        for asset in (ROOT / "site_src" / "assets").iterdir():
            shutil.copy2(asset, tmp / "assets" / asset.name)
        runtime = write_runtime(tmp)
        catalog_text = json.dumps(dump(catalog), separators=(",", ":"))
        (tmp / "data" / "catalog.json").write_text(catalog_text)
        (tmp / "schema" / "recipe.schema.json").write_text(json.dumps(recipe_schema(), indent=1))
        runtime["catalog"] = f"data/catalog.json?h={_short_hash(catalog_text)}"
        _JOB.update(recipes_dir=recipes_dir, paths=paths, catalog=catalog, tmp=tmp, runtime=runtime, env=env, strict=strict)
        jobs = jobs or os.cpu_count() or 1
        if jobs > 1 and len(paths) >= 8:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                results = pool.map(_recipe_job, list(paths), chunksize=4)
        else:
            results = [_recipe_job(rid) for rid in paths]
        errors = unsafe_recipe_files(recipes_dir) + [e for _, _, errs in results for e in errs if e.level == "error"]
        warnings = [e for _, _, errs in results for e in errs if e.level != "error"]
        if errors and not keep_going:
            raise RecipeLoadError(errors)
        entries = sorted((entry for _, entry, _ in results if entry is not None), key=lambda e: e["title"].lower())
        hardware = {h: p.display_name for h, p in catalog.taxonomy.hardware_profiles.items()}
        (tmp / "api" / "index.json").write_text(json.dumps({"recipes": entries, "hardware": hardware}, indent=1))
        index = env.get_template("index.html")

        def render_index(items: list[dict], prefix: str, org: str | None) -> str:
            return index.render(recipes=items, hardware=hardware, prefix=prefix, org=org,
                                providers=sorted({e["provider"] for e in items if e["provider"]}),
                                tasks=sorted({t for e in items for t in e["tasks"]}))

        (tmp / "index.html").write_text(render_index(entries, "", None))
        # /<org>/ lists that organisation's recipes (a directory listing otherwise).
        for org in sorted({e["id"].split("/")[0] for e in entries}):
            (tmp / org / "index.html").write_text(render_index([e for e in entries if e["id"].startswith(org + "/")], "../", org))
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _JOB.clear()
        lock.close()
    return {"recipes": len(entries), "out": str(out), "errors": errors, "warnings": warnings}


def _lock(parent: Path):
    """An exclusive lock on ``parent/.build.lock`` for the whole build: builds
    into one folder take turns, so a ``.build-*`` folder found while holding it
    belongs to a build that crashed."""
    import fcntl

    fh = open(parent / ".build.lock", "w")
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def _remove_stale_builds(parent: Path) -> None:
    """Remove temporary folders that crashed builds left next to ``--out``
    (only ours: they carry the site marker)."""
    for old in parent.glob(".build-*"):
        if old.is_dir() and (old / SITE_MARKER).exists():
            shutil.rmtree(old, ignore_errors=True)


SITE_MARKER = ".vllm-recipes-site"
"""File that marks a directory as one of our builds (safe to replace)."""


def check_output_dir(out: Path, recipes_dir: Path) -> None:
    """Refuse an ``--out`` that would destroy something else: the recipes, the
    project, or any non-empty directory that is not a previous build."""
    if out == recipes_dir or out in recipes_dir.parents or recipes_dir in out.parents:
        raise BuildError(f"--out {out} overlaps the recipes directory {recipes_dir}; choose another output directory")
    if out == ROOT or out in ROOT.parents:
        raise BuildError(f"--out {out} would replace the project itself; choose e.g. {ROOT / 'dist'}")
    ours = (out / SITE_MARKER).exists()  # only a folder our build marked is ever replaced
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not ours)):
        raise BuildError(f"--out {out} exists and is not a site built by build.py (no {SITE_MARKER}); "
                         "remove it or choose another output directory")


def _short_hash(text: str) -> str:
    """Cache-busting key for a served file."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` by the finished ``tmp`` with two renames."""
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)


def serve(directory: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer((host, port), handler) as httpd:
        print(f"Serving {directory} at http://{host}:{port}/ (Ctrl-C to stop)")
        httpd.serve_forever()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build the vLLM recipe configurator site.")
    ap.add_argument("--recipes", type=Path, default=ROOT / "recipes")
    ap.add_argument("--out", type=Path, default=ROOT / "dist")
    ap.add_argument("--keep-going", action="store_true",
                    help="build the good recipes even if some are bad (bad ones are reported and left out)")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    ap.add_argument("--strict", action="store_true",
                    help="what vLLM's CLI would refuse or ignore is an error, not a warning (for recipes you own)")
    ap.add_argument("--serve", action="store_true", help="serve the built site at http://127.0.0.1:PORT/")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = ap.parse_args(argv)
    try:
        summary = build(args.recipes, args.out, keep_going=args.keep_going, jobs=args.jobs, strict=args.strict)
    except RecipeLoadError as exc:
        print(f"build failed: {len(exc.errors)} problem(s) in {args.recipes}:", file=sys.stderr)
        for e in exc.errors:
            print(f"  {e}", file=sys.stderr)
        return 1
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # permissions, a full disk: one line naming the path
        print(f"build failed: {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for e in summary["warnings"]:
        print(f"  {e}", file=sys.stderr)
    if summary["warnings"]:
        print(f"{len(summary['warnings'])} warning(s): commands vLLM {vllm_cli.VERSION} would refuse or ignore "
              "(shown on the pages as notices)", file=sys.stderr)
    for e in summary["errors"]:
        print(f"  skipped: {e}", file=sys.stderr)
    print(f"built {summary['recipes']} recipe page(s) into {summary['out']}"
          + (f" ({len(summary['errors'])} problem(s) skipped)" if summary["errors"] else ""))
    if args.serve:
        serve(args.out, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
