"""Model facts: the numbers of a checkpoint's Hugging Face ``config.json`` that
vLLM's start-up checks and the memory model need, under HF's own key names.

Where a fact comes from, in order (``model_facts``):

1. the recipe's own ``model`` block (``composer.schema.Model``:
   ``num_attention_heads``, ``num_hidden_layers``, ``num_key_value_heads``,
   ``head_dim``, ``kv_lora_rank``, ``qk_rope_head_dim``, ``routed_experts`` as
   ``n_routed_experts``, then any ``HF_KEYS`` fact under ``model.hf_config``,
   e.g. ``vocab_size`` or ``layer_types``: the direct fields win);
2. our data, ``composer/data/model_facts.json``: one entry per Hugging Face
   model id (``aliases`` name the quantized or renamed checkpoints that share
   the architecture), each citing its ``source`` (the model's config.json on
   Hugging Face, a model card, or a public repository that vendors the
   config.json, at a stated address);
3. otherwise the fact is unknown (``None``), and each rule of
   ``composer.launch`` says which safe form it assumes.

Pure and file-free at call time (the JSON is read once, at import, through
``importlib.resources`` so it also loads from the browser's zip).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from types import MappingProxyType
from typing import Any, Mapping, Optional, TypeGuard

from composer.cache import BOUNDS, BoundedCache

DATA: dict = json.loads(resources.files("composer").joinpath("data", "model_facts.json").read_text(encoding="utf-8"))
MODELS: Mapping[str, Mapping[str, Any]] = DATA["models"]

HF_KEYS: Mapping[str, str] = MappingProxyType({
    "architectures": "list of model classes (e.g. DeepseekV3ForCausalLM)",
    "model_type": "transformers model type (e.g. deepseek_v3)",
    "hidden_size": "width of the residual stream",
    "num_hidden_layers": "decoder layers (without MTP / next-n layers)",
    "num_attention_heads": "query heads; vLLM requires TP to divide them (config/model.py:1557)",
    "num_key_value_heads": "KV heads (GQA/MQA); split over TP down to one per rank",
    "head_dim": "width of one attention head",
    "vocab_size": "vocabulary size (the sampler's width)",
    "max_position_embeddings": "context length the config declares (vLLM's derived max_model_len)",
    "rope_scaling": "RoPE scaling block; null when the config has none (vLLM scales the derived length for some types)",
    "kv_lora_rank": "MLA latent width: the KV cache holds it whole on every TP rank",
    "q_lora_rank": "MLA query low-rank width",
    "qk_rope_head_dim": "MLA rotary key width, cached next to the latent",
    "qk_nope_head_dim": "MLA non-rotary query/key width",
    "v_head_dim": "MLA value head width",
    "sliding_window": "window of the sliding-window layers, in tokens",
    "layer_types": "per-layer attention kind (full_attention / sliding_attention / linear_attention …)",
    "full_attention_interval": "hybrid models: every n-th layer is full attention, the rest linear",
    "n_routed_experts": "routed experts per MoE layer (DeepSeek / Kimi / GLM naming)",
    "num_experts": "routed experts per MoE layer (Qwen MoE naming)",
    "num_local_experts": "routed experts per MoE layer (Mixtral / gpt-oss / Llama 4 naming)",
    "n_shared_experts": "shared experts per MoE layer",
    "num_experts_per_tok": "experts each token is routed to",
    "num_nextn_predict_layers": "MTP layers shipped with the checkpoint",
    "tie_word_embeddings": "whether the LM head shares the embedding matrix",
    "moe_intermediate_size": "width of one routed expert's MLP",
    "linear_attn_config": ("Kimi Linear / Kimi K3 hybrid layout: kda_layers and full_attn_layers (1-based layer "
                           "numbers), the KDA layers' num_heads, head_dim, short_conv_kernel_size (vLLM reads these "
                           "keys: models/kimi_k3/nvidia/model.py:1517-1523, transformers_utils/configs/kimi_linear.py:160)"),
    "linear_num_key_heads": "Gated DeltaNet key heads (linear-attention layers)",
    "linear_num_value_heads": "Gated DeltaNet value heads (linear-attention layers)",
    "linear_key_head_dim": "Gated DeltaNet key head width",
    "linear_value_head_dim": "Gated DeltaNet value head width",
    "linear_conv_kernel_dim": "Gated DeltaNet short-convolution kernel (the conv state holds kernel − 1 steps)",
    "mamba_num_heads": ("Mamba-2 heads (Nemotron-H naming); vLLM requires TP to divide them "
                        "(model_executor/layers/mamba/mamba_mixer2.py:316-318)"),
    "n_groups": ("Mamba-2 B/C groups (Nemotron-H naming); TP must divide them unless there is one "
                 "(mamba_mixer2.py:320-323)"),
})
"""The Hugging Face ``config.json`` keys our data may carry, with what each
means. A key outside this list is a typo (tests/test_launch.py checks)."""

INT_KEYS = frozenset({
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
    "max_position_embeddings", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    "sliding_window", "full_attention_interval", "n_routed_experts", "num_experts", "num_local_experts",
    "n_shared_experts", "num_experts_per_tok", "num_nextn_predict_layers", "moe_intermediate_size",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim", "mamba_num_heads", "n_groups"})
"""The ``HF_KEYS`` whose value is a whole number of at least 1."""

MAX_INT = 2**31 - 1
"""The largest whole number a fact may be (config.json values are int32-sized:
the widest vocabularies and contexts are a few million)."""


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``config`` as facts under HF ``config.json`` names:
    a key outside ``HF_KEYS`` (with the closest known one), or an ``INT_KEYS``
    value that is not a whole number from 1 to ``MAX_INT``. Empty when fine."""
    import difflib

    out = []
    for key, value in config.items():
        if key not in HF_KEYS:
            near = difflib.get_close_matches(str(key), list(HF_KEYS), n=1, cutoff=0.75)
            out.append(f"{str(key)[:60]!r} is not a Hugging Face config.json key the composer reads"
                       + (f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(sorted(HF_KEYS))})"))
        elif key in INT_KEYS and not (positive_int(value) and value <= MAX_INT):
            out.append(f"{key}: {str(value)[:40]!r} is not a whole number from 1 to {MAX_INT:,}")
        elif key in _SHAPES and (why := _SHAPES[key](value)):
            out.append(f"{key}: {why}")
    return out


def _small(v: Any) -> bool:
    return positive_int(v) and v <= MAX_INT


def _rope_problem(v: Any) -> Optional[str]:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        return "must be a mapping (its config.json object) or null"
    kind = v.get("rope_type", v.get("type", "default"))
    if not isinstance(kind, str):
        return "its rope_type / type must be text"
    factor = v.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0 < factor <= 1e6):
        return f"its factor {str(factor)[:40]!r} must be a number above 0 (at most 1,000,000)"
    orig = v.get("original_max_position_embeddings")
    if orig is not None and not _small(orig):
        return "its original_max_position_embeddings must be a whole number from 1"
    return None


def _linear_attn_problem(v: Any) -> Optional[str]:
    if not isinstance(v, Mapping):
        return "must be a mapping (kda_layers, full_attn_layers, num_heads, head_dim, short_conv_kernel_size)"
    for k in ("kda_layers", "full_attn_layers"):
        if k in v and not (isinstance(v[k], list) and len(v[k]) <= MAX_LAYERS and all(_small(i) for i in v[k])):
            return f"its {k} must be a list of layer numbers from 1"
    for k in ("num_heads", "head_dim", "short_conv_kernel_size"):
        if k in v and not _small(v[k]):
            return f"its {k} must be a whole number from 1 to {MAX_INT:,}"
    return None


_SHAPES: Mapping[str, Any] = MappingProxyType({
    "architectures": lambda v: None if isinstance(v, list) and all(isinstance(a, str) for a in v) else "must be a list of class names",
    "model_type": lambda v: None if isinstance(v, str) else "must be text",
    "tie_word_embeddings": lambda v: None if isinstance(v, bool) else "must be true or false",
    "layer_types": lambda v: None if isinstance(v, list) and len(v) <= MAX_LAYERS and all(isinstance(t, str) for t in v)
    else f"must be a list of layer kinds (text), at most {MAX_LAYERS:,}",
    "rope_scaling": _rope_problem,
    "linear_attn_config": _linear_attn_problem,
})
"""Checks of the ``HF_KEYS`` that are not whole numbers: each gives why the
value cannot be read (adversarial finding: a ``rope_scaling`` of "linear", a
``model_type`` list or a KDA ``num_heads`` of 10^400 ended in a traceback), or
None."""


ENTRY_KEYS = frozenset({"source", "aliases", "config", "note"})
"""Keys of one model entry: ``source`` (where the values come from),
``aliases`` (other HF ids with the same architecture), ``config`` (HF keys),
``note`` (why a value is left out, when one is)."""

RECIPE_FIELDS = (
    ("num_attention_heads", "num_attention_heads"),
    ("num_hidden_layers", "num_hidden_layers"),
    ("num_key_value_heads", "num_key_value_heads"),
    ("head_dim", "head_dim"),
    ("kv_lora_rank", "kv_lora_rank"),
    ("qk_rope_head_dim", "qk_rope_head_dim"),
    ("routed_experts", "n_routed_experts"),
)
"""Recipe ``model.<field>`` → HF key (the recipe format's names are HF's, but
for ``routed_experts``)."""

EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")

_ONE_FACT = (frozenset({"layer_types", "linear_attn_config", "full_attention_interval"}), frozenset(EXPERT_KEYS))
"""Keys that state one fact in several ways (the layer layout; the routed
experts under each family's name): a recipe's ``hf_config`` giving one of a
group replaces our data's others, which would otherwise win by precedence
(adversarial finding: a recipe's ``layer_types`` left the data's
``linear_attn_config`` in force)."""

MLA_MODEL_TYPES = frozenset({
    "axk1", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots3_note", "deepseek_mtp",
    "k3_dspark", "glm5_next", "glm5_next_text", "glm_moe_dsa", "glm4_moe_lite", "glm4_moe_lite_mtp", "kimi_k2",
    "kimi_linear", "longcat_flash", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "bailing_hybrid", "bailing_hybrid_mtp",
    "bailing_hybrid_v3_mtp", "hy_v4", "hy_v4_mtp"})
"""Model types vLLM serves with multi-head latent attention when the config
has a ``kv_lora_rank`` (``vllm/transformers_utils/model_arch_config_convertor.py:294-327``)."""


def _alias_index() -> dict[str, str]:
    out: dict[str, str] = {}
    for mid, entry in MODELS.items():
        out[mid.lower()] = mid
        for alias in entry.get("aliases", ()):
            out.setdefault(alias.lower(), mid)
    return out


_ALIASES = _alias_index()


def data_entry(model_id: str) -> tuple[str, Mapping[str, Any]] | None:
    """``(entry id, entry)`` of our data for a Hugging Face model id (exact id
    or one of an entry's ``aliases``, case-insensitive), or None."""
    key = _ALIASES.get((model_id or "").lower())
    return (key, MODELS[key]) if key else None


MAX_LAYERS = 4096
"""The most decoder layers a config may give and still be read (the largest
models have a few hundred): past it the layout is unknown, so a hostile recipe
cannot make the KV geometry's per-layer work unbounded."""


def positive_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


@dataclass(frozen=True)
class ModelFacts:
    """What is known of one checkpoint, under HF ``config.json`` names.

    ``values`` maps HF key → value (only known facts); ``origin`` maps HF key →
    where it came from (``recipe`` or ``data:<entry id>``); ``source`` is the
    data entry's citation (or ""); ``architecture`` the recipe's ``dense`` /
    ``moe`` (or ""), ``context_length`` the recipe's declared context (tokens,
    or None), used only where ``max_position_embeddings`` is unknown.
    """

    model_id: str
    values: Mapping[str, Any] = field(default_factory=dict)
    origin: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    architecture: str = ""
    context_length: Optional[int] = None

    def get(self, key: str, default=None):
        """The fact ``key`` (an HF config.json name), or ``default``."""
        return self.values.get(key, default)

    def known(self, key: str) -> bool:
        return key in self.values

    @property
    def num_attention_heads(self) -> Optional[int]:
        return self.values.get("num_attention_heads")

    @property
    def mamba_heads_and_groups(self) -> Optional[tuple[int, int]]:
        """``(mamba_num_heads, n_groups)`` of a Mamba-2 hybrid (Nemotron-H),
        None unless both are known whole numbers."""
        h, g = self.values.get("mamba_num_heads"), self.values.get("n_groups")
        return (h, g) if positive_int(h) and positive_int(g) else None

    @property
    def num_key_value_heads(self) -> Optional[int]:
        """KV heads; for MLA (``kv_lora_rank``) vLLM caches one latent, so this
        is not used there."""
        return self.values.get("num_key_value_heads")

    @property
    def use_mla(self) -> Optional[bool]:
        """Whether vLLM serves the model with multi-head latent attention: True
        with a ``kv_lora_rank``; None for an MLA model type whose rank is not
        known; False when the KV heads are known and the model type is not an
        MLA one (``MLA_MODEL_TYPES``); else None."""
        if self.values.get("kv_lora_rank"):
            return True
        if self.values.get("model_type") in MLA_MODEL_TYPES:
            return None
        if self.values.get("num_key_value_heads"):
            return False
        return None

    @property
    def routed_experts(self) -> Optional[int]:
        """Routed experts per MoE layer (any HF naming, ``EXPERT_KEYS``), or
        None when unknown or not a positive integer."""
        for k in EXPERT_KEYS:
            v = self.values.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return None

    @property
    def is_moe(self) -> Optional[bool]:
        """True when the model has routed experts (any HF naming, or the recipe
        says ``architecture: moe``), False when it says ``dense`` or a config
        is known without experts, None when unknown."""
        for k in EXPERT_KEYS:
            if self.values.get(k):
                return True
        if self.architecture == "moe":
            return True
        if self.architecture == "dense":
            return False
        if any(o.startswith("data:") for o in self.origin.values()):
            return False
        return None

    @property
    def attention_head_size(self) -> Optional[int]:
        """The head size vLLM's attention backends are asked about
        (``validate_configuration``'s ``head_size``): ``kv_lora_rank`` +
        ``qk_rope_head_dim`` for MLA (``model_executor/layers/attention/
        mla_attention.py:480``), else the config's own ``head_dim``; None when
        not stated (never derived from hidden_size / heads, which a config
        that sets head_dim apart would contradict)."""
        rank, rope = self.values.get("kv_lora_rank"), self.values.get("qk_rope_head_dim")
        if self.use_mla:
            return rank + rope if positive_int(rank) and isinstance(rope, int) and rope >= 0 else None
        hd = self.values.get("head_dim")
        return hd if positive_int(hd) and self.use_mla is False else None

    def head_dim(self) -> Optional[int]:
        """``head_dim``, else ``hidden_size`` / ``num_attention_heads`` (HF's
        default when the config leaves it out), else None."""
        hd = self.values.get("head_dim")
        if hd:
            return hd
        h, n = self.values.get("hidden_size"), self.values.get("num_attention_heads")
        return h // n if h and n else None

    def layer_kinds(self) -> Optional[dict[str, int]]:
        """Decoder layers by KV kind: ``{"full": n, "sliding": n, "linear": n}``,
        the counts of ``layer_sequence``; None without it."""
        seq = self.layer_sequence()
        if seq is None:
            return None
        return {k: seq.count(k) for k in ("full", "sliding", "linear")}

    def layer_sequence(self) -> Optional[tuple[str, ...]]:
        """The KV kind of every decoder layer in order (``_layer_sequence``,
        computed once per value: the capacity model asks for it per option)."""
        return self._layer_sequence

    @cached_property
    def derived(self) -> BoundedCache:
        """Values computed from the facts, by key (``composer.memory``'s KV
        geometries by TP/PP/dtype/block: a handful per page), at most
        ``BOUNDS["model-derived"]`` (pasted commands can ask for any TP). The
        facts are frozen, so an answer never goes stale."""
        return BoundedCache(BOUNDS["model-derived"])

    @property
    def sliding_window(self) -> Optional[int]:
        """``sliding_window`` when it is a positive integer, else None."""
        v = self.values.get("sliding_window")
        return v if positive_int(v) else None

    @cached_property
    def _layer_sequence(self) -> Optional[tuple[str, ...]]:
        """The KV kind of every decoder layer in order (``"full"``,
        ``"sliding"`` or ``"linear"``): from ``linear_attn_config`` (Kimi Linear
        / K3: its ``kda_layers`` are linear, the rest MLA), else from
        ``layer_types``, else ``full_attention_interval`` (layer i full when
        i + 1 is a multiple of it, the rest linear, as Qwen3-Next's config
        derives its ``layer_types``), else all full (or all sliding when the
        config gives a ``sliding_window`` and no ``layer_types``: vLLM then
        treats every layer as sliding, ``engine/arg_utils.py:2288-2294``); None
        without ``num_hidden_layers`` (or a layout that does not add up). The
        order matters under PP: ``composer.memory.kv_geometry_of`` splits it
        into stages as vLLM's ``get_pp_indices`` does."""
        n = self.values.get("num_hidden_layers")
        if not positive_int(n) or n > MAX_LAYERS:
            return None  # vLLM splits stages by num_hidden_layers; a count past any model's is unknown, never work
        la = self.values.get("linear_attn_config")
        if la is not None:
            # Kimi Linear / K3: layer i (0-based) is KDA when i + 1 is in kda_layers
            # (vLLM transformers_utils/configs/kimi_linear.py:160), else MLA. A layout
            # that does not add up (not lists of layer numbers 1..n, more KDA layers
            # than layers) is unknown, never a negative count.
            kda, full = (la.get("kda_layers"), la.get("full_attn_layers")) if isinstance(la, Mapping) else (None, None)
            if not (isinstance(kda, list) and isinstance(full, list)):
                return None
            if not (all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in kda + full)
                    and len(set(kda)) == len(kda) and not set(kda) & set(full)):
                return None
            linear = set(kda)
            return tuple("linear" if i + 1 in linear else "full" for i in range(n))
        types = self.values.get("layer_types")
        if types:
            if not isinstance(types, (list, tuple)) or len(types) < n or not all(isinstance(t, str) for t in types):
                return None  # not one kind per layer: unknown (vLLM reads layer_types[i] for each of the n layers)
            out = []
            for t in types[:n]:
                if "sliding" in t or t == "local_attention" or t == "chunked_attention":
                    out.append("sliding")
                elif t in ("full_attention", "attention", "global_attention"):
                    out.append("full")
                else:
                    out.append("linear")
            return tuple(out)
        interval = self.values.get("full_attention_interval")
        if positive_int(interval):
            return tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(n))
        if self.sliding_window:
            return ("sliding",) * n
        return ("full",) * n

    def derived_max_model_len(self) -> Optional[int]:
        """vLLM's derived maximum length (``config/model.py:2545-2652``):
        ``max_position_embeddings``, times the RoPE ``factor`` for scaling types
        vLLM scales (not su / longrope / llama3 / yarn / deepseek_yarn /
        deepseek_llama_scaling, whose length is already scaled); None unless
        both the length and the ``rope_scaling`` entry (null for none) are
        known. (vLLM also caps it at the tokenizer's ``model_max_length``,
        which we do not know.)"""
        mpe = self.values.get("max_position_embeddings")
        if not mpe or "rope_scaling" not in self.values:
            return None
        rs = self.values.get("rope_scaling") or {}
        kind = rs.get("rope_type") or rs.get("type") or "default"
        if kind in ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling", "default"):
            return int(mpe)
        return int(mpe * (rs.get("factor") or 1.0))

    def to_dict(self) -> dict:
        return {"model_id": self.model_id, "values": dict(self.values), "origin": dict(self.origin),
                "source": self.source}


def facts_for(model_id: str, recipe_model=None) -> ModelFacts:
    """Facts for ``model_id``: the recipe's ``model`` block values first
    (``recipe_model``: a ``composer.schema.Model`` or None), then our data for
    that id (or its aliases), else unknown. Never raises."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    source = ""
    found = data_entry(model_id)
    if found is None and recipe_model is not None:
        found = data_entry(recipe_model.model_id)
    if found is not None:
        eid, entry = found
        source = entry.get("source", "")
        for k, v in (entry.get("config") or {}).items():
            values[k] = v
            origin[k] = f"data:{eid}"
    if recipe_model is not None:
        given = dict(getattr(recipe_model, "hf_config", None) or {})
        for group in _ONE_FACT:  # the recipe's layout (or experts) replaces our data's whole, never a mix
            if given.keys() & group:
                for key in group - given.keys():
                    if origin.get(key, "").startswith("data:"):
                        del values[key], origin[key]
        for key, v in given.items():
            values[key] = v
            origin[key] = "recipe"
        for attr, key in RECIPE_FIELDS:
            v = getattr(recipe_model, attr, None)
            if v:
                values[key] = v
                origin[key] = "recipe"
    return ModelFacts(
        model_id=model_id,
        values=MappingProxyType(values),
        origin=MappingProxyType(origin),
        source=source,
        architecture=(getattr(recipe_model, "architecture", "") or "") if recipe_model is not None else "",
        context_length=getattr(recipe_model, "context_length", None) if recipe_model is not None else None,
    )


def model_facts(ctx, variant_id: str | None = None) -> ModelFacts:
    """The facts of a recipe's checkpoint (``ctx``: a ``RecipeContext``; the
    variant's ``model_id`` when given, else the recipe's): recipe values first,
    then our data (looked up by the variant's id, then the recipe's), else
    unknown. A frozen value, made once per context and model id."""
    model = ctx.recipe.model
    mid = ctx.model_id(variant_id) if variant_id and variant_id in ctx.recipe.variants else model.model_id
    return ctx.cache("memo:model_facts").get(mid, lambda: facts_for(mid, model))
