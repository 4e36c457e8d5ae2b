"""The Kubernetes form: the plan as manifests to ``kubectl apply`` — a
Deployment for one node, a LeaderWorkerSet across nodes, a DisaggregatedSet
for P/D — running the Docker form's image (``composer.k8s`` builds them)."""

from __future__ import annotations

from composer import k8s
from composer.forms import HOST_PLACEHOLDERS, FormInput, OutputForm
from composer.outputs import Artifact, Manifests
from composer.parallel import Layout


def manifests(inp: FormInput) -> Manifests:
    """The plan's Kubernetes manifests (``composer.k8s``), or a ``Manifests``
    whose ``reason`` says why there are none (no container image is known for
    the brand, or the plan cannot be expressed as one worker template)."""
    from composer import run_forms as run
    from composer.dimensions import POOLS
    from composer.resolve import layout_for, pool_layout

    ctx, sel = inp.ctx, inp.sel
    name = ctx.recipe_id.split("/")[-1] + "-" + sel.hardware + ".yaml"
    # The Docker form's image (the same KV-connector and CUDA choice), pinned to a release.
    image = run.docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, sel.cuda)
    if image is None:
        return Manifests(name, "", (), run.docker_reason(ctx, sel.hardware, sel.variant, sel.kv_offload))
    if not inp.commands:
        return Manifests(name, "", (), "The plan has no commands to run.")
    layouts: dict[str | None, Layout] = {}
    for p in POOLS if sel.prefill else ():
        pool = sel.pool(p)
        assert pool is not None  # a P/D selection has both pools
        layouts[p] = pool_layout(ctx, sel, p, pool.mode, pool.nodes)
    if not sel.prefill:
        layouts[None] = layout_for(ctx, sel, sel.nodes)
    weights = max((c.weights_gb for c in inp.capacity if c.weights_gb), default=None)
    pinned, why = image_in_force(image, run.min_vllm_version(ctx, sel))
    client = run.client_checks(ctx, sel, list(inp.commands))
    try:
        return k8s.build(ctx, sel, list(inp.commands), list(inp.companions), pinned, run.brand_key(ctx, sel.hardware),
                         layouts, weights, inp.summary, inp.blocked, why, client.curl_argv)
    except k8s.K8sError as exc:
        return Manifests(name, "", (), f"These commands cannot run as Kubernetes manifests: {exc}.")


def image_in_force(image: str, minimum: str | None) -> tuple[str, str]:
    """``(image, why)``: the image the pods run (the Docker form's, which
    ``run_forms.docker_image`` has already pinned to the release the commands
    are checked against, or to the nightly build: ``run_forms.pinned_image``)
    and a sentence saying which vLLM the pods run and why (issue 21: an
    operator applies a fixed image, not whatever ``latest`` is that day)."""
    from composer import run_forms as run

    repo, _, tag = image.rpartition(":")
    if repo in run.PINNED_REPOS and tag == f"v{run.VLLM_RELEASE}":
        need = f" (this recipe needs {minimum} or newer)" if minimum else ""
        return image, f"vLLM {run.VLLM_RELEASE}, the release these commands are checked against{need}, as the Docker form runs it."
    if image.endswith(":nightly"):
        need = f"needs vLLM {minimum}, newer than the release {run.VLLM_RELEASE}" if minimum else "asks for the nightly build"
        return image, f"the nightly build: this configuration {need}."
    return image, "the recipe's own image (or the brand's), as the Docker form runs it."


def files(inp: FormInput, detail: object) -> tuple[tuple[Artifact, ...], str | None]:
    """The manifests as one YAML file, or the reason there are none."""
    m = detail if isinstance(detail, Manifests) else manifests(inp)
    if not m.yaml:
        return (), m.reason
    note = (f"Apply with kubectl apply -f {m.file_name}. Values marked PARAMETER are yours to set; "
            "the per-node tabs show each pod's command as a host would run it (in the pods, the addresses come "
            "from the pods and Services, and a GPU index list counts the pod's own GPUs from 0).")
    return (Artifact(m.file_name, "application/yaml", m.yaml, note=note),), None


FORM: OutputForm = OutputForm(
    id="k8s", label="Kubernetes",
    describe=lambda image: (f"Kubernetes manifests running the {image} container: a Deployment for one node, a "
                            "LeaderWorkerSet across nodes, a DisaggregatedSet for P/D.") if image else "",
    needs_image=True, vllm_from="image",
    command_text=lambda cmd: cmd.pip_text,
    files=files, plan_key="kubernetes", detail=manifests, runs_companions=True,
    # The manifests set every node's address themselves (the group leader's, the pod's own, the Services':
    # composer/k8s.py), so the panel asks for one only for a line outside them (a fresh user's finding: it
    # asked for PREFILL_NODE_1 and DECODE_NODE_1, which no manifest reads).
    panel_skips=lambda name: bool(HOST_PLACEHOLDERS.fullmatch(name)),
)
