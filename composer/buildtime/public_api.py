"""The public recipes site's JSON API, at its paths and in its shapes, made
from our plans (issue 20.1; semantics §13, "JSON API").

Clients written for the public site — vLLM 0.33.0's
``tools/recipes/recipe_json_to_vllm_config.py`` among them — discover a model
through ``/models.json``, follow ``recommended_command.by_hardware`` in
``/<hf_id>.json`` to ``/<hf_id>/hw/<hw>.json`` and read a *rendering* there
(``argv``/``env`` for one process; ``head_*``/``worker_*`` across nodes;
``prefill``/``decode``/``router`` for P/D). The files here are that API,
written next to our richer ``api/`` by the build:

* ``/models.json`` — ``[{hf_id, title, provider, tasks, json, url}]``;
* ``/<hf_id>.json`` — ``hf_id``, ``meta``, ``recommended_command`` first, then
  the rest of the recipe; ``model.install`` is the plan's install
  (``{pip, docker, extras}``), and ``dependencies``, ``strategy_overrides``,
  ``compatible_strategies``, ``default_strategy`` are left out (as there);
* ``/<hf_id>/hw/<hw>.json`` — the plan the page shows for that hardware;
  ``/<hf_id>/hw/<hw>/strategies/<s>.json`` — every other strategy the page
  offers there, and ``/<hf_id>/strategies/<s>.json`` the same on the default
  hardware (the public site's older path);
* ``/strategies.json``, ``/strategies/<id>.json`` — serving strategies;
  ``/taxonomy.json`` — the taxonomy.

Every rendering is one of our plans (so our fixes show: placeholders, quoting,
no contradictory flags), with our ``summary``, ``status``, ``notices`` and the
``page`` link that opens it. A hardware or strategy whose plan has errors is
not rendered (the public site drops a rendering it cannot compose); the
recipe document lists such hardware under ``recommended_command.blocked``
with the reason. Pure: the build writes the files.
"""

from __future__ import annotations

from typing import Callable, Iterator

from composer.context import RecipeContext

Compose = Callable[[RecipeContext, dict], dict]

DROPPED = ("dependencies", "strategy_overrides", "compatible_strategies", "default_strategy")
"""Recipe keys the public site leaves out of ``/<hf_id>.json`` (semantics §13)."""
TOP_LEVEL = ("models.json", "strategies.json", "taxonomy.json", "strategies", "kv_store.json", "kv_store")
"""Top-level names this API writes: never a recipe organisation (``routes.RESERVED``)."""


def deploy_type(plan: dict) -> str:
    """The rendering's ``deploy_type`` from the plan's shape: ``pd_cluster``
    (prefill and decode pools), ``kv_store_lb`` (instances behind a router),
    ``multi_node`` (several nodes; with a router over their API servers in
    hybrid-LB DP), else ``single_node``."""
    cmds = plan["commands"]
    if any(c["pool"] for c in cmds):
        return "pd_cluster"
    if any(c["role"] == "router" for c in cmds) and (plan["selection"].get("instances") or 1) > 1:
        return "kv_store_lb"
    return "multi_node" if len([c for c in cmds if c["role"] != "router"]) > 1 else "single_node"


def _docker(c: dict) -> dict:
    return {"docker_command": c.get("docker_text"), "docker_argv": c.get("docker_argv")}


def rendering(ctx: RecipeContext, plan: dict) -> dict:
    """One rendered object (semantics §13, "Rendered object") of an ``ok`` plan.

    Common: ``hardware, strategy, variant, node_count, deploy_type, env,
    docker_image``; one process: ``command, argv, docker_command,
    docker_argv`` (``companions`` when there are some); several nodes:
    ``head_*``, ``worker_*`` (rank 1) and the plural ``worker_commands``,
    ``worker_argvs``, ``worker_envs``, ``worker_docker_*s``; P/D:
    ``prefill``/``decode`` (``mode``, ``nodeCount``, ``commands``, ``argvs``,
    ``envs`` and node 1's ``command``/``argv``/``env``/``docker_*``); a router
    (P/D, a KV store's instances, hybrid-LB DP): ``router``/``router_argv``. ``command`` texts are the pip form's (env
    exports not included: they are ``env``)."""
    sel, cmds = plan["selection"], plan["commands"]
    dtype = deploy_type(plan)
    serve = [c for c in cmds if c["role"] != "router"]
    out: dict = {"hardware": sel["hardware"], "strategy": sel["strategy"], "variant": sel["variant"],
                 "node_count": len(serve), "deploy_type": dtype, "env": dict(serve[0]["env"]) if serve else {},
                 "docker_image": plan["install"]["image"]}
    if dtype == "single_node":
        c = serve[0]
        out.update(command=c["command"], argv=list(c["argv"]), **_docker(c))
    elif dtype == "multi_node":
        head, workers = serve[0], serve[1:]
        out.update(head_command=head["command"], head_argv=list(head["argv"]),
                   head_docker_command=head.get("docker_text"), head_docker_argv=head.get("docker_argv"),
                   worker_command=workers[0]["command"], worker_argv=list(workers[0]["argv"]),
                   worker_commands=[w["command"] for w in workers], worker_argvs=[list(w["argv"]) for w in workers],
                   worker_envs=[dict(w["env"]) for w in workers],
                   worker_docker_commands=[w.get("docker_text") for w in workers],
                   worker_docker_argvs=[w.get("docker_argv") for w in workers])
    else:
        for pool in ("prefill", "decode"):
            nodes = [c for c in serve if c["pool"] == pool]
            if not nodes:
                continue
            out[pool] = {"mode": sel.get(f"{pool}_mode"), "nodeCount": len(nodes), "command": nodes[0]["command"],
                         "argv": list(nodes[0]["argv"]), "env": dict(nodes[0]["env"]), **_docker(nodes[0]),
                         "commands": [n["command"] for n in nodes], "argvs": [list(n["argv"]) for n in nodes],
                         "envs": [dict(n["env"]) for n in nodes]}
        if dtype == "kv_store_lb":
            out["instances"] = sel.get("instances", 1)
            out["vllm_commands"] = [c["command"] for c in serve]
            out["vllm_argvs"] = [list(c["argv"]) for c in serve]
    router = next((c for c in cmds if c["role"] == "router"), None)
    if router is not None:
        out.update(router=router["command"], router_argv=list(router["argv"]), router_install=router.get("install"))
    if plan["companions"]:
        out["companions"] = [{"label": c["label"], "description": c["description"], "command": c["command"],
                              "install": c["install"]} for c in plan["companions"]]
    out.update(summary=plan["summary"], status=plan["status"],
               notices=[{"level": n["level"], "code": n["code"], "message": n["message"]} for n in plan["notices"]],
               page=f"/{ctx.recipe_id}/{plan['share_url']}")
    return out


def kv_store_rendering(ctx: RecipeContext, plan: dict, kv_id: str) -> dict:
    """The rendered object of an ``ok`` plan that runs on KV store ``kv_id``
    (a ``kv_store/<id>.yaml`` deployment; semantics §13, "kv_store"): the
    common fields with ``strategy`` = the store's id and ``deploy_type``
    ``kv_store_lb``, ``serving_strategy`` (the strategy each instance runs),
    ``kv_min_vllm_version``, ``instances``, ``vllm_commands`` / ``vllm_argvs``
    / ``vllm_envs`` (every instance's nodes, in order), ``master`` and
    ``store`` (``{command, install}`` of the Mooncake processes, when the
    store has them), ``mooncake_config`` (the script that writes the file
    every node reads) with ``mooncake_config_note``, and the router's fields
    when there are several instances."""
    out = rendering(ctx, plan)
    sel, cmds = plan["selection"], plan["commands"]
    serve = [c for c in cmds if c["role"] != "router"]
    by_role = {c.get("role"): c for c in plan["companions"]}
    out.update(strategy=kv_id, deploy_type="kv_store_lb", serving_strategy=sel["strategy"],
               kv_min_vllm_version=ctx.strategy(kv_id).min_vllm_version, instances=sel.get("instances") or 1,
               vllm_commands=[c["command"] for c in serve], vllm_argvs=[list(c["argv"]) for c in serve],
               vllm_envs=[dict(c["env"]) for c in serve])
    for key, role in (("master", "mooncake-master"), ("store", "mooncake-store")):
        if role in by_role:
            out[key] = {"command": by_role[role]["command"], "install": by_role[role]["install"]}
    if "mooncake-config" in by_role:
        cfg = ctx.strategy(kv_id).mooncake_vllm_config or {}
        note = cfg.get("note") if isinstance(cfg, dict) and isinstance(cfg.get("note"), str) else None
        out.update(mooncake_config=by_role["mooncake-config"]["command"],
                   mooncake_config_note=note or by_role["mooncake-config"]["description"])
    return out


def _extras(ctx: RecipeContext, plan: dict, dump_strategy, dump_hw) -> dict:
    sel = plan["selection"]
    return {"strategy_spec": dump_strategy(sel["strategy"]), "hardware_profile": dump_hw(sel["hardware"])}


def _alternative(rid: str, hw: str, sid: str, body: dict, alternatives: dict[str, str],
                 legacy: dict[str, str] | None) -> Iterator[tuple[str, dict]]:
    """The files of one alternative rendering ``sid`` on ``hw``:
    ``/<rid>/hw/<hw>/strategies/<sid>.json``, recorded in ``alternatives``,
    and on the default hardware (``legacy`` given) also the older
    ``/<rid>/strategies/<sid>.json``."""
    path = f"{rid}/hw/{hw}/strategies/{sid}.json"
    alternatives[sid] = "/" + path
    yield path, body
    if legacy is not None:
        legacy[sid] = f"/{rid}/strategies/{sid}.json"
        yield legacy[sid][1:], body


def recipe_files(ctx: RecipeContext, recipe_data: dict, compose: Compose, strategy_options: Callable[[RecipeContext, dict], list],
                 dump_strategy: Callable[[str], dict], dump_hw: Callable[[str], dict],
                 variant_key: str | None = None,
                 kv_options: Callable[[RecipeContext, dict], list] | None = None) -> Iterator[tuple[str, dict]]:
    """``(path without the leading /, JSON data)`` of every file of one recipe.

    ``recipe_data`` is the validated recipe as JSON data; ``compose(ctx,
    query)`` gives a plan (``composer.api.compose``) and ``strategy_options(ctx,
    query)`` the page's strategy options (``composer.controls.group_options``);
    ``dump_strategy`` / ``dump_hw`` give a strategy's or a hardware profile's
    JSON data.

    ``variant_key``: the files of a *promoted variant* instead (semantics §13:
    a variant served under its own checkpoint id): ``/<model id>.json`` and
    ``/<model id>/hw/<hw>.json``, every plan composed with ``variant=<key>``,
    the document naming its ``parent`` recipe and ``variant``. Its renderings
    carry no strategy alternatives (clients follow ``by_hardware``; the
    parent's subtree has them), which keeps a corpus of ~140 promoted
    variants cheap to build.

    ``kv_options(ctx, query)``: the page's KV offload options; each enabled
    one that is a KV store (``deploy_type: kv_store_lb``) is an alternative
    too, as on the public site (semantics §13: candidates are the strategies
    and the kv_store ids), rendered by ``kv_store_rendering`` at
    ``/<id>/hw/<hw>/strategies/<kv id>.json``."""
    rid = ctx.recipe_id if variant_key is None else ctx.model_id(variant_key)
    base = {} if variant_key is None else {"variant": variant_key}
    default = compose(ctx, base)
    default_hw = default["selection"]["hardware"]
    variant = default["selection"]["variant"]
    by_hw: dict[str, str] = {}
    blocked: dict[str, str] = {}
    recommended: dict | None = None
    for hw in ctx.listed_hardware:
        if ctx.hardware_block_reason(hw, variant):
            continue
        plan = default if hw == default_hw else compose(ctx, {**base, "hardware": hw})
        if plan["selection"]["hardware"] != hw:
            continue  # the resolver moved the choice: not this hardware's rendering
        if plan["status"] != "ok":
            blocked[hw] = next((n["message"] for n in plan["notices"] if n["level"] == "error"), "the plan has errors")
            continue
        alternatives: dict[str, str] = {}
        legacy: dict[str, str] = {}
        for opt in strategy_options(ctx, {"hardware": hw}) if variant_key is None else ():
            sid = opt["id"]
            if opt["disabled"] or sid == plan["selection"]["strategy"]:
                continue
            alt = compose(ctx, {"hardware": hw, "strategy": sid})
            if alt["status"] != "ok" or alt["selection"]["strategy"] != sid or alt["selection"]["hardware"] != hw:
                continue
            body = {**rendering(ctx, alt), **_extras(ctx, alt, dump_strategy, dump_hw)}
            yield from _alternative(rid, hw, sid, body, alternatives, legacy if hw == default_hw else None)
        for opt in kv_options(ctx, {"hardware": hw}) if kv_options is not None and variant_key is None else ():
            kid = opt["id"]
            store = ctx.catalog.strategies.get(kid)
            if opt["disabled"] or store is None or store.deploy_type != "kv_store_lb":
                continue
            alt = compose(ctx, {"hardware": hw, "kv_offload": kid})
            if alt["status"] != "ok" or alt["selection"].get("kv_offload") != kid or alt["selection"]["hardware"] != hw:
                continue
            body = {**kv_store_rendering(ctx, alt, kid), **_extras(ctx, alt, dump_strategy, dump_hw),
                    "strategy_spec": dump_strategy(kid)}
            yield from _alternative(rid, hw, kid, body, alternatives, legacy if hw == default_hw else None)
        doc = {**rendering(ctx, plan), **_extras(ctx, plan, dump_strategy, dump_hw), "alternatives": alternatives}
        by_hw[hw] = f"/{rid}/hw/{hw}.json"
        yield by_hw[hw][1:], doc
        if hw == default_hw:
            recommended = {**doc, "alternatives": legacy}
    rec: dict = dict(recommended or {})
    rec.update(by_hardware=by_hw, blocked=blocked)
    rest = {k: v for k, v in recipe_data.items() if k not in DROPPED and k != "meta"}
    model = dict(rest.get("model") or {})
    inst = default["install"]
    model["install"] = {"pip": inst["pip"], "docker": inst["docker"], "extras": list(inst["extras"])}
    rest["model"] = model
    if variant_key is not None:
        rest = {"parent": ctx.recipe_id, "variant": variant_key, **rest}
    yield f"{rid}.json", {"hf_id": rid, "meta": recipe_data.get("meta", {}), "recommended_command": rec, **rest}


def promoted_variants(ctx: RecipeContext, recipe_ids) -> dict[str, str]:
    """``{variant key: model id}`` of the variants of ``ctx``'s recipe that the
    public API serves under their own checkpoint id (semantics §13): a
    variant whose ``model_id`` is a Hugging Face id other than the recipe's,
    not a local path, not (in any case) the id of a recipe in
    ``recipe_ids``, whose organisation is no top-level name of the site
    (``routes.RESERVED``) and whose ``<id>.json`` is no recipe's page folder;
    of variants sharing one model id, the first."""
    from composer.buildtime.routes import RESERVED

    ids = {r.lower() for r in recipe_ids}
    out: dict[str, str] = {}
    taken: set[str] = set()
    for key in ctx.recipe.variants:
        mid = ctx.model_id(key)
        low = mid.lower()
        if (mid.startswith("/") or mid.count("/") != 1 or low == ctx.recipe_id.lower() or low in ids or low in taken
                or mid.split("/")[0].lower() in RESERVED or (low + ".json") in ids):
            continue
        taken.add(low)
        out[key] = mid
    return out


def model_entry(entry: dict) -> dict:
    """One ``/models.json`` row from one row of our ``api/index.json``."""
    rid = entry["id"]
    return {"hf_id": rid, "title": entry["title"], "provider": entry["provider"], "tasks": entry["tasks"],
            "json": f"/{rid}.json", "url": f"/{rid}/"}


def catalog_files(catalog_data: dict) -> Iterator[tuple[str, object]]:
    """``/strategies.json`` (serving strategies: every deploy type but
    ``kv_store_lb``), ``/strategies/<id>.json``, ``/kv_store.json`` and
    ``/kv_store/<id>.json`` (the KV-store deployments, semantics §13) and
    ``/taxonomy.json`` from the catalogue's JSON data
    (``validate.dump(catalog)``). ``/platforms.json`` and ``/quickstart/`` are
    written by the public site only "if present": the recipe format has no
    data for them."""
    strategies = catalog_data["strategies"]
    serving = {sid: s for sid, s in strategies.items() if s.get("deploy_type") != "kv_store_lb"}
    stores = {sid: s for sid, s in strategies.items() if s.get("deploy_type") == "kv_store_lb"}
    yield "strategies.json", [{"id": sid, **s} for sid, s in serving.items()]
    for sid, s in serving.items():
        yield f"strategies/{sid}.json", {"id": sid, **s}
    yield "kv_store.json", [{"id": sid, **s} for sid, s in stores.items()]
    for sid, s in stores.items():
        yield f"kv_store/{sid}.json", {"id": sid, **s}
    yield "taxonomy.json", catalog_data["taxonomy"]
