"""Issue 12, item 7 (static host) and 9 (index), the Python side: the routes
404.html and the redirect stubs are built from, the CLI's case-insensitive
recipe id, distinct hardware labels, and the P/D cluster size said in the
summary and the capacity line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import build
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.buildtime.routes import checkpoints, find_recipe_id, route_map, variant_routes

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


def _served(recipes_dir: Path) -> dict:
    return {rid: checkpoints(rid, load_recipe(recipes_dir, rid)) for rid in recipe_paths(recipes_dir)}


def test_checkpoint_ids_lead_to_their_recipe_and_variant():
    served = _served(ROOT / "recipes")
    routes = variant_routes(served)
    assert routes["Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"] == {"id": "Qwen/Qwen3-235B-A22B-Instruct-2507", "variant": "fp8"}
    assert routes["RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"]["id"] == "meta-llama/Llama-3.3-70B-Instruct"
    assert not set(routes) & set(served)  # a recipe's own id is never a redirect
    table = route_map(served)
    assert table["qwen/qwen3-235b-a22b-instruct-2507"] == {"id": "Qwen/Qwen3-235B-A22B-Instruct-2507"}
    assert table["qwen"] == {"org": "Qwen"}
    assert all(k == k.lower() for k in table)


def test_ambiguous_addresses_get_no_route():
    served = {
        "Org/Model": [("Other/Model-FP8", "fp8"), ("Org/model", None)],  # the second is the recipe id in another case
        "Two/Model": [("Other/Model-FP8", "fp8")],                       # claimed twice
        "Case/A": [], "case/a": [],                                      # ids that differ only in case
    }
    routes = variant_routes(served)
    assert routes == {}
    table = route_map(served)
    assert "other/model-fp8" not in table and "case/a" not in table
    assert table["org/model"] == {"id": "Org/Model"}


def test_checkpoints_skip_ids_that_are_no_page_address():
    class V:  # the two fields checkpoints() reads
        def __init__(self, model_id):
            self.model_id = model_id

    class R:
        class model:
            model_id = "/models/local-copy"
        variants = {"default": V("org/x"), "fp8": V("org/x-fp8"), "deep": V("a/b/c"), "site": V("assets/x"),
                    "page": V("org/index.html")}

    assert checkpoints("org/x", R) == [("org/x-fp8", "fp8")]


def test_cli_finds_a_recipe_id_in_any_case():
    assert find_recipe_id(["Qwen/Qwen3-235B-A22B-Instruct-2507"], "qwen/qwen3-235b-a22b-instruct-2507") == \
        "Qwen/Qwen3-235B-A22B-Instruct-2507"
    assert find_recipe_id(["A/b", "a/B"], "a/b") is None  # which one is meant is unknowable
    assert find_recipe_id(["A/b", "a/B"], "a/B") == "a/B"
    out = subprocess.run([sys.executable, "-m", "composer", "qwen/qwen3-235b-a22b-instruct-2507", "--json"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["recipe"]["id"] == "Qwen/Qwen3-235B-A22B-Instruct-2507"
    bad = subprocess.run([sys.executable, "-m", "composer", "nobody/nothing"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "no such recipe" in bad.stderr


@pytest.mark.parametrize("recipes", [ROOT / "recipes", CORPUS])
def test_hardware_labels_are_distinct(recipes):
    profiles = load_catalog(recipes).taxonomy.hardware_profiles
    labels = build.hardware_labels(profiles)
    assert set(labels) == set(profiles)
    assert len(set(labels.values())) == len(labels)
    for h, p in profiles.items():  # a name only one profile has is kept as it is
        if sum(q.display_name == p.display_name for q in profiles.values()) == 1:
            assert labels[h] == p.display_name
    if recipes == CORPUS:  # the corpus has two "RTX 5090" profiles (1 and 2 GPUs)
        assert labels["rtx_5090"] != labels["rtx_5090_2x"] and "2 GPUs" in labels["rtx_5090_2x"]


@pytest.mark.parametrize("count, billions", [("235B", 235), ("1T", 1000), ("0.9B", 0.9), ("500M", 0.5),
                                             (70, 70), (7e9, 7), ("about 7B", None), (None, None), ("", None)])
def test_parameter_billions(count, billions):
    assert build.parameter_billions(count) == billions


def test_pd_summary_and_capacity_say_the_cluster_size(plan):
    p = plan("hardware=h200&strategy=pd_cluster")
    sel = p["selection"]
    total = sel["prefill_nodes"] + sel["decode_nodes"]
    gpu_nodes = len({(c["role"], c["node_rank"]) for c in p["commands"] + p["blocked_commands"] if c["role"] != "router"})
    assert total == gpu_nodes == 4  # prefill 2 × TEP + decode 2 × DEP (its floor) hold one 1M-token sequence each
    assert p["summary"].startswith(f"{total} × H200 nodes")
    assert "router on any host" in p["summary"]
    pools = [c for c in p["capacity"] if c["scope"] in ("prefill", "decode")]
    assert len(pools) == 2 and all(f"of the {total} × H200 nodes" in c["message"] for c in pools)
    bigger = plan("hardware=h200&strategy=pd_cluster&decode_nodes=4")
    n = bigger["selection"]["prefill_nodes"] + bigger["selection"]["decode_nodes"]
    assert n == 6 and bigger["summary"].startswith("6 × H200 nodes")


def test_corpus_routes_lead_to_real_recipes_and_variants():
    paths = recipe_paths(CORPUS)
    recipes = {}
    for rid in paths:
        try:
            recipes[rid] = load_recipe(CORPUS, rid)
        except Exception:  # a corpus recipe our checks refuse is not built, so it has no routes
            continue
    served = {rid: checkpoints(rid, r) for rid, r in recipes.items()}
    table = route_map(served)
    assert len(table) > len(recipes)  # recipes, organisations and checkpoint ids
    for key, target in table.items():
        assert key == key.lower() and not key.startswith("/") and not key.endswith("/")
        if "org" in target:
            assert any(rid.split("/")[0] == target["org"] for rid in recipes)
            continue
        assert target["id"] in recipes
        if target.get("variant"):
            assert target["variant"] in recipes[target["id"]].variants
    assert any(t.get("variant") for t in table.values())  # the corpus has checkpoint ids for variants


def test_base_path_is_written_into_404_and_checked(tmp_path):
    out = tmp_path / "site"
    build.build(ROOT / "recipes", out, base_path="/recipes/", neighbours=0, precompress=False)
    html = (out / "404.html").read_text()
    assert 'src="/recipes/assets/redirect.js"' in html and 'href="/recipes/assets/style.css"' in html
    assert 'data-base="/recipes/"' in html
    stub = (out / "Qwen" / "Qwen3-235B-A22B-Instruct-2507-FP8" / "index.html").read_text()
    assert 'content="../../Qwen/Qwen3-235B-A22B-Instruct-2507/" data-variant="fp8"' in stub  # stubs stay relative
    for bad in ("recipes/", "/recipes", "/a b/", '/"><script>/'):
        with pytest.raises(build.BuildError, match="base-path"):
            build.build(ROOT / "recipes", tmp_path / "other", base_path=bad, neighbours=0, precompress=False)


def test_the_cli_takes_a_variant_checkpoint_id_as_the_page_does(capsys):
    # Found by the fresh-user trial: /nvidia/Llama-3.3-70B-Instruct-FP4/ led to
    # the page, the same id on the command line was "no such recipe".
    from composer.buildtime.cli import main

    assert main(["nvidia/llama-3.3-70b-instruct-fp4", "--json"]) == 0
    import json

    plan = json.loads(capsys.readouterr().out)
    assert plan["recipe"]["id"] == "meta-llama/Llama-3.3-70B-Instruct" and plan["selection"]["variant"] == "nvfp4"
    assert main(["nvidia/Llama-3.3-70B-Instruct-FP4", "--query", "variant=default", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["selection"]["variant"] == "default"  # an explicit variant wins
    assert main(["nvidia/no-such-checkpoint"]) == 2
