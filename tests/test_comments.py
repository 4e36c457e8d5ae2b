"""Explain says why, where the recipe says it (issue 21): the recipe's YAML
comments next to a key are its reasons (``composer.buildtime.comments``), the
recipe's own ``reasons`` entries win, and Explain shows the nearest one for
each flag and variable (``RecipeContext.reason``), on the page and in the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from composer.api import compose, make_context
from composer.buildtime.comments import MAX_REASON, comments
from composer.buildtime.loader import load_catalog, load_recipe, load_recipe_data

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"

TEXT = """\
model:
  base_args:
    - --trust-remote-code
    # keeps more memory for the KV cache
    - --gpu-memory-utilization
    - "0.95"  # measured on B200
    - --max-num-seqs

    - "8"
# the DEP profile of the NVL trays
strategy_overrides:
  multi_node_dep:  # GB200 only
    extra_env:
      VLLM_X: "1"  # REQUIRED on ROCm
      VLLM_Y: "0"
advanced_options:
  - id: a
    # an own knob
    args: [--enforce-eager]  # eager
"""


def test_comments_belong_to_the_key_or_flag_next_to_them():
    found = comments(TEXT)
    assert found["model.base_args#--gpu-memory-utilization"] == "keeps more memory for the KV cache measured on B200"
    assert "model.base_args#--max-num-seqs" not in found  # a blank line, no comment
    assert found["strategy_overrides"] == "the DEP profile of the NVL trays"
    assert found["strategy_overrides.multi_node_dep"] == "GB200 only"
    assert found["strategy_overrides.multi_node_dep.extra_env.VLLM_X"] == "REQUIRED on ROCm"
    assert "strategy_overrides.multi_node_dep.extra_env.VLLM_Y" not in found
    assert found["advanced_options[0].args"] == "an own knob eager"
    assert comments("[1, 2") == {} and comments("- a\n- b\n") == {} and comments("") == {}
    assert len(comments("# " + "x" * 5000 + "\nmodel: 1\n")["model"]) == MAX_REASON


def test_the_nearest_reason_is_shown_and_an_explicit_one_wins(tmp_path):
    recipes = tmp_path / "recipes"
    import shutil

    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "models" / "moonshotai" / "Kimi-K3.yaml"
    data = yaml.safe_load(path.read_text())
    data["reasons"] = {"model.base_args#--gpu-memory-utilization": "the recipe's own words"}
    text = yaml.safe_dump(data).replace("\nmodel:\n", "\n# <script>alert(1)</script> model block\nmodel:\n", 1)
    path.write_text(text)
    raw = load_recipe_data(recipes, "moonshotai/Kimi-K3")
    assert raw["reasons"]["model.base_args#--gpu-memory-utilization"] == "the recipe's own words"
    assert raw["reasons"]["model"] == "<script>alert(1)</script> model block"
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(recipes, "moonshotai/Kimi-K3"), load_catalog(recipes))
    assert ctx.reason("model.base_args", "--gpu-memory-utilization") == "the recipe's own words"
    assert ctx.reason("model.base_args", "--trust-remote-code") == "<script>alert(1)</script> model block"  # nearest: model
    assert ctx.reason("strategies/multi_node_tp.env") == "" and ctx.reason("composer: topology of head node 0") == ""
    plan = compose(ctx, "hardware=h200", every_form=False)
    # the page's Explain: text, never markup
    from jinja2 import FileSystemLoader

    from composer.render import environment

    explain = environment(FileSystemLoader(str(ROOT / "site_src"))).get_template("_macros.html").module.explain
    html = str(explain(plan["commands"][0]))
    assert "The recipe says: the recipe&#39;s own words" in html and "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; model block" in html


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_explain_gives_the_corpus_recipes_reasons(capsys):
    # The corpus Kimi-K3 explains its TP+PP tuning in comments; Explain said only who set the values.
    from composer.buildtime.cli import main

    ctx = make_context("moonshotai/Kimi-K3", load_recipe(CORPUS, "moonshotai/Kimi-K3"), load_catalog(CORPUS))
    plan = compose(ctx, "hardware=b200&strategy=multi_node_tp_pp", every_form=False)
    why = {f["flag"]: f["why"] for f in plan["commands"][0]["provenance"]}
    assert "TRTLLM MXFP4 MoE kernel" in why["--gpu-memory-utilization"]
    assert why["--max-num-batched-tokens"].startswith("Cap prefill chunks")
    assert why["--tensor-parallel-size"] == ""  # the composer's topology: no recipe reason
    assert main(["moonshotai/Kimi-K3", "--recipes", str(CORPUS), "--query", "hardware=b200&strategy=multi_node_tp_pp",
                 "--explain"]) == 0
    out = capsys.readouterr().out
    assert "# the recipe says: Cap prefill chunks so one long request cannot OOM a pipeline stage." in out
