"""build.py: validation errors name file, key path and reason; a failed build
writes nothing; the corpus of public recipes builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import build
from composer.loader import RecipeLoadError

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


def _recipes_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", dst)
    return dst


def _edit_k3(recipes: Path, edit) -> None:
    path = recipes / "models" / "moonshotai" / "Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))


@pytest.mark.parametrize("edit, key, words", [
    (lambda d: d["model"].pop("model_id"), "model.model_id", "Field required"),
    (lambda d: d["variants"]["default"].__setitem__("vram_minimum_gb", "lots"), "variants.default.vram_minimum_gb", "number"),
    (lambda d: d["model"]["base_args"].extend(["--enable-prefix-caching", "--no-enable-prefix-caching"]),
     "model.base_args", "twice"),
    (lambda d: d["hardware_overrides"]["amd"]["extra_args"].extend(["--max-num-seqs=64"]),
     "hardware_overrides.amd.extra_args", "twice"),
    (lambda d: d["features"]["reasoning"].__setitem__("args", ["kimi_k3"]), "features.reasoning.args", "not a flag"),
    (lambda d: d["meta"].__setitem__("default_hardware", "h900"), "meta.default_hardware", "not a hardware profile"),
])
def test_bad_recipe_reports_file_key_and_reason(tmp_path, edit, key, words):
    recipes = _recipes_copy(tmp_path)
    _edit_k3(recipes, edit)
    out = tmp_path / "out"
    with pytest.raises(RecipeLoadError) as info:
        build.build(recipes, out)
    msgs = [str(e) for e in info.value.errors]
    assert any(m.startswith("models/moonshotai/Kimi-K3.yaml: " + key) and words in m for m in msgs), msgs
    assert not out.exists()
    assert not list(tmp_path.glob(".build-*"))


def test_failed_build_keeps_previous_site(tmp_path):
    out = tmp_path / "out"
    build.build(ROOT / "recipes", out)
    marker = (out / "moonshotai" / "Kimi-K3" / "index.html").read_text()
    recipes = _recipes_copy(tmp_path)
    _edit_k3(recipes, lambda d: d["model"].pop("model_id"))
    with pytest.raises(RecipeLoadError):
        build.build(recipes, out)
    assert (out / "moonshotai" / "Kimi-K3" / "index.html").read_text() == marker


def test_default_build_has_pages_runtime_and_prerendered_command(tmp_path):
    out = tmp_path / "site"
    build.build(ROOT / "recipes", out)
    html = (out / "moonshotai" / "Kimi-K3" / "index.html").read_text()
    assert "--tensor-parallel-size 8" in html and 'value="b300" data-query' in html
    for name in build.PYODIDE_FILES:
        assert (out / "pyodide" / name).stat().st_size > 0
    assert any(p.name.startswith("pydantic_core-") and "pyemscripten_2026_0_wasm32" in p.name for p in (out / "wheels").iterdir())
    assert (out / "index.html").exists()


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_corpus_builds(tmp_path):
    summary = build.build(CORPUS, tmp_path / "corpus")
    assert summary["recipes"] >= 150


def test_browser_zip_is_self_contained(tmp_path):
    # The composer zip shipped to Pyodide must import on its own (no file
    # reading modules, nothing missing): import it from the zip alone.
    import subprocess
    import sys

    zip_path = tmp_path / "composer.zip"
    build.composer_zip(zip_path)
    code = ("import sys, composer.api, composer.plan; "
            "assert composer.api.__file__.startswith(sys.argv[1]), composer.api.__file__; "
            "assert 'yaml' not in sys.modules")
    res = subprocess.run([sys.executable, "-c", code, str(zip_path)], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(zip_path), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
