"""Parallel kinds as data: one declaration per kind of deployment.

A strategy file says its kind (``kind:`` in ``strategies/<id>.yaml`` and
``kv_store/<id>.yaml``; ``composer.schema.Strategy.kind``), and everything that
depends on the kind is read from that kind's one ``ParallelKind`` entry in
``KINDS``: its layout on N nodes (what ``make_layout`` builds), the per-node
parallelism and rendezvous flags (``node_units``), which nodes serve the HTTP
API (``serves_api``), its summary label (``ParallelKind.shape``), the GPUs of a
node it runs ranks on, the P/D pool kind a strategy of it offers, and whether
it is expert-parallel. Adding a kind is one entry here plus the strategy file
that names it; no code reads a strategy's id to learn its kind.

Sources: vLLM docs "Parallelism and Scaling" (multi-node TP/PP with ``--nnodes``,
``--node-rank``, ``--master-addr`` and ``--headless`` on followers) and "Data
Parallel Deployment" (``--data-parallel-size``, ``-local``, ``-address``,
``-rpc-port``, ``-start-rank``; followers of an internal-LB DP deployment run
``--headless``; with ``--data-parallel-hybrid-lb`` every node serves its own API);
semantics §4 and §5 for the public site's layouts. Upstream differences fixed
here: TP+DP followers get ``--headless`` (W22), a DEP
``--data-parallel-size-local`` override also sets the DP size (W13).

The public corpus's strategy files declare no kind; ``derive_kind`` reads it
from their declarative content (semantics §1.2: ``deploy_type``,
``parallelism``, ``parallel_flag``, ``--enable-expert-parallel`` in
``vllm_args``), never from the id, and the loader says so in a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from composer.argv import Unit
from composer.memory import DEFAULT_GPU_UTIL

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from composer.context import RecipeContext

DP_RPC_PORT = "13345"
"""Data-parallel RPC port used in vLLM's multi-node DP examples."""


@dataclass(frozen=True)
class Layout:
    """Shape of one deployment or one P/D pool: ``nodes`` nodes of
    ``gpus_per_node`` GPUs, with the TP, PP and DP sizes (``dp_local``: DP
    ranks per node). ``mode`` is the id of its kind in ``KINDS``.

    ``replica_nodes`` is how many nodes hold one full copy of the weights (all of
    them, except TP+DP where each node is a replica).

    ``devices``: the GPU indices of a node the layout runs on when it has only
    part of one (a co-located P/D pool: half a node, ``gpus_per_node`` of them,
    the other pool on the other half; ``composer.resolve.pool_layout``); empty:
    the whole node.
    """

    mode: str
    nodes: int
    gpus_per_node: int
    tp: int
    pp: int = 1
    dp: int = 1
    dp_local: int = 1
    replica_nodes: int = 1
    devices: tuple[int, ...] = ()

    @property
    def kind(self) -> ParallelKind:
        return KINDS[self.mode]

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def used_per_node(self) -> int:
        """GPUs of a node the layout runs ranks on (the rest are idle)."""
        return self.kind.used_per_node(self)

    @property
    def replica_gpus(self) -> int:
        """GPUs that together hold one copy of the weights."""
        if self.kind.replica_per_node:
            return self.gpus_per_node
        return self.replica_nodes * self.used_per_node

    @property
    def token_scope(self) -> str:
        """What a KV token count of one replica counts when it is not the whole
        replica: " per DP rank" for a kind whose DP ranks keep their own
        sequences (DEP), when there are several; else ""."""
        return " per DP rank" if self.kind.kv_per_dp_rank and self.dp > 1 else ""


@dataclass(frozen=True)
class LayoutInput:
    """What a kind's layout is built from: ``nodes`` nodes of ``hw_id``, for
    ``variant_id``. ``single_node``: the strategy runs on one node (its
    ``deploy_type``); ``role_tp``: a P/D role's ``tp``; ``sid``: the strategy
    whose overrides count (DEP's ``--data-parallel-size-local``); ``util``,
    ``kv_dtype``, ``max_model_len``: the command's memory flags (the TP auto-fit);
    ``gpus``: the GPUs of a node the layout may use when not all of them (a
    co-located P/D pool's half node), None: every GPU of the node."""

    ctx: RecipeContext
    hw_id: str
    variant_id: str
    nodes: int
    single_node: bool = False
    role_tp: int | None = None
    sid: str | None = None
    util: float = DEFAULT_GPU_UTIL
    kv_dtype: str | None = None
    max_model_len: str | None = None
    gpus: int | None = None

    @property
    def g(self) -> int:
        """GPUs per node (``gpus`` when given)."""
        return self.gpus if self.gpus is not None else self.ctx.hw(self.hw_id).gpu_count


@dataclass(frozen=True)
class Node:
    """One node of a layout: ``rank`` (0 = head), the strategy's ``deploy``
    type, the rendezvous ``head`` (a placeholder) and whether it is in a P/D
    pool (``pd_pool``: a pool's own head, DEP pools always state their start
    rank and turn on expert parallelism themselves); ``rpc_port``: the
    data-parallel RPC port (``DP_RPC_PORT``; two co-located P/D pools share a
    host, so the decode pool's is the next one)."""

    rank: int
    deploy: str
    head: str = "$HEAD_IP"
    pd_pool: bool = False
    rpc_port: str = DP_RPC_PORT

    @property
    def alone(self) -> bool:
        """A single-node deployment: only the parallel size flags."""
        return self.deploy == "single_node" and not self.pd_pool


def _head_only(lay: Layout, rank: int) -> bool:
    return rank == 0


def _all_gpus(lay: Layout) -> int:
    return lay.gpus_per_node


@dataclass(frozen=True)
class ParallelKind:
    """One parallel kind: the one declaration of everything that depends on it.

    * ``id`` (the strategy file's ``kind``), ``label`` (the kind's name);
    * ``deploy_types``: the ``deploy_type`` values a strategy of this kind may
      declare (a declared kind that contradicts it is a load error);
    * ``layout``: its ``Layout`` for a ``LayoutInput`` (None: no layout of its
      own: P/D pools have their own kinds, a KV store is a KV offload);
    * ``flags``: the parallelism and rendezvous units of one ``Node``;
    * ``serves_api``: whether node ``rank`` runs an HTTP API server;
    * ``shape``: the summary label of a layout (``task`` is a vLLM-Omni task's
      label);
    * ``used_per_node``: GPUs of a node the layout runs ranks on;
    * ``replica_per_node``: every node holds a replica (TP+DP);
    * ``kv_per_dp_rank``: its DP ranks keep their own sequences (KV tokens are
      counted per DP rank);
    * ``expert_parallel``: Advanced's EP knobs apply;
    * ``pool``: offered as a P/D pool kind; ``pool_offer``: the pool kind a
      strategy of this kind offers (semantics §5.1: TP+PP and TP+DP offer TP);
      ``pool_help``: what the kind means for a pool, the tooltip of its P/D
      mode option (a fresh user's finding: the modes had none).
    """

    id: str
    label: str
    deploy_types: tuple[str, ...]
    layout: Callable[[LayoutInput], Layout] | None = None
    flags: Callable[[Layout, Node], list[Unit]] | None = None
    serves_api: Callable[[Layout, int], bool] = _head_only
    shape: Callable[[Layout, str | None], str] | None = None
    used_per_node: Callable[[Layout], int] = _all_gpus
    replica_per_node: bool = False
    kv_per_dp_rank: bool = False
    expert_parallel: bool = False
    pool: bool = False
    pool_offer: str | None = None
    pool_help: str = ""


def _u(key: str, value=None) -> Unit:
    return Unit(key, None if value is None else str(value))


# ----- TP, TEP, TP+PP: one tensor-parallel group (per pipeline stage) ---------

def _tp_layout(x: LayoutInput) -> Layout:
    """TP over every GPU of every node; on one node the TP auto-fit
    (``composer.memory.single_node_tp``, semantics §4.1)."""
    tp = x.nodes * x.g
    if x.single_node:
        from composer.memory import single_node_tp

        tp = single_node_tp(x.ctx, x.hw_id, x.variant_id, x.util, x.kv_dtype, x.max_model_len)
    return Layout("tp", x.nodes, x.g, tp=tp, replica_nodes=x.nodes)


def _tep_layout(x: LayoutInput) -> Layout:
    """TP over every GPU of every node, experts spread over the same ranks."""
    return Layout("tep", x.nodes, x.g, tp=x.nodes * x.g, replica_nodes=x.nodes)


def _tp_pp_layout(x: LayoutInput) -> Layout:
    """TP inside each node, one pipeline stage per node."""
    return Layout("tp_pp", x.nodes, x.g, tp=x.g, pp=x.nodes, replica_nodes=x.nodes)


def _tp_group_flags(lay: Layout, node: Node, pp: bool = False, ep_in_pool: bool = False) -> list[Unit]:
    """``--tensor-parallel-size`` (``--pipeline-parallel-size``), and across
    nodes ``--nnodes``/``--node-rank``/``--master-addr`` with ``--headless``
    followers (vLLM docs, "Parallelism and Scaling")."""
    units = [_u("tensor-parallel-size", lay.tp)]
    if node.alone:
        return units
    if pp:
        units.append(_u("pipeline-parallel-size", lay.pp))
    if ep_in_pool and node.pd_pool:
        units.append(_u("enable-expert-parallel"))
    if lay.nodes > 1:
        units += [_u("nnodes", lay.nodes), _u("node-rank", node.rank), _u("master-addr", node.head)]
        if node.rank > 0:
            units.append(_u("headless"))
    return units


def _tp_used(lay: Layout) -> int:
    """On one node, the TP ranks only (a TP auto-fit may leave GPUs idle)."""
    return min(lay.gpus_per_node, lay.tp) if lay.nodes == 1 else lay.gpus_per_node


# ----- TP+DP: one replica per node --------------------------------------------

def _tp_dp_layout(x: LayoutInput) -> Layout:
    return Layout("tp_dp", x.nodes, x.g, tp=x.g, dp=x.nodes, dp_local=1, replica_nodes=1)


def _tp_dp_flags(lay: Layout, node: Node) -> list[Unit]:
    """TP over the node, one DP rank per node from the head's address; the
    followers run ``--headless`` (internal load balancing; W22)."""
    if node.alone:
        return [_u("tensor-parallel-size", lay.tp)]
    units = [_u("tensor-parallel-size", lay.tp), _u("data-parallel-size", lay.dp),
             _u("data-parallel-size-local", 1), _u("data-parallel-address", node.head),
             _u("data-parallel-rpc-port", DP_RPC_PORT)]
    if node.rank > 0:
        units += [_u("data-parallel-start-rank", node.rank), _u("headless")]
    return units


# ----- DEP: data + expert parallel --------------------------------------------

def dp_local_override(ctx: RecipeContext, sid: str, hw_id: str) -> int | None:
    """A recipe's ``--data-parallel-size-local`` for DEP, from its strategy
    overrides; applied to both the DP size and the start ranks (fixes upstream W13)."""
    from composer.argv import parse_tokens
    from composer.lookup import lookup_blocks

    so = ctx.recipe.strategy_overrides.get(sid)
    if so is None:
        return None
    found = None
    tokens = list(so.vllm_args) + list(so.extra_args)
    for _, block in lookup_blocks(so.hardware_overrides, hw_id, ctx.hw(hw_id)):
        tokens += list(block.extra_args)
    try:
        for u in parse_tokens(tokens):
            if u.key == "data-parallel-size-local" and u.value and u.value.isdigit():
                found = int(u.value)
    except ValueError:
        return None
    return found


def _dep_layout(x: LayoutInput) -> Layout:
    """DP ranks per node: the recipe's ``--data-parallel-size-local`` override,
    else (a P/D role's ``tp``) the GPUs over that TP, else one per GPU; TP is
    the node's GPUs over the local DP size (semantics §4.2)."""
    g = x.g
    local = dp_local_override(x.ctx, x.sid, x.hw_id) if x.sid else None
    if local is None and x.role_tp:
        local = max(1, g // x.role_tp)
    local = local or g
    local = max(1, min(local, g))
    return Layout("dep", x.nodes, g, tp=max(1, g // local), dp=x.nodes * local, dp_local=local, replica_nodes=x.nodes)


def _dep_flags(lay: Layout, node: Node) -> list[Unit]:
    """``--data-parallel-size`` (``-local``, ``-address``, ``-rpc-port``,
    ``-start-rank``) with TP inside a DP rank; in a P/D pool the pool turns on
    expert parallelism and, with several local ranks across nodes, hybrid load
    balancing (vLLM docs, "Data Parallel Deployment"). With one DP rank per
    node (in a P/D pool or not) the form is internal LB: the head without a
    start rank, the followers ``--headless`` with theirs, so the head's API
    server reaches every rank (the router lists the head only)."""
    if node.alone:
        return [_u("data-parallel-size", lay.gpus_per_node)]
    multi, rank = lay.nodes > 1, node.rank
    units: list[Unit] = []
    if lay.tp > 1:
        units.append(_u("tensor-parallel-size", lay.tp))
    units += [_u("data-parallel-size", lay.dp), _u("data-parallel-size-local", lay.dp_local)]
    if multi or node.pd_pool:
        units.append(_u("data-parallel-address", node.head))
        units.append(_u("data-parallel-rpc-port", node.rpc_port))
    if rank > 0 or (node.pd_pool and lay.dp_local > 1):
        # One DP rank per node: the head states no start rank. vLLM infers
        # hybrid LB from a start rank (entrypoints/cli/serve.py:88-94; engine/
        # arg_utils.py:2489-2491) and switches a local size of 1 to external LB
        # (arg_utils.py:2493-2501); the head would then serve only its own rank
        # and refuse the --headless followers (v1/engine/utils.py:1419-1422,
        # 1502-1515). Without it the head runs internal LB: its API servers
        # (serve.py:113-126: one per DP rank) reach every rank.
        units.append(_u("data-parallel-start-rank", rank * lay.dp_local))
    if node.pd_pool:
        units.append(_u("enable-expert-parallel"))
        if multi and lay.dp_local > 1:
            units.append(_u("data-parallel-hybrid-lb"))
    if rank > 0 and lay.dp_local == 1:
        # One DP rank per node: internal load balancing from the head. Without
        # --headless, vLLM would infer hybrid LB from the start rank and, with
        # a local size of 1, switch to external LB (arg_utils.py).
        units.append(_u("headless"))
    return units


def _dep_serves_api(lay: Layout, rank: int) -> bool:
    """The head, and with several DP ranks per node (hybrid LB) every node."""
    return rank == 0 or lay.dp_local > 1


def _dep_used(lay: Layout) -> int:
    return min(lay.gpus_per_node, lay.tp * lay.dp_local)


# ----- vLLM-Omni --------------------------------------------------------------

def _omni_layout(x: LayoutInput) -> Layout:
    """One node; the recipe's own args carry vLLM-Omni's parallelism (semantics §14)."""
    return Layout("omni", 1, x.g, tp=x.g, replica_nodes=1)


def _no_flags(lay: Layout, node: Node) -> list[Unit]:
    return []


KINDS: dict[str, ParallelKind] = {k.id: k for k in (
    ParallelKind("tp", "TP", ("single_node", "multi_node"), _tp_layout,
                 lambda lay, node: _tp_group_flags(lay, node),
                 shape=lambda lay, task: f"TP {lay.tp}", used_per_node=_tp_used, pool=True, pool_offer="tp",
                 pool_help="One engine over the pool's GPUs, every layer split over them (TP): low latency per "
                           "request at small batches, one batch for the whole pool."),
    ParallelKind("tep", "TEP", ("single_node", "multi_node"), _tep_layout,
                 lambda lay, node: _tp_group_flags(lay, node, ep_in_pool=True),
                 shape=lambda lay, task: f"TP {lay.tp} + EP", used_per_node=_tp_used, expert_parallel=True,
                 pool=True, pool_offer="tep",
                 pool_help="TP with expert parallelism (--enable-expert-parallel): attention split over the pool's "
                           "GPUs as in TP, each MoE expert held whole by one GPU instead of sliced."),
    ParallelKind("dep", "DEP", ("single_node", "multi_node"), _dep_layout, _dep_flags, serves_api=_dep_serves_api,
                 shape=lambda lay, task: f"DP {lay.dp} + EP", used_per_node=_dep_used, kv_per_dp_rank=True,
                 expert_parallel=True, pool=True, pool_offer="dep",
                 pool_help="Data-parallel attention with expert parallelism: each DP rank keeps its own batch and "
                           "KV cache, the experts spread over every rank: the most sequences at once (the usual "
                           "choice for a large MoE model's decode pool)."),
    ParallelKind("tp_pp", "TP+PP", ("multi_node",), _tp_pp_layout,
                 lambda lay, node: _tp_group_flags(lay, node, pp=True),
                 shape=lambda lay, task: f"TP {lay.tp} × PP {lay.pp}", pool_offer="tp"),
    ParallelKind("tp_dp", "TP+DP", ("multi_node",), _tp_dp_layout, _tp_dp_flags,
                 shape=lambda lay, task: f"TP {lay.tp} × DP {lay.dp}", replica_per_node=True, pool_offer="tp"),
    ParallelKind("omni", "vLLM-Omni", ("single_node",), _omni_layout, _no_flags,
                 shape=lambda lay, task: task or "vLLM-Omni"),
    ParallelKind("pd", "P/D", ("pd_cluster",)),
    ParallelKind("kv_store", "KV store", ("kv_store_lb",)),
)}
"""Every parallel kind, by id, in the order pool kinds are offered."""

POOL_KINDS = tuple(k for k, v in KINDS.items() if v.pool)
"""Kinds a P/D pool can take, in the order they are offered (semantics §5.1)."""


def kind_problem(kind: str, deploy_type: str) -> str | None:
    """Why a strategy file's declared ``kind`` cannot be, or None: an unknown
    kind, or one whose ``deploy_types`` do not include the file's ``deploy_type``."""
    k = KINDS.get(kind)
    if k is None:
        return f"kind {str(kind)[:40]!r} is not one of {', '.join(KINDS)}"
    if deploy_type not in k.deploy_types:
        return (f"kind {kind} ({k.label}) needs deploy_type {' or '.join(k.deploy_types)}, "
                f"not {deploy_type}")
    return None


def _expert_parallel(vllm_args: Any) -> bool:
    """Whether ``vllm_args`` turn on ``--enable-expert-parallel`` (or ``-ep``)."""
    from composer.argv import ArgvError, parse_tokens

    if not isinstance(vllm_args, (list, tuple)):
        return False
    try:
        units = parse_tokens([str(t) for t in vllm_args])
    except ArgvError:
        return False
    on = False
    for u in units:
        if u.key == "enable-expert-parallel":
            on = u.enabled and (u.value is None or u.value.lower() in ("true", "1"))
    return on


def derive_kind(data: Mapping[str, Any]) -> tuple[str, str]:
    """``(kind, what it was read from)`` of a strategy file that declares none
    (the public corpus), from its declarative keys, never its id (semantics
    §1.2): ``deploy_type`` ``kv_store_lb`` → KV store, ``pd_cluster`` → P/D;
    a ``parallelism`` that names a kind (``tp_pp``, ``tp_dp``) → that kind;
    ``parallel_flag: --data-parallel-size`` → DEP; ``--enable-expert-parallel``
    in ``vllm_args`` → TEP; else TP. ``data`` is the file's raw mapping or a
    ``Strategy``'s fields; malformed values count as absent."""
    deploy = data.get("deploy_type") or "single_node"
    for k in KINDS.values():
        if k.layout is None and deploy in k.deploy_types:
            return k.id, f"deploy_type {deploy}"
    par = data.get("parallelism")
    if isinstance(par, str) and par in KINDS and KINDS[par].layout is not None:
        return par, f"parallelism {par}"
    if data.get("parallel_flag") == "--data-parallel-size":
        return "dep", "parallel_flag --data-parallel-size"
    if _expert_parallel(data.get("vllm_args")):
        return "tep", "--enable-expert-parallel in vllm_args"
    return "tp", "neither parallel_flag nor vllm_args asks for data or expert parallelism"


def kind_warning(data: Mapping[str, Any]) -> str:
    """The loader's warning for a strategy file without ``kind``."""
    kind, why = derive_kind(data)
    return (f"no kind declared; read as {KINDS[kind].label} ({why}); declare kind: {kind} "
            f"(one of {', '.join(KINDS)})")


def make_layout(ctx: RecipeContext, mode: str, hw_id: str, variant_id: str, nodes: int,
                single_node: bool = False, role_tp: int | None = None, sid: str | None = None,
                util: float = DEFAULT_GPU_UTIL, kv_dtype: str | None = None, max_model_len: str | None = None,
                devices: tuple[int, ...] = ()) -> Layout:
    """The layout of kind ``mode`` on ``nodes`` nodes of ``hw_id`` (semantics
    §4.2, §5.2; arguments as ``LayoutInput``); ``devices``: only these GPUs
    of one node (``Layout.devices``, a co-located P/D pool). Raises ValueError
    for a kind without a layout of its own (P/D, KV store)."""
    build = KINDS[mode].layout
    if build is None:
        raise ValueError(f"the {KINDS[mode].label} kind has no layout of its own")
    lay = build(LayoutInput(ctx, hw_id, variant_id, nodes, single_node, role_tp, sid, util, kv_dtype, max_model_len,
                            len(devices) if devices else None))
    return replace(lay, devices=tuple(devices)) if devices else lay


def layout_problem(ctx: RecipeContext, lay: Layout, variant_id: str | None = None) -> str | None:
    """Why a layout is invalid for the model, or None: vLLM requires TP to
    divide the attention heads ("Total number of attention heads ({heads})
    must be divisible by tensor parallel size ({tp})", vllm/config/model.py:
    1557-1564; rule ``tp-divides-heads`` of ``composer.launch``). The head
    count is the model facts' ``num_attention_heads``
    (``composer.model_facts.model_facts`` of ``variant_id``: the recipe's
    ``model`` block, else our data); when it is unknown only a power-of-two
    TP is assumed to divide it, and the reason says so. A Mamba-2 hybrid's
    TP must also fit its Mamba heads and groups (``composer.launch.mamba_tp_problem``)."""
    if lay.tp <= 1:
        return None
    from composer.launch import mamba_tp_problem
    from composer.model_facts import model_facts

    facts = model_facts(ctx, variant_id)
    heads = facts.num_attention_heads
    mamba = mamba_tp_problem(facts, lay.tp)  # a Mamba-2 hybrid's mixer too (rule tp-divides-mamba-heads)
    if mamba:
        return f"TP {lay.tp} does not fit the model's Mamba layers: vLLM refuses it at start (\"{mamba}\")."
    if heads:
        if heads % lay.tp:
            return f"TP {lay.tp} does not divide the model's {heads} attention heads (vLLM refuses it at start)."
        return None
    if lay.tp & (lay.tp - 1):
        return (f"TP {lay.tp} is not a power of two, and the model's attention head count is unknown: only a "
                f"power-of-two TP is assumed to divide it (vLLM refuses a TP that does not divide the heads).")
    return None


def node_units(lay: Layout, rank: int, deploy: str, head: str = "$HEAD_IP", pd_pool: bool = False,
               rpc_port: str = DP_RPC_PORT) -> list[Unit]:
    """Topology units of node ``rank`` (0 = head) of a layout, from its kind.

    ``deploy`` is the strategy deploy type; single-node layouts get only the
    parallel size flags. For P/D pools, ``head`` is the pool's first-node
    placeholder and DEP pools always state their start rank; ``rpc_port``:
    ``Node.rpc_port``.
    """
    flags = lay.kind.flags
    return flags(lay, Node(rank, deploy, head, pd_pool, rpc_port)) if flags else []


def serves_api(lay: Layout, rank: int) -> bool:
    """Whether node ``rank`` of a layout runs an HTTP API server."""
    return lay.kind.serves_api(lay, rank)


def shape(lay: Layout, task: str | None = None) -> str:
    """The summary label of a layout, e.g. "TP 16" or "DP 16 + EP" (``task``:
    a vLLM-Omni task's label)."""
    return lay.kind.shape(lay, task) if lay.kind.shape else lay.kind.label
