"""Per-node parallelism and rendezvous flags (vLLM's launch modes).

Sources: vLLM docs "Parallelism and Scaling" (multi-node TP/PP with ``--nnodes``,
``--node-rank``, ``--master-addr`` and ``--headless`` on followers) and "Data
Parallel Deployment" (``--data-parallel-size``, ``-local``, ``-address``,
``-rpc-port``, ``-start-rank``; followers of an internal-LB DP deployment run
``--headless``; with ``--data-parallel-hybrid-lb`` every node serves its own API).
Upstream differences fixed here: TP+DP followers get ``--headless`` (W22), a
DEP ``--data-parallel-size-local`` override also sets the DP size (W13).
"""

from __future__ import annotations

from composer.argv import Unit
from composer.layout import Layout

DP_RPC_PORT = "13345"
"""Data-parallel RPC port used in vLLM's multi-node DP examples."""


def _u(key: str, value=None) -> Unit:
    return Unit(key, None if value is None else str(value))


def node_units(lay: Layout, rank: int, deploy: str, head: str = "$HEAD_IP", pd_pool: bool = False) -> list[Unit]:
    """Topology units of node ``rank`` (0 = head) for a layout.

    ``deploy`` is the strategy deploy type; single-node layouts get only the
    parallel size flags. For P/D pools, ``head`` is the pool's first-node
    placeholder and DEP pools always state their start rank.
    """
    if lay.mode == "omni":
        return []  # vLLM-Omni recipes carry their parallelism in their own args
    if deploy == "single_node" and not pd_pool:
        if lay.mode == "dep":
            return [_u("data-parallel-size", lay.gpus_per_node)]
        return [_u("tensor-parallel-size", lay.tp)]
    multi = lay.nodes > 1
    units: list[Unit] = []
    if lay.mode == "dep":
        if lay.tp > 1:
            units.append(_u("tensor-parallel-size", lay.tp))
        units += [_u("data-parallel-size", lay.dp), _u("data-parallel-size-local", lay.dp_local)]
        if multi or pd_pool:
            units.append(_u("data-parallel-address", head))
            units.append(_u("data-parallel-rpc-port", DP_RPC_PORT))
        if rank > 0 or pd_pool:
            units.append(_u("data-parallel-start-rank", rank * lay.dp_local))
        if pd_pool:
            units.append(_u("enable-expert-parallel"))
            if multi and lay.dp_local > 1:
                units.append(_u("data-parallel-hybrid-lb"))
        if rank > 0 and lay.dp_local == 1:
            # One DP rank per node: internal load balancing from the head. Without
            # --headless, vLLM would infer hybrid LB from the start rank and, with
            # a local size of 1, switch to external LB (arg_utils.py).
            units.append(_u("headless"))
        return units
    if lay.mode == "tp_dp":
        units += [_u("tensor-parallel-size", lay.tp), _u("data-parallel-size", lay.dp),
                  _u("data-parallel-size-local", 1), _u("data-parallel-address", head),
                  _u("data-parallel-rpc-port", DP_RPC_PORT)]
        if rank > 0:
            units += [_u("data-parallel-start-rank", rank), _u("headless")]
        return units
    units.append(_u("tensor-parallel-size", lay.tp))
    if lay.mode == "tp_pp":
        units.append(_u("pipeline-parallel-size", lay.pp))
    if lay.mode == "tep" and pd_pool:
        units.append(_u("enable-expert-parallel"))
    if multi:
        units += [_u("nnodes", lay.nodes), _u("node-rank", rank), _u("master-addr", head)]
        if rank > 0:
            units.append(_u("headless"))
    return units


def serves_api(lay: Layout, rank: int) -> bool:
    """Whether node ``rank`` of a layout runs an HTTP API server."""
    if lay.mode == "dep":
        return rank == 0 or lay.dp_local > 1
    return rank == 0
