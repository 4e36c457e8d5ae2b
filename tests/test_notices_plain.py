"""Notices for people (issue 12.10): notices never quote recipe key paths
(those stay in Explain), and "Why N unavailable" gives one line per distinct
reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jinja2 import FileSystemLoader

from composer.api import compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.render import PageRenderer, environment
from tests.plan_space import FULL, sample

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
KEY_PATH = re.compile(r"\b(model|variants|features|strategy_overrides|hardware_overrides|strategies|taxonomy|"
                      r"kv_offload|advanced_options|meta|omni)\.[A-Za-z0-9_.]+")


def _pages(source: str):
    """Every recipe's default page, one per strategy and per hardware (the first six; three for a corpus
    recipe in CI's run, every listed one with COMPOSER_FULL_TESTS=1)."""
    for root in ((ROOT / "recipes",) if source == "ours" else (CORPUS,)):
        if not root.exists():
            continue
        catalog = load_catalog(root)
        for rid in (sample(recipe_paths(root), "notices", share=4) if root == CORPUS else recipe_paths(root)):
            ctx = make_context(rid, load_recipe(root, rid), catalog)
            hws = ctx.listed_hardware[:6 if root != CORPUS or FULL else 3]
            queries = [""] + [f"strategy={s}" for s in ctx.strategies] + [f"hardware={h}" for h in hws]
            for q in queries:
                yield rid, q, compose_page(ctx, q)


@pytest.mark.parametrize("source", ["ours", "corpus"])
def test_notices_name_no_key_paths_and_why_unavailable_lists_each_reason_once(source):
    """One walk over the pages (composing them is the cost), two checks on each:
    notices and reasons quote no recipe key path (Explain still names them), and
    "Why N unavailable" lists each distinct reason once and names every option."""
    renderer = PageRenderer(environment(FileSystemLoader(str(ROOT / "site_src"))))
    bad = []
    checked = 0
    if source == "corpus" and not CORPUS.exists():
        pytest.skip("shared corpus not present")
    for rid, q, page in _pages(source):
        texts = [n["message"] for n in page["notices"]] + [
            o["reason"] for opts in page["options"].values() for o in opts if o["reason"]]
        bad += [(rid, q, t) for t in texts if KEY_PATH.search(t)]
        for c in page["commands"][:1]:
            assert all(f["key"] for f in c["provenance"])
        html = renderer.fragments(page, ("controls",))["controls"]
        for block in re.findall(r'<details class="why">.*?</details>', html, re.S):
            reasons = re.findall(r"</strong>: (.*?)</li>", block, re.S)
            assert len(reasons) == len(set(reasons)), (rid, q, reasons)
            count = int(re.search(r"Why (\d+) unavailable", block).group(1))
            # labels as listed: "3, 5–7, 9–16" (runs of node counts are ranges) names 11 options
            names = [x for m in re.findall(r"<strong>(.*?)</strong>", block) for x in m.split(", ")]
            listed = sum(int(b) - int(a) + 1 if re.fullmatch(r"\d+–\d+", x) else 1
                         for x in names for a, b in [x.split("–") if re.fullmatch(r"\d+–\d+", x) else ("0", "0")])
            assert listed >= count  # every unavailable option is named
            checked += 1
    assert not bad, bad[:5]
    assert checked > 20


def test_why_lines_keep_a_thousands_separated_number_whole():
    """Found on the Kimi K3 H100 page: "~458,946 tokens" and "~986,025 tokens"
    were merged digit group by digit group into "~458, 986,946, 025 tokens"."""
    from composer.controls import why_lines

    opts = [{"disabled": True, "label": n, "reason": f"on {n} × H100 the KV cache holds {c}x (~{t} tokens)."}
            for n, c, t in ((3, "0.44", "458,946"), (4, "0.94", "986,025"))]
    # ... and reasons that differ in more than one number besides their label stay one line each
    # (a fresh user could not read "holds 0.44, 0.94x (~458,946; 986,025 tokens)")
    assert why_lines(opts) == [("3", "on 3 × H100 the KV cache holds 0.44x (~458,946 tokens)."),
                               ("4", "on 4 × H100 the KV cache holds 0.94x (~986,025 tokens).")]
    one = [{"disabled": True, "label": n, "reason": f"on {n} × H100 the KV cache holds {c}x."} for n, c in ((3, "0.44"), (4, "0.94"))]
    assert why_lines(one) == [("3, 4", "on 3, 4 × H100 the KV cache holds 0.44, 0.94x.")]
    tp = [{"disabled": True, "label": n, "reason": f"TP {8 * n} does not divide the model's 96 attention heads."}
          for n in (5, 7, 8, 9, 10, 11)]
    # never a range that claims values it does not have (TP 48 divides 96)
    assert why_lines(tp) == [("5, 7–11", "TP 40, 56, 64, 72, 80, 88 does not divide the model's 96 attention heads.")]
    hw = [{"disabled": True, "label": h, "reason": f"not supported on {h} with vLLM 0.{v}.0."}
          for h, v in (("GB200", 33), ("GB300", 9))]
    assert [r for _, r in why_lines(hw)] == ["not supported on GB200 with vLLM 0.33.0.", "not supported on GB300 with vLLM 0.9.0."]
    odd = [{"disabled": True, "label": i, "reason": f"holds {t} tokens."} for i, t in ((1, "1,23"), (2, "4,56"))]
    assert [r for _, r in why_lines(odd)] == ["holds 1,23 tokens.", "holds 4,56 tokens."]


def test_why_lines_say_an_identical_reason_once_beside_differing_ones():
    """Adversarial finding: in a group whose reasons differ in more than one
    number, identical reasons were repeated line by line; each distinct
    reason is one line with all its labels."""
    from composer.controls import why_lines

    opts = [{"disabled": True, "label": n, "reason": f"the KV cache holds {c}x (~{t} tokens)."}
            for n, c, t in ((5, "0.44", "458,946"), (6, "0.44", "458,946"), (7, "0.94", "986,025"), (8, "0.44", "458,946"))]
    assert why_lines(opts) == [("5, 6, 8", "the KV cache holds 0.44x (~458,946 tokens)."),
                               ("7", "the KV cache holds 0.94x (~986,025 tokens).")]
