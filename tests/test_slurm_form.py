"""Issue 20.3: the SLURM form (``composer/forms/slurm.py``).

Every sbatch script of every multi-node plan of our recipes (P/D: each pool's
and the router's) passes ``bash -n`` and, run by bash with stand-in ``srun``
and ``scontrol`` (which start the node tasks one after the other with
``SLURM_NODEID`` / ``SLURM_PROCID`` set, as SLURM does for one task per node),
starts on each node exactly the plan's command for that node — argv and env,
with the addresses SLURM's host list gives and the values the person sets —
asks for the plan's nodes and GPUs per node on exclusive nodes, and refuses
to start anything on a different node count.
"""

from __future__ import annotations

import hashlib
import re
import stat
import subprocess
from pathlib import Path

import pytest

from composer.api import compose
from composer.positions import device_indices
from composer.query import parse_query
from composer.shell import PLACEHOLDER_RE
from tests.plan_space import our_plans, shape_queries
from tests.plan_space import plan_gpus

SRUN = r'''#!/usr/bin/env bash
# Stand-in srun: one task per node, in node order, SLURM_NODEID/PROCID set.
set -u
n=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes=*) n="${1#--nodes=}"; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
printf '%s\n' "$n" > "$FAKE_DIR/srun.nodes"
# what a running job has published for the router (removed when the job ends)
mkdir -p "$FAKE_DIR/kept" && cp -f "${SLURM_SUBMIT_DIR:-$PWD}"/*.hosts "$FAKE_DIR/kept/" 2>/dev/null || true
read -r -a hosts <<< "$FAKE_HOSTS"
status=0
for ((i = 0; i < n; i++)); do
  SLURM_NODEID=$i SLURM_PROCID=$i SLURMD_NODENAME="${hosts[$i]}" FAKE_RECORD="$FAKE_DIR/node$i" "$@" || status=$?
done
exit $status
'''
SCONTROL = r'''#!/usr/bin/env bash
# Stand-in scontrol: "show hostnames LIST" prints FAKE_HOSTS, one per line.
[ "$1 $2" = "show hostnames" ] && [ "$3" = "$SLURM_JOB_NODELIST" ] || { echo "unexpected: $*" >&2; exit 2; }
printf '%s\n' $FAKE_HOSTS
'''
RECORDER = r'''#!/usr/bin/env bash
# Stand-in for a node's program: records its argv and its exported env (builtins only).
printf '%s\0' "${0##*/}" "$@" > "$FAKE_RECORD.argv"
mapfile -t names < <(compgen -e)
for v in "${names[@]}"; do printf '%s=%s\0' "$v" "${!v}"; done > "$FAKE_RECORD.env"
'''
USER_VALUES = {"IFACE_NAME": "ib0", "MOONCAKE_MASTER_IP": "10.9.9.9", "MOONCAKE_CONFIG_PATH": "/etc/mc.json"}


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("slurm-bin")
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("vllm", RECORDER), ("vllm-router", RECORDER)):
        (d / name).write_text(text)
        (d / name).chmod((d / name).stat().st_mode | stat.S_IEXEC)
    return d


def run_job(script: str, hosts: list[str], values: dict[str, str], tmp: Path, fake_bin: Path, num_nodes=None):
    """Run one sbatch script as SLURM would on ``hosts``; returns
    ``(completed process, [(argv, env)] per node)``."""
    for old in tmp.glob("node*"):
        old.unlink()
    path = tmp / "job.sbatch"
    path.write_text(script)
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(tmp), "FAKE_DIR": str(tmp), "FAKE_HOSTS": " ".join(hosts),
           "SLURM_JOB_NODELIST": f"gpu[{1}-{len(hosts)}]", "SLURM_JOB_NUM_NODES": str(num_nodes or len(hosts)), **values}
    out = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=60, cwd=tmp)
    nodes = []
    for i in range(len(hosts)):
        a, e = tmp / f"node{i}.argv", tmp / f"node{i}.env"
        if not a.exists():
            nodes.append(None)
            continue
        argv = a.read_bytes().decode().split("\0")[:-1]
        envs = dict(x.split("=", 1) for x in e.read_bytes().decode().split("\0") if "=" in x)
        nodes.append((argv, envs))
    return out, nodes


def expand(text: str, values: dict[str, str]) -> str:
    return PLACEHOLDER_RE.sub(lambda m: values.get(m.group(0)[1:], m.group(0)), text)


def sbatch_option(script: str, name: str) -> str | None:
    m = re.search(rf"^#SBATCH --{name}(?:=(.*))?$", script, re.M)
    return None if m is None else (m.group(1) or "")


def check_plan(plan: dict, tmp: Path, fake_bin: Path, ran: dict, refusal: set | None = None,
               shell_names: bool = False) -> None:
    """Every script of one SLURM-form plan, run with the stand-ins; a job of
    another size is tried once per kind of job (``refusal``: the kinds tried).
    ``shell_names``: a ``$HOME`` or ``$PATH`` in the plan's text is expected
    as the job's shell has it (``run_job``'s), as every shell form expands it."""
    cmds = plan["commands"] or plan["blocked_commands"]
    scripts = {a["file_name"]: a["text"] for a in plan["output"]["artifacts"] if a["file_name"].endswith(".sbatch")}
    pools = {}
    for c in cmds:
        pools.setdefault("router" if c["role"] == "router" else (c["pool"] or "serve"), []).append(c)
    assert set(scripts) == {f"{p}.sbatch" for p in pools}, (scripts.keys(), pools.keys())
    hosts_of = {p: [f"{p}-host{i + 1}" for i in range(len(cs))] for p, cs in pools.items()}
    values = dict(USER_VALUES)
    if shell_names:  # and any other $NAME a planted value brings is given, as a person would
        for c in cmds:
            for text in [*c["argv"], *c["env"].values()]:
                for m in PLACEHOLDER_RE.finditer(text):
                    values.setdefault(m.group(0).lstrip("${").rstrip("}"), "given-" + m.group(0).strip("${}"))
        values.update(HOME=str(tmp), PATH=f"{fake_bin}:/usr/bin:/bin")
        for host in [k for k in values if re.fullmatch(r"HEAD_IP|NODE_\d+_IP", k)]:
            del values[host]  # the job's own hosts come from SLURM
    for pool in ("prefill", "decode"):
        for k, h in enumerate(hosts_of.get(pool, ())):
            values[f"{pool.upper()}_NODE_{k + 1}"] = h
    if "router" in pools and "serve" in pools:  # the router job's note names what it needs
        assert "HEAD_IP and NODE_<k>_IP" in scripts["router.sbatch"] and "PREFILL" not in scripts["router.sbatch"]
    for k, h in enumerate(hosts_of.get("serve", ()) if "router" in pools else ()):
        # a hybrid-LB router lists every node's API server: the person gives the serve job's addresses
        values["HEAD_IP" if k == 0 else f"NODE_{k}_IP"] = h
    for pool, cs in pools.items():
        script = scripts[f"{pool}.sbatch"]
        n = len(cs)
        assert sbatch_option(script, "nodes") == str(n)
        # no GPU node for the router; a pool on half a node shares its node with the other pool's job
        half = pool in ("prefill", "decode") and plan["selection"][f"{pool}_nodes"] == 0
        assert sbatch_option(script, "exclusive") == ("" if pool != "router" and not half else None)
        assert sbatch_option(script, "ntasks-per-node") == "1"
        if pool == "router":
            assert sbatch_option(script, "gpus-per-node") is None
        else:
            assert sbatch_option(script, "gpus-per-node") == str(plan_gpus(list(cs[0]["argv"]))), pool
        syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
        key = hashlib.sha256(script.encode()).hexdigest()
        if key in ran:
            continue
        ran[key] = True
        hosts = hosts_of[pool]
        # The job's own addresses come from SLURM; the router's from the pool jobs (set by the person).
        given = {k: v for k, v in values.items() if pool == "router" or not (
            k.startswith(f"{pool.upper()}_NODE_") or pool == "serve" and re.fullmatch(r"HEAD_IP|NODE_\d+_IP", k))}
        own = dict(values)
        if pool == "serve":
            own["HEAD_IP"] = hosts[0]
        out, nodes = run_job(script, hosts, given, tmp, fake_bin)
        assert out.returncode == 0, out.stderr
        for c, node in zip(sorted(cs, key=lambda c: c["node_rank"]), nodes):
            assert node is not None, f"{c['label']} did not start"
            argv, env = node
            assert argv == [expand(a, own) for a in c["argv"]], (c["label"], argv)
            for k, v in c["env"].items():
                # a GPU index list is SLURM's to set (node_env): the job sees the GPUs it was given
                want = None if device_indices(k, v) is not None else expand(v, own)
                assert env.get(k) == want, (c["label"], k)
        # A job of another size starts nothing.
        if refusal is None or (pool, n > 1) not in refusal:
            out, nodes = run_job(script, hosts, given, tmp, fake_bin, num_nodes=n + 1)
            assert out.returncode == 1 and "error:" in out.stderr and not any(nodes)
            if refusal is not None:
                refusal.add((pool, n > 1))


def slurm_plan(ctx, query: str) -> dict:
    return compose(ctx, parse_query(query).with_values(install="slurm").query(), every_form=False)


def multi_node(plan: dict) -> bool:
    return len(plan["commands"] or plan["blocked_commands"]) > 1


PARTS = 2
"""Each recipe's plans in this many shares (one test each: xdist spreads them)."""


@pytest.mark.parametrize("part", range(PARTS))
@pytest.mark.parametrize("rid", [rid for rid, _ in our_plans()])
def test_every_multi_node_plan_runs_each_nodes_command_under_srun(rid, part, tmp_path, fake_bin):
    ctx = dict(our_plans())[rid]
    ran: dict = {}
    refusal: set = set()
    plans = (slurm_plan(ctx, q) for n, q in enumerate(shape_queries(ctx)) if n % PARTS == part)
    checked = 0
    for plan in (p for p in plans if multi_node(p)):
        assert plan["output"]["form"] == "slurm" and not plan["output"]["reason"]
        check_plan(plan, tmp_path, fake_bin, ran, refusal)
        checked += 1
    assert checked >= 10 and ran and refusal


def test_a_pd_plan_is_one_job_per_pool_and_the_router(k3, tmp_path, fake_bin):
    plan = slurm_plan(k3, "hardware=h200&strategy=pd_cluster&prefill_nodes=2&decode_nodes=2")
    names = [a["file_name"] for a in plan["output"]["artifacts"] if a["command"] is None]
    assert names == ["prefill.sbatch", "decode.sbatch", "router.sbatch"]
    check_plan(plan, tmp_path, fake_bin, {})


def test_a_missing_value_stops_the_job_before_srun(k3, tmp_path, fake_bin):
    plan = slurm_plan(k3, "hardware=b200&nodes=2&strategy=multi_node_tp")
    script = next(a["text"] for a in plan["output"]["artifacts"] if a["file_name"] == "serve.sbatch")
    out, nodes = run_job(script, ["a", "b"], {}, tmp_path, fake_bin)
    assert out.returncode != 0 and "IFACE_NAME" in out.stderr and not any(nodes)
    assert not (tmp_path / "srun.nodes").exists()


def test_each_node_runs_vllm_from_the_install_steps_venv(k3, tmp_path, fake_bin):
    """The Install steps put vLLM into .venv where they run (a fresh user's
    finding: serve.sbatch ran no venv, so "vllm: command not found"): a node
    without vllm on PATH activates the one in the directory sbatch ran from,
    and with none there the job says so, per node, instead of failing in exec."""
    import shutil

    plan = slurm_plan(k3, "hardware=b200&nodes=2&strategy=multi_node_tp")
    script = next(a["text"] for a in plan["output"]["artifacts"] if a["file_name"] == "serve.sbatch")
    bare = tmp_path / "bin-without-vllm"
    bare.mkdir()
    for name in ("srun", "scontrol"):
        shutil.copy2(fake_bin / name, bare / name)
    submit = tmp_path / "submit"
    venv_bin = submit / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    shutil.copy2(fake_bin / "vllm", venv_bin / "vllm")
    (venv_bin / "activate").write_text(f'export VIRTUAL_ENV="{submit / ".venv"}"\nexport PATH="{venv_bin}:$PATH"\n')
    values = {**USER_VALUES, "SLURM_SUBMIT_DIR": str(submit)}
    out, nodes = run_job(script, ["a", "b"], values, tmp_path, bare)
    assert out.returncode == 0, out.stderr
    assert all(n is not None and n[0][:2] == ["vllm", "serve"] and n[1]["VIRTUAL_ENV"] == str(submit / ".venv")
               for n in nodes), nodes
    (venv_bin / "activate").unlink()
    out, nodes = run_job(script, ["a", "b"], values, tmp_path, bare)
    assert out.returncode != 0 and not any(nodes)
    assert "vllm is not on PATH" in out.stderr and "run the Install steps there first" in out.stderr


def test_hostile_recipe_values_stay_words_in_the_script(tmp_path, fake_bin):
    """A recipe value with shell syntax reaches vLLM as one argv word and runs nothing."""
    from composer.forms import FormInput
    from composer.forms.slurm import sbatch
    from composer.outputs import Command
    from composer.shell import command_text, env_text

    evil = "x'; touch pwned; echo '$(touch pwned2)`touch pwned3`"
    argv = ("vllm", "serve", "org/m", "--served-model-name", evil, "--master-addr", "$HEAD_IP")
    env = {"VLLM_X": evil}
    cmds = [Command("head", r, None, f"Node {r}", argv, env, command_text(list(argv)), env_text(env), "") for r in (0, 1)]

    class Ctx:
        recipe_id = "org/m"

        class recipe:
            class meta:
                title = "T\n$(touch pwned4)"

    inp = FormInput(Ctx(), None, tuple(cmds), (), (), "s`touch pwned5`", False)
    script = sbatch(inp, "serve", cmds, None, 8, "note $(touch pwned6)")
    out, nodes = run_job(script, ["h1", "h2"], {}, tmp_path, fake_bin)
    assert out.returncode == 0, out.stderr
    for argv_got, env_got in nodes:
        assert argv_got == ["vllm", "serve", "org/m", "--served-model-name", evil, "--master-addr", "h1"]
        assert env_got["VLLM_X"] == evil
    assert not list(tmp_path.glob("pwned*"))


@pytest.mark.parametrize("value", ["line one\n  line two\nthree", "a \\\nb", "http://$HEAD_IP:1\n  x",
                                   "{\"k\": \"v\\\"\n\"}", "'\n'"])
def test_a_value_spanning_lines_reaches_vllm_unchanged(tmp_path, fake_bin, value):
    """Adversarial finding: the job indented every line of a node's command
    and env, so a recipe value that spans lines (single- or double-quoted)
    reached vLLM with spaces put into it."""
    from composer.forms import FormInput
    from composer.forms.slurm import sbatch
    from composer.outputs import Command
    from composer.shell import command_text, env_text

    argv = ("vllm", "serve", "org/m", "--served-model-name", value, "--port", "8000")
    env = {"VLLM_X": value, "VLLM_Y": "1"}
    cmds = [Command("head", r, None, f"Node {r}", argv, env, command_text(list(argv)), env_text(env), "") for r in (0, 1)]

    class Ctx:
        recipe_id = "org/m"

        class recipe:
            class meta:
                title = "T"

    script = sbatch(FormInput(Ctx(), None, tuple(cmds), (), (), "s", False), "serve", cmds, None, 8, "note")
    out, nodes = run_job(script, ["h1", "h2"], {}, tmp_path, fake_bin)
    assert out.returncode == 0, out.stderr
    want = value.replace("$HEAD_IP", "h1")
    for argv_got, env_got in nodes:
        assert argv_got == ["vllm", "serve", "org/m", "--served-model-name", want, "--port", "8000"]
        assert env_got["VLLM_X"] == want and env_got["VLLM_Y"] == "1"


def test_cli_format_slurm_prints_the_scripts(k3, capsys):
    from composer.buildtime.cli import main

    assert main(["moonshotai/Kimi-K3", "--query", "hardware=b200&nodes=2&strategy=multi_node_tp", "--format", "slurm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/usr/bin/env bash\n#SBATCH --job-name=Kimi-K3-serve\n#SBATCH --nodes=2")


@pytest.mark.parametrize("query", ["hardware=h200&strategy=pd_cluster&prefill_nodes=2&decode_nodes=2",
                                   "hardware=b200&strategy=multi_node_dep&nodes=2"])
def test_the_router_job_reads_the_host_names_the_other_jobs_write(k3, tmp_path, fake_bin, query):
    """A person submits the pool jobs, then the router job from the same
    directory, setting nothing: the router gets every host name from the files
    the jobs wrote (SLURM_SUBMIT_DIR) — and a hosts file is data, never run."""
    plan = slurm_plan(k3, query)
    scripts = {a["file_name"]: a["text"] for a in plan["output"]["artifacts"] if a["file_name"].endswith(".sbatch")}
    if "router.sbatch" not in scripts:
        pytest.skip("this plan has no router")
    cmds = plan["commands"] or plan["blocked_commands"]
    (router,) = [c for c in cmds if c["role"] == "router"]
    hosts = {}
    for name in scripts:
        if name == "router.sbatch":
            continue
        job = name.removesuffix(".sbatch")
        n = sum(1 for c in cmds if c["role"] != "router" and (c["pool"] or "serve") == job)
        hosts[job] = [f"{job}-h{i}" for i in range(n)]
        out, _ = run_job(scripts[name], hosts[job], {**USER_VALUES, "SLURM_SUBMIT_DIR": str(tmp_path)}, tmp_path, fake_bin)
        assert out.returncode == 0, out.stderr
        assert not list(tmp_path.glob("*.hosts"))  # gone when the job ends: never a stale address for the router
    # the pool jobs still running: their files are there (as srun saw them)
    for kept in (tmp_path / "kept").glob("*.hosts"):
        (tmp_path / kept.name).write_text(kept.read_text())
    # a job that stops at its own checks publishes nothing
    for name in scripts:
        if name != "router.sbatch":
            out, _ = run_job(scripts[name], ["x1", "x2", "x3", "x4"][:1], {"SLURM_SUBMIT_DIR": str(tmp_path / "other")},
                             tmp_path, fake_bin)
            assert out.returncode != 0 and not (tmp_path / "other").exists()
    values = {}
    for job, hs in hosts.items():
        for k, h in enumerate(hs):
            values[f"{job.upper()}_NODE_{k + 1}" if job != "serve" else ("HEAD_IP" if k == 0 else f"NODE_{k}_IP")] = h
    out, nodes = run_job(scripts["router.sbatch"], ["r1"], {"SLURM_SUBMIT_DIR": str(tmp_path)}, tmp_path, fake_bin)
    assert out.returncode == 0, out.stderr
    assert nodes[0][0] == [expand(a, values) for a in router["argv"]]
    # A value set when submitting wins over the file; a hostile line is not taken.
    (name, first), *_ = [(k, v) for k, v in values.items()]
    out, nodes = run_job(scripts["router.sbatch"], ["r1"], {"SLURM_SUBMIT_DIR": str(tmp_path), name: "given-host"},
                         tmp_path, fake_bin)
    assert out.returncode == 0 and any("given-host" in a for a in nodes[0][0])
    for f in tmp_path.glob("*.hosts"):
        f.write_text("".join(f"{ln.split('=')[0]}=$(touch {tmp_path}/pwned)\n" for ln in f.read_text().split()))
    out, nodes = run_job(scripts["router.sbatch"], ["r1"], {"SLURM_SUBMIT_DIR": str(tmp_path)}, tmp_path, fake_bin)
    assert out.returncode != 0 and not any(nodes) and not (tmp_path / "pwned").exists()
    assert "first submit" in out.stderr


def test_the_placeholders_panel_says_which_hosts_the_jobs_set_themselves():
    """A SLURM job sets its hosts' names from SLURM_JOB_NODELIST (and the
    router job reads them from the pool jobs' host files): the panel lists
    such a name only when a line outside the jobs (the client checks, a
    companion) uses it, and says so (fresh-user findings: it asked for every
    node's IP; then ten of twelve fields of a P/D panel said the jobs set
    them). The router job prints the host it landed on, and ROUTER_HOST's
    meaning says where to read it."""
    from composer.forms.slurm import placeholder_note

    note, checked_note = placeholder_note("HEAD_IP", True), placeholder_note("IFACE_NAME", True)
    assert note != checked_note and "default" in checked_note and placeholder_note("IFACE_NAME", False) is None
    ctx = dict(our_plans())["moonshotai/Kimi-K3"]
    listed = skipped = routers = 0
    for q in shape_queries(ctx):
        plan = compose(ctx, parse_query(q).with_values(install="slurm").query(), every_form=False)
        jobs = "\n".join(a["text"] for a in plan["output"]["artifacts"] if a["file_name"].endswith(".sbatch"))
        set_by_jobs = set(re.findall(r'^export (\w+)="\$\{NODES\[\d+\]\}"$', jobs, re.M))
        for names in re.findall(r"\$name =~ \^\(([\w|]+)\)\$", jobs):
            set_by_jobs |= set(names.split("|"))
        asked = set(re.findall(r'^: "\$\{(\w+):\?', jobs, re.M))  # checked when the job starts
        outside = "\n".join([plan["client"]["curl"] or "", plan["client"]["bench"] or ""]
                            + [c["command"] for c in plan["companions"]])
        names = {p["name"] for p in plan["placeholders"]}
        for p in plan["placeholders"]:
            assert (note in p["meaning"]) == (p["name"] in set_by_jobs), (q, p["name"])
            if p["name"] in set_by_jobs:  # listed only for a line outside the jobs
                assert re.search(r"\$\{?" + p["name"] + r"\b", outside), (q, p["name"])
            # every other name is one the jobs check, and the panel says how its value reaches them
            assert (checked_note.replace(p["name"], "NAME") in p["meaning"].replace(p["name"], "NAME")) == (p["name"] in asked), (q, p["name"])
            assert p["name"] in set_by_jobs or p["name"] in asked or not re.search(r"\$\{?" + p["name"] + r"\b", jobs), (q, p["name"])
            listed += p["name"] in set_by_jobs
            if p["name"] == "ROUTER_HOST":
                assert "router.sbatch prints it" in p["meaning"], q
        skipped += len(set_by_jobs - names)
        # the jobs run every node's command: no node tab offers a script of its own that would need the
        # host names the panel leaves out (adversarial finding: $PREFILL_NODE_1 with no field for it)
        if jobs:
            assert not [a["file_name"] for a in plan["output"]["artifacts"] if a["command"] is not None], q
        if "router.sbatch" in {a["file_name"] for a in plan["output"]["artifacts"]}:
            routers += 1
            assert re.search(r'^echo "router: http://\$\{NODES\[0\]\}:\d+ ', jobs, re.M), q
        pip = compose(ctx, parse_query(q).with_values(install="pip").query(), every_form=False)
        assert not any(note in p["meaning"] for p in pip["placeholders"])
        # the pip form asks for every name its commands use
        used = {n for n in set_by_jobs if any(re.search(r"\$\{?" + n + r"\b", c["text"]) for c in plan["commands"])}
        assert used <= {p["name"] for p in pip["placeholders"]}, q
    assert listed > 5 and skipped > 20 and routers > 2, (listed, skipped, routers)


def test_a_recipes_router_port_never_reaches_the_router_jobs_echo_as_shell(tmp_path):
    """Adversarial finding: router.sbatch's "router: http://host:PORT" line took
    the recipe's router port unescaped inside double quotes, so a port of
    '30000$(touch …)' ran a command. Only digits reach that line."""

    from tests.conftest import k3_recipes_copy

    def edit(data):
        data.setdefault("strategy_overrides", {}).setdefault("pd_cluster", {})["router"] = {
            "port": '30000$(touch PWNED)"; touch PWNED2; echo "'}

    root = k3_recipes_copy(tmp_path, edit)
    from composer.api import make_context
    from composer.buildtime.loader import load_catalog, load_recipe

    ctx = make_context("moonshotai/Kimi-K3", load_recipe(root, "moonshotai/Kimi-K3"), load_catalog(root))
    plan = compose(ctx, "hardware=h100&strategy=pd_cluster&install=slurm", every_form=False)
    job = next(a["text"] for a in plan["output"]["artifacts"] if a["file_name"] == "router.sbatch")
    line = next(ln for ln in job.splitlines() if ln.startswith('echo "router: '))
    assert "$(" not in line and "PWNED" not in line and ":<port>" in line


def test_instance_jobs_set_the_instance_hosts_and_the_panel_asks_only_the_rest():
    """A KV store's instances are SLURM jobs of their own (issue 20): the
    panel no longer asks for the instance hosts the jobs set themselves
    (INSTANCE_<k>_IP …), names router.sbatch where it says where the router
    listens, and asks for every other value the pip form asks for. (Before,
    the form wrote no jobs for instances and the panel had to ask for all.)"""
    from tests.test_deployments import CORPUS_ROOT

    if not CORPUS_ROOT.exists():
        pytest.skip("shared corpus not present")
    from composer.api import make_context
    from composer.buildtime.loader import load_catalog, load_recipe

    ctx = make_context("moonshotai/Kimi-K3", load_recipe(CORPUS_ROOT, "moonshotai/Kimi-K3"), load_catalog(CORPUS_ROOT))
    q = "hardware=b300&kv_offload=kv_store_centralized_mooncake&instances=2"
    slurm = compose(ctx, q + "&install=slurm", every_form=False)
    pip = compose(ctx, q + "&install=pip", every_form=False)
    assert slurm["selection"]["instances"] == 2 and not slurm["output"]["reason"]
    assert [a["file_name"] for a in slurm["output"]["artifacts"] if a["file_name"].endswith(".sbatch")] == [
        "instance-1.sbatch", "instance-2.sbatch", "router.sbatch"]
    asked = {p["name"] for p in slurm["placeholders"]}
    assert {"INSTANCE_1_IP", "INSTANCE_2_IP"} <= {p["name"] for p in pip["placeholders"]}
    assert not asked & {"INSTANCE_1_IP", "INSTANCE_2_IP"}
    assert asked == {p["name"] for p in pip["placeholders"]} - {"INSTANCE_1_IP", "INSTANCE_2_IP"}
    (router_host,) = [p for p in slurm["placeholders"] if p["name"] == "ROUTER_HOST"]
    assert "router.sbatch" in router_host["meaning"]


@pytest.mark.parametrize("var", ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"])
def test_a_recipes_gpu_indices_are_left_to_slurm(var, tmp_path, fake_bin):
    """The pod form's adversarial finding, in the job: a recipe's ``base_env``
    naming a node's GPUs 4–7 overrode what SLURM sets for the job step, and
    under device cgroups a job given 4 GPUs sees them as 0–3, so vLLM would
    find none. The job leaves the list to SLURM (said in a comment); the
    plan's own command keeps the recipe's value."""
    import yaml

    from composer.buildtime.loader import load_catalog
    from composer.api import make_context

    root = Path(__file__).resolve().parent.parent / "recipes"
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    data = yaml.safe_load((root / "models" / f"{rid}.yaml").read_text())
    data["model"].setdefault("base_env", {})[var] = "4,5,6,7"
    ctx = make_context(rid, data, load_catalog(root))
    amd = var.startswith("HIP")
    plan = compose(ctx, ("hardware=mi300x" if amd else "hardware=h100") + "&install=slurm", every_form=False)
    assert plan["commands"][0]["env"][var] == "4,5,6,7"
    (script,) = [a["text"] for a in plan["output"]["artifacts"] if a["file_name"] == "serve.sbatch"]
    assert f"export {var}=" not in script
    assert f"{var}=4,5,6,7 numbers a whole node's GPUs" in script
    gpus = int(sbatch_option(script, "gpus-per-node"))
    given = ",".join(map(str, range(gpus)))  # what SLURM sets under ConstrainDevices
    slurm_var = "ROCR_VISIBLE_DEVICES" if amd else "CUDA_VISIBLE_DEVICES"
    hosts = [f"h{i + 1}" for i in range(len(plan["commands"]))]
    out, nodes = run_job(script, hosts, {slurm_var: given}, tmp_path, fake_bin)
    assert out.returncode == 0, out.stderr
    for (argv, env), c in zip(nodes, plan["commands"]):
        assert argv == list(c["argv"])
        assert env.get(slurm_var) == given and (not amd or var not in env)


INSTANCE_QUERIES = [
    # Llama over a Mooncake KV store: 2 instances of 2 nodes (multi-node TP + DP), and 3 one-node instances.
    ("meta-llama/Llama-3.3-70B-Instruct",
     "kv_offload=kv_store_distributed_mooncake&instances=2&hardware=h100&nodes=2&strategy=multi_node_tp"),
    ("meta-llama/Llama-3.3-70B-Instruct", "kv_offload=kv_store_distributed_mooncake&instances=3&hardware=h200"),
]


@pytest.mark.parametrize("rid, query", INSTANCE_QUERIES)
def test_kv_store_instances_are_one_job_each_and_the_router_reads_their_hosts(rid, query, tmp_path, fake_bin):
    """Issue 20.3 (audit finding: a plan with instances > 1 wrote no SLURM
    files): each instance is its own sbatch job that starts exactly its nodes'
    commands with its hosts from SLURM and publishes them; the router job,
    run while they run, lists every instance's API server."""
    ctx = dict(our_plans())[rid]
    plan = slurm_plan(ctx, query)
    assert plan["status"] == "ok" and not plan["output"]["reason"], plan["output"]["reason"]
    scripts = {a["file_name"]: a["text"] for a in plan["output"]["artifacts"] if a["file_name"].endswith(".sbatch")}
    count = int(parse_query(query).get("instances"))
    assert list(scripts) == [f"instance-{k}.sbatch" for k in range(1, count + 1)] + ["router.sbatch"]
    serving = [c for c in plan["commands"] if c["role"] != "router"]
    per = len(serving) // count
    submit = tmp_path / "submit"
    submit.mkdir()
    published = {}
    for k in range(1, count + 1):
        script = scripts[f"instance-{k}.sbatch"]
        assert sbatch_option(script, "nodes") == str(per) and sbatch_option(script, "exclusive") == ""
        assert subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True).returncode == 0
        hosts = [f"i{k}-host{r}" for r in range(per)]
        own = dict(USER_VALUES)
        own.update({f"INSTANCE_{k}_HEAD_IP": hosts[0], f"INSTANCE_{k}_IP": hosts[0],
                    **{f"INSTANCE_{k}_NODE_{r}_IP": hosts[r] for r in range(1, per)}})
        out, nodes = run_job(script, hosts, {**USER_VALUES, "SLURM_SUBMIT_DIR": str(submit)}, tmp_path, fake_bin)
        assert out.returncode == 0, out.stderr
        for c, node in zip(sorted(serving[(k - 1) * per:k * per], key=lambda c: c["node_rank"]), nodes):
            assert node is not None, c["label"]
            assert node[0] == [expand(a, own) for a in c["argv"]], c["label"]
            assert all(node[1].get(n) == expand(v, own) for n, v in c["env"].items()), c["label"]
        for kept in (tmp_path / "kept").glob(f"*instance-{k}-*.hosts"):
            published[kept.name] = kept.read_text()
        assert not list(submit.glob("*.hosts"))  # removed when the job ends
        out, nodes = run_job(script, hosts, dict(USER_VALUES), tmp_path, fake_bin, num_nodes=per + 1)
        assert out.returncode == 1 and not any(nodes)
    assert len(published) == count
    for name, text in published.items():  # the instance jobs "still running": their files are there
        (submit / name).write_text(text)
    (router,) = [c for c in plan["commands"] if c["role"] == "router"]
    out, nodes = run_job(scripts["router.sbatch"], ["router-host"], {**USER_VALUES, "SLURM_SUBMIT_DIR": str(submit)},
                         tmp_path, fake_bin)
    assert out.returncode == 0, out.stderr
    urls = [a for a in nodes[0][0] if a.startswith("http://")]
    assert urls == [f"http://i{k}-host0:8000" for k in range(1, count + 1)], urls
    assert nodes[0][0][0] == "vllm-router" and "cache_aware" in nodes[0][0]
    # Another plan's jobs in the same directory use other host files (adversarial finding: the files were named
    # by the repository and the job only, so two recipes of one name, or two plans, read each other's hosts).
    other = slurm_plan(ctx, query.replace("instances=", "advanced=gpu_mem_095&instances="))
    other_names = {a["file_name"]: a["text"] for a in other["output"]["artifacts"]}
    assert not set(re.findall(r"[\w.-]+\.hosts", other_names["router.sbatch"])) & set(published)
