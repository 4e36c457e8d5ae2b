"""The recipe format as immutable, typed stdlib dataclasses: the one definition
of a recipe's types.

The format is the public vLLM recipes YAML format (``shared/docs/
upstream-recipe-semantics.md`` §1) plus our documented additions. These classes
are read everywhere: the composer works on them, pydantic validates YAML into
them and publishes their JSON Schema (``composer.buildtime.validate``, build, CLI, tests),
and the browser rebuilds them from the build's already-validated JSON with
``composer.convert`` (no pydantic there: a Pyodide memory snapshot cannot hold
pydantic-core's native extension).

The ``Annotated`` markers below are pydantic's when pydantic is installed and
inert stand-ins when it is not, so this module imports in the browser too.

Every key the composer reads is declared here; keys it does not read are
ignored by validation (display-only keys of the public corpus load unchanged).
Scalars that end up on a command line (args and env values) are normalised to
strings during validation, once: YAML ``8`` becomes ``"8"``, ``0`` stays ``"0"``
(never dropped) and ``true`` becomes ``"true"`` (upstream weakness W5).
Sizes are in decimal GB (10^9 bytes) throughout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Mapping, Optional, Union, dataclass_transform

try:  # build, CLI and tests validate with pydantic; the browser only reads the types
    from pydantic import BeforeValidator, ConfigDict, Field
except ImportError:  # pragma: no cover - exercised in Pyodide
    def BeforeValidator(func, json_schema_input_type=None):  # type: ignore[no-redef]  # noqa: N802 - mirrors pydantic's name
        return None

    def Field(*args, **kwargs):  # type: ignore[no-redef]  # noqa: N802
        return None

    ConfigDict = dict  # type: ignore[misc,assignment]


def scalar_to_str(value: Any) -> Any:
    """Turn a YAML scalar into the string the shell would see (bool → true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _args_list(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [scalar_to_str(v) for v in value]
    return value


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
"""A shell variable name: what ``export NAME=value`` accepts (POSIX)."""
MODEL_ID = re.compile(r"^/?[A-Za-z0-9._][A-Za-z0-9._\-]*(/[A-Za-z0-9._][A-Za-z0-9._\-]*)*\Z")
"""A Hugging Face model id (``org/name``, letters, digits, ``-``, ``_``, ``.``) or a
local path of such parts (``/models/x``); nothing a shell or a URL reads specially."""


def _env_map(value: Any) -> Any:
    if value is None:
        return {}
    if isinstance(value, dict):
        bad = [str(k) for k in value if not ENV_NAME.match(str(k))]
        if bad:
            raise ValueError(f"environment variable name {bad[0][:60]!r} is not a shell identifier "
                             "(letters, digits and _, not starting with a digit)")
        return {str(k): scalar_to_str(v) for k, v in value.items()}
    return value


def _model_id(value: Any) -> Any:
    if isinstance(value, str) and not (MODEL_ID.match(value) and len(value) <= 200 and ".." not in value.split("/")):
        raise ValueError(f"model id {value[:60]!r} is not a Hugging Face id or a local path "
                         "(org/name of letters, digits, '-', '_', '.')")
    return value


ModelId = Annotated[str, BeforeValidator(_model_id)]

CHOICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}\Z")
"""An id a URL carries as a value or in a list (feature, mode, variant,
Advanced option): no ``,`` (list separator), ``:`` (``fmode=feature:mode``),
space or other character a query or a shell reads specially."""


def _choice_id(value: Any) -> Any:
    if isinstance(value, str) and not CHOICE_ID.match(value):
        raise ValueError(f"id {value[:60]!r} must be letters, digits and _ . + - (at most 64), "
                         "so that a URL can carry it (',' and ':' separate values there)")
    return value


def _choice_keys(value: Any) -> Any:
    if isinstance(value, dict):
        for key in value:
            _choice_id(str(key))
    return value


ChoiceId = Annotated[str, BeforeValidator(_choice_id)]

VERSION = re.compile(r"^[0-9][0-9A-Za-z.+\-]{0,40}\Z")
"""A version number (0.11.1, 0.12.0rc1); others are a lint warning (they are quoted)."""
IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+\-]{0,200}\Z")
"""A container image reference; others are a lint warning (they are quoted)."""


def image_names(value: Any) -> list[str]:
    """The image names in a ``docker_image`` value (string or brand/CUDA map)."""
    found = [value] if isinstance(value, str) else []
    if isinstance(value, Mapping):
        for v in value.values():
            found += [v] if isinstance(v, str) else [x for x in v.values() if isinstance(x, str)] if isinstance(v, Mapping) else []
    return found


def _none_to_empty(value: Any) -> Any:
    return {} if value is None else value


def _none_to_empty_list(value: Any) -> Any:
    return () if value is None else value


Args = Annotated[tuple[str, ...], BeforeValidator(_args_list)]
"""argv tokens; YAML numbers and booleans become strings."""
Env = Annotated[Mapping[str, str], BeforeValidator(_env_map)]
"""Environment variables (name → value); values become strings."""
MAX_COUNT = 2**31 - 1
"""Largest whole number a recipe's count may be (heads, layers, TP, nodes,
context): a config.json value is int32-sized; ``10**38`` would reach the page
as a 39-digit GPU count (adversarial finding)."""
Positive = Annotated[int, Field(ge=1, le=MAX_COUNT)]
"""A whole number from 1 to ``MAX_COUNT``."""
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
"""A whole number from 0 to ``MAX_COUNT``."""
PoolNodes = Count
"""A P/D role's node count: 0 is half of one node (the public site's legacy
co-located pool, semantics §3.3 step 6; ``composer.dimensions.HALF_NODE``)."""
MAX_GPUS_PER_NODE = 1024
"""Most GPUs a taxonomy's node may have (the largest boxes have 8; NVL72
racks are described per tray): a bound, not a policy."""
MAX_GB = 1_000_000
"""Largest size in GB a recipe may give (a petabyte: far past any model's
weights; ``1e308`` would overflow what the forms derive from it)."""
GB = Annotated[float, Field(ge=0, le=MAX_GB, allow_inf_nan=False)]
"""A size in decimal GB (10^9 bytes), at most ``MAX_GB``."""

DockerImage = Union[str, Mapping[str, Union[str, Mapping[str, str]]], None]
"""A container image: a string (NVIDIA), a brand map ``{nvidia, amd, tpu, intel}``
whose NVIDIA value may be a CUDA map ``{cu129, cu130}``, or a bare CUDA map."""

# Unknown keys are ignored (the public corpus has many display-only keys);
# NaN and infinity are never meaningful sizes or ratios.
_CONFIG = ConfigDict(extra="ignore", allow_inf_nan=False)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def _frozen(cls):
    """``@dataclass(frozen=True)`` with the shared pydantic config attached."""
    cls.__pydantic_config__ = _CONFIG
    return dataclass(frozen=True)(cls)


@_frozen
class HardwareProfile:
    """One node of a hardware kind (taxonomy ``hardware_profiles.<id>``).

    ``vram_gb`` is the node's GPU memory as the vendors quote it (per-GPU
    "GB" × GPUs; for HBM nearer binary units: an H100's 80 is 79.18 GiB to
    torch), the figure the node-count rule compares recipe sizes with;
    ``gpu_count`` the GPUs per node (an NVL4 tray counts as one node of 4).
    What torch reports per GPU is ``composer.memory.torch_memory``.
    """

    brand: str
    display_name: str
    generation: Union[str, tuple[str, ...]] = ""
    description: str = ""
    gpu_count: Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE)] = 1
    vram_gb: GB = 0
    restricted: bool = False
    scalable: bool = True
    mnnvl: Optional[bool] = None
    """Whether nodes share a multi-node NVLink domain (GB200/GB300 NVL trays);
    unset: true for Grace-Blackwell profiles (display name starting "GB")."""
    torch_memory_gib: Optional[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = None
    """GPU memory torch reports per GPU (``torch.cuda.mem_get_info`` total,
    what vLLM multiplies by ``--gpu-memory-utilization``,
    ``vllm/v1/worker/utils.py:716-726``), in GiB, e.g. 79.18 for an H100 SXM;
    at most the vendor's GB per GPU (their HBM "GB" are at most GiB: torch
    never sees more than the GPU has; ``__post_init__``)."""
    torch_memory_source: str = ""
    """Where ``torch_memory_gib`` comes from (a published start-up log or
    measurement), or the rule it was derived by."""
    host_memory_gib: Optional[Annotated[float, Field(gt=0)]] = None
    """Host DRAM per node in GiB, where known (KV offload is counted against it)."""

    def __post_init__(self) -> None:
        """Refuse a ``torch_memory_gib`` above the vendor's GB per GPU
        (raises ValueError: an adversarial taxonomy's 1e300 made every
        capacity a NaN)."""
        if self.torch_memory_gib and self.vram_gb and self.torch_memory_gib > self.gb_per_gpu:
            raise ValueError(f"torch_memory_gib {self.torch_memory_gib:g} is more than the profile's "
                             f"{self.gb_per_gpu:g} GB per GPU (vram_gb / gpu_count): torch cannot see more memory "
                             f"than the GPU has")

    @property
    def has_mnnvl(self) -> bool:
        if self.mnnvl is not None:
            return self.mnnvl
        return self.brand == "NVIDIA" and self.display_name.upper().startswith("GB")

    @property
    def gen(self) -> str:
        """The generation key (first element if the YAML gives a list)."""
        g = self.generation
        if isinstance(g, tuple):
            return g[0] if g else ""
        return g

    @property
    def gb_per_gpu(self) -> float:
        return self.vram_gb / self.gpu_count



@_frozen
class Companion:
    """A process run beside vLLM (e.g. the LMCache server): shell ``command``."""

    label: str = ""
    description: str = ""
    command: str = ""


@_frozen
class KvOffloadOption:
    """A taxonomy ``kv_offload.<id>`` option: args/env appended last (seed layer order)."""

    display_name: str = ""
    label: str = ""
    order: int = 99
    description: str = ""
    group: Optional[str] = None
    requires_opt_in: bool = False
    brands: Optional[tuple[str, ...]] = None
    strategies: Optional[tuple[str, ...]] = None
    args: Args = ()
    env: Env = field(default_factory=dict)
    install: Optional[str] = None
    companion: Optional[Companion] = None


@_frozen
class Taxonomy:
    """``taxonomy.yaml``: hardware profiles and KV offload options."""

    hardware_profiles: Annotated[Mapping[str, HardwareProfile], BeforeValidator(_choice_keys)]
    kv_offload: Annotated[Mapping[str, KvOffloadOption], BeforeValidator(_none_to_empty),
                          BeforeValidator(_choice_keys)] = field(default_factory=dict)


@_frozen
class HardwareBlock:
    """``{extra_args, extra_env}`` keyed by hardware id, generation, brand or ``default``."""

    extra_args: Args = ()
    extra_env: Env = field(default_factory=dict)
    args: Args = ()
    docker_image: DockerImage = None


def _parallel_kind(value: Any) -> Any:
    """A strategy's ``kind`` must be one of ``composer.parallel.KINDS``."""
    from composer.parallel import KINDS

    if value is not None and value not in KINDS:
        raise ValueError(f"kind {str(value)[:40]!r} is not one of {', '.join(KINDS)}")
    return value


@_frozen
class RoleSpec:
    """A P/D role block of the pd_cluster strategy (or of a recipe's override)."""

    vllm_args: Args = ()
    extra_args: Args = ()
    env: Env = field(default_factory=dict)
    parallelism: Optional[str] = None
    parallel_flag: Optional[str] = None
    tp: Optional[Positive] = None
    nodes: Union[PoolNodes, Mapping[str, PoolNodes], None] = None
    hardware_overrides: Mapping[str, HardwareBlock] = field(default_factory=dict)


@_frozen
class PdConnector:
    """A KV store's P/D form (``kv_store/<id>.yaml`` ``pd.<role>``): args that
    keep NIXL through a MultiConnector."""

    args: Args = ()


@_frozen
class Strategy:
    """A serving strategy (``strategies/<id>.yaml``) or a KV-store deployment
    (``kv_store/<id>.yaml``, ``deploy_type: kv_store_lb``)."""

    name: str
    deploy_type: Literal["single_node", "multi_node", "pd_cluster", "kv_store_lb"] = "single_node"
    kind: Annotated[Optional[str], BeforeValidator(_parallel_kind)] = None
    """The parallel kind (an id of ``composer.parallel.KINDS``: tp, tep, dep,
    tp_pp, tp_dp, omni, pd, kv_store), which decides the layout, the per-node
    flags and who serves the API. Required in this project's files (the strict
    build refuses a file without it); the public corpus's files lack it, and it
    is then derived from their declarative keys (``parallel.derive_kind``) with
    a warning naming the file. After construction it is always set."""
    display_name: str = ""
    description: str = ""
    orientation: str = ""
    """What the strategy is tuned for (``latency``, ``balanced``,
    ``throughput``, ``production`` …; the public format's badge), shown on its
    option; "" where the file says nothing."""
    vllm_args: Args = ()
    parallel_flag: str = "--tensor-parallel-size"
    parallelism: Optional[str] = None
    """``parallel_flag`` and ``parallelism`` (``tp_pp`` / ``tp_dp``) are the
    public format's hints of the kind; they are read only to derive ``kind``
    where a file declares none."""
    env: Env = field(default_factory=dict)
    prefill: Optional[RoleSpec] = None
    decode: Optional[RoleSpec] = None
    router: Optional[Mapping[str, Any]] = None
    vllm: Optional[Mapping[str, Any]] = None
    label: str = ""
    order: int = 99
    # KV-store deployments only:
    pd: Mapping[str, PdConnector] = field(default_factory=dict)
    min_vllm_version: Optional[str] = None
    default_instances: Optional[Positive] = None
    mooncake_master: Optional[Mapping[str, Any]] = None
    mooncake_store_config: Optional[Mapping[str, Any]] = None
    mooncake_vllm_config: Optional[Mapping[str, Any]] = None

    def __post_init__(self) -> None:
        """Derive an undeclared ``kind``; refuse a declared one that contradicts
        ``deploy_type`` (``parallel.kind_problem``; raises ValueError)."""
        from composer.parallel import derive_kind, kind_problem

        if self.kind is None:
            fields = {"deploy_type": self.deploy_type, "parallelism": self.parallelism,
                      "parallel_flag": self.parallel_flag, "vllm_args": self.vllm_args}
            object.__setattr__(self, "kind", derive_kind(fields)[0])
            return
        problem = kind_problem(self.kind, self.deploy_type)
        if problem:
            raise ValueError(problem)


@_frozen
class FeatureMode:
    """One mode of a moded feature (``features.<id>.modes.<mode>``)."""

    label: str = ""
    description: str = ""
    args: Args = ()
    variants: Optional[tuple[str, ...]] = None
    hardware: Mapping[str, str] = field(default_factory=dict)
    hardware_overrides: Mapping[str, HardwareBlock] = field(default_factory=dict)


@_frozen
class Feature:
    """A toggle (``features.<id>``). Either ``args`` or ``modes``, never both."""

    label: str = ""
    description: str = ""
    args: Args = ()
    modes: Annotated[Optional[Mapping[str, FeatureMode]], BeforeValidator(_choice_keys)] = None
    default_mode: Optional[str] = None
    strategies: Optional[tuple[str, ...]] = None
    hardware_overrides: Mapping[str, HardwareBlock] = field(default_factory=dict)
    companion: Optional[Companion] = None


@_frozen
class Variant:
    """A checkpoint variant (``variants.<id>``).

    ``vram_minimum_gb`` is the GPU memory the weights need in GB (the recipe's
    estimate; ours are parameters × bytes per parameter × headroom, given in
    ``parameter_count_b``, ``bytes_per_param`` and ``headroom``).
    """

    precision: str = ""
    label: str = ""
    description: str = ""
    vram_minimum_gb: Optional[GB] = None
    model_id: Optional[ModelId] = None
    extra_args: Args = ()
    extra_env: Env = field(default_factory=dict)
    tp: Union[Positive, Mapping[str, Positive], None] = None
    supported_hardware: Optional[tuple[str, ...]] = None
    precision_hardware: Optional[Mapping[str, Any]] = None
    default_modes: Mapping[str, str] = field(default_factory=dict)
    hardware_overrides: Mapping[str, HardwareBlock] = field(default_factory=dict)
    docker_image: DockerImage = None
    min_vllm_version: Optional[str] = None
    nightly_required: bool = False
    parameter_count_b: Optional[Annotated[float, Field(gt=0, le=MAX_GB, allow_inf_nan=False)]] = None
    bytes_per_param: Optional[Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)]] = None
    headroom: Optional[Annotated[float, Field(ge=1.0, le=10.0)]] = None
    checkpoint_gb: Optional[GB] = None
    """The checkpoint's real size in GB (its safetensors, or vLLM's "Model
    loading took" figure): quantized checkpoints carry unquantized embeddings
    and scales, so they are larger than parameters × nominal bytes. The memory
    model uses it for the weights when given (``composer.memory``)."""


@_frozen
class StrategyOverride:
    """``strategy_overrides.<strategy>``: recipe-specific args/env for one strategy."""

    extra_args: Args = ()
    vllm_args: Args = ()
    env: Env = field(default_factory=dict)
    extra_env: Env = field(default_factory=dict)
    tp: Union[Positive, Mapping[str, Positive], None] = None
    hardware_overrides: Mapping[str, HardwareBlock] = field(default_factory=dict)
    prefill: Optional[RoleSpec] = None
    decode: Optional[RoleSpec] = None
    router: Optional[Mapping[str, Any]] = None
    pool_modes: Optional[tuple[str, ...]] = None


@_frozen
class VerifiedConfig:
    """A deployment the recipe authors validated: hardware id and strategy id."""

    hardware: str
    strategy: str


@_frozen
class Meta:
    """``meta``: what the page header and index show, and hardware verification."""

    title: str
    provider: str = ""
    description: str = ""
    tasks: tuple[str, ...] = ()
    hardware: Mapping[str, str] = field(default_factory=dict)
    default_hardware: Optional[str] = None
    verified_configs: tuple[VerifiedConfig, ...] = ()


def _hf_config(value: Any) -> Any:
    """``model.hf_config``: facts under HF ``config.json`` names
    (``composer.model_facts.config_errors``); read lazily: pydantic runs this,
    the browser never does."""
    if isinstance(value, dict):
        from composer.model_facts import config_errors

        errors = config_errors(value)
        if errors:
            raise ValueError("; ".join(errors[:3]))
    return value


HfConfig = Annotated[Optional[Mapping[str, Any]], BeforeValidator(_hf_config)]


@_frozen
class Model:
    """``model``: the checkpoint and the args every command starts from.

    ``num_attention_heads`` bounds the valid TP sizes (TP must divide it); the
    attention geometry (``num_hidden_layers`` with ``kv_lora_rank`` +
    ``qk_rope_head_dim`` for MLA, or ``num_key_value_heads`` × ``head_dim``)
    sizes the KV cache in tokens (``composer.memory.kv_tokens``);
    ``supports_dcp`` / ``flashinfer_autotune`` show the matching Advanced knobs;
    ``install`` is the public format's per-method install block (semantics §2.1).
    ``hf_config`` (ours) gives any other fact the launch rules and the memory
    model read, under the checkpoint's Hugging Face ``config.json`` key names
    (``composer.model_facts.HF_KEYS``: ``vocab_size``, ``layer_types``,
    ``sliding_window``, ``linear_attn_config`` …), copied from its config.json;
    it wins over our data (``composer/data/model_facts.json``), the direct
    fields above win over it.
    """

    model_id: ModelId
    base_args: Args = ()
    base_env: Env = field(default_factory=dict)
    num_attention_heads: Optional[Positive] = None
    min_vllm_version: Optional[str] = None
    docker_image: DockerImage = None
    architecture: str = ""
    parameter_count: Union[str, float, None] = None
    active_parameters: Union[str, float, None] = None
    context_length: Optional[Count] = None  # 0: the corpus says "none" (TTS, diffusion)
    routed_experts: Optional[Count] = None
    active_experts: Optional[Count] = None
    shared_experts: Optional[Count] = None
    weight_precision: Optional[str] = None
    activation_precision: Optional[str] = None
    num_hidden_layers: Optional[Positive] = None
    num_key_value_heads: Optional[Positive] = None
    head_dim: Optional[Positive] = None
    kv_lora_rank: Optional[Positive] = None
    qk_rope_head_dim: Optional[Positive] = None
    supports_dcp: bool = False
    flashinfer_autotune: bool = False
    nightly_required: bool = False
    install: Optional[Mapping[str, Any]] = None
    hf_config: HfConfig = None


@_frozen
class OmniTaskHardware:
    """Per-hardware refinement of an omni task."""

    vram_minimum_gb: Optional[GB] = None
    extra_args: Args = ()
    curl: Optional[str] = None


@_frozen
class OmniTask:
    """One task of a vLLM-Omni recipe (text-to-speech, text-to-video …): its own
    checkpoint, weights, extra args and client example (semantics §14)."""

    id: str
    key: Optional[str] = None
    label: str = ""
    description: str = ""
    model_id: Optional[ModelId] = None
    vram_minimum_gb: Optional[GB] = None
    extra_args: Args = ()
    endpoint: Optional[str] = None
    curl: Optional[str] = None
    hardware_overrides: Mapping[str, OmniTaskHardware] = field(default_factory=dict)

    @property
    def ident(self) -> str:
        """The task's id in queries: ``key`` when given (ids may repeat), else ``id``."""
        return self.key or self.id


def _task_from_id(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


@_frozen
class Omni:
    """``omni``: a recipe served by vLLM-Omni (``vllm serve … --omni``) on one node."""

    port: Optional[int] = None
    # A task may be given by its id alone ("t2i").
    tasks: tuple[Annotated[OmniTask, BeforeValidator(_task_from_id, json_schema_input_type=Union[str, OmniTask])], ...] = ()


@_frozen
class AdvancedOption:
    """A recipe's own Advanced knob (``advanced_options[i]``)."""

    id: ChoiceId
    label: str = ""
    description: str = ""
    args: Args = ()


def _brand_list(value: Any) -> Any:
    """``brand: NVIDIA`` or ``brand: [NVIDIA, AMD]`` → a tuple of brand names."""
    return (value,) if isinstance(value, str) else value


@_frozen
class Dependency:
    """An extra install step of a recipe (``dependencies[i]``, semantics §1.1
    and §10 "Extra-install block"): a shell ``command`` with its ``note``.

    ``brand`` limits it to hardware of those brands (taxonomy brand names such
    as ``NVIDIA``, ``AMD``; none: every brand); ``install_modes`` to the install
    forms it belongs to (``pip`` and/or ``docker``; none: ``pip`` only, as the
    public site reads it); ``optional`` marks a step the commands run without.
    The command is recipe text: it is shown through ``shell.recipe_command``."""

    command: str
    note: str = ""
    optional: bool = False
    brand: Annotated[Optional[tuple[str, ...]],
                     BeforeValidator(_brand_list, json_schema_input_type=Union[str, tuple[str, ...], None])] = None
    install_modes: Optional[tuple[Literal["pip", "docker"], ...]] = None

    def applies(self, brand: str, install: str) -> bool:
        """Whether the step is shown for hardware of ``brand`` (taxonomy brand
        name, compared without case) in install form ``install``."""
        if self.brand is not None and brand.lower() not in {b.lower() for b in self.brand}:
            return False
        return install in (self.install_modes or ("pip",))


def _default_variants() -> dict:
    return {"default": Variant()}


@_frozen
class Recipe:
    """One model recipe (``models/<org>/<repo>.yaml``)."""

    meta: Meta
    model: Model
    features: Annotated[Mapping[str, Feature], BeforeValidator(_choice_keys)] = field(default_factory=dict)
    opt_in_features: tuple[str, ...] = ()
    hardware_opt_in_features: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    variants: Annotated[Mapping[str, Variant], Field(min_length=1), BeforeValidator(_choice_keys)] = field(default_factory=_default_variants)
    compatible_strategies: tuple[str, ...] = ()
    strategy_hardware: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    default_strategy: Optional[str] = None
    strategy_min_gpus: Union[Positive, Mapping[str, Union[Positive, Mapping[str, Positive]]], None] = None
    strategy_overrides: Mapping[str, StrategyOverride] = field(default_factory=dict)
    hardware_overrides: Mapping[str, HardwareBlock] = field(default_factory=dict)
    kv_offload_support: Mapping[str, str] = field(default_factory=dict)
    kv_cache_strategy_hardware: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    advanced_options: tuple[AdvancedOption, ...] = ()
    exclusive_features: tuple[tuple[str, ...], ...] = ()
    omni: Optional[Omni] = None
    dependencies: Annotated[tuple[Dependency, ...], BeforeValidator(_none_to_empty_list)] = ()
    """Extra install steps shown with the install lines (``Dependency``)."""
    reasons: Mapping[str, str] = field(default_factory=dict)
    """Why a value is what it is, by recipe key path
    (``strategy_overrides.multi_node_tp_pp``, ``…extra_args#--flag`` for one
    flag of a list, ``…extra_env.NAME`` for one variable): the recipe's YAML
    comments next to those keys (``composer.buildtime.comments``, filled in by
    the loader) and any entry written here, which wins. Explain shows the
    nearest one for each value (``RecipeContext.reason``)."""
    guide: str = ""
    """The recipe's guide in Markdown; rendered to HTML at build time only
    (``composer.buildtime.guide``: raw HTML escaped, unsafe links refused)."""


@_frozen
class Catalog:
    """Everything a recipe is composed against: the taxonomy and the strategies
    (``strategies/*.yaml`` and ``kv_store/*.yaml``, keyed by name)."""

    taxonomy: Taxonomy
    strategies: Mapping[str, Strategy]
