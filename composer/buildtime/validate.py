"""Validating recipe data (build, CLI, tests; never in the browser).

* ``validate_recipe`` / ``validate_catalog``: pydantic validates raw YAML data
  straight into the ``composer.schema`` dataclasses (raises
  ``pydantic.ValidationError`` with every problem and its key path);
  ``dump`` writes them back as JSON data, which ``composer.convert`` reads in
  the browser; ``recipe_json_schema`` publishes the format.
* Checks beyond the schema: every arg list must parse into flags and values,
  and no single list may contradict itself (the same flag identity twice, e.g.
  ``--x`` with ``--no-x`` or ``--f 1`` with ``--f=2``); ids a recipe names must
  exist. Errors name the recipe key path (mkdocs-style: all problems
  collected, none raised).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter

from composer.argv import ArgvError, parse_tokens
from composer.layers import declared
from composer.schema import VERSION, Catalog, Recipe

RECIPE = TypeAdapter(Recipe)
CATALOG = TypeAdapter(Catalog)


def validate_recipe(data: Any) -> Recipe:
    """A ``Recipe`` from raw data (a YAML mapping or the build's JSON); raises
    ``pydantic.ValidationError`` listing every problem with its key path."""
    return data if isinstance(data, Recipe) else RECIPE.validate_python(data)


def validate_catalog(data: Any) -> Catalog:
    """A ``Catalog`` from ``{taxonomy, strategies}``; raises ``pydantic.ValidationError``."""
    return data if isinstance(data, Catalog) else CATALOG.validate_python(data)


def dump(value: Recipe | Catalog) -> dict:
    """JSON data of a validated recipe or catalogue (``None`` values left out);
    ``composer.convert.from_json`` rebuilds the same value from it."""
    adapter: TypeAdapter[Any] = RECIPE if isinstance(value, Recipe) else CATALOG
    return adapter.dump_python(value, mode="json", exclude_none=True)


def recipe_json_schema() -> dict:
    """JSON Schema (draft 2020-12) of a recipe file, generated from the dataclasses."""
    schema = RECIPE.json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "vLLM recipe"
    return schema


def arg_lists(recipe: Recipe):
    """Yield ``(key path, tokens)`` for every argv list a recipe declares: the
    every-key walk of the layer table (``composer.layers.declared``), so the
    checks, the lint and the composer's provenance name the same paths."""
    return ((d.key, d.value) for d in declared(recipe) if d.kind == "args")


def env_maps(recipe: Recipe):
    """Yield ``(key path, env mapping)`` for every environment block a recipe
    declares (``composer.layers.declared``)."""
    return ((d.key, d.value) for d in declared(recipe) if d.kind == "env")


def hardware_maps(recipe: Recipe) -> dict[str, str]:
    """``{block key path: hardware key}`` of every hardware-keyed block the
    layers read (``hardware_overrides.hopper`` → ``hopper``), from the
    every-key walk; every declared block is seen, even one with empty lists."""
    return {d.path.upto("hw"): hk for d in declared(recipe) if (hk := d.path.get("hw")) is not None}


def check_recipe_args(recipe: Recipe) -> list[tuple[str, str]]:
    """``(key path, message)`` for every unparsable or self-contradicting arg list."""
    problems = []
    for key, tokens in arg_lists(recipe):
        if not tokens:
            continue
        try:
            units = parse_tokens(list(tokens))
        except ArgvError as exc:
            problems.append((key, str(exc)))
            continue
        seen: dict = {}
        for u in units:
            if u.key == "gpu-memory-utilization" and not _fraction(u.value):
                problems.append((key, f"--gpu-memory-utilization {u.value!r} must be a number in (0, 1]"))
            if u.key in seen and seen[u.key] != u:
                problems.append((key, f"sets --{u.key} twice with different values "
                                      f"({seen[u.key].display()!r} and {u.display()!r}); keep one"))
            seen[u.key] = u
    return problems


PORT_FLAGS = re.compile(r"^(?:.*-)?port\Z")
"""Canonical vLLM option names that take a TCP port (``port``, ``master-port``,
``data-parallel-rpc-port`` …; vllm_cli.json, all ``type=int``)."""


def recipe_images(recipe: Recipe) -> list[tuple[str, str]]:
    """``(key path, image)`` for every container image a recipe names
    (``model.docker_image``, ``variants.<v>.docker_image`` and their
    ``hardware_overrides.<hw>.docker_image``; brand and CUDA maps entered)."""
    from composer.schema import image_names

    images = [("model.docker_image", recipe.model.docker_image)]
    images += [(f"variants.{v}.docker_image", var.docker_image) for v, var in recipe.variants.items()]
    images += [(f"variants.{v}.hardware_overrides.{h}.docker_image", b.docker_image)
               for v, var in recipe.variants.items() for h, b in var.hardware_overrides.items()]
    return [(key, name) for key, value in images for name in image_names(value)]


def check_recipe_positions(recipe: Recipe) -> list[tuple[str, str]]:
    """``(key path, message)`` for every recipe value that does not fit the
    position it lands in (``composer.positions``): container images (where
    ``docker run`` reads its image), option values that would be read as
    options, ports, and the names of every env block (no platform name such as
    ``HOME``, ``PATH``, ``LWS_WORKER_INDEX``, ``HF_TOKEN``). Model ids are
    checked by the schema (``schema.MODEL_ID``: never an option)."""
    from composer.positions import check

    out = []
    for key, name in recipe_images(recipe):
        problem = check(name, "image")
        if problem:
            out.append((key, problem))
    for key, tokens in arg_lists(recipe):
        out += [(key, problem) for problem in arg_position_problems(tokens)]
    for key, cfg in (("strategy_overrides.pd_cluster.router", so.router) for sid, so in
                     recipe.strategy_overrides.items() if sid == "pd_cluster" and so.router):
        out += router_position_problems(key, cfg)
    for key, env in env_maps(recipe):
        out += [(f"{key}.{name}", problem) for name, problem in env_problems(env)]
    return out


def arg_position_problems(tokens) -> list[str]:
    """The problems of an argv list's values with where they land
    (``composer.positions``): a token that refers to a credential
    (``secret_problem``), an option's value that would be read as an option,
    a port flag's value that is not a port (a ``$NAME`` left to the person
    passes). An unparsable list gives only the credential problems:
    ``check_recipe_args`` and ``argv_list_problems`` report the rest."""
    from composer.positions import PLACEHOLDER_ONLY, check, secret_problem

    out = [problem for t in tokens if (problem := secret_problem(str(t)))]
    try:
        units = parse_tokens(list(tokens))
    except ArgvError:
        return out
    for u in units:
        if u.value is None:
            continue
        problem = check(u.value, "option")
        if problem is None and PORT_FLAGS.match(u.key) and not PLACEHOLDER_ONLY.match(u.value):
            problem = check(u.value, "port")
        if problem:
            out.append(f"--{u.key.lstrip('-')}: {problem}")
    return out


def argv_list_problems(tokens) -> list[str]:
    """``arg_position_problems`` of a catalogue file's argv list, and first why
    it does not parse (``composer.argv.parse_tokens``), as no other check
    reports that for these files."""
    if not tokens:
        return []
    try:
        parse_tokens(list(tokens))
    except ArgvError as exc:
        return [str(exc)] + arg_position_problems(tokens)
    return arg_position_problems(tokens)


def env_problems(env) -> list[tuple[str, str]]:
    """``(name, problem)`` of an env block from any recipe, strategy or
    taxonomy file: a name that is no shell identifier or one the platform
    provides (``PATH``, ``LWS_WORKER_INDEX`` …), a value that is not one value
    (a mapping or a list), a value that refers to a credential."""
    from composer.positions import check, secret_problem

    out = []
    for name, value in (env.items() if isinstance(env, dict) else ()):
        problem = check(str(name), "env-name")
        if problem is None and isinstance(value, (dict, list, tuple)):
            problem = f"{str(value)[:40]!r} is not one value (text or a number)"
        problem = problem or secret_problem(str(value))
        if problem:
            out.append((str(name), problem))
    return out


def unknown_key_message(key: object, known, cutoff: float = 0.6) -> str:
    """"unknown key, ignored", naming the closest of ``known`` when there is one."""
    import difflib

    near = difflib.get_close_matches(str(key), list(known), n=1, cutoff=cutoff)
    return "unknown key, ignored" + (f" (did you mean {near[0]}?)" if near else "")


def router_position_problems(key: str, cfg) -> list[tuple[str, str]]:
    """``(key path, message)`` for a ``router`` block's values: ``policy``
    lands after ``vllm-router --policy`` (an option's value), ``port`` after
    ``--port`` (adversarial finding: a KV store's ``policy: "--privileged"``
    became an option of the router)."""
    from composer.positions import PLACEHOLDER_ONLY, check

    out: list[tuple[str, str]] = []
    if not isinstance(cfg, dict):
        return out
    if "policy" in cfg:
        problem = check(str(cfg["policy"]), "option")
        if problem:
            out.append((f"{key}.policy", problem))
    if "port" in cfg and not PLACEHOLDER_ONLY.match(str(cfg["port"])):
        problem = check(str(cfg["port"]), "port")
        if problem:
            out.append((f"{key}.port", problem))
    return out


FREE_FORM_KEYS: dict[str, frozenset] = {
    "router": frozenset({"policy", "port", "install"}),
    "vllm": frozenset({"vllm_args", "env", "install", "port"}),
    "mooncake_master": frozenset({"command", "description"}),
    "mooncake_store_config": frozenset({"command", "description", "config", "note"}),
    "mooncake_vllm_config": frozenset({"template", "note", "mode"}),
}
"""The keys the composer reads in a strategy or KV-store file's free-form
blocks (typed ``Mapping[str, Any]`` in ``composer.schema.Strategy``): a key
outside these is a typo that would drop what it meant silently (adversarial
finding: ``vllm.vllm_argz`` ran every instance without the store's connector)."""


def _shell_words_problem(text: Any) -> str | None:
    """Why ``text`` (a command or install line of a catalogue file) cannot be
    run as the composer writes it (``composer.shell.recipe_command``), or None."""
    from composer.shell import recipe_command

    if not isinstance(text, str):
        return f"{str(text)[:40]!r} is not text (one command line)"
    if not text.strip():
        return "is empty"
    try:
        recipe_command(text)
    except ValueError as exc:
        return str(exc)
    return None


def catalog_block_problems(strategy) -> list[tuple[str, str, str]]:
    """``(key path, message, level)`` for a strategy or KV-store file's
    free-form blocks: unknown keys (warnings, the closest known key named),
    values of the wrong type (``router.policy`` text, ``vllm.vllm_args`` a
    list), and command or install lines that are not shell words (errors:
    composing them would fail later under another file's name)."""
    out: list[tuple[str, str, str]] = []
    for block, known in FREE_FORM_KEYS.items():
        data = getattr(strategy, block, None)
        if data is None:
            continue
        if not isinstance(data, dict):
            out.append((block, "must be a mapping", "error"))
            continue
        out += [(f"{block}.{key}", unknown_key_message(key, known), "warning") for key in data if key not in known]
    out += [(f"pd.{role}", unknown_key_message(role, ("prefill", "decode")), "warning")
            for role in strategy.pd if role not in ("prefill", "decode")]
    if strategy.min_vllm_version is not None and not VERSION.match(str(strategy.min_vllm_version)):
        out.append(("min_vllm_version", f"{str(strategy.min_vllm_version)[:40]!r} is not a version number (0.21.0)",
                    "error"))
    router = strategy.router if isinstance(strategy.router, dict) else {}
    vllm = strategy.vllm if isinstance(strategy.vllm, dict) else {}
    if "policy" in router and not isinstance(router["policy"], str):
        out.append(("router.policy", f"{str(router['policy'])[:40]!r} must be one policy name (text)", "error"))
    if "vllm_args" in vllm and not isinstance(vllm["vllm_args"], (list, tuple)):
        out.append(("vllm.vllm_args", "must be a list of argv tokens", "error"))
    lines = [("router.install", router.get("install")),
             ("mooncake_master.command", (strategy.mooncake_master or {}).get("command")),
             ("mooncake_store_config.command", (strategy.mooncake_store_config or {}).get("command"))]
    inst = vllm.get("install")
    lines += ([(f"vllm.install.{k}", v) for k, v in inst.items()] if isinstance(inst, dict) else [("vllm.install", inst)])
    for key, text in lines:
        problem = None if text is None else _shell_words_problem(text)
        if problem:
            out.append((key, problem, "error"))
    return out


def kv_option_problems(kid: str, option) -> list[tuple[str, str]]:
    """``(key path, message)`` for a taxonomy ``kv_offload.<id>`` option: its
    args checked for where they land, its env names as every env block's
    (no platform name: ``PATH`` was exported before vllm serve, adversarial
    finding), its install and companion command as shell words."""
    where = f"kv_offload.{kid}"
    out = [(f"{where}.args", problem) for problem in argv_list_problems(option.args)]
    out += [(f"{where}.env.{name}", f"environment variable: {problem}") for name, problem in env_problems(option.env)]
    for key, text in (("install", option.install), ("companion.command", option.companion.command if option.companion else None)):
        problem = None if not text else _shell_words_problem(text)
        if problem:
            out.append((f"{where}.{key}", problem))
    return out


def catalog_position_problems(strategy) -> list[tuple[str, str]]:
    """``(key path, message)`` for the values of a strategy or KV-store file
    (``composer.schema.Strategy``) that do not fit where they land, as
    ``check_recipe_positions`` does for a recipe: every argv list
    (``vllm_args``; ``prefill``/``decode`` ``vllm_args``, ``extra_args`` and
    their hardware blocks; ``pd.<role>.args``; ``vllm.vllm_args``) parsed and
    its values checked, the ``router`` block, ``vllm.port``. Strategy files
    come from strangers as recipe files do (issue 23)."""
    from composer.positions import PLACEHOLDER_ONLY, check

    lists: list[tuple[str, Any]] = [("vllm_args", strategy.vllm_args)]
    for role in ("prefill", "decode"):
        spec = getattr(strategy, role)
        if spec is None:
            continue
        lists += [(f"{role}.vllm_args", spec.vllm_args), (f"{role}.extra_args", spec.extra_args)]
        for hk, block in spec.hardware_overrides.items():
            lists += [(f"{role}.hardware_overrides.{hk}.extra_args", block.extra_args),
                      (f"{role}.hardware_overrides.{hk}.args", block.args)]
    lists += [(f"pd.{role}.args", c.args) for role, c in strategy.pd.items()]
    vllm = strategy.vllm if isinstance(strategy.vllm, dict) else {}
    if isinstance(vllm.get("vllm_args"), (list, tuple)):
        lists.append(("vllm.vllm_args", [str(t) for t in vllm["vllm_args"]]))
    out = [(key, problem) for key, tokens in lists for problem in argv_list_problems(tokens)]
    envs: list[tuple[str, Any]] = [("env", strategy.env), ("vllm.env", vllm.get("env"))]
    for role in ("prefill", "decode"):
        spec = getattr(strategy, role)
        if spec is not None:
            envs.append((f"{role}.env", spec.env))
            envs += [(f"{role}.hardware_overrides.{hk}.extra_env", b.extra_env) for hk, b in spec.hardware_overrides.items()]
    # the platform's names (PATH, LWS_WORKER_INDEX …) are not the file's to set, in a P/D role's env too
    out += [(f"{key}.{name}", f"environment variable: {problem}") for key, env in envs
            for name, problem in env_problems(env)]
    out += router_position_problems("router", strategy.router)
    if "port" in vllm and not PLACEHOLDER_ONLY.match(str(vllm["port"])):
        problem = check(str(vllm["port"]), "port")
        if problem:
            out.append(("vllm.port", problem))
    return out


def check_recipe_commands(recipe: Recipe) -> list[tuple[str, str]]:
    """``(key path, message)`` for install commands of a recipe that cannot be
    read as shell words (an unbalanced quote): ``dependencies[i].command``,
    a feature's ``companion.command`` and ``model.install.pip.command``, which
    the page shows re-quoted (``shell.recipe_script``)."""
    from composer.shell import recipe_script

    found = [(f"dependencies[{i}].command", d.command) for i, d in enumerate(recipe.dependencies)]
    # a feature's companion process is written the same way (adversarial finding: an unbalanced quote there
    # passed the checks, then composing the feature raised)
    found += [(f"features.{fid}.companion.command", f.companion.command) for fid, f in recipe.features.items()
              if f.companion and f.companion.command]
    inst = recipe.model.install
    pip = inst.get("pip") if isinstance(inst, dict) else None
    if isinstance(pip, dict) and pip.get("command"):
        found.append(("model.install.pip.command", str(pip["command"])))
    out = []
    for key, text in found:
        try:
            recipe_script(text)
        except ValueError as exc:
            out.append((key, str(exc)))
    return out


def _fraction(value: str | None) -> bool:
    try:
        return value is not None and 0 < float(value) <= 1
    except ValueError:
        return False


def check_recipe_references(recipe: Recipe, catalog: Catalog) -> list[tuple[str, str]]:
    """``(key path, message)`` for ids a recipe names that do not exist: hardware,
    strategies, features, and the keys of hardware-keyed maps (exact id,
    generation, brand in lower case, or ``default``). Typos here would otherwise
    change a command silently (a misspelt ``opt_in_features`` entry turns a
    feature on by default)."""
    hw = catalog.taxonomy.hardware_profiles
    hw_keys = set(hw) | {p.gen for p in hw.values() if p.gen} | {p.brand.lower() for p in hw.values()} | {"default", "nvidia", "amd"}
    strategies = set(catalog.strategies)
    features = set(recipe.features)
    out = []

    def need(key: str, value: str, known: set[str], what: str) -> None:
        if value not in known:
            out.append((key, f"{value!r} is not a known {what} ({', '.join(sorted(known)[:12])}{', …' if len(known) > 12 else ''})"))

    if recipe.meta.default_hardware:
        need("meta.default_hardware", recipe.meta.default_hardware, set(hw), "hardware profile of taxonomy.yaml")
    for i, c in enumerate(recipe.meta.verified_configs):
        need(f"meta.verified_configs[{i}].hardware", c.hardware, set(hw), "hardware profile")
        need(f"meta.verified_configs[{i}].strategy", c.strategy, strategies, "strategy")
    for i, sid in enumerate(recipe.compatible_strategies):
        need(f"compatible_strategies[{i}]", sid, strategies, "strategy")
    if recipe.default_strategy:
        offered = set(recipe.compatible_strategies) | {s for s, g in recipe.strategy_hardware.items() if "supported" in g.values()}
        need("default_strategy", recipe.default_strategy, offered, "strategy this recipe offers")
    for i, f in enumerate(recipe.opt_in_features):
        need(f"opt_in_features[{i}]", f, features, "feature of this recipe")
    for h, fs in recipe.hardware_opt_in_features.items():
        need(f"hardware_opt_in_features.{h}", h, set(hw), "hardware profile")
        for i, f in enumerate(fs):
            need(f"hardware_opt_in_features.{h}[{i}]", f, features, "feature of this recipe")
    for gi, group in enumerate(recipe.exclusive_features):
        for i, f in enumerate(group):
            need(f"exclusive_features[{gi}][{i}]", f, features, "feature of this recipe")
    for key, k in hardware_maps(recipe).items():
        need(key, k, hw_keys, "hardware id, generation, brand or 'default'")
    for sid, gates in recipe.strategy_hardware.items():
        for k in gates:
            need(f"strategy_hardware.{sid}.{k}", k, hw_keys, "hardware id, generation, brand or 'default'")
    return out


def lint_recipe(recipe: Recipe) -> list[tuple[str, str, str]]:
    """``(key path, message, level)`` for what vLLM's CLI (``composer.vllm_cli``,
    the pinned release) would refuse or ignore in a recipe's arg lists and env:
    unknown options and spellings, values missing, given to a switch, outside
    the choices or of the wrong type, JSON that does not parse or does not fit
    its config, quotes or flags inside one argv element, ``--model`` in args,
    deprecated options, unknown ``VLLM_*`` variables, and a tool-calling
    feature whose parser comes without ``--enable-auto-tool-choice``. Levels:
    ``error`` where vLLM refuses to start, ``warning`` otherwise."""
    omni = recipe.omni is not None or "omni" in recipe.meta.tasks
    return (_arg_findings(recipe, omni) + _tool_choice_findings(recipe) + _quoted_text_findings(recipe)
            + _env_findings(recipe, omni) + _hf_config_findings(recipe) + _router_findings(recipe))


RECIPE_ROUTER_KEYS = FREE_FORM_KEYS["router"] | {"intra_node_data_parallel_size"}
"""Keys of a recipe's ``strategy_overrides.pd_cluster.router``: ours, and the
public format's ``intra_node_data_parallel_size`` (semantics §1; our router
lists every API server instead, so it is read by nobody here)."""


def _router_findings(recipe: Recipe) -> list[tuple[str, str, str]]:
    """An unknown key of a recipe's P/D router block (free-form in the
    schema): a typo (``polcy``) would vanish without a word (adversarial
    finding)."""
    so = recipe.strategy_overrides.get("pd_cluster")
    cfg = so.router if so is not None and isinstance(so.router, dict) else {}
    return [(f"strategy_overrides.pd_cluster.router.{k}", unknown_key_message(k, RECIPE_ROUTER_KEYS), "warning")
            for k in cfg if k not in RECIPE_ROUTER_KEYS]


def _hf_config_findings(recipe: Recipe) -> list[tuple[str, str, str]]:
    """A ``model.hf_config`` fact that a direct ``model`` field also gives,
    with another value: the direct field wins (``composer.model_facts``), so
    the other is ignored — said, not silent (a fresh user's finding)."""
    from composer.model_facts import RECIPE_FIELDS

    out = []
    given = recipe.model.hf_config or {}
    for attr, key in RECIPE_FIELDS:
        direct = getattr(recipe.model, attr, None)
        if direct and key in given and given[key] != direct:
            out.append((f"model.hf_config.{key}", f"{given[key]!r} is ignored: model.{attr} gives {direct!r}, which "
                                                  "wins; keep one of the two", "warning"))
    return out


def _arg_findings(recipe: Recipe, omni: bool) -> list[tuple[str, str, str]]:
    """What vLLM's CLI says of each unit of each arg list, and ``--model`` in args."""
    from composer import vllm_cli

    out = []
    for key, tokens in arg_lists(recipe):
        if not tokens:
            continue
        try:
            units = parse_tokens(list(tokens))
        except ArgvError:
            continue  # reported by check_recipe_args
        for u in units:
            for f in vllm_cli.check_unit(u.key, u.value, u.enabled, omni):
                out.append((key, f.sentence(), f.level))
            if u.key == "model":
                out.append((key, "--model does not belong in the args: vllm serve takes the model as its first "
                                 "argument (model.model_id or the variant's model_id)", "error"))
    return out


def _tool_choice_findings(recipe: Recipe) -> list[tuple[str, str, str]]:
    """A tool-calling feature's arg list with a tool-call parser but without
    ``--enable-auto-tool-choice``."""
    out = []
    for fid, feature in recipe.features.items():
        if "tool" not in fid and "tool" not in feature.label.lower():
            continue
        for key, tokens in ((d.key, d.value) for d in declared(recipe) if d.path.get("feature") == fid):
            if not tokens:
                continue
            try:
                names = {u.key for u in parse_tokens(list(tokens))}
            except ArgvError:
                continue
            if "tool-call-parser" in names and "enable-auto-tool-choice" not in names:
                out.append((key, "a tool-call parser without --enable-auto-tool-choice: vLLM then refuses requests "
                                 "with tool_choice \"auto\", which a tool-calling feature promises", "warning"))
    return out


def _quoted_text_findings(recipe: Recipe) -> list[tuple[str, str, str]]:
    """Text that lands quoted in install lines: odd versions are data faults
    to report."""
    from composer.schema import VERSION

    out = []  # container images are checked for their position (check_recipe_positions): errors
    versions = [("model.min_vllm_version", recipe.model.min_vllm_version)]
    versions += [(f"variants.{v}.min_vllm_version", var.min_vllm_version) for v, var in recipe.variants.items()]
    for key, value in versions:
        if value and not VERSION.match(str(value)):
            out.append((key, f"{str(value)[:60]!r} is not a version number; it is shown quoted", "warning"))
    return out


def _env_findings(recipe: Recipe, omni: bool) -> list[tuple[str, str, str]]:
    """Unknown ``VLLM_*`` variables of every env block (vLLM-Omni's own excepted)."""
    from composer import vllm_cli

    out = []
    for key, env in env_maps(recipe):
        for name in env:
            if omni and name.startswith("VLLM_OMNI_"):
                continue  # vLLM-Omni's own variables
            for f in vllm_cli.check_env(name):
                out.append((f"{key}.{name}", f.sentence(), f.level))
    return out


DISPLAY_ONLY = {
    "Recipe": set(),
    "Meta": {"slug", "difficulty", "date_updated", "date_added", "related_recipes", "performance_headline", "platforms"},
    "Model": {"docker_source"},
    "Omni": {"task_label", "task_hint", "variant_label", "variant_hint", "task_axes"},
    "OmniTask": {"axes"},
    "HardwareBlock": {"install_note"},
    "Feature": {"hardware"},
    "Strategy": {"hardware_match"},  # semantics §1: never read, by the public site either
    "Taxonomy": {"tasks", "strategies", "kv_offload_groups", "docs_url"},
    "HardwareProfile": {"multi_node"},  # the public site's flag; our profiles say ``scalable``
    "KvOffloadOption": {"docs_url"},
}
"""Keys of the public recipe format (recipes, strategy and KV-store files, the
taxonomy) that only the public site displays; the composer does not read
them, and they are not reported as unknown."""


def unknown_keys(data, tp=Recipe, path: str = ""):
    """Yield ``(key path, message)`` for every key of raw recipe data that the
    schema neither declares nor lists as display-only: a misspelt key (e.g.
    ``hardware_overides``) would otherwise vanish without a word. Messages
    suggest the closest declared key."""
    import dataclasses
    import typing
    from collections.abc import Mapping

    def walk(value, hint, where):
        origin = typing.get_origin(hint)
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            yield from unknown_keys(value, hint, where)
        elif origin is typing.Union:
            for member in typing.get_args(hint):
                if isinstance(value, dict) and (dataclasses.is_dataclass(member) or typing.get_origin(member) in (Mapping, dict)):
                    yield from walk(value, member, where)
                    break
        elif origin in (Mapping, dict) and isinstance(value, dict):
            inner = typing.get_args(hint)[1]
            for k, v in value.items():
                yield from walk(v, inner, f"{where}{k}.")
        elif origin is tuple and isinstance(value, list):
            inner = typing.get_args(hint)[0]
            for i, v in enumerate(value):
                yield from walk(v, inner, f"{where[:-1]}[{i}].")

    if not isinstance(data, dict):
        return
    hints = typing.get_type_hints(tp)
    allowed = DISPLAY_ONLY.get(tp.__name__, set())
    for key, value in data.items():
        if key in hints:
            yield from walk(value, hints[key], f"{path}{key}.")
        elif key not in allowed:
            yield (f"{path}{key}", unknown_key_message(key, hints, cutoff=0.75))


def unknown_keys_found(data) -> list[tuple[str, str, bool]]:
    """``unknown_keys`` with, for each, whether it is a misspelling of a key
    the data then lacks (``compatible_strategy`` where ``compatible_strategies``
    is absent): ``(key path, message, missing)``. A missing key changes what
    the recipe means (no strategies offered): the checks report it first,
    before the reference checks that its absence breaks, saying so."""
    out = []
    for key, message in unknown_keys(data):
        near = message.partition("(did you mean ")[2].rstrip("?)")
        parent = _at(data, key.rpartition(".")[0]) if "." in key else data
        missing = bool(near) and isinstance(parent, dict) and near not in parent
        if missing:
            message = (f"unknown key (did you mean {near}?); without {near} the recipe "
                       f"declares none, and what depends on it fails below")
        out.append((key, message, missing))
    return out


def _at(data, dotted: str):
    """The value at a dotted key path of ``unknown_keys`` (``a.b[2].c``), or None."""
    import re as _re

    node = data
    for part in _re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if part.startswith("["):
            idx = int(part[1:-1])
            node = node[idx] if isinstance(node, list) and idx < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node
