"""Flag identity and last-writer-wins composition (composer.argv)."""

from __future__ import annotations


import pytest

from composer.argv import ArgvBuilder, ArgvError, EnvBuilder, Source, Unit, canonical_name, is_flag_token, parse_tokens
from composer.shell import command_text
from tests import shellwords

A = Source("base", "model.base_args")
B = Source("advanced", "advanced.max_num_seqs_256")
C = Source("features", "features.spec_decoding.args")


def build(*layers: tuple[list[str], Source]) -> ArgvBuilder:
    b = ArgvBuilder()
    for tokens, src in layers:
        b.add_tokens(tokens, src)
    return b


# ------------------------------------------------------------- identity
@pytest.mark.parametrize("tokens", [
    ["--max-num-seqs", "8"],
    ["--max-num-seqs=8"],
    ["--max_num_seqs", "8"],
    ["--max_num_seqs=8"],
    ["--max-num_seqs", "8"],
])
def test_spellings_of_a_valued_flag_share_one_identity(tokens):
    assert parse_tokens(tokens) == [Unit("max-num-seqs", "8")]


@pytest.mark.parametrize("short,long", [
    ("-tp", "tensor-parallel-size"),
    ("-pp", "pipeline-parallel-size"),
    ("-dp", "data-parallel-size"),
    ("-dpl", "data-parallel-size-local"),
])
def test_short_aliases_expand_to_the_long_name(short, long):
    assert parse_tokens([short, "8"]) == [Unit(long, "8")]
    assert canonical_name(short) == (long, None)


def test_short_boolean_alias():
    assert parse_tokens(["-ep"]) == [Unit("enable-expert-parallel", None, True)]


def test_all_spellings_collapse_to_one_unit_and_the_last_wins():
    b = build((["--tensor-parallel-size", "2"], A), (["-tp", "4"], B), (["--tensor_parallel_size=8"], C))
    assert b.tokens() == ["--tensor-parallel-size", "8"]
    (e,) = b.entries()
    assert e.source == C
    assert [u.value for u, _ in e.replaced] == ["2", "4"]


def test_canonical_tokens_use_dashes_and_separate_values():
    b = build((["--max_num_batched_tokens=8192"], A))
    assert b.tokens() == ["--max-num-batched-tokens", "8192"]


def test_dotted_sub_keys_keep_their_dots_and_only_the_head_is_normalised():
    assert canonical_name("--compilation_config.cudagraph_mode") == ("compilation-config.cudagraph_mode", None)
    assert parse_tokens(["--attention-config.backend=X"]) == [Unit("attention-config.backend", "X")]


# ------------------------------------------------------------- booleans
def test_no_prefix_is_the_off_sense_of_the_same_identity():
    assert canonical_name("--no-enable-prefix-caching") == ("enable-prefix-caching", False)
    assert canonical_name("--enable-prefix-caching") == ("enable-prefix-caching", None)
    assert parse_tokens(["--no-enable-prefix-caching"]) == [Unit("enable-prefix-caching", None, False)]


@pytest.mark.parametrize("first,second", [
    ("--enable-prefix-caching", "--no-enable-prefix-caching"),
    ("--no-enable-prefix-caching", "--enable-prefix-caching"),
    ("--enable_prefix_caching", "--no-enable-prefix-caching"),
    ("--no-enable_prefix_caching", "--enable-prefix-caching"),
])
def test_x_and_no_x_last_wins_never_both(first, second):
    b = build(([first], A), ([second], B))
    toks = b.tokens()
    assert len(toks) == 1
    want = "--no-enable-prefix-caching" if second.startswith("--no-") else "--enable-prefix-caching"
    assert toks == [want]
    (e,) = b.entries()
    assert e.source == B and len(e.replaced) == 1


def test_toggle_three_times_ends_on_the_last():
    b = build((["--enable-x"], A), (["--no-enable-x"], B), (["--enable-x"], C))
    assert b.tokens() == ["--enable-x"]
    assert [u.enabled for u, _ in b.get("enable-x").replaced] == [True, False]


def test_boolean_followed_by_a_flag_takes_no_value():
    assert parse_tokens(["--headless", "--node-rank", "1"]) == [
        Unit("headless", None, True), Unit("node-rank", "1")]


def test_no_flag_does_not_take_a_value():
    with pytest.raises(ArgvError):
        parse_tokens(["--no-enable-x", "v"])


# ------------------------------------------------------------- values
@pytest.mark.parametrize("value", ["-1", "-42", "-1.5", "-1e-3", "-2E+4"])
def test_negative_numbers_are_values_not_flags(value):
    assert not is_flag_token(value)
    assert parse_tokens(["--seed", value]) == [Unit("seed", value)]
    # argparse (CPython 3.12 _negative_number_matcher) reads -1, -42, -1.5 as values but an exponent
    # such as -1e-3 as an option: that one is attached (--seed=-1e-3), as vLLM's parser then reads it.
    attached = "e" in value.lower()
    assert build((["--seed", value], A)).tokens() == ([f"--seed={value}"] if attached else ["--seed", value])


def test_negative_number_then_more_flags():
    assert parse_tokens(["--seed", "-1", "--max-num-seqs", "8"]) == [Unit("seed", "-1"), Unit("max-num-seqs", "8")]


@pytest.mark.parametrize("value", [
    '{"model":"Inferact/Kimi-K3-DSpark","method":"dspark","num_speculative_tokens":7}',
    '{"kv_connector":"X","kv_connector_extra_config":{"a=b":"--c d"}}',
    '["a", "b"]',
    "{}",
])
def test_json_values_stay_one_token(value):
    assert parse_tokens(["--speculative-config", value]) == [Unit("speculative-config", value)]
    assert parse_tokens(["--speculative-config=" + value]) == [Unit("speculative-config", value)]
    b = build((["--speculative-config", value], A))
    assert b.tokens() == ["--speculative-config", value]


def test_inline_value_keeps_later_equals_signs():
    assert parse_tokens(["--override=a=b=c"]) == [Unit("override", "a=b=c")]


def test_value_with_spaces_stays_one_element():
    value = "{{ messages | join(' ') }} and more"
    b = build((["--chat-template", value, "--max-num-seqs", "8"], A))
    toks = b.tokens()
    assert toks == ["--chat-template", value, "--max-num-seqs", "8"]
    argv = ["vllm", "serve", "m"] + toks
    text = command_text(argv, [e.unit.tokens() for e in b.entries()])
    assert shellwords.split(text) == argv


def test_empty_inline_value_is_a_value():
    assert parse_tokens(["--x="]) == [Unit("x", "")]


def test_stray_positional_is_an_error():
    with pytest.raises(ArgvError):
        parse_tokens(["value-without-flag"])
    with pytest.raises(ArgvError):
        parse_tokens(["--x", "1", "2"])
    with pytest.raises(ArgvError):
        parse_tokens([8])  # type: ignore[list-item]


# ------------------------------------------------------------- provenance
def test_replaced_is_recorded_with_value_and_source():
    b = build((["--max-num-seqs", "128"], A), (["--max-num-seqs", "256"], B))
    e = b.get("max-num-seqs")
    assert e.unit == Unit("max-num-seqs", "256")
    assert e.source == B
    assert e.replaced == [(Unit("max-num-seqs", "128"), A)]


def test_replaced_chain_accumulates_in_order():
    b = build((["--max-num-seqs", "128"], A), (["--max-num-seqs", "256"], B), (["--max-num-seqs", "32"], C))
    e = b.get("max-num-seqs")
    assert e.source == C
    assert [(u.value, s) for u, s in e.replaced] == [("128", A), ("256", B)]


def test_same_value_rewrite_is_still_recorded():
    b = build((["--gpu-memory-utilization", "0.95"], A), (["--gpu-memory-utilization", "0.95"], B))
    e = b.get("gpu-memory-utilization")
    assert e.source == B and e.replaced == [(Unit("gpu-memory-utilization", "0.95"), A)]


def test_unrelated_flags_are_not_replaced():
    b = build((["--a", "1", "--b", "2"], A), (["--c", "3"], B))
    assert all(not e.replaced for e in b.entries())
    assert b.tokens() == ["--a", "1", "--b", "2", "--c", "3"]


def test_replacement_keeps_the_first_position():
    b = build((["--a", "1", "--b", "2"], A), (["--a", "9"], B))
    assert b.tokens() == ["--a", "9", "--b", "2"]


def test_copy_is_independent():
    b = build((["--a", "1"], A))
    c = b.copy()
    c.add_tokens(["--a", "2"], B)
    assert b.tokens() == ["--a", "1"] and not b.get("a").replaced
    assert c.tokens() == ["--a", "2"] and len(c.get("a").replaced) == 1


def test_remove():
    b = build((["--a", "1", "--b"], A))
    assert b.remove("b").unit == Unit("b", None, True)
    assert b.remove("b") is None
    assert b.tokens() == ["--a", "1"]


def test_env_and_argv_follow_one_ordering_rule():
    """A replaced variable keeps its place, as a replaced flag does; a new one goes last."""
    env = EnvBuilder()
    env.add({"A": "1", "B": "2"}, A)
    env.add({"A": "3", "C": "4"}, B)
    env.add({"B": "5"}, C)
    assert list(env.values().items()) == [("A", "3"), ("B", "5"), ("C", "4")]
    assert env.entries["A"].source == B and env.entries["A"].replaced == [("1", A)]
    assert env.entries["B"].replaced == [("2", A)]
    argv = build((["--a", "1", "--b", "2"], A), (["--a", "3", "--c", "4"], B), (["--b", "5"], C))
    assert [e.unit.key.upper() for e in argv.entries()] == list(env.values())  # the same order for the same history


def test_composed_env_is_in_the_order_variables_were_first_set():
    """In a composed P/D command with a KV store, each variable sits where the
    layer that first set it put it, however later layers (the KV store, the
    per-node placement) re-set it: env order follows the layer table
    (``layers.TABLE``) by first setter, as argv does."""
    from pathlib import Path

    from composer.api import compose, make_context
    from composer.layers import TABLE, Layer
    from composer.buildtime.loader import load_catalog, load_recipe

    root = Path(__file__).resolve().parents[1] / "recipes"
    rid = "Qwen/Qwen3-235B-A22B-Instruct-2507"
    recipe, catalog = load_recipe(root, rid), load_catalog(root)
    rank = {path.text: i for i, step in enumerate(TABLE) if isinstance(step, Layer)
            for path, _ in step.every(recipe, catalog)}
    plan = compose(make_context(rid, recipe, catalog), "strategy=pd_cluster&kv_offload=kv_store_distributed_mooncake", every_form=False)
    replaced = 0
    for cmd in plan["commands"]:
        first = [(e["replaced"][0] if e["replaced"] else e)["key"] for e in cmd["env_provenance"]]
        ranks = [rank.get(k, len(TABLE)) for k in first]  # composer-made keys rank last
        assert [e["name"] for e in cmd["env_provenance"]] == list(cmd["env"])
        assert ranks == sorted(ranks), list(zip(cmd["env"], first))
        replaced += sum(bool(e["replaced"]) for e in cmd["env_provenance"])
    assert replaced and len(set(rank.values())) > 5


@pytest.mark.parametrize("word", ["$$A", "a$B$", "$HEAD_IP", "x'y\"z", "", "!$A`b`\\", "tab\there", "$HEAD_IPs",
                                  "$A_b", "$A1x:$B", "${A}"])
def test_quoted_words_read_back_as_a_posix_shell_reads_them(word):
    # Found by the hostile-values property (test_positions): "$$A" is written "\$$A" (a literal
    # dollar beside the live placeholder $A); shlex keeps that backslash, a POSIX shell drops it.
    from composer.shell import quote

    assert shellwords.split(quote(word)) == [word]
    assert shellwords.split(f"vllm serve m \\\n  --x {quote(word)}") == ["vllm", "serve", "m", "--x", word]


def test_a_placeholder_before_a_name_character_is_braced_as_bash_reads_it():
    # Adversarial finding: quote("$HEAD_IPs") wrote "$HEAD_IPs", which a shell expands as the variable HEAD_IPs.
    import subprocess

    from composer.shell import quote

    # (a placeholder is $ and upper case, digits, _: "$A_b" is the placeholder $A_ and a "b")
    env = {"HEAD_IP": "10.0.0.1", "HEAD_IPs": "WRONG", "A": "a", "A_": "u", "A_b": "WRONG", "PATH": "/usr/bin:/bin"}
    for word, want in (("$HEAD_IPs", "10.0.0.1s"), ("$A_b", "ub"), ("x$A-$A", "xa-a"), ("$HEAD_IP", "10.0.0.1")):
        got = subprocess.run(["bash", "-c", f"printf %s {quote(word)}"], env=env, capture_output=True, text=True).stdout
        assert got == want, (word, quote(word), got)


def test_a_braced_placeholder_is_still_a_placeholder_everywhere(tmp_path):
    # Adversarial finding: "$SERVED_NAMEv2" is written "${SERVED_NAME}v2", which the placeholder list, the
    # script's guard and the page's fill-in (app.js phSubstitute) did not recognise.
    from composer.api import compose, make_context
    from composer.buildtime.loader import load_catalog
    from tests.conftest import ROOT

    import yaml

    src = ROOT / "recipes" / "models" / "meta-llama" / "Llama-3.3-70B-Instruct.yaml"
    data = yaml.safe_load(src.read_text())
    data["model"]["base_args"] = list(data["model"].get("base_args") or []) + ["--served-model-name", "$SERVED_NAMEv2"]
    ctx = make_context("meta-llama/Llama-3.3-70B-Instruct", data, load_catalog(ROOT / "recipes"))
    plan = compose(ctx, "hardware=h200", every_form=False)
    cmd = plan["commands"][0]
    assert '"${SERVED_NAME}v2"' in cmd["text"]
    assert "SERVED_NAME" in [p["name"] for p in plan["placeholders"]]
    assert ': "${SERVED_NAME:?' in cmd["script"]
    app = (ROOT / "site_src" / "assets" / "app.js").read_text()
    assert "/\\$\\{([A-Z][A-Z0-9_]*)\\}/g" in app  # phSubstitute fills ${NAME} too
