"""Output forms: the shapes a plan's commands can take, as a registry.

A form is how a person runs the plan — on the host after a pip install, in
the vLLM container, as Kubernetes manifests. Each form is one module of this
package with one ``OutputForm`` declaration, entered once in ``FORMS``; the
page's "Run with" control, the resolver (``install=``), the CLI's
``--format``, the plan's ``output`` (what the page's tabs, Copy and Download
show) are all derived from the registry. How vLLM itself gets installed
follows from the form (``OutputForm.vllm_from``), not the other way round.

To add a form: a module here defining ``FORM`` and one entry in ``FORMS``.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Callable, Literal, Optional

from composer.context import RecipeContext
from composer.dimensions import Selection
from composer.outputs import Artifact, Command, Output


@dataclass(frozen=True)
class FormInput:
    """What a form's builder reads: the context, the selection, the plan's
    commands (final ``pip_text``/``docker_text`` included), its companion
    processes, capacity checks and summary, and whether the plan is blocked."""

    ctx: RecipeContext
    sel: Selection
    commands: tuple[Command, ...]
    companions: tuple
    capacity: tuple
    summary: str
    blocked: bool


@dataclass(frozen=True)
class OutputForm:
    """One output form.

    ``id`` is its value of the ``install=`` URL parameter; ``label`` and
    ``describe(image)`` what its option says (``image``: the container image
    in force, or None); ``needs_image``: unavailable where no container image
    is known (then ``run_forms.docker_reason`` says why); ``vllm_from``: how
    vLLM is installed — ``host`` (pip on each node) or ``image`` (the
    container's); ``command_text(cmd)``: the text a command's tab shows;
    ``files(inp)``: the form's own files beyond the per-command scripts, with
    a reason when it has none (``(artifacts, reason)``); ``plan_key``: the
    plan field its structured result fills (``kubernetes``), with ``detail``
    building it; ``placeholder_note(name, in_commands)``: what the form adds
    to the meaning of placeholder ``name`` in the placeholders panel, or None
    (the SLURM jobs set the hosts' names themselves and check the other values
    the node commands use: ``in_commands`` says whether they use ``name``);
    ``panel_skips(name)``: the form's own files set ``name`` themselves, so
    the panel leaves it out unless a line outside them (a companion, the
    client checks) uses it (the SLURM jobs' host names: a fresh user found ten
    of twelve fields of a P/D panel saying the jobs set them); ``runs_companions``: its own
    files start the companion processes too (the Kubernetes manifests' side
    containers), so a file list needs no companion scripts beside them;
    ``runs_commands``: when it writes files, they start every command (the
    sbatch jobs run each node's command under srun and set the hosts' names
    themselves), so the commands' tabs offer no script of their own (an
    adversarial finding: a P/D node's script needed $PREFILL_NODE_1, which the
    panel leaves out because the jobs set it)."""

    id: str
    label: str
    describe: Callable[[Optional[str]], str]
    needs_image: bool
    vllm_from: Literal["host", "image"]
    command_text: Callable[[Command], str]
    files: Callable[[FormInput, object], tuple[tuple[Artifact, ...], Optional[str]]] = lambda inp, detail: ((), None)
    plan_key: Optional[str] = None
    detail: Optional[Callable[[FormInput], object]] = None
    placeholder_note: Callable[[str, bool], Optional[str]] = lambda name, in_commands: None
    panel_skips: Callable[[str], bool] = lambda name: False
    runs_companions: bool = False
    runs_commands: bool = False


HOST_PLACEHOLDERS = re.compile(r"HEAD_IP|NODE_\d+_IP|(?:PREFILL|DECODE)_NODE_\d+|INSTANCE_\d+_(?:HEAD_IP|IP|NODE_\d+_IP)")
"""The placeholders that name a node of the plan (its head, a pool's or an
instance's nodes): a form that places the nodes itself (SLURM from the hosts
it gives a job, Kubernetes from its pods and Services) sets them in its own
files, so its panel asks for them only where a line outside those files uses
them (``OutputForm.panel_skips``)."""


def script_name(label: str) -> str:
    """A command's script file name from its tab label (``Prefill node 1/2``
    → ``prefill-node-1-of-2.sh``, ``Prefill, GPUs 0–3`` → ``prefill-gpus-0-3.sh``):
    letters, digits, ``.``, ``_`` and single ``-`` only."""
    name = label.lower().replace("/", "-of-").replace("·", "").replace("(", "").replace(")", "")
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9._-]+", "-", name)).strip("-") + ".sh"


from composer.forms import config, docker, kubernetes, pip, slurm  # noqa: E402  (each module declares its FORM)

_REGISTERED: tuple[OutputForm, ...] = (pip.FORM, docker.FORM, kubernetes.FORM, config.FORM, slurm.FORM)
FORMS: dict[str, OutputForm] = {f.id: f for f in _REGISTERED}
"""The registry, in the order the page offers the forms."""


def default_form(ctx: RecipeContext) -> str:
    """``docker`` when the recipe's ``model.install`` lists docker before pip
    or disables pip (semantics §2.1), else ``pip``."""
    inst = ctx.recipe.model.install
    if isinstance(inst, dict):
        keys = [k for k in inst if k in ("pip", "docker")]
        if inst.get("pip") is False or (keys and keys[0] == "docker" and inst.get("docker") is not False):
            return "docker"
    return "pip"


def form_block_reason(ctx: RecipeContext, form_id: str, hw_id: str, variant_id: str, kv_offload: str) -> str | None:
    """Why form ``form_id`` cannot show this selection (no container image is
    known for it), or None."""
    from composer.run_forms import docker_image, docker_reason

    form = FORMS[form_id]
    if form.needs_image and docker_image(ctx, hw_id, variant_id, kv_offload) is None:
        return docker_reason(ctx, hw_id, variant_id, kv_offload)
    return None


def output(form_id: str, inp: FormInput, detail: object) -> Output:
    """The plan's ``output``: the selected form's files (first) and every
    command's runnable script, each an ``Artifact``."""
    from composer.run_forms import script
    from composer.shell import comment

    form = FORMS[form_id]
    files, reason = form.files(inp, detail)
    scripts = () if reason is None and form.runs_commands else tuple(
        Artifact(script_name(c.label), "text/x-shellscript", c.script, command=i)
        for i, c in enumerate(inp.commands) if c.script)
    helpers = tuple(Artifact(script_name(c.label), "text/x-shellscript", script(inp.summary, c, c.text), companion=i)
                    for i, c in enumerate(inp.companions) if c.text)
    every = helpers + scripts  # companions first: they start before the vLLM commands that use them
    name = f"{inp.ctx.recipe_id.split('/')[-1]}-{inp.sel.hardware}-scripts.sh"
    # A file of one command's tab (a node's config YAML) goes into "Download all" beside the scripts;
    # a whole-plan file (the manifests, the sbatch jobs) is the form's own download.
    own = tuple(a for a in files if a.command is not None or a.companion is not None)
    whole = tuple(a for a in files if a.command is None and a.companion is None)
    pack = bundle(name, inp.summary, every, own) if len(every) > 1 and not whole else None
    if len(whole) > 1:  # else the form's own files, several of them (a P/D plan's three sbatch jobs: a fresh user's finding)
        # The companions' scripts too, unless the form's files run them (a fresh user found the Mooncake master and
        # config scripts missing from the SLURM form's Download all).
        extra = () if form.runs_companions else helpers
        pack = bundle(f"{inp.ctx.recipe_id.split('/')[-1]}-{inp.sel.hardware}-{form.id}.sh", inp.summary, extra, whole,
                      how=f"Writes this plan's {form.label} files into the current directory: "
                          + comment(", ".join(a.file_name for a in whole)) + ". Each file's note says how to use it."
                          + (" Also the scripts of what starts first, before them: "
                             + comment(", ".join(a.file_name for a in extra)) + "." if extra else ""))
    return Output(form.id, form.label, files + scripts + helpers, reason, pack)


BUNDLE_END = "VLLM_CONFIGURATOR_EOF"
"""The here-document delimiter of ``bundle`` (a longer one is used when a script holds this line)."""


def bundle(file_name: str, summary: str, scripts: tuple[Artifact, ...], files: tuple[Artifact, ...] = (),
           how: str | None = None) -> Artifact:
    """One script that writes every script of a plan into the current
    directory (quoted here-documents: nothing in them expands) and makes them
    executable; the page's "Download all". ``scripts`` in the order to run;
    ``files``: the files they read (each node's config YAML), written first.
    ``how``: the header's one line instead (the whole-plan files of a form
    alone: the sbatch jobs, written as they are, not made executable)."""
    from composer.shell import comment, quote

    texts = "\n".join(a.text for a in files + scripts)
    end = BUNDLE_END
    while end in texts.split("\n"):
        end += "_"
    what = "scripts" if not files else "files"
    lines = ["#!/usr/bin/env bash", f"# {comment(summary)}",
             f"# Writes this plan's {what} into the current directory; copy each to its node and run it there,",
             "# in this order: " + comment(", ".join(a.file_name for a in scripts)) + ".",
             "set -euo pipefail", ""]
    if how is not None:
        lines[2:4] = [f"# {comment(how)}"]
    elif files:
        lines[4:4] = ["# Each node's script reads its config file (" + comment(", ".join(a.file_name for a in files))
                      + "): copy it along."]
    for a in files:
        body = a.text if a.text.endswith("\n") else a.text + "\n"
        lines += [f"cat > {quote(a.file_name)} <<'{end}'", body + end]
    for a in scripts:
        body = a.text if a.text.endswith("\n") else a.text + "\n"
        lines += [f"cat > {quote(a.file_name)} <<'{end}'", body + end, f"chmod +x {quote(a.file_name)}"]
    lines += ["", "echo " + quote("Wrote: " + " ".join(a.file_name for a in files + scripts))]
    return Artifact(file_name, "text/x-shellscript", "\n".join(lines) + "\n")


def details(inp: FormInput, every: bool) -> dict[str, object]:
    """``{plan key: structured result}`` of the forms that have one: every
    such form (``every``: the CLI and the JSON API), else only the selected
    one (the page writes no YAML nobody sees)."""
    return {f.plan_key: f.detail(inp) for f in FORMS.values()
            if f.plan_key and f.detail and (every or f.id == inp.sel.form)}
