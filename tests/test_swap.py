"""Issue 23.3: the site swap is atomic and touches only what is ours.

A kill at each step of ``build._swap_into_place`` (a test hook SIGKILLs a
forked child there) leaves ``--out`` present and either the complete old or
the complete new site; the next build cleans what the kill left. A foreign
``out.old``, a symlinked lock and a foreign temporary name survive a build
byte for byte; the site's modes follow the umask; recipe ids that name site
files are skipped with ``--keep-going`` and named by their recipe file."""

from __future__ import annotations

import json
import os
import signal
import shutil
import stat
from pathlib import Path

import pytest

import build

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("exchange", "exchanged", "removed")
FALLBACK_STEPS = ("fallback-aside", "fallback-placed")


def _site(path: Path, tag: str) -> Path:
    path.mkdir(parents=True)
    (path / build.SITE_MARKER).write_text("ours\n")
    for i in range(40):
        (path / f"page{i}.html").write_text(f"{tag} {i}\n")
    (path / "sub").mkdir()
    (path / "sub" / "data.json").write_text(f'{{"site": "{tag}"}}\n')
    return path


def _which(out: Path) -> str:
    """``old`` or ``new`` when ``out`` is that site complete, else a failure text."""
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    tags = {p.read_text().split()[0] for p in out.glob("page*.html")}
    assert len(files) == 42 and len(tags) == 1, (files, tags)
    tag = tags.pop()
    assert (out / "sub" / "data.json").read_text() == f'{{"site": "{tag}"}}\n'
    return tag


def _kill_at(step: str, tmp: Path, out: Path, fallback: bool = False) -> int:
    pid = os.fork()
    if pid == 0:  # the child: swap, and die by SIGKILL at `step`
        try:
            if fallback:
                build._rename2 = lambda *a: False  # as on a platform without renameat2
            build._SWAP_HOOK = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == step else None
            build._swap_into_place(tmp, out)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_at_any_step_of_the_swap_leaves_a_complete_site(tmp_path, step):
    out = _site(tmp_path / "site", "old")
    tmp = _site(tmp_path / ".build-new", "new")
    status = _kill_at(step, tmp, out)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert out.is_dir() and _which(out) == ("old" if step == "exchange" else "new")
    build._remove_stale_builds(tmp_path)  # what the next build does first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


@pytest.mark.parametrize("step", FALLBACK_STEPS)
def test_the_fallback_without_renameat2_leaves_only_marked_leftovers(tmp_path, step):
    out = _site(tmp_path / "site", "old")
    tmp = _site(tmp_path / ".build-new", "new")
    _kill_at(step, tmp, out, fallback=True)
    if out.exists():
        assert _which(out) in ("old", "new")
    leftovers = [p for p in tmp_path.iterdir() if p.name != "site"]
    assert all(p.name.startswith(build.TEMP_PREFIX) and (p / build.SITE_MARKER).is_file() for p in leftovers)
    build._remove_stale_builds(tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name != "site"] == []


def test_the_swap_is_an_exchange_on_linux(tmp_path):
    if build._renameat2() is None:
        pytest.skip("no renameat2 here: the documented fallback is used")
    out = _site(tmp_path / "site", "old")
    tmp = _site(tmp_path / ".build-new", "new")
    inode = tmp.stat().st_ino
    seen = []
    build._SWAP_HOOK = lambda name: seen.append((name, out.exists()))
    try:
        build._swap_into_place(tmp, out)
    finally:
        build._SWAP_HOOK = None
    assert out.stat().st_ino == inode and _which(out) == "new"
    assert seen == [("exchange", True), ("exchanged", True), ("removed", True)]


def _snapshot(path: Path) -> dict:
    if path.is_symlink():
        return {"link": os.readlink(path)}
    if path.is_file():
        return {"bytes": path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_build_touches_nothing_that_is_not_ours_and_the_site_follows_the_umask(tmp_path):
    out = tmp_path / "site"
    build.build(ROOT / "recipes", out, neighbours=0, precompress=False)  # a first site: the second build swaps it
    old = tmp_path / "site.old"
    old.mkdir()
    (old / "precious.txt").write_text("mine\n")
    foreign_tmp = tmp_path / ".build-foreign"
    foreign_tmp.mkdir()
    (foreign_tmp / "keep.txt").write_text("keep\n")
    linked = tmp_path / ".build-linked"
    linked.symlink_to(out)  # a link to a marked folder is not ours either
    before = {p: _snapshot(p) for p in (old, foreign_tmp, linked)}
    mask = os.umask(0o027)
    try:
        build.build(ROOT / "recipes", out, neighbours=0, precompress=False)
    finally:
        os.umask(mask)
    assert {p: _snapshot(p) for p in (old, foreign_tmp, linked)} == before
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    for p in out.rglob("*"):
        want = 0o750 if p.is_dir() else 0o640
        assert stat.S_IMODE(p.stat().st_mode) == want, p
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build-foreign", ".build-linked", ".build.lock", "site", "site.old"]


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("do not truncate\n")
    (tmp_path / ".build.lock").symlink_to(victim)
    with pytest.raises(build.BuildError, match="symbolic link"):
        build.build(ROOT / "recipes", tmp_path / "site", neighbours=0, precompress=False)
    assert victim.read_text() == "do not truncate\n" and not (tmp_path / "site").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(build.TEMP_PREFIX)]


def test_a_lock_that_is_a_regular_file_of_someone_else_is_never_written(tmp_path):
    lock = tmp_path / ".build.lock"
    lock.write_text("someone's notes\n")
    lock.chmod(0o444)  # opened read-only: flock needs no write access
    build.build(ROOT / "recipes", tmp_path / "site", neighbours=0, precompress=False)
    assert lock.read_text() == "someone's notes\n"


# The public-site API writes models.json and strategies/<id>.json at the top (adversarial finding: an org
# "models.json" failed every build, one named "strategies" overwrote the catalogue's strategy documents).
CLASHES = ["api/index.json", "index.json/x", "404.html/x", "Data/x", "models.json/x", "strategies/multi_node_tp"]


def test_recipe_ids_that_name_site_files_are_skipped_by_keep_going(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    for rid in CLASHES:  # all in one folder: one strict and one keep-going build
        target = recipes / "models" / f"{rid}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(recipes / "models" / "meta-llama" / "Llama-3.3-70B-Instruct.yaml", target)
    with pytest.raises(build.RecipeLoadError) as info:
        build.build(recipes, tmp_path / "site", neighbours=0, precompress=False)
    assert sorted(e.file for e in info.value.errors) == sorted(f"models/{rid}.yaml" for rid in CLASHES)
    assert all("names a file or folder of the site" in e.message for e in info.value.errors)
    summary = build.build(recipes, tmp_path / "site", keep_going=True, neighbours=0, precompress=False)
    assert summary["recipes"] == 3 and sorted(e.file for e in summary["errors"]) == sorted(
        f"models/{rid}.yaml" for rid in CLASHES)
    assert (tmp_path / "site" / "api" / "index.json").is_file() and (tmp_path / "site" / "404.html").is_file()
    assert (tmp_path / "site" / "models.json").is_file()
    assert "deploy_type" in json.loads((tmp_path / "site" / "strategies" / "multi_node_tp.json").read_text())


def test_an_empty_out_folder_is_replaced_by_the_site(tmp_path):
    """check_output_dir accepts an empty --out; the swap used to refuse it after
    the whole build ("is not a site built by build.py", adversarial finding)."""
    out = tmp_path / "site"
    out.mkdir()
    build.build(ROOT / "recipes", out, neighbours=0, precompress=False)
    assert (out / build.SITE_MARKER).exists() and (out / "index.html").is_file()


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_a_cache_lock_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    # Found by an adversarial pass (2026-12-02): a FIFO at .cache/compressed/.lock hung the build in open().
    cache = tmp_path / "cache"
    cache.mkdir()
    lock = cache / ".lock"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "symlink":
        lock.symlink_to(tmp_path / "victim")
    else:
        lock.mkdir()
    with pytest.raises(build.BuildError, match="cannot lock the cache"):
        with build._cache_locked(cache):
            pass
    assert not (tmp_path / "victim").exists()
