"""How to run a plan: install lines, the docker form of each command, companion
processes, a per-node shell script and client checks (curl, ``vllm bench serve``).

Sources: semantics §10 (images, GPU flags, pip commands) with its weaknesses
fixed: multi-node and P/D containers use host networking (W23), single-node
containers publish the port the command really serves (W23), unknown brands get
no NVIDIA image (W38), and the image honours variant ``nightly_required`` (W39).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from composer import vllm_cli
from composer.launch import source_template
from composer.argv import flag_value
from composer.context import RecipeContext
from composer.outputs import ClientChecks, Command, CompanionProcess, Install, InstallStep
from composer.positions import PLACEHOLDER_ONLY, check
from composer.shell import command_text, text_placeholders, comment, heredoc_body, quote, recipe_command, recipe_script


def _install(line):
    """An install line from recipe data, safe to paste (``recipe_command``)."""
    return recipe_command(str(line)) if line else None


TOOL_ENV = "test -d .venv || uv venv --python 3.12\nsource .venv/bin/activate"
"""The uv environment a companion's or the router's install goes into: the
node's own (the Install step's ``.venv``, which the LMCache connector in
vLLM's process needs too) where it exists, else a new one — never a
re-created one (``uv venv`` over an existing environment replaces it)."""


def tool_install(install: str | None, text: str) -> str:
    """What a tab that starts a process other than ``vllm serve`` shows: the
    install of that process (``install``, e.g. ``uv pip install
    vllm-router``) in ``TOOL_ENV``, then ``text``; ``text`` alone without an
    install (issue 21: whatever a tab runs, the tab or its script installs)."""
    if not install:
        return text
    return f"{TOOL_ENV}\n{install}\n{text}"

DEFAULT_IMAGES = {
    "nvidia": (f"vllm/vllm-openai:v{vllm_cli.VERSION}", "vllm/vllm-openai:nightly"),
    "amd": (f"vllm/vllm-openai-rocm:v{vllm_cli.VERSION}", "vllm/vllm-openai-rocm:nightly"),
    "tpu": ("vllm/vllm-tpu:latest", "vllm/vllm-tpu:nightly"),
    "intel": ("vllm/vllm-openai-cpu:latest-x86_64", None),
}
"""The brand's vLLM image: (release, nightly). vLLM's own CUDA and ROCm images
are published per release as ``:v<version>`` and are pinned to the release the
commands are checked against (``vllm_cli.VERSION``): what we show starts on
the vLLM we checked it against, not on whatever ``latest`` is the day it runs
(a fresh user's finding). The TPU and CPU images have no per-release tag we
know of and stay on ``latest``."""
PINNED_REPOS = ("vllm/vllm-openai", "vllm/vllm-openai-rocm")
"""vLLM's own images that are published per release as ``:v<version>``."""
DOCKER_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")
"""Names of Docker Hub a reference may start with (``docker.io/vllm/vllm-openai``
is ``vllm/vllm-openai``)."""


def pinned_image(image: str, release: str | None = None, nightly: bool = False) -> str:
    """``image`` with the ``latest`` tag of vLLM's own images (``PINNED_REPOS``,
    on Docker Hub under any of its names; no tag is ``latest``) pinned to
    ``:v<release>`` (default: the release the commands are checked against,
    ``vllm_cli.VERSION``), or to ``:nightly`` when the configuration needs the
    nightly build (``nightly``: as the default image, ``_nightly``), so a
    recipe's ``vllm/vllm-openai:latest`` runs what we checked too; any other
    image (a digest, another registry, another tag, a CPU or TPU image)
    unchanged."""
    if "@" in image:
        return image
    last = image.rsplit("/", 1)[-1]
    repo, tag = (image.rsplit(":", 1) if ":" in last else (image, "latest"))
    bare = next((repo[len(p):] for p in DOCKER_HUB_PREFIXES if repo.startswith(p)), repo)
    if bare in PINNED_REPOS and tag == "latest":
        return f"{repo}:{'nightly' if nightly else 'v' + (release or vllm_cli.VERSION)}"
    return image


GPU_FLAGS = {
    "nvidia": ["--gpus", "all"],
    "amd": ["--device=/dev/kfd", "--device=/dev/dri", "--security-opt", "seccomp=unconfined", "--group-add", "video"],
    "tpu": ["--privileged"],
    "intel": [],
}
HF_CACHE = ["-v", "$HOME/.cache/huggingface:/root/.cache/huggingface"]


def brand_key(ctx: RecipeContext, hw_id: str) -> str | None:
    """``nvidia`` | ``amd`` | ``tpu`` | ``intel``, or None for a brand with no known image."""
    hw = ctx.hw(hw_id)
    if hw.gen == "tpu":
        return "tpu"
    if hw.gen in ("cpu", "xpu") or hw.brand == "Intel":
        return "intel"
    return {"NVIDIA": "nvidia", "AMD": "amd"}.get(hw.brand)


OMNI_IMAGES = {"nvidia": "vllm/vllm-omni", "amd": "vllm/vllm-omni-rocm"}
"""vLLM-Omni's container images per brand (tagged ``v<release>``)."""
OMNI_SOURCE = "git+https://github.com/vllm-project/vllm-omni.git"
"""vLLM-Omni from source: for a recipe that needs more than its newest release."""
VLLM_RELEASE = vllm_cli.VERSION
"""The newest vLLM release the project knows (the pinned ``vllm_cli.json``)."""
OMNI_RELEASE = vllm_cli.OMNI["source"].get("version") or VLLM_RELEASE
"""The newest vLLM-Omni release the project knows (``vllm_cli.json`` ``omni.source``)."""
ROUTER_RELEASE = "0.1.17"
"""The vllm-router release the routers' Install lines pin (PyPI ``vllm-router``:
0.1.17 of 2026-11-04, the first after vLLM 0.33.0 of 2026-11-02; vLLM 0.33.0's
docs/features/moriio_connector_usage.md installs it unpinned). A pinned line
installs today what it installed when the plan was checked."""
ROUTER_INSTALL = f"uv pip install vllm-router=={ROUTER_RELEASE}"
"""The Install line of every router tab whose recipe names none of its own."""


_PHASES = (("preview", 3), ("alpha", 1), ("beta", 2), ("post", 5), ("dev", 0), ("pre", 3), ("rev", 5), ("rc", 3),
           ("a", 1), ("b", 2), ("c", 3), ("r", 5))
"""PEP 440's spellings of a release's phases with their rank (dev < a < b <
rc < the release, 4, < post), longest first: the first that starts a
suffix is its phase ("preview" before "pre", "rc" before "r")."""


def version_key(version: str) -> tuple:
    """A sort key for a vLLM version in PEP 440's order (``0.12.0.post1`` >
    ``0.12.0`` > ``0.12.0rc1`` > ``0.12.0.dev1`` > ``0.11.2``): the release
    numbers padded to three, then the phase (``_PHASES``) and its number.
    A suffix it does not know sorts as a pre-release (never above the release)."""
    m = re.match(r"^v?(\d+(?:\.\d+)*)(.*)$", str(version).strip())
    if not m:
        return ((0, 0, 0), 0, 0, str(version))
    nums = tuple(int(p) for p in m.group(1).split("."))
    rest = m.group(2).lower().lstrip(".-_")
    phase, number = (4, 0) if not rest else (0, 0)
    for name, rank in _PHASES:
        if rest.startswith(name):
            tail = re.match(r"^[.\-_]?(\d*)", rest[len(name):])
            phase, number = rank, int(tail.group(1) or 0) if tail else 0
            break
    return (nums + (0,) * (3 - len(nums)), phase, number, rest)


def unreleased(version: str | None) -> bool:
    """Whether ``version`` is newer than the newest vLLM release the project
    knows (``VLLM_RELEASE``): only the nightly build can have it."""
    return bool(version) and version_key(str(version)) > version_key(VLLM_RELEASE)


def _nightly(ctx: RecipeContext, variant_id: str, kv_offload: str = "") -> bool:
    """Nightly builds: the recipe or variant asks for them (``nightly_required``),
    or its minimum vLLM version is not released yet."""
    return (ctx.recipe.model.nightly_required or ctx.variant(variant_id).nightly_required
            or unreleased(_min_version(ctx, variant_id, kv_offload)))


def docker_image(ctx: RecipeContext, hw_id: str, variant_id: str, kv_offload: str = "", cuda: str | None = None) -> str | None:
    """The container image: variant exact-hardware image, variant image, model
    image (string = NVIDIA pin; brand map; CUDA map → ``cuda`` if given, else
    cu130), else the default: vLLM-Omni's image of its newest known release
    for omni recipes (none when the recipe needs a newer one), else the
    brand's vLLM image, ``:nightly`` when nightly builds are needed. None when
    the recipe turns Docker off (``model.install.docker: false``) or no image
    is known for the brand."""
    brand = brand_key(ctx, hw_id)
    inst = ctx.recipe.model.install
    if brand is None or (isinstance(inst, Mapping) and inst.get("docker") is False):
        return None
    variant = ctx.variant(variant_id)
    candidates = []
    hw_block = variant.hardware_overrides.get(hw_id)
    if hw_block is not None and isinstance(hw_block.docker_image, str):
        candidates.append(hw_block.docker_image)
    for raw in (variant.docker_image, ctx.recipe.model.docker_image):
        picked = _pick_image(raw, brand, cuda)
        if picked:
            candidates.append(picked)
    if candidates:
        # A recipe's image lands where docker reads its image: one that does not fit never reaches a command.
        if check(candidates[0], "image") is not None:
            return None
        return pinned_image(candidates[0], nightly=_nightly(ctx, variant_id, kv_offload))
    if ctx.is_omni:
        repo = OMNI_IMAGES.get(brand)
        minver = _min_version(ctx, variant_id, kv_offload)
        if repo is None or (minver and version_key(minver) > version_key(OMNI_RELEASE)):
            return None
        return f"{repo}:v{OMNI_RELEASE}"
    stable, nightly = DEFAULT_IMAGES[brand]
    return (nightly or stable) if _nightly(ctx, variant_id, kv_offload) else stable


def docker_reason(ctx: RecipeContext, hw_id: str, variant_id: str, kv_offload: str = "") -> str:
    """Why ``docker_image`` is None, in a sentence."""
    inst = ctx.recipe.model.install
    if isinstance(inst, Mapping) and inst.get("docker") is False:
        return "The recipe offers no container image for this model; use the pip install."
    bad = _recipe_image(ctx, hw_id, variant_id)
    if bad is not None and check(bad, "image"):
        return f"The recipe's container image cannot be used: {check(bad, 'image')}; use the pip install."
    brand = brand_key(ctx, hw_id)
    if ctx.is_omni and brand in OMNI_IMAGES:
        return (f"The newest vLLM-Omni image known here ({OMNI_IMAGES[brand]}:v{OMNI_RELEASE}) is older than the "
                f"vLLM {_min_version(ctx, variant_id, kv_offload)} this recipe needs; install vLLM-Omni from source (pip).")
    if ctx.is_omni:
        return f"No vLLM-Omni container image is known for {ctx.hw(hw_id).brand} hardware."
    return f"No vLLM container image is known for {ctx.hw(hw_id).brand} hardware."


def _cuda_map(raw, brand: str) -> Mapping | None:
    """The CUDA map (``{cu129: image, cu130: image}``) inside a ``docker_image`` value, if any."""
    if not isinstance(raw, Mapping) or brand != "nvidia":
        return None
    if any(str(k).startswith("cu") for k in raw):
        return raw
    value = raw.get("nvidia")
    return value if isinstance(value, Mapping) else None


def cuda_choices(ctx: RecipeContext, hw_id: str, variant_id: str) -> tuple[str, ...]:
    """The CUDA versions (``cu129``, ``cu130`` …) the image in force offers an
    image for, when there is more than one (semantics §10 "CUDA toggle"; NVIDIA
    only, and only where the recipe gives a CUDA map), else ``()``."""
    brand = brand_key(ctx, hw_id)
    variant = ctx.variant(variant_id)
    hw_block = variant.hardware_overrides.get(hw_id)
    if brand != "nvidia" or (hw_block is not None and isinstance(hw_block.docker_image, str)):
        return ()
    for raw in (variant.docker_image, ctx.recipe.model.docker_image):
        if _pick_image(raw, brand) is None:
            continue  # this level gives no NVIDIA image: the next one decides
        cmap = _cuda_map(raw, brand)
        keys = tuple(str(k) for k, v in cmap.items() if isinstance(v, str)) if cmap else ()
        return keys if len(keys) > 1 else ()
    return ()


def default_cuda(choices: tuple[str, ...]) -> str | None:
    """The CUDA version shown when none is chosen: ``cu130`` (semantics §10), else the first."""
    return ("cu130" if "cu130" in choices else choices[0]) if choices else None


def _pick_image(raw, brand: str, cuda: str | None = None) -> str | None:
    if isinstance(raw, str):
        return raw if brand == "nvidia" else None
    if isinstance(raw, Mapping):
        if any(str(k).startswith("cu") for k in raw):  # bare CUDA map
            return _pick_cuda(raw, cuda) if brand == "nvidia" else None
        value = raw.get(brand)
        if isinstance(value, Mapping):
            return _pick_cuda(value, cuda)
        return value if isinstance(value, str) else None
    return None


def _recipe_image(ctx: RecipeContext, hw_id: str, variant_id: str) -> str | None:
    """The image the recipe names for this hardware and variant (``docker_image``'s
    candidates, first wins), unchecked; None when it names none."""
    brand = brand_key(ctx, hw_id)
    variant = ctx.variant(variant_id)
    hw_block = variant.hardware_overrides.get(hw_id)
    if hw_block is not None and isinstance(hw_block.docker_image, str):
        return hw_block.docker_image
    for raw in (variant.docker_image, ctx.recipe.model.docker_image):
        picked = _pick_image(raw, brand, None) if brand else None
        if picked:
            return picked
    return None


def _pick_cuda(cmap: Mapping, cuda: str | None) -> str | None:
    if cuda and isinstance(cmap.get(cuda), str):
        return cmap[cuda]
    value = cmap.get("cu130")
    return value if isinstance(value, str) else next((v for v in cmap.values() if isinstance(v, str)), None)


def _min_version(ctx: RecipeContext, variant_id: str, kv_offload: str = "") -> str | None:
    store = ctx.catalog.strategies.get(kv_offload) if kv_offload else None
    given = [ctx.recipe.model.min_vllm_version, ctx.variant(variant_id).min_vllm_version,
             store.min_vllm_version if store is not None else None]
    found = [str(v) for v in given if v]
    return max(found, key=version_key) if found else None


def min_vllm_version(ctx: RecipeContext, sel) -> str | None:
    """The highest ``min_vllm_version`` of the recipe, the variant and the
    companions in force (an active KV-store deployment; semantics §1.1)."""
    return _min_version(ctx, sel.variant, sel.kv_offload)


def dependencies(ctx: RecipeContext, sel) -> tuple[InstallStep, ...]:
    """The recipe's extra install steps for this hardware's brand and install
    form (``Dependency.applies``), commands made safe to paste
    (``shell.recipe_script``), in recipe order."""
    brand = ctx.hw(sel.hardware).brand
    out = []
    for d in ctx.recipe.dependencies:
        if d.applies(brand, sel.form) and d.command.strip():
            out.append(InstallStep(recipe_script(d.command), d.note, d.optional))
    return tuple(out)


def _installs_omni(text: str | None) -> bool:
    return text is not None and ("vllm-omni" in text or "vllm_omni" in text)


_VLLM_PIN = re.compile(r"vllm(?:\[[^\]]*\])?==([0-9][0-9A-Za-z.+!-]*)")


def recipe_vllm_pin(steps) -> str | None:
    """The vLLM version a recipe's own install step pins (``uv pip install
    vllm==0.12.0``; an optional step does not count), read word by word as a
    shell splits it; None when no step pins vLLM itself. Such a step decides
    the vLLM the commands run on: the install lines then add no vLLM of their
    own, which it would replace (a fresh user's finding: Wan2.2 installed
    vllm 0.30.0, then the recipe's step 0.12.0)."""
    for step in steps:
        if step.optional:
            continue
        try:
            words = shlex.split(str(step.command), comments=True)
        except ValueError:  # an unbalanced quote: recipe_command refuses such a step anyway
            continue
        for word in words:
            m = _VLLM_PIN.fullmatch(word)
            if m:
                return m.group(1)
    return None


NO_PIP = ("No pip install of vLLM is known here for {brand} hardware: run with Docker{image}, or build vLLM from "
          "source as https://docs.vllm.ai/en/latest/getting_started/installation/ describes.")
"""The Install step's note when the pip form has no install line for the brand
(``install`` gives pip lines for NVIDIA and AMD only, or the recipe turns pip off)."""


SOURCE_URL = "https://raw.githubusercontent.com/vllm-project/vllm/{ref}/{path}"
"""Where a file of vLLM's source tree is fetched from: the release tag, or
``main`` for the nightly build."""


def source_fetches(commands, nightly: bool = False) -> tuple[str, ...]:
    """Shell lines that put the files of vLLM's source tree the ``commands``
    name (``composer.launch.source_template``: a ``--chat-template
    examples/…`` of the Docker image's ``/vllm-workspace``) at the same
    relative path on a host install, so the argv runs unchanged from the
    directory the install ran in. The wheel holds none of them (vLLM's
    ``renderers/chat_utils/chat_template.py`` tries the path, then the wheel's
    ``transformers_utils/chat_templates/``). ``()`` when none is named."""
    paths = dict.fromkeys(p for c in commands if (p := source_template(c.argv)))
    ref = "main" if nightly else f"v{VLLM_RELEASE}"
    return tuple(f"mkdir -p {quote(p.rsplit('/', 1)[0])} && curl -fsSL -o {quote(p)} "
                 f"{quote(SOURCE_URL.format(ref=ref, path=p))}" for p in paths)


SLURM_INSTALL_NOTE = ("Run these once, on a GPU node of the cluster (e.g. srun --nodes=1 --gpus-per-node=1 --pty bash), "
                      "in the directory you submit the jobs from, on the shared file system: the jobs activate "
                      "the .venv made there, and uv's --torch-backend auto picks the PyTorch build of the driver it "
                      "finds (a login node without GPUs would get the CPU build).")
"""The SLURM form's install note (``install``)."""


def install(ctx: RecipeContext, sel, companions: list[CompanionProcess], commands=()) -> Install:
    """Install lines: ``pip`` (a shell snippet or None), ``docker`` (``docker pull``
    or None), ``notes``, ``extras`` (connector and router packages) and the
    recipe's ``dependencies`` for this brand and install form. The pip
    snippet ends with ``source_fetches(commands)``.

    The vLLM version is the highest minimum of recipe, variant and companions;
    one newer than the newest release known (``VLLM_RELEASE``) installs the
    nightly build. Omni recipes also install vLLM-Omni: its newest known
    release with the vLLM it is built on, or from source when the recipe
    needs a newer vLLM, unless a dependency of the recipe installs it."""
    brand = brand_key(ctx, sel.hardware)
    minver = min_vllm_version(ctx, sel)
    nightly = _nightly(ctx, sel.variant, sel.kv_offload)
    deps = dependencies(ctx, sel)
    inst = ctx.recipe.model.install or {}
    custom = inst.get("pip") if isinstance(inst, Mapping) else None
    custom_cmd = str(custom["command"]).strip() if isinstance(custom, Mapping) and custom.get("command") else None
    # The pip snippet is the pip form's: the recipe's pip-mode steps decide whether it installs vLLM-Omni.
    pip_steps = [d for d in ctx.recipe.dependencies if d.applies(ctx.hw(sel.hardware).brand, "pip")]
    omni = ctx.is_omni and not _installs_omni(custom_cmd) and not any(_installs_omni(d.command) for d in pip_steps)
    omni_release = omni and not (minver and version_key(minver) > version_key(OMNI_RELEASE)) and not nightly
    # A nightly wheel is numbered below the release it leads to (0.35.0.dev1 < 0.35.0): no version bound then.
    # A release is pinned to the one the commands are checked against (a recipe's minimum newer than that
    # makes ``nightly``): ``-U vllm`` would install whatever is newest the day it runs.
    # vLLM-Omni runs on the vLLM it is built on, also when a dependency step of the recipe installs it.
    omni_vllm = ctx.is_omni and not nightly and not (minver and version_key(minver) > version_key(OMNI_RELEASE))
    spec = quote(f"vllm=={OMNI_RELEASE}") if omni_release or omni_vllm else ("vllm" if nightly else quote(f"vllm=={VLLM_RELEASE}"))
    pinned = recipe_vllm_pin(pip_steps)
    pip = None
    if brand == "nvidia":
        pip = (f"uv pip install -U --pre {spec} --extra-index-url https://wheels.vllm.ai/nightly --torch-backend auto"
               if nightly else f"uv pip install {spec} --torch-backend auto")
    elif brand == "amd":
        pip = f"uv pip install {spec} --extra-index-url https://wheels.vllm.ai/rocm"
    if pip is not None and pinned:  # the recipe's own step installs vLLM: ours would be replaced by it
        pip = ""
    if pip is not None and omni:
        pip = "\n".join(x for x in (pip, f"uv pip install {quote('vllm-omni==' + OMNI_RELEASE)}" if omni_release
                                     else f"uv pip install {quote(OMNI_SOURCE)}") if x)
    if custom_cmd:
        pip = recipe_script(custom_cmd)
    if isinstance(inst, Mapping) and inst.get("pip") is False:
        pip = None
    if pip is not None and not pip.startswith("uv venv"):
        pip = "uv venv --python 3.12 && source .venv/bin/activate" + ("\n" + pip if pip else "")
    if pip:
        pip = "\n".join((pip, *source_fetches(commands, nightly)))
    image = docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, getattr(sel, "cuda", None))
    notes = [str(v["note"]) for k, v in (inst.items() if isinstance(inst, Mapping) else []) if isinstance(v, Mapping) and v.get("note")]
    if pinned and pip is not None and not custom_cmd:  # the lines above left vLLM to the recipe's step
        notes.append(f"The recipe's own install step pins vLLM {pinned}, so the lines here install no vLLM of their "
                     f"own. The commands' flags are checked against vLLM {VLLM_RELEASE}'s options; vLLM {pinned} may "
                     "not take every one of them.")
    if pip and sel.form == "slurm":
        # The jobs activate $SLURM_SUBMIT_DIR/.venv (composer.forms.slurm); a fresh user's finding: run on a
        # login node, uv's --torch-backend auto would pick the PyTorch build of a machine without GPUs.
        notes.append(SLURM_INSTALL_NOTE)
    if pip is None and sel.form == "pip":
        # Said, never left blank: the node tabs run vllm (issue 21).
        notes.append(NO_PIP.format(brand=ctx.hw(sel.hardware).brand,
                                   image=f" (the {image} image)" if image else ""))
    extras = [c.install for c in companions if c.install]
    kv = ctx.catalog.taxonomy.kv_offload.get(sel.kv_offload) if sel.kv_offload else None
    if kv is not None and kv.install:
        extras.append(_install(kv.install))
    vllm_pkgs = [x for x in ([_install(kv.install)] if kv is not None and kv.install else [])
                 + [_mooncake_install(ctx, sel)] if x]
    if sel.form == "docker" and image and vllm_pkgs:
        # The connector runs inside vLLM's process: the container needs it, not the host.
        notes.append(f"The {image} image does not include what the KV connector needs ({'; '.join(vllm_pkgs)}): "
                     f"build an image FROM {image} that runs it (with uv pip install --system) and use that image.")
    return Install(pip=pip, docker=f"docker pull {quote(image)}" if image else None, image=image, notes=tuple(notes),
                   extras=tuple(dict.fromkeys(extras)),
                   docker_reason=None if image else docker_reason(ctx, sel.hardware, sel.variant, sel.kv_offload),
                   dependencies=deps, min_vllm_version=minver, nightly=nightly)


def install_notices(ctx: RecipeContext, sel, notices) -> None:
    """Notices about what the install lines install: a minimum vLLM version
    newer than the newest release known switches to the nightly build; a
    container image the recipe pins to an older vLLM release is said."""
    minver = min_vllm_version(ctx, sel)
    image = docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, getattr(sel, "cuda", None))
    tag = re.search(r":v(\d+\.\d+(?:\.\d+)?)(?:$|-)", image or "")
    if minver and tag and sel.form == "docker" and version_key(tag.group(1)) < version_key(minver):
        notices.add("warning", "image-too-old",
                    f"The recipe's container image {image} holds vLLM {tag.group(1)}, older than the vLLM {minver} "
                    "this configuration needs; the pip install meets it.", subject="docker_image", new=minver)
    deploy = ctx.strategy(sel.strategy).deploy_type
    # (a co-located P/D plan is one node: its KV transfer stays inside it)
    if sel.form == "docker" and sel.nodes > 1 and deploy in ("pd_cluster", "multi_node"):
        notices.add("info", "docker-rdma",
                    "Across nodes NCCL (and the KV transfer of P/D) is fast only over InfiniBand or RoCE: on nodes that "
                    "have it, add --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1 to each docker run "
                    "(not in the commands: docker refuses a device the node does not have). Without them the "
                    "container falls back to TCP sockets: it starts, but runs many times slower.", subject="docker")
    if unreleased(minver):
        notices.add("info", "nightly-required",
                    f"This configuration needs vLLM {minver} or newer, which is not released yet (the newest release "
                    f"known here is {VLLM_RELEASE}), so the install lines use the nightly build.",
                    subject="min_vllm_version", new=minver)


def docker_argv(ctx: RecipeContext, sel, cmd: Command, host_network: bool) -> list[str] | None:
    """``docker run …`` for one serve command; None when no image is known.
    ``host_network``: the container must reach other hosts (multi-node, P/D)
    or a process beside it on this host (an LMCache server, a Mooncake
    master: localhost); otherwise it publishes the port it serves."""
    image = docker_image(ctx, sel.hardware, sel.variant, sel.kv_offload, getattr(sel, "cuda", None))
    brand = brand_key(ctx, sel.hardware)
    if image is None or brand is None or cmd.argv[:2] != ("vllm", "serve"):
        return None
    argv = ["docker", "run", "--rm"] + GPU_FLAGS[brand] + ["--ipc=host"]
    if host_network:
        argv += ["--network", "host"]
    else:
        port = flag_value(cmd.argv, "--port") or "8000"
        if check(port, "port") and not PLACEHOLDER_ONLY.match(port):
            return None  # no -p a recipe's text could turn into something else (validation reports it)
        argv += ["-p", f"{port}:{port}"]
    argv += HF_CACHE
    for path in mounted_files(ctx, sel, cmd):
        argv += ["-v", f"{path}:{path}:ro"]
    for k, v in cmd.env.items():
        if check(k, "k8s-ref"):  # not a variable name: never an -e the docker CLI could misread
            return None
        argv += ["-e", f"{k}={v}"]
    return argv + [image] + list(cmd.argv[2:])


PLAN_FILES = ("MOONCAKE_CONFIG_PATH",)
"""Env vars naming a file the plan itself writes on the host (the Mooncake
config companion, ``_mooncake_companions``): the Docker form mounts it."""


def mounted_files(ctx: RecipeContext, sel, cmd: Command) -> list[str]:
    """The host files the Docker form bind-mounts into the container (read-only):
    the value of an env var ``*_CONFIG_PATH`` (semantics §10) only when the
    plan writes that file itself (``PLAN_FILES``, while the KV store that writes
    it is in force) or when the recipe leaves the variable to the person running
    the command (its value is ``$`` + its own name) — never a path a recipe chose
    (nor ``$HOME``) (``/var/run/docker.sock``,
    ``/root/.ssh``). Each value is checked as a ``path`` (``composer.positions``)."""
    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    writes = set(PLAN_FILES) if store is not None and (store.mooncake_vllm_config or {}).get("template") else set()
    out = []
    for k, v in cmd.env.items():
        if not k.endswith("_CONFIG_PATH") or check(v, "path"):
            continue
        if v == f"${k}" or k in writes:  # left to the person running it ($NAME of its own name), or ours
            out.append(v)
    return out


def docker_text(argv: list[str]) -> str:
    """The docker command, one option per line like the serve command."""
    head_len = argv.index("--ipc=host") + 1
    lines = [" ".join(quote(a) for a in argv[:head_len])]
    i = head_len
    rest = argv[i:]
    image_at = next(j for j, t in enumerate(rest) if not t.startswith("-") and (j == 0 or rest[j - 1] not in ("-p", "-v", "-e", "--network")))
    j = 0
    while j < image_at:
        if rest[j] in ("-p", "-v", "-e", "--network"):
            lines.append("  " + " ".join(quote(t) for t in rest[j:j + 2]))
            j += 2
        else:
            lines.append("  " + quote(rest[j]))
            j += 1
    serve = rest[image_at:]
    lines.append("  " + " ".join(quote(t) for t in serve[:2]))
    body = command_text(["x", "y", "z"] + serve[2:]).split(" \\\n")[1:]
    return " \\\n".join(lines + body)


def companions(ctx: RecipeContext, sel) -> list[CompanionProcess]:
    """Processes to run beside vLLM: the KV option's companion (LMCache server) and
    companions of enabled features. ``{label, description, command, install}``."""
    out = []
    kv = ctx.catalog.taxonomy.kv_offload.get(sel.kv_offload) if sel.kv_offload else None
    if kv is not None and kv.companion and kv.companion.command:
        out.append(_companion(kv.companion.label or f"{kv.label} server", kv.companion.description,
                              recipe_command(kv.companion.command), _install(kv.install), "kv-server"))
    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    if store is not None and store.deploy_type == "kv_store_lb":
        out += _mooncake_companions(ctx, sel, store)
    for fid in sel.features:
        f = ctx.recipe.features.get(fid)
        if f and f.companion and f.companion.command and not ctx.feature_block_reason(fid, sel.strategy):
            out.append(_companion(f.companion.label or fid, f.companion.description, recipe_command(f.companion.command), None,
                                  "feature"))
    return out


def _companion(label: str, description: str, command: str, install: str | None, role: str) -> CompanionProcess:
    """A companion process whose ``text`` installs it first (``tool_install``);
    ``role``: one of ``composer.outputs.COMPANION_ROLES``."""
    return CompanionProcess(label, description, command, install, tool_install(install, command), role)


def _mooncake_install(ctx: RecipeContext, sel) -> str | None:
    """The Mooncake transfer engine's install line for this brand (the KV
    store's ``vllm.install``), or None."""
    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    if store is None or store.deploy_type != "kv_store_lb":
        return None
    inst = (store.vllm or {}).get("install") or {}
    line = inst.get(brand_key(ctx, sel.hardware)) if isinstance(inst, dict) else inst
    return _install(line)


def _mooncake_companions(ctx: RecipeContext, sel, store) -> list[CompanionProcess]:
    """The processes and files a Mooncake KV store needs besides vLLM (from the
    ``kv_store/<id>.yaml`` data): the master, the standalone store if any, and
    the JSON config every instance reads from ``$MOONCAKE_CONFIG_PATH``."""
    import json

    brand = brand_key(ctx, sel.hardware)
    install = ((store.vllm or {}).get("install") or {})
    install_line = install.get(brand) if isinstance(install, dict) else install
    out = []
    master = store.mooncake_master or {}
    if master.get("command"):
        out.append(_companion("Mooncake master", str(master.get("description", "")),
                              recipe_command(str(master["command"])), _install(install_line), "mooncake-master"))
    store_cfg = store.mooncake_store_config or {}
    if isinstance(store_cfg, dict) and store_cfg.get("command"):
        out.append(_companion("Mooncake store", str(store_cfg.get("description", "")),
                              recipe_command(str(store_cfg["command"])), _install(install_line), "mooncake-store"))
    cfg = store.mooncake_vllm_config or {}
    template = cfg.get("template") if isinstance(cfg, dict) else None
    if template:
        body = heredoc_body(json.dumps(template, indent=2))
        note = "\n".join("# " + comment(line) for line in str(cfg.get("note", "")).strip().splitlines())
        command = (f"{note}\n" if note else "") + (
            'export MOONCAKE_CONFIG_PATH="${MOONCAKE_CONFIG_PATH:-/etc/mooncake/mooncake_vllm_config.json}"\n'
            'mkdir -p "$(dirname "$MOONCAKE_CONFIG_PATH")"\n'
            f'cat > "$MOONCAKE_CONFIG_PATH" <<EOF\n{body}\nEOF')
        out.append(_companion("Mooncake config", "Write this file on every vLLM node before starting it.", command, None,
                              "mooncake-config"))
    return out


VENV_LINES = ("# vLLM from the Install steps' .venv in this directory, unless vllm is on PATH already",
              "if ! command -v vllm >/dev/null 2>&1 && [ -f .venv/bin/activate ]; then",
              "  set +u; source .venv/bin/activate; set -u",
              "fi")
"""What a node's script runs first when vLLM comes from the host (pip, config
files): the ``.venv`` the Install steps create (a fresh user's finding: run in
a new shell after the install, the script said "vllm: command not found")."""


def script(plan_summary: str, cmd: Command | CompanionProcess, text: str, venv: bool = False) -> str:
    """A runnable shell script for one node or companion process (``cmd``
    gives its ``label``): checks that every placeholder is set, then runs
    ``text`` (its env exports and command, or install and command); ``venv``:
    it first activates the Install steps' environment (``VENV_LINES``)."""
    assigned = set(re.findall(r"^(?:export\s+)?([A-Z][A-Z0-9_]*)=", text, re.M))  # set by the script itself
    names = sorted(set(text_placeholders(text)) - {"HOME"} - assigned)  # $NAME and ${NAME}
    lines = ["#!/usr/bin/env bash", f"# {comment(plan_summary)}", f"# {comment(cmd.label)}", "set -euo pipefail", ""]
    for name in names:
        lines.append(f': "${{{name}:?set {name} first (see the configurator page)}}"')
    if names:
        lines.append("")
    if venv:
        lines += [*VENV_LINES, ""]
    lines.append(text)
    return "\n".join(lines) + "\n"


def client_checks(ctx: RecipeContext, sel, commands: list[Command]) -> ClientChecks:
    """A curl request and a ``vllm bench serve`` line against the endpoint the
    deployment serves (router for P/D, head node for multi-node)."""
    model = ctx.model_id(sel.variant, sel.task)
    task = ctx.omni_task(sel.task) if ctx.is_omni else None
    if task is not None:
        # vLLM-Omni tasks bring their own client example (speech, video …).
        block = task.hardware_overrides.get(sel.hardware)
        curl = (block.curl if block and block.curl else None) or task.curl
        return ClientChecks(recipe_command(curl) if curl and curl.strip() else None, None, None, None)
    router = next((c for c in commands if c.role == "router"), None)
    if router is not None:
        host, port = "$ROUTER_HOST", flag_value(router.argv, "--port") or "30000"
    else:
        first = commands[0] if commands else None
        host = "$HEAD_IP" if first is not None and first.role == "head" else "localhost"
        port = (flag_value(first.argv, "--port") if first is not None else None) or "8000"
    body = ('{"model": "' + model + '", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}')
    curl = ["curl", f"http://{host}:{port}/v1/chat/completions", "-H", "Content-Type: application/json", "-d", body]
    bench = ["vllm", "bench", "serve", "--model", model, "--host", host, "--port", port, "--dataset-name", "random",
             "--random-input-len", "1024", "--random-output-len", "1024", "--num-prompts", "100", "--max-concurrency", "32"]
    return ClientChecks(" ".join(quote(t) for t in curl), " ".join(quote(t) for t in bench), tuple(curl), tuple(bench))
