"""Hostile and invalid page queries: composing never raises, and every problem
is reported as a notice while a valid plan is still shown."""

from __future__ import annotations

from urllib.parse import parse_qsl

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from composer.api import compose_page
from composer.query import MAX_QUERY_LEN, parse_query

DEFAULT = {"hardware": "b300", "variant": "default", "strategy": "single_node_tp", "nodes": 1,
           "features": ["tool_calling", "reasoning"], "advanced": [], "kv_offload": "off", "install": "pip", "context": "32k"}

BIG = "hardware=h200&junk=" + "a" * 20_000

HOSTILE = [
    # (query, expected notice code, selection keys expected to hold)
    ("hardware=zzz", "invalid-hardware", {"hardware": "b300"}),
    ("hardware=H200", "id-case", {"hardware": "h200"}),  # an id in another case is read as that id, and said
    ("strategy=Multi_Node_TP", "id-case", {"strategy": "multi_node_tp"}),
    ("hardware=%00", "invalid-hardware", {"hardware": "b300"}),
    ("hardware=h200%0a", "invalid-hardware", {"hardware": "b300"}),
    ("hardware=%ff%fe", "invalid-hardware", {"hardware": "b300"}),
    ("hardware=%3Cscript%3Ealert(1)%3C/script%3E", "invalid-hardware", {"hardware": "b300"}),
    ("nodes=abc", "query-ignored", {"nodes": 1}),
    ("nodes=999", "invalid-nodes", {"nodes": 1}),
    ("nodes=0", "invalid-nodes", {"nodes": 1}),
    ("nodes=-1", "query-ignored", {"nodes": 1}),
    ("nodes=1e3", "query-ignored", {"nodes": 1}),
    ("nodes=0x10", "query-ignored", {"nodes": 1}),
    ("nodes=2.5", "query-ignored", {"nodes": 1}),
    ("nodes=" + "9" * 600, "query-ignored", {"nodes": 1}),
    ("strategy=../../etc", "invalid-strategy", {"strategy": "single_node_tp"}),
    ("strategy=..%2F..%2Fetc%2Fpasswd", "invalid-strategy", {"strategy": "single_node_tp"}),
    ("strategy=__proto__", "invalid-strategy", {"strategy": "single_node_tp"}),
    ("features=unknown", "invalid-feature", {"features": ["tool_calling", "reasoning"]}),  # defaults kept
    ("features=unknown,reasoning", "invalid-feature", {"features": ["reasoning"]}),
    ("advanced=bogus", "invalid-advanced", {"advanced": []}),
    ("advanced=dcp_8", "advanced-unavailable", {"advanced": []}),
    ("kv_offload=bogus", "invalid-kv-offload", {"kv_offload": "off"}),
    ("variant=nvfp4", "invalid-variant", {"variant": "default"}),
    ("hardware=h200&hardware=b300", "query-ignored", {"hardware": "h200", "nodes": 2}),
    ("nodes=2&nodes=3&strategy=multi_node_tp", "query-ignored", {"nodes": 2}),
    (BIG, "query-ignored", {"hardware": "h200"}),
    ("features=" + "x" * 20_000, "query-ignored", {"features": DEFAULT["features"]}),
    # non-ASCII digits: Arabic-Indic three (raw and percent-encoded), fullwidth one, superscript two
    ("nodes=٣", "query-ignored", {"nodes": 1}),
    ("nodes=%D9%A3", "query-ignored", {"nodes": 1}),
    ("nodes=１", "query-ignored", {"nodes": 1}),
    ("nodes=²", "query-ignored", {"nodes": 1}),
    ("%00", "query-ignored", {}),
    ("%00=%00", "query-ignored", {}),
    ("%ZZ", "query-ignored", {}),
    ("&&&=&==", "query-ignored", {}),
    ("bogus=1", "query-ignored", {}),
    ("strategy=pd_cluster&prefill_mode=zz", "invalid-pool-mode", {"prefill_mode": "tep"}),
    ("strategy=pd_cluster&decode_nodes=99", "invalid-nodes", {"decode_mode": "dep"}),
    ("strategy=pd_cluster&prefill_nodes=abc", "query-ignored", {"strategy": "pd_cluster"}),
    ("hardware=h200&strategy=single_node_tp&nodes=4", "nodes-adjusted", {"nodes": 1}),
]


PLAN_WARNINGS = {"kv-capacity", "scheduler-budget", "cudagraph-capture"}
"""Warnings about the plan itself (not about the query)."""


@pytest.mark.parametrize("query,code,expect", HOSTILE, ids=lambda v: v[:40] if isinstance(v, str) else None)
def test_hostile_query_gives_a_notice_and_a_plan(plan, query, code, expect):
    p = plan(query)
    assert code in [n["code"] for n in p["notices"]], p["notices"]
    for key, value in expect.items():
        assert p["selection"][key] == value, (key, p["selection"])
    assert p["commands"] or p["blocked_commands"]
    json.dumps(p)  # the plan stays JSON-serialisable
    # a notice never echoes kilobytes of user input
    for n in p["notices"]:
        assert len(n["message"]) < 400, n["message"][:100]
    # the canonical URL only carries valid, canonical values
    again = plan(p["url"])
    assert again["selection"] == p["selection"]
    assert [n for n in again["notices"] if n["level"] == "warning" and n["code"] not in PLAN_WARNINGS] == []


def test_empty_query_is_the_default_without_notices(plan):
    for q in ("", "?", None, {}):
        p = plan(q)
        assert p["selection"] == DEFAULT
        assert p["notices"] == []
        assert p["status"] == "ok"
        assert p["url"] == ""


def test_twenty_kilobyte_query_is_truncated_and_reported(plan):
    assert len(BIG) > 20_000 > MAX_QUERY_LEN
    p = plan(BIG)
    msgs = [n["message"] for n in p["notices"] if n["code"] == "query-ignored"]
    assert any(str(MAX_QUERY_LEN) in m for m in msgs), msgs
    assert "a" * 100 not in json.dumps(p["notices"])


def test_repeated_parameter_first_wins(plan):
    p = plan("hardware=mi355x&hardware=h100&hardware=b200")
    assert p["selection"]["hardware"] == "mi355x"
    assert sum("more than once" in n["message"] for n in p["notices"]) >= 1


def test_user_text_in_messages_is_quoted_and_shortened(plan):
    p = plan("hardware=" + "<b>" * 100)
    (n,) = [n for n in p["notices"] if n["code"] == "invalid-hardware"]
    assert "'<b><b>" in n["message"] and "…" in n["message"]
    assert n["message"].count("<b>") < 20


def test_mapping_query_is_accepted(plan):
    p = plan({"hardware": "h200", "nodes": 3, "strategy": "multi_node_dep"})
    assert (p["selection"]["hardware"], p["selection"]["nodes"], p["selection"]["strategy"]) == ("h200", 3, "multi_node_dep")
    q = plan({"nodes": "abc", "bogus": "1"})
    assert {n["code"] for n in q["notices"]} == {"query-ignored"}


# ------------------------------------------------------- explicit features=
@pytest.mark.parametrize("prefix", ["", "hardware=h200&", "hardware=mi355x&", "hardware=b300&strategy=pd_cluster&"])
def test_explicit_empty_features_turns_all_features_off_and_round_trips(plan, prefix):
    p = plan(prefix + "features=")
    assert p["selection"]["features"] == []
    assert "features=" in p["url"]
    assert all(not o["selected"] for o in p["options"]["features"])
    for c in p["commands"] + p["blocked_commands"]:
        for flag in ("--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser",
                     "--speculative-config", "--language-model-only"):
            assert flag not in c["argv"]
    again = plan(p["url"])
    assert again["selection"] == p["selection"]
    assert again["url"] == p["url"]
    # and the absent parameter still means "recipe defaults"
    default = plan(prefix.rstrip("&"))
    assert default["selection"]["features"] == ["tool_calling", "reasoning"]
    assert dict(parse_qsl(default["url"][1:], keep_blank_values=True)).get("features", "x") != ""


def test_feature_option_that_turns_the_last_feature_off_keeps_features_empty(plan):
    p = plan("features=reasoning")
    opt = next(o for o in p["options"]["features"] if o["id"] == "reasoning")
    assert opt["selected"]
    assert plan(opt["query"])["selection"]["features"] == []


def test_parse_query_never_raises_on_odd_input():
    for q in ("%", "%%", "=", "==", "&", "a=%E0%A4%A", "\x00", "?" * 10_000, "features=" + ",".join(["x"] * 5000)):
        req = parse_query(q)
        assert isinstance(req.problems, tuple)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=300))
def test_arbitrary_text_queries_never_raise(k3, text):
    p = compose_page(k3, text)
    assert p["status"] in ("ok", "error")
    assert p["commands"] or p["blocked_commands"]
    assert compose_page(k3, p["url"])["selection"] == p["selection"]


@settings(max_examples=100, deadline=None, database=None)
@given(st.dictionaries(st.sampled_from(["hardware", "nodes", "strategy", "features", "advanced", "kv_offload",
                                        "variant", "prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes",
                                        "v", "other"]),
                       st.text(max_size=40), max_size=8))
def test_arbitrary_parameter_values_never_raise(k3, values):
    p = compose_page(k3, values)
    assert p["status"] in ("ok", "error")
    assert compose_page(k3, p["url"])["selection"] == p["selection"]


def test_the_cli_takes_a_whole_page_link_as_query(capsys):
    """A user pastes the page's address (Share) into --query or --compare: its
    query part is the plan's, the rest ignored, never an unknown parameter."""
    from composer.buildtime.cli import main, page_query

    assert page_query("https://host/site/moonshotai/Kimi-K3/?v=2&hardware=h200#x") == "v=2&hardware=h200"
    assert page_query("?hardware=h200") == "hardware=h200" and page_query("hardware=h200") == "hardware=h200"
    assert main(["moonshotai/Kimi-K3", "--json", "--query", "https://host/moonshotai/Kimi-K3/?v=2&hardware=h200"]) == 0
    by_link = json.loads(capsys.readouterr().out)
    assert main(["moonshotai/Kimi-K3", "--json", "--query", "v=2&hardware=h200"]) == 0
    assert json.loads(capsys.readouterr().out) == by_link
    assert by_link["selection"]["hardware"] == "h200"
    assert "query-ignored" not in [n["code"] for n in by_link["notices"]]


def test_the_cli_help_names_the_other_commands_and_the_exit_status(capsys):
    from composer.buildtime.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "python -m composer check" in text and "python -m composer import" in text
    assert "1 the plan has errors" in text


@pytest.mark.parametrize("text,want", [("hardware=h200&nodes=2&x=http://a", "hardware=h200&nodes=2&x=http://a"),
                                       ("HTTPS://h/p/?hardware=h200", "hardware=h200")])
def test_only_text_that_starts_as_a_link_is_read_as_one(text, want):
    from composer.buildtime.cli import page_query

    assert page_query(text) == want


def test_a_broken_link_is_a_clear_error_not_a_traceback(capsys):
    from composer.buildtime.cli import main

    assert main(["moonshotai/Kimi-K3", "--query", "https://[::1/moonshotai/Kimi-K3/?hardware=h200"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: not a page link") and "Traceback" not in err


def test_a_link_to_another_recipes_page_is_refused(capsys):
    """A fresh user's finding: a Qwen page link given to the Kimi K3 command was read as a K3 selection."""
    from composer.buildtime.cli import main

    link = "https://recipes.vllm.ai/Qwen/Qwen3-235B-A22B-Instruct-2507/?hardware=h100"
    assert main(["moonshotai/Kimi-K3", "--query", link]) == 2
    assert "a page of Qwen/Qwen3-235B-A22B-Instruct-2507, not of moonshotai/Kimi-K3" in capsys.readouterr().err
    assert main(["moonshotai/Kimi-K3", "--json", "--query", "https://h/site/moonshotai/kimi-k3/?hardware=h100"]) == 0


def test_the_cli_json_carries_the_pages_options_when_asked(capsys):
    """``--json --options`` adds every control's choices as the page shows
    them (composer.api.compose_page), so a tool can offer the same choices
    with the same reasons; without --options the plan has none; --options
    without --json is a usage error."""
    from composer.api import compose_page, make_context
    from composer.buildtime.cli import main
    from composer.buildtime.loader import load_catalog, load_recipe

    root = Path(__file__).resolve().parent.parent / "recipes"
    assert main(["moonshotai/Kimi-K3", "--json", "--options", "--query", "hardware=h100"]) == 0
    out = json.loads(capsys.readouterr().out)
    ctx = make_context("moonshotai/Kimi-K3", load_recipe(root, "moonshotai/Kimi-K3"), load_catalog(root))
    assert out["options"] == json.loads(json.dumps(compose_page(ctx, "hardware=h100")["options"]))
    assert any(o["disabled"] and o["reason"] for o in out["options"]["strategy"])
    assert main(["moonshotai/Kimi-K3", "--json", "--query", "hardware=h100"]) == 0
    assert "options" not in json.loads(capsys.readouterr().out)
    assert main(["moonshotai/Kimi-K3", "--options"]) == 2
    assert "--options needs --json" in capsys.readouterr().err
