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
   placeholder (``$IFACE_NAME``, the router's pool addresses …) must be set
   when the job is submitted (``sbatch`` passes the environment on) and is
   checked;
3. starts every node's command with one ``srun`` (one task per node), each
   task choosing its command by its node rank ``SLURM_NODEID`` (checked
   against ``SLURM_PROCID``: one task per node).

The node commands are the plan's own texts (``Command.env_text`` and
``Command.command``: every recipe value already quoted by
``composer.shell.quote``); recipe text in comments goes through
``composer.shell.comment``. SLURM's variables: the sbatch/srun manual pages
(OUTPUT ENVIRONMENT VARIABLES).
"""

from __future__ import annotations

import re
from typing import Optional

from composer.forms import FormInput, OutputForm
from composer.outputs import Artifact, Command
from composer.shell import comment, text_placeholders

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


def _host_names(pool: Optional[str], nodes: int) -> dict[str, str]:
    """``{placeholder: shell expression}`` a job of ``pool`` sets from its host
    list ``NODES``: ``HEAD_IP`` (first host), or the pool's ``PREFILL_NODE_<k>``
    / ``DECODE_NODE_<k>``."""
    if pool is None:
        return {"HEAD_IP": "${NODES[0]}"}
    return {f"{pool.upper()}_NODE_{k + 1}": f"${{NODES[{k}]}}" for k in range(nodes)}


def _placeholders(cmds: list[Command]) -> list[str]:
    names: dict[str, None] = {}
    for c in cmds:
        for name in text_placeholders(c.env_text + "\n" + c.command):  # $NAME and ${NAME}
            names.setdefault(name, None)
    return [n for n in names if n not in ("HOME", "PATH", "USER", "PWD")]


def sbatch(inp: FormInput, job: str, cmds: list[Command], pool: Optional[str], gpus: int, note: str) -> str:
    """One sbatch script running ``cmds`` (node rank order) on one node each."""
    nodes = len(cmds)
    derived = _host_names(pool, nodes) if gpus else {}
    needed = [n for n in _placeholders(cmds) if n not in derived]
    name = _NAME.sub("-", f"{inp.ctx.recipe_id.split('/')[-1]}-{job}")[:64]
    lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={name}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1"]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if gpus:  # the router uses no GPU: it needs no whole node
        lines.append("#SBATCH --exclusive")
    lines += [f"# {comment(inp.ctx.recipe.meta.title)}: {comment(inp.summary)}",
              f"# {comment(note)}"]
    if inp.blocked:
        lines.append("# The plan has errors; this job is NOT expected to work.")
    if inp.companions:
        lines.append("# Start first: " + comment(", ".join(c.label for c in inp.companions)) + " (see their tabs).")
    installed = ("vLLM must be installed on every node (the Install steps)." if gpus else
                 f"Needs {comment(cmds[0].install)} where it runs." if cmds[0].install else "")
    lines += [f"# {installed}"] if installed else []
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
    for ph in needed:
        lines.append(f': "${{{ph}:?set {ph} before sbatch (see the configurator page)}}"')
        lines.append(f"export {ph}")
    lines += ["", "start_node() {",
              '  local rank="$SLURM_NODEID"',
              '  if [ "${SLURM_PROCID:-}" != "$rank" ]; then',
              '    echo "error: expected one task per node (SLURM_PROCID=${SLURM_PROCID:-} on node $rank)" >&2',
              "    return 1", "  fi",
              '  case "$rank" in']
    for rank, c in enumerate(cmds):
        lines.append(f"    {rank})  # {comment(c.label)}")
        if c.install:
            lines.append(f"      # install first: {comment(c.install)}")
        for env_line in c.env_text.splitlines():
            lines.append("      " + env_line)
        body = c.command.split("\n")
        lines.append("      exec " + body[0])
        lines += ["      " + b for b in body[1:]]
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
        return (), "Several vLLM instances behind a router are not written as SLURM jobs yet; use the pip form's scripts."
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
        note = (f"The {pool} pool: submit with sbatch {name}; the router job needs its host names." if pool
                else how.format(name=name))
        out.append(Artifact(name, "text/x-shellscript", sbatch(inp, job, cmds, pool, _gpus_per_node(inp, pool), note),
                            note=note))
    if router and any(c.pool for c in inp.commands):
        note = ("The router: submit with sbatch router.sbatch once the pool jobs run, with PREFILL_NODE_<k> and "
                "DECODE_NODE_<k> set to their host names (scontrol show hostnames of each job's node list).")
    elif router:  # hybrid-LB DP: the router lists every node's API server of the one serve job
        note = ("The router: submit with sbatch router.sbatch once serve.sbatch runs, with HEAD_IP and NODE_<k>_IP "
                "set to that job's host names in node order (scontrol show hostnames of its node list: the first "
                "is HEAD_IP, the next NODE_1_IP, …).")
    if router:
        out.append(Artifact("router.sbatch", "text/x-shellscript", sbatch(inp, "router", router, None, 0, note), note=note))
    return tuple(out), None


FORM: OutputForm = OutputForm(
    id="slurm", label="SLURM",
    describe=lambda image: "Install vLLM on each node and submit the plan as sbatch jobs: srun starts every node's command.",
    needs_image=False, vllm_from="host",
    command_text=lambda cmd: cmd.pip_text,
    files=files,
)
