"""Install what the command needs (issue 12, item 2): the recipe's
``dependencies`` (brand and install-mode filters), vLLM-Omni installs, images
and ``--omni`` for every omni recipe, no KV offload on omni pages, the highest
minimum vLLM version across recipe, variant and companions (an unreleased one
switches to the nightly build, with a notice) and the CUDA choice of images."""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path

import pytest
import yaml

from composer import run_forms
from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths
from composer.shell import recipe_script

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
K3 = "moonshotai/Kimi-K3"
corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")


def _raw(rid: str, base: Path) -> dict:
    return yaml.safe_load((base / "models" / f"{rid}.yaml").read_text())


def _corpus_recipes() -> list[tuple[str, dict]]:
    if not CORPUS.exists():
        return []
    return [(rid, _raw(rid, CORPUS)) for rid in recipe_paths(CORPUS)]


@pytest.fixture(scope="module")
def corpus_catalog():
    return load_catalog(CORPUS)


@pytest.fixture(scope="module")
def our_catalog():
    return load_catalog(ROOT / "recipes")


def _k3(our_catalog, edit):
    data = copy.deepcopy(_raw(K3, ROOT / "recipes"))
    edit(data)
    return make_context(K3, data, our_catalog)


def _is_omni(raw: dict) -> bool:
    return "omni" in (raw.get("meta", {}).get("tasks") or []) or "omni" in raw


def _words(text: str) -> list[str]:
    """The words a shell reads in a snippet, continuation lines joined."""
    return shlex.split(text.replace("\\\n", " "))


def _installs_omni(plan: dict) -> bool:
    inst = plan["install"]
    if plan["selection"]["install"] == "docker":
        return "vllm-omni" in (inst["image"] or "") or any("vllm-omni" in d["command"] for d in inst["dependencies"])
    texts = [inst["pip"] or ""] + [d["command"] for d in inst["dependencies"]]
    return any("vllm-omni" in t or "vllm_omni" in t for t in texts)


# ------------------------------------------------------------------ omni
OMNI = [(rid, raw) for rid, raw in _corpus_recipes() if _is_omni(raw)]


@corpus
def test_the_corpus_has_the_omni_recipes_the_issue_names():
    ids = {rid for rid, _ in OMNI}
    assert {"Qwen/Qwen-Image", "zai-org/GLM-Image"} <= ids and len(ids) >= 20


@corpus
@pytest.mark.parametrize("rid", [rid for rid, _ in OMNI])
def test_every_omni_recipe_serves_with_omni_and_installs_vllm_omni(rid, corpus_catalog):
    ctx = make_context(rid, load_recipe(CORPUS, rid), corpus_catalog)
    assert ctx.strategies == ["omni"]  # whatever the recipe lists (Qwen-Image lists single_node_tp)
    hardware = [h for h in ctx.listed_hardware if not ctx.hardware_block_reason(h, "default")]
    assert hardware
    for hw in hardware:
        for install in ("pip", "docker"):
            plan = compose(ctx, {"hardware": hw, "install": install})
            commands = plan["commands"] or plan["blocked_commands"]
            assert commands
            for c in commands:
                assert c["argv"][:2] == ["vllm", "serve"] and "--omni" in c["argv"], (hw, c["argv"])
            if plan["selection"]["install"] != install:
                continue  # Docker not offered here (the reason is in install.docker_reason)
            if install == "pip" and plan["install"]["pip"] is None and not plan["install"]["dependencies"]:
                continue  # the recipe turns the pip form off
            assert _installs_omni(plan), (hw, install, plan["install"])
            if install == "docker":
                assert "vllm/vllm-openai" not in plan["install"]["image"]


@corpus
@pytest.mark.parametrize("rid", [rid for rid, _ in OMNI])
def test_omni_pages_offer_no_kv_offload_and_mooncake_never_composes(rid, corpus_catalog):
    ctx = make_context(rid, load_recipe(CORPUS, rid), corpus_catalog)
    page = compose_page(ctx, "")
    assert [o["id"] for o in page["options"]["kv_offload"]] == ["off"]
    for kv in ("kv_store_centralized_mooncake", "cpu_offload", "lmcache"):
        plan = compose(ctx, {"kv_offload": kv})
        assert plan["selection"]["kv_offload"] == "off"
        assert any(n["code"] == "kv-offload-unavailable" for n in plan["notices"])
        assert not plan["companions"]
        for c in plan["commands"] + plan["blocked_commands"]:
            assert "--kv-transfer-config" not in c["argv"]


def test_a_vllm_omni_release_is_installed_with_the_vllm_it_is_built_on(our_catalog):
    ctx = _k3(our_catalog, lambda d: (d["meta"].__setitem__("tasks", ["omni"]), d.pop("compatible_strategies", None)))
    plan = compose(ctx, "hardware=h200")
    pip = plan["install"]["pip"]
    assert f"vllm=={run_forms.OMNI_RELEASE}" in pip and f"vllm-omni=={run_forms.OMNI_RELEASE}" in pip
    docker = compose(ctx, "hardware=h200&install=docker")["install"]
    assert docker["image"] == f"vllm/vllm-omni:v{run_forms.OMNI_RELEASE}"
    amd = compose(ctx, "hardware=mi355x&install=docker")["install"]
    assert amd["image"] == f"vllm/vllm-omni-rocm:v{run_forms.OMNI_RELEASE}"


def test_an_omni_recipe_newer_than_the_omni_release_builds_it_from_source(our_catalog):
    newer = ".".join(str(int(p) + (1 if i == 1 else 0)) for i, p in enumerate(run_forms.OMNI_RELEASE.split(".")))

    def edit(d):
        d["meta"]["tasks"] = ["omni"]
        d["model"]["min_vllm_version"] = newer
    ctx = _k3(our_catalog, edit)
    plan = compose(ctx, "hardware=h200&install=docker")
    assert plan["selection"]["install"] == "pip"  # no vLLM-Omni image of that version is known
    assert run_forms.OMNI_SOURCE in plan["install"]["pip"]
    assert "vLLM-Omni" in plan["install"]["docker_reason"]


# ----------------------------------------------------------- dependencies
DEPENDENT = [(rid, raw) for rid, raw in _corpus_recipes() if raw.get("dependencies")]


@pytest.mark.parametrize("step, pin", [
    ("uv pip install vllm==0.12.0", "0.12.0"),
    ("uv pip install 'vllm[audio]==0.11.2' --torch-backend auto", "0.11.2"),
    ("pip install -U vllm-omni==0.12.0", None),       # another package
    ("uv pip install vllm>=0.12.0", None),            # a floor, not a pin
    ("# uv pip install vllm==0.12.0", None),          # a comment
])
def test_a_recipe_step_that_pins_vllm_replaces_the_install_lines_vllm(our_catalog, step, pin):
    """A fresh user's finding: Wan2.2's install lines put vllm 0.30.0 in, then
    the recipe's own step downgraded it to 0.12.0. A step that pins vLLM
    itself decides the version: the lines keep the venv and install no vLLM
    of their own, and say that the flags were checked against another release."""
    ctx = _k3(our_catalog, lambda d: d.__setitem__("dependencies", [{"command": step, "note": "pin"}]))
    inst = compose(ctx, "hardware=h200")["install"]
    assert run_forms.recipe_vllm_pin(ctx.recipe.dependencies) == pin
    ours = [w for w in _words(inst["pip"]) if w.startswith("vllm==")]
    assert inst["pip"].startswith("uv venv") and (ours == []) == (pin is not None), inst["pip"]
    said = [n for n in inst["notes"] if "pins vLLM" in n]
    assert (said == [f"The recipe's own install step pins vLLM {pin}, so the lines here install no vLLM of their own. "
                     f"The commands' flags are checked against vLLM {run_forms.VLLM_RELEASE}'s options; vLLM {pin} may "
                     "not take every one of them."]) if pin else said == []
    optional = _k3(our_catalog, lambda d: d.__setitem__("dependencies", [{"command": step, "optional": True}]))
    assert run_forms.recipe_vllm_pin(optional.recipe.dependencies) is None  # the commands run without it


def _expected_words(command: str) -> list[str]:
    """The words of a recipe command with its ``&&``/``;`` separators (the
    corpus never quotes them) and comments left out."""
    lines = [re.sub(r"(^|\s)#.*$", "", ln) for ln in command.replace("\\\n", " ").splitlines()]
    return shlex.split(re.sub(r"&&|;", " ", "\n".join(lines)))


@corpus
def test_the_corpus_recipes_with_dependencies_are_read():
    assert len(DEPENDENT) >= 40


@corpus
@pytest.mark.parametrize("rid", [rid for rid, _ in DEPENDENT])
def test_every_recipe_with_dependencies_shows_them(rid, corpus_catalog):
    raw = _raw(rid, CORPUS)
    ctx = make_context(rid, load_recipe(CORPUS, rid), corpus_catalog)
    brands = {}  # brand -> (hardware, variant) offered together
    for variant in ctx.recipe.variants:
        for hw in ctx.listed_hardware:
            if not ctx.hardware_block_reason(hw, variant):
                brands.setdefault(ctx.hw(hw).brand, (hw, variant))
    shown_anywhere = set()
    for hw, variant in brands.values():
        for install in ("pip", "docker"):
            plan = compose(ctx, {"hardware": hw, "variant": variant, "install": install})
            mode = plan["selection"]["install"]
            brand = ctx.hw(plan["selection"]["hardware"]).brand  # the hardware shown (a blocked one is replaced)
            steps = plan["install"]["dependencies"]
            want = []
            for i, dep in enumerate(raw["dependencies"]):
                b = dep.get("brand")
                b = [b] if isinstance(b, str) else b
                if b is not None and brand.lower() not in {x.lower() for x in b}:
                    continue
                if mode not in (dep.get("install_modes") or ["pip"]):
                    continue
                want.append(i)
            assert len(steps) == len(want), (brand, mode)
            for i, step in zip(want, steps):
                dep = raw["dependencies"][i]
                assert step["note"] == (dep.get("note") or "")
                assert step["optional"] == bool(dep.get("optional"))
                assert _words(step["command"]) == _expected_words(dep["command"])
                shown_anywhere.add(i)
    # every dependency reaches a page for some brand and install form the recipe offers
    offered = {b.lower() for b in brands}
    for i, dep in enumerate(raw["dependencies"]):
        b = dep.get("brand")
        b = [b] if isinstance(b, str) else b
        if b is None or offered & {x.lower() for x in b}:
            assert i in shown_anywhere, dep


def test_dependency_filters_follow_brand_install_mode_and_optional(our_catalog):
    def edit(d):
        d["dependencies"] = [
            {"command": "uv pip install every-where", "note": "all brands, pip"},
            {"command": "uv pip install amd-only", "note": "AMD", "brand": "AMD"},
            {"command": "docker pull helper:1", "note": "docker form", "install_modes": ["docker"], "brand": ["NVIDIA", "AMD"]},
            {"command": "uv pip install extra", "note": "nice to have", "optional": True, "install_modes": ["pip", "docker"]},
        ]
    ctx = _k3(our_catalog, edit)

    def shown(query):
        return [(d["command"], d["optional"]) for d in compose(ctx, query)["install"]["dependencies"]]

    assert shown("hardware=h200") == [("uv pip install every-where", False), ("uv pip install extra", True)]
    assert shown("hardware=mi355x") == [("uv pip install every-where", False), ("uv pip install amd-only", False),
                                        ("uv pip install extra", True)]
    assert shown("hardware=h200&install=docker") == [("docker pull helper:1", False), ("uv pip install extra", True)]
    html = compose_page(ctx, "hardware=h200")
    from composer.render import PageRenderer, environment
    from jinja2 import FileSystemLoader

    extras = PageRenderer(environment(FileSystemLoader(ROOT / "site_src"))).fragments(html, ("extras",))["extras"]
    assert "every-where" in extras and "nice to have" in extras and "Optional:" in extras and "amd-only" not in extras


HOSTILE = ["x; touch canary", "x && touch canary", "$(touch canary)", "`touch canary`", "a | sh", "a || b",
           "echo > /etc/passwd", "x\ntouch canary", "x \\\n && y"]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_dependency_text_is_shown_as_separate_quoted_commands(our_catalog, text):
    from tests.test_hostile import _outside_single_quotes

    ctx = _k3(our_catalog, lambda d: d.__setitem__("dependencies", [{"command": f"uv pip install {text}", "note": "<b>n</b>"}]))
    step = compose(ctx, "hardware=h200")["install"]["dependencies"][0]
    outside = _outside_single_quotes(step["command"])
    assert not set(";&|`>") & set(outside) and "$(" not in outside, step["command"]
    # each line is a command of its own, so whatever runs is on screen
    assert "touch canary" not in step["command"].splitlines()[0] or "'" in step["command"].splitlines()[0]


def test_recipe_script_keeps_separators_inside_quotes():
    assert recipe_script("echo 'a && b; c' && ls") == "echo 'a && b; c'\nls"
    assert recipe_script("uv venv\nsource .venv/bin/activate\nuv pip install vllm==0.26.0\n").splitlines() == [
        "uv venv", "source .venv/bin/activate", "uv pip install vllm==0.26.0"]


# ---------------------------------------------------------- min version
def test_the_highest_minimum_across_recipe_variant_and_companions_is_installed(our_catalog):
    def edit(d):
        d["model"]["min_vllm_version"] = "0.12.0"
        d["variants"]["default"]["min_vllm_version"] = "0.20.1"
    ctx = _k3(our_catalog, edit)
    # A released minimum installs the release the commands are checked against, pinned (never `-U vllm`,
    # whatever is newest the day it runs): 0.20.1 <= 0.33.0.
    pip = compose(ctx, "hardware=h200")["install"]["pip"]
    assert f"uv pip install vllm=={run_forms.VLLM_RELEASE} " in pip and "-U" not in pip and ">=" not in pip
    assert compose(ctx, "hardware=h200")["install"]["min_vllm_version"] == "0.20.1"
    assert compose(ctx, "hardware=h200&install=docker")["install"]["image"] == f"vllm/vllm-openai:v{run_forms.VLLM_RELEASE}"
    assert compose(ctx, "hardware=mi355x&install=docker")["install"]["image"] == f"vllm/vllm-openai-rocm:v{run_forms.VLLM_RELEASE}"
    assert f"vllm=={run_forms.VLLM_RELEASE} --extra-index-url https://wheels.vllm.ai/rocm" in compose(ctx, "hardware=mi355x")["install"]["pip"]
    store = next(k for k in ctx.kv_options() if k in ctx.catalog.strategies)
    plan = compose(ctx, {"hardware": "h200", "kv_offload": store})
    if plan["selection"]["kv_offload"] == store and ctx.catalog.strategies[store].min_vllm_version:
        assert plan["install"]["min_vllm_version"] == max(
            ["0.20.1", ctx.catalog.strategies[store].min_vllm_version], key=run_forms.version_key)


def test_an_unreleased_minimum_switches_to_the_nightly_with_a_notice(our_catalog):
    major, minor = run_forms.VLLM_RELEASE.split(".")[:2]
    unreleased = f"{major}.{int(minor) + 1}.0"
    ctx = _k3(our_catalog, lambda d: d["variants"]["default"].__setitem__("min_vllm_version", unreleased))
    plan = compose(ctx, "hardware=h200")
    pip = plan["install"]["pip"]
    assert "wheels.vllm.ai/nightly" in pip and "--pre" in pip
    assert ">=" not in pip  # a nightly wheel (X.dev) is numbered below the release X it leads to
    assert plan["install"]["nightly"] and plan["install"]["min_vllm_version"] == unreleased
    notice = next(n for n in plan["notices"] if n["code"] == "nightly-required")
    assert unreleased in notice["message"] and run_forms.VLLM_RELEASE in notice["message"]
    assert compose(ctx, "hardware=h200&install=docker")["install"]["image"] == "vllm/vllm-openai:nightly"
    from jinja2 import FileSystemLoader

    from composer.render import PageRenderer, environment

    extras = PageRenderer(environment(FileSystemLoader(ROOT / "site_src"))).fragments(
        compose_page(ctx, "hardware=h200"), ("extras",))["extras"]
    assert f"Needs vLLM {unreleased} or newer: the nightly build." in extras
    assert compose(ctx, "hardware=mi355x&install=docker")["install"]["image"] == "vllm/vllm-openai-rocm:nightly"
    released = _k3(our_catalog, lambda d: d["variants"]["default"].__setitem__("min_vllm_version", run_forms.VLLM_RELEASE))
    plan = compose(released, "hardware=h200")
    assert not plan["install"]["nightly"] and not any(n["code"] == "nightly-required" for n in plan["notices"])
    assert compose(released, "hardware=h200&install=docker")["install"]["image"] == f"vllm/vllm-openai:v{run_forms.VLLM_RELEASE}"


def test_a_recipes_vllm_latest_image_is_pinned_to_the_checked_release(our_catalog):
    """A recipe's ``vllm/vllm-openai:latest`` runs the release the commands are
    checked against in every form; its own image or another tag stays."""
    ctx = _k3(our_catalog, lambda d: d["model"].__setitem__("docker_image", "vllm/vllm-openai:latest"))
    assert compose(ctx, "hardware=h200&install=docker")["install"]["image"] == f"vllm/vllm-openai:v{run_forms.VLLM_RELEASE}"
    own = _k3(our_catalog, lambda d: d["model"].__setitem__("docker_image", "example.org/team/vllm:latest"))
    assert compose(own, "hardware=h200&install=docker")["install"]["image"] == "example.org/team/vllm:latest"


def test_a_pinned_image_older_than_the_minimum_is_said(our_catalog):
    def edit(d):
        d["model"]["docker_image"] = "vllm/vllm-openai:v0.10.1"
        d["variants"]["default"]["min_vllm_version"] = "0.11.0"
    ctx = _k3(our_catalog, edit)
    plan = compose(ctx, "hardware=h200&install=docker")
    assert any(n["code"] == "image-too-old" and "0.10.1" in n["message"] for n in plan["notices"])
    ok = _k3(our_catalog, lambda d: (edit(d), d["model"].__setitem__("docker_image", "vllm/vllm-openai:v0.11.0")))
    assert not any(n["code"] == "image-too-old" for n in compose(ok, "hardware=h200&install=docker")["notices"])


def test_version_order_puts_pre_releases_below_their_release():
    order = ["0.9.2", "0.11.0rc1", "0.11.0", "0.11.1", "0.12", "1.0.0"]
    assert sorted(reversed(order), key=run_forms.version_key) == order
    # PEP 440: dev < a < b < rc < the release < post (adversarial finding: ".post1" sorted below its release,
    # so a 0.33.0.post1 minimum installed 0.33.0)
    pep = ["0.33.0.dev1", "0.33.0a1", "0.33.0b2", "0.33.0rc1", "0.33.0rc2", "0.33.0", "0.33.0.post1", "0.33.1.dev0"]
    assert sorted(reversed(pep), key=run_forms.version_key) == pep
    assert run_forms.unreleased("0.33.0.post1") and not run_forms.unreleased("0.33.0rc1")


@pytest.mark.parametrize("image, nightly, want", [
    ("vllm/vllm-openai:latest", False, "vllm/vllm-openai:v0.33.0"),
    ("vllm/vllm-openai", False, "vllm/vllm-openai:v0.33.0"),                       # no tag is latest
    ("docker.io/vllm/vllm-openai:latest", False, "docker.io/vllm/vllm-openai:v0.33.0"),  # Docker Hub by name
    ("vllm/vllm-openai-rocm:latest", True, "vllm/vllm-openai-rocm:nightly"),       # the nightly build needed
    ("vllm/vllm-openai:latest@sha256:" + "a" * 64, False, "vllm/vllm-openai:latest@sha256:" + "a" * 64),
    ("localhost:5000/vllm/vllm-openai:latest", False, "localhost:5000/vllm/vllm-openai:latest"),  # another registry
    ("vllm/vllm-openai:v0.30.0", False, "vllm/vllm-openai:v0.30.0"),
    ("vllm/vllm-tpu:latest", False, "vllm/vllm-tpu:latest"),
])
def test_pinned_image_pins_only_vllms_own_latest(image, nightly, want):
    assert run_forms.pinned_image(image, "0.33.0", nightly=nightly) == want


def test_a_recipes_latest_image_follows_the_nightly_build_when_it_is_needed(our_catalog):
    """A recipe's ``vllm/vllm-openai:latest`` with a minimum no release meets
    runs ``:nightly`` in Docker and Kubernetes, as pip installs the nightly
    (adversarial finding: it was pinned to the older release and then called too old)."""
    major, minor = run_forms.VLLM_RELEASE.split(".")[:2]
    for edit in (lambda d: d["model"].__setitem__("min_vllm_version", f"{major}.{int(minor) + 1}.0"),
                 lambda d: d["model"].__setitem__("nightly_required", True)):
        ctx = _k3(our_catalog, lambda d, edit=edit: (d["model"].__setitem__("docker_image", "vllm/vllm-openai:latest"), edit(d)))
        docker = compose(ctx, "hardware=h200&install=docker")
        assert docker["install"]["image"] == "vllm/vllm-openai:nightly"
        assert not any(n["code"] == "image-too-old" for n in docker["notices"])
        k8s = compose(ctx, "hardware=h200&install=k8s")["kubernetes"]["yaml"]
        assert "vllm/vllm-openai:nightly" in k8s and "None" not in k8s and "v0.33.0" not in k8s


# ----------------------------------------------------------------- CUDA
def _cuda_k3(our_catalog):
    return _k3(our_catalog, lambda d: d["model"].__setitem__(
        "docker_image", {"nvidia": {"cu129": "vllm/vllm-openai:v9-cu129", "cu130": "vllm/vllm-openai:v9"},
                         "amd": "vllm/vllm-openai-rocm:v9"}))


def test_a_cuda_control_picks_the_image_where_the_recipe_offers_several(our_catalog):
    ctx = _cuda_k3(our_catalog)
    page = compose_page(ctx, "hardware=h200&install=docker")
    assert [(o["id"], o["selected"]) for o in page["options"]["cuda"]] == [("cu129", False), ("cu130", True)]
    assert page["install"]["image"] == "vllm/vllm-openai:v9" and "cuda=cu130" in page["url"]  # pinned (v=2)
    cu129 = next(o for o in page["options"]["cuda"] if o["id"] == "cu129")
    picked = compose(ctx, cu129["query"])
    assert picked["install"]["image"] == "vllm/vllm-openai:v9-cu129"
    assert "cuda=cu129" in picked["url"] and picked["selection"]["cuda"] == "cu129"
    assert all("vllm/vllm-openai:v9-cu129" in c["docker_argv"] for c in picked["commands"])
    bad = compose(ctx, "hardware=h200&cuda=cu999")
    assert any(n["code"] == "invalid-cuda" for n in bad["notices"]) and bad["selection"]["cuda"] == "cu130"


def test_no_cuda_control_without_a_choice(our_catalog, plan):
    assert "cuda" not in plan("hardware=h200")["options"]  # our K3: no CUDA map
    amd = compose_page(_cuda_k3(our_catalog), "hardware=mi355x")
    assert "cuda" not in amd["options"]
    ignored = compose(_cuda_k3(our_catalog), "hardware=mi355x&cuda=cu129")
    assert "cuda" not in ignored["selection"] and any("cuda" in n["message"] for n in ignored["notices"])


def test_an_unreadable_dependency_command_is_an_error_with_its_key_path(tmp_path):
    import shutil

    from composer.buildtime.checks import validate
    from composer.buildtime.loader import RecipeLoadError

    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "models" / f"{K3}.yaml"
    data = yaml.safe_load(path.read_text())
    data["dependencies"] = [{"command": "uv pip install 'unbalanced", "note": "n"}]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeLoadError) as exc:
        validate(recipes)
    assert any(e.key == "dependencies[0].command" for e in exc.value.errors)


def test_kubernetes_runs_the_image_the_docker_form_picks(our_catalog):
    # Found in review: the manifests took the image without the CUDA (and KV
    # connector) choice the Docker form applies.
    ctx = _cuda_k3(our_catalog)
    plan = compose(ctx, "hardware=h200&cuda=cu129")
    assert plan["install"]["image"] == "vllm/vllm-openai:v9-cu129"
    assert "vllm/vllm-openai:v9-cu129" in plan["kubernetes"]["yaml"]
    assert '"vllm/vllm-openai:v9"' not in plan["kubernetes"]["yaml"]


def test_a_node_script_runs_vllm_from_the_install_steps_venv(tmp_path):
    """A fresh user's finding: after the Install steps, a node's downloaded
    script run in a new shell said "vllm: command not found". A host-installed
    form's node script activates the ``.venv`` of its directory unless vllm is
    on PATH; a container form's script runs docker and activates nothing."""
    import os
    import subprocess

    from tests import golden

    ctx = golden.context("ours", "moonshotai/Kimi-K3")
    for form in ("pip", "config", "slurm"):
        plan = compose(ctx, f"hardware=b200&nodes=2&strategy=multi_node_tp&install={form}", every_form=False)
        assert all("\n".join(run_forms.VENV_LINES) in c["script"] for c in plan["commands"]), form
    docker = compose(ctx, "hardware=b200&nodes=2&strategy=multi_node_tp&install=docker", every_form=False)
    assert not any(".venv/bin/activate" in c["script"] for c in docker["commands"])
    # Run the head's script where the Install steps made .venv: its vllm runs (a stand-in that records argv).
    plan = compose(ctx, "hardware=b200&nodes=2&strategy=multi_node_tp&install=pip", every_form=False)
    head = plan["commands"][0]
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vllm").write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$OUT"\n')
    (bin_dir / "vllm").chmod(0o755)
    (bin_dir / "activate").write_text(f'export VIRTUAL_ENV="{tmp_path / ".venv"}"\nexport PATH="{bin_dir}:$PATH"\n'
                                      'echo "${PS1}" >/dev/null  # an activate script that reads an unset variable\n')
    script = tmp_path / "head.sh"
    script.write_text(head["script"])
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "argv"), "HEAD_IP": "10.0.0.1", "IFACE_NAME": "ib0",
           "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "argv").read_text().split("\n")[:2] == ["serve", head["argv"][2]]
    os.remove(bin_dir / "activate")
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "vllm" in done.stderr  # no venv, no vllm: the shell says so


def test_slurm_install_says_where_to_run_it_and_a_met_minimum_says_so(our_catalog):
    """The SLURM form's Install steps say to run them on a GPU node in the
    submit directory (the jobs activate that .venv; on a login node uv's
    --torch-backend auto would pick the CPU build); other forms do not. A
    minimum vLLM the pinned release meets is said to be met (a fresh user read
    "Needs vLLM 0.21.0 or newer" above vllm==0.33.0 as a contradiction)."""
    from jinja2 import FileSystemLoader

    from composer.render import PageRenderer, environment
    from tests import golden

    k3 = golden.context("ours", "moonshotai/Kimi-K3")
    assert run_forms.SLURM_INSTALL_NOTE in compose(k3, "hardware=b200&nodes=2&strategy=multi_node_tp&install=slurm")["install"]["notes"]
    assert run_forms.SLURM_INSTALL_NOTE not in compose(k3, "hardware=b200&nodes=2&strategy=multi_node_tp")["install"]["notes"]
    llama = golden.context("ours", "meta-llama/Llama-3.3-70B-Instruct")
    page = compose_page(llama, "kv_offload=kv_store_distributed_mooncake")
    assert page["install"]["min_vllm_version"] and not page["install"]["nightly"]
    extras = PageRenderer(environment(FileSystemLoader(ROOT / "site_src"))).fragments(page, ("extras",))["extras"]
    assert f"Needs vLLM {page['install']['min_vllm_version']} or newer: the release the install lines pin meets it." in extras
