"""The dimensions of a choice: one declaration per URL parameter, and the
``Selection`` they resolve to.

This is the ground floor of the composer: it imports nothing of the package.
Everything that lists parameters is derived from ``DIMENSIONS`` — the query
parser and writer (``composer.query``), the canonical and pinned links
(``composer.canonical``), the page's controls (``composer.controls``), their
legends and help, the macros' group order and kinds (``site_src/_macros.html``
reads ``groups``) and the page script's reset rule (rendered as
``data-resets`` on each control, never kept in ``app.js``). A new parameter is
one ``Dimension`` here, its resolver step (``composer.resolve``) and its
control builder (``composer.controls``).

Parameter names and value ids follow the public recipes site (semantics §12),
so its links keep working; ``install``, ``cuda``, ``instances``, ``task``, ``context`` and
``v`` are ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Mapping

Kind = Literal["text", "int", "list", "pairs"]
"""How a parameter's value is read: one id (``text``), a whole number
(``int``), a comma list (``list``: ``""`` means "explicitly none", upstream
W27) or ``key:value`` pairs in a comma list (``pairs``: ``fmode``)."""


@dataclass(frozen=True)
class Dimension:
    """One URL parameter.

    ``url_order``: its place in written queries (canonical parameter order);
    ``drop_order``: when the canonical link tries omitting it (earlier = tried
    first; None: never omitted, e.g. ``v``); ``legend``/``help``: the page
    group's title and one-line explanation (None: no control); ``control``:
    ``radio`` or ``checkbox``; ``shown_from``: the fewest options for which the
    page shows the group (a one-checkpoint recipe has no variant control);
    ``resets``: parameters a change of it clears on the page (a new deployment
    shape: the composer sizes nodes and pools afresh); ``effect``: whether a
    change of it is named in an option's "Also changes …" line."""

    name: str
    kind: Kind
    url_order: int
    drop_order: int | None
    legend: str | None = None
    help: str = ""
    control: Literal["radio", "checkbox"] = "radio"
    shown_from: int = 1
    resets: tuple[str, ...] = ()
    effect: bool = False


_NEW_SHAPE = ("nodes", "prefill_nodes", "decode_nodes")

DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("hardware", "text", 1, 15, "Hardware", "Which GPUs, per node. Decides whether the weights fit at all and which kernels and backends run (CUDA or ROCm, Hopper or Blackwell paths).",
              shown_from=0, resets=_NEW_SHAPE, effect=True),
    Dimension("variant", "text", 2, 14, "Variant", "Which checkpoint: its precision sets the weight memory, and some precisions need specific GPUs.",
              shown_from=2, resets=_NEW_SHAPE, effect=True),
    Dimension("nodes", "int", 3, 1, "Nodes", "How many machines (or NVL4 trays). Weights must fit in the GPUs that hold them; more nodes mean more inter-node traffic.",
              effect=True),
    Dimension("strategy", "text", 4, 4, "Strategy", "How the model (TP splits every layer's weights across GPUs, EP spreads the experts, PP gives each group of GPUs a range of layers) and the requests (DP replicas) are spread over GPUs. Each strategy has a floor: the fewest GPUs it needs.",
              shown_from=0, resets=_NEW_SHAPE, effect=True),
    Dimension("prefill_mode", "text", 5, 5, "Prefill pool mode", "Parallelism of the prefill pool, which reads prompts and builds the KV cache: it drives TTFT.",
              effect=True),
    Dimension("prefill_nodes", "int", 6, 2, "Prefill pool nodes", "Nodes in the prefill pool; the pool alone must hold the weights. ½: half of one node's GPUs, the decode pool on the other half when it is ½ too (co-located).",
              effect=True),
    Dimension("decode_mode", "text", 7, 6, "Decode pool mode", "Parallelism of the decode pool, which generates tokens from the transferred KV cache: it drives ITL.",
              effect=True),
    Dimension("decode_nodes", "int", 8, 3, "Decode pool nodes", "Nodes in the decode pool; the pool alone must hold the weights. ½: the second half of one node's GPUs, the prefill pool on the first half when it is ½ too (co-located).",
              effect=True),
    Dimension("features", "list", 9, 8, "Features", "Optional behaviour: parsers, speculative decoding, text only. A feature that is off also removes the flags it owns.",
              control="checkbox", shown_from=1, effect=True),
    Dimension("fmode", "pairs", 10, 7),
    Dimension("advanced", "list", 11, 9, "Advanced", "Generic knobs. They override the recipe's tuned values for hardware and strategy; features applied later can override them in turn.",
              control="checkbox", shown_from=1, effect=True),
    Dimension("task", "text", 15, 13, "Task", "What the vLLM-Omni server is set up to generate: each task may use its own checkpoint and arguments."),
    Dimension("kv_offload", "text", 12, 10, "KV offload", "Where KV cache may spill: host DRAM or an external store. It moves KV cache, never weights, so it cannot make a model fit.",
              shown_from=2, effect=True),
    Dimension("instances", "int", 16, 0, "Instances", "vLLM instances sharing the KV store, each a full copy of the deployment above; a cache-aware router sends a prompt to the instance that holds its prefix.",
              effect=True),
    Dimension("install", "text", 13, 11, "Run with", "Show the commands for a pip install on the host, wrapped in the vLLM container (host networking for multi-node), as Kubernetes manifests, as config files for vllm serve --config, or as SLURM batch jobs.",
              shown_from=0),
    Dimension("cuda", "text", 14, 12, "CUDA version", "Which CUDA build of the container image to run: pick the one your driver supports (CUDA 13 needs a newer driver than CUDA 12.9)."),
    Dimension("context", "text", 17, 16, "Context for concurrency",
              "The prompt plus output length the capacity line states the maximum concurrency for, next to vLLM's own figure "
              "at the max-model-len in force. It changes no command."),
    Dimension("v", "text", 0, None),
)
"""Every URL parameter, in the order the page shows their controls (feature
modes, ``fmode.<feature>`` groups, come right after ``features``)."""

BY_NAME: Mapping[str, Dimension] = MappingProxyType({d.name: d for d in DIMENSIONS})
PARAMS: tuple[str, ...] = tuple(d.name for d in sorted(DIMENSIONS, key=lambda d: d.url_order))
"""Parameter names in canonical URL order."""
LIST_PARAMS: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.kind == "list")
INT_PARAMS: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.kind == "int")
DROP_ORDER: tuple[str, ...] = tuple(d.name for d in sorted((d for d in DIMENSIONS if d.drop_order is not None),
                                                           key=lambda d: d.drop_order or 0))
"""The order in which the canonical link tries omitting parameters."""
EFFECT_DIMS: tuple[str, ...] = tuple(d.name for d in sorted((d for d in DIMENSIONS if d.effect), key=lambda d: d.url_order))
"""Parameters a click's "Also changes …" line names, in URL order."""
CONTROLS: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.legend)
"""Parameters with a page control, in page order."""
VIEW_PARAMS = ("embed", "theme", "compare")
"""Parameters of the page's view, not of the plan: accepted and ignored by the
composer. ``compare``: the query of plan A that the page shows beside its own
plan (B), so a comparison is a bookmark (``composer.compare``)."""

CONTEXTS: Mapping[str, int] = MappingProxyType({"8k": 8192, "32k": 32768, "128k": 131072})
"""The ``context`` parameter's values: tokens per request the capacity line
states the maximum concurrency for (``composer.memory``)."""
DEFAULT_CONTEXT = "32k"
"""The ``context`` when the query gives none (not recipe data: a pinned link
omits it, as it omits Advanced and KV offload when they are unset)."""

POOLS = ("prefill", "decode")
"""The P/D pools, in the order their commands run."""


HALF_NODE = 0
"""A P/D pool's node count that means half of one node (``prefill_nodes=0``,
the public site's legacy co-located pool, semantics §3.3 step 6 and §5.2):
prefill runs on the first half of the node's GPUs, decode on the second
(``composer.resolve.pool_layout``). Both pools at ``HALF_NODE`` share one node."""


def pool_size_label(nodes: int) -> str:
    """How a P/D pool's node count is written for people: "½" for
    ``HALF_NODE``, else the number."""
    return "½" if nodes == HALF_NODE else str(nodes)


@dataclass(frozen=True)
class Pool:
    """One P/D pool: its parallel ``mode`` (tp | tep | dep) and ``nodes``
    (``HALF_NODE``: half of one node)."""

    mode: str
    nodes: int

    @property
    def half(self) -> bool:
        """Whether the pool runs on half of one node (``HALF_NODE``)."""
        return self.nodes == HALF_NODE


@dataclass(frozen=True)
class Selection:
    """A complete, valid choice in every dimension (ids as in the query).

    ``form`` is which output form the commands take (the ``install`` URL
    parameter: pip | docker | k8s, ``composer.forms``); how vLLM itself is
    installed follows from it (``composer.run_forms.install``)."""

    hardware: str
    variant: str
    strategy: str
    nodes: int
    features: tuple[str, ...]
    advanced: tuple[str, ...]
    kv_offload: str  # "" = off
    prefill: Pool | None = None
    decode: Pool | None = None
    form: str = "pip"
    task: str | None = None  # omni recipes: the task (its key or id)
    instances: int = 1  # vLLM instances behind a KV store's router (kv_store_lb)
    modes: tuple[tuple[str, str], ...] = ()  # (feature id, mode) of every moded feature, recipe order
    cuda: str | None = None  # CUDA version of the container image, where the recipe offers several
    context: str = DEFAULT_CONTEXT  # tokens per request the capacity line states a concurrency for (CONTEXTS)

    def mode(self, fid: str) -> str | None:
        """The mode in force for feature ``fid`` (None: the feature has no modes)."""
        return dict(self.modes).get(fid)

    def pool(self, name: str) -> Pool | None:
        """The P/D pool ``name`` (``prefill`` | ``decode``), None outside P/D."""
        return getattr(self, name)

    def to_dict(self) -> dict:
        """The selection by URL parameter name, as the plan's ``selection``:
        optional dimensions only where they apply (task, instances ≠ 1, modes,
        cuda, the P/D pools)."""
        d: dict = {
            "hardware": self.hardware, "variant": self.variant, "strategy": self.strategy,
            "nodes": self.nodes, "features": list(self.features), "advanced": list(self.advanced),
            "kv_offload": self.kv_offload or "off", "install": self.form,
        }
        if self.task is not None:
            d["task"] = self.task
        if self.instances != 1:
            d["instances"] = self.instances
        if self.modes:
            d["modes"] = dict(self.modes)
        if self.cuda is not None:
            d["cuda"] = self.cuda
        d["context"] = self.context
        for p in POOLS:
            pool = self.pool(p)
            if pool:
                d[f"{p}_mode"] = pool.mode
                d[f"{p}_nodes"] = pool.nodes
        return d

