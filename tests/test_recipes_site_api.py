"""Issue 20.1: the public recipes site's JSON API, served from our build.

vLLM 0.33.0's ``tools/recipes/recipe_json_to_vllm_config.py`` — taken from the
vLLM 0.33.0 source distribution on PyPI at test set-up (cached under
``.cache/vllm-sdist/``, never committed; its sha256 is the one PyPI's JSON
simple API lists) and run unmodified — is pointed at the built site served on
127.0.0.1, by discovery (``--api-base --model --hardware``, and
``--strategy`` for every alternative) and by the direct per-hardware URL, for
every offered hardware of our recipes and the recipe default. A single-node
rendering gives exit 0 and a ``config.yml`` whose options equal our plan's
argv (compared as vLLM reads both: the converter's YAML through vLLM's own
``load_config_file``, values as JSON where they parse) and an ``env.sh`` with
the plan's env; a multi-node or P/D rendering is refused, as the tool
designs (exit 1, naming the multi-process fields).
"""

from __future__ import annotations

from collections import Counter

import functools
import hashlib
import http.server
import json
import subprocess
import sys
import tarfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from composer.api import compose
from composer.argv import parse_tokens
from composer.buildtime.routes import public_api_ids
from tests.plan_space import FULL, our_plans
from tests.test_config_form import vllm_load_config_file

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "vllm-sdist"
VERSION = "0.33.0"
CONVERTER = "tools/recipes/recipe_json_to_vllm_config.py"
SIMPLE = "https://pypi.org/simple/vllm/"


def sdist() -> Path:
    """The vLLM sdist, from the URL and sha256 PyPI's JSON simple API (PEP 691)
    lists; cached. ``pytest.skip`` when PyPI cannot be reached."""
    name = f"vllm-{VERSION}.tar.gz"
    path = CACHE / name
    meta = CACHE / (name + ".sha256")
    if path.exists() and meta.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == meta.read_text().strip():
        return path
    req = urllib.request.Request(SIMPLE, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            index = json.load(resp)
        entry = next(f for f in index["files"] if f["filename"] == name)
        with urllib.request.urlopen(entry["url"], timeout=300) as resp:
            data = resp.read()
    except (OSError, urllib.error.URLError) as exc:
        pytest.skip(f"PyPI is unreachable, so vLLM {VERSION}'s converter cannot be fetched: {exc}")
    digest = hashlib.sha256(data).hexdigest()
    assert digest == entry["hashes"]["sha256"], "the sdist does not match PyPI's sha256"
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    meta.write_text(digest)
    return path


@pytest.fixture(scope="module")
def converter(tmp_path_factory) -> Path:
    with tarfile.open(sdist()) as tf:
        member = tf.getmember(f"vllm-{VERSION}/{CONVERTER}")
        text = tf.extractfile(member).read()
    out = tmp_path_factory.mktemp("converter") / "recipe_json_to_vllm_config.py"
    out.write_bytes(text)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Our site built into a temporary folder and served on 127.0.0.1 the way
    a static host serves it; yields ``(base URL, folder)``."""
    import build

    from tests.site_cache import shared_site

    out = shared_site()
    class Quiet(build.StaticHostHandler):
        def log_message(self, *args):  # no access log in the test output
            pass

    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", out
    server.shutdown()
    server.server_close()


def get(base: str, path: str):
    with urllib.request.urlopen(base + path, timeout=30) as resp:
        return json.load(resp)


def run(converter: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    for name in ("config.yml", "env.sh"):
        (cwd / name).unlink(missing_ok=True)
    return subprocess.run([sys.executable, str(converter), *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def _value(v):
    if v is None:
        return None
    try:
        data = json.loads(v)
    except ValueError:
        return v
    return json.dumps(data, sort_keys=True)


def options(tokens: list[str]) -> list[tuple]:
    return sorted((u.key, u.enabled, _value(u.value)) for u in parse_tokens(tokens))


def check_single(res: subprocess.CompletedProcess, cwd: Path, plan: dict) -> None:
    """Exit 0; config.yml read by vLLM is the plan's argv; env.sh exports its env."""
    assert res.returncode == 0, res.stderr
    (cmd,) = plan["commands"]
    config = cwd / "config.yml"
    assert yaml.safe_load(config.read_text())["model"] == cmd["argv"][2]
    args = vllm_load_config_file()(config)
    assert args[:2] == ["--model", cmd["argv"][2]]
    assert options(args[2:]) == options(list(cmd["argv"][3:])), (plan["url"], args)
    env = subprocess.run(["bash", "-c", 'source ./env.sh && env -0'], cwd=cwd, capture_output=True, env={"PATH": "/usr/bin:/bin"})
    got = dict(x.split("=", 1) for x in env.stdout.decode().split("\0") if "=" in x)
    assert all(got.get(k) == v for k, v in cmd["env"].items()), (cmd["env"], got)


def check_refused(res: subprocess.CompletedProcess) -> None:
    assert res.returncode == 1, res.stdout
    assert "multi-process deployment" in res.stderr or "not a single-node deployment" in res.stderr, res.stderr
    assert "ERROR:" in res.stderr


def test_the_converter_reads_every_rendering_of_our_recipes(site, converter, tmp_path):
    base, _ = site
    rows = get(base, "/models.json")
    ours = dict(our_plans())
    models = [m for m in rows if "parent" not in m]
    assert sorted(m["hf_id"] for m in models) == sorted(public_api_ids(ours))
    counts = {"single": 0, "refused": 0, "runs": 0}
    refused_of: Counter = Counter()
    stores = {s["id"] for s in get(base, "/kv_store.json")}
    kv_seen: set = set()
    for model in models:
        rid = model["hf_id"]
        ctx = ours[rid]
        doc = get(base, model["json"])
        assert list(doc)[:3] == ["hf_id", "meta", "recommended_command"] and doc["hf_id"] == rid
        assert not set(doc) & {"dependencies", "strategy_overrides", "compatible_strategies", "default_strategy"}
        rec = doc["recommended_command"]
        by_hw = rec["by_hardware"]
        default = compose(ctx, "", every_form=False)
        assert rec["hardware"] == default["selection"]["hardware"] and rec["argv" if "argv" in rec else "head_argv"]
        variant = default["selection"]["variant"]
        offered = [h for h in ctx.listed_hardware if not ctx.hardware_block_reason(h, variant)]
        for hw in offered:
            plan = compose(ctx, {"hardware": hw}, every_form=False)
            if plan["status"] != "ok":
                assert hw not in by_hw and hw in rec["blocked"]
                continue
            assert by_hw[hw] == f"/{rid}/hw/{hw}.json"
            rendering = get(base, by_hw[hw])
            assert rendering["strategy"] == plan["selection"]["strategy"] and rendering["summary"] == plan["summary"]
            checks = [(plan, ("--api-base", base, "--model", rid, "--hardware", hw)),
                      (plan, (base + by_hw[hw],))]
            for sid, path in rendering["alternatives"].items():
                assert path == f"/{rid}/hw/{hw}/strategies/{sid}.json"
                if sid in stores:  # a KV store is an alternative too (semantics §13), on its serving strategy
                    alt = compose(ctx, {"hardware": hw, "kv_offload": sid}, every_form=False)
                    check_kv_store(get(base, path), alt, sid, ctx)
                    kv_seen.add((rid, sid))
                else:
                    alt = compose(ctx, {"hardware": hw, "strategy": sid}, every_form=False)
                    assert alt["selection"]["strategy"] == sid
                checks.append((alt, ("--api-base", base, "--model", rid, "--hardware", hw, "--strategy", sid)))
            for want, args in checks:
                single = len(want["commands"]) == 1 and want["selection"].get("kv_offload") not in stores
                if not single and not FULL and refused_of[rid] >= 3:
                    continue  # the converter refuses every multi-process rendering alike: a few per recipe show it
                res = run(converter, tmp_path, *args)
                counts["runs"] += 1
                if single:
                    check_single(res, tmp_path, want)
                    counts["single"] += 1
                else:
                    check_refused(res)
                    counts["refused"] += 1
                    refused_of[rid] += 1
        # The default hardware's older strategy paths are the same renderings.
        for sid, path in rec["alternatives"].items():
            assert path == f"/{rid}/strategies/{sid}.json"
            assert get(base, path) == get(base, f"/{rid}/hw/{rec['hardware']}/strategies/{sid}.json")
    assert counts["single"] > 10 and counts["refused"] >= 6, counts
    assert ("meta-llama/Llama-3.3-70B-Instruct", "kv_store_distributed_mooncake") in kv_seen, kv_seen
    print(counts)


def check_kv_store(body: dict, plan: dict, kid: str, ctx) -> None:
    """A KV-store rendering (semantics §13, "kv_store"): the store's id as the
    strategy, the strategy every instance runs, every vLLM node's argv in
    order, the Mooncake processes by their role, and the router with several
    instances; the vLLM converter refuses it (several processes)."""
    serve = [c for c in plan["commands"] if c["role"] != "router"]
    assert plan["status"] == "ok" and body["strategy"] == kid and body["deploy_type"] == "kv_store_lb"
    assert body["serving_strategy"] == plan["selection"]["strategy"] != kid
    assert body["instances"] == (plan["selection"].get("instances") or 1) and body["summary"] == plan["summary"]
    assert body["vllm_argvs"] == [list(c["argv"]) for c in serve] and body["vllm_envs"] == [dict(c["env"]) for c in serve]
    assert body["kv_min_vllm_version"] == ctx.strategy(kid).min_vllm_version
    roles = {c["role"]: c for c in plan["companions"]}
    assert body["master"] == {"command": roles["mooncake-master"]["command"], "install": roles["mooncake-master"]["install"]}
    assert body["mooncake_config"] == roles["mooncake-config"]["command"] and "MOONCAKE_CONFIG_PATH" in body["mooncake_config"]
    note = (ctx.strategy(kid).mooncake_vllm_config or {}).get("note")  # the store's own note (adversarial finding)
    assert body["mooncake_config_note"] == (note or roles["mooncake-config"]["description"])
    assert ("router_argv" in body) == (body["instances"] > 1)
    assert body["strategy_spec"]["id"] == kid


def test_strategies_and_taxonomy_are_served(site):
    base, out = site
    strategies = get(base, "/strategies.json")
    ids = [s["id"] for s in strategies]
    assert "single_node_tp" in ids and all(s["deploy_type"] != "kv_store_lb" for s in strategies)
    assert get(base, "/strategies/single_node_tp.json")["id"] == "single_node_tp"
    assert "hardware_profiles" in get(base, "/taxonomy.json")
    stores = get(base, "/kv_store.json")
    assert stores and all(s["deploy_type"] == "kv_store_lb" for s in stores)
    for s in stores:
        assert get(base, f"/kv_store/{s['id']}.json") == s
    # The API sits next to the pages: every page and our own api/ are still there.
    for rid in dict(our_plans()):
        assert (out / rid / "index.html").is_file() and (out / "api" / f"{rid}.json").is_file()


def test_public_api_paths_never_take_a_page_folder():
    ids = ["org/x", "org/x.json", "models.json/y", "strategies/z", "Org/Y"]
    assert public_api_ids(ids) == ["org/x.json", "Org/Y"]


def test_every_top_level_name_of_the_public_api_is_reserved():
    # a recipe org named after an API file or folder (kv_store, strategies) would be overwritten by it
    from composer.buildtime.public_api import TOP_LEVEL
    from composer.buildtime.routes import RESERVED

    assert set(TOP_LEVEL) <= RESERVED


def test_promoted_variants_are_served_under_their_own_checkpoint_id(site, converter, tmp_path):
    # semantics §13: /models.json lists promoted variants, /<variant model id>.json and its hw/ subtree serve
    # the variant's plans, and the parent lists them; vLLM's converter finds a variant by its own id.
    from composer.buildtime.public_api import promoted_variants

    base, out = site
    rows = {m["hf_id"]: m for m in get(base, "/models.json") if "parent" in m}
    ours = dict(our_plans())
    want = {mid: (rid, key) for rid, ctx in ours.items() for key, mid in promoted_variants(ctx, ours).items()}
    assert set(rows) == set(want) and len(want) >= 2, (sorted(rows), sorted(want))
    runs = 0
    for mid, (rid, key) in want.items():
        ctx = ours[rid]
        assert (rows[mid]["parent"], rows[mid]["variant"]) == (rid, key) and rows[mid]["url"] == f"/{rid}/?variant={key}"
        doc = get(base, f"/{mid}.json")
        assert doc["hf_id"] == mid and (doc["parent"], doc["variant"]) == (rid, key)
        assert get(base, f"/{rid}.json")["variants"][key]["json"] == f"/{mid}.json"
        for hw, path in doc["recommended_command"]["by_hardware"].items():
            assert path == f"/{mid}/hw/{hw}.json"
            plan = compose(ctx, {"variant": key, "hardware": hw}, every_form=False)
            rendering = get(base, path)
            assert rendering["variant"] == key and rendering["summary"] == plan["summary"]
            assert mid in (rendering.get("argv") or rendering.get("head_argv") or [])
            if len(plan["commands"]) == 1 and runs < 3:
                check_single(run(converter, tmp_path, "--api-base", base, "--model", mid, "--hardware", hw), tmp_path, plan)
                runs += 1
    assert runs >= 1
    assert (out / "nvidia" / "Llama-3.3-70B-Instruct-FP4" / "index.html").is_file()  # the page's redirect stub stays
