"""Issue 20.2: the config-file form (``composer/forms/config.py``).

Every YAML file the form writes, read back by vLLM 0.33.0's own
``FlexibleArgumentParser.load_config_file`` (its source, taken from the pinned
wheel's ``vllm/utils/argparse_utils.py`` and run as written: the module itself
cannot be imported without torch), plus the options the one-line command keeps
after ``--config``, is exactly the plan's argv, order aside — for every plan
of our recipes' selection space and every corpus default plan. A JSON object
value comes back as vLLM's ``json.dumps`` of the same object, so JSON values
are compared as JSON.
"""

from __future__ import annotations

import ast
import re
import json
import logging
import textwrap
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from composer import vllm_cli
from composer.api import compose
from composer.argv import parse_tokens
from composer.query import parse_query
from tests import shellwords
from tests.plan_space import CORPUS, corpus_contexts, our_plans, shape_queries

SOURCE = "vllm/utils/argparse_utils.py"


@lru_cache(maxsize=1)
def vllm_load_config_file():
    """``FlexibleArgumentParser.load_config_file`` of the pinned vLLM wheel,
    compiled from its source with the names it uses (json, yaml, logger, Any)
    and bound to a parser whose ``_option_string_actions`` holds every
    ``--no-<name>`` vLLM registers (its ``BooleanOptionalAction`` options:
    kind ``bool`` in the CLI table generated from the same wheel)."""
    from composer.buildtime import vllm_cli_gen

    wheel = vllm_cli_gen.fetch("vllm", vllm_cli_gen.VLLM_VERSION)
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read(SOURCE).decode()
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FlexibleArgumentParser")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "load_config_file")
    code = textwrap.dedent(ast.get_source_segment(source, fn))
    scope: dict[str, Any] = {"json": json, "yaml": yaml, "Any": Any, "logger": logging.getLogger("vllm")}
    exec(compile(code, f"{wheel.name}/{SOURCE}", "exec"), scope)

    class Parser:
        _option_string_actions = {f"--no-{name}": None for name, o in vllm_cli.OPTIONS.items() if o["kind"] == "bool"}

    return lambda path: scope["load_config_file"](Parser(), str(path))


def _value(v: str | None):
    if v is None:
        return None
    try:
        data = json.loads(v)
    except ValueError:
        return v
    return ("json", json.dumps(data, sort_keys=True)) if isinstance(data, (dict, list)) else v


def units(tokens: list[str]) -> list[tuple]:
    """The options of ``tokens`` as sorted ``(flag tokens…)``, a JSON value as its canonical JSON."""
    return sorted((u.key, u.enabled, _value(u.value)) for u in parse_tokens(tokens))


def check_plan(plan: dict, tmp: Path) -> int:
    """The round trip for every ``vllm serve`` command of one config-form plan;
    returns how many files were checked."""
    cmds = plan["commands"] or plan["blocked_commands"]
    files = {a["command"]: a for a in plan["output"]["artifacts"] if a["media_type"] == "application/yaml"}
    load = vllm_load_config_file()
    checked = 0
    for i, c in enumerate(cmds):
        argv = c["argv"]
        if argv[:2] != ["vllm", "serve"]:
            assert i not in files and c["text"] == c["pip_text"]  # the router keeps its own command
            continue
        art = files[i]
        path = tmp / art["file_name"]
        path.write_text(art["text"])
        args = load(path)
        # the one-line command after the env lines (a value may hold a newline inside its quotes)
        line = c["text"][len(c["env_text"]):].lstrip("\n") if c["env_text"] and c["text"].startswith(c["env_text"]) \
            else c["text"].split("\n")[-1]
        # placeholders stay as written; "${A}a" is how a shell line writes the argv token "$Aa" ($A, then "a");
        # a shell's words, not shlex's (a hypothesis example: "$A\$" for the value $A$)
        words = shellwords.split(line)
        assert words[:4] == ["vllm", "serve", "--config", art["file_name"]], line
        if c["env"]:
            assert c["text"].startswith(c["env_text"]), "the env the command needs is in its tab"
        assert args[:2] == ["--model", argv[2]], args[:2]
        got = args[2:] + words[4:]
        assert units(got) == units(list(argv[3:])), (art["file_name"], got, argv)
        checked += 1
    return checked


def config_plan(ctx, query: str) -> dict:
    return compose(ctx, parse_query(query).with_values(install="config").query(), every_form=False)


@pytest.mark.parametrize("rid", [rid for rid, _ in our_plans()])
def test_every_plan_of_our_recipes_round_trips_through_vllm_load_config_file(rid, tmp_path):
    ctx = dict(our_plans())[rid]
    seen, files = 0, 0
    for plan in (config_plan(ctx, q) for q in shape_queries(ctx)):
        seen += 1
        assert plan["output"]["form"] == "config"
        files += check_plan(plan, tmp_path)
    assert seen > 20 and files >= seen


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_every_corpus_default_plan_round_trips(tmp_path):
    files = 0
    for _rid, ctx in corpus_contexts():
        files += check_plan(config_plan(ctx, ""), tmp_path)
    assert files > 100


def test_values_of_each_kind_come_back_unchanged(k3, tmp_path):
    """Booleans both ways, integers, floats, strings YAML would misread, JSON
    and placeholders: written so that vLLM's loader gives them back."""
    from composer.forms.config import config_file
    from composer.outputs import Command
    from composer.yaml_text import dump

    argv = ("vllm", "serve", "org/m", "--enforce-eager", "--no-enable-prefix-caching", "--max-num-seqs", "8",
            "--gpu-memory-utilization", "0.90", "--served-model-name", "yes", "--chat-template", "a: #b",
            "--compilation-config", '{"mode": 3, "cudagraph_capture_sizes": [1, 2], "x": 0.5}',
            "--speculative-config", '{"method":"mtp"}', "--master-addr", "$HEAD_IP", "--seed", "-1")
    cmd = Command("head", 0, None, "Head (node 0)", argv, {}, "", "", "")
    cfg = config_file(cmd)
    assert cfg.file_name == "head-node-0.yaml" and cfg.cli == ("--master-addr", "$HEAD_IP")
    text = dump(cfg.data)
    data = yaml.safe_load(text)
    assert data["enforce-eager"] is True and data["enable-prefix-caching"] is False
    assert data["max-num-seqs"] == 8 and data["gpu-memory-utilization"] == "0.90" and data["served-model-name"] == "yes"
    assert isinstance(data["compilation-config"], str)  # a float inside: kept as the recipe wrote it
    assert data["speculative-config"] == {"method": "mtp"} and data["seed"] == -1
    path = tmp_path / cfg.file_name
    path.write_text(text)
    args = vllm_load_config_file()(path)
    assert units(args[2:] + list(cfg.cli)) == units(list(argv[3:]))


def test_cli_format_config_prints_every_file_and_script(k3, capsys):
    from composer.buildtime.cli import main

    assert main(["moonshotai/Kimi-K3", "--query", "hardware=h200&nodes=2&strategy=multi_node_tp", "--format", "config"]) == 0
    out = capsys.readouterr().out
    assert "# ==> head-node-0.yaml <==" in out and "# ==> node-1.yaml <==" in out
    assert "vllm serve --config head-node-0.yaml --master-addr $HEAD_IP" in out


@pytest.mark.parametrize("form", ["pip", "docker", "config", "slurm", "k8s"])
@pytest.mark.parametrize("rid,query", [("moonshotai/Kimi-K3", "hardware=b300&kv_offload=lmcache"),
                                       ("Qwen/Qwen3-235B-A22B-Instruct-2507", "kv_offload=kv_store_distributed_mooncake")])
def test_cli_format_with_companions_prints_vllm_and_them(rid, query, form, capsys):
    """A fresh user's finding: with a companion process (LMCache's server, the
    Mooncake master) --format pip/docker/config printed only the companion's
    script, no vllm serve. Every form prints what starts vLLM and, unless its
    own files run them (Kubernetes' side containers), each companion's script."""
    from composer.buildtime.cli import main

    plan = compose(dict(our_plans())[rid], f"{query}&install={form}", every_form=False)
    comps = [a["file_name"] for a in plan["output"]["artifacts"] if a["companion"] is not None]
    assert comps, "the plan has companions"
    assert main([rid, "--query", query, "--format", form]) == 0
    out = capsys.readouterr().out
    headers = re.findall(r"^# ==> (.+) <==$", out, re.M)
    model = plan["commands"][0]["argv"][2]
    if form == "k8s":
        assert not headers and model in out and "kind: Service" in out  # pure YAML: kubectl apply -f -
    else:
        assert headers[:len(comps)] == comps  # companions start first
        vllm = [a for a in plan["output"]["artifacts"] if a["companion"] is None]
        assert headers[len(comps):] and all(h in [a["file_name"] for a in vllm] for h in headers[len(comps):])
        assert model in out.split(f"# ==> {headers[len(comps)]} <==")[1]  # what starts vLLM follows


def test_cli_out_writes_the_files_the_page_downloads(k3, tmp_path, capsys):
    # A fresh user's finding: --format config/slurm printed every file to stdout with headers only.
    import os

    from composer.api import compose
    from composer.buildtime.cli import main

    query = "hardware=h200&nodes=2&strategy=multi_node_tp"
    for form in ("config", "slurm"):
        out = tmp_path / form
        assert main(["moonshotai/Kimi-K3", "--query", query, "--format", form, "--out", str(out)]) == 0
        written = {p.name: p.read_text() for p in out.iterdir() if p.name != ".vllm-composer-files"}
        listed = capsys.readouterr().out.split()
        artifacts = compose(k3, f"{query}&install={form}", every_form=False)["output"]["artifacts"]
        own = [a for a in artifacts if a["command"] is None] or artifacts
        assert set(written) == {a["file_name"] for a in own} and len(written) >= (2 if form == "config" else 1)
        for a in own:
            assert written[a["file_name"]].rstrip("\n") == a["text"].rstrip("\n")
            assert str(out / a["file_name"]) in listed
            executable = os.access(out / a["file_name"], os.X_OK)
            assert executable == a["file_name"].endswith((".sh", ".sbatch"))
    assert main(["moonshotai/Kimi-K3", "--out", str(tmp_path / "x")]) == 2  # --out needs a form
    assert "--out needs --format" in capsys.readouterr().err


def test_cli_out_again_removes_only_what_the_previous_plan_wrote(tmp_path, capsys):
    """A second --out into the same directory for a smaller plan leaves none of
    the first plan's node files behind (a user would start a stale node), and
    never touches a file it did not write or writes through a link."""
    from composer.buildtime.cli import main

    out = tmp_path / "cfg"
    out.mkdir()
    (out / "mine.yaml").write_text("keep\n")
    assert main(["moonshotai/Kimi-K3", "--query", "hardware=h200&nodes=4&strategy=multi_node_tp", "--format", "config",
                 "--out", str(out)]) == 0
    first = {p.name for p in out.iterdir()}
    assert main(["moonshotai/Kimi-K3", "--query", "hardware=b300", "--format", "config", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    second = {p.name for p in out.iterdir()}
    assert "mine.yaml" in second and (out / "mine.yaml").read_text() == "keep\n"
    gone = first - second
    assert gone and all(f"removed {out / n}" in said for n in gone)
    listed = set((out / ".vllm-composer-files").read_text().split())
    assert listed == second - {"mine.yaml", ".vllm-composer-files"}
    (out / next(iter(listed))).unlink()
    (out / next(iter(listed))).symlink_to(out / "mine.yaml")
    assert main(["moonshotai/Kimi-K3", "--query", "hardware=b300", "--format", "config", "--out", str(out)]) == 2
    assert "symbolic link" in capsys.readouterr().err and (out / "mine.yaml").read_text() == "keep\n"


def test_cli_out_replaces_a_hard_link_instead_of_writing_through_it(tmp_path, capsys):
    """Adversarial finding: a hard link named like a plan file made --out overwrite (and chmod 755)
    the file it pointed to; a FIFO there made the CLI hang."""
    import os

    from composer.buildtime.cli import main

    out, precious = tmp_path / "out", tmp_path / "precious.txt"
    out.mkdir()
    precious.write_text("mine\n")
    os.link(precious, out / "serve.sbatch")
    assert main(["moonshotai/Kimi-K3", "--query", "hardware=b300", "--format", "slurm", "--out", str(out)]) == 0
    assert precious.read_text() == "mine\n" and not os.access(precious, os.X_OK)
    assert (out / "serve.sbatch").read_text().startswith("#!/usr/bin/env bash")
    (out / "serve.sbatch").unlink()
    os.mkfifo(out / "serve.sbatch")
    assert main(["moonshotai/Kimi-K3", "--query", "hardware=b300", "--format", "slurm", "--out", str(out)]) == 2
    assert "not a regular file" in capsys.readouterr().err
