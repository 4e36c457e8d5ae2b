"""Property tests over the whole space of Kimi K3 page selections.

Every query the page can produce (hardware, nodes, strategy, features in any
order, Advanced ids, KV offload, P/D pool parameters) must compose into a plan
whose rendered shell text is its argv, whose env text is its env, with one
occurrence per flag identity, consistent page options and a canonical URL that
round-trips.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import urlencode

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.plan_space import FULL
from composer.api import compose, compose_page
from tests import shellwords

HARDWARE = ("h100", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x")
FEATURES = ("tool_calling", "reasoning", "spec_decoding", "text_only")
ADVANCED = ("max_batched_8k", "max_num_seqs_256", "gpu_mem_095", "max_model_len_auto",
            "dcp_8", "no_flashinfer_autotune", "ep_weight_filter")
KV = ("off", "simple", "lmcache", "kv_store_distributed_mooncake")
STRATEGIES = ("single_node_tp", "multi_node_tp", "multi_node_tep", "multi_node_dep",
              "multi_node_tp_pp", "multi_node_tp_dp", "pd_cluster")
POOL_MODES = ("tp", "tep", "dep")
# Flags the router legitimately repeats (one per endpoint).
ROUTER_REPEATS = {"prefill", "decode"}

_NEG_NUMBER = re.compile(r"^-\d+(\.\d+)?([eE][-+]?\d+)?$")

SETTINGS = settings(max_examples=150 if FULL else 40, deadline=None, database=None)
"""40 drawn queries per property in CI's run (each clicks every hardware, strategy and KV option of
its page), 150 with COMPOSER_FULL_TESTS=1 (tests/plan_space.FULL)."""


def _maybe(strategy):
    return st.one_of(st.none(), strategy)


@st.composite
def queries(draw) -> str:
    """A page query: every parameter optional, lists in any order."""
    items: list[tuple[str, str]] = []
    hw = draw(_maybe(st.sampled_from(HARDWARE)))
    if hw is not None:
        items.append(("hardware", hw))
    nodes = draw(_maybe(st.integers(1, 16)))
    if nodes is not None:
        items.append(("nodes", str(nodes)))
    strategy = draw(_maybe(st.sampled_from(STRATEGIES)))
    if strategy is not None:
        items.append(("strategy", strategy))
    if strategy == "pd_cluster":
        for pool in ("prefill", "decode"):
            mode = draw(_maybe(st.sampled_from(POOL_MODES)))
            if mode is not None:
                items.append((f"{pool}_mode", mode))
            n = draw(_maybe(st.integers(1, 16)))
            if n is not None:
                items.append((f"{pool}_nodes", str(n)))
    features = draw(_maybe(st.lists(st.sampled_from(FEATURES), unique=True)))
    if features is not None:
        items.append(("features", ",".join(features)))
    advanced = draw(_maybe(st.lists(st.sampled_from(ADVANCED), unique=True)))
    if advanced is not None:
        items.append(("advanced", ",".join(advanced)))
    kv = draw(_maybe(st.sampled_from(KV)))
    if kv is not None:
        items.append(("kv_offload", kv))
    items = draw(st.permutations(items))
    return urlencode(items, safe=",_")


def _is_flag(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not _NEG_NUMBER.match(tok)


def _identity(tok: str) -> tuple[str, bool]:
    """``(identity, is_no_form)`` of a flag token: ``--no-x``/``--x``/``--x_y=v``."""
    name = tok.split("=", 1)[0].lstrip("-").replace("_", "-")
    if name.startswith("no-") and len(name) > 3:
        return name[3:], True
    return name, False


def _flag_tokens(cmd: dict) -> list[str]:
    """The flag tokens of a command's argv (after the program words). Composed
    values never start with "-" unless they are negative numbers."""
    start = 1 if cmd["role"] == "router" else 3
    return [t for t in cmd["argv"][start:] if _is_flag(t)]


def _all_commands(p: dict) -> list[dict]:
    return p["commands"] + p["blocked_commands"]


def _check_plan(plan: dict, query: str) -> None:
    # (g) status ok => every capacity record fits; status and command lists agree
    assert plan["status"] in ("ok", "error")
    if plan["status"] == "ok":
        assert all(rec["fits"] for rec in plan["capacity"]), plan["capacity"]
        assert plan["commands"] and not plan["blocked_commands"]
        assert not any(n["level"] == "error" for n in plan["notices"])
    else:
        assert plan["blocked_commands"] and not plan["commands"]
        assert any(n["level"] == "error" for n in plan["notices"])

    # (f) nothing in it that vLLM's CLI (the pinned release) would refuse or ignore
    assert not [n for n in plan["notices"] if n["code"].startswith("vllm-")], plan["notices"]

    for cmd in _all_commands(plan):
        # (a) the shell text is the argv
        assert shellwords.split(cmd["command"]) == cmd["argv"], cmd["command"]
        # (b) the env text is the env
        env_lines = [ln for ln in cmd["env_text"].split("\n") if ln] if cmd["env_text"] else []
        assert len(env_lines) == len(cmd["env"])
        parsed = {}
        for line in env_lines:
            words = shlex.split(line)
            assert len(words) == 2 and words[0] == "export", line
            k, _, v = words[1].partition("=")
            parsed[k] = v
        assert parsed == cmd["env"]
        assert list(parsed) == list(cmd["env"])
        # (c) one occurrence per flag identity, (d) never --x with --no-x
        flags = _flag_tokens(cmd)
        idents = [_identity(t) for t in flags]
        names = [n for n, _ in idents]
        for name in set(names):
            if cmd["role"] == "router" and name in ROUTER_REPEATS:
                continue
            assert names.count(name) == 1, (name, cmd["argv"])
        on = {n for n, neg in idents if not neg}
        off = {n for n, neg in idents if neg}
        assert not on & off, (on & off, cmd["argv"])

    # (e) the options agree with the selection
    sel, opts = plan["selection"], plan["options"]
    for name in ("hardware", "strategy", "variant"):
        chosen = [o["id"] for o in opts[name] if o["selected"]]
        assert chosen == [sel[name]], (name, chosen, sel)
    chosen_kv = [o["id"] for o in opts["kv_offload"] if o["selected"]]
    assert chosen_kv == [sel["kv_offload"]], (chosen_kv, sel)
    assert {o["id"] for o in opts["features"] if o["selected"]} == set(sel["features"])
    assert {o["id"] for o in opts["advanced"] if o["selected"]} == set(sel["advanced"])
    chosen_nodes = [o["id"] for o in opts["nodes"] if o["selected"]]
    if sel["strategy"] == "pd_cluster":
        assert chosen_nodes == []
        for pool in ("prefill", "decode"):
            assert [o["id"] for o in opts[f"{pool}_mode"] if o["selected"]] == [sel[f"{pool}_mode"]]
            assert [o["id"] for o in opts[f"{pool}_nodes"] if o["selected"]] == [str(sel[f"{pool}_nodes"])]
            assert sel["nodes"] == sel["prefill_nodes"] + sel["decode_nodes"]
    else:
        assert chosen_nodes == [str(sel["nodes"])]
        assert "prefill_mode" not in sel and "decode_mode" not in sel
        n_vllm = len([c for c in _all_commands(plan) if c["role"] != "router"])
        assert n_vllm == sel["nodes"]


@SETTINGS
@given(query=queries())
def test_every_page_selection_composes_a_consistent_plan(k3, query):
    plan = compose_page(k3, query)
    _check_plan(plan, query)
    # (f) the canonical URL round-trips to the same selection, and is a fixed point
    again = compose_page(k3, plan["url"])
    assert again["selection"] == plan["selection"], (query, plan["url"])
    assert again["url"] == plan["url"]
    assert again["status"] == plan["status"]
    assert [c["argv"] for c in _all_commands(again)] == [c["argv"] for c in _all_commands(plan)]
    assert compose_page(k3, plan["query"])["selection"] == plan["selection"]


@SETTINGS
@given(query=queries())
def test_options_queries_select_what_they_offer(k3, query):
    """Clicking an enabled hardware/strategy/kv option lands on that option."""
    plan = compose_page(k3, query)
    for name in ("hardware", "strategy", "kv_offload"):
        for opt in plan["options"][name]:
            if opt["disabled"]:
                continue
            got = compose(k3, opt["query"], every_form=False)["selection"]  # the page's selection, without its controls
            assert got[name] == opt["id"], (query, name, opt["id"], opt["query"], got)
