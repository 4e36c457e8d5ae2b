"""What the composer returns, as immutable typed values, and its JSON form.

These classes are the plan contract in one place: ``to_json`` turns a
``Plan`` into the JSON the CLI prints (``--json``), the JSON API serves and the
page reads; its keys are the field names below, in this order. Sizes are in
decimal GB (10^9 bytes); ``util`` is a fraction of GPU memory (0-1].
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from composer.notices import Notice


@dataclass(frozen=True)
class Replaced:
    """A value a later layer replaced: the value, its layer and recipe key."""

    value: str
    layer: str
    key: str


@dataclass(frozen=True)
class FlagSource:
    """Provenance of one flag of a command: ``flag`` as written (``--x`` or
    ``--no-x``), its canonical ``name``, vLLM's one-line ``help``, the ``value``
    (None for a boolean), the layer and recipe key that set it, what it
    replaced, and ``why``: the recipe's own reason for it, its comment next to
    that key ("" when it gives none; ``RecipeContext.reason``)."""

    flag: str
    name: str
    help: str
    value: Optional[str]
    layer: str
    key: str
    replaced: tuple[Replaced, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class EnvSource:
    """Provenance of one environment variable of a command (``why`` as for ``FlagSource``)."""

    name: str
    value: str
    layer: str
    key: str
    replaced: tuple[Replaced, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class Command:
    """One process to start: ``role`` is serve | head | worker | prefill |
    decode | router; ``node_rank`` counts from 0 within its pool (``pool`` is
    prefill | decode for P/D, else None). ``argv`` and ``env`` are exact;
    ``text`` is what a person copies in the chosen form (``pip_text`` or
    ``docker_text``), ``script`` a runnable bash script for the node."""

    role: str
    node_rank: int
    pool: Optional[str]
    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    command: str
    env_text: str
    text: str
    provenance: tuple[FlagSource, ...] = ()
    env_provenance: tuple[EnvSource, ...] = ()
    install: Optional[str] = None
    pip_text: str = ""
    docker_argv: Optional[tuple[str, ...]] = None
    docker_text: Optional[str] = None
    script: str = ""


@dataclass(frozen=True)
class MemoryTerm:
    """One subtraction of vLLM's start-up memory profile, per GPU: ``name``
    (with its unit), ``gib`` and the ``source`` it follows (``composer.memory``)."""

    name: str
    gib: Optional[float]
    source: str


@dataclass(frozen=True)
class CapacityLever:
    """What a ``change`` would give: the KV tokens and the maximum concurrency
    at the max-model-len in force."""

    change: str
    kv_tokens: Optional[int]
    max_concurrency: Optional[float]


@dataclass(frozen=True)
class CapacityCheck:
    """The memory model of one deployment or pool (``scope``: deployment |
    prefill | decode): weights (with headroom) against the vendor HBM of the
    ``gpus`` that hold one replica (``share`` = weights / HBM, decimal GB), and
    the KV cache as vLLM computes it, per GPU in GiB: ``torch_gib`` ×
    ``util`` = ``requested_gib``, minus each of ``terms`` (``weights_gib``
    among them) = ``kv_gib``; ``kv_tokens`` and ``max_concurrency`` at the
    ``max_model_len`` in force, ``context_concurrency`` at the ``context`` the
    page asks for; ``log`` the lines vLLM would print; ``levers`` what would
    change it most; ``assumptions`` what the estimate rests on;
    ``world_size`` the GPUs all ranks of the deployment or pool use (the
    commands' TP × PP × DP); ``host_kv_gib_per_node`` the host memory a KV
    offload reserves per node. ``kv_gb`` is the replica's KV cache in GB;
    ``kv_tokens_per_dp_rank``: ``kv_tokens`` (and the concurrency) count one DP
    rank's cache, as vLLM logs it for DEP, each rank keeping its own sequences;
    ``log_scope`` says in words whose figures they are."""

    scope: str
    where: str
    weights_gb: Optional[float]
    hbm_gb: float
    util: float
    usable_gb: float
    fits: bool
    share: Optional[float]
    message: str
    gpus: int = 0
    kv_gb: Optional[float] = None
    kv_tokens: Optional[int] = None
    world_size: int = 0
    torch_gib: float = 0.0
    requested_gib: Optional[float] = None
    weights_gib: Optional[float] = None
    kv_gib: Optional[float] = None
    terms: tuple[MemoryTerm, ...] = ()
    max_model_len: Optional[int] = None
    max_model_len_explicit: bool = False
    max_concurrency: Optional[float] = None
    context: Optional[int] = None
    context_concurrency: Optional[float] = None
    log: tuple[str, ...] = ()
    levers: tuple[CapacityLever, ...] = ()
    assumptions: tuple[str, ...] = ()
    host_kv_gib_per_node: Optional[float] = None
    kv_tokens_per_dp_rank: bool = False
    log_scope: str = ""
    """Whose figures ``log``, ``kv_tokens``, the concurrencies and ``levers``
    are: "per DP rank", "per replica" or "" (one engine)."""
    total: str = ""
    """With several engines (``log_scope`` set): the whole deployment's or
    pool's KV cache in one sentence ("Whole decode pool: … tokens in all …"),
    which ``message`` does not repeat; else empty."""


@dataclass(frozen=True)
class CompanionProcess:
    """A process run beside vLLM (LMCache server, Mooncake master …):
    ``command`` starts it, ``install`` installs what it runs (or None);
    ``text`` is what its tab shows, Copy copies and its script runs — the
    install (in a uv environment, ``run_forms.tool_install``) then the command,
    so the tab alone gets the process running (issue 21). ``role`` says what
    it is, for tools (``COMPANION_ROLES``): the public API's KV-store
    renderings name the Mooncake master, store and config by it."""

    label: str
    description: str
    command: str
    install: Optional[str]
    text: str = ""
    role: str = ""


COMPANION_ROLES = ("kv-server", "mooncake-master", "mooncake-store", "mooncake-config", "feature")
"""``CompanionProcess.role``: a KV offload option's server (LMCache), a
Mooncake KV store's master, standalone store and config file, a feature's
companion."""


@dataclass(frozen=True)
class InstallStep:
    """One extra install step of the recipe (``dependencies[i]``): the
    ``command`` (safe to paste), its ``note``, and whether it is ``optional``."""

    command: str
    note: str
    optional: bool = False


@dataclass(frozen=True)
class Install:
    """Install lines: ``pip`` (shell snippet) or None, ``docker`` (``docker
    pull``) or None, the ``image``, recipe ``notes``, ``extras`` (connector and
    router packages), why Docker is unavailable, if it is, the recipe's
    ``dependencies`` for this brand and install form, the ``min_vllm_version``
    in force (highest of recipe, variant and companions) and whether the
    ``nightly`` build is installed."""

    pip: Optional[str]
    docker: Optional[str]
    image: Optional[str]
    notes: tuple[str, ...]
    extras: tuple[str, ...]
    docker_reason: Optional[str]
    dependencies: tuple[InstallStep, ...] = ()
    min_vllm_version: Optional[str] = None
    nightly: bool = False


@dataclass(frozen=True)
class ClientChecks:
    """A curl request and a ``vllm bench serve`` line against the endpoint."""

    curl: Optional[str]
    bench: Optional[str]
    curl_argv: Optional[tuple[str, ...]]
    bench_argv: Optional[tuple[str, ...]]


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint the commands serve: the selected ``variant`` (its id,
    ``label`` and ``description``), its ``model_id`` and ``url`` on Hugging
    Face (None for a local path)."""

    variant: str
    label: str
    description: str
    model_id: str
    url: Optional[str]


@dataclass(frozen=True)
class Manifests:
    """The Kubernetes form of a plan (``composer.k8s``): ``yaml`` is the
    multi-document YAML to ``kubectl apply`` (with ``# PARAMETER`` comments on
    the values the cluster owner chooses), ``objects`` the same documents as
    JSON data, ``file_name`` the download name ``<recipe>-<hardware>.yaml``;
    ``reason`` says why there are none (then ``yaml`` is ""); ``image`` the
    container image the pods run (pinned to a vLLM release, ``run_forms.pinned_image``);
    ``preflight`` what the cluster must have for this plan, one sentence each,
    derived from the plan (controller and version, device plugin, network,
    Secret, storage, node labels: ``k8s.preflight``); ``steps`` the shell
    commands to apply, wait for and reach the deployment, in order."""

    file_name: str
    yaml: str
    objects: tuple = ()
    reason: Optional[str] = None
    image: str = ""
    preflight: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Artifact:
    """One file an output form gives (``composer.forms``): its download
    ``file_name``, ``media_type`` and ``text``; ``command`` is the index of
    the command it runs (a node's script) or None for a file of the whole plan
    (the Kubernetes manifests); ``companion`` the index of the companion
process it runs, or None; ``note`` says how to use it."""

    file_name: str
    media_type: str
    text: str
    command: Optional[int] = None
    note: str = ""
    companion: Optional[int] = None


@dataclass(frozen=True)
class Output:
    """The plan in the selected output form: ``form`` (its ``install=`` id)
    and ``label``, its ``artifacts`` (whole-plan files first, then one script
    per command and companion), ``reason`` when the form has no whole-plan file
    here, and ``bundle``: for a plan of several scripts, one script that writes
    them all into the current directory (the page's "Download all")."""

    form: str
    label: str
    artifacts: tuple[Artifact, ...] = ()
    reason: Optional[str] = None
    bundle: Optional[Artifact] = None


@dataclass(frozen=True)
class RecipeRef:
    id: str
    title: str
    model_id: str


@dataclass(frozen=True)
class Placeholder:
    """A ``$name`` the commands leave to the person running them: what it
    means and an example value (``composer.placeholders``). ``same_as``:
    another placeholder of the plan whose value this one takes while it has
    none of its own ("" for none): a co-located P/D plan's ``DECODE_NODE_1``
    is ``PREFILL_NODE_1``'s node (``composer.plan._placeholders``)."""

    name: str
    meaning: str
    example: str = ""
    same_as: str = ""


@dataclass(frozen=True)
class Plan:
    """A composed plan. ``selection`` is the resolved choice (query parameter
    → value); ``commands`` is empty when ``status`` is ``error`` (then
    ``blocked_commands`` shows what would not work); ``url`` is the query the
    address bar shows, with ``?`` ("" for the recipe default; otherwise every
    dimension pinned, ``composer.canonical.pinned_request``), ``query`` the same
    without ``?``; ``share_url`` is the pinned query even for the default.
    ``kubernetes`` the plan's Kubernetes manifests (``Manifests``; None where
    they were not asked for: the page writes them only for ``install=k8s``);
    ``placeholders`` every ``$NAME`` the shown commands leave to the person;
    ``output`` the plan in its output form (``composer.forms``): the files
    the page's tabs, Copy and Download give."""

    recipe: RecipeRef
    selection: Mapping[str, Any]
    summary: str
    install: Install
    companions: tuple[CompanionProcess, ...]
    client: ClientChecks
    status: str
    commands: tuple[Command, ...]
    blocked_commands: tuple[Command, ...]
    notices: tuple[Notice, ...]
    capacity: tuple[CapacityCheck, ...]
    verified: bool
    verification: str
    url: str
    query: str
    share_url: str = ""
    verification_detail: str = ""  # the badge's title: what the recipe's run covers (``plan.verification``)
    checkpoint: Optional[Checkpoint] = None
    kubernetes: Optional[Manifests] = None
    placeholders: tuple[Placeholder, ...] = ()
    output: Optional[Output] = None


@dataclass(frozen=True)
class Option:
    """One choice of a page control. ``query`` is the canonical query a click
    produces; ``reason`` says why a ``disabled`` option cannot be chosen;
    ``default`` marks the recipe default's choice, ``changed`` one that differs
    from it, ``effects`` what else a click would switch. The other fields
    belong to one control: hardware (``group`` = brand, ``gpus``,
    ``gb_per_node``, ``gb_per_gpu``, ``verified``), variant (``weights_gb``),
    strategy (``deploy_type``, ``min_gpus``, ``verified``, ``orientation`` from
its file and ``recommended``: the one the recipe picks on this GPU when none
is asked for, ``resolve.recommend``); ``lost`` says, on a
chosen Advanced knob, which later layer replaced its value in the command
("Speculative decoding's --max-num-seqs 32"; issue 21), else ""; ``in_force``
names, on an Advanced knob not chosen, the layer that already sets its
flags (a fresh user read the unticked box as "off"), else ""."""

    id: str
    label: str
    description: str
    selected: bool
    disabled: bool
    reason: Optional[str]
    query: str
    default: bool = False
    changed: bool = False
    effects: str = ""
    group: Optional[str] = None
    gpus: Optional[int] = None
    gb_per_node: Optional[float] = None
    gb_per_gpu: Optional[int] = None
    verified: Optional[bool] = None
    weights_gb: Optional[float] = None
    deploy_type: Optional[str] = None
    min_gpus: Optional[int] = None
    lost: str = ""
    orientation: str = ""
    recommended: bool = False
    in_force: str = ""


_FIELDS: dict[type, tuple[str, ...]] = {}
_SCALARS = (str, int, float, bool, type(None))


def to_json(value: Any) -> Any:
    """JSON data of an output value: dataclasses become objects (fields in
    order; a ``Notice`` drops its unset data fields), tuples become arrays.
    (Dispatches on the exact type first: this runs on every click in the
    browser, where ``isinstance`` against ``typing`` aliases is slow.)"""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict:
        return {k: to_json(v) for k, v in value.items()}
    if t is tuple or t is list:
        return [to_json(v) for v in value]
    if t is Notice:
        return value.to_dict()
    names = _FIELDS.get(t)
    if names is None:
        names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(value)) if dataclasses.is_dataclass(value) else ()
    if names:
        return {n: to_json(getattr(value, n)) for n in names}
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    return value
