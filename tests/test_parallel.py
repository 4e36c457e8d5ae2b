"""Parallel kinds as data (issue 17, item 2): a strategy's kind comes from its
``kind`` key (or, in the public corpus, from its declarative content), never
from its id; each kind is one entry of ``composer.parallel.KINDS``; the memory
model has one weights-fit rule."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from composer import parallel
from composer.api import compose, make_context
from composer.buildtime.checks import check_catalog
from composer.convert import from_json
from composer.buildtime.loader import RecipeLoadError, load_catalog, load_recipe, load_recipe_data
from composer.memory import weights_fit
from composer.parallel import KINDS, Layout, ParallelKind, derive_kind
from composer.schema import Strategy
from composer.buildtime.validate import dump, validate_catalog, validate_recipe

ROOT = Path(__file__).resolve().parents[1]
OURS = ROOT / "recipes"
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/upstream-recipes")
K3 = "moonshotai/Kimi-K3"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"


def _strategy_files(root: Path) -> list[Path]:
    return sorted((root / "strategies").glob("*.yaml")) + sorted((root / "kv_store").glob("*.yaml"))


def test_our_strategy_files_declare_a_known_kind_and_pass_strict():
    for path in _strategy_files(OURS):
        data = yaml.safe_load(path.read_text())
        assert data.get("kind") in KINDS, path
    catalog, warnings = check_catalog(OURS, strict=True)
    assert warnings == []
    assert {s.kind for s in catalog.strategies.values()} == {"tp", "tep", "dep", "tp_pp", "tp_dp", "pd", "kv_store"}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="public corpus not present")
def test_corpus_kinds_are_derived_with_a_warning_per_file():
    catalog, warnings = check_catalog(CORPUS)
    files = {str(p.relative_to(CORPUS)) for p in _strategy_files(CORPUS)}
    assert {w.file for w in warnings} == files
    assert all(w.key == "kind" and w.level == "warning" for w in warnings)
    for w in warnings:
        data = yaml.safe_load((CORPUS / w.file).read_text())
        assert KINDS[derive_kind(data)[0]].label in w.message and w.file in str(w)
    # The corpus's files are the public versions of ours: the kind read from
    # their content is the kind ours declare.
    ours = load_catalog(OURS).strategies
    same = [sid for sid in catalog.strategies if sid in ours]
    assert len(same) >= 9
    for sid in same:
        assert catalog.strategies[sid].kind == ours[sid].kind, sid
    with pytest.raises(RecipeLoadError) as exc:
        check_catalog(CORPUS, strict=True)
    assert {e.file for e in exc.value.errors} == files


def test_derivation_reads_content_never_the_id():
    # The id says DEP; the content says TP.
    assert derive_kind({"name": "multi_node_dep", "deploy_type": "multi_node"})[0] == "tp"
    assert derive_kind({"name": "x", "parallel_flag": "--data-parallel-size"})[0] == "dep"
    assert derive_kind({"name": "x", "vllm_args": ["-ep"]})[0] == "tep"
    assert derive_kind({"name": "x", "vllm_args": ["--no-enable-expert-parallel"]})[0] == "tp"
    assert derive_kind({"name": "x", "deploy_type": "multi_node", "parallelism": "tp_pp"})[0] == "tp_pp"
    assert derive_kind({"name": "single_node_tp", "deploy_type": "pd_cluster"})[0] == "pd"
    assert derive_kind({"name": "x", "deploy_type": "kv_store_lb", "vllm_args": 3})[0] == "kv_store"
    # The browser rebuilds strategies from JSON without pydantic: same rule.
    assert from_json(Strategy, {"name": "a_dep"}).kind == "tp"
    assert from_json(Strategy, {"name": "a", "parallel_flag": "--data-parallel-size"}).kind == "dep"


def _catalog_data(root: Path) -> dict:
    from composer.buildtime.loader import load_catalog_data

    return load_catalog_data(root)[0]


def test_bad_kinds_are_errors_with_their_key_path():
    data = _catalog_data(OURS)
    data["strategies"]["single_node_tp"] = {**data["strategies"]["single_node_tp"], "kind": "tensor"}
    with pytest.raises(ValidationError) as exc:
        validate_catalog(data)
    assert exc.value.errors()[0]["loc"][-1] == "kind" and "tensor" in str(exc.value)
    data = _catalog_data(OURS)
    data["strategies"]["single_node_tp"] = {**data["strategies"]["single_node_tp"], "kind": "tp_pp"}
    with pytest.raises(ValidationError) as exc:
        validate_catalog(data)
    assert "needs deploy_type multi_node" in str(exc.value) and "single_node_tp" in str(exc.value)


def test_our_file_without_kind_fails_strict_and_warns_otherwise(tmp_path):
    root = tmp_path / "recipes"
    shutil.copytree(OURS, root)
    path = root / "strategies" / "single_node_dep.yaml"
    path.write_text("".join(line for line in path.read_text().splitlines(True) if not line.startswith("kind:")))
    catalog, warnings = check_catalog(root)
    assert [(w.file, w.key, w.level) for w in warnings] == [("strategies/single_node_dep.yaml", "kind", "warning")]
    assert catalog.strategies["single_node_dep"].kind == "dep"
    with pytest.raises(RecipeLoadError) as exc:
        check_catalog(root, strict=True)
    assert [(e.file, e.key, e.level) for e in exc.value.errors] == [("strategies/single_node_dep.yaml", "kind", "error")]


def _with_strategy(root: Path, template: str, name: str, kind: str | None) -> Path:
    """A copy of our recipes with strategy ``name``: ``template``'s file under
    another id, with ``kind`` (None: no kind key), offered by Kimi K3."""
    dst = root / "recipes"
    if not dst.exists():
        shutil.copytree(OURS, dst)
    data = yaml.safe_load((OURS / "strategies" / f"{template}.yaml").read_text())
    data["name"] = name
    data.pop("kind")
    if kind is not None:
        data["kind"] = kind
    (dst / "strategies" / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rpath = dst / "models" / f"{K3}.yaml"
    rdata = yaml.safe_load(rpath.read_text())
    rdata["compatible_strategies"].append(name)
    rpath.write_text(yaml.safe_dump(rdata, sort_keys=False))
    return dst


def _topology(plan: dict) -> list[tuple]:
    return [(c["role"], c["node_rank"], tuple(c["argv"]), tuple(sorted(c["env"].items()))) for c in plan["commands"]]


@pytest.mark.parametrize("template, name, kind", [
    ("multi_node_tp", "multi_node_widedep", "tp"),   # id says DEP, declared TP
    ("multi_node_tp", "multi_node_plaindep", None),  # id says DEP, content says TP
    ("multi_node_dep", "multi_node_wide", "dep"),    # id says TP, declared DEP
    ("multi_node_tep", "multi_node_wide2", None),    # content says TEP
])
def test_a_strategy_behaves_as_its_kind_whatever_its_id(tmp_path, template, name, kind):
    root = _with_strategy(tmp_path, template, name, kind)
    catalog = load_catalog(root)
    ctx = make_context(K3, load_recipe(root, K3), catalog)
    query = "hardware=b200&nodes=2&strategy="  # 2 × H200 cannot hold K3's 1M context (issue 19)
    got, want = compose(ctx, query + name, every_form=False), compose(ctx, query + template, every_form=False)
    assert got["selection"]["strategy"] == name and got["selection"]["nodes"] == 2 == want["selection"]["nodes"]
    assert _topology(got) == _topology(want)
    shown = got["summary"].replace(ctx.strategy_label(name), "")
    assert shown == want["summary"].replace(ctx.strategy_label(template), "")


def test_a_new_kind_is_one_registry_entry(monkeypatch):
    """A throwaway kind (TP over half a node's GPUs), declared only in
    ``KINDS``, reaches the layout, the per-node flags, the capacity and the
    summary of a strategy that names it."""

    def half_layout(x):
        return Layout("tp_half", 1, x.g, tp=max(1, x.g // 2))

    half = ParallelKind("tp_half", "half TP", ("single_node",), half_layout,
                        lambda lay, node: [parallel._u("tensor-parallel-size", lay.tp), parallel._u("enforce-eager")],
                        shape=lambda lay, task: f"half TP {lay.tp}", used_per_node=lambda lay: lay.tp)
    monkeypatch.setitem(KINDS, "tp_half", half)
    base = load_catalog(OURS)
    strategy = validate_catalog({"taxonomy": dump(base)["taxonomy"], "strategies": {
        "single_node_half": {"name": "single_node_half", "deploy_type": "single_node", "kind": "tp_half",
                             "display_name": "Half a node"}}}).strategies["single_node_half"]
    catalog = dataclasses.replace(base, strategies={**base.strategies, "single_node_half": strategy})
    data = load_recipe_data(OURS, LLAMA)
    recipe = validate_recipe({**data, "compatible_strategies": [*data["compatible_strategies"], "single_node_half"]})
    ctx = make_context(LLAMA, recipe, catalog)
    p = compose(ctx, "hardware=h200&strategy=single_node_half", every_form=False)
    g = catalog.taxonomy.hardware_profiles["h200"].gpu_count
    (cmd,) = p["commands"]
    argv = cmd["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(g // 2) and "--enforce-eager" in argv
    assert f"half TP {g // 2}" in p["summary"]
    assert p["capacity"][0]["gpus"] == g // 2
    assert any(n["code"] == "idle-gpus" for n in p["notices"])


def test_one_weights_fit_rule():
    ctx = make_context(LLAMA, load_recipe(OURS, LLAMA), load_catalog(OURS))
    for hw_id in ctx.listed_hardware:
        hw = ctx.hw(hw_id)
        for v in ctx.recipe.variants:
            assert ctx.fits_one_node(hw_id, v) == weights_fit(ctx.weights_gb(v, None, hw_id), hw.vram_gb)
    assert weights_fit(None, 0) and weights_fit(80, 80) and not weights_fit(80.5, 80)
