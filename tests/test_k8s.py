"""Issue 13: the Kubernetes form of every plan.

For every plan of our recipes' selection space and every corpus default plan:
the manifests parse back to their JSON data, core objects validate with
``kubernetes-validate`` (Kubernetes ``K8S_VERSION``, strict: unknown fields are
errors) and LeaderWorkerSet / DisaggregatedSet objects with ``jsonschema``
against the published CRDs in ``../shared/k8s`` (read in place, made strict
the same way); the GPU requests equal the GPUs the plan's commands use; every
container's command + args, expanded with a pod's env exactly as Kubernetes
expands ``$(VAR)`` (and run through a real ``/bin/sh`` where a wrapper is
used), equal the plan's argv with its placeholders replaced; P/D router
endpoints name the Services of the prefill and decode pods.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
import stat
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from composer.api import compose, compose_page, make_context
from composer.positions import DEVICE_LISTS
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.shell import PLACEHOLDER_RE
from composer.yaml_text import dump
from tests.plan_space import our_plans, shape_queries
from tests.plan_space import plan_gpus

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CRDS = SHARED / "k8s"
CORPUS = SHARED / "upstream-recipes"
K8S_VERSION = "1.33.0"
"""The Kubernetes version whose schemas (bundled by kubernetes-validate) the core objects must pass."""
CORE = {"Deployment", "Service", "PersistentVolumeClaim", "ConfigMap"}
GPU_KEYS = ("nvidia.com/gpu", "amd.com/gpu", "google.com/tpu")
PARAM_VALUES = {"IFACE_NAME": "eth0"}

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the same YAML, 20× faster
needs_crds = pytest.mark.skipif(not CRDS.exists(), reason="../shared/k8s not present")


# --- Kubernetes semantics, written from the Kubernetes docs (not from composer.k8s) ---

def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of command, args and env values:
    ``$$`` → ``$``; ``$(NAME)`` → its value when NAME is defined, else kept;
    an unclosed ``$(`` and any other ``$x`` stay as written."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                j = text.find(")", i + 2)
                if j != -1:
                    name = text[i + 2:j]
                    out.append(env[name] if name in env else text[i:j + 1])
                    i = j + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def container_env(container: dict, pod: dict[str, str]) -> dict[str, str]:
    """The container's env as the kubelet builds it: the downward API's pod IP,
    Secret references as a marker, each value expanded with the vars before it
    (LWS's own vars are injected first)."""
    env = dict(pod)
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[e["name"]] = pod["_POD_IP"]
        else:
            env[e["name"]] = "<secret>"
    return env


FAKE_BIN = None


def _fake_bin(tmp: Path) -> Path:
    """A PATH holding stand-ins: installers do nothing, programs print their argv."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("uv", "pip"):
        (tmp / name).write_text("#!/bin/sh\nexit 0\n")
    for name in ("vllm", "vllm-router", "mooncake_master", "python3", "lmcache"):
        (tmp / name).write_text("#!/bin/sh\nprintf '%s\\0' \"${0##*/}\" \"$@\"\n")
    for p in tmp.iterdir():
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return tmp


@functools.lru_cache(maxsize=4096)
def run_wrapper(script: str, args: tuple[str, ...], worker_index: str) -> tuple[str, ...]:
    global FAKE_BIN
    if FAKE_BIN is None:  # imported by another test module
        import tempfile

        FAKE_BIN = _fake_bin(Path(tempfile.mkdtemp(prefix="k8s-bin-")))
    out = subprocess.run(["/bin/sh", "-c", script, *args], env={"PATH": str(FAKE_BIN), "LWS_WORKER_INDEX": worker_index},
                         capture_output=True, check=True).stdout.decode()
    return tuple(out.split("\0")[:-1])


def executed_argv(container: dict, env: dict[str, str]) -> list[str]:
    cmd = [expand(t, env) for t in container["command"]]
    args = [expand(t, env) for t in container.get("args", [])]
    if cmd[:2] == ["/bin/sh", "-c"]:
        return list(run_wrapper(cmd[2], tuple(args), env.get("LWS_WORKER_INDEX", "0")))
    return cmd + args


# --- schemas ---

def _strict(schema):
    """A CRD schema where unknown fields are errors (kubectl --validate=strict)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.lru_cache(maxsize=None)
@functools.lru_cache(maxsize=None)
def crd_validator(kind: str):
    """``(apiVersion, Draft4Validator)`` of a published CRD's kind (read and
    compiled once per process: ~0.5 s each, asked for every manifest)."""
    for path in CRDS.glob("*.yaml"):
        crd = yaml.load(path.read_text(), Loader=LOADER)
        if crd["spec"]["names"]["kind"] == kind:
            (version,) = [v for v in crd["spec"]["versions"] if v.get("served")]
            schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            return f"{crd['spec']['group']}/{version['name']}", jsonschema.Draft4Validator(schema)
    raise KeyError(kind)


_SEEN: set[str] = set()


def validate_objects(objects: list[dict]) -> list[str]:
    """Errors of every object (empty: all valid)."""
    errors = []
    for obj in objects:
        key = hashlib.sha256(repr(obj).encode()).hexdigest()
        if key in _SEEN:
            continue
        kind = obj["kind"]
        if kind in CORE:
            try:
                kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                errors.append(f"{kind} {obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
        else:
            api, validator = crd_validator(kind)
            assert obj["apiVersion"] == api
            errors += [f"{kind}: {e.message} at {list(e.path)}" for e in validator.iter_errors(obj)]
            for tmpl in pod_templates(obj):  # the embedded pod templates, against core's PodTemplate too
                pt = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": tmpl}
                try:
                    kubernetes_validate.validate(pt, K8S_VERSION, strict=True)
                except kubernetes_validate.ValidationError as exc:
                    errors.append(f"{kind} pod template: {exc.message} at {list(exc.path)}")
        if not errors:
            _SEEN.add(key)
    return errors


def pod_templates(obj: dict) -> list[dict]:
    if obj["kind"] == "LeaderWorkerSet":
        lwts = [obj["spec"]["leaderWorkerTemplate"]]
    elif obj["kind"] == "DisaggregatedSet":
        lwts = [r["spec"]["leaderWorkerTemplate"] for r in obj["spec"]["roles"]]
    else:
        return [obj["spec"]["template"]] if "template" in obj.get("spec", {}) else []
    return [t[k] for t in lwts for k in ("leaderTemplate", "workerTemplate") if k in t]


# --- what the plan says ---

def pods(objects: list[dict]):
    """(kind, pool, group, index, pod template) of every pod the objects start (one replica each)."""
    for obj in objects:
        kind, spec = obj["kind"], obj.get("spec", {})
        if kind == "Deployment":
            comp = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            for g in range(spec["replicas"]):
                yield kind, comp, g, 0, spec["template"]
        lwss = []
        if kind == "LeaderWorkerSet":
            lwss = [(None, spec)]
        elif kind == "DisaggregatedSet":
            lwss = [(r["name"], r["spec"]) for r in spec["roles"]]
        for pool, s in lwss:
            t = s["leaderWorkerTemplate"]
            for g in range(s.get("replicas", 1)):
                for i in range(t["size"]):
                    yield kind, pool or "serve", g, i, t["leaderTemplate"] if i == 0 and "leaderTemplate" in t else t["workerTemplate"]


def check_manifests(plan: dict) -> None:
    """Everything the issue asks of one plan's manifests."""
    k8s = plan["kubernetes"]
    cmds = plan["commands"] or plan["blocked_commands"]
    assert k8s["yaml"], k8s["reason"]
    docs = [d for d in yaml.load_all(k8s["yaml"], Loader=LOADER) if d is not None]
    assert docs == k8s["objects"]
    assert not validate_objects(docs), validate_objects(docs)
    assert k8s["file_name"] == f"{plan['recipe']['id'].split('/')[-1]}-{plan['selection']['hardware']}.yaml"

    serving = [c for c in cmds if c["role"] != "router"]
    by_pool: dict = {}
    for c in serving:
        by_pool.setdefault(c["pool"] or "serve", []).append(c)
    nodes = plan["selection"]["nodes"] if not plan["selection"].get("prefill_mode") else None
    gpu_total = 0
    seen = 0
    for kind, pool, g, i, tmpl in pods(docs):
        if pool in ("router", "mooncake-master", "mooncake-store"):
            continue
        group = by_pool[pool] if pool != "serve" else serving[g * nodes:(g + 1) * nodes]
        cmd = group[i]
        seen += 1
        vllm = tmpl["spec"]["containers"][0]
        gpu_total += sum(int(v) for k, v in vllm.get("resources", {}).get("limits", {}).items() if k in GPU_KEYS)
        leader, ip = f"leader-{pool}-{g}.svc", f"10.{len(pool)}.{g}.{i}"
        pod = {"_POD_IP": ip}
        if kind != "Deployment":  # what the LeaderWorkerSet controller injects
            pod.update({"LWS_LEADER_ADDRESS": leader, "LWS_WORKER_INDEX": str(i), "LWS_GROUP_SIZE": str(len(group))})
        if i == 0:
            pod["_POD_IP"] = ip = leader  # the leader's address is its own
        env = container_env(vllm, pod)
        head = {"HEAD_IP", f"INSTANCE_{g + 1}_HEAD_IP", f"{pool.upper()}_NODE_1"}

        def want(text, own=False):
            """The plan's text with its placeholders as this pod sees them: its
            own address, the group leader's, or the parameter env var."""
            def one(m):
                name = m.group(0)[1:]  # noqa: B023 - want() is called within the iteration that defines it
                return ip if own else leader if name in head else env[name]  # noqa: B023
            return PLACEHOLDER_RE.sub(one, text)

        assert executed_argv(vllm, env) == [want(t) for t in cmd["argv"]], (pool, g, i)
        for k, v in cmd["env"].items():
            if k in DEVICE_LISTS and re.fullmatch(r"\d+(?:,\d+)*", v.replace(" ", "")):
                limits = vllm["resources"]["limits"]
                gpus = int(next(v for r, v in limits.items() if r.endswith("/gpu")))
                v = ",".join(str(n) for n in range(min(gpus, len(v.split(",")))))  # the pod's GPUs, from 0
            assert env[k] == want(v, own=(k == "VLLM_NIXL_SIDE_CHANNEL_HOST")), k
        assert env["HF_TOKEN"] == "<secret>" or "HF_TOKEN" in cmd["env"]
        serves = "--headless" not in cmd["argv"]
        assert ("readinessProbe" in vllm) is serves and ("livenessProbe" in vllm) is serves
        mounts = {m["mountPath"] for m in vllm["volumeMounts"]}
        assert {"/dev/shm", "/root/.cache/huggingface"} <= mounts
        assert vllm["image"] == k8s["image"] == pinned(plan["install"]["image"])
        requests = vllm["resources"]["requests"]
        assert int(requests["cpu"]) > 0 and requests["memory"].endswith("Gi"), requests
        (shm,) = [v for v in tmpl["spec"]["volumes"] if v["name"] == "dshm"]
        assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"].endswith("Gi")
        # /dev/shm is memory-backed: the memory request covers it
        assert int(requests["memory"][:-2]) >= int(shm["emptyDir"]["sizeLimit"][:-2])
    assert seen == len(serving)
    # GPUs requested = GPUs the plan's commands use (vLLM-Omni recipes carry
    # their parallelism in their own args; CPU images request no GPU).
    if "--omni" not in serving[0]["argv"] and "cpu" not in plan["install"]["image"]:
        assert gpu_total == sum(plan_gpus(c["argv"]) for c in serving)

    router = next((c for c in cmds if c["role"] == "router"), None)
    if router is not None:
        (rdep,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["labels"]["app.kubernetes.io/component"] == "router"]
        rc = rdep["spec"]["template"]["spec"]["containers"][0]
        argv = executed_argv(rc, {})
        services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
        if plan["selection"].get("prefill_mode"):
            for pool in ("prefill", "decode"):
                (url,) = [argv[i + 1] for i, t in enumerate(argv[:-1]) if t == f"--{pool}"]
                host, port = url.removeprefix("http://").split(":")
                svc = services[host]
                assert svc["spec"]["selector"]["app.kubernetes.io/component"] == pool
                api = [c for c in by_pool[pool] if "--headless" not in c["argv"]]
                assert int(port) == svc["spec"]["ports"][0]["port"] == int(api[0]["argv"][api[0]["argv"].index("--port") + 1])
            assert without_endpoints(argv) == without_endpoints(router["argv"])
        else:
            assert len(argv) == len(router["argv"])
            for got, planned in zip(argv, router["argv"]):
                assert PLACEHOLDER_RE.sub("X", got) == got  # no placeholder left
                if "$" not in planned:
                    assert got == planned


def without_endpoints(argv: list[str]) -> list[str]:
    """A router argv without its ``--prefill URL`` / ``--decode URL`` pairs."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--prefill", "--decode"):
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


# --- the plans ---

@pytest.fixture(scope="module", autouse=True)
def fake_bin(tmp_path_factory):
    global FAKE_BIN
    FAKE_BIN = _fake_bin(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="module", autouse=True)
def schemas_read_once():
    """kubernetes-validate reads and parses its JSON schemas on every call
    (25 ms); the schemas never change during a run, so read each once."""
    from kubernetes_validate import utils

    original = utils.schema_contents
    utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    yield
    utils.schema_contents = original


@needs_crds
@pytest.mark.parametrize("rid", [rid for rid, _ in our_plans()])
def test_every_plan_of_our_recipes_has_valid_faithful_manifests(rid):
    ctx = dict(our_plans())[rid]
    checked = 0
    # One plan per shape (plan_space.shape_queries: shapes found once per run), composed in full.
    for q in shape_queries(ctx):
        lean, plan = compose(ctx, q, every_form=False), compose(ctx, q)
        assert plan["commands"] == lean["commands"] and plan["selection"] == lean["selection"]
        check_manifests(plan)
        checked += 1
    assert checked > 20


@needs_crds
@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_every_corpus_default_plan_has_valid_faithful_manifests():
    catalog = load_catalog(CORPUS)
    missing = {}
    from composer.run_forms import docker_image, docker_reason

    for rid in recipe_paths(CORPUS):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        plan = compose(ctx, "")
        if not plan["kubernetes"]["yaml"]:
            sel = plan["selection"]
            missing[rid] = (plan["kubernetes"]["reason"], docker_image(ctx, sel["hardware"], sel["variant"]),
                            docker_reason(ctx, sel["hardware"], sel["variant"]))
            continue
        check_manifests(plan)
    # Only plans without a container image (an unknown brand, or a recipe that
    # turns Docker off) have no Kubernetes form, and they say why in the
    # Docker form's own words.
    assert all(image is None and reason == why for reason, image, why in missing.values()), missing


@needs_crds
@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_mooncake_store_on_a_corpus_recipe_runs_master_store_and_config():
    catalog = load_catalog(CORPUS)
    for rid in recipe_paths(CORPUS):
        ctx = make_context(rid, load_recipe(CORPUS, rid), catalog)
        options = compose_page(ctx, "")["options"]["kv_offload"]
        if any(o["id"] == "kv_store_centralized_mooncake" and not o["disabled"] for o in options):
            break
    plan = compose(ctx, "kv_offload=kv_store_centralized_mooncake&instances=2")
    check_manifests(plan)
    objs = plan["kubernetes"]["objects"]
    names = {(o["kind"], o["metadata"]["labels"]["app.kubernetes.io/component"]) for o in objs}
    assert {("Deployment", "mooncake-master"), ("Service", "mooncake-master"), ("Deployment", "mooncake-store"),
            ("ConfigMap", "mooncake-config"), ("LeaderWorkerSet", "serve"), ("Deployment", "router")} <= names
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    master = next(o["metadata"]["name"] for o in objs if o["kind"] == "Service" and "master" in o["metadata"]["name"])
    assert all(f'"{master}:' in text for text in cm["data"].values())
    assert not any("$" in text for text in cm["data"].values())


@pytest.fixture
def plan(k3):
    """``plan(query)``: the Kimi K3 plan with its manifests (``compose``)."""
    return lambda query="": compose(k3, query)


def test_tp_across_nodes_is_one_leaderworkerset_whose_pods_get_address_and_rank_from_lws(plan):
    p = plan("hardware=b200&strategy=multi_node_tp&nodes=2")
    (lws,) = [o for o in p["kubernetes"]["objects"] if o["kind"] == "LeaderWorkerSet"]
    t = lws["spec"]["leaderWorkerTemplate"]
    assert t["size"] == 2 and t["restartPolicy"] == "RecreateGroupOnPodRestart" and lws["spec"]["replicas"] == 1
    args = t["workerTemplate"]["spec"]["containers"][0]["args"]
    assert args[args.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert args[args.index("--master-addr") + 1] == "$(LWS_LEADER_ADDRESS)"
    assert "$HEAD_IP" not in p["kubernetes"]["yaml"]
    check_manifests(p)


def test_dep_start_rank_is_the_worker_index_times_the_local_size(plan):
    p = plan("hardware=b200&strategy=multi_node_dep&nodes=3")
    (lws,) = [o for o in p["kubernetes"]["objects"] if o["kind"] == "LeaderWorkerSet"]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    local = int(worker["args"][worker["args"].index("--data-parallel-size-local") + 1])
    assert local > 1 and worker["command"][:2] == ["/bin/sh", "-c"]
    for index in (1, 2):
        argv = executed_argv(worker, {"LWS_WORKER_INDEX": str(index), "LWS_LEADER_ADDRESS": "h"})
        assert argv[argv.index("--data-parallel-start-rank") + 1] == str(index * local)
    check_manifests(p)


def test_pd_is_a_disaggregatedset_with_role_services_and_a_router(plan):
    p = plan("hardware=gb200&strategy=pd_cluster")
    objs = p["kubernetes"]["objects"]
    (ds,) = [o for o in objs if o["kind"] == "DisaggregatedSet"]
    sizes = {r["name"]: r["spec"]["leaderWorkerTemplate"]["size"] for r in ds["spec"]["roles"]}
    assert sizes == {"prefill": p["selection"]["prefill_nodes"], "decode": p["selection"]["decode_nodes"]}
    assert all(r["spec"]["replicas"] == 1 for r in ds["spec"]["roles"])  # the CRD's CEL rule: all non-zero
    svcs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    assert {"kimi-k3-gb200-prefill", "kimi-k3-gb200-decode", "kimi-k3-gb200-router"} <= set(svcs)
    # Only the TEP prefill leader serves HTTP; every DEP decode pod does.
    assert svcs["kimi-k3-gb200-prefill"]["spec"]["selector"].get("leaderworkerset.sigs.k8s.io/worker-index") == "0"
    assert "leaderworkerset.sigs.k8s.io/worker-index" not in svcs["kimi-k3-gb200-decode"]["spec"]["selector"]
    check_manifests(p)


def test_values_the_cluster_owner_chooses_are_marked(plan):
    text = plan("hardware=gb200&strategy=pd_cluster")["kubernetes"]["yaml"]
    for name in ("namespace", "gpu-node-selector", "storage-class", "network-interface", "rdma", "hf-token"):
        assert f"# PARAMETER {name}:" in text, name


def test_placeholders_and_dollar_parens_survive_kubernetes_expansion():
    from composer.k8s import escape

    for text in ("$(date)", "a$$b", "$$(x)", "cost $5", "$", "x$", "$(", "$((1+2))"):
        assert expand(escape(text), {"date": "NO", "x": "NO"}) == text


@pytest.mark.parametrize("value", ["on", "yes", "No", "1.5", "0x1f", "~", "- a", "a: b", "#x", "a #b", "x\n y\n",
                                   "\n lead", "tail\n\n", "a\r\nb", "\x85", "\u2028", "\ud800", "\x00\x7f", "'", '"',
                                   "{}", "*x", "!t", "%p", "@", "`", "\t", "é ☃ \U0001F600", "null", "", " "])
def test_yaml_writer_round_trips_hostile_strings(value):
    data = {value: [value, {"k": value}], "n": 1, "b": True, "z": None}
    assert yaml.safe_load(dump(data, {(value,): [value + "\nkubectl delete all"]})) == data


def test_hostile_recipe_text_stays_data_in_the_manifests(k3):
    from composer.k8s import _argv_of

    # A recipe's companion text with shell syntax is words, not commands.
    assert _argv_of("lmcache server --port 5555 '; rm -rf /' \\\n  --x $(id)") == \
        ["lmcache", "server", "--port", "5555", "; rm -rf /", "--x", "$(id)"]


def test_cli_format_k8s_prints_the_plans_manifests(k3, capsys):
    from composer.buildtime.cli import main

    q = "hardware=h200&strategy=multi_node_tp&nodes=2"
    assert main(["moonshotai/Kimi-K3", "--query", q, "--format", "k8s"]) == 0
    out = capsys.readouterr().out
    assert out == compose(k3, q)["kubernetes"]["yaml"]
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["PersistentVolumeClaim", "LeaderWorkerSet", "Service"]


def test_page_shows_manifests_only_when_run_with_kubernetes(k3):
    from composer import render

    render.install_templates({"_macros.html": (ROOT / "site_src" / "_macros.html").read_text()})
    shown = compose_page(k3, "hardware=h200&strategy=multi_node_tp&install=k8s")
    assert shown["kubernetes"]["yaml"] == compose(k3, "hardware=h200&strategy=multi_node_tp")["kubernetes"]["yaml"]
    html = render._renderer().fragments(shown, ("commands",))["commands"]
    assert 'id="tab-k8s"' in html and f'data-name="{shown["kubernetes"]["file_name"]}"' in html
    assert compose_page(k3, "hardware=h200&strategy=multi_node_tp")["kubernetes"] is None  # not written on every click
    option = next(o for o in shown["options"]["install"] if o["id"] == "k8s")
    assert option["selected"] and not option["disabled"]


@pytest.mark.parametrize("env", [{"LWS_WORKER_INDEX": "7"}, {"LWS_LEADER_ADDRESS": "9.9.9.9"}, {"POD_IP": "1.2.3.4"}])
def test_recipe_env_that_kubernetes_sets_gives_no_manifests(env):
    # Found by the adversarial pass: a recipe value for LWS_WORKER_INDEX made
    # every worker rank 7 and LWS_LEADER_ADDRESS moved the leader.
    recipes = ROOT / "recipes"
    data = yaml.safe_load((recipes / "models" / "moonshotai" / "Kimi-K3.yaml").read_text())
    data["model"].setdefault("base_env", {}).update(env)
    ctx = make_context("moonshotai/Kimi-K3", data, load_catalog(recipes))
    k8s = compose(ctx, "hardware=h200&strategy=multi_node_dep&nodes=2")["kubernetes"]
    assert k8s["yaml"] == "" and next(iter(env)) in k8s["reason"]


def test_a_recipe_value_for_a_parameter_is_used_once_and_early():
    recipes = ROOT / "recipes"
    data = yaml.safe_load((recipes / "models" / "moonshotai" / "Kimi-K3.yaml").read_text())
    data["model"].setdefault("base_env", {})["IFACE_NAME"] = "ens5"
    ctx = make_context("moonshotai/Kimi-K3", data, load_catalog(recipes))
    plan = compose(ctx, "hardware=h200&strategy=multi_node_tp&nodes=2")
    check_manifests(plan)
    for doc in yaml.safe_load_all(plan["kubernetes"]["yaml"]):
        for c in [c for t in pod_templates(doc) for c in t["spec"]["containers"]]:
            names = [e["name"] for e in c.get("env", [])]
            assert names.count("IFACE_NAME") <= 1
            if "IFACE_NAME" in names:
                assert next(e for e in c["env"] if e["name"] == "IFACE_NAME")["value"] == "ens5"


@pytest.mark.parametrize("var", ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"])
def test_a_recipes_gpu_indices_are_renumbered_for_the_pods_own_gpus(var):
    """Found by the adversarial pass: Llama's ``base_env`` naming a node's GPUs
    4–7 went into a pod that requests 4 GPUs, which the device plugin numbers
    0–3: vLLM would find none of 4–7. The pod gets the same count from 0, said
    in a comment; the shell forms keep the recipe's value (the whole node)."""
    recipes = ROOT / "recipes"
    rid = "meta-llama/Llama-3.3-70B-Instruct"
    data = yaml.safe_load((recipes / "models" / f"{rid}.yaml").read_text())
    data["model"].setdefault("base_env", {})[var] = "4,5,6,7"
    ctx = make_context(rid, data, load_catalog(recipes))
    plan = compose(ctx, "hardware=mi300x" if var.startswith("HIP") else "hardware=h100")
    assert plan["commands"][0]["env"][var] == "4,5,6,7"
    text = plan["kubernetes"]["yaml"]
    assert text, plan["kubernetes"]["reason"]
    check_manifests(plan)
    containers = [c for doc in yaml.safe_load_all(text) for t in pod_templates(doc) for c in t["spec"]["containers"]
                  if c.get("env")]
    values = [e["value"] for c in containers for e in c["env"] if e["name"] == var]
    gpus = [int(next(v for r, v in c["resources"]["limits"].items() if r.endswith("/gpu"))) for c in containers
            if var in [e["name"] for e in c["env"]]]
    assert values and all(v == ",".join(map(str, range(min(n, 4)))) for v, n in zip(values, gpus)), (values, gpus)
    assert f"{var}=4,5,6,7 numbers a whole node's GPUs" in text


def pinned(image: str) -> str:
    """The image an operator applies: vLLM's own ``:latest`` is the release
    the commands are checked against (``vllm_cli.json``), any other unchanged."""
    from composer import vllm_cli
    repo, _, tag = image.rpartition(":")
    return f"{repo}:v{vllm_cli.VERSION}" if repo in ("vllm/vllm-openai", "vllm/vllm-openai-rocm") and tag == "latest" else image


def test_the_image_is_the_vllm_release_in_force_and_says_so(plan):
    from composer import vllm_cli
    k = plan("hardware=h200&strategy=multi_node_tp")["kubernetes"]
    assert k["image"] == f"vllm/vllm-openai:v{vllm_cli.VERSION}"
    assert f"# Image: {k['image']}: vLLM {vllm_cli.VERSION}" in k["yaml"]
    amd = plan("hardware=mi355x")["kubernetes"]
    assert amd["image"] == f"vllm/vllm-openai-rocm:v{vllm_cli.VERSION}"


def test_the_preflight_list_follows_the_plan(plan):
    one = plan("hardware=b300")["kubernetes"]
    tp_plan = plan("hardware=h200&strategy=multi_node_tp")
    tp, n = tp_plan["kubernetes"], tp_plan["selection"]["nodes"]  # the memory model decides the count (issue 19)
    pd = plan("hardware=gb200&strategy=pd_cluster")["kubernetes"]
    text = {name: " ".join(k["preflight"]) for name, k in (("one", one), ("tp", tp), ("pd", pd))}
    assert "LeaderWorkerSet" not in text["one"] and "RDMA" not in text["one"]
    assert "LeaderWorkerSet controller" in text["tp"] and "InfiniBand or RoCE" in text["tp"] and f"TP {8 * n} across {n} nodes" in text["tp"]
    assert "DisaggregatedSet" in text["pd"] and "NIXL" in text["pd"]
    for t in text.values():
        assert "nvidia.com/gpu" in t and "hf-token" in t and "ReadWriteMany" in t
    assert f"{n} H200 nodes labelled recipes.vllm.ai/gpu=h200" in text["tp"]
    pd_sel = plan("hardware=gb200&strategy=pd_cluster")["selection"]
    assert f"{pd_sel['prefill_nodes'] + pd_sel['decode_nodes']} GB200 NVL4 nodes" in text["pd"]
    # the steps apply, wait and reach the Service the plan serves on
    assert tp["steps"][0].startswith("kubectl apply --server-side") and not one["steps"][0].startswith("kubectl apply --server-side")
    assert "kubectl rollout status deployment/kimi-k3-b300" in " ".join(one["steps"])
    assert any(s.startswith("kubectl port-forward svc/kimi-k3-h200-api 8000:8000") for s in tp["steps"])
    assert any(s.startswith("kubectl port-forward svc/kimi-k3-gb200-router 30000:30000") for s in pd["steps"])
    assert tp["steps"][-1].startswith("curl http://localhost:8000/v1/chat/completions")


def test_rdma_and_host_network_are_offered_where_nodes_talk(plan):
    tp = plan("hardware=h200&strategy=multi_node_tp")["kubernetes"]["yaml"]
    one = plan("hardware=b300")["kubernetes"]["yaml"]
    for name in ("rdma", "host-network"):
        assert f"# PARAMETER {name}:" in tp and f"# PARAMETER {name}:" not in one
    assert "rdma/rdma_shared_device_a: 1" in tp
    for name in ("cpu-memory", "shm-size"):
        assert f"# PARAMETER {name}:" in tp and f"# PARAMETER {name}:" in one


def test_the_page_shows_preflight_and_kubectl_steps_in_kubernetes_mode(k3):
    from composer.api import compose_page
    from composer.render import PageRenderer, environment
    from jinja2 import FileSystemLoader
    r = PageRenderer(environment(FileSystemLoader(ROOT / "site_src")))
    shown = compose_page(k3, "hardware=h200&strategy=multi_node_tp&install=k8s")
    html = r.fragments(shown, ("extras",))["extras"]
    assert "Before you apply" in html and "kubectl apply -f Kimi-K3-h200.yaml" in html
    assert "$HEAD_IP" not in html and "uv pip install" not in html
    pip = r.fragments(compose_page(k3, "hardware=h200&strategy=multi_node_tp"), ("extras",))["extras"]
    assert "uv pip install" in pip and "Before you apply" not in pip


@pytest.mark.parametrize("query", ["hardware=h200&strategy=pd_cluster", "hardware=b200&nodes=2&strategy=multi_node_tp",
                                   "hardware=h200&strategy=pd_cluster&prefill_nodes=0&decode_nodes=0"])
def test_the_panel_asks_for_no_node_address_the_manifests_set(query):
    """A fresh user's finding: the Kubernetes form's panel asked for
    PREFILL_NODE_1 and DECODE_NODE_1, which no manifest reads (the pods get
    the leader's and their own address, the router the Services). A name the
    manifests set is asked for only where a line outside them uses it."""
    from composer.forms import HOST_PLACEHOLDERS

    ctx = make_context("meta-llama/Llama-3.3-70B-Instruct", load_recipe(ROOT / "recipes", "meta-llama/Llama-3.3-70B-Instruct"),
                       load_catalog(ROOT / "recipes"))
    plan = compose(ctx, query + "&install=k8s")
    outside = " ".join([plan["client"]["curl"], plan["client"]["bench"], *(c["command"] for c in plan["companions"])])
    for p in plan["placeholders"]:
        if HOST_PLACEHOLDERS.fullmatch(p["name"]):
            assert "$" + p["name"] in outside, p["name"]
    pip = compose(ctx, query)
    assert any(HOST_PLACEHOLDERS.fullmatch(p["name"]) for p in pip["placeholders"])  # the host form asks for them
