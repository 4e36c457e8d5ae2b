"""The public names of the ``composer`` package are a deliberate list.

A name added to or dropped from ``composer.__all__`` (or exposed by ``import
composer`` beside it) fails here until this list is changed in the same commit.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path

import composer

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = ["compose", "compose_page", "make_context"]  # compose_json went with issue 17.5 (called by nothing)

# Build-time modules: never loaded by ``import composer`` (the browser ships
# without them, and the package docstring promises the loader is not imported).
BUILD_TIME = ["composer.buildtime.checks", "composer.buildtime.wasm_data", "composer.buildtime.cli", "composer.buildtime.comments", "composer.buildtime.docstrings", "composer.buildtime.guide", "composer.buildtime.import_cli",
              "composer.buildtime.loader", "composer.buildtime.public_api", "composer.buildtime.repair", "composer.buildtime.routes",
              "composer.buildtime.sparse", "composer.buildtime.validate", "composer.buildtime.vllm_cli_gen"]


def test_build_time_is_exactly_the_buildtime_folder():
    folder = sorted(f"composer.buildtime.{p.stem}" for p in (ROOT / "composer" / "buildtime").glob("*.py")
                    if p.stem != "__init__")
    assert folder == sorted(BUILD_TIME)


def test_no_browser_module_imports_the_buildtime_folder():
    """The browser boundary is a folder (issue 17.5): a module that ships must not
    import one that does not, at top level or lazily."""
    import re
    offenders = []
    for p in sorted((ROOT / "composer").rglob("*.py")):
        rel = p.relative_to(ROOT / "composer")
        if rel.parts[0] == "buildtime" or rel.as_posix() == "__main__.py":
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"\bcomposer\.buildtime\b|from \.buildtime\b|from composer import buildtime", line) \
                    and not line.lstrip().startswith("#") and "import" in line:
                offenders.append(f"{rel}:{n}: {line.strip()}")
    # make_context validates raw dicts with pydantic, a CPython-only path (the
    # browser binds the build's JSON with context_from_json): the one exception.
    allowed = ["api.py:29: from composer.buildtime.validate import validate_catalog, validate_recipe"]
    assert offenders == allowed, offenders


def test_all_is_the_declared_list():
    assert list(composer.__all__) == PUBLIC


def test_import_exposes_only_the_declared_names_besides_submodules():
    exposed = {name for name, value in vars(composer).items()
               if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert exposed == set(PUBLIC)


def test_each_public_name_is_a_documented_function_of_the_package():
    for name in PUBLIC:
        obj = getattr(composer, name)
        assert inspect.isfunction(obj), name
        assert obj.__module__.startswith("composer."), (name, obj.__module__)
        assert (obj.__doc__ or "").strip(), f"composer.{name} has no docstring"


def test_import_composer_loads_no_build_time_module():
    missing = [m for m in BUILD_TIME if importlib.util.find_spec(m) is None]
    assert not missing, f"moved or gone, update BUILD_TIME: {missing}"
    code = "import json, sys, composer; print(json.dumps(sorted(m for m in sys.modules if m.startswith('composer'))))"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    loaded = set(json.loads(res.stdout))
    assert "composer.api" in loaded  # the probe itself works
    assert not loaded & set(BUILD_TIME), sorted(loaded & set(BUILD_TIME))
