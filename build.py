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
import contextlib
import errno
import functools
import hashlib
import http.server
import importlib.util
import io
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from jinja2 import FileSystemLoader

from composer.api import compose, compose_page, make_context
from composer.controls import group_options
from composer import vllm_cli
from composer.plan_text import plan_text
from composer.render import environment
from composer.buildtime.routes import checkpoints, public_api_ids, route_map, variant_routes
from composer.buildtime.loader import RecipeError, RecipeLoadError, recipe_paths, unsafe_recipe_files
from composer.schema import Recipe
from composer.buildtime.checks import check_catalog, check_recipe
from composer.buildtime.guide import render_guide
from composer.buildtime import public_api
from composer.buildtime.docstrings import strip_docstrings
from composer.buildtime.validate import dump, recipe_json_schema as schema_of_recipes

ROOT = Path(__file__).resolve().parent
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
SNAPSHOT_CACHE = ROOT / ".cache" / "snapshots"
COMPRESS_CACHE = ROOT / ".cache" / "compressed"
# The browser gets the composer's pure logic and the renderer; not the modules
# that read files, validate with pydantic or parse the command line.
BUILD_TIME_DIR = "buildtime"
"""The browser boundary: ``composer/buildtime/`` (files, pydantic, the CLI, the
site's routes and guide) and ``composer/__main__.py`` never ship to the page."""
# Pure-Python packages the browser's renderer needs (pinned in pyproject.toml);
# MarkupSafe's optional C speedups are left out (a snapshot cannot hold them).
BROWSER_PACKAGES = ("jinja2", "markupsafe")
BROWSER_TEMPLATES = ("_macros.html",)


DEFAULT_REPO_URL = os.environ.get("RECIPES_REPO_URL", "https://github.com/vllm-project/recipes")
"""Where the recipes live (``--repo-url``, or the ``RECIPES_REPO_URL``
environment variable): each page links to ``<repo>/edit/<branch>/<file>`` to
edit its recipe and to ``<repo>/issues/new`` to report a problem (GitHub's URL
scheme)."""
DEFAULT_REPO_BRANCH = os.environ.get("RECIPES_REPO_BRANCH", "main")
"""The branch the edit links open (``--repo-branch`` or ``RECIPES_REPO_BRANCH``)."""


class BuildError(Exception):
    """A build that cannot finish; the message says what to do."""


def check_repo_url(url: str) -> str:
    """``url`` without a trailing slash if it is an ``https://host/…`` URL with
    nothing a page attribute or a path reads specially; raises BuildError."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme != "https" or not parts.netloc or parts.query or parts.fragment or any(c in url for c in "\"'<> "):
        raise BuildError(f"--repo-url {url!r} is not an https:// URL of a repository (e.g. https://github.com/org/recipes)")
    return url.strip().rstrip("/")


def context_label(tokens: int) -> str:
    """A context length for a tag: 131072 → "128K", 200000 → "200K", 1048576 → "1M"."""
    for unit, size in (("M", 1024 * 1024), ("K", 1024)):
        if tokens >= size and tokens % size == 0:
            return f"{tokens // size}{unit}"
    for unit, size in (("M", 1_000_000), ("K", 1000)):
        if tokens >= size and tokens % size == 0:
            return f"{tokens // size}{unit}"
    return f"{tokens:,}"


def recipe_header(recipe: Recipe, rid: str, recipe_file: str, repo_url: str, repo_branch: str) -> dict:
    """What the page header shows besides the title: ``hf_url`` (the model on
    Hugging Face; None for a local path), ``tags`` (architecture, size,
    context length, minimum vLLM: ``{label, value}``), ``edit_url`` (the
    recipe file in its repository) and ``report_url`` (a new issue naming the
    recipe). ``recipe_file`` is the file's path in the repository."""
    from urllib.parse import quote, urlencode

    model = recipe.model
    tags = []
    if model.architecture:
        arch = str(model.architecture)
        tags.append({"label": "Architecture", "value": {"moe": "MoE", "dense": "Dense"}.get(arch.lower(), arch)})
    if model.parameter_count:
        size = str(model.parameter_count)
        active = str(model.active_parameters or "")
        if active and active != size:  # a count ("32B") or, in some recipes, a phrase
            size += f" total, {active} active" if re.fullmatch(r"[\d.]+\s*[KMBT]?", active) else f" ({active})"
        tags.append({"label": "Size", "value": size})
    if model.context_length:
        tags.append({"label": "Context", "value": f"{context_label(int(model.context_length))} tokens"})
    if model.min_vllm_version:
        tags.append({"label": "vLLM", "value": f"≥ {model.min_vllm_version}"})
    hf = None if model.model_id.startswith("/") else f"https://huggingface.co/{quote(model.model_id)}"
    title = f"[{rid}] "
    body = f"Recipe: {recipe_file}\nPage: /{rid}/\n\nWhat is wrong:\n"
    return {"hf_url": hf, "model_id": model.model_id, "tags": tags,
            "edit_url": f"{repo_url}/edit/{quote(repo_branch)}/{quote(recipe_file)}",
            "report_url": f"{repo_url}/issues/new?" + urlencode({"title": title, "body": body})}


def _package_files(name: str) -> list[tuple[Path, str]]:
    """``(file, name in the zip)`` for the ``.py`` files of an installed package."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"the package {name} is not installed (pip install -e '.[build]')")
    base = Path(next(iter(spec.submodule_search_locations)))
    return [(p, f"{name}/{p.relative_to(base).as_posix()}") for p in sorted(base.rglob("*.py"))]


def site_python_zip() -> bytes:
    """The site's Python as a zip (deterministic bytes: fixed timestamps): the
    browser part of ``composer``, Jinja2 and MarkupSafe (``.py`` files only,
    their docstrings blanked: ``composer.buildtime.docstrings``) and the
    templates the worker renders (under ``site_templates/``)."""
    base = ROOT / "composer"
    files = [(p, f"composer/{p.relative_to(base).as_posix()}") for p in sorted(base.rglob("*.py"))
             if p.relative_to(base).parts[0] != BUILD_TIME_DIR and p.relative_to(base).as_posix() != "__main__.py"
             and "__pycache__" not in p.parts]
    files += [(p, f"composer/data/{p.name}") for p in sorted((ROOT / "composer" / "data").glob("*.json"))]
    for pkg in BROWSER_PACKAGES:
        files += _package_files(pkg)
    files += [(ROOT / "site_src" / t, f"site_templates/{t}") for t in BROWSER_TEMPLATES]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, name in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            data = path.read_bytes()
            zf.writestr(info, strip_docstrings(data, name) if name.endswith(".py") else data)
    return buf.getvalue()


def pyodide_version() -> str:
    """The pinned Pyodide version (node_modules/pyodide/package.json)."""
    return json.loads((PYODIDE_DIR / "package.json").read_text())["version"]


def make_snapshot(python_zip: bytes) -> bytes:
    """A Pyodide memory snapshot with the site's Python imported and its
    templates compiled (``site_src/snapshot.mjs``, run with Node): the bytes
    of ``snapshot_and_modules``."""
    return snapshot_and_modules(python_zip)[0]


def snapshot_and_modules(python_zip: bytes) -> tuple[bytes, list[str]]:
    """``(snapshot bytes, names in its sys.modules)``: the snapshot of
    ``make_snapshot`` and the modules it already holds imported (what the
    page's trimmed standard library can leave out, ``snapshot_stdlib_zip``).
    Cached in ``.cache/snapshots`` by the hash of everything that goes into it;
    concurrent builds take turns on the cache's lock, so they make it once and
    ship the same bytes (whose Brotli copy ``write_precompressed`` then makes once)."""
    with _cache_locked(SNAPSHOT_CACHE):
        script = ROOT / "site_src" / "snapshot.mjs"
        cached = _snapshot_entry(python_zip)
        digest_file = cached.with_suffix(".sha256")
        modules_file = cached.with_suffix(".modules.json")
        if cached.exists() and digest_file.exists() and modules_file.exists():
            data = cached.read_bytes()
            if hashlib.sha256(data).hexdigest() == digest_file.read_text().strip():
                return data, json.loads(modules_file.read_text())  # a damaged cache entry is made again, never shipped
        node = shutil.which("node")
        if node is None:
            raise BuildError("node is needed to make the Pyodide memory snapshot (install Node.js 20 or newer)")
        with tempfile.TemporaryDirectory() as tmp:
            zip_path, out_path = Path(tmp) / "site-python.zip", Path(tmp) / "snapshot.bin"
            warm_path = Path(tmp) / "warmup.json"
            zip_path.write_bytes(python_zip)
            warm_path.write_bytes(warmup_json())
            try:
                res = subprocess.run([node, str(script), str(PYODIDE_DIR), str(zip_path), str(out_path), str(warm_path)],
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
            said = json.loads(res.stdout.strip().splitlines()[-1])
            modules = sorted(said["modules"])
        # Unique temporary names: concurrent builds never write into one file.
        for path, content in ((cached, data), (modules_file, json.dumps(modules).encode()),
                              (cached.with_suffix(".zeroed"), str(int(said.get("zeroed", 0))).encode()),
                              (digest_file, hashlib.sha256(data).hexdigest().encode())):
            fd, tmp_name = tempfile.mkstemp(dir=SNAPSHOT_CACHE, prefix=path.name + ".")
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            os.replace(tmp_name, path)
        return data, modules


def snapshot_zeroed(python_zip: bytes) -> int:
    """Bytes of free heap memory the snapshot maker zeroed before taking the
    snapshot of ``python_zip`` (``site_src/snapshot.mjs`` ``zeroFreeMemory``:
    freed memory compresses badly), as it reported them; 0 when unknown."""
    snapshot_and_modules(python_zip)
    found = _snapshot_entry(python_zip).with_suffix(".zeroed")
    return int(found.read_text() or 0) if found.exists() else 0


def _snapshot_entry(python_zip: bytes) -> Path:
    """The cache file of the snapshot of ``python_zip``: named by the hash of
    everything that goes into it (the zip, Pyodide's version, the scripts, the
    warm-up's recipe)."""
    script = ROOT / "site_src" / "snapshot.mjs"
    key = hashlib.sha256(python_zip + pyodide_version().encode() + script.read_bytes()
                         + (ROOT / "site_src" / "assets" / "boot-python.mjs").read_bytes()
                         + warmup_json()).hexdigest()[:24]
    return SNAPSHOT_CACHE / f"{key}.bin"


WARMUP_RECIPE = "moonshotai/Kimi-K3"
WARMUP_QUERIES = ("",)
"""What the snapshot maker composes before it takes the snapshot (issue 22:
the first plan after a restore cost several times a later one). Pages of
every recipe share one snapshot, so the warm-up fills only what any recipe
reuses (the vLLM flag table's look-ups, the schema's field types, Jinja2's
first renders); the warm-up recipe's own context is dropped. One plan of one
of our recipes, whatever directory is built: more left more freed memory in
the snapshot than it saved time (``WARM_PY`` in boot-python.mjs has the
figures)."""


@functools.cache
def warmup_json() -> bytes:
    """``{"recipe", "catalog", "queries"}`` of ``WARMUP_RECIPE`` as the page's
    worker receives them (the build's JSON documents), for the snapshot maker."""
    from composer.buildtime.loader import load_catalog, load_recipe

    recipes = ROOT / "recipes"
    recipe = json.dumps({"id": WARMUP_RECIPE, "recipe": dump(load_recipe(recipes, WARMUP_RECIPE))}, separators=(",", ":"))
    catalog = json.dumps(dump(load_catalog(recipes)), separators=(",", ":"))
    return json.dumps({"recipe": recipe, "catalog": catalog, "queries": list(WARMUP_QUERIES)}).encode()


def _imports_of(source: bytes, module: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``source`` imports anywhere (top level or
    inside a function), relative imports resolved; ``from a import b`` also
    names ``a.b`` (it may be a submodule)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1]) if node.level <= len(parts) else ""
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            if name:
                out.add(name)
                out.update(f"{name}.{a.name}" for a in node.names)
    return {n for n in out if n}


SNAPSHOT_STDLIB_ALWAYS = ("encodings.ascii", "encodings.latin_1", "encodings.utf_16", "encodings.utf_32",
                          "encodings.utf_8_sig", "encodings.raw_unicode_escape", "encodings.charmap",
                          "encodings.idna", "encodings.punycode")
"""Codecs the trimmed zip keeps although no import statement names them: they
are looked up by name at run time (``codecs.lookup``)."""


_STDLIB_ZIP: dict[tuple, tuple[bytes, list[str]]] = {}


def snapshot_stdlib_zip(snapshot_modules: list[str], python_zip: bytes) -> tuple[bytes, list[str]]:
    """``_snapshot_stdlib_zip``, kept for its inputs in this process (the
    modules, the shipped Python's bytes, Pyodide's zip by size and time): it
    parses ~120 modules (1–2 s), and a test run builds a site a dozen times."""
    stdlib = (PYODIDE_DIR / "python_stdlib.zip").stat()
    key = (tuple(snapshot_modules), sha256_hex(python_zip), stdlib.st_size, stdlib.st_mtime_ns)
    if key not in _STDLIB_ZIP:
        _STDLIB_ZIP.clear()
        _STDLIB_ZIP[key] = _snapshot_stdlib_zip(snapshot_modules, python_zip)
    data, names = _STDLIB_ZIP[key]
    return data, list(names)


def _snapshot_stdlib_zip(snapshot_modules: list[str], python_zip: bytes) -> tuple[bytes, list[str]]:
    """The standard library a page restoring the snapshot can still need:
    ``(zip bytes, module names)``. Every module the shipped Python
    (``python_zip``: composer, Jinja2, MarkupSafe) imports anywhere (a
    function's lazy import included) that the snapshot does not hold yet
    (``snapshot_modules``), with what those import in turn, plus
    ``SNAPSHOT_STDLIB_ALWAYS``. The snapshot's own modules are never
    re-imported (sys.modules is part of the restored memory), so Pyodide's
    2.5 MB zip (``python_stdlib.zip``) is left to the cold boot; the lazy
    imports inside the snapshot's standard-library modules (asyncio's Windows
    loop, pydoc, …) are not followed: nothing the page calls reaches them, and
    tests/test_pyodide.py composes 200+ pages on this zip."""
    full = zipfile.ZipFile(PYODIDE_DIR / "python_stdlib.zip")
    members = {}  # module name -> (zip member, is package)
    for name in full.namelist():
        if name.endswith("/__init__.py"):
            members[name[: -len("/__init__.py")].replace("/", ".")] = (name, True)
        elif name.endswith(".py"):
            members[name[:-3].replace("/", ".")] = (name, False)
    held = set(snapshot_modules)
    wanted: set[str] = set()
    todo: list[str] = []
    with zipfile.ZipFile(io.BytesIO(python_zip)) as site:
        for name in site.namelist():
            if name.endswith(".py"):
                mod = name[:-3].replace("/", ".")
                pkg = mod.endswith(".__init__")
                todo += _imports_of(site.read(name), mod.removesuffix(".__init__"), pkg)
    todo += [m for m in SNAPSHOT_STDLIB_ALWAYS if m in members]
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):  # a submodule needs its packages
            name = ".".join(parts[:i])
            if name in members and name not in held and name not in wanted:
                wanted.add(name)
                todo += _imports_of(full.read(members[name][0]), name, members[name][1])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for mod in sorted(wanted):
            info = zipfile.ZipInfo(members[mod][0], date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, full.read(members[mod][0]))
    return buf.getvalue(), sorted(wanted)


def install_browser_templates() -> None:
    """Compile the page's templates for ``composer.render.page_json`` in this
    process (the build renders views ahead with the worker's own function)."""
    from composer import render

    render.install_templates({t: (ROOT / "site_src" / t).read_text(encoding="utf-8") for t in BROWSER_TEMPLATES})


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` in lower-case hex: what the page checks every
    fetched runtime and data file against (``runtime_files`` of the page)."""
    return hashlib.sha256(data).hexdigest()


COMPRESS_MIN_BYTES = 16 * 1024
"""Files at least this big get pre-compressed ``.gz`` and ``.br`` copies next to them."""
COMPRESSED_SUFFIXES = (".wasm", ".zip", ".bin", ".mjs", ".js", ".json", ".html", ".css")


def write_precompressed(root: Path) -> dict[str, int]:
    """Write ``<file>.gz`` (gzip level 9) and ``<file>.br`` (Brotli quality 11,
    with Node's zlib: ``site_src/compress.mjs``) next to every file of ``root``
    of at least ``COMPRESS_MIN_BYTES``, for hosts that serve a pre-compressed
    copy (nginx ``gzip_static``/``brotli_static``, Caddy ``precompressed``).
    Both are cached in ``.cache/compressed`` by content hash (Brotli 11 of the
    runtime takes about two minutes of one core, measured 2026-12-02 on this
    2-core machine: 131 s cold against 13 s for a build with the cache
    filled). Concurrent builds (the test workers, two ``make serve``) take
    turns on the cache's lock, so the Brotli work is done once, not once per
    build. Returns ``{"files", "bytes", "gz_bytes", "br_bytes"}``."""
    import gzip

    with _cache_locked(COMPRESS_CACHE):
        out = {"files": 0, "bytes": 0, "gz_bytes": 0, "br_bytes": 0}
        todo: list[tuple[Path, Path, Path]] = []  # (source, cache entry, destination) still to make with Brotli
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix not in COMPRESSED_SUFFIXES or path.stat().st_size < COMPRESS_MIN_BYTES:
                continue
            data = path.read_bytes()
            key = sha256_hex(data)[:32]
            gz_cache = COMPRESS_CACHE / f"{key}.gz"
            if not gz_cache.exists():
                _atomic_write(gz_cache, gzip.compress(data, 9, mtime=0))
            shutil.copyfile(gz_cache, path.with_name(path.name + ".gz"))
            br_cache = COMPRESS_CACHE / f"{key}.br"
            if br_cache.exists():
                shutil.copyfile(br_cache, path.with_name(path.name + ".br"))
            else:
                todo.append((path, br_cache, path.with_name(path.name + ".br")))
            out["files"] += 1
            out["bytes"] += len(data)
        node = shutil.which("node")
        if todo and node is None:
            raise BuildError("node is needed to write the Brotli copies of the big files (install Node.js 20 or newer)")
        if todo:
            with tempfile.TemporaryDirectory(dir=COMPRESS_CACHE) as tmp:
                args = [a for i, (src, _, _) in enumerate(todo) for a in (str(src), str(Path(tmp) / f"{i}.br"))]
                res = subprocess.run([node, str(ROOT / "site_src" / "compress.mjs"), *args], capture_output=True, text=True, timeout=600)
                if res.returncode != 0:
                    raise BuildError(f"could not write the Brotli copies (node exited with {res.returncode}): {res.stderr[-500:]}")
                for i, (_, cache, dst) in enumerate(todo):
                    os.replace(Path(tmp) / f"{i}.br", cache)
                    shutil.copyfile(cache, dst)
        for path in root.rglob("*"):
            if path.suffix == ".gz":
                out["gz_bytes"] += path.stat().st_size
            elif path.suffix == ".br":
                out["br_bytes"] += path.stat().st_size
        return out


def _atomic_write(path: Path, content: bytes) -> None:
    """Write ``path`` through a unique temporary name and a rename (concurrent builds share the cache)."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)
    os.replace(tmp_name, path)


def write_runtime(tmp: Path) -> dict:
    """Write the browser runtime into ``tmp/runtime`` under content-hashed names
    (cacheable forever: a changed file gets a new name) and return the URLs
    and facts the page needs (relative to the site root). ``files`` maps every
    runtime file's URL to its SHA-256: the worker checks each one before use."""
    core = hashlib.sha256(b"".join((PYODIDE_DIR / n).read_bytes() for n in PYODIDE_FILES)).hexdigest()[:12]
    pyodide_dir = tmp / "runtime" / f"pyodide-{core}"
    pyodide_dir.mkdir(parents=True)
    files = {}
    for name in PYODIDE_FILES:
        shutil.copy2(PYODIDE_DIR / name, pyodide_dir / name)
        files[f"runtime/pyodide-{core}/{name}"] = sha256_hex((PYODIDE_DIR / name).read_bytes())
    python_zip = site_python_zip()
    full, modules = snapshot_and_modules(python_zip)
    stdlib, _ = snapshot_stdlib_zip(modules, python_zip)
    wasm, patch = snapshot_wasm(full)
    snapshot = packed_snapshot(full)  # what the page fetches: the worker unpacks it after its check
    names = {"python": f"python-{sha256_hex(python_zip)[:12]}.zip",
             "snapshot": f"snapshot-{sha256_hex(snapshot)[:12]}.bin",
             "stdlib": f"stdlib-{sha256_hex(stdlib)[:12]}.zip",
             "wasm": f"wasm-nodata-{sha256_hex(wasm)[:12]}.wasm",
             "patch": f"wasm-data-{sha256_hex(patch)[:12]}.bin"}
    for key, data in (("python", python_zip), ("snapshot", snapshot), ("stdlib", stdlib), ("wasm", wasm),
                      ("patch", patch)):
        (tmp / "runtime" / names[key]).write_bytes(data)
        files[f"runtime/{names[key]}"] = sha256_hex(data)
    return {"index": f"runtime/pyodide-{core}/", "python": f"runtime/{names['python']}",
            "snapshot": f"runtime/{names['snapshot']}", "snapshot_size": len(snapshot),
            "snapshot_memory": len(full),
            "snapshot_sha256": sha256_hex(snapshot), "pyodide_version": pyodide_version(),
            "stdlib": f"runtime/{names['stdlib']}", "wasm": f"runtime/{names['wasm']}",
            "wasm_patch": f"runtime/{names['patch']}", "files": files}


_PACKED: dict[str, bytes] = {}


def packed_snapshot(snapshot: bytes) -> bytes:
    """``snapshot`` without its all-zero pages, as the page fetches it
    (``composer.buildtime.sparse``: 37.7 → 18.7 MB raw on the build of
    2026-12-06, the gzip size nearly the same). Kept per snapshot in this
    process."""
    from composer.buildtime import sparse

    key = sha256_hex(snapshot)
    if key not in _PACKED:
        _PACKED.clear()
        _PACKED[key] = sparse.pack(snapshot)
    return _PACKED[key]


_SNAPSHOT_WASM: dict[str, tuple[bytes, bytes]] = {}


def snapshot_wasm(snapshot: bytes) -> tuple[bytes, bytes]:
    """``(wasm module, data patch)`` the snapshot path instantiates instead
    of Pyodide's ``pyodide.asm.wasm``: the same module with its data segments
    emptied, and the patch that rebuilds them from ``snapshot``
    (``composer.buildtime.wasm_data``: 3.5 → 2.1 MB gzip for a 7 KB patch on
    Pyodide 314.0.7). Kept per snapshot in this process (0.3 s each). Raises
    ``BuildError`` for a module whose data segments are not of the kind it
    can rebuild."""
    from composer.buildtime import wasm_data

    key = sha256_hex(snapshot)
    if key not in _SNAPSHOT_WASM:
        full = (PYODIDE_DIR / "pyodide.asm.wasm").read_bytes()
        try:
            _SNAPSHOT_WASM.clear()
            _SNAPSHOT_WASM[key] = (wasm_data.without_data(full), wasm_data.snapshot_patch(full, snapshot))
        except wasm_data.WasmDataError as e:
            raise BuildError(f"{PYODIDE_DIR / 'pyodide.asm.wasm'}: {e}") from None
    return _SNAPSHOT_WASM[key]


def snapshot_runtime_dir(folder: Path, snapshot: bytes) -> tuple[Path, Path]:
    """``(Pyodide directory, data patch file)`` as the snapshot path serves
    them, for restoring ``snapshot`` in Node exactly as the page's worker does
    (tests/pyodide_restore.mjs; the tests and ``bench``): Pyodide's files
    linked under ``folder/pyodide/`` with the module of ``snapshot_wasm`` in
    place of ``pyodide.asm.wasm``, and the patch in ``folder/wasm-data.bin``."""
    wasm, patch = snapshot_wasm(snapshot)
    pyodide = folder / "pyodide"
    pyodide.mkdir(parents=True, exist_ok=True)
    for name in PYODIDE_FILES + ("package.json",):
        target = pyodide / name
        if target.exists() or target.is_symlink():
            target.unlink()
        if name == "pyodide.asm.wasm":
            target.write_bytes(wasm)
        else:
            target.symlink_to((PYODIDE_DIR / name).resolve())
    (folder / "wasm-data.bin").write_bytes(patch)
    return pyodide, folder / "wasm-data.bin"


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
        by_hw[hw] = api_plan(plan if same else compose(ctx, {"hardware": hw}, every_form=False))
    return {"id": ctx.recipe_id, "recipe": dump(recipe),
            "default_plan": api_plan(plan), "by_hardware": by_hw}


def write_public_recipe(tmp: Path, ctx, recipe: Recipe, recipe_ids=()) -> dict[str, dict]:
    """The public site's API files of one recipe (``composer.buildtime.public_api``):
    ``/<id>.json`` and its ``hw/`` and ``strategies/`` subtree. Returns the
    files of its promoted variants (``public_api.promoted_variants`` against
    ``recipe_ids``), not written yet: ``{model id: {"variant", "files":
    [(path, JSON text)]}}`` — two recipes may promote the same id, which only
    the whole build can see (``write_promoted``)."""
    catalog = ctx.catalog
    data = dump(catalog)
    recipe_data = dump(recipe)

    def files_of(variant_key=None):
        return public_api.recipe_files(
            ctx, recipe_data, lambda c, q: compose(c, q, every_form=False),
            lambda c, q: group_options(c, q, "strategy"),
            lambda sid: {"id": sid, **data["strategies"].get(sid, {})},
            lambda hw: {"id": hw, **data["taxonomy"]["hardware_profiles"][hw]}, variant_key=variant_key,
            kv_options=lambda c, q: group_options(c, q, "kv_offload"))

    for rel, doc in files_of():
        _site_path(tmp, rel).write_text(json.dumps(doc, separators=(",", ":")))
    return {mid: {"variant": key, "label": ctx.variant_label(key),
                  "files": [(rel, json.dumps(doc, separators=(",", ":"))) for rel, doc in files_of(key)]}
            for key, mid in public_api.promoted_variants(ctx, recipe_ids).items()}


def _site_path(tmp: Path, rel: str) -> Path:
    """``tmp / rel`` for a file the build writes, refusing a ``rel`` that
    would leave ``tmp`` (``..``, an absolute path, an empty part): ids from
    recipe, strategy and taxonomy files end up in these names (adversarial
    finding: a strategy ``name: ../../x`` wrote outside --out). Raises
    BuildError."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in rel or "\x00" in rel:
        raise BuildError(f"refusing to write {rel[:120]!r}: not a path inside the site")
    path = tmp / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_promoted(tmp: Path, entries: list[dict]) -> list[dict]:
    """Write the promoted variants' API files that ``write_public_recipe``
    returned (``entry["promoted"]``), except a model id two recipes promote
    (in any case: which one is meant is unknowable); point each parent's
    ``/<id>.json`` ``variants.<key>.json`` at its file (semantics §13:
    "promoted variants are listed in the parent"). Returns their
    ``/models.json`` rows."""
    claims: dict[str, int] = {}
    for e in entries:
        for mid in e.get("promoted", {}):
            claims[mid.lower()] = claims.get(mid.lower(), 0) + 1
    rows = []
    for e in entries:
        promoted = {mid: p for mid, p in e.get("promoted", {}).items() if claims[mid.lower()] == 1}
        if not promoted:
            continue
        parent_path = tmp / f"{e['id']}.json"
        parent = json.loads(parent_path.read_text())
        for mid, p in promoted.items():
            for rel, text in p["files"]:
                _site_path(tmp, rel).write_text(text)
            parent.setdefault("variants", {}).setdefault(p["variant"], {})["json"] = f"/{mid}.json"
            rows.append({**public_api.model_entry(e), "hf_id": mid, "title": f"{e['title']} · {p['label']}", "json": f"/{mid}.json",
                         "url": f"/{e['id']}/?variant={p['variant']}", "parent": e["id"], "variant": p["variant"]})
        parent_path.write_text(json.dumps(parent, separators=(",", ":")))
    return rows


def index_entry(ctx, recipe: Recipe, plan: dict) -> dict:
    """One row of the index page and of ``api/index.json``.

    ``hardware``: every offered hardware some variant runs on; ``tags``: tasks,
    precisions and architecture (``MoE`` when the recipe counts routed experts),
    what the index search matches besides names; ``size_b``: the parameter count
    in billions (None if the recipe gives none), for sorting; ``checkpoints``:
    ``[checkpoint id, variant key or None]`` served under another id (the
    redirects of ``composer.buildtime.routes``)."""
    precisions = sorted({v.precision.upper() for v in recipe.variants.values() if v.precision})
    arch = [recipe.model.architecture] if recipe.model.architecture else []
    moe = ["MoE"] if recipe.model.routed_experts and "moe" not in (a.lower() for a in arch) else []
    tags = list(dict.fromkeys([*recipe.meta.tasks, *precisions, *arch, *moe]))
    return {
        "id": ctx.recipe_id, "title": recipe.meta.title, "provider": recipe.meta.provider,
        "description": recipe.meta.description, "tasks": list(recipe.meta.tasks),
        "size": str(recipe.model.parameter_count or ""), "size_b": parameter_billions(recipe.model.parameter_count),
        "precisions": precisions, "tags": tags,
        "verified_hardware": [h for h in ctx.listed_hardware if ctx.is_verified(h)],
        "hardware": [h for h in ctx.listed_hardware if any(ctx.hardware_block_reason(h, v) is None for v in recipe.variants)],
        "checkpoints": [list(c) for c in checkpoints(ctx.recipe_id, recipe)],
        "default_summary": plan["summary"], "page": f"{ctx.recipe_id}/", "json": f"api/{ctx.recipe_id}.json",
    }


def parameter_billions(count) -> float | None:
    """A parameter count in billions: ``"235B"`` → 235, ``"1T"`` → 1000,
    ``"500M"`` → 0.5; a bare number of at least a million is a raw count, a
    smaller one already billions. None for anything else."""
    if isinstance(count, (int, float)) and not isinstance(count, bool):
        return round(count / 1e9, 3) if count >= 1e6 else float(count)
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMBT]?)\s*", str(count or ""), re.IGNORECASE)
    if not m:
        return None
    scale = {"": 1.0, "K": 1e-6, "M": 1e-3, "B": 1.0, "T": 1e3}[m.group(2).upper()]
    return round(float(m.group(1)) * scale, 3)


def hardware_labels(profiles: dict) -> dict[str, str]:
    """``{hw id: label}`` with no two labels alike: a display name that two
    profiles share (the corpus has two "RTX 5090") gets the GPU count, then the
    id if that is still not enough."""
    names = {h: p.display_name for h, p in profiles.items()}
    counts: dict[str, int] = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    labels = {h: (f"{n} ({p.gpu_count} GPU{'s' if p.gpu_count != 1 else ''})" if counts[n] > 1 else n)
              for (h, n), p in zip(names.items(), profiles.values())}
    again: dict[str, int] = {}
    for n in labels.values():
        again[n] = again.get(n, 0) + 1
    return {h: (f"{n} [{h}]" if again[n] > 1 else n) for h, n in labels.items()}


def index_facets(items: list[dict], hardware: dict[str, str]) -> list[dict]:
    """The index's multi-select filters: ``[{name, legend, options: [{value,
    label, count}]}]``; counts are of ``items`` (the page recounts them for the
    other filters chosen). Providers and tasks sorted by name, hardware in
    taxonomy order."""
    def count(values: list[str], label=lambda v: v) -> list[dict]:
        seen: dict[str, int] = {}
        for v in values:
            seen[v] = seen.get(v, 0) + 1
        return [{"value": v, "label": label(v), "count": n} for v, n in seen.items()]

    providers = sorted(count([e["provider"] for e in items if e["provider"]]), key=lambda o: o["label"].lower())
    tasks = sorted(count([t for e in items for t in e["tasks"]]), key=lambda o: o["label"].lower())
    precisions = sorted(count([p for e in items for p in e["precisions"]]), key=lambda o: o["label"])
    verified = {o["value"]: o for o in count([h for e in items for h in e["verified_hardware"]], hardware.get)}
    return [
        {"name": "provider", "legend": "Provider", "options": providers},
        {"name": "task", "legend": "Task", "options": tasks},
        {"name": "hardware", "legend": "Verified on", "options": [verified[h] for h in hardware if h in verified]},
        {"name": "precision", "legend": "Precision", "options": precisions},
    ]


def left_out(errors: list[RecipeError]) -> dict[str, list[str]]:
    """``{recipe id: [problem, …]}`` of the recipes a ``--keep-going`` build
    left out (each problem ``key: message``, at most three per recipe), from
    the errors of files ``models/<org>/<repo>.yaml``: the index lists them and
    ``404.html`` says why at their address, so the reason is not only in the
    build log (a fresh user's finding)."""
    out: dict[str, list[str]] = {}
    for e in errors:
        m = re.fullmatch(r"models/([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)\.yaml", e.file)
        if m:
            found = out.setdefault(m.group(1), [])
            if len(found) < 3:
                found.append(f"{e.key or '(top level)'}: {e.message}"[:400])
    return out


def write_redirects(tmp: Path, env, entries: list[dict], base_path: str, missing: dict[str, list[str]] | None = None) -> None:
    """``404.html`` (a static host serves it for any unknown path: its script
    sends a path in another case, or a variant's checkpoint id, to the recipe
    page with the query kept; at the address of a recipe the build left out,
    ``missing``, it says why) and a redirect stub at every exact checkpoint
    path (``/<org>/<name>-FP8/`` → the recipe with ``?variant=<key>``), never
    over a page of the site (``composer.buildtime.routes``)."""
    served = {e["id"]: [tuple(c) for c in e["checkpoints"]] for e in entries}
    routes = route_map(served)
    gone = {rid.lower(): {"id": rid, "problems": problems} for rid, problems in (missing or {}).items()}
    (tmp / "404.html").write_text(env.get_template("404.html").render(base=base_path, routes_json=script_json(routes),
                                                                      left_out_json=script_json(gone)))
    stub = env.get_template("redirect.html")
    for mid, target in variant_routes(served).items():
        folder = tmp / mid
        if (folder / "index.html").exists() or folder.is_file():
            continue  # a page of the site (or an earlier stub) is never replaced
        prefix = "../" * (mid.count("/") + 1)
        folder.mkdir(parents=True, exist_ok=True)  # a promoted variant's API subtree may be there (hw/)
        (folder / "index.html").write_text(stub.render(prefix=prefix, target=f"{prefix}{target['id']}/",
                                                       variant=target["variant"], model_id=mid, rid=target["id"]))


def script_json(data) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&``
    are escaped so recipe text can never close the element or open a comment."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def recipe_schema() -> dict:
    """JSON Schema of a recipe file, generated from the pydantic models (the same
    models the build validates with)."""
    return schema_of_recipes()


PRERENDER_NEIGHBOURS = 64
"""How many plans one click away from the recipe default the build renders
ahead for each recipe (besides one per hardware, always): a deep link to
one of them opens without the Python runtime. 0 turns them off."""


def prerender_views(tmp: Path, rid: str, recipe_text: str, catalog_text: str, ctx, default_view: dict,
                    neighbours: int = PRERENDER_NEIGHBOURS) -> dict:
    """Render ahead the page views a deep link most likely asks for, so the
    page shows them without booting Python: the plan of every offered
    hardware (``?hardware=<id>``, as ``api/<rid>.json`` has it), the default's
    pinned share link, and up to ``neighbours`` plans one click away from the
    default (the options' own queries, in page order). Each view is
    ``composer.render.page_json`` (the worker's own function: the same bytes)
    written to ``data/views/<rid>/<sha256[:16]>.json``. Returns the page's
    index ``{"views": {path: sha256}, "links": {query text: path}}``: a view
    is listed under the query the build composed and under its plan's
    ``url`` when the worker answers that with the same bytes."""
    from composer import render

    variant = "default" if "default" in ctx.recipe.variants else next(iter(ctx.recipe.variants))
    asks = [default_view["share_url"].removeprefix("?")]
    asks += [f"hardware={hw}" for hw in ctx.listed_hardware if not ctx.hardware_block_reason(hw, variant)]
    if neighbours:
        clicks = [o["query"] for items in default_view["options"].values() for o in items
                  if not o["disabled"] and not o["selected"]]
        asks += list(dict.fromkeys(clicks))[:neighbours]
    views: dict[str, str] = {}
    links: dict[str, str] = {}
    folder = tmp / "data" / "views" / rid
    folder.mkdir(parents=True, exist_ok=True)
    for ask in dict.fromkeys(a for a in asks if a):
        text = render.page_json(recipe_text, catalog_text, ask)
        data = text.encode()
        digest = sha256_hex(data)
        path = f"data/views/{rid}/{digest[:16]}.json"
        if path not in views:
            (tmp / path).write_bytes(data)
            views[path] = digest
        links.setdefault(ask, path)
        # The address the page shows for it (its plan's url) asks for the same
        # view only if the worker would answer it with the same bytes.
        url = json.loads(text)["plan"]["url"].removeprefix("?")
        if url and url not in links and render.page_json(recipe_text, catalog_text, url) == text:
            links[url] = path
    return {"views": views, "links": links}


_JOB: dict = {}
"""State shared with the page-building worker processes (set before they fork)."""


def _recipe_job(rid: str) -> tuple[str, dict | None, list[RecipeError]]:
    """Validate one recipe and, if it is good, write its page, browser data and
    API document into the build directory. Runs in a worker process."""
    try:
        return _render_recipe(rid)
    except Exception as exc:  # a recipe the checks let through must still not crash the build
        return rid, None, [RecipeError(f"models/{rid}.yaml", "", f"could not be composed: {type(exc).__name__}: {exc}")]


def _checked_recipe(recipes_dir: Path, rid: str, path: Path, catalog, strict: bool) -> tuple[Recipe | None, list[RecipeError]]:
    """``check_recipe`` for the build's first pass; a recipe the checks crash
    on is an error of that file, as in ``_recipe_job``."""
    try:
        return check_recipe(recipes_dir, rid, path, catalog, strict)
    except Exception as exc:
        return None, [RecipeError(f"models/{rid}.yaml", "", f"could not be checked: {type(exc).__name__}: {exc}")]


def _render_recipe(rid: str) -> tuple[str, dict | None, list[RecipeError]]:
    job = _JOB
    recipe, problems = job["checked"].get(rid) or check_recipe(job["recipes_dir"], rid, job["paths"][rid], job["catalog"],
                                                               job["strict"])
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
    promoted = write_public_recipe(tmp, ctx, recipe, job["paths"]) if rid in job["public_ids"] else {}
    prefix = "../" * (rid.count("/") + 1)
    data_url = f"{prefix}data/{rid}.json?h={_short_hash(recipe_text)}"
    files = {**runtime["files"], f"data/{rid}.json": sha256_hex(recipe_text.encode())}
    prerendered = prerender_views(tmp, rid, recipe_text, job["catalog_text"], ctx, plan, job["neighbours"])
    header = recipe_header(recipe, rid, f"models/{rid}.yaml", job["repo_url"], job["repo_branch"])
    html = job["env"].get_template("recipe.html").render(plan=plan, recipe=recipe, rid=rid, prefix=prefix, runtime=runtime,
                                                         plan_json=script_json(plan), data_url=data_url,
                                                         text_json=script_json(plan_text(plan)),
                                                         files_json=script_json(files), prerendered_json=script_json(prerendered),
                                                         header=header, guide_html=render_guide(recipe.guide))
    (tmp / rid).mkdir(parents=True, exist_ok=True)
    (tmp / rid / "index.html").write_text(html)
    return rid, {**index_entry(ctx, recipe, plan), "promoted": promoted}, problems


def build(recipes_dir: Path, out: Path, keep_going: bool = False, jobs: int | None = None, strict: bool = False,
          repo_url: str = DEFAULT_REPO_URL, repo_branch: str = DEFAULT_REPO_BRANCH, base_path: str = "/",
          neighbours: int = PRERENDER_NEIGHBOURS, precompress: bool = True, progress=None) -> dict:
    """Build the whole site into ``out``; returns ``{recipes, out, errors, warnings}``.

    ``warnings`` lists what vLLM's CLI would refuse or ignore in the recipes
    (``composer.buildtime.validate.lint_recipe``) and the strategy files that declare no
    ``kind`` (``composer.buildtime.checks.check_catalog``); with ``strict`` those are errors.

    Recipes are validated and rendered in ``jobs`` worker processes (default:
    one per CPU). ``repo_url`` and ``repo_branch`` say where the recipes live
    (each page links there to edit its recipe and to report a problem).
    Raises RecipeLoadError (bad recipes, unless ``keep_going``;
    every problem of every recipe is listed) or BuildError (missing runtime
    pieces). Nothing is written to ``out`` unless the build completes; without
    ``keep_going`` every recipe is checked before the build writes anything, so
    a bad recipe fails in a fraction of a second, not after the runtime is made.

    ``neighbours``: how many plans one click from each default are rendered
    ahead (``prerender_views``). ``precompress``: write the ``.gz``/``.br``
    copies of the big runtime files (``write_precompressed``; off for a host
    that compresses on the fly, and for test builds that do not look at them).

    ``base_path`` is the URL path the site is served under (``/`` or
    ``/<repo>/`` on GitHub Pages): ``404.html``, served at any unknown depth,
    loads its script and styles from there.

    ``progress``: called with a line of what the build is doing (waiting for
    another build's lock, the runtime, every tenth of the recipes); the CLI
    prints them on stderr, so a 9-minute corpus build is never silent.
    """
    say = progress or (lambda _line: None)
    repo_url = check_repo_url(repo_url)
    if not base_path.startswith("/") or not base_path.endswith("/") or not _SAFE_BASE.match(base_path):
        raise BuildError(f"--base-path {base_path!r} must be a URL path that starts and ends with '/', e.g. / or /recipes/")
    catalog, catalog_warnings = check_catalog(recipes_dir, strict)
    paths = recipe_paths(recipes_dir)
    clashes = [RecipeError(f"models/{rid}.yaml", "", f"the recipe id {rid!r} {why}; the file is not built")
               for rid in paths if (why := site_name_clash(rid))]
    paths = {rid: p for rid, p in paths.items() if not site_name_clash(rid)}
    # Ids that differ only in letter case share their folders on a host that folds case (adversarial finding):
    # the first in sorted order is built, the others are errors naming it.
    first: dict[str, str] = {}
    for rid in sorted(paths):
        if rid.lower() in first:
            clashes.append(RecipeError(f"models/{rid}.yaml", "", f"the recipe id {rid!r} differs from "
                                       f"{first[rid.lower()]!r} only in letter case, and a static host may fold case; "
                                       "the file is not built"))
        else:
            first[rid.lower()] = rid
    paths = {rid: p for rid, p in paths.items() if first[rid.lower()] == rid}
    if not paths and clashes:
        raise RecipeLoadError(clashes)
    if not paths:
        raise RecipeLoadError([RecipeError("models/", "", "no recipes found (expected models/<org>/<repo>.yaml)")])
    checked = None
    if not keep_going:  # a build that must stop on a bad recipe stops before it writes anything
        checked = {rid: _checked_recipe(recipes_dir, rid, p, catalog, strict) for rid, p in paths.items()}
        early = unsafe_recipe_files(recipes_dir) + clashes + [e for _, errs in checked.values() for e in errs
                                                                if e.level == "error"]
        if early:
            raise RecipeLoadError(early)
    missing = [n for n in PYODIDE_FILES + ("package.json",) if not (PYODIDE_DIR / n).is_file()]
    if missing:
        raise BuildError(f"Pyodide is not (fully) installed at {PYODIDE_DIR} (missing {', '.join(missing)}): run `npm ci` in {ROOT}")
    env = environment(FileSystemLoader(ROOT / "site_src"))
    out = out.resolve()
    check_output_dir(out, recipes_dir.resolve())
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(out.parent / LOCK_NAME, say)
    _remove_stale_builds(out.parent)
    tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=out.parent))
    try:
        (tmp / SITE_MARKER).write_text("Built by build.py; this directory is replaced by the next build.\n")
        for sub in ("assets", "data", "api", "schema"):
            (tmp / sub).mkdir()
        for asset in (ROOT / "site_src" / "assets").iterdir():
            shutil.copy2(asset, tmp / "assets" / asset.name)
        say("making the Python runtime for the page (a memory snapshot: about a minute when not cached)")
        runtime = write_runtime(tmp)
        catalog_text = json.dumps(dump(catalog), separators=(",", ":"))
        (tmp / "data" / "catalog.json").write_text(catalog_text)
        (tmp / "schema" / "recipe.schema.json").write_text(json.dumps(recipe_schema(), indent=1))
        runtime["catalog"] = f"data/catalog.json?h={_short_hash(catalog_text)}"
        runtime["files"]["data/catalog.json"] = sha256_hex(catalog_text.encode())
        install_browser_templates()
        _JOB.update(recipes_dir=recipes_dir, paths=paths, catalog=catalog, tmp=tmp, runtime=runtime, env=env, strict=strict,
                    repo_url=repo_url, repo_branch=repo_branch, public_ids=public_api_ids(paths),
                    catalog_text=catalog_text, neighbours=neighbours, checked=checked or {})
        jobs = jobs or os.cpu_count() or 1
        parallel = jobs > 1 and len(paths) >= 8
        say(f"building {len(paths)} recipe page(s) with {min(jobs, len(paths)) if parallel else 1} process(es)")
        step = max(1, len(paths) // 10)

        def counted(found):
            results = []
            for n, r in enumerate(found, 1):
                results.append(r)
                if n % step == 0 or n == len(paths):
                    say(f"  {n}/{len(paths)} recipe page(s)")
            return results

        if parallel:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                results = counted(pool.imap(_recipe_job, list(paths), chunksize=4))
        else:
            results = counted(_recipe_job(rid) for rid in paths)
        errors = unsafe_recipe_files(recipes_dir) + clashes + [e for _, _, errs in results for e in errs if e.level == "error"]
        warnings = catalog_warnings + [e for _, _, errs in results for e in errs if e.level != "error"]
        if errors and not keep_going:
            raise RecipeLoadError(errors)
        entries = sorted((entry for _, entry, _ in results if entry is not None), key=lambda e: e["title"].lower())
        promoted_rows = write_promoted(tmp, entries)
        entries = [{k: v for k, v in e.items() if k != "promoted"} for e in entries]
        hardware = hardware_labels(catalog.taxonomy.hardware_profiles)
        (tmp / "api" / "index.json").write_text(json.dumps({"recipes": entries, "hardware": hardware}, indent=1))
        # The public site's API (composer.buildtime.public_api) beside our own: parents, then promoted variants.
        (tmp / "models.json").write_text(json.dumps([public_api.model_entry(e) for e in entries
                                                     if e["id"] in _JOB["public_ids"]] + promoted_rows, indent=1))
        for rel, doc in public_api.catalog_files(dump(catalog)):
            _site_path(tmp, rel).write_text(json.dumps(doc, separators=(",", ":")))
        index = env.get_template("index.html")

        missing = left_out(errors)

        def render_index(items: list[dict], prefix: str, org: str | None) -> str:
            return index.render(recipes=items, hardware=hardware, prefix=prefix, org=org, facets=index_facets(items, hardware),
                                left_out={rid: p for rid, p in missing.items() if org is None or rid.startswith(org + "/")})

        (tmp / "index.html").write_text(render_index(entries, "", None))
        # /<org>/ lists that organisation's recipes (a directory listing otherwise).
        for org in sorted({e["id"].split("/")[0] for e in entries}):
            (tmp / org / "index.html").write_text(render_index([e for e in entries if e["id"].startswith(org + "/")], "../", org))
        write_redirects(tmp, env, entries, base_path, missing)
        if precompress:
            say("writing .gz and .br copies of the runtime files (about two minutes the first time; cached in .cache/compressed)")
            write_precompressed(tmp / "runtime")
        _swap_into_place(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        name = str(exc.filename or "")
        if name.startswith(str(tmp) + os.sep):  # say the site's path, not the temporary folder's
            raise BuildError(f"cannot write {out / os.path.relpath(name, tmp)}: {exc.strerror or exc}") from None
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _JOB.clear()
        os.close(lock)
    return {"recipes": len(entries), "out": str(out), "errors": errors, "warnings": warnings}


@contextlib.contextmanager
def _cache_locked(cache: Path):
    """Hold ``_lock(cache/.lock)`` while a build fills the cache (created
    first); a lock path that is not ours is a ``BuildError`` that names the cache."""
    cache.mkdir(parents=True, exist_ok=True)
    try:
        fd = _lock(cache / ".lock")
    except (BuildError, OSError) as exc:
        raise BuildError(f"cannot lock the cache {cache}: {exc}") from None
    try:
        yield
    finally:
        os.close(fd)


def _lock(path: Path, say=None) -> int:
    """An exclusive ``flock`` on the file ``path``: the build's own
    (``--out``'s parent / ``LOCK_NAME``: builds into one folder take turns, so a
    ``.build-*`` folder found while holding it belongs to a build that crashed)
    and the caches' (``_cache_locked``).

    The path is opened read-only with ``O_CREAT | O_NOFOLLOW | O_NONBLOCK`` (a
    symbolic link there is refused, never followed; a FIFO does not hang the
    open; an existing file is never truncated or written: ``flock`` needs no
    write access) and must be a regular file. Raises ``BuildError`` otherwise.
    When another process holds it, ``say`` (if given) is told before waiting.
    Returns the open fd."""
    import fcntl
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BuildError(f"{path} is a symbolic link; the build never follows one (remove it)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BuildError(f"{path} is not a regular file; the build never uses it as its lock (remove it)")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if say is not None:
            say(f"waiting for another build to finish (it holds {path})")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


LOCK_NAME = ".build.lock"
"""The lock next to ``--out`` (never written: only locked)."""
TEMP_PREFIX = ".build-"
"""Prefix of the temporary folders next to ``--out`` (``tempfile.mkdtemp``)."""


def _ours(path: Path) -> bool:
    """A real folder (not a link) that carries our ``SITE_MARKER`` file."""
    return not path.is_symlink() and path.is_dir() and (path / SITE_MARKER).is_file() and not (path / SITE_MARKER).is_symlink()


def _remove_stale_builds(parent: Path) -> None:
    """Remove what killed builds left next to ``--out``: temporary folders
    ``.build-*`` that carry the site marker (a half-built site, or the old site
    a swap exchanged out). Anything without the marker — a folder of someone
    else's with a name like ours, a link — is left alone."""
    for old in parent.glob(TEMP_PREFIX + "*"):
        if _ours(old):
            _remove_marked(old)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _normal_modes(tree: Path) -> None:
    """Give a finished site the modes of a freshly written tree under the
    process's umask (folders ``0o777 & ~umask``, files ``0o666 & ~umask``):
    ``mkdtemp`` made its root ``0o700`` and ``copy2`` keeps each source's
    mode, but a web server running as another user must read the site."""
    mask = _umask()
    dmode, fmode = 0o777 & ~mask, 0o666 & ~mask
    os.chmod(tree, dmode)
    for here, dirs, files in os.walk(tree):
        for d in dirs:
            if not os.path.islink(os.path.join(here, d)):
                os.chmod(os.path.join(here, d), dmode)
        for f in files:
            if not os.path.islink(os.path.join(here, f)):
                os.chmod(os.path.join(here, f), fmode)


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
"""``renameat2`` flags (linux/include/uapi/linux/fs.h)."""
_AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2():
    """glibc's ``renameat2`` (2.28+) through ctypes, or None where there is none
    (macOS, musl before 1.2.? , non-Linux): then ``_swap_into_place`` falls back."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def _rename2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False when the platform or file system
    does not offer it (``ENOSYS``, ``EINVAL``: then the caller falls back);
    raises ``OSError`` for any other failure."""
    import ctypes
    import errno

    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


_SWAP_HOOK = None
"""Test hook: called with the name of each step of ``_swap_into_place``
(``exchange``, ``exchanged``, ``removed``; fallback: ``fallback-aside``,
``fallback-placed``) so a test can kill the process there."""


def _step(name: str) -> None:
    if _SWAP_HOOK is not None:
        _SWAP_HOOK(name)


def _remove_marked(path: Path) -> None:
    """Remove one of our folders with its marker (``SITE_MARKER``) last, so a
    kill part-way leaves a folder still marked ours, which the next build's
    ``_remove_stale_builds`` removes (adversarial finding: rmtree took the
    marker early in 5 of 24 timed kills, and the rest stayed for good)."""
    for child in list(path.iterdir()) if path.is_dir() and not path.is_symlink() else ():
        if child.name == SITE_MARKER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Publish the finished site ``tmp`` at ``out`` so that ``out`` is never
    missing: on Linux one ``renameat2(RENAME_EXCHANGE)`` swaps the two folders
    atomically (the old site then sits under ``tmp``'s marked temporary name
    and is removed; a kill before that leaves it for the next build's
    ``_remove_stale_builds``); a first build uses ``RENAME_NOREPLACE``, so a
    folder that appeared at ``out`` meanwhile is never renamed over.

    Fallback where ``renameat2`` is missing (macOS, old kernels, some file
    systems): ``out`` is renamed aside to a fresh marked temporary name and
    ``tmp`` into place — two renames, so for that instant ``out`` is missing;
    a kill between them leaves the old site under the marked name, removed by
    the next build. No fixed name (``out.old``) is ever used, so nothing of
    anyone else's is renamed over or deleted."""
    _normal_modes(tmp)
    if out.is_dir() and not out.is_symlink() and not _ours(out):
        try:  # an empty folder (check_output_dir accepts one): rmdir removes it only while it is empty
            os.rmdir(out)
        except OSError:
            pass  # not empty (any more): refused below, left as it is
    if out.exists() or out.is_symlink():
        if not _ours(out):
            raise BuildError(f"--out {out} is not a site built by build.py (no {SITE_MARKER}); it is left as it is")
        _step("exchange")
        if _rename2(tmp, out, RENAME_EXCHANGE):
            _step("exchanged")
            _remove_marked(tmp)  # the old site, under our marked temporary name
            _step("removed")
            return
        aside = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=out.parent))
        os.rmdir(aside)  # a fresh name of ours: rename needs it free (only a racing build could take it)
        out.rename(aside)
        _step("fallback-aside")
        tmp.rename(out)
        _step("fallback-placed")
        _remove_marked(aside)
        return
    if not _rename2(tmp, out, RENAME_NOREPLACE):
        tmp.rename(out)


SITE_NAMES = frozenset({"assets", "data", "api", "schema", "runtime", "index.html", "404.html", "index.json",
                        "catalog.json", "recipe.schema.json", "views", *public_api.TOP_LEVEL})
"""Names the build writes at the site's top or inside ``data/``, ``api/`` and
``schema/`` (``api/index.json``, ``data/catalog.json``), and the public-site
API's top-level files and folders (``public_api.TOP_LEVEL``: ``models.json``,
``strategies/`` …): a recipe's org, which becomes a folder in each of them,
must not be one (in any letter case: a static host may fold case)."""


def site_name_clash(rid: str) -> str | None:
    """Why recipe id ``rid`` (``org/repo``) would collide with a file or
    folder of the site (its org is one of ``SITE_NAMES`` or the marker; its
    repo ``index.html``, ``404.html``, ``views`` or ends in ``.json``, in any
    letter case), or None."""
    org = rid.split("/")[0]
    if org.lower() in SITE_NAMES or org == SITE_MARKER:
        return (f"has the org {org!r}, which names a file or folder of the site itself "
                "(pages, data and API documents live under their org's folder)")
    repo = rid.split("/")[-1].lower()
    if repo in ("index.html", "404.html", "views") or repo.endswith(".json"):
        # org/index.html is the org's page; <id>.json is another recipe's public API document (adversarial finding:
        # "…-Instruct.json" took over that document silently, "acme/index.html" failed every build)
        return (f"ends in {rid.split('/')[-1]!r}, which names a file of the site itself (the org's page, or the "
                "public API document <org>/<repo>.json of another recipe)")
    return None


_SAFE_BASE = re.compile(r"^/(?:[A-Za-z0-9._~-]+/)*$")
"""A ``--base-path``: slash-separated URL-safe segments (it is written into 404.html)."""

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


class StaticHostHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files as a static host (GitHub Pages and the like) does: an
    unknown path gets the site's ``404.html`` with status 404."""

    def send_error(self, code, message=None, explain=None):
        page = Path(self.directory) / "404.html"
        if code != 404 or self.command not in ("GET", "HEAD") or not page.is_file():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)


def serve(directory: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    handler = functools.partial(StaticHostHandler, directory=str(directory))
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
    ap.add_argument("--no-precompress", action="store_true",
                    help="do not write the .gz and .br copies of the big runtime files (for a host that compresses "
                         "on the fly; Brotli 11 of a cold cache takes about two minutes)")
    ap.add_argument("--prerender", type=int, default=PRERENDER_NEIGHBOURS, metavar="N",
                    help="plans one click from each recipe default rendered ahead, so their deep links open without "
                         "the Python runtime (default %(default)s; every hardware's plan is always rendered ahead)")
    ap.add_argument("--strict", action="store_true",
                    help="what vLLM's CLI would refuse or ignore, and a strategy file without a kind, is an error, "
                         "not a warning (for recipes you own)")
    ap.add_argument("--repo-url", default=DEFAULT_REPO_URL,
                    help="https URL of the repository the recipes live in: pages link there to edit a recipe and "
                         "to report a problem (default: $RECIPES_REPO_URL or %(default)s)")
    ap.add_argument("--repo-branch", default=DEFAULT_REPO_BRANCH,
                    help="branch the edit links open (default: $RECIPES_REPO_BRANCH or %(default)s)")
    ap.add_argument("--base-path", default="/",
                    help="URL path the site is served under, e.g. /recipes/ for https://user.github.io/recipes/ (default /)")
    ap.add_argument("--serve", action="store_true", help="serve the built site at http://127.0.0.1:PORT/")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = ap.parse_args(argv)
    try:
        summary = build(args.recipes, args.out, keep_going=args.keep_going, jobs=args.jobs, strict=args.strict,
                        repo_url=args.repo_url, repo_branch=args.repo_branch, base_path=args.base_path,
                        neighbours=args.prerender, precompress=not args.no_precompress,
                        progress=lambda line: print(line, file=sys.stderr, flush=True))
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
              "(shown on the pages as notices), strategy files without a kind", file=sys.stderr)
    for e in summary["errors"]:
        print(f"  skipped: {e}", file=sys.stderr)
    print(f"built {summary['recipes']} recipe page(s) into {summary['out']}"
          + (f" ({len(summary['errors'])} problem(s) skipped)" if summary["errors"] else ""))
    if args.serve:
        serve(args.out, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
