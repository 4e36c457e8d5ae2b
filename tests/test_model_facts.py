"""Model facts (composer/model_facts.py, composer/data/model_facts.json): every
entry cites its source and uses only Hugging Face config.json key names; the
lookup takes the recipe's own values first, then our data, else unknown."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from composer.api import make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.model_facts import ENTRY_KEYS, HF_KEYS, INT_KEYS, MODELS, config_errors, data_entry, facts_for, model_facts

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


@pytest.mark.parametrize("mid", sorted(MODELS))
def test_every_entry_has_a_source_and_only_hf_keys(mid):
    entry = MODELS[mid]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", mid)
    assert set(entry) <= ENTRY_KEYS and "config" in entry
    assert "http" in entry["source"] and len(entry["source"]) > 40  # names where the values come from
    config = entry["config"]
    assert config and not config_errors(config), config_errors(config)  # HF keys only, whole numbers where due
    if "layer_types" in config:
        assert len(config["layer_types"]) == config["num_hidden_layers"]
    if config.get("num_key_value_heads") and config.get("num_attention_heads"):
        assert config["num_attention_heads"] % config["num_key_value_heads"] == 0
    # head_dim × heads need not be hidden_size: a config that gives head_dim is read as given (vLLM's Llama
    # attention takes config.head_dim when present; MiniCPM5-1B: 16 × 128 over a 1,536-wide residual stream).


def test_aliases_are_unique_and_resolve():
    seen = {}
    for mid, entry in MODELS.items():
        for a in entry.get("aliases", ()):
            assert a not in MODELS and a.lower() not in seen, a
            seen[a.lower()] = mid
            assert data_entry(a)[0] == mid
    assert data_entry("QWEN/qwen3-32b")[0] == "Qwen/Qwen3-32B"
    assert data_entry("org/not-a-model") is None


def test_recipe_values_come_first_then_data_then_unknown():
    cat = load_catalog(ROOT / "recipes")
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    ctx = make_context(rid, load_recipe(ROOT / "recipes", rid), cat)
    f = model_facts(ctx)
    assert f.origin["num_attention_heads"] == "recipe" and f.num_attention_heads == 64
    assert f.origin["vocab_size"].startswith("data:") and f.get("vocab_size") == 128256
    assert f.derived_max_model_len() == 131072  # llama3 RoPE: the length is already scaled
    assert f.source.startswith("Hugging Face config.json") and f.is_moe is False and f.use_mla is False
    # Kimi K3: the recipe's values first, our data (its config.json, second-hand) for the rest,
    # including the hybrid layout: 24 MLA layers, 69 KDA layers with a state per sequence.
    rid = "moonshotai/Kimi-K3"
    k3 = model_facts(make_context(rid, load_recipe(ROOT / "recipes", rid), cat))
    assert k3.origin["num_attention_heads"] == "recipe" and k3.origin["vocab_size"] == "data:moonshotai/Kimi-K3"
    assert k3.use_mla is True and k3.is_moe is True and k3.num_attention_heads == 96
    assert k3.layer_kinds() == {"full": 24, "sliding": 0, "linear": 69}
    assert k3.derived_max_model_len() == 1048576 == k3.context_length
    unknown = facts_for("org/unknown")
    assert unknown.num_attention_heads is None and unknown.is_moe is None and unknown.use_mla is None


def test_derived_max_model_len_mirrors_vllm():
    # config/model.py:2598-2634: YaRN / llama3 lengths are already scaled; other types multiply by the factor.
    assert facts_for("deepseek-ai/DeepSeek-R1").derived_max_model_len() == 163840
    assert facts_for("Qwen/Qwen3-32B").derived_max_model_len() == 40960
    from composer.model_facts import ModelFacts

    linear = ModelFacts("m", {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})
    assert linear.derived_max_model_len() == 16384
    assert ModelFacts("m", {"max_position_embeddings": 4096}).derived_max_model_len() is None  # rope unknown


def test_layer_kinds():
    gpt = facts_for("openai/gpt-oss-20b")
    assert gpt.layer_kinds() == {"full": 12, "sliding": 12, "linear": 0}
    assert facts_for("Qwen/Qwen3-8B").layer_kinds() == {"full": 36, "sliding": 0, "linear": 0}
    assert facts_for("moonshotai/Kimi-K2-Instruct").use_mla is None  # an MLA model type whose rank we did not find


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_corpus_coverage_is_reported():
    # Which corpus recipes our data covers (by the recipe's model id or a variant's): a figure, not a target.
    cat = load_catalog(CORPUS)
    covered, missing = [], []
    for rid in sorted(recipe_paths(CORPUS)):
        ctx = make_context(rid, load_recipe(CORPUS, rid), cat)
        ids = [ctx.recipe.model.model_id] + [ctx.model_id(v) for v in ctx.recipe.variants]
        (covered if any(data_entry(i) for i in ids) else missing).append(rid)
    assert len(covered) >= 12 and len(covered) + len(missing) == len(recipe_paths(CORPUS))


def test_kda_state_is_vllms_kda_state_shape():
    """Kimi Delta Attention's per-sequence state per layer and TP rank, as
    vLLM 0.33.0 sizes it (mamba_utils.py:296-319, dtypes :133-149): conv
    (kernel − 1) × 3 · heads · head_dim / TP in bf16, recurrent heads / TP ×
    head_dim² in float32."""
    from composer.memory import linear_state_bytes

    k3 = facts_for("moonshotai/Kimi-K3")
    for tp in (8, 16, 32):
        conv = 3 * (3 * 96 * 128 // tp) * 2
        recurrent = (96 // tp) * 128 * 128 * 4
        assert linear_state_bytes(k3, tp) == conv + recurrent


@pytest.mark.parametrize("la", [
    {"kda_layers": 69, "full_attn_layers": [4]},                        # not a list
    {"kda_layers": "1,2,3", "full_attn_layers": [4]},                   # a string is not a list of layers
    {"kda_layers": list(range(1, 70)), "full_attn_layers": [70]},       # more KDA layers than the 61 layers
    {"kda_layers": [1, 1, 2], "full_attn_layers": [3]},                 # a layer twice
    {"kda_layers": [1, 2], "full_attn_layers": [2]},                    # a layer in both
])
def test_a_kda_layout_that_does_not_add_up_is_unknown_never_negative(la):
    """An adversarial finding: 69 KDA layers on a 61-layer model gave -8 MLA
    layers and "-4,937,014 tokens". A layout that does not add up is unknown."""
    from composer.model_facts import ModelFacts

    f = ModelFacts("m", {"num_hidden_layers": 61, "kv_lora_rank": 512, "linear_attn_config": la})
    assert f.layer_kinds() is None


@pytest.mark.parametrize("la", [{"num_heads": "96", "head_dim": 128}, {"num_heads": 96, "head_dim": 0},
                                {"num_heads": -96, "head_dim": 128}, {"num_heads": 96, "head_dim": 128,
                                                                      "short_conv_kernel_size": -1},
                                {"head_dim": 128}, {"num_heads": 7, "head_dim": 128}])
def test_kda_sizes_that_are_not_positive_integers_or_not_divisible_give_no_state(la):
    from composer.memory import linear_state_bytes
    from composer.model_facts import ModelFacts

    assert linear_state_bytes(ModelFacts("m", {"linear_attn_config": la}), 16) is None


def test_a_recipe_gives_any_fact_under_its_hf_config_name(tmp_path):
    """Issue 19: the recipe format accepts the facts under Hugging Face
    config.json names (``model.hf_config``); they win over our data, the
    direct ``model`` fields win over them; a key outside HF_KEYS or a count
    that is not a whole number is an error naming the key path and the key."""

    shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    path = tmp_path / "recipes" / "models" / f"{rid}.yaml"
    data = yaml.safe_load(path.read_text())
    data["model"]["hf_config"] = {"vocab_size": 999, "num_attention_heads": 8, "layer_types": ["sliding_attention"] * 80,
                                  "sliding_window": 4096}
    path.write_text(yaml.safe_dump(data))
    f = model_facts(make_context(rid, load_recipe(tmp_path / "recipes", rid), load_catalog(tmp_path / "recipes")))
    assert f.get("vocab_size") == 999 and f.origin["vocab_size"] == "recipe"  # over our data's 128256
    assert f.num_attention_heads == 64  # the direct field wins
    assert f.layer_kinds() == {"full": 0, "sliding": 80, "linear": 0}
    data["model"]["hf_config"] = {"sliding_windw": 5, "vocab_size": 0}
    path.write_text(yaml.safe_dump(data))
    out = subprocess.run([sys.executable, "-m", "composer", "check", str(tmp_path / "recipes")], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode != 0
    line = next(x for x in out.stdout.splitlines() if "hf_config" in x)
    assert line.startswith(f"models/{rid}.yaml: model.hf_config:"), line
    assert "'sliding_windw' is not a Hugging Face config.json key" in line and "did you mean 'sliding_window'" in line
    assert "vocab_size: '0' is not a whole number" in line
    assert config_errors({"num_experts": 2**40}) and config_errors({"layer_types": []}) == []
    assert INT_KEYS <= set(HF_KEYS)


def test_a_recipes_layout_replaces_our_datas_and_bad_shapes_are_errors():
    """Adversarial findings: a recipe's ``layer_types`` left our data's
    ``linear_attn_config`` in force (Kimi K3 kept 69 linear layers); values
    of the wrong shape ended in tracebacks (rope_scaling "linear", a list as
    model_type, a KDA num_heads of 10^400)."""
    from types import SimpleNamespace

    model = SimpleNamespace(model_id="moonshotai/Kimi-K3", hf_config={"layer_types": ["full_attention"] * 93,
                                                                      "num_local_experts": 64})
    f = facts_for("moonshotai/Kimi-K3", model)
    assert f.layer_kinds() == {"full": 93, "sliding": 0, "linear": 0} and "linear_attn_config" not in f.values
    assert f.routed_experts == 64 and "num_experts" not in f.values
    bad = {"rope_scaling": "linear", "model_type": ["a"], "architectures": "X", "tie_word_embeddings": "yes",
           "linear_attn_config": {"num_heads": 10**400}, "layer_types": [1, 2]}
    errors = config_errors(bad)
    assert len(errors) == len(bad) and all(e.split(":")[0] in bad for e in errors), errors
    for rope in ({"type": "dynamic", "factor": -3}, {"type": "dynamic", "factor": float("inf")},
                 {"type": "dynamic", "factor": "x"}, [1, 2]):
        assert config_errors({"rope_scaling": rope}), rope
    assert config_errors({"rope_scaling": None}) == [] and config_errors({"rope_scaling": {"rope_type": "yarn", "factor": 4}}) == []
