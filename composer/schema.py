"""Pydantic models of the recipe format (the public vLLM recipes YAML format).

The format is described in ``shared/docs/upstream-recipe-semantics.md`` §1; these
models type the keys the composer reads and keep every other key (``extra="allow"``),
so any recipe of the public corpus loads unchanged.

Scalars that end up on a command line (args and env values) are normalised to
strings here, once: YAML ``8`` becomes ``"8"``, ``0`` stays ``"0"`` (never dropped)
and ``true`` becomes ``"true"`` (upstream weakness W5).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


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
    if isinstance(value, list):
        return [scalar_to_str(v) for v in value]
    return value


def _env_map(value: Any) -> Any:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): scalar_to_str(v) for k, v in value.items()}
    return value


Args = Annotated[list[str], BeforeValidator(_args_list)]
"""A list of argv tokens; YAML numbers and booleans become strings."""
Env = Annotated[dict[str, str], BeforeValidator(_env_map)]
"""Environment variables; values become strings."""


class Open(BaseModel):
    """Base of every model: unknown keys are kept (display-only keys of the corpus)."""

    # NaN and infinity are never meaningful sizes or ratios.
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)


DockerImage = Union[str, dict[str, Union[str, dict[str, str]]], None]
"""A container image: a string (NVIDIA), a brand map ``{nvidia, amd, tpu, intel}``
whose NVIDIA value may be a CUDA map ``{cu129, cu130}``, or a bare CUDA map."""


class HardwareProfile(Open):
    """One node of a hardware kind (taxonomy ``hardware_profiles.<id>``).

    ``vram_gb`` is the node's total GPU memory in decimal GB (10^9 bytes).
    """

    brand: str
    generation: Union[str, list[str]] = ""
    display_name: str
    description: str = ""
    gpu_count: int = Field(1, ge=1)
    vram_gb: float = Field(0, ge=0)
    restricted: bool = False
    scalable: bool = True

    @property
    def gen(self) -> str:
        """The generation key (first element if the YAML gives a list)."""
        g = self.generation
        if isinstance(g, list):
            return g[0] if g else ""
        return g

    @property
    def gb_per_gpu(self) -> float:
        return self.vram_gb / self.gpu_count


class Companion(Open):
    label: str = ""
    description: str = ""
    command: str = ""


class KvOffloadOption(Open):
    """A taxonomy ``kv_offload.<id>`` option: args/env appended last (seed layer order)."""

    display_name: str = ""
    label: str = ""
    order: int = 99
    description: str = ""
    group: str | None = None
    requires_opt_in: bool = False
    brands: list[str] | None = None
    strategies: list[str] | None = None
    args: Args = []
    env: Env = {}
    install: str | None = None
    companion: Companion | None = None


class Taxonomy(Open):
    hardware_profiles: dict[str, HardwareProfile]
    kv_offload: dict[str, KvOffloadOption] = {}


class RoleSpec(Open):
    """A P/D role block of the pd_cluster strategy (or of a recipe's override)."""

    vllm_args: Args = []
    extra_args: Args = []
    env: Env = {}
    parallelism: str | None = None
    parallel_flag: str | None = None
    tp: int | None = None
    nodes: Union[int, dict[str, int], None] = None
    hardware_overrides: dict[str, "HardwareBlock"] = {}


class Strategy(Open):
    """A serving strategy (``strategies/<id>.yaml``) or KV-store deployment."""

    name: str
    deploy_type: Literal["single_node", "multi_node", "pd_cluster", "kv_store_lb"] = "single_node"
    display_name: str = ""
    description: str = ""
    vllm_args: Args = []
    parallel_flag: str = "--tensor-parallel-size"
    parallelism: str | None = None
    env: Env = {}
    prefill: RoleSpec | None = None
    decode: RoleSpec | None = None
    router: dict[str, Any] | None = None
    vllm: dict[str, Any] | None = None
    label: str = ""
    order: int = 99


class HardwareBlock(Open):
    """``{extra_args, extra_env}`` keyed by generation, brand or hardware id."""

    extra_args: Args = []
    extra_env: Env = {}
    args: Args = []
    docker_image: DockerImage = None


RoleSpec.model_rebuild()


class FeatureMode(Open):
    label: str = ""
    description: str = ""
    args: Args = []
    variants: list[str] | None = None
    hardware: dict[str, str] = {}
    hardware_overrides: dict[str, HardwareBlock] = {}


class Feature(Open):
    """A toggle (``features.<id>``). Either ``args`` or ``modes``, never both."""

    label: str = ""
    description: str = ""
    args: Args = []
    modes: dict[str, FeatureMode] | None = None
    default_mode: str | None = None
    strategies: list[str] | None = None
    hardware_overrides: dict[str, HardwareBlock] = {}
    companion: Companion | None = None


class Variant(Open):
    """A checkpoint variant (``variants.<id>``); ``vram_minimum_gb`` is the weights in GB."""

    precision: str = ""
    label: str = ""
    description: str = ""
    vram_minimum_gb: float | None = None
    model_id: str | None = None
    extra_args: Args = []
    extra_env: Env = {}
    tp: Union[int, dict[str, int], None] = None
    supported_hardware: list[str] | None = None
    precision_hardware: dict[str, Any] | None = None
    default_modes: dict[str, str] = {}
    hardware_overrides: dict[str, HardwareBlock] = {}
    docker_image: DockerImage = None


class StrategyOverride(Open):
    """``strategy_overrides.<strategy>``: recipe-specific args/env for one strategy."""

    extra_args: Args = []
    vllm_args: Args = []
    env: Env = {}
    extra_env: Env = {}
    tp: Union[int, dict[str, int], None] = None
    hardware_overrides: dict[str, HardwareBlock] = {}
    prefill: RoleSpec | None = None
    decode: RoleSpec | None = None
    router: dict[str, Any] | None = None
    pool_modes: list[str] | None = None


class VerifiedConfig(Open):
    """A deployment the recipe authors validated: hardware id and strategy id."""

    hardware: str
    strategy: str


class Meta(Open):
    title: str
    provider: str = ""
    description: str = ""
    tasks: list[str] = []
    hardware: dict[str, str] = {}
    default_hardware: str | None = None
    verified_configs: list[VerifiedConfig] = []


class Model(Open):
    model_id: str
    base_args: Args = []
    base_env: Env = {}
    num_attention_heads: int | None = Field(None, ge=1)
    min_vllm_version: str | None = None
    docker_image: DockerImage = None


class OmniTaskHardware(Open):
    """Per-hardware refinement of an omni task."""

    vram_minimum_gb: float | None = None
    extra_args: Args = []
    curl: str | None = None


class OmniTask(Open):
    """One task of a vLLM-Omni recipe (text-to-speech, text-to-video …): its own
    checkpoint, weights, extra args and client example (semantics §14)."""

    id: str
    key: str | None = None
    label: str = ""
    description: str = ""
    model_id: str | None = None
    vram_minimum_gb: float | None = None
    extra_args: Args = []
    endpoint: str | None = None
    curl: str | None = None
    hardware_overrides: dict[str, OmniTaskHardware] = {}

    @property
    def ident(self) -> str:
        """The task's id in queries: ``key`` when given (ids may repeat), else ``id``."""
        return self.key or self.id


class Omni(Open):
    """``omni``: a recipe served by vLLM-Omni (``vllm serve … --omni``) on one node."""

    port: int | None = None
    # A task may be given by its id alone ("t2i").
    tasks: list[Annotated[OmniTask, BeforeValidator(lambda v: {"id": v} if isinstance(v, str) else v,
                                                    json_schema_input_type=Union[str, OmniTask])]] = []


class AdvancedOption(Open):
    id: str
    label: str = ""
    description: str = ""
    args: Args = []


class Recipe(Open):
    """One model recipe (``models/<org>/<repo>.yaml``)."""

    meta: Meta
    model: Model
    features: dict[str, Feature] = {}
    opt_in_features: list[str] = []
    hardware_opt_in_features: dict[str, list[str]] = {}
    variants: dict[str, Variant] = Field(default_factory=lambda: {"default": Variant()}, min_length=1)
    compatible_strategies: list[str] = []
    strategy_hardware: dict[str, dict[str, str]] = {}
    default_strategy: str | None = None
    strategy_min_gpus: Union[int, dict[str, Union[int, dict[str, int]]], None] = None
    strategy_overrides: dict[str, StrategyOverride] = {}
    hardware_overrides: dict[str, HardwareBlock] = {}
    kv_offload_support: dict[str, str] = {}
    kv_cache_strategy_hardware: dict[str, dict[str, str]] = {}
    hardware_notes: dict[str, Any] = {}
    advanced_options: list[AdvancedOption] = []
    exclusive_features: list[list[str]] = []
    omni: Omni | None = None


class Catalog(BaseModel):
    """Everything a recipe is composed against: taxonomy, strategies, KV stores."""

    model_config = ConfigDict(frozen=True)

    taxonomy: Taxonomy
    strategies: dict[str, Strategy]
