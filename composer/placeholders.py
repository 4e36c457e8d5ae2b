"""The ``$PLACEHOLDER``s a plan's commands leave to the person running them
(the head node's address, the network interface, pool node addresses …), each
with what it means, for the page's placeholders panel (issue 12.4).

Names follow the public site (semantics §11). A placeholder a recipe brings in
its own text gets a generic meaning; ``$HOME`` is the shell's, not ours.
"""

from __future__ import annotations

import re

from composer.outputs import Placeholder
from composer.shell import text_placeholders

SHELL_VARIABLES = {"HOME", "PATH", "USER", "PWD"}
"""Set by the shell itself: never asked for."""

MEANINGS: tuple[tuple[str, str, str], ...] = (
    # (name pattern, meaning, example value)
    (r"HEAD_IP", "IP address of the head node (node 0) on the interface below, reachable from every other node: "
                 "on the head, ip -4 -br addr show <interface> prints it (hostname -I lists every address).", "10.0.0.1"),
    (r"IFACE_NAME", "Network interface the nodes use to reach each other (NCCL/Gloo). Not simply the default route's, "
                    "which is often the slow management NIC: pick the fast fabric's. ip -br addr lists the interfaces "
                    "with their addresses; ibstat or ibv_devinfo shows the InfiniBand/RoCE ports, and ibdev2netdev "
                    "names the interface of each.", "ib0"),
    (r"ROUTER_HOST", "Host name or IP address of the machine that runs the router.", "10.0.0.100"),
    (r"PREFILL_NODE_(\d+)", "IP address of prefill node {0} (the first node of a multi-node pool is its head).", "10.0.1.{0}"),
    (r"DECODE_NODE_(\d+)", "IP address of decode node {0} (the first node of a multi-node pool is its head).", "10.0.2.{0}"),
    (r"INSTANCE_(\d+)_IP", "IP address of the head node of vLLM instance {0} behind the router.", "10.0.3.{0}"),
    (r"INSTANCE_(\d+)_HEAD_IP", "IP address of the head node (node 0) of vLLM instance {0}, reachable from the "
                                "instance's other nodes and the router.", "10.0.{0}.1"),
    (r"INSTANCE_(\d+)_NODE_(\d+)_IP", "IP address of node {1} of vLLM instance {0}: its API server is one of the "
                                       "router's workers.", "10.0.{0}.1{1}"),
    (r"NODE_(\d+)_IP", "IP address of node {0}, reachable from the router's host on port 8000: in hybrid-LB data "
                       "parallelism each node's API server serves its own ranks, and the router lists it. On that "
                       "node, ip -4 -br addr show <interface> prints it.", "10.0.0.1{0}"),
    (r"MOONCAKE_MASTER_IP", "IP address of the host that runs the Mooncake master.", "10.0.0.50"),
    (r"MOONCAKE_CONFIG_PATH", "Path of the Mooncake config file on each vLLM node; the Mooncake config tab writes it there.", "/etc/mooncake/config.json"),
    (r"MOONCAKE_STORE_CONFIG_PATH", "Path of the Mooncake store config file on the store host.", "/etc/mooncake/store.json"),
    (r"MOONCAKE_(STORE_)?DEVICE_NAME", "RDMA device Mooncake transfers over, as ibv_devices lists it (empty: Mooncake picks the NICs nearest each GPU).", "mlx5_0"),
)


def describe(name: str) -> tuple[str, str]:
    """``(meaning, example)`` of placeholder ``name`` (without ``$``)."""
    for pattern, meaning, example in MEANINGS:
        m = re.fullmatch(pattern, name)
        if m:
            groups = [g or "" for g in m.groups()]
            return meaning.format(*groups), example.format(*groups)
    return "A value the recipe leaves to you (see the recipe's guide).", ""


def placeholders(texts) -> tuple[Placeholder, ...]:
    """Every placeholder used in ``texts`` (shown commands, companion commands,
    client checks), in order of first use, with its meaning and an example."""
    seen: dict[str, None] = {}
    for text in texts:
        for name in text_placeholders(text or ""):  # $NAME and ${NAME} (composer.shell.quote)
            if name not in SHELL_VARIABLES:
                seen.setdefault(name, None)
    return tuple(Placeholder(name, *describe(name)) for name in sorted(seen, key=_order))


def _order(name: str) -> tuple[int, int, str]:
    """Known placeholders in the order of ``MEANINGS`` (pool nodes by number),
    then the recipe's own by name."""
    for i, (pattern, _, _) in enumerate(MEANINGS):
        m = re.fullmatch(pattern, name)
        if m:
            num = next((int(g) for g in m.groups() if g and g.isdigit()), 0)
            return i, num, name
    return len(MEANINGS), 0, name
