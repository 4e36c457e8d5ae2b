"""Read-only questions about one recipe against the catalogue.

Everything the resolver and the composer ask of the recipe data lives here, so
the rules (which hardware is offered, which strategy is supported where, floors,
default features, weights) have one home each, with their source named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from composer.cache import BOUNDS, BoundedCache
from composer.lookup import hw_value, lookup_value
from composer.memory import recipe_size_text, weights_fit
from composer.schema import Catalog, HardwareProfile, Recipe, Strategy, Variant

OMNI_STRATEGY = Strategy(
    name="omni", deploy_type="single_node", kind="omni", display_name="vLLM-Omni (one node)",
    description="Served by vLLM-Omni on one node (vllm serve … --omni); the recipe's base args carry its parallelism.",
    vllm_args=("--omni",))
"""The one deployment of omni recipes (semantics §14), which list no strategies."""

MAX_NODES = 16
"""Largest node count offered per deployment or pool (seed: P/D pools 1 to 16)."""
HALF_NODE_BRANDS = ("NVIDIA", "AMD")
"""Brands whose GPUs a process is given by ``CUDA_VISIBLE_DEVICES`` (vLLM
0.33 reads it on ROCm too, ``platforms/rocm.py``): where a P/D pool may run on
half a node (``dimensions.HALF_NODE``)."""

# Built-in Advanced knobs (semantics §8). ``when`` names the condition that
# shows them; a hidden knob is never emitted (upstream W29).
BUILTIN_ADVANCED = (
    ("max_batched_8k", "max-num-batched-tokens 8192", ["--max-num-batched-tokens", "8192"], None,
     "Largest number of tokens scheduled per step; lower favours ITL, higher favours prefill throughput (TTFT)."),
    ("max_num_seqs_256", "max-num-seqs 256", ["--max-num-seqs", "256"], None,
     "Most sequences decoded concurrently: more concurrency and throughput, more KV cache."),
    ("gpu_mem_095", "gpu-memory-utilization 0.95", ["--gpu-memory-utilization", "0.95"], None,
     "Share of each GPU's memory vLLM may use for weights, activations and KV cache."),
    ("max_model_len_auto", "max-model-len auto", ["--max-model-len", "auto"], None,
     "Let vLLM pick the longest context the free KV cache can hold, instead of a fixed limit."),
    ("kv_fp8", "kv-cache-dtype fp8", ["--kv-cache-dtype", "fp8"], None,
     "Store the KV cache in FP8: twice the tokens of a BF16 cache, at a small accuracy cost."),
    ("dcp_8", "decode-context-parallel-size 8", ["--decode-context-parallel-size", "8"], "supports_dcp",
     "Shard the decode KV cache across the tensor-parallel ranks."),
    ("no_flashinfer_autotune", "no FlashInfer autotune", ["--no-enable-flashinfer-autotune"], "flashinfer_autotune",
     "Skip FlashInfer kernel autotuning at start-up."),
    ("ep_weight_filter", "EP weight filter", ["--enable-ep-weight-filter"], "ep",
     "Load only the experts each expert-parallel rank owns."),
)


OMNI_NO_BUILTINS = (
    "vLLM-Omni gives each stage of a model its own engine settings in its deploy config (e.g. a text-to-speech "
    "model's two stages sharing GPU 0 with gpu_memory_utilization 0.65 and 0.15: vllm_omni/deploy/breeze_tts.yaml:19-51 "
    "in vLLM-Omni 0.30.0); a flag on vllm serve "
    "replaces that value for every stage that owns it (vllm_omni/config/omni_config.py:384-398), and "
    "diffusion stages drop --kv-cache-dtype (omni_config.py:103, 391-396). Only the recipe's own "
    "Advanced options apply.")
"""Why a vLLM-Omni recipe shows none of the built-in Advanced knobs (vLLM-Omni 0.30.0)."""


@dataclass(frozen=True)
class AdvancedKnob:
    id: str
    label: str
    args: list[str]
    description: str
    key: str
    """Recipe key path of the knob, for provenance."""


def _memo(method):
    """Cache a RecipeContext method per arguments (the recipe and catalogue are
    immutable, and the resolver asks the same questions many times per plan)."""
    name = "memo:" + method.__name__

    def wrapper(self, *args):
        return self.cache(name).get(args, lambda: method(self, *args))

    wrapper.__doc__ = method.__doc__
    wrapper.__name__ = method.__name__
    return wrapper


class RecipeContext:
    """A recipe bound to its catalogue, with derived facts cached.

    ``recipe_id`` is ``<org>/<repo>`` (the recipe's path under ``models/``).
    """

    def __init__(self, recipe_id: str, recipe: Recipe, catalog: Catalog) -> None:
        self.recipe_id = recipe_id
        self.recipe = recipe
        self.catalog = catalog
        self._caches: dict[str, BoundedCache] = {}

    def cache(self, region: str) -> BoundedCache:
        """The context's one cache: region ``region`` (``composer.cache.BOUNDS``
        gives its bound; ``memo:<method>`` regions share the ``memo`` bound).
        Raises ``KeyError`` for a region with no declared bound."""
        found = self._caches.get(region)
        if found is None:
            found = self._caches[region] = BoundedCache(BOUNDS[region.split(":", 1)[0]])
        return found

    # ----- hardware -------------------------------------------------------
    def hw(self, hw_id: str) -> HardwareProfile:
        return self.catalog.taxonomy.hardware_profiles[hw_id]

    @cached_property
    def listed_hardware(self) -> list[str]:
        """Hardware shown on the page: every taxonomy profile that is not
        ``restricted``, plus restricted ones the recipe declares in ``meta.hardware``
        (semantics §1.4; upstream W28 is avoided by using this list for URLs too).
        NVIDIA first, then AMD, then other brands, each in taxonomy order."""
        declared = self.recipe.meta.hardware
        profiles = self.catalog.taxonomy.hardware_profiles
        ids = [h for h, p in profiles.items() if not p.restricted or h in declared]
        rank = {"NVIDIA": 0, "AMD": 1}
        return sorted(ids, key=lambda h: (rank.get(profiles[h].brand, 9), profiles[h].brand))

    @_memo
    def hardware_block_reason(self, hw_id: str, variant_id: str) -> str | None:
        """Why ``hw_id`` cannot run the variant, or None (meta.hardware unsupported,
        variant allowlist, precision constraint; semantics §2.2). The reason
        does not name the GPU, so the page lists GPUs that share one reason on
        one line; messages about one GPU prefix its name."""
        hw = self.hw(hw_id)
        if self.recipe.meta.hardware.get(hw_id) == "unsupported":
            return "The recipe marks it unsupported."
        variant = self.variant(variant_id)
        if variant.supported_hardware and hw_id not in variant.supported_hardware:
            return f"The {self.variant_label(variant_id)} checkpoint is not offered there."
        brand, gens = self.precision_constraint(variant_id)
        if brand or gens:
            if (brand and hw.brand != brand) or (gens and hw.gen not in gens):
                need = " ".join(x for x in [brand, "/".join(gens)] if x)
                return f"{variant.precision.upper()} weights need {need.replace('blackwell', 'Blackwell')} GPUs."
        if not hw.scalable:
            weights = self.weights_gb(variant_id)
            if not weights_fit(weights, hw.vram_gb):
                return f"It cannot be clustered, and one holds less than {recipe_size_text(self, variant_id)}."
        return None

    def is_verified(self, hw_id: str) -> bool:
        return self.recipe.meta.hardware.get(hw_id) == "verified"

    def precision_constraint(self, variant_id: str) -> tuple[str | None, tuple[str, ...]]:
        """``(brand, generations)`` the variant's precision needs: its
        ``precision_hardware``, else the built-in rule that NVFP4/FP4 weights need
        NVIDIA Blackwell (semantics §2.2); ``(None, ())`` when unconstrained."""
        variant = self.variant(variant_id)
        constraint = variant.precision_hardware
        if constraint is None and variant.precision.lower() in ("nvfp4", "fp4"):
            constraint = {"brand": "NVIDIA", "generation": "blackwell"}
        if not constraint:
            return None, ()
        gen = constraint.get("generation")
        gens = tuple(gen) if isinstance(gen, list) else (gen,) if gen else ()
        return constraint.get("brand"), gens

    @_memo
    def default_hardware(self, variant_id: str) -> tuple[str, str | None]:
        """``(hw_id, problem)``: the public site's rule (semantics §2.2), so a
        corpus recipe lands on the hardware it lands on there. Candidates are the
        listed profiles that can run the variant (precision, allowlist, not
        unsupported); then in order: ``meta.default_hardware`` (seed: honoured),
        B200 then GB200 when the precision needs Blackwell, H200, else the first
        candidate by brand (NVIDIA, AMD, others) and id. ``problem`` names a
        ``default_hardware`` that cannot be used (upstream W41 fell through
        silently)."""
        ok = [h for h in self.listed_hardware if self.hardware_block_reason(h, variant_id) is None]
        problem = None
        want = self.recipe.meta.default_hardware
        if want:
            if want in ok:
                return want, None
            profiles = self.catalog.taxonomy.hardware_profiles
            problem = (f"The recipe's default GPU, {profiles[want].display_name}, cannot run the "
                       f"{self.variant_label(variant_id)} checkpoint." if want in profiles else
                       f"The recipe's default GPU {want!r} is not one this page offers.")
        # Unlike the public site, never land where no offered strategy can hold
        # the weights (it lands there and shows a plan that cannot start).
        ok = [h for h in ok if self.can_hold(h, variant_id)] or ok
        _, gens = self.precision_constraint(variant_id)
        for cand in (("b200", "gb200") if "blackwell" in gens else ()) + ("h200",):
            if cand in ok:
                return cand, problem
        if ok:
            rank = {"NVIDIA": 0, "AMD": 1}
            return min(ok, key=lambda h: (rank.get(self.hw(h).brand, 9), h)), problem
        return self.listed_hardware[0], problem

    def can_hold(self, hw_id: str, variant_id: str) -> bool:
        """Whether some offered strategy could hold the weights on ``hw_id``: one
        node holds them, or the hardware clusters and a multi-node strategy runs
        there (a landing page is never a P/D cluster the recipe did not ask for)."""
        if self.fits_one_node(hw_id, variant_id):
            return True
        return self.hw(hw_id).scalable and any(
            self.strategy(s).deploy_type == "multi_node" and self.strategy_block_reason(s, hw_id) is None
            for s in self.strategies)

    # ----- variants -------------------------------------------------------
    @_memo
    def variant_for(self, hw_id: str) -> str | None:
        """The first variant (recipe order) that runs on ``hw_id`` and can be
        held there (``hardware_block_reason`` and ``can_hold``), or None."""
        runs = [v for v in self.recipe.variants if self.hardware_block_reason(hw_id, v) is None]
        held = [v for v in runs if self.can_hold(hw_id, v)]
        return next(iter(held or runs), None)

    def variant(self, variant_id: str) -> Variant:
        return self.recipe.variants.get(variant_id) or self.recipe.variants.get("default") or Variant()

    # ----- vLLM-Omni recipes (semantics §14) ---------------------------------
    @cached_property
    def is_omni(self) -> bool:
        return self.recipe.omni is not None or "omni" in self.recipe.meta.tasks

    def omni_tasks(self):
        return list(self.recipe.omni.tasks) if self.recipe.omni else []

    def omni_task(self, task_id: str | None):
        tasks = self.omni_tasks()
        return next((t for t in tasks if t.ident == task_id), tasks[0] if tasks else None)

    @_memo
    def variant_label(self, variant_id: str) -> str:
        """The variant's name on the page and in summaries: its ``label``, else
        its precision in capitals (``BF16``), else its id. Where several
        unlabelled variants would get the same name, each leads with what
        tells it apart, the first of these that is unique among them: its
        checkpoint's name (the model id after its org: "Phi-4-mini-reasoning ·
        BF16"), the head of its ``description`` (before " — ", up to 24
        characters), its id. A fresh user found
        five identical "BF16" buttons on a TTS recipe whose variants are
        different checkpoints."""
        def plain(vid: str) -> str:
            o = self.variant(vid)
            return o.label or (o.precision.upper() if o.precision else vid)

        base = plain(variant_id)
        twins = [o for o in self.recipe.variants if plain(o) == base and not self.variant(o).label]
        if self.variant(variant_id).label or len(twins) < 2:
            return base

        def head(vid: str) -> str:
            text = (self.variant(vid).description or "").split(" — ")[0].strip()
            return text if len(text) <= 24 else ""

        for name in (lambda vid: (self.variant(vid).model_id or self.recipe.model.model_id).split("/")[-1], head,
                     lambda vid: vid):
            mine = name(variant_id)
            if mine and sum(name(o) == mine for o in twins) == 1:
                return f"{mine} · {base}"
        return f"{variant_id} · {base}"

    def weights_gb(self, variant_id: str, task: str | None = None, hw_id: str | None = None) -> float | None:
        """Weight memory in GB (``variants.<id>.vram_minimum_gb``; for an omni task,
        the task's own figure, refined per hardware), None if unknown."""
        t = self.omni_task(task) if self.is_omni else None
        if t is not None:
            hw_block = t.hardware_overrides.get(hw_id) if hw_id else None
            for value in ((hw_block.vram_minimum_gb if hw_block else None), t.vram_minimum_gb):
                if value is not None:
                    return value
        return self.variant(variant_id).vram_minimum_gb

    def reason(self, key: str, flag: str | None = None) -> str:
        """The recipe's reason for a value set at recipe key path ``key`` (and,
        in an argv list, by ``flag``): its ``reasons`` entry for
        ``key#flag``, else for ``key``, else for the nearest enclosing key
        (``strategy_overrides.multi_node_tp_pp.extra_args`` → its strategy's
        block); "" when it gives none, and for keys the recipe does not write
        (``strategies/…``, ``composer:…``). Source: the recipe's YAML comments
        (``composer.buildtime.comments``) or its own ``reasons``."""
        said = self.recipe.reasons
        if not said or not key or "/" in key or ":" in key:
            return ""
        if flag and f"{key}#{flag}" in said:
            return said[f"{key}#{flag}"]
        path = key
        while path:
            if path in said:
                return said[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return ""

    def model_id(self, variant_id: str, task: str | None = None) -> str:
        t = self.omni_task(task) if self.is_omni else None
        if t is not None and t.model_id:
            return t.model_id
        return self.variant(variant_id).model_id or self.recipe.model.model_id

    def fits_one_node(self, hw_id: str, variant_id: str) -> bool:
        """Whether one node's HBM holds the weights (``composer.memory.weights_fit``)."""
        return weights_fit(self.weights_gb(variant_id, None, hw_id), self.hw(hw_id).vram_gb)

    def shares_host_socket(self, kv_id: str) -> str | None:
        """Why two vLLM servers on one host cannot both use KV offload
        ``kv_id`` (a KV store whose P/D connector is ``MooncakeStoreConnector``:
        it names its lookup socket after the host, the DP rank and its rpc
        port, vllm 0.33 ``distributed/kv_transfer/kv_connector/v1/mooncake/store/
        worker.py`` 2467-2480, and a server removes and binds whatever is at
        that path, 2317-2326: the second pool would take over the first's), or
        None."""
        st = self.catalog.strategies.get(kv_id) if kv_id else None
        if st is None or not any("MooncakeStoreConnector" in str(a) for role in st.pd.values() for a in role.args):
            return None
        return (f"{self.kv_label(kv_id)}: its store connector names its lookup socket after the host and the DP rank "
                "(vLLM's MooncakeStoreConnector), so two pools on one node would take over each other's.")

    def fits_half_node(self, hw_id: str, variant_id: str) -> bool:
        """Whether half of one node's GPUs (⌊G/2⌋ of G, at least one) hold the
        weights: where a P/D pool may run on half a node
        (``dimensions.HALF_NODE``; the public site's API fitness check: the node
        holds twice the model, semantics §9)."""
        hw = self.hw(hw_id)
        half = hw.gpu_count // 2
        return (hw.brand in HALF_NODE_BRANDS and half >= 1
                and weights_fit(self.weights_gb(variant_id, None, hw_id), hw.vram_gb * half / hw.gpu_count))

    # ----- strategies -----------------------------------------------------
    def strategy(self, sid: str) -> Strategy:
        if sid == OMNI_STRATEGY.name and sid not in self.catalog.strategies:
            return OMNI_STRATEGY
        return self.catalog.strategies[sid]

    @cached_property
    def strategies(self) -> list[str]:
        """Serving strategies the recipe offers: ``compatible_strategies`` plus any
        strategy granted ``supported`` in ``strategy_hardware`` (semantics §2.5),
        known to the catalogue and not a KV-store deployment. A vLLM-Omni
        recipe has the one ``omni`` deployment (one node, ``--omni``) whatever
        it lists (semantics §14: no strategy, multi-node or KV logic)."""
        if self.is_omni:
            return [OMNI_STRATEGY.name]
        ids = list(self.recipe.compatible_strategies)
        for sid, gates in self.recipe.strategy_hardware.items():
            if sid not in ids and "supported" in gates.values():
                ids.append(sid)
        ids = [s for s in ids if s in self.catalog.strategies and self.strategy(s).deploy_type != "kv_store_lb"]
        return ids

    @_memo
    def strategy_block_reason(self, sid: str, hw_id: str) -> str | None:
        """Why strategy ``sid`` is unavailable on ``hw_id`` (``strategy_hardware`` gate,
        one lookup rule: id → generation → brand → default, else list membership)."""
        hw = self.hw(hw_id)
        found = lookup_value(self.recipe.strategy_hardware.get(sid), hw_id, hw)
        if found is not None:
            if found[1] == "unsupported":
                return f"This model's recipe does not support {self.strategy_label(sid)} on {hw.display_name}."
            return None
        if sid not in self.recipe.compatible_strategies and sid != OMNI_STRATEGY.name:
            return f"{self.strategy_label(sid)} is offered only on the hardware the recipe grants it."
        deploy = self.strategy(sid).deploy_type
        if deploy in ("multi_node", "pd_cluster") and not hw.scalable:
            return f"{hw.display_name} cannot be clustered."
        return None

    def is_expert_parallel(self, sid: str) -> bool:
        """Whether strategy ``sid`` is of an expert-parallel kind
        (``composer.parallel.ParallelKind.expert_parallel``: TEP, DEP)."""
        from composer.parallel import KINDS

        s = self.catalog.strategies.get(sid) or (OMNI_STRATEGY if sid == OMNI_STRATEGY.name else None)
        return s is not None and KINDS[str(s.kind)].expert_parallel

    def strategy_label(self, sid: str) -> str:
        s = self.catalog.strategies.get(sid) or (OMNI_STRATEGY if sid == OMNI_STRATEGY.name else None)
        return (s.display_name if s and s.display_name else sid)

    @_memo
    def floor_gpus(self, key: str, hw_id: str) -> int:
        """Minimum GPUs for a strategy or P/D pool mode (``strategy_min_gpus``,
        semantics §4.3): the larger of the strategy floor and the hardware floor."""
        cfg = self.recipe.strategy_min_gpus
        if cfg is None:
            return 0
        if isinstance(cfg, int):
            return cfg

        def block(b, k: str) -> int:
            if isinstance(b, int):
                return b
            if isinstance(b, dict):
                for cand in (k, "multi_node_" + k, "single_node_" + k):
                    if cand in b:
                        return int(b[cand])
            return 0

        return max(block(cfg, key), block(cfg.get(hw_id), key))

    def floor_nodes(self, key: str, hw_id: str) -> int:
        gpus = self.floor_gpus(key, hw_id)
        return max(1, math.ceil(gpus / self.hw(hw_id).gpu_count)) if gpus else 1

    def recipe_tp(self, hw_id: str, variant_id: str) -> int | None:
        """The single-node TP the recipe gives for ``hw_id``: ``variants.<v>.tp``,
        then ``strategy_overrides.single_node_tp.tp``, then a
        ``--tensor-parallel-size`` of its hardware overrides; capped at the
        node's GPUs (not on CPU profiles). None when it gives none."""
        hw = self.hw(hw_id)
        for raw in (self.variant(variant_id).tp, getattr(self.recipe.strategy_overrides.get("single_node_tp"), "tp", None),
                    self.hardware_override_tp(hw_id, variant_id)):
            v = hw_value(raw, hw_id, hw)
            if v and v > 0:
                return int(v) if hw.gen == "cpu" else min(int(v), hw.gpu_count)
        return None

    @_memo
    def hardware_override_tp(self, hw_id: str, variant_id: str) -> int | None:
        """``--tensor-parallel-size`` set by recipe or variant hardware overrides."""
        from composer.argv import ArgvError, parse_tokens
        from composer.lookup import lookup_blocks

        hw = self.hw(hw_id)
        found = None
        for blocks in (self.recipe.hardware_overrides, self.variant(variant_id).hardware_overrides):
            for _, block in lookup_blocks(blocks, hw_id, hw):
                try:
                    units = parse_tokens(list(block.extra_args) + list(block.args))
                except ArgvError:
                    continue
                for u in units:
                    if u.key == "tensor-parallel-size" and u.value and u.value.isdigit():
                        found = int(u.value)
        return found

    # ----- features and knobs ---------------------------------------------
    @_memo
    def default_features(self, hw_id: str, variant_id: str) -> tuple[str, ...]:
        """All features minus ``opt_in_features`` and ``hardware_opt_in_features[hw]``,
        plus those a variant's ``default_modes`` turn on (semantics §2.1)."""
        off = set(self.recipe.opt_in_features) | set(self.recipe.hardware_opt_in_features.get(hw_id, []))
        forced = set(self.variant(variant_id).default_modes)
        return tuple(f for f in self.recipe.features if f not in off or f in forced)

    @_memo
    def exclusive_with(self, fid: str) -> list[str]:
        """Features that cannot be on together with ``fid``: upstream's built-in
        pair (text_only / encoder_parallel, semantics §2.4) plus the recipe's
        ``exclusive_features`` groups (a list of lists of feature ids)."""
        groups = [["text_only", "encoder_parallel"]] + [list(g) for g in self.recipe.exclusive_features]
        out = []
        for g in groups:
            if fid in g:
                out += [f for f in g if f != fid and f in self.recipe.features and f not in out]
        return out

    @_memo
    def feature_block_reason(self, fid: str, sid: str) -> str | None:
        allowed = self.recipe.features[fid].strategies
        if allowed is not None and sid not in allowed:
            return f"Not available with {self.strategy_label(sid)}."
        return None

    @_memo
    def advanced_knobs(self, sid: str) -> list[AdvancedKnob]:
        """Advanced options visible for strategy ``sid`` (built-ins, then the recipe's).

        A vLLM-Omni recipe gets only its own (``OMNI_NO_BUILTINS``)."""
        model = self.recipe.model
        out = []
        for kid, label, args, when, desc in () if self.is_omni else BUILTIN_ADVANCED:
            if when == "ep":
                if not self.is_expert_parallel(sid):
                    continue
            elif when and not getattr(model, when):
                continue
            out.append(AdvancedKnob(kid, label, list(args), desc, f"advanced.{kid}"))
        for i, opt in enumerate(self.recipe.advanced_options):
            out.append(AdvancedKnob(opt.id, opt.label or opt.id, list(opt.args), opt.description, f"advanced_options[{i}]"))
        return out

    @cached_property
    def all_advanced_ids(self) -> set[str]:
        return {k[0] for k in BUILTIN_ADVANCED} | {o.id for o in self.recipe.advanced_options}

    def advanced_label(self, aid: str) -> str:
        """An Advanced knob's label (built-in or the recipe's own), else its id."""
        own = next((o.label for o in self.recipe.advanced_options if o.id == aid and o.label), None)
        return own or next((k[1] for k in BUILTIN_ADVANCED if k[0] == aid), aid)

    # ----- KV offload -------------------------------------------------------
    @_memo
    def kv_options(self) -> list[str]:
        """KV offload ids in row order: taxonomy options and KV-store deployments;
        none for vLLM-Omni recipes (semantics §14)."""
        if self.is_omni:
            return []
        opts = [(o.order, k) for k, o in self.catalog.taxonomy.kv_offload.items()]
        opts += [(s.order, k) for k, s in self.catalog.strategies.items() if s.deploy_type == "kv_store_lb"]
        return [k for _, k in sorted(opts)]

    def kv_label(self, kid: str) -> str:
        opt = self.catalog.taxonomy.kv_offload.get(kid)
        if opt:
            return opt.label or opt.display_name or kid
        s = self.catalog.strategies.get(kid)
        return (s.label or s.display_name or kid) if s else kid

    @_memo
    def kv_block_reason(self, kid: str, sid: str, hw_id: str) -> str | None:
        """Why KV offload ``kid`` is unavailable (semantics §6.1 gates, from data)."""
        hw = self.hw(hw_id)
        label = self.kv_label(kid)
        deploy = self.strategy(sid).deploy_type
        opt = self.catalog.taxonomy.kv_offload.get(kid)
        if opt is not None:
            if deploy == "pd_cluster":
                return f"{label} does not compose with P/D disaggregation (both use --kv-transfer-config)."
            if opt.strategies is not None and sid not in opt.strategies:
                here = [self.strategy_label(s) for s in opt.strategies if s in self.strategies]
                if here:
                    return f"{label} is offered only with {', '.join(here)}."
                return f"{label} needs a strategy this recipe does not offer ({', '.join(opt.strategies)})."
            support = self.recipe.kv_offload_support.get(kid)
            if support == "unsupported":
                return f"This model's recipe does not support {label}."
            if opt.requires_opt_in and support != "verified":
                return f"{label} is offered only where the recipe records a verified run."
            if opt.brands is not None and hw.brand not in opt.brands:
                return f"{label} is not available on {hw.brand} hardware."
            if hw.gen == "xpu":
                return f"KV offload is not available on {hw.display_name}."
            return None
        gate = self.recipe.kv_cache_strategy_hardware.get(kid, {})
        if gate.get(hw_id) == "unsupported":
            if all(gate.get(h) == "unsupported" for h in self.listed_hardware):
                # Marked unsupported on every GPU the page lists: naming one would mislead (issue 21).
                return f"This model's recipe does not support {label} on any hardware."
            return f"This model's recipe does not support {label} on {hw.display_name}."
        if not hw.scalable or hw.brand not in ("NVIDIA", "AMD"):
            return f"{label} needs clusterable NVIDIA or AMD hardware."
        store = self.strategy(kid)
        if deploy == "pd_cluster" and "prefill" not in store.pd:
            return f"{label} has no P/D configuration (a MultiConnector that keeps NIXL)."
        return None
