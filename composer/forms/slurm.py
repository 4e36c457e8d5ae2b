"""The SLURM form: the plan as ``sbatch`` scripts — one per plan, or for P/D
one per pool plus one for the router (hybrid-LB DP: the serve job and the
router's).

Each script asks for the plan's shape (``#SBATCH --nodes``, one task per
node, the GPUs a node's ranks use as ``--gpus-per-node``, ``--exclusive`` (not for the router)
nodes) and, when it runs:

1. fails fast unless SLURM gave it exactly the plan's node count
   (``SLURM_JOB_NUM_NODES`` and the host list of ``SLURM_JOB_NODELIST``
   expanded by ``scontrol show hostnames``);
2. sets the addresses the commands leave open from that host list: the first
   host is ``$HEAD_IP`` (a P/D pool's hosts are ``$PREFILL_NODE_<k>`` /
   ``$DECODE_NODE_<k>``, k from 1) — host names, which vLLM's
   ``--master-addr`` / ``--data-parallel-address`` resolve; every other
   placeholder (``$IFACE_NAME`` …) must be set when the job is submitted
   (``sbatch`` passes the environment on) and is checked; the router job reads
   the pool jobs' host names from the files they write (``HOSTS_FILE``), a
   value set when submitting winning;
3. starts every node's command with one ``srun`` (one task per node), each
   task choosing its command by its node rank ``SLURM_NODEID`` (checked
   against ``SLURM_PROCID``: one task per node).

The node commands are the plan's own texts (``Command.env_text`` and
``Command.command``: every recipe value already quoted by
``composer.shell.quote``), a recipe's GPU index list aside (``node_env``:
SLURM sets the job's GPUs); recipe text in comments goes through
``composer.shell.comment``. SLURM's variables: the sbatch/srun manual pages
(OUTPUT ENVIRONMENT VARIABLES).
"""

from __future__ import annotations

import re
from typing import Optional

from composer.argv import flag_value
from composer.forms import HOST_PLACEHOLDERS, FormInput, OutputForm
from composer.outputs import Artifact, Command
from composer.k8s import CPU_PER_GPU, MEM_GI_PER_GPU, SHM_GI_PER_GPU
from composer.positions import device_indices
from composer.run_forms import TOOL_ENV
from composer.shell import comment, env_text, indent, text_placeholders

_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _gpus_per_node(inp: FormInput, pool: Optional[str]) -> int:
    """GPUs a node of ``pool`` (None: the deployment) runs ranks on
    (``Layout.used_per_node``, the layout the commands were built from)."""
    from composer.resolve import layout_for, pool_layout

    sel = inp.sel
    if pool is not None:
        p = sel.pool(pool)
        assert p is not None  # a P/D selection has both pools
        return pool_layout(inp.ctx, sel, pool, p.mode, p.nodes).used_per_node
    return layout_for(inp.ctx, sel, sel.nodes).used_per_node


def _whole_node(inp: FormInput, pool: Optional[str]) -> bool:
    """Whether a job of ``pool`` (None: the deployment) takes whole nodes:
    not a P/D pool on half a node (``dimensions.HALF_NODE``), whose job
    shares its node with the other pool's."""
    p = inp.sel.pool(pool) if pool is not None else None
    return not (p is not None and p.half)


def _host_names(pool: Optional[str], nodes: int, instance: Optional[int] = None) -> dict[str, str]:
    """``{placeholder: shell expression}`` a job of ``pool`` sets from its host
    list ``NODES``: ``HEAD_IP`` (first host), or the pool's ``PREFILL_NODE_<k>``
    / ``DECODE_NODE_<k>``; an instance job of a KV-store deployment
    (``instance`` k, from 1) its ``INSTANCE_<k>_HEAD_IP`` (``INSTANCE_<k>_IP``
    for a one-node instance) and ``INSTANCE_<k>_NODE_<r>_IP`` (``plan``'s
    names for an instance's hosts)."""
    if instance is not None:
        first = f"INSTANCE_{instance}_HEAD_IP" if nodes > 1 else f"INSTANCE_{instance}_IP"
        return {first: "${NODES[0]}", **{f"INSTANCE_{instance}_NODE_{r}_IP": f"${{NODES[{r}]}}" for r in range(1, nodes)}}
    if pool is None:
        return {"HEAD_IP": "${NODES[0]}"}
    return {f"{pool.upper()}_NODE_{k + 1}": f"${{NODES[{k}]}}" for k in range(nodes)}


HOSTS_FILE = "${SLURM_SUBMIT_DIR:-$PWD}/%s.hosts"
"""Where a pool job (or the hybrid-LB serve job) writes the host names it got,
``NAME=host`` per line, for the router job to read: ``SLURM_SUBMIT_DIR`` (the
directory sbatch was run from, sbatch(1) OUTPUT ENVIRONMENT VARIABLES) is on
the shared file system on the clusters such jobs run on; a value the person
sets when submitting the router still wins."""

_HOST_VALUE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def _router_hosts(pool: Optional[str], nodes: int, instance: Optional[int] = None) -> dict[str, str]:
    """``{name: shell expression}`` the router job needs from a job of ``pool``
    (None: the hybrid-LB serve job, whose nodes are ``HEAD_IP``,
    ``NODE_1_IP`` …, the router's names for them; an instance job: its own
    names, ``_host_names``)."""
    if pool is not None or instance is not None:
        return _host_names(pool, nodes, instance)
    return {("HEAD_IP" if k == 0 else f"NODE_{k}_IP"): f"${{NODES[{k}]}}" for k in range(nodes)}


def _write_hosts(job_name: str, names: dict[str, str]) -> list[str]:
    """Lines that write ``names`` to the job's hosts file (``HOSTS_FILE``),
    through a temporary name so the router never reads half a file."""
    path = HOSTS_FILE % job_name
    body = " ".join(f'"{n}={expr}"' for n, expr in names.items())
    return [f'HOSTS_FILE="{path}"',
            "# only while this job runs: a file left by an earlier or failed job would send the router elsewhere",
            "trap 'rm -f \"$HOSTS_FILE\"' EXIT",
            f'if ! {{ printf \'%s\\n\' {body} > "$HOSTS_FILE.tmp.$$" && mv -f "$HOSTS_FILE.tmp.$$" "$HOSTS_FILE"; }}; then',
            '  echo "error: cannot write $HOSTS_FILE (the router job reads the host names there)" >&2',
            "  exit 1", "fi",
            'echo "host names for the router written to $HOSTS_FILE" >&2']


def _read_hosts(job_names: list[str], names: list[str]) -> list[str]:
    """Lines that read the pool jobs' hosts files (``HOSTS_FILE``) into the
    variables the router needs, for each one not already set; only the
    ``names`` it needs (placeholder names: letters, digits, ``_``) and
    host-name values are taken (the file is data, never run)."""
    files = " ".join(f'"{HOSTS_FILE % n}"' for n in job_names)
    pattern = "^(" + "|".join(names) + ")$"
    return [f"for hosts_file in {files}; do",
            '  [ -f "$hosts_file" ] || continue',
            "  while IFS='=' read -r name value || [[ -n $name ]]; do",
            "    value=${value%$'\\r'}",
            f"    if [[ $name =~ {pattern} && $value =~ {_HOST_VALUE} && -z ${{!name:-}} ]]; then",
            '      export "$name=$value"',
            "    fi",
            '  done < "$hosts_file"',
            "done"]


def _placeholders(cmds: list[Command]) -> list[str]:
    names: dict[str, None] = {}
    for c in cmds:
        for name in text_placeholders(c.env_text + "\n" + c.command):  # $NAME and ${NAME}
            names.setdefault(name, None)
    return [n for n in names if n not in ("HOME", "PATH", "USER", "PWD")]


def node_env(c: Command, gpus: int) -> tuple[str, list[str]]:
    """A node's ``export`` lines in a job asking ``--gpus-per-node=gpus``,
    and the comments that say what was left out: a recipe's GPU index list
    (``composer.positions.device_indices``: ``CUDA_VISIBLE_DEVICES=4,5,6,7``)
    is left to SLURM, which sets ``CUDA_VISIBLE_DEVICES`` (AMD:
    ``ROCR_VISIBLE_DEVICES``) to the GPUs it gives the job step (Slurm
    gres.html, "GPU Management"); under ``ConstrainDevices`` (cgroup.conf)
    the step sees only those, numbered from 0, so a whole node's indices
    would name devices it does not have, and without it the recipe's list
    would override SLURM's choice. The rest is the plan's own text."""
    dropped = [k for k, v in c.env.items() if gpus and device_indices(k, v) is not None]
    if not dropped:
        return c.env_text, []
    notes = [f"The recipe's {k}={comment(c.env[k])} numbers a whole node's GPUs: not set here. SLURM sets the "
             f"{gpus} GPU{'s' if gpus > 1 else ''} this job gets (--gpus-per-node={gpus}), numbered from 0 under "
             "device cgroups." for k in dropped]
    return env_text({k: v for k, v in c.env.items() if k not in dropped}), notes


def job_name(inp: FormInput, job: str) -> str:
    """``#SBATCH --job-name`` of ``job`` (``serve``, a pool, ``router``):
    the recipe's repository name and the job, as a plain word."""
    suffix = _NAME.sub("-", job)
    return _NAME.sub("-", inp.ctx.recipe_id.split("/")[-1])[:63 - len(suffix)] + "-" + suffix


def hosts_name(inp: FormInput, job: str) -> str:
    """The name of ``job``'s hosts file (``HOSTS_FILE``): its job name and a
    tag of the plan (the recipe id and every command's argv, 8 hex digits),
    so two recipes that share a repository name, or two plans, submitted from
    one directory never read or remove each other's host names (adversarial
    finding). The same plan's jobs agree on it."""
    import hashlib

    text = "\0".join([inp.ctx.recipe_id, *("\x01".join(c.argv) for c in inp.commands)])
    return f"{job_name(inp, job)}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def sbatch(inp: FormInput, job: str, cmds: list[Command], pool: Optional[str], gpus: int, note: str,
           hosts_for_router: bool = False, reads_hosts: tuple[str, ...] = (), instance: Optional[int] = None) -> str:
    """One sbatch script running ``cmds`` (node rank order) on one node each.
    ``hosts_for_router``: the job writes its host names for the router job
    (``_write_hosts``); ``reads_hosts``: the jobs whose files the router job
    reads (``_read_hosts``) before it checks what it needs; ``instance``: the
    job runs instance k (from 1) of a KV-store deployment."""
    nodes = len(cmds)
    derived = _host_names(pool, nodes, instance) if gpus else {}
    needed = [n for n in _placeholders(cmds) if n not in derived]
    name = job_name(inp, job)
    lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={name}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1"]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if gpus and _whole_node(inp, pool):  # the router uses no GPU: it needs no whole node
        lines.append("#SBATCH --exclusive")
    elif gpus:  # a P/D pool on half a node: the other half is the other pool's job
        # Without --exclusive a job gets the site's default CPUs and memory (often one CPU per task): ask
        # for them per GPU, as the Kubernetes form's requests do (an adversarial finding).
        lines += [f"#SBATCH --cpus-per-gpu={CPU_PER_GPU}", f"#SBATCH --mem-per-gpu={MEM_GI_PER_GPU + SHM_GI_PER_GPU}G",
                  "# Half a node's GPUs (a co-located P/D pool): not --exclusive, so the other pool's job can take "
                  "the other half of the same node; CPUs and memory per GPU as the Kubernetes form requests them "
                  "(a starting point: raise them to what your nodes can give)."]
    lines += [f"# {comment(inp.ctx.recipe.meta.title)}: {comment(inp.summary)}",
              f"# {comment(note)}"]
    if inp.blocked:
        lines.append("# The plan has errors; this job is NOT expected to work.")
    if inp.companions:
        lines.append("# Start first: " + comment(", ".join(c.label for c in inp.companions)) + " (see their tabs).")
        if any(c.role == "mooncake-config" for c in inp.companions) and gpus:
            # a fresh user's finding: "on every vLLM node" under /etc needs root, and SLURM picks the nodes
            lines.append("# The Mooncake config: write it once where every node reads it (the shared file system, "
                         "e.g. MOONCAKE_CONFIG_PATH=$PWD/mooncake_vllm_config.json when running its script in the "
                         "submit directory) and submit with that MOONCAKE_CONFIG_PATH.")
    installed = ("vLLM from the Install steps: unless vllm is on PATH, each node activates the .venv they create in "
                 "the directory sbatch is run from (SLURM_SUBMIT_DIR, on the shared file system)." if gpus else
                 f"Runs {comment(cmds[0].install)} first unless {comment(cmds[0].argv[0])} is on PATH (the "
                 "environment the job was submitted from)." if cmds[0].install else "")
    lines += [f"# {installed}"] if installed else []
    # A server runs until stopped: a partition's default time limit would end it (fresh-user finding).
    lines.append("# No #SBATCH --time is set: the partition's default limit applies and ends the job when reached; "
                 "add one your site allows (e.g. #SBATCH --time=7-00:00:00).")
    lines += ["set -euo pipefail", "",
              f"EXPECTED_NODES={nodes}",
              'if [ "${SLURM_JOB_NUM_NODES:-}" != "$EXPECTED_NODES" ]; then',
              f'  echo "error: this job runs on {nodes} node(s); SLURM gave ${{SLURM_JOB_NUM_NODES:-none}} '
              f'(sbatch --nodes={nodes})" >&2',
              "  exit 1", "fi",
              'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
              'if [ "${#NODES[@]}" -ne "$EXPECTED_NODES" ]; then',
              '  echo "error: SLURM_JOB_NODELIST names ${#NODES[@]} host(s), not $EXPECTED_NODES" >&2',
              "  exit 1", "fi"]
    for ph, expr in derived.items():
        lines.append(f'export {ph}="{expr}"')
    if reads_hosts and needed:
        lines += _read_hosts([hosts_name(inp, j) for j in reads_hosts], needed)
    for ph in needed:
        # ': "${NAME:?…}"' is kept for the values the submitter gives: the page writes a value entered in its
        # placeholders panel in as that line's default (site_src/assets/app.js jobWithValues). A host name the
        # router job reads from the pool jobs' host files is never the panel's: it is checked another way.
        if reads_hosts and HOST_PLACEHOLDERS.fullmatch(ph):
            hint = (f"set {ph} before sbatch, or first submit {' and '.join(f'{j}.sbatch' for j in reads_hosts)} from "
                    f"this directory: the host names are read from what {'they write' if len(reads_hosts) > 1 else 'it writes'}")
            lines.append(f'[ -n "${{{ph}:-}}" ] || {{ echo "error: {hint}" >&2; exit 1; }}')
        else:
            lines.append(f': "${{{ph}:?set {ph} before sbatch (see the configurator page)}}"')
        lines.append(f"export {ph}")
    if hosts_for_router:  # after every check: a job that stops here leaves no host names behind
        lines += _write_hosts(hosts_name(inp, job), _router_hosts(pool, nodes, instance))
    routers = [c for c in cmds if c.role == "router"]
    if routers:  # where to send requests (a fresh user found no word of the host the router job landed on)
        port = flag_value(routers[0].argv, "--port") or "30000"
        port = port if port.isascii() and port.isdigit() else "<port>"  # a recipe's value: only digits reach the line
        lines.append(f'echo "router: http://${{NODES[0]}}:{port} (ROUTER_HOST=${{NODES[0]}} for the page\'s checks)"')
    lines += ["", "start_node() {",
              '  local rank="$SLURM_NODEID"',
              '  if [ "${SLURM_PROCID:-}" != "$rank" ]; then',
              '    echo "error: expected one task per node (SLURM_PROCID=${SLURM_PROCID:-} on node $rank)" >&2',
              "    return 1", "  fi"]
    if gpus:  # the Install steps' environment (a fresh user's finding: the job ran no venv, "vllm: command not found")
        prog = cmds[0].argv[0]
        venv = '"${SLURM_SUBMIT_DIR:-$PWD}/.venv/bin/activate"'
        lines += [f"  if ! command -v {prog} >/dev/null 2>&1; then",
                  f"    if [ -f {venv} ]; then source {venv}; fi",  # start_node runs in its own bash, without set -u
                  f"    command -v {prog} >/dev/null 2>&1 || {{ echo \"error: {prog} is not on PATH on "
                  f"${{SLURMD_NODENAME:-node $rank}}, nor in ${{SLURM_SUBMIT_DIR:-$PWD}}/.venv: run the Install "
                  f"steps there first\" >&2; return 1; }}",
                  "  fi"]
    lines += ['  case "$rank" in']
    for rank, c in enumerate(cmds):
        lines.append(f"    {rank})  # {comment(c.label)}")
        if c.install:  # whatever a job starts, it installs (issue 21): unless already on PATH
            # as the pip form's script: into the submitting environment's venv, else a .venv of its own
            lines += [f"      if ! command -v {c.argv[0]} >/dev/null 2>&1; then",
                      f'        if [ -z "${{VIRTUAL_ENV:-}}" ]; then {"; ".join(TOOL_ENV.splitlines())}; fi',
                      f"        {c.install}", "      fi"]
        exports, notes = node_env(c, gpus)
        lines += [f"      # {n}" for n in notes]
        if exports:  # indented only where a line starts outside quotes: a value may span lines
            lines.append(indent(exports, "      "))
        lines.append(indent("exec " + c.command, "      "))
        lines.append("      ;;")
    lines += ['    *) echo "error: no command for node $rank" >&2; return 1 ;;', "  esac", "}", "",
              f"srun --nodes={nodes} --ntasks={nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 "
              'bash -c "$(declare -f start_node); start_node"', ""]
    return "\n".join(lines)


def files(inp: FormInput, detail: object) -> tuple[tuple[Artifact, ...], Optional[str]]:
    """The plan's sbatch scripts, or the reason there are none."""
    if not inp.commands:
        return (), "The plan has no commands to run."
    if inp.sel.instances > 1:
        return _instance_files(inp)
    groups: dict[Optional[str], list[Command]] = {}
    router = [c for c in inp.commands if c.role == "router"]
    for c in inp.commands:
        if c.role != "router":
            groups.setdefault(c.pool, []).append(c)
    out = []
    how = "Submit with sbatch {name}; every node starts with srun."
    for pool, cmds in groups.items():
        cmds = sorted(cmds, key=lambda c: c.node_rank)
        job = pool or "serve"
        name = f"{job}.sbatch"
        note = (f"The {pool} pool: submit with sbatch {name}; it writes its host names for the router job." if pool
                else how.format(name=name) + (" It writes its host names for the router job." if router else ""))
        out.append(Artifact(name, "text/x-shellscript",
                            sbatch(inp, job, cmds, pool, _gpus_per_node(inp, pool), note, hosts_for_router=bool(router)),
                            note=note))
    if router and any(c.pool for c in inp.commands):
        note = ("The router: submit from the same directory once the pool jobs run (sbatch --dependency=after:"
                "<prefill job id>:<decode job id> router.sbatch): it reads PREFILL_NODE_<k> and DECODE_NODE_<k> from "
                "the host files the running pool jobs publish (a value set when submitting wins).")
    elif router:  # hybrid-LB DP: the router lists every node's API server of the one serve job
        note = ("The router: submit from the same directory once serve.sbatch runs (sbatch --dependency=after:"
                "<serve job id> router.sbatch): it reads HEAD_IP and NODE_<k>_IP (that job's host names in node "
                "order) from the host file the running job publishes (a value set when submitting wins).")
    if router:
        reads = tuple(p or "serve" for p in groups)
        out.append(Artifact("router.sbatch", "text/x-shellscript",
                            sbatch(inp, "router", router, None, 0, note, reads_hosts=reads), note=note))
    return tuple(out), None


def _instance_files(inp: FormInput) -> tuple[tuple[Artifact, ...], Optional[str]]:
    """A KV-store deployment's instances behind the cache-aware router: one
    ``instance-<k>.sbatch`` per instance (its nodes, in the plan's order: each
    instance's commands follow the previous one's, as ``plan`` composes them
    and ``composer.k8s`` groups them), each publishing its host names, and
    ``router.sbatch`` reading them all. The instances are separate jobs so
    each gets whole nodes of its own and fails alone."""
    serving = [c for c in inp.commands if c.role != "router"]
    router = [c for c in inp.commands if c.role == "router"]
    count = inp.sel.instances
    per = len(serving) // count
    if per * count != len(serving) or not router:
        return (), "The plan's commands do not divide into its instances; use the pip form's scripts."
    gpus = _gpus_per_node(inp, None)
    out, jobs = [], []
    for k in range(1, count + 1):
        cmds = sorted(serving[(k - 1) * per:k * per], key=lambda c: c.node_rank)
        job = f"instance-{k}"
        jobs.append(job)
        note = (f"Instance {k} of {count}: submit with sbatch {job}.sbatch; every node starts with srun, and it "
                "writes its host names for the router job.")
        out.append(Artifact(f"{job}.sbatch", "text/x-shellscript",
                            sbatch(inp, job, cmds, None, gpus, note, hosts_for_router=True, instance=k), note=note))
    note = ("The router: submit from the same directory once the instance jobs run (sbatch --dependency=after:"
            "<instance job ids> router.sbatch): it reads each instance's host names from the host files the running "
            "instance jobs publish (a value set when submitting wins).")
    out.append(Artifact("router.sbatch", "text/x-shellscript",
                        sbatch(inp, "router", router, None, 0, note, reads_hosts=tuple(jobs)), note=note))
    return tuple(out), None


def placeholder_note(name: str, in_commands: bool) -> Optional[str]:
    """What the panel's value of ``name`` does to the sbatch jobs. A host the
    jobs set themselves (``HOST_PLACEHOLDERS``): the value only serves what runs
    outside the jobs, and how to find the host. Any other name the node
    commands use (``in_commands``) is checked when the job starts (``sbatch``'s ``: "${NAME:?…}"`` line): the page writes an
    entered value in as that check's default (site_src/assets/app.js
    ``jobWithValues``), which a value exported before ``sbatch`` overrides
    (fresh-user finding: the job refused to start with IFACE_NAME filled in on
    the page)."""
    if name == "ROUTER_HOST":  # the checks' address of the router job (echoed by sbatch: ``sbatch``)
        return ("router.sbatch prints it when it starts: the line \"router: http://<host>:<port>\" in its output "
                "file (slurm-<job id>.out).")
    if not HOST_PLACEHOLDERS.fullmatch(name):
        return None if not in_commands else (f"The sbatch jobs check it when they start: a value here is written into the downloaded and copied "
                f"jobs as its default; a value exported before sbatch wins ({name}=… sbatch <job>.sbatch), and with "
                f"neither the job stops and says so.")
    return ("The sbatch jobs set it themselves from the hosts SLURM gives them (SLURM_JOB_NODELIST): a value here "
            "is only for what runs outside them, the checks below. The job's hosts, in node "
            "order: scontrol show hostnames \"$(squeue -h -j <job id> -o %N)\".")


def panel_skips(name: str) -> bool:
    """A host name the jobs set themselves (``HOST_PLACEHOLDERS``): the panel lists it
    only for a line outside the jobs that uses it (``OutputForm.panel_skips``)."""
    return bool(HOST_PLACEHOLDERS.fullmatch(name))


FORM: OutputForm = OutputForm(
    id="slurm", label="SLURM",
    describe=lambda image: "Install vLLM on each node and submit the plan as sbatch jobs: srun starts every node's command.",
    needs_image=False, vllm_from="host",
    command_text=lambda cmd: cmd.pip_text,
    files=files,
    placeholder_note=placeholder_note,
    panel_skips=panel_skips, runs_commands=True,
)
