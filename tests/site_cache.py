"""One build of our site per test run, shared by the workers that only read it.

The browser suite (one site per pytest-xdist worker), the Pyodide equivalence,
the runtime-file checks and the public-API tests each built ``recipes/`` into a
folder of their own: about 12 s of one core each, seven or more times a run.
``shared_site()`` builds it once under ``SITE_CACHE/<digest>/dist`` (the
digest covers every input of the build: the composer, the page sources, the
recipes, ``build.py``, the pinned Pyodide), holding the cache's lock so that
concurrent workers wait for the one build instead of each making its own.
Consumers must not write into it (tests that damage a file copy it or route
the request instead)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE_CACHE = ROOT / ".cache" / "test-site"
INPUTS = ("composer", "site_src", "recipes", "build.py", "package-lock.json", "pyproject.toml")
"""What a build of ``recipes/`` reads (besides Pyodide, which package-lock.json pins)."""


def digest() -> str:
    """SHA-256 (20 hex digits) over the build's inputs, by path and content."""
    h = hashlib.sha256()
    for name in INPUTS:
        top = ROOT / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in files:
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def shared_site() -> Path:
    """The site ``build.build(recipes/, …, precompress=False)`` writes, built
    once per digest (an older digest's site is removed then); returns its
    folder. Raises what the build raises."""
    import build

    key = digest()
    out = SITE_CACHE / key / "dist"
    with build._cache_locked(SITE_CACHE):
        if (out / "index.html").is_file():
            return out
        for old in SITE_CACHE.iterdir():
            if old.is_dir() and old.name != key:
                shutil.rmtree(old, ignore_errors=True)
        build.build(ROOT / "recipes", out, precompress=False)
    return out
