"""The plans the form tests walk: every recipe of ours with its selection
space, and every corpus recipe (for its default plan).

The walks that run a check per plan (manifests, config files, sbatch jobs)
check one plan per *shape* by default (``shapes``): what the form writes
around the argv follows the shape, and the argv itself is the page's, which
the golden file and the property tests pin for every selection. CI's 10-minute
budget holds that walk; ``COMPOSER_FULL_TESTS=1 make test`` walks every plan
(a release check, about 4 × longer)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from composer.api import compose, compose_page, make_context
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"


FULL = os.environ.get("COMPOSER_FULL_TESTS") == "1"
"""Walk every plan, not one per shape (see the module docstring)."""


ALWAYS = frozenset({"moonshotai/Kimi-K3", "moonshotai/Kimi-K2-Instruct", "deepseek-ai/DeepSeek-R1", "Qwen/Qwen3-32B",
                    "openai/gpt-oss-120b", "zai-org/GLM-5", "nvidia/Cosmos3-Super", "stepfun-ai/Step-3.5-Flash"})
"""Corpus recipes every sampled walk keeps: the ones issues and tests name."""


def sample(ids, walk: str, share: int = 2) -> list:
    """The corpus recipe ids a per-recipe walk checks in CI's run: every id
    with ``FULL``; otherwise ``ALWAYS`` plus the 1/``share`` of the others that
    the SHA-256 of ``walk`` + id picks. Each walk names itself, so different
    walks take different shares: over the suite every corpus recipe is walked
    by several of the properties, each property over a share of the corpus
    (deterministic; ``COMPOSER_FULL_TESTS=1`` walks everything). The heaviest
    walks (every strategy of every hardware, every import round trip) take a
    quarter: CI's 2 cores are the budget."""
    import hashlib

    ids = list(ids)
    if FULL:
        return ids
    return [i for i in ids if i in ALWAYS or hashlib.sha256(f"{walk}:{i}".encode()).digest()[0] % share == 0]


@lru_cache(maxsize=1)
def _ours() -> tuple:
    recipes = ROOT / "recipes"
    catalog = load_catalog(recipes)
    return tuple((rid, make_context(rid, load_recipe(recipes, rid), catalog)) for rid in recipe_paths(recipes))


def our_plans():
    """``(recipe id, context)`` of every recipe under ``recipes/`` (loaded once per process)."""
    return iter(_ours())


def shape(ctx, plan: dict) -> tuple:
    """What a form writes around the argv follows: the hardware's brand (the
    GPU resource, the image), the GPUs a node's command uses, strategy, node
    counts (1, 2 or more: a form writes the same around 3 nodes as around
    16), P/D pool modes, KV offload, instances, status and the kinds of
    command (role, pool)."""
    sel = plan["selection"]
    cmds = plan["commands"] or plan["blocked_commands"]
    gpus = tuple(sorted({plan_gpus(list(c["argv"])) for c in cmds if c["argv"][:2] == ["vllm", "serve"]}))

    def few(n):
        return None if n is None else min(int(n), 3)

    return (ctx.hw(sel["hardware"]).brand, gpus, sel["strategy"], few(sel["nodes"]), sel.get("prefill_mode"),
            few(sel.get("prefill_nodes")), sel.get("decode_mode"), few(sel.get("decode_nodes")), sel["kv_offload"],
            sel.get("instances"), plan["status"], tuple(sorted({(c["role"], c["pool"] or "") for c in cmds})))


def shapes(ctx, plans):
    """The distinct plans of ``plans`` (of context ``ctx``, by ``url``), one
    per ``shape`` unless ``FULL``: ``(plan, ...)`` in walk order."""
    seen: set = set()
    for plan in plans:
        key = plan["url"] if FULL else shape(ctx, plan)
        if key not in seen and plan["url"] not in seen:
            seen.add(key)
            seen.add(plan["url"])
            yield plan


def shape_queries(ctx) -> tuple[str, ...]:
    """The queries of ``selection_space`` that are the first of their ``shape``
    (every query with ``FULL``), the shape taken from the plan with the
    recipe's install form. Computed once per run and kept on disk beside the
    space (``SPACE_CACHE``): the form tests (Kubernetes, config files, SLURM)
    each compose only these, in their own form, instead of composing the whole
    space again to find them (measured: ~30 s of CPU per recipe and test on
    the 2-core CI machine)."""
    if FULL:
        return _space(ctx)
    space = _space(ctx)  # outside the shapes' lock: the space takes the same lock
    return _cached(ctx, "shapes", lambda: tuple(
        p["walked"] for p in shapes(ctx, ({**compose(ctx, q, every_form=False), "walked": q} for q in space))))


def corpus_contexts():
    """``(recipe id, context)`` of every recipe of the public corpus."""
    catalog = load_catalog(CORPUS)
    for rid in recipe_paths(CORPUS):
        yield rid, make_context(rid, load_recipe(CORPUS, rid), catalog)


def selection_space(ctx):
    """``_selection_space`` of ``ctx``, computed once per run: kept on disk
    (``SPACE_CACHE``) under a digest of everything it depends on, so the
    pytest-xdist workers that walk the same recipe read it instead of each
    composing its ~100 pages again (15–30 s per recipe and process)."""
    return iter(_space(ctx))


SPACE_CACHE = ROOT / ".cache" / "test-selection-space"
"""Where ``selection_space`` keeps its query lists (one JSON file per recipe and
digest; a clean clone starts empty, the first worker fills it under a lock)."""


def _digest(ctx) -> str:
    """SHA-256 over the composer's sources and data, this module, and the
    recipe's and catalogue's JSON: any change that could change the space."""
    import hashlib
    import json

    from composer.buildtime.validate import dump

    h = hashlib.sha256()
    for path in sorted((ROOT / "composer").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".yaml"):
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(json.dumps([ctx.recipe_id, dump(ctx.recipe), dump(ctx.catalog)], sort_keys=True, default=str).encode())
    return h.hexdigest()[:20]


def _space(ctx) -> tuple:
    return _cached(ctx, "space", lambda: tuple(_selection_space(ctx)))


_MEMO: dict = {}


def _cached(ctx, kind: str, make) -> tuple:
    """``make()`` (a tuple of queries) of ``ctx``, kept on disk under
    ``SPACE_CACHE`` by recipe, ``kind`` and ``_digest`` (the first worker
    computes it under a lock, the others read it) and in this process."""
    import json

    import build

    key = (ctx.recipe_id, kind, id(ctx))
    if key in _MEMO:
        return _MEMO[key]
    path = SPACE_CACHE / f"{ctx.recipe_id.replace('/', '--')}-{kind}-{_digest(ctx)}.json"
    with build._cache_locked(SPACE_CACHE):
        if path.is_file():
            found = tuple(json.loads(path.read_text()))
        else:
            found = tuple(make())
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(list(found)))
            tmp.replace(path)
    _MEMO[key] = found
    return found


def _selection_space(ctx):
    """Queries over every variant × hardware × strategy, then every enabled
    choice of nodes, pool modes and sizes, KV offload and instances from each
    of those, and every feature on."""
    seen = set()
    for n, variant in enumerate(ctx.recipe.variants):
        for hw in ctx.listed_hardware:
            if ctx.hardware_block_reason(hw, variant):
                continue
            for sid in ctx.strategies:
                page = compose_page(ctx, {"hardware": hw, "strategy": sid, "variant": variant})
                queries = [page["query"]]
                # Features change flags, not the shape: toggled for the first variant only.
                for dim in ("nodes", "prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes", "kv_offload",
                            "instances") + (("features",) if n == 0 else ()):
                    queries += [o["query"] for o in page["options"].get(dim, ()) if not o["disabled"] and not o["selected"]]
                for q in queries:
                    if q not in seen:
                        seen.add(q)
                        yield q


def plan_gpus(argv: list[str]) -> int:
    """GPUs one serve command uses on its node, from its own parallel flags."""
    def val(flag, default=1):
        return int(argv[argv.index(flag) + 1]) if flag in argv else default

    tp, pp = val("--tensor-parallel-size"), val("--pipeline-parallel-size")
    if "--data-parallel-size-local" in argv:
        return tp * val("--data-parallel-size-local")
    if "--nnodes" in argv:
        return tp * pp // val("--nnodes")
    return tp * pp * val("--data-parallel-size")
