"""Issue 19, property: capacity counts exactly the GPUs the commands'
parallel flags use — for the plans of our recipes' selection space (the
characterized selections of ``tests/golden.py``, a third of them in CI's run:
``golden.sampled``) and every corpus recipe's default page. For each capacity record (deployment or P/D pool), the first
command of that pool gives TP × PP × DP (``--tensor-parallel-size``,
``--pipeline-parallel-size``, ``--data-parallel-size``; 1 when unset):
``world_size`` equals it and one replica (``gpus``) is either all of it
(TP, TP+PP, DP+EP) or one DP rank's TP × PP (TP+DP: one replica per node)."""

from __future__ import annotations

import pytest

from composer.api import compose
from composer.argv import flag_value
from tests import golden

# Our selections: every default and the second block of 24 in three (golden.sampled; all with
# COMPOSER_FULL_TESTS=1); corpus recipes: their defaults.
SELECTIONS = [(s, r, q) for s, r, q in ((x["source"], x["recipe"], x["query"]) for x in golden.sampled(golden.load(), 1))
              if s == "ours" or q == ""]


def _int(argv, flag) -> int:
    v = flag_value(argv, flag)
    return int(v) if v and v.isdigit() else 1


def _check(source: str, rid: str, query: str) -> list[str]:
    plan = compose(golden.context(source, rid), query, every_form=False)
    cmds = [c for c in (plan["commands"] or plan["blocked_commands"]) if c["role"] != "router"]
    if not cmds or plan["recipe"]["model_id"] and "--omni" in cmds[0]["argv"]:
        return []  # vLLM-Omni: the recipe's own args carry the parallelism (semantics §14)
    bad = []
    for cap in plan["capacity"]:
        pool = cap["scope"] if cap["scope"] in ("prefill", "decode") else None
        first = next(c for c in cmds if c["pool"] == pool)
        argv = first["argv"]
        tp, pp, dp = (_int(argv, f) for f in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"))
        if cap["world_size"] != tp * pp * dp or cap["gpus"] not in (tp * pp, tp * pp * dp):
            bad.append(f"{source} {rid} ?{query} [{cap['scope']}]: capacity counts {cap['gpus']} of {cap['world_size']} "
                       f"GPUs; the flags use TP {tp} × PP {pp} × DP {dp}")
    return bad


@pytest.mark.parametrize("source", ["ours", "corpus"])
def test_capacity_counts_the_gpus_the_flags_use(source):
    sels = [x for x in SELECTIONS if x[0] == source]
    if not sels:
        pytest.skip(f"no {source} selections")
    bad = [line for sel in sels for line in _check(*sel)]
    assert not bad, f"{len(bad)} of {len(sels)} plans:\n" + "\n".join(bad[:20])
