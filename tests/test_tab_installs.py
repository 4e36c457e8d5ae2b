"""Whatever a tab runs, the tab or its script installs (issue 21).

For every plan of the golden selection space (``tests/golden.py``: our
recipes and the public corpus, each in the "Run with" form it selects), every
program a command tab or a companion tab starts is either vLLM itself —
installed by the plan's Install step (pip) or present in the container it
runs in (Docker, Kubernetes) — or installed by an install line of the same
tab that comes before it; the tab's downloaded script holds the same lines
(in a form whose job files start the commands, SLURM, the job files do).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from composer.api import compose
from tests import golden
from tests.plan_space import FULL

PROVIDED_BY = {
    "vllm-router": "vllm-router",
    "lmcache": "lmcache",
    "mooncake_master": "mooncake-transfer-engine",
    "mooncake.mooncake_store_service": "mooncake-transfer-engine",
}
"""Program (or ``python3 -m`` module) → the pip package that provides it
(vllm-router: the package of the same name, vllm-project/router; LMCache's
``lmcache`` CLI; Mooncake's ``mooncake_master`` and store service, both in the
transfer engine wheel, also as ``mooncake-transfer-engine-non-cuda``)."""
SHELL = {"export", "mkdir", "cat", "test", "source", "uv", "set", ":", "chmod", "echo", "docker"}
"""Shell built-ins and tools every host has (uv: the Install step's own tool)."""


def started(text: str) -> list[tuple[int, str]]:
    """``(line index, program)`` of every command a shell text starts: the
    first word of each ``&&``/``||`` part of each logical line (continuations
    joined) that is no comment or here-document body; ``python3 -m M`` starts
    module ``M``."""
    out: list[tuple[int, str]] = []
    heredoc, logical, first = None, "", 0
    for i, line in enumerate(text.splitlines()):
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if not logical:
            first = i
        logical += line.rstrip().removesuffix("\\") + " "
        if line.rstrip().endswith("\\"):
            continue
        if not logical.lstrip().startswith("#"):
            for part in re.split(r"&&|\|\|", logical):
                w = part.split()
                if w:
                    out.append((first, w[w.index("-m") + 1] if w[0] == "python3" and "-m" in w[:-1] else w[0]))
        m = re.search(r"<<'?([A-Za-z_]+)'?", logical)
        heredoc = m.group(1) if m else None
        logical = ""
    return out


def install_lines(text: str) -> list[tuple[int, str]]:
    """``(line index, line)`` of the lines that pip-install something."""
    return [(i, line) for i, line in enumerate(text.splitlines()) if re.search(r"\bpip install\b", line)]


def _check_tab(label: str, text: str, script: str, plan: dict) -> list[str]:
    problems = []
    for at, prog in started(text):
        if prog in SHELL:
            continue
        if prog == "vllm":
            form = plan["selection"]["install"]
            said = any(n.startswith("No pip install of vLLM is known") for n in plan["install"]["notes"])
            # the Install step's own line, or a recipe step that pins vLLM itself (which then replaces ours)
            steps = [d["command"] for d in plan["install"].get("dependencies", ()) if not d.get("optional")]
            pinned = any(re.search(r"\bpip install\b.*\bvllm(\[[^\]]*\])?==", c.replace("\\\n", " ")) for c in steps)
            if form == "pip" and "vllm" not in (plan["install"]["pip"] or "") and not said and not pinned:
                problems.append(f"{label}: runs vllm but the Install step installs no vLLM")
            continue
        package = PROVIDED_BY.get(prog)
        if package is None:
            problems.append(f"{label}: starts {prog!r}, which this test does not know the package of")
            continue
        before = [line for i, line in install_lines(text) if i < at and package in line]
        if not before:
            problems.append(f"{label}: starts {prog} with no install of {package} before it in the tab")
        elif any(line not in script for line in before):
            problems.append(f"{label}: its script lacks the tab's install line {before[0]!r}")
    return problems


@pytest.fixture(scope="module")
def plans():
    # every default and every third other selection of the golden file (all with COMPOSER_FULL_TESTS=1)
    return [(line, compose(golden.context(line["source"], line["recipe"]), line["query"], every_form=False))
            for i, line in enumerate(golden.load()) if FULL or not line["query"] or i % 3 == 0]


def test_every_tab_installs_what_it_starts(plans):
    problems = []
    for line, plan in plans:
        scripts = {a["command"]: a["text"] for a in plan["output"]["artifacts"] if a["command"] is not None}
        helpers = {a["companion"]: a["text"] for a in plan["output"]["artifacts"] if a.get("companion") is not None}
        # a form whose job files start the commands (SLURM) writes no script per tab: the job file holds the install
        jobs = "\n".join(a["text"] for a in plan["output"]["artifacts"]
                         if a["command"] is None and a.get("companion") is None)
        where = f"{line['recipe']} ?{line['query']}"
        for i, c in enumerate(plan["commands"]):
            problems += [f"{where}: {p}" for p in _check_tab(c["label"], c["text"], scripts.get(i, jobs), plan)]
        for i, c in enumerate(plan["companions"]):
            problems += [f"{where}: {p}" for p in _check_tab(c["label"], c["text"], helpers.get(i, ""), plan)]
    assert not problems, "\n".join(problems[:20])


def test_the_space_has_every_kind_of_companion(plans):
    """The check above saw a router in each install form, an LMCache server and a Mooncake master."""
    seen = set()
    for _line, plan in plans:
        form = plan["selection"]["install"]
        seen |= {(c["argv"][0], form) for c in plan["commands"] if c["argv"][0] != "vllm"}
        seen |= {prog for c in plan["companions"] for _, prog in started(c["text"])}
    for want in [("vllm-router", "pip"), ("vllm-router", "docker"), "lmcache", "mooncake_master",
                 "mooncake.mooncake_store_service"]:
        assert want in seen


def test_a_router_tab_without_its_install_is_caught():
    """The check is not vacuous: the router's bare command fails it."""
    plan = {"selection": {"install": "pip"}, "install": {"pip": "uv pip install vllm", "notes": []}}
    bare = "vllm-router \\\n  --policy round_robin \\\n  --port 30000"
    assert _check_tab("Router", bare, bare, plan)
    good = "test -d .venv || uv venv --python 3.12\nsource .venv/bin/activate\nuv pip install vllm-router\n" + bare
    assert not _check_tab("Router", good, good, plan)
    assert _check_tab("Router", good, bare, plan)  # a script without the install


def test_download_all_writes_every_script():
    """The bundle of a multi-node plan holds every script, each in a quoted here-document."""
    ctx = golden.context("ours", "moonshotai/Kimi-K3")
    plan = compose(ctx, "hardware=gb200&strategy=pd_cluster", every_form=False)
    bundle = plan["output"]["bundle"]
    assert bundle and bundle["file_name"].endswith("-scripts.sh")
    names = [a["file_name"] for a in plan["output"]["artifacts"] if a["command"] is not None]
    assert len(names) == len(plan["commands"]) > 2
    for name in names:
        assert f"cat > {name} <<'VLLM_CONFIGURATOR_EOF'" in bundle["text"]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["bash", "-c", bundle["text"]], cwd=d, check=True, capture_output=True)
        for a in plan["output"]["artifacts"]:
            if a["command"] is not None:
                assert (Path(d) / a["file_name"]).read_text() == a["text"]


@pytest.mark.parametrize("query", ["hardware=b200&nodes=2&strategy=multi_node_tp&install=config",
                                   "hardware=gb200&strategy=pd_cluster&install=config"])
def test_download_all_of_config_files_writes_each_nodes_yaml_beside_its_script(query):
    """The config-file form's "Download all" (a fresh user's finding: it had
    none) writes every node's YAML file and every script that reads it; the
    whole-plan forms (Kubernetes, SLURM) keep their own download instead."""
    ctx = golden.context("ours", "moonshotai/Kimi-K3")
    plan = compose(ctx, query, every_form=False)
    bundle = plan["output"]["bundle"]
    assert bundle, "a multi-node config-file plan has Download all"
    arts = plan["output"]["artifacts"]
    yamls = [a for a in arts if a["media_type"] == "application/yaml"]
    assert len(yamls) == len([c for c in plan["commands"] if c["argv"][:2] == ["vllm", "serve"]]) >= 2
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["bash", "-c", bundle["text"]], cwd=d, check=True, capture_output=True)
        for a in arts:
            assert (Path(d) / a["file_name"]).read_text() == a["text"], a["file_name"]
            assert os.access(Path(d) / a["file_name"], os.X_OK) is (a["media_type"] == "text/x-shellscript")
        for y in yamls:  # each node's script starts vLLM from its own file
            script = next(a for a in arts if a["command"] == y["command"] and a["media_type"] == "text/x-shellscript")
            assert f"--config {y['file_name']}" in script["text"]
    k8s = compose(ctx, query.replace("install=config", "install=k8s"), every_form=False)
    assert k8s["output"]["bundle"] is None  # one manifest file: its own Download
    # The SLURM form's jobs (three for P/D): Download all writes them as they are, not executable
    # (a fresh user's finding: the config form had Download all, SLURM's three jobs none).
    slurm = compose(ctx, query.replace("install=config", "install=slurm"), every_form=False)
    jobs = [a for a in slurm["output"]["artifacts"] if a["command"] is None and a["companion"] is None]
    if len(jobs) < 2:
        assert slurm["output"]["bundle"] is None
        return
    # and the companions' scripts (Mooncake master, config …), which start first (a fresh user found them missing)
    helpers = [a for a in slurm["output"]["artifacts"] if a["companion"] is not None]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["bash", "-c", slurm["output"]["bundle"]["text"]], cwd=d, check=True, capture_output=True)
        assert sorted(p.name for p in Path(d).iterdir()) == sorted(a["file_name"] for a in jobs + helpers)
        for a in jobs:
            assert (Path(d) / a["file_name"]).read_text() == a["text"] and not os.access(Path(d) / a["file_name"], os.X_OK)
        for a in helpers:
            assert (Path(d) / a["file_name"]).read_text().rstrip("\n") == a["text"].rstrip("\n")
            assert os.access(Path(d) / a["file_name"], os.X_OK)


def test_slurm_download_all_carries_the_companions_scripts():
    """A fresh user's finding: with a Mooncake KV store, the SLURM form's
    Download all wrote the three sbatch jobs and left out the Mooncake master
    and config scripts, which start first."""
    ctx = golden.context("ours", "meta-llama/Llama-3.3-70B-Instruct")
    plan = compose(ctx, "hardware=h200&kv_offload=kv_store_distributed_mooncake&instances=2&install=slurm",
                   every_form=False)
    arts = plan["output"]["artifacts"]
    jobs = [a["file_name"] for a in arts if a["command"] is None and a["companion"] is None]
    helpers = [a["file_name"] for a in arts if a["companion"] is not None]
    assert jobs == ["instance-1.sbatch", "instance-2.sbatch", "router.sbatch"] and len(helpers) >= 2
    text = plan["output"]["bundle"]["text"]
    assert all(name in text.split("\n")[2] for name in helpers)  # the header says they start first
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["bash", "-c", text], cwd=d, check=True, capture_output=True)
        assert sorted(p.name for p in Path(d).iterdir()) == sorted(jobs + helpers)
        assert all(os.access(Path(d) / h, os.X_OK) for h in helpers)
