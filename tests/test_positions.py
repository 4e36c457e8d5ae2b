"""Issue 23.1: a recipe value is checked for the position it lands in
(``composer.positions``) by validation and by every output form; a value that
does not fit is a recipe error with its key path and never reaches a command.
The faults of the adversarial pass are kept here, each as a test."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings, strategies as st

from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe
from composer.positions import PLATFORM_NAMES, POD_NAMES, POSITIONS, SHELL_NAMES, PositionError, check, require
from composer.shell import PLACEHOLDER_RE
from tests.conftest import k3_recipes_copy, recipe_errors as _errors, recipes_copy
from tests import shellwords

ROOT = Path(__file__).resolve().parent.parent
K3 = "moonshotai/Kimi-K3"
MULTI = "hardware=h200&strategy=multi_node_tp&nodes=2"




def _raw_k3() -> dict:
    return yaml.safe_load((ROOT / "recipes" / "models" / "moonshotai" / "Kimi-K3.yaml").read_text())


def _ctx(edit) -> object:
    """Kimi K3 with ``edit(data)`` applied, bound without the build's checks
    (what a form sees if a value got past validation by another path)."""
    data = _raw_k3()
    edit(data)
    return make_context(K3, data, load_catalog(ROOT / "recipes"))


# --- the rules --------------------------------------------------------------

@pytest.mark.parametrize("value, position, ok", [
    ("--privileged", "image", False), ("-v", "image", False), ("vllm/vllm-openai:v0.33.0", "image", True),
    ("repo@sha256:" + "a" * 64, "image", True), ("docker pull x", "image", False),
    ("-1", "option", True), ("-0.5", "option", True), ("--trust-remote-code", "option", False), ("-x", "option", False),
    ("-1e5", "option", False), ("auto", "option", True),
    ("model", "positional", True), ("-m", "positional", False), ("", "positional", False),
    ("/etc/mooncake/c.json", "path", True), ("$MOONCAKE_CONFIG_PATH", "path", True), ("rel/path", "path", False),
    ("/a:/b", "path", False), ("/a/../b", "path", False), ("/a b", "path", False),
    ("8000", "port", True), ("80a", "port", False), ("0", "port", False), ("65536", "port", False), ("²", "port", False),
    ("NCCL_DEBUG", "env-name", True), ("HOME", "env-name", False), ("LWS_WORKER_INDEX", "env-name", False),
    ("HF_TOKEN", "env-name", False), ("1X", "env-name", False),
    ("IFACE_NAME", "k8s-ref", True), ("A-B", "k8s-ref", False),
])
def test_each_position_has_one_rule(value, position, ok):
    assert (check(value, position) is None) is ok, check(value, position)


def test_every_position_refuses_a_nul_and_require_names_where():
    for position in POSITIONS:
        assert "NUL" in check("a\x00b", position)
    with pytest.raises(PositionError, match=r"^model\.docker_image: '--privileged' starts with '-'"):
        require("--privileged", "image", "model.docker_image")
    with pytest.raises(KeyError):
        check("x", "no-such-position")


# --- docker_image: "--privileged" --------------------------------------------

def test_an_image_that_is_an_option_is_a_recipe_error_and_no_docker_command(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["model"].update(docker_image="--privileged"))
    errs = _errors(recipes)
    assert any(e.file == "models/moonshotai/Kimi-K3.yaml" and e.key == "model.docker_image"
               and "starts with '-'" in e.message for e in errs), errs
    ctx = _ctx(lambda d: d["model"].update(docker_image="--privileged"))
    for query in ("hardware=h200&install=docker", MULTI + "&install=docker", MULTI + "&install=k8s"):
        plan = compose(ctx, query)
        for c in plan["commands"] + plan["blocked_commands"]:
            assert "--privileged" not in (c.get("docker_argv") or ())
        assert "--privileged" not in plan["kubernetes"]["yaml"]
        assert plan["install"]["image"] is None and "cannot be used" in plan["install"]["docker_reason"]


# --- *_CONFIG_PATH bind mounts -----------------------------------------------

@pytest.mark.parametrize("path", ["/var/run/docker.sock", "/root/.ssh", "/etc/mooncake/mooncake_vllm_config.json"])
def test_docker_never_mounts_a_path_a_recipe_chose(path):
    ctx = _ctx(lambda d: d["model"].setdefault("base_env", {}).update({"X_CONFIG_PATH": path,
                                                                        "MOONCAKE_CONFIG_PATH": path}))
    plan = compose(ctx, MULTI + "&install=docker")
    for c in plan["commands"]:
        argv = c["docker_argv"]
        mounts = [argv[i + 1] for i, t in enumerate(argv[:-1]) if t == "-v"]
        assert mounts == ["$HOME/.cache/huggingface:/root/.cache/huggingface"], mounts
        assert f"X_CONFIG_PATH={path}" in argv  # the variable is still passed, the file is not mounted


def test_docker_mounts_a_path_the_person_fills_in():
    ctx = _ctx(lambda d: d["model"].setdefault("base_env", {}).update({"MY_CONFIG_PATH": "$MY_CONFIG_PATH"}))
    argv = compose(ctx, MULTI + "&install=docker")["commands"][0]["docker_argv"]
    assert "$MY_CONFIG_PATH:$MY_CONFIG_PATH:ro" in argv


# --- Kubernetes: $NAME per form, platform names never shadowed --------------------

def _containers(plan: dict) -> list[dict]:
    from tests.test_k8s import pod_templates

    return [c for d in plan["kubernetes"]["objects"] for t in pod_templates(d) for c in t["spec"]["containers"]]


@pytest.mark.parametrize("name", sorted(POD_NAMES))
def test_pod_provided_names_in_recipe_text_are_the_pods_own(name):
    from tests.test_k8s import check_manifests

    ctx = _ctx(lambda d: d["model"]["base_args"].extend(["--served-model-name", f"m-${name}"]))
    plan = compose(ctx, MULTI + "&install=k8s")
    check_manifests(plan)  # expanded with the pod's env, the argv is the plan's
    for c in _containers(plan):
        env = c.get("env", [])
        names = [e["name"] for e in env]
        assert len(names) == len(set(names)), names
        assert not [e for e in env if e["name"] in PLATFORM_NAMES and e.get("value") == ""], env
        assert not [e for e in env if e["name"].startswith("LWS_")]  # the controller's, never ours


@pytest.mark.parametrize("name", ["HOME", "PATH"])
def test_shell_provided_names_give_no_manifests_rather_than_empty_values(name):
    ctx = _ctx(lambda d: d["model"]["base_args"].extend(["--download-dir", f"${name}/models"]))
    plan = compose(ctx, MULTI + "&install=k8s")
    assert plan["kubernetes"]["yaml"] == "" and f"${name}" in plan["kubernetes"]["reason"]
    shell = compose(ctx, MULTI)["commands"][0]["command"]
    assert f'"${name}/models"' in shell  # the shell form expands it, as before


def test_lws_names_in_a_single_deployment_give_a_reason():
    ctx = _ctx(lambda d: d["model"]["base_args"].extend(["--served-model-name", "$LWS_WORKER_INDEX"]))
    k8s = compose(ctx, "hardware=b300&install=k8s")["kubernetes"]
    assert k8s["yaml"] == "" and "LeaderWorkerSet" in k8s["reason"]


@pytest.mark.parametrize("name", ["HOME", "PATH", "HF_TOKEN", "LWS_LEADER_ADDRESS"])
def test_a_recipe_setting_a_platform_name_is_a_recipe_error(tmp_path, name):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["model"].setdefault("base_env", {}).update({name: "x"}))
    errs = _errors(recipes)
    assert any(e.key == f"model.base_env.{name}" and "must not set it" in e.message for e in errs), errs


# --- values the format accepts never crash the Kubernetes builder ----------------

def test_a_port_that_is_no_port_is_a_recipe_error_and_a_reason_not_a_traceback(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["model"]["base_args"].extend(["--port", "80a"]))
    errs = _errors(recipes)
    assert any(e.key == "model.base_args" and "--port" in e.message and "TCP port" in e.message for e in errs), errs
    ctx = _ctx(lambda d: d["model"]["base_args"].extend(["--port", "80a"]))
    plan = compose_page(ctx, "hardware=b300&install=k8s")
    assert plan["kubernetes"]["yaml"] == "" and "TCP port" in plan["kubernetes"]["reason"]
    assert not all(o.get("disabled") for group in plan["options"].values() if isinstance(group, list) for o in group)
    res = subprocess.run([sys.executable, "-m", "composer", K3, "--recipes", str(recipes), "--query", "install=k8s"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr and "TCP port" in res.stderr, res.stderr


def test_huge_weights_are_a_recipe_error_and_never_overflow_the_manifests(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["variants"]["default"].update(vram_minimum_gb=1e308))
    errs = _errors(recipes)
    assert any(e.file == "models/moonshotai/Kimi-K3.yaml" and e.key == "variants.default.vram_minimum_gb"
               and "less than or equal to 1000000" in e.message for e in errs), errs
    res = subprocess.run([sys.executable, "-m", "composer", K3, "--recipes", str(recipes), "--query", "install=k8s"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr and "vram_minimum_gb" in res.stderr, res.stderr
    # A value past validation (built another way) still composes: a reason, not OverflowError.
    ctx = make_context(K3, load_recipe(ROOT / "recipes", K3), load_catalog(ROOT / "recipes"))
    variants = dict(ctx.recipe.variants)
    variants["default"] = dataclasses.replace(variants["default"], vram_minimum_gb=1e308, parameter_count_b=None)
    ctx = make_context(K3, dataclasses.replace(ctx.recipe, variants=variants), ctx.catalog)
    plan = compose_page(ctx, "hardware=b300&install=k8s")
    assert plan["kubernetes"] is None or plan["kubernetes"]["yaml"] == "" or "Gi" in plan["kubernetes"]["yaml"]


# --- option values ------------------------------------------------------------------

def test_an_option_value_that_is_an_option_is_an_error_and_stays_attached(tmp_path):
    recipes = k3_recipes_copy(tmp_path, lambda d: d["model"]["base_args"].append("--served-model-name=--trust-remote-code"))
    errs = _errors(recipes)
    assert any(e.key == "model.base_args" and "--served-model-name" in e.message and "starts with '-'" in e.message
               for e in errs), errs
    ctx = _ctx(lambda d: d["model"]["base_args"].append("--served-model-name=--privileged"))
    plan = compose(ctx, "hardware=b300&install=docker")
    (cmd, *_) = plan["commands"] + plan["blocked_commands"]
    argv = cmd["argv"]
    assert "--served-model-name=--privileged" in argv and "--privileged" not in argv
    assert "--privileged" not in cmd["docker_argv"]


# --- strategy and KV-store files come from strangers too --------------------------

CATALOG_FAULTS = [
    # (file under recipes/, edit, key path, words of the error)
    ("kv_store/kv_store_distributed_mooncake.yaml", lambda d: d["router"].update(policy="--privileged"),
     "router.policy", "starts with '-'"),
    ("kv_store/kv_store_distributed_mooncake.yaml", lambda d: d["router"].update(port="30080 --privileged"),
     "router.port", "TCP port"),
    ("strategies/pd_cluster.yaml", lambda d: d["router"].update(policy="--log-level=debug"), "router.policy",
     "starts with '-'"),
    ("strategies/multi_node_tp.yaml", lambda d: d.setdefault("vllm_args", []).extend(["--port", "80a"]), "vllm_args",
     "TCP port"),
    ("strategies/pd_cluster.yaml", lambda d: d["prefill"]["vllm_args"].append("--served-model-name=--x"),
     "prefill.vllm_args", "starts with '-'"),
    ("kv_store/kv_store_distributed_mooncake.yaml", lambda d: d["vllm"]["vllm_args"].append("--api-key=-k"),
     "vllm.vllm_args", "starts with '-'"),
]


@pytest.mark.parametrize("rel, edit, key, words", CATALOG_FAULTS, ids=[f[2] + ":" + f[3][:9] for f in CATALOG_FAULTS])
def test_a_catalog_value_that_does_not_fit_where_it_lands_is_an_error_naming_its_file(tmp_path, rel, edit, key, words):
    """Adversarial finding (issue 23): a KV store's router policy "--privileged"
    became an option of vllm-router and a strategy's "--port 80a" passed the
    checks; strategy and KV-store files are checked as recipe files are."""
    recipes = recipes_copy(tmp_path, rel, edit)
    errs = _errors(recipes)
    assert any(e.file == rel and e.key == key and words in e.message for e in errs), errs
    res = subprocess.run([sys.executable, "-m", "composer", "check", str(recipes)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode != 0 and f"{rel}: {key}:" in res.stdout + res.stderr, res.stdout + res.stderr


# --- the property test ------------------------------------------------------------

HOSTILE = st.sampled_from([
    "--privileged", "-v", "/:/host", "-e", "X=1", "--network=host", "$HOME", "$PATH", "$HF_TOKEN", "$POD_IP",
    "$LWS_WORKER_INDEX", "$LWS_LEADER_ADDRESS", "$(LWS_WORKER_INDEX)", "$$(HOME)", "$(touch canary)", "a b",
    "x\n--privileged", "80a", "1e308", "/var/run/docker.sock", "$X_CONFIG_PATH", "; touch canary", "`id`", "-1",
]) | st.text(alphabet="-$(){}:/ =\\'\"\nAZaz09_.", max_size=24)
FIELDS = ["image", "variant-image", "hw-image", "arg-value", "arg-flag", "env-value", "env-name", "config-path",
          "port", "feature-arg", "companion", "served-name"]


def _plant(d: dict, where: str, text: str) -> None:
    env = d["model"].setdefault("base_env", {})
    if where == "image":
        d["model"]["docker_image"] = text
    elif where == "variant-image":
        d["variants"]["default"]["docker_image"] = text
    elif where == "hw-image":
        d["variants"]["default"].setdefault("hardware_overrides", {}).setdefault("h200", {})["docker_image"] = text
    elif where == "arg-value":
        d["model"]["base_args"] += ["--max-num-seqs", text]
    elif where == "arg-flag":
        d["model"]["base_args"] += [f"--served-model-name={text}"]
    elif where == "env-value":
        env["HOSTILE_VALUE"] = text
    elif where == "env-name":
        env[text] = "1"
    elif where == "config-path":
        env["EVIL_CONFIG_PATH"] = text
    elif where == "port":
        d["model"]["base_args"] += ["--port", text]
    elif where == "feature-arg":
        d["features"]["tool_calling"]["args"] = list(d["features"]["tool_calling"].get("args") or []) + ["--tool-parser-plugin", text]
    elif where == "companion":
        d["features"]["tool_calling"]["companion"] = {"label": "helper", "command": f"helper --flag {shlex.quote(text)}"}
    elif where == "served-name":
        d["model"]["base_args"] += ["--served-model-name", text]


def _docker_options(argv: list[str]) -> tuple[list, list, list]:
    """(options, mounts, env names) of ``docker run`` before the image."""
    opts, mounts, names, i = [], [], [], 3
    while i < len(argv) and argv[i].startswith("-"):
        t = argv[i]
        if t in ("-p", "-v", "-e", "--network", "--security-opt", "--group-add", "--gpus"):
            (mounts if t == "-v" else names if t == "-e" else opts).append(argv[i + 1].split("=")[0] if t == "-e" else t)
            i += 2
        else:
            opts.append(t)
            i += 1
    return opts, mounts, names


def _shape(plan: dict) -> dict:
    """What a form runs beyond the plan's argv: docker options, mounts and env
    names; Kubernetes containers, volumes and env names per pod template."""
    out: dict = {"docker": [], "k8s": []}
    for c in plan["commands"]:
        if c.get("docker_argv"):
            out["docker"].append(_docker_options(list(c["docker_argv"])))
    for c in _containers(plan) if plan["kubernetes"] and plan["kubernetes"]["yaml"] else []:
        out["k8s"].append((c["name"], sorted(m["mountPath"] for m in c.get("volumeMounts", [])),
                           sorted(e["name"] for e in c.get("env", []))))
    return out


BENIGN = {"image": "vllm/vllm-openai:v0.33.0", "variant-image": "vllm/vllm-openai:v0.33.0",
          "hw-image": "vllm/vllm-openai:v0.33.0", "arg-value": "8", "arg-flag": "kimi", "env-value": "1",
          "env-name": "BENIGN_NAME", "config-path": "/etc/x.json", "port": "8000", "feature-arg": "/p.py",
          "companion": "ok", "served-name": "kimi"}
QUERIES = ("hardware=h200&install=docker", MULTI + "&install=k8s")


@pytest.fixture(scope="module")
def baselines():
    """Per field, the shape of each form with a benign value there (a planted
    companion is a container of its own by design, not from the text)."""
    catalog = load_catalog(ROOT / "recipes")
    out = {}
    for where, text in BENIGN.items():
        data = _raw_k3()
        _plant(data, where, text)
        ctx = make_context(K3, data, catalog)
        out[where] = {q: _shape(compose(ctx, q)) for q in QUERIES}
    return out


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE, where=st.sampled_from(FIELDS))
def test_hostile_values_never_add_an_option_mount_container_volume_or_env_name(baselines, text, where):
    from tests.test_k8s import check_manifests

    data = _raw_k3()
    _plant(data, where, text)
    catalog = load_catalog(ROOT / "recipes")
    try:
        ctx = make_context(K3, data, catalog)
    except ValueError:
        return  # refused by the schema, with its key path
    for query, base in baselines[where].items():
        try:
            plan = compose(ctx, query)
        except ValueError:
            return  # e.g. a companion that is not shell words: refused
        shape = _shape(plan)
        for got in shape["docker"]:
            opts, mounts, names = got
            b_opts, b_mounts, b_names = base["docker"][0] if base["docker"] else got
            assert set(opts) <= set(b_opts) and mounts == b_mounts, (where, text, got)
            assert set(names) - set(b_names) <= {text}, (where, text, names)
            assert not set(names) & PLATFORM_NAMES - {"HF_TOKEN"}
        for c in plan["commands"]:
            if c.get("docker_argv"):
                d = list(c["docker_argv"])
                assert d[len(d) - len(c["argv"]) + 2:] == list(c["argv"][2:])  # the serve argv, unchanged
                if "\\\n" not in text:  # the naive line join below would also cut a quoted backslash-newline
                    assert shellwords.split(c["docker_text"]) == d
            if "\\\n" not in text:
                assert shellwords.split(c["command"]) == c["argv"]
        if plan["kubernetes"]["yaml"]:
            check_manifests(plan)  # every container's argv, expanded as Kubernetes does, is the plan's
            b = {n: (m, e) for n, m, e in base["k8s"]}
            for name, mounts, env in shape["k8s"]:
                assert name in b and mounts == b[name][0], (where, text, name)
                extra = set(env) - set(b[name][1])
                # A $NAME of the text is the person's parameter (its own env var); the pod's names are defined
                # by what provides them; a shell's names never appear (no manifests then).
                placeholders = {m.group(0)[1:] for m in PLACEHOLDER_RE.finditer(text)}
                assert extra <= ({text, "POD_IP"} | placeholders) - SHELL_NAMES, (where, text, extra)
                assert len(env) == len(set(env))
            assert len(shape["k8s"]) == len(base["k8s"])
            for c in _containers(plan):
                assert not [e for e in c.get("env", []) if e["name"] in PLATFORM_NAMES and e.get("value") == ""]


@pytest.fixture(scope="module")
def slurm_bin(tmp_path_factory):
    from tests.test_slurm_form import RECORDER, SCONTROL, SRUN

    d = tmp_path_factory.mktemp("slurm-bin")
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("vllm", RECORDER), ("vllm-router", RECORDER)):
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return d


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE, where=st.sampled_from([f for f in FIELDS if "image" not in f]))
@example(text="$Aa", where="arg-value")  # a placeholder followed by letters: "${A}a" on the config's command line
@example(text="$A\n", where="arg-value")  # a newline inside the command line's quotes
@example(text="$A$", where="arg-value")  # "$A\$" on the command line: shlex kept the backslash, bash does not
def test_hostile_values_reach_config_files_and_sbatch_jobs_as_the_plans_argv(tmp_path, slurm_bin, text, where):
    """Issue 23 (audit: the property covered shell, Docker and Kubernetes only):
    with a hostile value planted in a recipe field, every YAML config file read
    back by vLLM's own load_config_file, and every sbatch job run under the
    stand-in srun, give each node exactly the plan's argv and env."""
    from tests.test_config_form import check_plan as config_round_trip
    from tests.test_slurm_form import check_plan as slurm_run

    data = _raw_k3()
    _plant(data, where, text)
    try:
        ctx = make_context(K3, data, load_catalog(ROOT / "recipes"))
    except ValueError:
        return  # refused by the schema, with its key path
    for query in ("hardware=h200&install=config", MULTI + "&install=config", MULTI + "&install=slurm"):
        try:
            plan = compose(ctx, query, every_form=False)
        except ValueError:
            return  # e.g. a companion that is not shell words: refused
        if plan["output"]["reason"] or not (plan["commands"] or plan["blocked_commands"]):
            continue
        if "install=config" in query:
            config_round_trip(plan, tmp_path)
        else:
            slurm_run(plan, tmp_path, slurm_bin, {}, {("serve", True)}, shell_names=True)
