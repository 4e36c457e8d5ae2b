"""The Kubernetes form of a plan: manifests that run exactly the plan's commands.

* One node: a ``Deployment`` (1 replica) and a ``Service``.
* Several nodes (multi-node TP, TEP, DEP, TP+PP, TP+DP), or several instances
  of a KV-store deployment: one ``LeaderWorkerSet`` (``leaderworkerset.x-k8s.io/v1``),
  group size = nodes, one group per instance, ``RecreateGroupOnPodRestart``.
  The leader runs the head command, the workers the follower commands.
* P/D: a ``DisaggregatedSet`` (``disaggregatedset.x-k8s.io/v1``, one role per
  pool), a ``Service`` per role, and the router as a ``Deployment`` and
  ``Service`` whose ``--prefill``/``--decode`` endpoints are those Services
  (the role's child LeaderWorkerSets carry a revision hash in their names, so
  pods are reached through our own Services, never by name).
* Companions: a node-local one (LMCache server, a feature's helper) is a
  second container of every vLLM pod (same network namespace: ``localhost``);
  the Mooncake master and store are their own ``Deployment`` and ``Service``;
  the Mooncake config file is a ``ConfigMap`` mounted where
  ``MOONCAKE_CONFIG_PATH`` points.

Commands inside the manifests are the plan's argv (same tokens, same order);
only the plan's ``$PLACEHOLDER`` names are replaced, by what the cluster
provides. Kubernetes expands ``$(VAR)`` in ``command``, ``args`` and env
values from the container's env, and ``$$`` to ``$``; it never runs a shell,
so a shell ``$VAR`` would stay literal. Hence every ``$`` of plan text that is
followed by ``$`` or ``(`` is escaped as ``$$`` first, then each placeholder
becomes a ``$(VAR)`` reference:

* the head's address (``$HEAD_IP``, ``$INSTANCE_n_HEAD_IP``, a pool's
  ``$PREFILL_NODE_1``) → ``$(LWS_LEADER_ADDRESS)``, which the LeaderWorkerSet
  controller sets in every pod of a group (with ``LWS_WORKER_INDEX``, the
  pod's index in the group, and ``LWS_GROUP_SIZE``; lws docs "Labels,
  Annotations and Environment Variables");
* a node's own address (``VLLM_NIXL_SIDE_CHANNEL_HOST``) → ``$(POD_IP)``
  (downward API ``status.podIP``);
* the node rank: the worker template is shared by indices 1…n-1, so a token
  that is the rank (``--node-rank``) is ``$(LWS_WORKER_INDEX)``; a token that is
  a multiple of it (``--data-parallel-start-rank`` = rank × local DP size) is
  computed by a fixed ``/bin/sh`` wrapper that multiplies that one argument and
  ``exec``s the argv unchanged otherwise (arguments are passed as positional
  parameters, never parsed by the shell);
* values the cluster owner must choose (network interface, RDMA device
  names, a recipe's own placeholders) are env vars marked ``PARAMETER``.

``tests/test_k8s.py`` expands every container with a pod's env as Kubernetes
does (and runs the wrappers in a real shell) and compares with the plan's argv.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import Any, Optional, cast

from composer.argv import flag_value
from composer.outputs import Command, CompanionProcess, Manifests
from composer.positions import PLATFORM_NAMES, POD_NAMES, SHELL_NAMES, check, device_indices
from composer.shell import PLACEHOLDER_RE, comment, quote
from composer.yaml_text import dump_all

GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "tpu": "google.com/tpu"}
"""Extended resource of each brand's device plugin (NVIDIA, AMD ROCm, GKE TPU)."""
CACHE_PATH = "/root/.cache/huggingface"
"""The Hugging Face cache in the container (the Docker form mounts the same path)."""
MOONCAKE_DIR = "/etc/mooncake"
LEADER, WORKER_INDEX, POD_IP = "LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX", "POD_IP"
RESERVED_ENV = frozenset({LEADER, WORKER_INDEX, POD_IP, "LWS_GROUP_SIZE", "LWS_NAME", "LWS_WORKER_GROUP_INDEX"})
"""Env names the pods get from Kubernetes (the LWS controller, the downward
API): a recipe that sets one would override what the manifests rely on."""
MAX_CACHE_GI = 1 << 20
"""Largest Hugging Face cache claim written (1 PiB): past it a weights size is
not a model's (``vram_minimum_gb: 1e308`` would overflow ``math.ceil``)."""
RANK_FLAGS = ("--node-rank", "--data-parallel-start-rank")
"""Flags whose value is derived from the node rank (``composer.parallel.node_units``)."""
LABEL = "app.kubernetes.io/name"
COMPONENT = "app.kubernetes.io/component"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GPU_LABEL = "recipes.vllm.ai/gpu"
PARAM = "PARAMETER"
LWS_RELEASE = "v0.9.0"
"""The LeaderWorkerSet release the manifests are written for: v0.9.0 bundles
the DisaggregatedSet API P/D plans use (README "Deploy on Kubernetes")."""
LWS_INSTALL = (f"kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws/releases/download/"
               f"{LWS_RELEASE}/manifests.yaml")
DEVICE_PLUGINS = {
    "nvidia": "the NVIDIA GPU Operator or NVIDIA device plugin (advertises nvidia.com/gpu)",
    "amd": "the AMD GPU device plugin or AMD GPU Operator (advertises amd.com/gpu)",
    "tpu": "GKE TPU node pools (advertise google.com/tpu)",
}
RDMA_EXAMPLE = "rdma/rdma_shared_device_a: 1"
"""A named example of an RDMA device resource: the one the NVIDIA Network
Operator's k8s-rdma-shared-dev-plugin advertises in its default config."""
CPU_PER_GPU, MEM_GI_PER_GPU, SHM_GI_PER_GPU = 4, 16, 2
"""Requests per GPU of a pod (starting points, marked PARAMETER): CPU cores for
the rank's process, the API server and tokenizers; GiB of host memory for
loading weights and the process (plus /dev/shm, which counts toward it, and
any KV offload buffer); GiB of memory-backed /dev/shm for NCCL and vLLM's
shared-memory broadcast."""


def _gi(value: float) -> str:
    return f"{max(1, math.ceil(value))}Gi"


def _kv_host_gib(cmd: Command, gpus: int) -> float:
    """Host memory a KV offload connector pins in this pod, in GiB: its
    ``--kv-transfer-config`` ``cpu_bytes_to_use_per_rank`` × the pod's GPU
    ranks (or ``cpu_bytes_to_use`` in total), else 0."""
    raw = flag_value(list(cmd.argv), "--kv-transfer-config")
    try:
        extra = json.loads(raw).get("kv_connector_extra_config", {}) if raw else {}
    except (ValueError, AttributeError):
        return 0.0
    if not isinstance(extra, dict):
        return 0.0
    per_rank = extra.get("cpu_bytes_to_use_per_rank")
    if isinstance(per_rank, (int, float)):
        return per_rank * gpus / 2 ** 30
    total = extra.get("cpu_bytes_to_use")
    return total / 2 ** 30 if isinstance(total, (int, float)) else 0.0


def network_needs(layouts: dict) -> list[str]:
    """What traffic of the plan crosses nodes and what network it needs, one
    sentence per pool or deployment (``layouts``: pool or None → Layout):
    TP across nodes all-reduces every layer (InfiniBand or RoCE); expert
    parallelism across nodes exchanges tokens every MoE layer (RDMA); pipeline
    stages pass activations (RDMA recommended); P/D moves the KV cache between
    pools over NIXL (RDMA recommended). Empty for one node."""
    out = []
    for pool, lay in layouts.items():
        where = f"The {pool} pool" if pool else "The deployment"
        if lay.nodes < 2:
            continue
        if lay.tp > lay.used_per_node:
            out.append(f"{where} runs TP {lay.tp} across {lay.nodes} nodes: every layer's all-reduce crosses nodes, so it "
                       "needs InfiniBand or RoCE (RDMA) between the GPU nodes; over the pod network (TCP) it runs many "
                       "times slower.")
        elif lay.mode in ("dep", "tep"):
            out.append(f"{where} runs expert parallelism across {lay.nodes} nodes: every MoE layer exchanges tokens "
                       "between nodes, so it needs RDMA (InfiniBand or RoCE) to be fast.")
        elif lay.pp > 1:
            out.append(f"{where} runs {lay.pp} pipeline stages across nodes: activations pass between nodes; RDMA is "
                       "recommended, TCP works.")
    if "prefill" in layouts:
        out.append("P/D moves each prompt's KV cache from the prefill to the decode pool over NIXL: RDMA (UCX over "
                   "InfiniBand or RoCE) is recommended; over TCP the transfer adds latency.")
    return out


class K8sError(ValueError):
    """A plan the Kubernetes form cannot express faithfully (e.g. followers that
    differ by more than their rank)."""


def _slug(text: str, limit: int) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return s if s[:1].isalpha() else ("m-" + s)[:limit].strip("-")


def escape(text: str) -> str:
    """Plan text for a Kubernetes-expanded field: ``$`` before ``$`` or ``(``
    doubled, so Kubernetes gives the text back unchanged."""
    return re.sub(r"\$(?=[$(])", "$$", text)


class _Form:
    """State of one manifest set: names, parameters, comments per document."""

    def __init__(self, base: str, namespace: str = "default") -> None:
        self.base = base
        self.namespace = namespace
        self.docs: list[tuple[dict, dict]] = []
        self.params: dict[str, str] = {}

    def meta(self, name: str, component: str, notes: dict, *extra_notes: str) -> dict:
        notes[("metadata", "namespace")] = [f"{PARAM} namespace: the namespace to deploy into (every object uses the same one)."]
        if extra_notes:
            notes[("metadata",)] = list(extra_notes)
        return {"name": name, "namespace": self.namespace, "labels": {LABEL: self.base, COMPONENT: component}}

    def add(self, obj: dict, notes: dict) -> None:
        self.docs.append((obj, notes))


def _argv_of(text: str) -> list[str]:
    """The argv of a companion's command text (``recipe_command`` output: quoted
    words, ``#`` comment lines, backslash-newline continuations)."""
    return shlex.split(text.replace("\\\n", " "), comments=True)


def _install_line(text: Optional[str]) -> Optional[str]:
    """An install line for a container start: ``uv pip install`` gets
    ``--system`` (the vLLM images install into the system Python with uv and
    have no virtual environment); the words are quoted again for ``sh``."""
    if not text:
        return None
    words = _argv_of(text)
    if not words:
        return None
    if words[:3] == ["uv", "pip", "install"] and "--system" not in words:
        words = words[:3] + ["--system"] + words[3:]
    return " ".join(quote(w) for w in words)


def _wrapper(installs: list[str], times: dict[int, int]) -> Optional[str]:
    """The fixed ``/bin/sh -c`` script for a container that must install a
    package first or compute a rank multiple: it runs the installs, multiplies
    positional argument ``p`` by ``times[p]`` (Kubernetes has put the worker
    index there) and ``exec``s ``$0 "$@"``, the argv itself. Callers put it
    in ``command`` through ``escape`` (its ``$((`` must not be read as a
    Kubernetes ``$(VAR)`` reference)."""
    if not installs and not times:
        return None
    lines = ["set -e"] + installs
    if times:
        cases = " ".join(f"{p}) a=$((a * {k}));;" for p, k in sorted(times.items()))
        lines.append(f'i=0; for a do shift; i=$((i + 1)); case $i in {cases} esac; set -- "$@" "$a"; done')
    lines.append('exec "$0" "$@"')
    return "\n".join(lines)


class _Sub:
    """Placeholder → replacement for one container (replacements are already
    in Kubernetes form: ``$(VAR)`` or plain text without ``$``).

    Each ``$NAME`` of plan text is handled by what provides it, deliberately:

    * the form's own table (``$HEAD_IP`` → ``$(LWS_LEADER_ADDRESS)``);
    * a name each pod gets (``composer.positions.POD_NAMES``: ``LWS_*``,
      ``POD_IP``, ``HF_TOKEN``) → ``$(NAME)`` of the pod's own variable, listed
      in ``provided`` and ``unknown`` (``_env_list`` defines ``POD_IP`` and
      ``HF_TOKEN``, the controller ``LWS_*``, which only exist in a
      LeaderWorkerSet: ``lws``) — never shadowed by a value;
    * a name the shell provides (``SHELL_NAMES``: ``$HOME``, ``$PATH``):
      Kubernetes runs no shell and does not expand the image's variables, so
      the plan cannot be expressed (``K8sError``) rather than run with ``""``;
    * any other name is the person's to set: a ``PARAMETER`` env var
      (``unknown``)."""

    def __init__(self, table: dict[str, str], form: _Form, unknown: list[str], lws: bool = True) -> None:
        self.table, self.form, self.unknown, self.lws = table, form, unknown, lws
        self.provided: list[str] = []

    def __call__(self, text: str) -> str:
        def one(m: re.Match) -> str:
            name = m.group(0)[1:]
            if name in self.table:
                return self.table[name]
            if name in POD_NAMES:
                if name.startswith("LWS_") and not self.lws:
                    raise K8sError(f"the recipe's text uses ${name}, which only the pods of a LeaderWorkerSet get "
                                   "(this plan runs as a single Deployment)")
                if name not in self.provided:
                    self.provided.append(name)
                if name not in self.unknown:  # the container env must resolve it: _env_list defines it
                    self.unknown.append(name)
                return f"$({name})"
            if name in SHELL_NAMES:
                raise K8sError(f"the recipe's text uses ${name}, which a shell expands from its own environment; "
                               "Kubernetes starts the container without a shell, so write the value out")
            if check(name, "k8s-ref"):
                raise K8sError(f"${name} cannot be a Kubernetes $(NAME) reference")
            if name not in self.unknown:
                self.unknown.append(name)
            return f"$({name})"

        return PLACEHOLDER_RE.sub(one, escape(text))


def _provided_env(names: list[str], defined: set[str]) -> list[dict]:
    """Env entries defining the pod-provided names plan text refers to
    (``POD_IP`` from the downward API, ``HF_TOKEN`` from the ``hf-token``
    Secret) that ``defined`` does not define yet; ``LWS_*`` the controller sets."""
    out: list[dict] = []
    for name in names:
        if name in defined:
            continue
        if name == POD_IP:
            out.append({"name": POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        elif name == "HF_TOKEN":
            out.append(_HF_TOKEN)
    return out


_HF_TOKEN = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}}}


def _port_of(argv, default: str) -> int:
    """The TCP port a command serves (its ``--port``), checked for its position
    (``composer.positions``); raises ``K8sError`` for one a manifest cannot hold."""
    value = flag_value(list(argv), "--port") or default
    problem = check(value, "port")
    if problem:
        raise K8sError(f"--port {problem}")
    return int(value)


def _gpu_count(lay) -> int:
    return lay.used_per_node


def _probe(port: int, path: str = "/health", **kw) -> dict:
    return {"httpGet": {"path": path, "port": port}, **kw}


def _vllm_container(form: _Form, name: str, image: str, cmd: Command, sub_args: list[str], env: list[dict],
                    env_notes: dict, gpus: int, brand: Optional[str], installs: list[str], times: dict[int, int],
                    mounts: list[dict], notes: dict, path: tuple, multi_node: bool, half: bool = False) -> dict:
    """One vLLM container: argv (with a wrapper when needed), env, the brand's
    GPU resource, ports and probes on vLLM's ``/health`` when it serves HTTP."""
    serves = "--headless" not in cmd.argv and cmd.argv[:2] == ("vllm", "serve")
    port = _port_of(cmd.argv, "8000")
    script = _wrapper(installs, times)
    c: dict[str, Any] = {"name": name, "image": image}
    if script:
        c["command"] = ["/bin/sh", "-c", escape(script)]
        c["args"] = sub_args
        notes[path + ("command",)] = ["A fixed wrapper: " + ("installs the connector package, " if installs else "")
                                     + ("computes the rank-derived argument from the worker index, " if times else "")
                                     + "then execs the args below unchanged."]
    else:
        c["command"] = sub_args[:1]
        c["args"] = sub_args[1:]
    if env:
        c["env"] = env
        for i, text in env_notes.items():
            notes[path + ("env", i)] = text
    res: dict[str, Any] = {}
    per = max(1, gpus)
    kv_gib = _kv_host_gib(cmd, per)
    requests: dict[str, Any] = {"cpu": str(CPU_PER_GPU * per), "memory": _gi(MEM_GI_PER_GPU * per + SHM_GI_PER_GPU * per + kv_gib)}
    cpu_note = [f"{PARAM} cpu-memory: requests of {CPU_PER_GPU} CPU cores and {MEM_GI_PER_GPU} GiB per GPU, plus the "
                f"/dev/shm volume ({SHM_GI_PER_GPU} GiB per GPU, memory-backed, so it counts here)"
                + (f" and {kv_gib:g} GiB the KV offload connector pins" if kv_gib else "")
                + "; a starting point: raise them to what your nodes can give. No memory limit, so loading the "
                "weights is never OOM-killed."]
    if brand in GPU_RESOURCE and gpus:
        res = {"limits": {GPU_RESOURCE[brand]: gpus}, "requests": {GPU_RESOURCE[brand]: gpus, **requests}}
        notes[path + ("resources",)] = [f"{gpus} GPU(s) per pod: the GPUs of one node this command runs ranks on"
                                        + (" (half of the node: a co-located P/D pool)." if half else ".")] + cpu_note + (
            [f"{PARAM} rdma: for RDMA between nodes add your RDMA device resource under limits and requests, e.g. "
             f"{RDMA_EXAMPLE} (the NVIDIA Network Operator's RDMA shared device plugin); without it, or the "
             "host-network parameter, NCCL and NIXL fall back to TCP over the pod network."] if multi_node else [])
    else:
        res = {"requests": requests}
        notes[path + ("resources",)] = cpu_note
    c["resources"] = res
    if serves:
        c["ports"] = [{"name": "http", "containerPort": port}]
        c["startupProbe"] = _probe(port, periodSeconds=10, failureThreshold=360)
        c["readinessProbe"] = _probe(port, periodSeconds=10)
        c["livenessProbe"] = _probe(port, periodSeconds=30, failureThreshold=3)
        notes[path + ("startupProbe",)] = ["Loading the weights may take long: up to 1 hour (360 × 10 s) before liveness applies."]
    else:
        notes[path] = ["A follower (--headless) serves no HTTP API, so it has no /health probe; "
                                   "the group is recreated when any pod of it fails."]
    c["volumeMounts"] = mounts
    if multi_node:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        notes[path + ("securityContext",)] = ["IPC_LOCK lets NCCL and NIXL pin memory for RDMA."]
    return c


def _volumes(form: _Form, extra: list[dict], gpus: int = 1) -> list[dict]:
    """The pod's volumes: /dev/shm in memory with a size limit
    (``SHM_GI_PER_GPU`` per GPU), the shared Hugging Face cache claim, ``extra``."""
    return [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _gi(SHM_GI_PER_GPU * max(1, gpus))}},
            {"name": "hf-cache", "persistentVolumeClaim": {"claimName": f"{form.base}-hf-cache"}}] + extra


def _mounts(extra: list[dict]) -> list[dict]:
    return [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "hf-cache", "mountPath": CACHE_PATH}] + extra


def _pod_spec(form: _Form, containers: list[dict], volumes: list[dict], notes: dict, path: tuple, gpu: Optional[str],
              hw_label: str, multi_node: bool = False) -> dict:
    spec: dict[str, Any] = {}
    if multi_node:
        notes[path + ("containers",)] = [
            f"{PARAM} host-network: instead of an RDMA device resource, hostNetwork: true with dnsPolicy: "
            "ClusterFirstWithHostNet here gives the pods the nodes' own NICs (InfiniBand or RoCE); then set "
            "network-interface to the node's interface and keep one such pod per node."]
    if gpu is not None:
        spec["nodeSelector"] = {GPU_LABEL: hw_label}
        notes[path + ("nodeSelector",)] = [
            f"{PARAM} gpu-node-selector: schedule on {gpu} nodes only. Label them "
            f"(kubectl label node NODE {GPU_LABEL}={hw_label}) or use a label they already carry "
            "(e.g. one your GPU operator's node labeller sets for the GPU model)."]
    spec["containers"] = containers
    spec["volumes"] = volumes
    notes[path + ("volumes",)] = ["/dev/shm in memory (NCCL and vLLM's shared memory; Docker's --ipc=host) "
                                  "and the shared Hugging Face cache.",
                                  f"{PARAM} shm-size: the sizeLimit of /dev/shm ({SHM_GI_PER_GPU} GiB per GPU)."]
    return spec


def _env_list(form: _Form, cmd_env: dict[str, str], sub: _Sub, with_pod_ip: bool, fixed: dict[str, str],
              gpus: int = 0) -> tuple[list[dict], dict[int, list[str]]]:
    """The container env: the pod's IP (downward API) when referenced, the
    plan's env in order (placeholders replaced; a GPU index list
    renumbered for the ``gpus`` the pod requests, ``composer.positions.DEVICE_LISTS``), the HF token from a Secret;
    env vars that are parameters come first so later values can refer to them.
    A name the pod provides (``composer.positions.POD_NAMES``) is defined by
    what provides it, never as a ``PARAMETER`` with an empty value."""
    env: list[dict] = []
    notes: dict[int, list[str]] = {}
    body: list[dict] = []
    body_notes: dict[int, list[str]] = {}  # index in body → its comment
    for k, v in cmd_env.items():
        if k in fixed:
            body.append({"name": k, "value": fixed[k]})
        elif (ids := device_indices(k, v)) is not None:
            # The device plugin gives the container its GPUs numbered from 0 (nvidia.com/gpu, amd.com/gpu):
            # a whole node's indices ("4,5,6,7") name devices the pod does not have; the same count does.
            listed = len(ids)
            count = min(listed, gpus) if gpus else listed  # the command uses the first ones it lists
            body_notes[len(body)] = [f"The command's {k}={v} numbers a whole node's GPUs; the pod sees the {count} "
                                     f"it requests as {'0' if count == 1 else f'0–{count - 1}'}."]
            body.append({"name": k, "value": ",".join(str(i) for i in range(count))})
        elif v == f"${k}":  # the recipe leaves this variable to the person running it (or the pod: $HF_TOKEN)
            if k not in sub.unknown:
                sub.unknown.append(k)
        else:
            body.append({"name": k, "value": sub(v)})
    if with_pod_ip or POD_IP in sub.unknown:
        env.append({"name": POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    token_early = "HF_TOKEN" in sub.unknown and "HF_TOKEN" not in cmd_env  # an env value refers to it
    for name in sub.unknown:
        if name in POD_NAMES:
            continue  # POD_IP above, HF_TOKEN below, LWS_* from the controller
        own = next((e for e in body if e["name"] == name), None)
        if own is not None:  # the recipe sets it: its value, early enough for $(NAME) to see it
            body.remove(own)
            env.append(own)
            continue
        notes[len(env)] = [_param_note(name)]
        env.append({"name": name, "value": form.params.get(name, "")})
    if token_early or cmd_env.get("HF_TOKEN") == "$HF_TOKEN":
        env.append(dict(_HF_TOKEN))
    notes.update({len(env) + i: note for i, note in body_notes.items()})
    env += body
    if "HF_TOKEN" not in cmd_env and not token_early:
        notes[len(env)] = [f"{PARAM} hf-token: the Hugging Face token for gated models: "
                           "kubectl create secret generic hf-token --from-literal=token=hf_... (optional for public models)."]
        env.append(dict(_HF_TOKEN))
    return env, notes


def _side_env(unknown: list[str], notes: dict, path: tuple) -> list[dict]:
    """A companion container's env: a ``PARAMETER`` per name the person sets
    (noted under ``path``), the pod-provided names by what provides them."""
    env: list[dict] = _provided_env(unknown, set())
    for n in unknown:
        if n not in POD_NAMES:
            notes[path + (len(env),)] = [_param_note(n)]
            env.append({"name": n, "value": ""})
    return env


PARAM_NOTES = {
    "IFACE_NAME": "network-interface: the pod's network interface NCCL and Gloo use between nodes (eth0 on most CNIs; your RDMA/secondary interface if you attach one).",
    "MOONCAKE_DEVICE_NAME": "mooncake-devices: RDMA NIC list for Mooncake (\"mlx5_0,mlx5_1\"); empty = auto-selection.",
    "MOONCAKE_STORE_DEVICE_NAME": "mooncake-store-devices: the store node's RDMA NIC list; empty = auto-selection.",
}


def _param_note(name: str) -> str:
    return f"{PARAM} " + PARAM_NOTES.get(name, f"{name.lower().replace('_', '-')}: the recipe leaves ${name} for you to set.")


def _group_args(cmds: list[Command], table_of, form: _Form) -> tuple[list[str], dict[int, int], list[str]]:
    """The worker template's args for followers ``cmds`` (ranks 1…n-1): each
    rank flag's value becomes ``$(LWS_WORKER_INDEX)`` (multiplied by the
    wrapper when it is a multiple of the rank); every other token must be the
    same on every follower. Returns (args, {position: multiplier}, unknown)."""
    unknown: list[str] = []
    per = []
    for c in cmds:
        sub = _Sub(table_of(c), form, unknown)
        per.append([sub(t) for t in c.argv])
    first = per[0]
    if any(len(p) != len(first) for p in per):
        raise K8sError("the follower commands differ in length: one worker template cannot run them")
    args, times = list(first), {}
    for i in range(1, len(first)):
        if first[i - 1] not in RANK_FLAGS:
            continue
        ks = {int(p[i]) // c.node_rank if p[i].isascii() and p[i].isdigit() and int(p[i]) % c.node_rank == 0 else None
              for p, c in zip(per, cmds)}
        if len(ks) != 1 or None in ks or 0 in ks:
            raise K8sError(f"{first[i - 1]} is not a fixed multiple of the node rank")
        args[i] = f"$({WORKER_INDEX})"
        k = cast(int, ks.pop())  # checked above: not None
        if k != 1:
            times[i] = k
        for p in per:
            p[i] = args[i]
    if any(p != args for p in per):
        raise K8sError("the follower commands differ by more than their rank: one worker template cannot run them")
    envs = [{k: v for k, v in c.env.items() if k not in _own_address(c)} for c in cmds]
    if any(e != envs[0] for e in envs):
        raise K8sError("the follower commands' env differ by more than their own address")
    return args, times, unknown


def build(ctx, sel, commands: list[Command], companions: list[CompanionProcess], image: str, brand: Optional[str],
          layouts: dict[Optional[str], Any], weights_gb: Optional[float], summary: str, blocked: bool,
          image_note: str = "", curl: Optional[tuple[str, ...]] = None) -> Manifests:
    """The manifests of a plan. ``layouts`` maps pool (None outside P/D) to its
    ``Layout``; ``weights_gb`` sizes the cache claim; ``image`` is what the
    pods run (already pinned, ``run_forms.pinned_image``) and ``image_note`` why that
    one; ``curl`` the plan's client check (argv), aimed at the Service in the
    steps. Raises ``K8sError`` when a plan cannot be expressed (tests hold
    every plan to it)."""
    for c in commands:
        clash = sorted(k for k in set(c.env) & (RESERVED_ENV | PLATFORM_NAMES)
                       if not (k == "HF_TOKEN" and c.env[k] == "$HF_TOKEN"))
        if clash:
            who = "the container image or shell" if clash[0] in SHELL_NAMES else "Kubernetes (or this form) sets in each pod"
            raise K8sError(f"the recipe sets {clash[0]}, which {who} provides")
        for k in c.env:
            problem = check(k, "k8s-ref")
            if problem:
                raise K8sError(f"environment variable {problem}")
    hw = ctx.hw(sel.hardware)
    name = ctx.recipe_id.split("/")[-1]
    file_name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{name}-{sel.hardware}") + ".yaml"
    base = _slug(name, 26) + "-" + _slug(sel.hardware, 8)
    form = _Form(base)
    for pname in ("IFACE_NAME",):
        form.params[pname] = "eth0"
    gpu_name = hw.display_name if brand in GPU_RESOURCE else None
    serving = [c for c in commands if c.role != "router"]
    router = next((c for c in commands if c.role == "router"), None)
    store = ctx.catalog.strategies.get(sel.kv_offload) if sel.kv_offload else None
    kv = ctx.catalog.taxonomy.kv_offload.get(sel.kv_offload) if sel.kv_offload else None

    # Packages vLLM itself needs for the KV connector (the pip form's extras).
    lines: list[Optional[str]] = []
    if kv is not None and kv.install:
        lines.append(_install_line(kv.install))
    mooncake = store is not None and store.deploy_type == "kv_store_lb"
    if mooncake and store is not None:
        inst = (store.vllm or {}).get("install") or {}
        line = inst.get(brand) if isinstance(inst, dict) else inst
        if line:
            lines.append(_install_line(str(line)))
    installs = [i for i in dict.fromkeys(lines) if i]

    fixed_env: dict[str, str] = {}
    extra_volumes: list[dict] = []
    extra_mounts: list[dict] = []
    if mooncake:
        _mooncake(form, store, image, brand, fixed_env, extra_volumes, extra_mounts)
    sidecars = [c for c in companions if not c.label.startswith("Mooncake")]

    gib = (weights_gb or 80) * 1e9 / 2 ** 30 * 1.25
    if not math.isfinite(gib) or gib > MAX_CACHE_GI:
        raise K8sError(f"the weights ({weights_gb:g} GB) need a cache claim larger than {MAX_CACHE_GI:,} GiB")
    cache_gi = max(10, math.ceil(gib))
    pvc_notes: dict = {}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": form.meta(f"{base}-hf-cache", "model-cache", pvc_notes),
           "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": f"{cache_gi}Gi"}}}}
    pvc_notes[("spec",)] = [f"{PARAM} storage-class: add storageClassName: YOUR-CLASS (without it the cluster's default "
                            "StorageClass is used). Every vLLM pod mounts this claim, so the class must support ReadWriteMany.",
                            f"{PARAM} cache-size: {cache_gi}Gi = the weights ({weights_gb or 'unknown'} GB) plus 25 %."]
    form.add(pvc, pvc_notes)

    def sidecar_containers(notes: dict, path: tuple, start: int, lws: bool) -> list[dict]:
        out: list[dict] = []
        names = {"vllm"}
        for j, comp in enumerate(sidecars):
            sub = _Sub({}, form, [], lws)
            argv = [sub(t) for t in _argv_of(comp.command)]
            if not argv:
                continue
            script = _wrapper([i for i in [_install_line(comp.install)] if i], {})
            cname = _slug(comp.label, 40)
            cname = cname if cname not in names else f"{cname[:30]}-{j}"  # container names are unique in a pod
            names.add(cname)
            c: dict[str, Any] = {"name": cname, "image": image}
            if script:
                c.update({"command": ["/bin/sh", "-c", escape(script)], "args": argv})
            else:
                c.update({"command": argv[:1], "args": argv[1:]})
            if sub.unknown:
                c["env"] = _side_env(sub.unknown, notes, path + (start + len(out), "env"))
            c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
            notes[path + (start + len(out),)] = [f"{comment(comp.label)}: {comment(comp.description)}",
                                                 "Runs beside vLLM in the same pod (same node, reachable on localhost)."]
            out.append(c)
        return out

    def pod_template(cmd: Command, args: list[str], times: dict, unknown: list[str], table: dict, component: str,
                     lay, multi_node: bool, extra_labels: dict | None = None, lws: bool = True) -> tuple[dict, dict]:
        notes: dict = {}
        sub = _Sub(table, form, list(unknown), lws)
        own = _own_address(cmd)
        env, env_notes = _env_list(form, dict(cmd.env), sub, bool(own), {**fixed_env, **own}, _gpu_count(lay))
        container = _vllm_container(form, "vllm", image, cmd, args, env, env_notes, _gpu_count(lay), brand,
                                    installs, times, _mounts(extra_mounts), notes, ("spec", "containers", 0), multi_node,
                                    half=bool(lay.devices))
        containers = [container] + sidecar_containers(notes, ("spec", "containers"), 1, lws)
        spec = _pod_spec(form, containers, _volumes(form, extra_volumes, _gpu_count(lay)), notes, ("spec",), gpu_name,
                         sel.hardware, multi_node)
        labels = {LABEL: base, COMPONENT: component, **(extra_labels or {})}
        return {"metadata": {"labels": labels}, "spec": spec}, notes

    def nest(notes: dict, prefix: tuple) -> dict:
        return {prefix + k: v for k, v in notes.items()}

    header = [f"Kubernetes manifests for {ctx.recipe.meta.title}: {summary}",
              f"Generated by the vLLM recipe configurator (file {file_name}). Apply: kubectl apply -f {file_name}",
              "Values marked PARAMETER are the cluster owner's choice: read and set them before applying."]
    if image_note:
        header.append(f"Image: {image}: {image_note}")
    if blocked:
        header.insert(1, "The plan has errors (see the page's notices): these manifests are NOT expected to work.")
    pods = len(serving)
    if sel.prefill:
        controller = "pd"
        header.append(f"Needs: the LeaderWorkerSet controller ({LWS_RELEASE} or later, which bundles DisaggregatedSet) "
                      "and the GPU device plugin.")
        _pd(form, serving, router, layouts, pod_template, nest, image)
    else:
        nodes = sel.nodes
        instances = max(1, len(serving) // max(1, nodes))
        groups = [serving[i * nodes:(i + 1) * nodes] for i in range(instances)]
        lay = layouts[None]
        if nodes == 1 and instances == 1:
            controller = "deployment"
            header.append("Needs: the GPU device plugin of your accelerators.")
            _deployment(form, groups[0][0], pod_template, lay)
        else:
            controller = "lws"
            header.append("Needs: the LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1) and the GPU device plugin.")
            _lws(form, groups, pod_template, nest, lay)
        if router is not None:
            _router(form, router, image, {})
    needs = network_needs(layouts)
    header += ["Network: " + n for n in needs]
    entry = (f"{base}-router", int(flag_value(list(router.argv), "--port") or "30000")) if router is not None else (
        (base, _port(serving[0])) if controller == "deployment" else (f"{base}-api", _port(serving[0])))
    items = preflight(controller, brand, gpu_name, sel.hardware, pods, needs, cache_gi, mooncake)
    steps = apply_steps(controller, base, file_name, sel.hardware, pods if gpu_name else 0, entry, curl)
    return Manifests(file_name=file_name, yaml=dump_all(form.docs, header), objects=tuple(d for d, _ in form.docs),
                     image=image, preflight=tuple(items), steps=tuple(steps))


def preflight(controller: str, brand: Optional[str], gpu_name: Optional[str], hw_id: str, pods: int,
              needs: list[str], cache_gi: int, mooncake: bool) -> list[str]:
    """What the cluster must have before ``kubectl apply``, derived from the
    plan: the controller of its objects (``deployment``, ``lws``: a
    LeaderWorkerSet, ``pd``: a DisaggregatedSet) and its minimum release, the
    brand's GPU device plugin, the network the cross-node traffic needs
    (``network_needs``), the Hugging Face token Secret, a ReadWriteMany
    storage class for ``cache_gi`` GiB, and ``pods`` GPU nodes carrying the
    node-selector label."""
    out = []
    if controller == "pd":
        out.append(f"The LeaderWorkerSet controller {LWS_RELEASE} or later: it bundles the DisaggregatedSet API "
                   "(disaggregatedset.x-k8s.io/v1) the P/D pools use.")
    elif controller == "lws":
        out.append("The LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1; these manifests are written for "
                   f"{LWS_RELEASE}): one group of pods per vLLM instance across nodes.")
    if brand in DEVICE_PLUGINS:
        out.append(f"GPU scheduling: {DEVICE_PLUGINS[brand]} on every {gpu_name} node.")
    elif gpu_name is None:
        out.append("No GPU resource is requested (this image runs on CPUs).")
    if needs:
        out.append("RDMA between the GPU nodes: an RDMA device plugin advertising a resource (e.g. "
                   f"{RDMA_EXAMPLE}; add it where the rdma PARAMETER says) or host networking (the host-network "
                   "PARAMETER). " + " ".join(needs))
    out.append("A Secret hf-token with your Hugging Face token for gated models (optional for public ones).")
    out.append(f"A StorageClass with ReadWriteMany access for the {cache_gi} GiB model cache every pod mounts "
               "(the cluster's default class unless you set storage-class).")
    if gpu_name:
        out.append(f"{pods} {gpu_name} node{'s' if pods > 1 else ''} labelled {GPU_LABEL}={hw_id} (or set "
                   "gpu-node-selector to a label they carry), each with the GPUs its pod requests free.")
    if mooncake:
        out.append("Mooncake: the master and store pods reach every vLLM pod (RDMA for the transfer engine's "
                   "rdma protocol, or set it to tcp in the ConfigMap).")
    return out


def apply_steps(controller: str, base: str, file_name: str, hw_id: str, nodes: int, entry: tuple[str, int],
                curl: Optional[tuple[str, ...]]) -> list[str]:
    """The shell steps to run the manifests: install the controller (once per
    cluster), create the token Secret, label the GPU nodes, apply, wait until
    the API answers, reach it through ``entry`` (Service, port) with
    ``kubectl port-forward`` and send the plan's client check there."""
    name, port = entry
    out = []
    if controller in ("lws", "pd"):
        out.append(f"{LWS_INSTALL}   # once per cluster")
    out.append("kubectl create secret generic hf-token --from-literal=token=hf_...   # gated models")
    if nodes:
        out.append(f"kubectl label node {' '.join(f'GPU_NODE_{i + 1}' for i in range(min(nodes, 4)))}"
                   f"{' …' if nodes > 4 else ''} {GPU_LABEL}={hw_id}   # {nodes} node{'s' if nodes > 1 else ''}")
    out.append(f"kubectl apply -f {file_name}")
    wait = {"deployment": f"kubectl rollout status deployment/{base} --timeout=60m",
            "lws": f"kubectl wait --for=condition=Available leaderworkerset/{base} --timeout=60m",
            "pd": f"kubectl wait --for=condition=Ready pod -l {LABEL}={base} --timeout=60m"}[controller]
    out.append(wait + "   # loading the weights can take long")
    out.append(f"kubectl port-forward svc/{name} {port}:{port}   # in another terminal")
    if curl:
        argv = list(curl)
        argv[1] = re.sub(r"^http://[^/]+", f"http://localhost:{port}", argv[1])
        out.append(" ".join(quote(t) for t in argv))
    return out


def _head_table(cmd: Command, pool: Optional[str]) -> dict[str, str]:
    """Placeholders of one serve command → Kubernetes form."""
    table = {"HEAD_IP": f"$({LEADER})"}
    for m in PLACEHOLDER_RE.finditer(" ".join(cmd.argv)):
        n = m.group(0)[1:]
        if re.fullmatch(r"INSTANCE_\d+_HEAD_IP", n):
            table[n] = f"$({LEADER})"
    if pool:
        table[f"{pool.upper()}_NODE_1"] = f"$({LEADER})"
    return table


def _own_address(cmd: Command) -> dict[str, str]:
    """Env vars that hold the node's own address → ``$(POD_IP)``."""
    return {"VLLM_NIXL_SIDE_CHANNEL_HOST": f"$({POD_IP})"} if "VLLM_NIXL_SIDE_CHANNEL_HOST" in cmd.env else {}


def _serve_args(cmd: Command, form: _Form, table: dict, lws: bool = True) -> tuple[list[str], list[str]]:
    unknown: list[str] = []
    sub = _Sub(table, form, unknown, lws)
    return [sub(t) for t in cmd.argv], unknown


def _deployment(form: _Form, cmd: Command, pod_template, lay) -> None:
    table = _head_table(cmd, None)
    args, unknown = _serve_args(cmd, form, table, lws=False)
    template, tnotes = pod_template(cmd, args, {}, unknown, table, "serve", lay, False, lws=False)
    notes: dict = {}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": form.meta(form.base, "serve", notes),
           "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": {LABEL: form.base, COMPONENT: "serve"}}, "template": template}}
    notes[("spec", "strategy")] = ["Recreate: a new pod starts after the old one released its GPUs."]
    notes.update({("spec", "template") + k: v for k, v in tnotes.items()})
    form.add(dep, notes)
    _service(form, form.base, "serve", {LABEL: form.base, COMPONENT: "serve"}, _port(cmd))


def _port(cmd: Command) -> int:
    return _port_of(cmd.argv, "8000")


def _service(form: _Form, name: str, component: str, selector: dict, port: int, note: str = "") -> None:
    notes: dict = {}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": form.meta(name, component, notes, *([note] if note else [])),
           "spec": {"selector": selector, "ports": [{"name": "http", "port": port, "targetPort": port}]}}
    form.add(svc, notes)


def _leader_worker_template(form: _Form, group: list[Command], pod_template, nest, lay, component: str,
                            prefix: tuple, notes: dict, pool: Optional[str] = None) -> dict:
    head = group[0]
    table = _head_table(head, pool)
    args, unknown = _serve_args(head, form, table)
    lt, lnotes = pod_template(head, args, {}, unknown, table, component, lay, len(group) > 1)
    tmpl: dict[str, Any] = {"size": len(group), "restartPolicy": "RecreateGroupOnPodRestart"}
    notes[prefix + ("restartPolicy",)] = ["A failed pod restarts its whole group: vLLM's ranks cannot rejoin a running group."]
    if len(group) == 1:
        tmpl["workerTemplate"] = lt
        notes.update(nest(lnotes, prefix + ("workerTemplate",)))
        return tmpl
    tmpl["leaderTemplate"] = lt
    notes.update(nest(lnotes, prefix + ("leaderTemplate",)))
    followers = group[1:]
    wargs, times, wunknown = _group_args(followers, lambda c: _head_table(c, pool), form)
    wt, wnotes = pod_template(followers[0], wargs, times, wunknown, _head_table(followers[0], pool), component, lay, True)
    tmpl["workerTemplate"] = wt
    notes.update(nest(wnotes, prefix + ("workerTemplate",)))
    return tmpl


def _lws(form: _Form, groups: list[list[Command]], pod_template, nest, lay) -> None:
    notes: dict = {}
    spec = {"replicas": len(groups), "leaderWorkerTemplate": _leader_worker_template(
        form, groups[0], pod_template, nest, lay, "serve", ("spec", "leaderWorkerTemplate"), notes)}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": form.meta(form.base, "serve", notes), "spec": spec}
    notes[("spec", "replicas")] = [f"{len(groups)} group(s) of {len(groups[0])} pod(s): one per vLLM instance of the plan."]
    form.add(lws, notes)
    head = groups[0][0]
    every = "--headless" not in groups[0][-1].argv
    selector = {LABEL: form.base, COMPONENT: "serve"}
    if not every:
        selector[WORKER_INDEX_LABEL] = "0"
    _service(form, f"{form.base}-api", "serve", selector, _port(head),
             "The API: the leader pods" + (" and every worker (each serves the API)" if every else "") + ".")


def _router(form: _Form, router: Command, image: str, endpoints: dict[str, str]) -> None:
    """The router ``Deployment`` and ``Service``: the plan's argv with each
    endpoint URL replaced by its in-cluster address (``endpoints``: pool →
    Service URL for P/D; per-instance pod DNS names for a KV store)."""
    argv: list[str] = []
    seen: set[str] = set()
    i = 0
    a = list(router.argv)
    while i < len(a):
        tok = a[i]
        if tok in ("--prefill", "--decode") and i + 1 < len(a):
            pool = tok[2:]
            if pool not in seen:
                argv += [tok, endpoints[pool]]
                seen.add(pool)
            i += 2
            continue
        argv.append(_instance_url(form, tok))
        i += 1
    script = _wrapper([x for x in [_install_line(router.install)] if x], {})
    port = _port_of(a, "30000")
    notes: dict = {}
    c: dict[str, Any] = {"name": "router", "image": image}
    if script:
        c.update({"command": ["/bin/sh", "-c", escape(script)], "args": argv})
        notes[("spec", "template", "spec", "containers", 0, "command")] = [
            "Installs vllm-router at start, then execs the args below; bake it into an image to start faster."]
    else:
        c.update({"command": argv[:1], "args": argv[1:]})
    c.update({"ports": [{"name": "http", "containerPort": port}],
              "readinessProbe": _probe(port, periodSeconds=10),
              "livenessProbe": _probe(port, periodSeconds=30, failureThreshold=3, initialDelaySeconds=120)})
    name = f"{form.base}-router"
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": form.meta(name, "router", notes),
           "spec": {"replicas": 1, "selector": {"matchLabels": {LABEL: form.base, COMPONENT: "router"}},
                    "template": {"metadata": {"labels": {LABEL: form.base, COMPONENT: "router"}},
                                 "spec": {"containers": [c]}}}}
    form.add(dep, notes)
    _service(form, name, "router", {LABEL: form.base, COMPONENT: "router"}, port,
             "The endpoint clients use: http://" + name + f":{port}/v1 inside the cluster.")


def _instance_url(form: _Form, tok: str) -> str:
    """A router's worker URL → the LeaderWorkerSet pod's DNS name
    (``<lws>-<group>`` for a leader, ``<lws>-<group>-<index>`` for a worker,
    under the headless Service ``<lws>`` the controller creates): a KV store's
    ``$INSTANCE_<n>_…`` hosts, and a hybrid-LB deployment's ``$HEAD_IP`` and
    ``$NODE_<k>_IP`` (group 0)."""
    def one(m: re.Match) -> str:
        g = int(m.group(1)) - 1
        return f"{form.base}-{g}-{m.group(2)}.{form.base}" if m.group(2) else f"{form.base}-{g}.{form.base}"

    def single(m: re.Match) -> str:  # one multi-node deployment: group 0 of the LeaderWorkerSet
        return f"{form.base}-0-{m.group(1)}.{form.base}" if m.group(1) else f"{form.base}-0.{form.base}"

    tok = re.sub(r"\$INSTANCE_(\d+)_(?:NODE_(\d+)_IP|HEAD_IP|IP)\b", one, escape(tok))
    return re.sub(r"\$(?:NODE_(\d+)_IP|HEAD_IP)\b", single, tok)


def _pd(form: _Form, serving, router, layouts, pod_template, nest, image) -> None:
    """The ``DisaggregatedSet`` (one role per pool, one group each), a Service
    per role on the pods that serve its API, and the router pointing at them."""
    notes: dict = {}
    roles = []
    endpoints = {}
    services = []
    for k, pool in enumerate(("prefill", "decode")):
        group = [c for c in serving if c.pool == pool]
        lay = layouts[pool]
        prefix = ("spec", "roles", k, "spec", "leaderWorkerTemplate")
        tmpl = _leader_worker_template(form, group, pod_template, nest, lay, pool, prefix, notes, pool)
        roles.append({"name": pool, "spec": {"replicas": 1, "leaderWorkerTemplate": tmpl}})
        notes[("spec", "roles", k)] = [f"The {pool} pool: half a node's GPUs, one pod (co-located P/D: the other "
                                       "pool's pod may share the node)." if lay.devices else
                                       f"The {pool} pool: {len(group)} node(s) as one group."]
        every = "--headless" not in group[-1].argv
        selector = {LABEL: form.base, COMPONENT: pool}
        if not every:
            selector[WORKER_INDEX_LABEL] = "0"
        port = _port(group[0])
        svc = f"{form.base}-{pool}"
        endpoints[pool] = f"http://{svc}:{port}"
        services.append((svc, pool, selector, port, every))
    ds = {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
          "metadata": form.meta(form.base, "pd", notes), "spec": {"roles": roles}}
    form.add(ds, notes)
    for svc, pool, selector, port, every in services:
        _service(form, svc, pool, selector, port,
                 f"The {pool} role's API (" + ("every pod serves it" if every else "its leader pod") + "): the router's --" + pool + " endpoint.")
    if router is not None:
        _router(form, router, image, endpoints)


def _mooncake(form: _Form, store, image, brand, fixed_env: dict, volumes: list, mounts: list) -> None:
    """Mooncake's master (``Deployment`` + ``Service``), its standalone store
    and the config files (``ConfigMap``, mounted into ``volumes``/``mounts``
    of the vLLM pods) that vLLM and the store read; ``$MOONCAKE_MASTER_IP`` in
    them is the master's Service."""
    inst = (store.vllm or {}).get("install") or {}
    line = _install_line(str(inst.get(brand) if isinstance(inst, dict) else inst) if inst else None)
    master = store.mooncake_master or {}
    host = None
    placeholders = {}
    if isinstance(master, dict) and master.get("command"):
        host = f"{form.base}-mooncake-master"
        argv = _argv_of(str(master["command"]))
        port = next((int(t.split("=", 1)[1]) for t in argv if re.fullmatch(r"--?rpc_port=\d+", t)), 50051)
        placeholders["MOONCAKE_MASTER_IP"] = host
        _companion_deployment(form, host, "mooncake-master", argv, image, line, port,
                              f"Mooncake master: {comment(master.get('description', ''))}")
    files = {}
    cfg = store.mooncake_vllm_config or {}
    if isinstance(cfg, dict) and isinstance(cfg.get("template"), dict):
        files["mooncake_vllm_config.json"] = cfg["template"]
        fixed_env["MOONCAKE_CONFIG_PATH"] = f"{MOONCAKE_DIR}/mooncake_vllm_config.json"
    store_cfg = store.mooncake_store_config or {}
    if isinstance(store_cfg, dict) and isinstance(store_cfg.get("config"), dict):
        files["mooncake_store_config.json"] = store_cfg["config"]
    if files:
        name = f"{form.base}-mooncake-config"
        notes: dict = {}
        data = {}
        for fname, tmpl in files.items():
            text = json.dumps(tmpl, indent=2)
            # whole placeholders only: "$HEAD_IPS" is not "$HEAD_IP" followed by an S (composer.shell.PLACEHOLDER_RE)
            text = PLACEHOLDER_RE.sub(lambda m: placeholders.get(m.group(0)[1:], m.group(0)), text)
            for m in sorted(set(PLACEHOLDER_RE.findall(text))):
                notes.setdefault(("data", fname), []).append(_param_note(m[1:]) + " (empty here)")
            text = PLACEHOLDER_RE.sub("", text)
            data[fname] = text + "\n"
        form.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": form.meta(name, "mooncake-config", notes),
                  "data": data}, notes)
        volumes.append({"name": "mooncake-config", "configMap": {"name": name}})
        mounts.append({"name": "mooncake-config", "mountPath": MOONCAKE_DIR, "readOnly": True})
    if isinstance(store_cfg, dict) and store_cfg.get("command"):
        argv = [t.replace("$MOONCAKE_STORE_CONFIG_PATH", f"{MOONCAKE_DIR}/mooncake_store_config.json")
                for t in _argv_of(str(store_cfg["command"]))]
        _companion_deployment(form, f"{form.base}-mooncake-store", "mooncake-store", argv, image, line, None,
                              f"Mooncake store: {comment(store_cfg.get('description', ''))}",
                              mount=bool(files))


def _companion_deployment(form: _Form, name: str, component: str, argv: list[str], image: str, install: Optional[str],
                          port: Optional[int], note: str, mount: bool = False) -> None:
    notes: dict = {}
    sub = _Sub({}, form, [], lws=False)
    args = [sub(t) for t in argv]
    script = _wrapper([install] if install else [], {})
    c: dict[str, Any] = {"name": component, "image": image}
    c.update({"command": ["/bin/sh", "-c", escape(script)], "args": args} if script else {"command": args[:1], "args": args[1:]})
    if sub.unknown:
        c["env"] = _side_env(sub.unknown, notes, ("spec", "template", "spec", "containers", 0, "env"))
    if port:
        c["ports"] = [{"name": "rpc", "containerPort": port}]
        c["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 10}
    spec: dict[str, Any] = {"containers": [c]}
    if mount:
        c["volumeMounts"] = [{"name": "mooncake-config", "mountPath": MOONCAKE_DIR, "readOnly": True}]
        spec["volumes"] = [{"name": "mooncake-config", "configMap": {"name": f"{form.base}-mooncake-config"}}]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": form.meta(name, component, notes, note),
           "spec": {"replicas": 1, "selector": {"matchLabels": {LABEL: form.base, COMPONENT: component}},
                    "template": {"metadata": {"labels": {LABEL: form.base, COMPONENT: component}}, "spec": spec}}}
    form.add(dep, notes)
    if port:
        notes2: dict = {}
        form.add({"apiVersion": "v1", "kind": "Service", "metadata": form.meta(name, component, notes2),
                  "spec": {"selector": {LABEL: form.base, COMPONENT: component},
                           "ports": [{"name": "rpc", "port": port, "targetPort": port}]}}, notes2)
