"""Compose a plan: the commands of a resolved selection, with provenance,
capacity, notices and the canonical URL. The page's controls are not part of a
plan (``composer.controls``); the CLI and the JSON API never compute them.

``build_plan(ctx, query)`` is the one entry point; everything else is a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from composer import forms  # imported here, not lazily: the browser's memory snapshot holds only imported modules
from composer import launch
from composer import run_forms as run
from composer import vllm_cli
from composer.argv import ArgvError, Entry, Source, Unit, flag_value
from composer.positions import check
from composer.canonical import canonical_request, pinned_request, resolved_selection
from composer.context import MAX_NODES, RecipeContext
from composer.help import flag_help
from composer.keypaths import KeyPath
from composer.layers import TOPOLOGY_SOURCE, CommandSpec, compose_layers
from composer.memory import capacity
from composer.notices import Notices
from composer.placeholders import describe, placeholders
from composer.outputs import CapacityCheck, Checkpoint, Command, EnvSource, FlagSource, Manifests, Plan, RecipeRef, Replaced, to_json
from composer.parallel import DP_RPC_PORT, KINDS, layout_problem, node_units, serves_api, shape
from composer.query import Request, parse_query
from composer.dimensions import POOLS, Selection, pool_size_label
from composer.forms import FORMS, FormInput
from composer.resolve import feature_label, half_devices, layout_for, pd_node_count, pool_layout, resolve, util_in_force
from composer.shell import command_text, env_text, recipe_command

LAYER_LABELS = {
    "base": "the recipe's base args",
    "variant": "the variant",
    "strategy": "the strategy",
    "hardware": "the hardware override",
    "advanced": "Advanced",
    "features": "a feature",
    "kv_offload": "KV offload",
}
USER_LAYERS = ("advanced", "features", "kv_offload")
ROUTER_PORT = "30000"


def source_label(ctx: RecipeContext, src: Source) -> str:
    """A person's name for where a value comes from, in words, never a recipe
    key path (issue 12.10: key paths stay in Explain), e.g. "Speculative
    decoding", "Advanced", "the recipe's settings for Hopper GPUs", "the FP8
    checkpoint's settings for MI355X", "the recipe's P/D settings for the
    decode pool"."""
    if src.layer == "features" and src.path is not None:
        return feature_label(ctx, src.path.get("feature") or "")
    if src.layer in ("hardware", "strategy", "base", "variant"):
        return describe_key(ctx, src.path) or LAYER_LABELS[src.layer]
    return LAYER_LABELS.get(src.layer, src.layer)


def hardware_key_label(ctx: RecipeContext, key: str) -> str:
    """``hardware_overrides`` keys in words: a profile id → its name, a
    generation or brand → "Hopper GPUs", ``default`` → "any GPU"."""
    profiles = ctx.catalog.taxonomy.hardware_profiles
    if key in profiles:
        return profiles[key].display_name
    if key == "default":
        return "any GPU"
    named = {"amd": "AMD", "nvidia": "NVIDIA", "intel": "Intel"}
    return f"{named.get(key.lower(), key.replace('_', ' ').title())} GPUs"


def describe_key(ctx: RecipeContext, path: KeyPath | None) -> str | None:
    """A recipe key path (``Source.path``, made by the layer table
    ``composer.layers.TABLE``) as words, from its pattern's subject and holes;
    None for keys that are not the recipe's own settings (strategy templates,
    vLLM-Omni tasks, the computed topology), which their seed layer names."""
    subject = path.pattern.subject if path is not None else None
    if path is None or subject is None:
        return None
    pool, hw_key = path.get("role"), path.get("hw")
    role = f" for the {pool} pool" if pool else ""
    hw = f"{' on' if role else ' for'} {hardware_key_label(ctx, hw_key)}" if hw_key not in (None, "default") else ""
    if subject == "base":
        return "the recipe's base arguments"
    if subject == "variant":
        return f"the {ctx.variant_label(path.get('variant') or '')} checkpoint's {'settings' if hw else 'arguments'}{hw}"
    if subject == "recipe":
        return f"the recipe's settings{hw}"
    return f"the recipe's {ctx.strategy_label(path.get('strategy') or '')} settings{role}{hw}"


def _provenance(ctx: RecipeContext, argv_entries: list[Entry], env) -> tuple[tuple[FlagSource, ...], tuple[EnvSource, ...]]:
    flags = tuple(FlagSource(
        flag=e.unit.tokens()[0],
        name=e.unit.key, help=flag_help(e.unit.key), value=e.unit.value, layer=e.source.layer, key=e.source.key,
        replaced=tuple(Replaced(u.value if u.value is not None else ("on" if u.enabled else "off"), s.layer, s.key)
                       for u, s in e.replaced),
        why=ctx.reason(e.source.key, e.unit.tokens()[0].split("=", 1)[0]),
    ) for e in argv_entries)
    envs = tuple(EnvSource(k, v.value, v.source.layer, v.source.key, tuple(Replaced(val, s.layer, s.key) for val, s in v.replaced),
                           why=ctx.reason(f"{v.source.key}.{k}"))
                 for k, v in env.entries.items())
    return flags, envs


def _replacement_notices(ctx: RecipeContext, entries: list[Entry], notices: Notices, where: str) -> None:
    """Notices for each step of a flag's override chain that involves a choice of
    the user (Advanced, a feature, KV offload): a replaced value, or a re-set to
    the value already in force (the command is then unchanged)."""
    for e in entries:
        chain = list(e.replaced) + [(e.unit, e.source)]
        for (old, src), (new, dst) in zip(chain, chain[1:]):
            if src.layer not in USER_LAYERS and dst.layer not in USER_LAYERS:
                continue
            flag = "--" + e.unit.key
            new_v = new.value if new.value is not None else new.display()
            old_v = old.value if old.value is not None else old.display()
            if old == new:
                notices.add("info", "value-unchanged",
                            f"{source_label(ctx, dst)} sets {flag} {new_v}{where}, the value {source_label(ctx, src)} already set: "
                            "the command is unchanged.")
            else:
                knob = advanced_knob(ctx, src) if dst.layer != "advanced" else None
                notices.add("info", "value-replaced",
                            f"{flag} {old_v} from {source_label(ctx, src)} was replaced by {new_v} from {source_label(ctx, dst)}{where}.",
                            subject="advanced" if knob else None, old=knob, new=new_v if knob else None,
                            reason=f"{source_label(ctx, dst)}'s {flag} {new_v}" if knob else None)


def advanced_knob(ctx: RecipeContext, src: Source) -> str | None:
    """The Advanced knob id (the ``advanced=`` value) behind an Advanced
    source: the built-in's ``advanced.<knob>`` or the recipe's
    ``advanced_options[i]``; None for another layer."""
    if src.layer != "advanced" or src.path is None:
        return None
    if src.path.get("knob"):
        return src.path.get("knob")
    index = src.path.get("index")
    opts = ctx.recipe.advanced_options
    return opts[int(index)].id if index is not None and int(index) < len(opts) else None


def _vllm_notices(ctx: RecipeContext, entries: list[Entry], env: dict[str, str], notices: Notices, where: str = "") -> None:
    """What vLLM itself would refuse or ignore in this command, checked against
    its CLI table (``composer.vllm_cli``). A finding of level ``error`` (an
    option vLLM 0.33.0 does not have, a value its parser or a config class
    refuses: argparse exits, pydantic raises before serving) is an error
    notice ``vllm-rejects`` — the plan's status is then ``error``, as for a
    start-up rule (``launch_notices``); found on the corpus's Ring-1T-FP8
    (``--compilation-config`` ``use_inductor``) and Kimi-K2 TP+PP
    (``--disable-log-requests``), shown as ready before. A finding of level
    ``warning`` (deprecated, ignored) is a warning ``vllm-warns``. Each
    notice names the layer and recipe key that set the option (``key``). Our
    own recipes compose none (tests); recipes of others may."""
    findings = vllm_cli.check_command((e.unit.key, e.unit.value, e.unit.enabled) for e in entries)
    omni = any(e.unit.key == "omni" for e in entries)
    for name in env:
        if not (omni and name.startswith("VLLM_OMNI_")):  # vLLM-Omni's own variables
            findings += vllm_cli.check_env(name)
    for f in findings:
        entry = next((e for e in entries if e.unit.tokens() and e.unit.tokens()[0].split("=", 1)[0] == f.flag), None)
        by = f" (set by {source_label(ctx, entry.source)}{where})" if entry is not None else where
        if f.level == "error":
            notices.add("error", "vllm-rejects", f"{f.sentence()}{by}: vLLM stops before serving. Fix: change or drop "
                                                 f"{f.flag}, or run the vLLM release the recipe was written for.",
                        subject=f.flag, reason=f.message, key=entry.source.key if entry is not None else None)
        else:
            notices.add("warning", "vllm-warns", f.sentence() + by, subject=f.flag, reason=f.message,
                        key=entry.source.key if entry is not None else None)


def _scheduler_notices(entries: list[Entry], label: str, notices: Notices) -> None:
    """Scheduler settings that starve each other (vLLM starts, degraded), with
    every value named:

    * each decode step of a sequence schedules 1 + k tokens with k speculative
      tokens (``--speculative-config`` ``num_speculative_tokens``), so
      ``--max-num-batched-tokens`` from ``--max-num-seqs`` up to below
      ``--max-num-seqs × (1 + k)`` caps the batch below ``--max-num-seqs``
      (below ``--max-num-seqs`` itself vLLM refuses to start: the launch rule
      ``batched-tokens-ge-seqs``, ``composer.launch``, reports it as an error);
    * a CUDA-graph capture size (``--compilation-config``
      ``max_cudagraph_capture_size`` or the largest ``cudagraph_capture_sizes``)
      below the largest decode batch (``--max-num-seqs × (1 + k)`` tokens) runs
      the larger batches without CUDA graphs.
    Only values the command sets are compared (vLLM's defaults depend on the
    hardware and usage context)."""
    import json

    vals = {e.unit.key: e.unit.value for e in entries}

    def as_int(v):
        return vllm_cli.human_int(str(v)) if v is not None else None

    seqs, batched = as_int(vals.get("max-num-seqs")), as_int(vals.get("max-num-batched-tokens"))
    k = 0
    try:
        spec = json.loads(vals.get("speculative-config") or "{}")
        k = int(spec.get("num_speculative_tokens") or 0) if isinstance(spec, dict) else 0
    except (ValueError, TypeError, OverflowError):  # Infinity, strings: the lint reports those
        k = 0
    if seqs and batched is not None and seqs <= batched < seqs * (1 + k):
        why = f" with {k} speculative tokens" if k else ""
        notices.add("warning", "scheduler-budget",
                    f"{label}: --max-num-batched-tokens {batched} is below --max-num-seqs {seqs} × (1 + {k}) = {seqs * (1 + k)}"
                    f"{why}: a decode step cannot hold every sequence, so at most {batched // (1 + k)} run at once. "
                    f"Raise --max-num-batched-tokens to at least {seqs * (1 + k)} or lower --max-num-seqs"
                    # a fresh user read this fix and vLLM's own warning (8192 with speculative decoding) as two answers
                    + (f" ({seqs * (1 + k)} is what every sequence needs; vLLM's own warning about speculative "
                       f"decoding asks for {launch.SPEC_SUBOPTIMAL_BELOW}, for throughput)"
                       if k and seqs * (1 + k) < launch.SPEC_SUBOPTIMAL_BELOW else "") + ".",
                    subject="--max-num-batched-tokens", old=batched, new=seqs * (1 + k))
    try:
        comp = json.loads(vals.get("compilation-config") or "{}")
    except ValueError:
        comp = {}
    if isinstance(comp, dict) and seqs:
        sizes = [x for x in comp.get("cudagraph_capture_sizes") or [] if type(x) is int] \
            if isinstance(comp.get("cudagraph_capture_sizes"), list) else []
        cap = comp.get("max_cudagraph_capture_size") or (max(sizes) if sizes else None)
        if type(cap) is int and cap < seqs * (1 + k):
            notices.add("warning", "cudagraph-capture",
                        f"{label}: the largest CUDA-graph capture size {cap} is below the largest decode batch "
                        f"(--max-num-seqs {seqs} × (1 + {k}) = {seqs * (1 + k)} tokens): larger batches run without CUDA graphs.",
                        subject="--compilation-config", old=cap, new=seqs * (1 + k))


ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"


def _connector_allocator(entries: list[Entry], env_b, notices: Notices | None, where: str) -> None:
    """A KV connector (``--kv-transfer-config``, from KV offload or P/D) with
    ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (a recipe's hardware
    block, e.g. the corpus Kimi-K3's hopper one): vLLM 0.33.0 refuses to start
    (``vllm/config/vllm.py:1246-1300`` ``_verify_kv_transfer_compat``: CUDA
    VMM can remap the pinned KV pages) and advises to unset it. The later,
    chosen layer wins: the option is dropped from the variable (the variable
    too when nothing is left), with an info notice naming both values.
    Mutates ``env_b`` (``composer.argv.EnvBuilder``)."""
    entry = env_b.entries.get(ALLOC_CONF)
    if entry is None or not any(e.unit.key == "kv-transfer-config" for e in entries):
        return
    opts = [o for o in entry.value.split(",") if o.strip()]
    kept = [o for o in opts if o.strip().replace(" ", "") != "expandable_segments:True"]
    if kept == opts:
        return
    if kept:
        env_b.entries[ALLOC_CONF] = replace(entry, value=",".join(kept))
    else:
        del env_b.entries[ALLOC_CONF]
    if notices is not None:
        notices.add("info", "connector-allocator",
                    f"{ALLOC_CONF}={entry.value}{where} is dropped{' to ' + ','.join(kept) if kept else ''}: vLLM "
                    f"{vllm_cli.VERSION} refuses expandable_segments:True with a KV connector (--kv-transfer-config), "
                    f"whose pinned KV memory CUDA VMM could remap (vllm/config/vllm.py, _verify_kv_transfer_compat).",
                    subject=ALLOC_CONF, old=entry.value, new=",".join(kept) or None)


def _command(ctx, sel, spec: CommandSpec, lay, notices: Notices, label: str, extra_env: dict | None = None,
             lite: bool = False) -> Command:
    """One command of ``sel``: the layers composed for ``spec``, with its
    notices, provenance and shell text. ``lite``: argv and env only (no
    provenance, no text), for ``plan_error``'s checks."""
    argv_b, env_b, removed = compose_layers(ctx, sel, spec, lay)
    if extra_env:
        env_b.add(extra_env, Source("strategy", "composer: per-node placement"))
    for fid, entry in removed:
        if fid is None:
            notices.add("warning", "topology-kept",
                        f"{source_label(ctx, entry.source)} sets {entry.unit.display()}, which contradicts the computed "
                        f"layout ({summary_layout(ctx, sel)}); the layout's flags are used.")
            continue
        notices.add("info", "feature-owned-flag",
                    f"{feature_label(ctx, fid)} is off, so {entry.unit.display()} from {source_label(ctx, entry.source)} was removed.")
    entries = argv_b.entries()
    _connector_allocator(entries, env_b, None if lite else notices, f" on the {spec.pool} pool" if spec.pool else "")
    _vllm_notices(ctx, entries, env_b.values(), notices, f" on the {spec.pool} pool" if spec.pool else "")
    if not lite:
        _replacement_notices(ctx, entries, notices, f" on the {spec.pool} pool" if spec.pool else "")
        _scheduler_notices(entries, f"The {spec.pool} pool" if spec.pool else "The deployment", notices)
    model = ctx.model_id(sel.variant, sel.task)
    problem = check(model, "positional")  # the schema's MODEL_ID already refuses these; never a command
    if problem:
        raise ArgvError(f"the model id of variant {sel.variant!r}: {problem}")
    argv = ["vllm", "serve", model] + argv_b.tokens()
    env = env_b.values()
    if lite:
        return Command(role=spec.role, node_rank=spec.rank, pool=spec.pool, label=label, argv=tuple(argv), env=env,
                       command="", env_text="", text="")
    flags, envs = _provenance(ctx, entries, env_b)
    units = [e.unit.tokens() for e in entries]
    cmd = command_text(argv, units)
    text = (env_text(env) + "\n" + cmd) if env else cmd
    return Command(role=spec.role, node_rank=spec.rank, pool=spec.pool, label=label, argv=tuple(argv), env=env,
                   command=cmd, env_text=env_text(env), text=text, provenance=flags, env_provenance=envs, pip_text=text)


def _where(lay, hwname: str, pool: str | None = None, total: int = 0) -> str:
    """Where one replica lives, for the capacity line; a P/D pool also names
    the cluster's ``total`` GPU nodes (both pools), which nothing else says."""
    if pool and lay.devices:
        return (f"the {pool} pool (GPUs {lay.devices[0]}–{lay.devices[-1]}, half of "
                + (f"the {hwname} node)" if total == 1 else f"one of the {total} × {hwname} nodes)"))
    if pool:
        return f"the {pool} pool ({lay.nodes} of the {total} × {hwname} nodes)"
    if lay.kind.replica_per_node:
        return f"each replica (1 × {hwname})"
    if lay.nodes == 1 and lay.used_per_node < lay.gpus_per_node:
        return f"{lay.used_per_node} × {hwname} GPU"
    return f"{lay.replica_nodes} × {hwname}"


def _capacity_of(ctx, sel, lay, util, cmd: Command, scope: str, where: str, notices: Notices,
                 grow=None, lite: bool = False) -> CapacityCheck:
    """The memory model of one replica, with the memory flags of its composed
    command (``composer.memory.Flags``), the levers that move it most and, when
    the KV cache cannot hold one sequence of the max-model-len in force (vLLM
    refuses to start: ``kv_cache_planning.py:50-87``), an error notice
    ``kv-capacity`` with one-click fixes — a warning ``kv-capacity-disagrees``
    when the recipe marks the configuration verified. ``grow(n)`` is the layout
    on ``n`` nodes (None: the node count is fixed); notices for idle GPUs too.
    ``lite`` (``lite_plan_error``): the levers, which only the capacity text
    reads, are left out of a capacity that fits and holds one sequence (no
    error can quote them; no launch rule reads them)."""
    from composer.dimensions import CONTEXTS
    from composer.memory import Flags, with_levers

    flags = Flags.from_argv(cmd.argv, util)
    cap = capacity(ctx, lay, sel.hardware, sel.variant, util, sel.task, flags=flags, context=CONTEXTS[sel.context])

    def at(layout=lay, f=flags, **changes):  # changes: Flags fields (util=0.95)
        return capacity(ctx, layout, sel.hardware, sel.variant, util, sel.task, flags=replace(f, **changes) if changes else f)

    short = cap.weights_fit and (cap.kv_gib or 0) > 0 and not cap.holds_one_sequence  # the kv-capacity notice's case
    if lite and cap.fits and not short:
        return cap.check(scope, where, _host_kv_gib(ctx, sel, cmd, lay))
    fp8 = at(f=replace(flags, kv_dtype="fp8")) if cap.tokens_for is not None and (flags.kv_dtype or "auto") in (
        "auto", "bfloat16", "float16") else None
    more = None
    if grow is not None:
        # the next count whose layout vLLM accepts (a TP dividing the heads:
        # composer.parallel.layout_problem), not merely one more node
        # (a pool on half a node grows to a whole one first)
        bigger = next((k for k in range(1 if lay.devices else lay.nodes + 1, MAX_NODES + 1)
                       if layout_problem(ctx, grow(k), sel.variant) is None), None)
        if bigger is not None:
            more = (f"{bigger} node{'s' if bigger > 1 else ''}", at(grow(bigger)))
    elif lay.kind.id == "tp" and lay.nodes == 1 and lay.tp < lay.gpus_per_node:
        more = (f"TP {min(lay.gpus_per_node, lay.tp * 2)}",
                at(replace(lay, tp=min(lay.gpus_per_node, lay.tp * 2))))
    cap = with_levers(cap, tuple(x for x in (("--kv-cache-dtype fp8", fp8), more) if x is not None))
    hw = ctx.hw(sel.hardware)
    if lay.used_per_node < lay.gpus_per_node:
        idle = lay.gpus_per_node - lay.used_per_node
        notices.add("info", "idle-gpus",
                    f"{scope.capitalize() if scope != 'deployment' else 'The deployment'} uses {lay.used_per_node} of the "
                    f"{lay.gpus_per_node} GPUs of each {hw.display_name} node; {idle} per node stay idle and are not "
                    "counted as capacity.", subject="gpus", old=lay.gpus_per_node, new=lay.used_per_node)
    if short:
        _kv_capacity_notice(ctx, sel, lay, cap, scope, where, notices, fp8, grow, at)
    host = _host_kv_gib(ctx, sel, cmd, lay)
    if host is not None and hw.host_memory_gib and host > hw.host_memory_gib:
        notices.add("warning", "kv-host-memory-exceeds",
                    f"KV offload reserves {host:g} GiB of host memory on each {hw.display_name} node of {where}, more "
                    f"than the node's {hw.host_memory_gib:g} GiB.", subject="--kv-transfer-config", old=host,
                    new=hw.host_memory_gib)
    return cap.check(scope, where, host)


def _verified_exactly(ctx: RecipeContext, sel: Selection) -> bool:
    """Whether the recipe records a run of this hardware and strategy (issue
    18.3: only then is a KV cache short of one sequence a warning, and only
    where the run is short too: ``_kv_capacity_notice``): the hardware is
    verified and its run's strategy (``_run_strategy``) is ``sel``'s. A
    hardware-level mark does not verify every strategy (found by an
    adversarial pass: GLM-4.5 single-node DEP on H200, 0.32x of one sequence,
    was shown ready)."""
    return _recorded_run(ctx, sel) and sel.strategy == _run_strategy(ctx, sel)


def _set_after_advanced(ctx: RecipeContext, sel: Selection, name: str, pool: str | None) -> bool:
    """Whether a layer after Advanced (features, KV offload: ``composer.layers.TABLE``
    order, seed "a later layer wins") sets the option ``name`` (canonical, e.g.
    ``max-model-len``) in ``sel``'s command of ``pool``: then an Advanced knob
    for it is no fix (an adversarial finding: Qwen3-235B's long_context sets
    --max-model-len 1010000 over Advanced's auto)."""
    from composer.argv import parse_tokens
    from composer.layers import TABLE, Layer, Pick

    seen_advanced = False
    pick = Pick(ctx, sel, CommandSpec(pool, 0, (), pool) if pool else None)
    for step in TABLE:
        if isinstance(step, Layer) and step.seed == "advanced":
            seen_advanced = True
            continue
        if not seen_advanced or not isinstance(step, Layer) or step.seed not in ("features", "kv_offload"):
            continue
        for path, value in step.pick(pick):
            if path.kind == "args" and value and any(u.key == name for u in parse_tokens(list(value))):
                return True
    return False


def _kv_capacity_notice(ctx, sel, lay, cap, scope, where, notices: Notices, fp8, grow, at) -> None:
    """The ``kv-capacity`` notice of a KV cache that holds less than one
    sequence of the max-model-len in force, with one-click fixes: vLLM's auto
    length (Advanced ``max-model-len auto``), the fewest nodes that hold it,
    another multi-node strategy that holds it (``_strategy_fixes``), an fp8 KV
    cache (Advanced ``kv-cache-dtype fp8``). A warning instead of an
    error when the recipe marks this configuration verified (``verification``)."""
    from composer.memory import fits_length
    from composer.notices import Fix

    base = pinned_request(ctx, sel)
    fits = fits_length(cap)
    fixes = []
    pool = scope if scope in POOLS else None
    # a knob a later layer overrides changes nothing: no fix
    knobs = {k.id for k in ctx.advanced_knobs(sel.strategy)} - {
        knob for knob, name in (("max_model_len_auto", "max-model-len"), ("gpu_mem_095", "gpu-memory-utilization"),
                                ("kv_fp8", "kv-cache-dtype")) if _set_after_advanced(ctx, sel, name, pool)}
    if "max_model_len_auto" not in sel.advanced and "max_model_len_auto" in knobs:
        auto = at(max_model_len="auto").max_model_len  # vLLM's own auto-fit length (memory.auto_fit_length)
        fixes.append(Fix(f"--max-model-len auto (vLLM fits it: about {auto:,} tokens here)" if auto else
                         "--max-model-len auto", base.with_values(advanced=[*sel.advanced, "max_model_len_auto"]).query()))
    if cap.util < 0.95 and "gpu_mem_095" not in sel.advanced and "gpu_mem_095" in knobs:
        # the gentlest change when it is enough (the capacity's "What changes it most" names it first): no accuracy cost
        more_memory = at(util=0.95) if cap.tokens_for is not None else None
        if more_memory is not None and more_memory.holds_one_sequence:
            fixes.append(Fix(f"gpu-memory-utilization 0.95 ({more_memory.concurrency or 0:.2f}x)",
                             base.with_values(advanced=[*sel.advanced, "gpu_mem_095"]).query()))
    if grow is not None:
        for n in range(1 if lay.devices else lay.nodes + 1, MAX_NODES + 1):
            if layout_problem(ctx, grow(n), sel.variant) is not None:
                continue  # a count vLLM refuses (e.g. TP 72 of 64 heads) is no fix: the resolver would lower it again
            bigger = at(grow(n))
            if bigger.weights_fit and bigger.holds_one_sequence:
                param = f"{scope}_nodes" if scope in POOLS else "nodes"
                fixes.append(Fix(f"{n} node{'s' if n > 1 else ''}" + (f" in the {scope} pool" if scope in POOLS else ""),
                                 base.with_values(**{param: n}).query()))
                break
    if scope == "deployment" and not any(f.label.endswith((" node", " nodes")) for f in fixes):
        fixes += _strategy_fixes(ctx, sel)  # no node count of this strategy holds it
    if fp8 is not None and fp8.holds_one_sequence and "kv_fp8" not in sel.advanced and "kv_fp8" in knobs:
        fixes.append(Fix(f"an fp8 KV cache ({fp8.concurrency or 0:.2f}x)",
                         base.with_values(advanced=[*sel.advanced, "kv_fp8"]).query()))
    how = "set by the command" if cap.max_model_len_explicit else "the model's context, which vLLM takes when the command sets none"
    told = (f"The KV cache of {where} holds {cap.kv_tokens:,} tokens{cap.token_scope} ({cap.kv_gib:.2f} GiB per GPU): "
            f"maximum concurrency {cap.concurrency:.2f}x for --max-model-len {cap.max_model_len:,} ({how}), "
            "less than one sequence")
    fix_text = "; ".join(f.label for f in fixes) or "more GPUs"
    recorded = _verified_exactly(ctx, sel)
    changed = departures(ctx, sel) if recorded else []
    if recorded and (not changed or _run_short(ctx, sel, scope)):
        run = ("the recipe marks this configuration verified" if not changed else
               f"the recipe records a run of this hardware and strategy with its defaults, for which the estimate is "
               f"short too (this plan differs: {', '.join(changed)})")
        notices.add("warning", "kv-capacity-disagrees",
                    f"{told}, yet {run}: the estimate and the recipe disagree "
                    f"(vLLM would refuse to start if the estimate were right). If it does not start: {fix_text}.",
                    subject="--max-model-len", old=cap.max_model_len, new=fits, reason="estimate below one sequence",
                    fixes=tuple(fixes))
        return
    notices.add("error", "kv-capacity", f"{told}: vLLM refuses to start. Fits: {fix_text}.",
                subject="--max-model-len", old=cap.max_model_len, new=fits,
                reason=f"{cap.concurrency:.2f}x of one {cap.max_model_len:,}-token sequence", fixes=tuple(fixes))


def _strategy_fixes(ctx, sel) -> list:
    """Other strategies on this hardware whose resolved plan holds one
    sequence of the max-model-len in force, at most one of each kind: for a
    single-node plan, first another single-node strategy that uses more of the
    node's GPUs (no more hardware: e.g. TEP on all 8 where the recipe's TP is 4;
    an adversarial finding, MiniMax-M2 on H100 holds 6.31x so), then the first
    multi-node one (e.g. TP+PP, whose stages split the layers, where TP alone
    cannot: MLA's latent is held whole by every TP rank)."""
    from composer.canonical import resolved_selection, selection_values
    from composer.notices import Fix
    from composer.resolve import layout_ok

    if ctx.hardware_block_reason(sel.hardware, sel.variant) is not None:
        return []
    single = ctx.strategy(sel.strategy).deploy_type == "single_node"
    used = layout_for(ctx, sel, sel.nodes).used_per_node if single else 0
    out = []
    for kind in (("single_node", "multi_node") if single else ("multi_node",)):
        for sid in ctx.strategies:
            if sid == sel.strategy or ctx.strategy(sid).deploy_type != kind:
                continue
            values = {k: v for k, v in selection_values(ctx, sel).items() if k != "nodes"}
            values["strategy"] = sid
            try:
                other = resolved_selection(ctx, values)
            except (KeyError, ValueError):
                continue
            lay = layout_for(ctx, other, other.nodes)
            if other.strategy != sid or layout_ok(ctx, other, lay) is not None:
                continue
            if kind == "single_node":
                if lay.used_per_node <= used:
                    continue
                label = f"{ctx.strategy_label(sid)} on {lay.used_per_node} GPUs"
            else:
                label = f"{ctx.strategy_label(sid)} on {other.nodes} nodes"
            out.append(Fix(label, pinned_request(ctx, other).query()))
            break
    return out


def _host_kv_gib(ctx, sel, cmd: Command, lay) -> float | None:
    """Host memory a KV offload reserves per node, GiB: a connector's
    ``cpu_bytes_to_use_per_rank`` × the node's ranks, else the KV option's
    server process on each node (``lmcache_server_gib``), or None."""
    import json

    raw = flag_value(cmd.argv, "--kv-transfer-config")
    try:
        extra = json.loads(raw).get("kv_connector_extra_config", {}) if raw else {}
        per_rank = extra.get("cpu_bytes_to_use_per_rank") if isinstance(extra, dict) else None
    except (ValueError, AttributeError):
        return None
    if not isinstance(per_rank, (int, float)) or isinstance(per_rank, bool):
        return lmcache_server_gib(ctx, sel)
    return round(per_rank / 1024 ** 3 * lay.used_per_node, 1)


def lmcache_server_gib(ctx, sel) -> float | None:
    """GiB of host memory the KV option's server holds on each node: the
    LMCache server's ``--l1-size-gb`` (one server per node, its L1 in pinned
    host DRAM), which LMCache counts in 2^30 bytes (lmcache 0.5.6
    ``lmcache/v1/distributed/config.py:1086``: ``l1_size_gb * (1 << 30)``);
    None when the option has no such server (issue 19: host memory for
    LMCache offload was not counted)."""
    import shlex

    kv = ctx.catalog.taxonomy.kv_offload.get(sel.kv_offload) if sel.kv_offload else None
    text = kv.companion.command if kv is not None and kv.companion else ""
    try:
        words = shlex.split(text, comments=True) if text else []
    except ValueError:
        return None
    for i, w in enumerate(words):
        value = words[i + 1] if w == "--l1-size-gb" and i + 1 < len(words) else (
            w.split("=", 1)[1] if w.startswith("--l1-size-gb=") else None)
        if value is not None:
            try:
                gib = float(value)
            except ValueError:
                return None
            return round(gib, 1) if 0 < gib < 1e9 else None
    return None


def _tp_utilization_notice(ctx, sel, lay, util: float, notices: Notices) -> None:
    """Say when the gpu-memory-utilization in force moves the single-node TP
    auto-fit away from what vLLM's default utilization would give (issue 10:
    TP must never shrink or grow silently)."""
    from composer.memory import DEFAULT_GPU_UTIL, single_node_tp
    from composer.resolve import memory_flags

    strat = ctx.strategy(sel.strategy)
    if strat.kind != "tp" or strat.deploy_type != "single_node" or ctx.recipe_tp(sel.hardware, sel.variant) is not None or util == DEFAULT_GPU_UTIL:
        return
    _, kv_dtype, mml = memory_flags(ctx, sel)
    at_default = single_node_tp(ctx, sel.hardware, sel.variant, DEFAULT_GPU_UTIL, kv_dtype, mml)
    if at_default != lay.tp:
        notices.add("info", "tp-utilization",
                    f"At gpu-memory-utilization {util:g} the KV cache fits on TP {lay.tp}; at vLLM's default "
                    f"{DEFAULT_GPU_UTIL:g} it would take TP {at_default}.", subject="--tensor-parallel-size",
                    old=at_default, new=lay.tp)


def build_commands(ctx: RecipeContext, sel: Selection, notices: Notices,
                   lite: bool = False) -> tuple[list[Command], list[CapacityCheck]]:
    """All commands of ``sel`` (one per node and role) and capacity records
    (``lite``: argv and env only, ``_command``, of the head and the first
    follower of each group: the others differ only in their rank)."""
    deploy = ctx.strategy(sel.strategy).deploy_type
    hwname = ctx.hw(sel.hardware).display_name
    if deploy == "pd_cluster":
        return _pd_commands(ctx, sel, notices, lite)
    lay = layout_for(ctx, sel, sel.nodes)
    util = util_in_force(ctx, sel)
    _tp_utilization_notice(ctx, sel, lay, util, notices)
    cmds, endpoints = [], []
    many = sel.instances > 1
    for inst in range(1, sel.instances + 1):
        head = f"$INSTANCE_{inst}_HEAD_IP" if many else "$HEAD_IP"
        for rank in range(min(sel.nodes, 2) if lite else sel.nodes):
            role = "serve" if deploy == "single_node" else ("head" if rank == 0 else "worker")
            label = "Node" if role == "serve" else ("Head (node 0)" if rank == 0 else f"Node {rank}")
            if many:
                label = f"Instance {inst} · {label}"
            spec = CommandSpec(role, rank, tuple(node_units(lay, rank, deploy, head=head)))
            cmd = _command(ctx, sel, spec, lay, notices, label, lite=lite)
            cmds.append(cmd)
            if serves_api(lay, rank) and not lite:
                host = (f"$INSTANCE_{inst}_IP" if deploy == "single_node" else head if rank == 0
                        else f"$INSTANCE_{inst}_NODE_{rank}_IP") if many else head if rank == 0 else f"$NODE_{rank}_IP"
                endpoints.append(f"http://{host}:{flag_value(cmd.argv, '--port') or '8000'}")
    grow = (lambda n: layout_for(ctx, sel, n)) if deploy != "single_node" else None
    caps = [_capacity_of(ctx, sel, lay, util, cmds[0], "deployment",
                         _where(lay, hwname) + (f", each of {sel.instances} instances" if many else ""), notices, grow,
                         lite)]
    if many:
        cmds.append(_store_router(ctx, sel, endpoints))
    elif len(endpoints) > 1:
        cmds.append(_lb_router(endpoints))
        notices.add("info", "lb-router",
                    f"Every node runs its own API server here (hybrid-LB data parallelism: each sends requests only "
                    f"to its own node's engines), so the Router tab puts one endpoint in front of all {len(endpoints)}: "
                    f"run it on any host that reaches port 8000 of every node, and send requests to it (port "
                    f"{ROUTER_PORT}). Without it only the head's DP ranks receive requests.", subject="router")
    return cmds, caps


def _lb_router(endpoints: list[str]) -> Command:
    """The router over the API servers of one multi-node deployment in which
    several nodes serve the API (hybrid LB DP: ``--data-parallel-hybrid-lb``,
    each node's API server sends only to its own node's engines, vLLM's
    ``vllm/v1/engine/utils.py`` / ``entrypoints/cli/serve.py``): without it only
    the head's ranks receive requests (the launch rule
    ``dp-ranks-receive-requests``, issue 18)."""
    return _router_command(["vllm-router", "--policy", "round_robin", "--worker-urls", *endpoints,
                            "--host", "0.0.0.0", "--port", ROUTER_PORT], run.ROUTER_INSTALL)


def _router_command(argv: list[str], install: str) -> Command:
    """The ``Router`` tab of every router the plans have (P/D, a KV store's
    instances, hybrid-LB DP): ``argv`` after ``install`` (a line safe to paste)."""
    cmd = command_text(argv, head=1)
    text = run.tool_install(install, cmd)
    return Command(role="router", node_rank=0, pool=None, label="Router", argv=tuple(argv), env={}, command=cmd,
                   env_text="", text=text, install=install, pip_text=text)


def _store_router(ctx: RecipeContext, sel: Selection, endpoints: list[str]) -> Command:
    """The router over the instances of a KV-store deployment, with the
    store's policy (``cache_aware``: prompts with a shared prefix land on the
    instance that holds it) and port (``kv_store/<id>.yaml`` ``router``)."""
    cfg = dict(ctx.strategy(sel.kv_offload).router or {})
    argv = ["vllm-router", "--policy", str(cfg.get("policy", "cache_aware")), "--worker-urls", *endpoints,
            "--host", "0.0.0.0", "--port", str(cfg.get("port", ROUTER_PORT))]
    return _router_command(argv, recipe_command(str(cfg.get("install") or run.ROUTER_INSTALL)))


def _pd_commands(ctx: RecipeContext, sel: Selection, notices: Notices,
                 lite: bool = False) -> tuple[list[Command], list[CapacityCheck]]:
    cmds, caps = [], []
    endpoints: dict[str, list[str]] = {}
    hwname = ctx.hw(sel.hardware).display_name
    total = pd_nodes(sel)
    shared = colocated(sel)
    side_ports: list[tuple[int, int]] = []  # (first port, DP ranks) of the NIXL side channels on the shared node
    http_ports: list[str] = []  # the API servers' ports on the shared node
    for name in POOLS:
        pool = sel.pool(name)
        assert pool is not None  # a P/D selection has both pools
        lay = pool_layout(ctx, sel, name, pool.mode, pool.nodes)
        util = util_in_force(ctx, sel, name)
        upper = name.upper()
        endpoints[name] = []
        first = None
        # Two pools on one node must not bind the same ports: the DP RPC port is the command's
        # (--data-parallel-rpc-port), the next one for the decode pool.
        rpc = str(int(DP_RPC_PORT) + POOLS.index(name)) if shared else DP_RPC_PORT
        for rank in range(min(lay.nodes, 2) if lite else lay.nodes):
            head = f"${upper}_NODE_1"
            spec = CommandSpec(name, rank, tuple(node_units(lay, rank, "pd_cluster", head=head, pd_pool=True,
                                                            rpc_port=rpc)), name)
            extra = {"VLLM_NIXL_SIDE_CHANNEL_HOST": f"${upper}_NODE_{rank + 1}"}
            if lay.devices:
                extra["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in lay.devices)
            if lay.nodes > 1:
                extra.update({"GLOO_SOCKET_IFNAME": "$IFACE_NAME", "NCCL_SOCKET_IFNAME": "$IFACE_NAME"})
            label = (f"{name.capitalize()}, GPUs {lay.devices[0]}–{lay.devices[-1]}" if lay.devices
                     else f"{name.capitalize()} node {rank + 1}/{lay.nodes}")
            cmd = _command(ctx, sel, spec, lay, notices, label, extra, lite)
            if shared:
                port = _side_port_clear(cmd.env, lay, side_ports)
                http = flag_value(cmd.argv, "--port") or "8000"  # vLLM's default (entrypoints/openai/cli_args.py)
                clash = http in http_ports and http.isdigit()  # both pools ask for one port: the second takes the next free one
                if port is not None or clash:
                    if port is not None:
                        extra["VLLM_NIXL_SIDE_CHANNEL_PORT"] = port
                    if clash:
                        http = str(next(p for p in range(int(http) + 1, 65536) if str(p) not in http_ports))
                        spec = replace(spec, topology=spec.topology + (Unit("port", http),))
                    cmd = _command(ctx, sel, spec, lay, notices, label, extra, lite)
                http_ports.append(http)
            first = first or cmd
            cmds.append(cmd)
            if serves_api(lay, rank):
                port = flag_value(cmd.argv, "--port") or "8000"
                endpoints[name].append(f"http://${upper}_NODE_{rank + 1}:{port}")
        assert first is not None  # a pool has at least one node
        caps.append(_capacity_of(ctx, sel, lay, util, first, name, _where(lay, hwname, name, total), notices,
                                 lambda n, _name=name, _mode=pool.mode: pool_layout(ctx, sel, _name, _mode, n), lite))
    _half_notice(ctx, sel, cmds, notices)
    cmds.append(_router(ctx, sel, endpoints))
    return cmds, caps


def _half_notice(ctx: RecipeContext, sel: Selection, cmds: list[Command], notices: Notices) -> None:
    """What a plan with a pool on half a node (``dimensions.HALF_NODE``) asks
    of the person running it: which GPUs each pool takes, that the two hosts
    are the same machine, and the ports each pool binds there (pip and
    Docker; the Kubernetes and SLURM forms request half a node's GPUs per pod
    or job and let the scheduler place them)."""
    # the pools the selection puts on half a node (a recipe's own CUDA_VISIBLE_DEVICES on a whole-node pool
    # is no half: the notice had read it so)
    halves = [next(c for c in cmds if c.pool == p) for p in POOLS if sel.pool(p).half]  # type: ignore[union-attr]
    if not halves:
        return
    hw = ctx.hw(sel.hardware).display_name

    def gpus(c: Command) -> str:
        return ",".join(str(i) for i in half_devices(ctx, sel.hardware, c.pool or ""))

    def ports(c: Command) -> str:
        rpc = flag_value(c.argv, "--data-parallel-rpc-port")
        return (f"HTTP {flag_value(c.argv, '--port') or '8000'}, NIXL side channel from "
                f"{c.env.get('VLLM_NIXL_SIDE_CHANNEL_PORT', '5600')}" + (f", DP RPC {rpc}" if rpc else ""))

    if colocated(sel):
        p, d = halves[0], halves[-1]
        notices.add("info", "pd-colocated",
                    f"Both pools run on one {hw} node: prefill on GPUs {gpus(p)}, decode on GPUs "
                    f"{gpus(d)} (CUDA_VISIBLE_DEVICES), so PREFILL_NODE_1 and DECODE_NODE_1 are "
                    f"both that node's address. Each binds its own ports (prefill: {ports(p)}; decode: {ports(d)}); "
                    "run each in its own shell (or its downloaded script): each command stays in the foreground. "
                    "The Kubernetes and SLURM forms ask for half a node's GPUs per pool and leave the placement to "
                    "the scheduler.", subject="pd")
        return
    c = halves[0]
    other = "decode" if c.pool == "prefill" else "prefill"
    notices.add("info", "pd-half-node",
                f"The {c.pool} pool runs on half a {hw} node (GPUs {gpus(c)}); the other half stays "
                f"idle unless the {other} pool takes it too ({other} pool nodes ½).", subject=f"{c.pool}_nodes")


def _router(ctx: RecipeContext, sel: Selection, endpoints: dict[str, list[str]]) -> Command:
    so = ctx.recipe.strategy_overrides.get("pd_cluster")
    router_cfg = dict(ctx.strategy("pd_cluster").router or {})
    router_cfg.update((so.router if so and so.router else {}) or {})
    policy = str(router_cfg.get("policy", "round_robin"))
    argv = ["vllm-router", "--policy", policy, "--vllm-pd-disaggregation"]
    for url in endpoints["prefill"]:
        argv += ["--prefill", url]
    for url in endpoints["decode"]:
        argv += ["--decode", url]
    argv += ["--host", "0.0.0.0", "--port", str(router_cfg.get("port", ROUTER_PORT))]
    return _router_command(argv, run.ROUTER_INSTALL)


def summary_layout(ctx: RecipeContext, sel: Selection) -> str:
    """The layout part of the summary, e.g. "TP 16" or "DP 16 + EP"."""
    return _shape(ctx, sel) if not sel.prefill else "P/D pools"


def _shape(ctx: RecipeContext, sel: Selection) -> str:
    task = ctx.omni_task(sel.task)
    return shape(layout_for(ctx, sel, sel.nodes), (task.label or task.id) if task else None)


def pd_nodes(sel: Selection) -> int:
    """GPU nodes of a P/D plan: the prefill pool's plus the decode pool's, a
    node for the pools on half a node (``resolve.pd_node_count``; the router
    needs no GPU node of its own)."""
    return pd_node_count(sel.pool(name) for name in POOLS)


def colocated(sel: Selection) -> bool:
    """Whether both P/D pools share one node, each on half of its GPUs
    (``dimensions.HALF_NODE``)."""
    return bool(sel.prefill and sel.decode and sel.prefill.half and sel.decode.half)


def _side_port_clear(env: Mapping[str, str], lay, taken: list[tuple[int, int]]) -> str | None:
    """A NIXL side-channel base port for a pool on a node it shares, when the
    composed one collides; else None. vLLM listens on
    ``VLLM_NIXL_SIDE_CHANNEL_PORT`` + the DP rank (``data_parallel_index``:
    vllm 0.33 ``distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py``
    77-80; default 5600, ``envs.py``), so a pool of D DP ranks takes D ports
    from its base. ``taken``: (base, ranks) of the pools already placed on the
    node; this pool's range is added to it."""
    text = str(env.get("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600"))
    ranks = max(1, lay.dp)
    if not text.isdigit():
        return None
    base = int(text)
    moved = None
    while any(base < b + n and b < base + ranks for b, n in taken):
        base = max(b + n for b, n in taken if base < b + n and b < base + ranks)
        moved = str(base)
    taken.append((base, ranks))
    return moved


def summary(ctx: RecipeContext, sel: Selection, commands: list[Command]) -> str:
    hw = ctx.hw(sel.hardware)
    prec = ctx.variant_label(sel.variant)
    if sel.prefill:
        # The cluster size first, as for every other plan; the router is a CPU
        # process (no GPU node of its own): it runs on any host that reaches both pools.
        assert sel.decode is not None  # a P/D selection has both pools
        total = pd_nodes(sel)
        return (f"{total} × {hw.display_name} node{'s' if total > 1 else ''} · P/D"
                + (" co-located" if colocated(sel) else "")
                + f": prefill {pool_size_label(sel.prefill.nodes)} × {KINDS[sel.prefill.mode].label} + decode "
                f"{pool_size_label(sel.decode.nodes)} × "
                f"{KINDS[sel.decode.mode].label}; router on any host · {prec}")
    text = f"{sel.nodes} × {hw.display_name} · {ctx.strategy_label(sel.strategy)} · {_shape(ctx, sel)} · {prec}"
    if sel.instances > 1:
        text += f" · {sel.instances} instances ({sel.nodes * sel.instances} nodes) behind a router"
    return text


def _recorded_run(ctx: RecipeContext, sel: Selection) -> bool:
    """Whether the recipe records a run of ``sel``'s hardware (``meta.hardware``)
    and, where it lists ``meta.verified_configs`` for it, of its strategy."""
    if not ctx.is_verified(sel.hardware):
        return False
    configs = [c for c in ctx.recipe.meta.verified_configs if c.hardware == sel.hardware]
    return not configs or any(c.strategy == sel.strategy for c in configs)


def verification(ctx: RecipeContext, sel: Selection) -> dict:
    """``verified`` only for what the recipe says was verified: the hardware
    (``meta.hardware.<id>: verified``) and, when the recipe lists
    ``meta.verified_configs`` for that hardware, the strategy too (upstream W21
    showed a green mark on any combination). ``verification`` is the badge text."""
    hw = ctx.hw(sel.hardware).display_name
    if not ctx.is_verified(sel.hardware):
        return {"verified": False, "verification": "Composed, not verified", "verification_detail": NOT_VERIFIED}
    configs = [c for c in ctx.recipe.meta.verified_configs if c.hardware == sel.hardware]
    if not _recorded_run(ctx, sel):  # configs for this GPU, none of this strategy
        others = ", ".join(ctx.strategy_label(c.strategy) for c in configs)
        return {"verified": False, "verification": f"{hw} is verified with {others}; this strategy is composed, not verified",
                "verification_detail": NOT_VERIFIED}
    what = f"{hw} · {ctx.strategy_label(sel.strategy)}" if configs else hw
    recorded = "The recipe records a run of this " + ("hardware and strategy" if configs else "hardware")
    changed = departures(ctx, sel)
    if changed:
        return {"verified": False,
                "verification": f"Composed, not verified: differs ({', '.join(changed)}) from the recipe's verified run "
                                f"on {what}",
                "verification_detail": recorded + " with its default choices. What this plan does differently ("
                + ", ".join(changed) + ") was not part of that run: the commands are built by the same rules and "
                "checked against vLLM " + vllm_cli.VERSION + "'s options; test them before relying on them."}
    return {"verified": True, "verification": f"Verified on {what}", "verification_detail": recorded + " with the choices shown."}


NOT_VERIFIED = ("Built from the recipe by the same rules as verified configurations, and checked against vLLM "
                f"{vllm_cli.VERSION}'s options, but the recipe records no run on this hardware and strategy: "
                "test it before relying on it.")
"""The badge's title where the recipe records no run of the hardware and strategy."""


def _run_strategy(ctx: RecipeContext, sel: Selection) -> str | None:
    """The strategy of the run the recipe records on ``sel``'s hardware (the
    rule of ``_verified_exactly`` and of the badge): ``sel``'s own where
    ``meta.verified_configs`` names it there (None where they name others);
    else, a GPU marked verified with no strategy named, the strategy the page
    opens on that GPU (a link naming only the hardware: the recipe's
    ``default_strategy`` where it holds the weights, else the first that
    does). A single-node strategy that cannot load the weights there is no run
    (an adversarial finding: DeepSeek-R1's single-node TP on GB200 was green
    while the multi-node plan the page opens was not)."""
    if any(c.hardware == sel.hardware for c in ctx.recipe.meta.verified_configs):
        return sel.strategy if any(c.hardware == sel.hardware and c.strategy == sel.strategy
                                   for c in ctx.recipe.meta.verified_configs) else None
    from composer.canonical import resolved_with_notices

    return resolved_with_notices(ctx, {"hardware": sel.hardware})[0].strategy


def run_selection(ctx: RecipeContext, sel: Selection) -> Selection:
    """The selection of the run the recipe records on ``sel``'s hardware: what
    a link naming only the hardware and the run's strategy (``_run_strategy``;
    ``sel``'s where none is known) resolves to, with ``sel``'s task (cached on
    the context, ``canonical.resolved_with_notices``)."""
    from composer.canonical import resolved_with_notices

    values = {"hardware": sel.hardware, "strategy": _run_strategy(ctx, sel) or sel.strategy}
    return resolved_with_notices(ctx, {**values, **({"task": sel.task} if sel.task else {})})[0]


def departures(ctx: RecipeContext, sel: Selection) -> list[str]:
    """How ``sel`` differs from the run the recipe records on its hardware
    (``run_selection``), in words: ``["strategy Single-node DEP",
    "Speculative decoding (EAGLE-3)", "no Reasoning", "KV offload LMCache",
    "3 nodes"]``. A recorded run is of the recipe's own choices, so a plan that
    differs is composed, not verified (issue 21: the badge stayed green over a
    feature that changed the commands). A difference may follow from another
    (a knob that needs fewer nodes): both are named, as what differs, not as
    what the person chose. The output form, CUDA image, task and the capacity
    line's context do not change what runs, and are not compared."""
    from composer.modes import mode_label

    base = run_selection(ctx, sel)
    out: list[str] = []
    if sel.strategy != base.strategy:
        out.append(f"strategy {ctx.strategy_label(sel.strategy)}")
    if sel.variant != base.variant:
        out.append(f"variant {ctx.variant_label(sel.variant)}")
    base_modes = dict(base.modes)
    for f in sel.features:
        mode = sel.mode(f)
        if f not in base.features:
            out.append(feature_label(ctx, f) + (f" ({mode_label(ctx, f, mode)})" if mode else ""))
        elif mode and mode != base_modes.get(f):
            out.append(f"{feature_label(ctx, f)} {mode_label(ctx, f, mode)}")
    out += [f"no {feature_label(ctx, f)}" for f in base.features if f not in sel.features]
    extra = [a for a in sel.advanced if a not in base.advanced]
    if extra:  # a knob that changes no value of the run's commands is no difference
        from composer.controls import role_layers

        composed = role_layers(ctx, base)
        knobs = {k.id: k for k in ctx.advanced_knobs(sel.strategy)}
        out += [ctx.advanced_label(a) for a in extra
                if a not in knobs or not _changes_nothing(ctx, base, composed, knobs[a].args)]
    if sel.kv_offload != base.kv_offload:
        out.append(f"KV offload {ctx.kv_label(sel.kv_offload)}" if sel.kv_offload else "no KV offload")
    for name in POOLS:
        mine, theirs = sel.pool(name), base.pool(name)
        if mine and mine != theirs:
            out.append(f"{name} {pool_size_label(mine.nodes)} × {mine.mode.upper()}")
    if sel.nodes != base.nodes and not sel.prefill:
        out.append(f"{sel.nodes} node{'s' if sel.nodes != 1 else ''}")
    if sel.instances != base.instances:
        out.append(f"{sel.instances} instances")
    return out


def _changes_nothing(ctx: RecipeContext, run: Selection, composed: list, args) -> bool:
    """Whether an Advanced knob's ``args`` leave the run's commands as they are:
    every flag is already there with that value (``controls.in_force``: a
    fresh user's finding, gpu-memory-utilization 0.95 on GB200 P/D), or is
    unset there and the value is vLLM's own default on that hardware
    (``memory.scheduler_defaults``: an adversarial finding,
    max-num-batched-tokens 8192 on an H100)."""
    from composer.argv import parse_tokens
    from composer.controls import in_force
    from composer.memory import scheduler_defaults

    if in_force(ctx, composed, args):
        return True
    try:
        units = parse_tokens(list(args))
    except ValueError:
        return False
    defaults = scheduler_defaults(ctx, run.hardware)
    return all(all(argv.get(u.key) is None for argv in composed) and u.value is not None
               and defaults.get(u.key) == u.value for u in units)


def _run_short(ctx: RecipeContext, sel: Selection, scope: str) -> bool:
    """Whether the estimate finds the KV cache of the recorded run
    (``run_selection``) short of one sequence in ``scope`` too: only then does
    the run contradict the estimate (``_kv_capacity_notice``)."""
    run = run_selection(ctx, sel)

    def short() -> bool:
        caps = build_commands(ctx, run, Notices(), lite=True)[1]
        return any(c.scope == scope and c.max_concurrency is not None and c.max_concurrency < 1 for c in caps)

    return ctx.cache("memo:run-short").get((run, scope), short)


def kv_memory_notice(ctx: RecipeContext, sel: Selection, commands: list[Command], notices: Notices) -> None:
    """Host memory a KV offload connector reserves, read from its own
    ``--kv-transfer-config`` (``cpu_bytes_to_use_per_rank``, bytes per GPU rank;
    ``cpu_bytes_to_use``, bytes in total) or from the option's server on each
    node (``lmcache_server_gib``), shown per node and for the cluster in GiB."""
    import json

    if not sel.kv_offload or not commands:
        return
    argv = commands[0].argv
    raw = next((argv[i + 1] for i, t in enumerate(argv[:-1]) if t == "--kv-transfer-config"), None)
    try:
        extra = json.loads(raw).get("kv_connector_extra_config", {}) if raw else {}
    except (ValueError, AttributeError):
        return
    hw = ctx.hw(sel.hardware)
    gib = 1024 ** 3
    label = ctx.kv_label(sel.kv_offload)
    if isinstance(extra.get("cpu_bytes_to_use_per_rank"), (int, float)):
        per_rank = extra["cpu_bytes_to_use_per_rank"] / gib
        # The GPU ranks the commands run, not the node's GPUs (idle ones reserve nothing).
        if sel.prefill:
            lays = [pool_layout(ctx, sel, p, sel.pool(p).mode, sel.pool(p).nodes) for p in POOLS]  # type: ignore[union-attr]
        else:
            lays = [layout_for(ctx, sel, sel.nodes)]
        ranks = sum(lay.used_per_node * lay.nodes for lay in lays)
        per_node = {lay.used_per_node for lay in lays}
        node_text = (f"{per_rank * next(iter(per_node)):g} GiB on each {hw.display_name} node ({next(iter(per_node))} rank"
                     f"{'s' if next(iter(per_node)) > 1 else ''})" if len(per_node) == 1 else f"on {hw.display_name} nodes")
        notices.add("info", "kv-host-memory",
                    f"{label} KV offload reserves {per_rank:g} GiB of host memory per GPU rank: {node_text}, "
                    f"{per_rank * ranks:g} GiB for the {ranks} rank{'s' if ranks > 1 else ''} of the deployment. "
                    "It moves KV cache, never weights.")
    elif isinstance(extra.get("cpu_bytes_to_use"), (int, float)):
        total = extra["cpu_bytes_to_use"] / gib
        notices.add("info", "kv-host-memory",
                    f"{label} KV offload uses {total:g} GiB of host memory in total across workers. It moves KV cache, never weights.")
    elif (server := lmcache_server_gib(ctx, sel)) is not None:
        nodes = pd_nodes(sel) if sel.prefill else sel.nodes * max(1, sel.instances)
        notices.add("info", "kv-host-memory",
                    f"{label} KV offload: the server on each {hw.display_name} node holds up to {server:g} GiB of "
                    f"host memory (its --l1-size-gb)" + (f", {server * nodes:g} GiB on the {nodes} nodes of the "
                                                         "deployment" if nodes > 1 else "")
                    + ". It moves KV cache, never weights.")


LAUNCH_ELSEWHERE: dict[str, str] = {
    "kv-cache-holds-one-sequence": "the KV-capacity notice of _capacity_of (composer.memory's estimate; issue 18 item 3)",
}
"""Launch rules whose notice another step of the plan owns (rule id → where),
so one fault is said once."""


def launch_notices(ctx: RecipeContext, sel: Selection, commands: list[Command], caps: list[CapacityCheck],
                   notices: Notices, plan_rules: bool = True) -> None:
    """vLLM 0.33.0's start-up checks (``composer.launch.check_selection``) on
    every command of the plan: each rule an error breaks (vLLM refuses to
    start) becomes an error notice ``launch-<rule>`` — the plan's status is
    then ``error`` — and each degraded start a warning that names its cost.
    Commands breaking the same rule with the same message share one notice
    that names them all. Data fields: ``rule``, ``values`` (the deciding
    flags and env vars the command sets), ``subject`` and ``key`` (the first
    of them and the recipe key path that set it, ``composer.layers``), ``fix``
    and ``source`` (vLLM file:lines)."""
    found = launch.check_selection(ctx, sel.to_dict(), commands, caps, plan_rules)
    groups: dict[tuple[str, str, str], list[launch.Violation]] = {}
    for v in found:
        if v.rule not in LAUNCH_ELSEWHERE:
            groups.setdefault((v.rule, v.message, v.fix), []).append(v)
    for (rule_id, message, fix), vs in groups.items():
        rule = launch.RULE[rule_id]
        cmds = [commands[v.command] for v in vs if v.command is not None and v.command < len(commands)]
        first = cmds[0] if cmds else None
        values, subject, key = _deciding(rule, first)
        labels = _failing_nodes(sel, cmds, commands)
        where = (", ".join(labels) + ": ") if len(commands) > 1 and labels else ""
        where = where[:1].upper() + where[1:]
        assumed = f" (Assumed: {vs[0].assumed}.)" if vs[0].assumed else ""
        if rule.level == "error":
            text = f"{where}vLLM {launch.VERSION} refuses to start: {message}{assumed} Fix: {fix}."
        else:
            text = f"{where}vLLM {launch.VERSION} starts, degraded: {message}{assumed} Cost: {rule.cost}. Fix: {fix}."
        notices.add(rule.level, f"launch-{rule_id}", text, subject=subject, rule=rule_id, values=values or None,
                    key=key, fix=fix, source=rule.source)


def _failing_nodes(sel: Selection, failing: list[Command], commands: list[Command]) -> list[str]:
    """Who breaks a rule, in words: the labels of the ``failing`` commands,
    with a pool (or a plain multi-node deployment) whose every node fails
    said once ("all 4 decode nodes", "both nodes"). A lean plan (``build_commands`` lite)
    builds only a pool's head and first follower; the other followers differ
    from it only by their rank, so a failing last-built follower stands for
    the rest ("Decode nodes 2–4 of 4"). Deployments with instances (TP + DP
    replicas) keep their labels."""
    labels = list(dict.fromkeys(c.label for c in failing))
    if any(c.label.startswith("Instance") for c in commands):
        return labels
    out: list[str] = []
    for pool in dict.fromkeys(c.pool for c in failing):
        mine = [c for c in failing if c.pool == pool]
        built = [c for c in commands if c.pool == pool and c.role != "router"]
        found = sel.pool(pool) if pool else None
        nodes = found.nodes if found is not None else sel.nodes
        noun = f"{pool} nodes" if pool else "nodes"
        first = 1 if pool else 0  # P/D labels count from 1 ("Decode node 1/4"), others from the head's 0
        ranks = {c.node_rank for c in mine}
        if nodes > 1 and ranks == {c.node_rank for c in built}:  # a lean plan builds a head and a follower
            out.append(f"both {noun}" if nodes == 2 else f"all {nodes} {noun}")
            continue
        last = max(c.node_rank for c in built)
        if len(built) < nodes and last in ranks and last >= 1:
            out.extend(dict.fromkeys(c.label for c in mine if c.node_rank != last))
            out.append(f"{noun.capitalize()} {last + first}–{nodes - 1 + first} of {nodes}" if pool else
                       f"Nodes {last}–{nodes - 1}")
            continue
        out.extend(dict.fromkeys(c.label for c in mine))
    return out


def _deciding(rule: launch.Rule, cmd: Command | None) -> tuple[tuple[tuple[str, str], ...], str | None, str | None]:
    """``(values, subject, key)`` of a rule on one command: each flag and env
    var of ``rule.flags`` the command sets with its value, the first of them
    a recipe layer set (else the first: the computed topology), and the key
    path (``FlagSource.key``) that set it."""
    if cmd is None:
        return (), None, None
    flags = {f.name: f for f in cmd.provenance}
    envs = {e.name: e for e in cmd.env_provenance}
    values: list[tuple[str, str]] = []
    keys: list[str] = []
    for name in rule.flags:
        if name in flags:
            f = flags[name]
            values.append((f.flag, f.value if f.value is not None else "on"))
            keys.append(f.key)
        elif name in envs:
            values.append((name, envs[name].value))
            keys.append(envs[name].key)
    if not values:
        return (), None, None
    i = next((i for i, k in enumerate(keys) if not k.startswith(TOPOLOGY_SOURCE)), 0)
    return tuple(values), values[i][0], keys[i]


def plan_error(ctx: RecipeContext, values: dict[str, str]) -> str | None:
    """The message of ``plan_error_notice(ctx, values)``, or None."""
    found = plan_error_notice(ctx, values)
    return found[1] if found else None


CAPACITY_CODES = frozenset({"capacity", "kv-capacity", "kv-capacity-disagrees"})
"""Notices that already say a replica's capacity: no generic ``capacity`` error is added beside them
(a ``kv-capacity-disagrees`` warning is a verified configuration the estimate doubts, not an error)."""


def capacity_errors(caps, notices: Notices) -> None:
    """A ``capacity`` error per replica that does not fit (``caps``: its
    ``CapacityCheck`` records), unless a notice of ``CAPACITY_CODES`` already
    says it. One rule for the plan (``plan_and_selection``) and for the
    controls' error check (``_plan_error``), so both see the same errors."""
    if any(n.code in CAPACITY_CODES for n in notices.items()):
        return
    for cap in caps:
        if not cap.fits:
            notices.add("error", "capacity", cap.message)

FALLBACK_ERRORS = frozenset({"capacity", "kv-capacity"})
"""Errors of a recommended strategy that ``working_values`` answers with
another strategy: the weights or one sequence's KV cache do not fit."""


def working_values(ctx: RecipeContext, values: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """``(values, None)``, or — when ``values`` (query parameters) name
    neither a strategy nor a node count (a node count asked for bounds the
    strategies: the recommendation reads it) and the recommended one's plan is a capacity error
    (``FALLBACK_ERRORS``) — ``values`` with the first other strategy of the
    recipe whose plan has no error, and that strategy's id. Order: those the
    recipe verified on this hardware, then the recipe's order; P/D is never
    chosen for the user, nor a strategy that drops a chosen feature, knob, KV
    offload or context. Found by a new user: Kimi K3 on H100 was disabled
    (Multi-node TP cannot hold a 1M-token sequence, TP+PP on 4 nodes can)."""
    values = dict(values)
    if "strategy" in values or "nodes" in values:
        return values, None
    err = _plan_error(ctx, values)
    if err is None or err[0] not in FALLBACK_ERRORS:
        return values, None
    from composer.canonical import resolved_with_notices

    sel, _ = resolved_with_notices(ctx, values)
    verified = [c.strategy for c in ctx.recipe.meta.verified_configs if c.hardware == sel.hardware]
    order = sorted((s for s in ctx.strategies if s != sel.strategy and ctx.strategy_block_reason(s, sel.hardware) is None
                    and ctx.strategy(s).deploy_type != "pd_cluster"), key=lambda s: s not in verified)
    def _warnings(v: dict[str, str]) -> set[str]:  # e.g. feature-unavailable: a chosen feature not emitted
        return {n.code for n in resolved_with_notices(ctx, v)[1] if n.level == "warning"}

    kept = ("variant", "features", "advanced", "kv_offload", "context", "form", "task", "modes", "cuda")
    for sid in order:
        alt = {**values, "strategy": sid}
        # never at the cost of a choice: a feature or knob the other strategy does not offer
        if _plan_error(ctx, alt) is None and _warnings(alt) <= _warnings(values) and all(
                getattr(resolved_selection(ctx, alt), k, None) == getattr(sel, k, None) for k in kept):
            return alt, sid
    return values, None


def plan_error_notice(ctx: RecipeContext, values: dict[str, str]) -> tuple[str, str] | None:
    """``(code, message)`` of the first error notice of the plan ``values``
    compose to (``working_values`` first), or None."""
    return _plan_error(ctx, working_values(ctx, values)[0])


FORM_FREE = "pip"
"""The output form ``_plan_error`` composes every selection with (its errors are the same in every form)."""


def _plan_error(ctx: RecipeContext, values: dict[str, str]) -> tuple[str, str] | None:
    """``(code, message)`` of the first error notice of the plan ``values``
    (query parameters) compose to, or None: the resolver's errors, then the
    commands' capacity and launch errors (``launch_notices``). Cached per
    recipe context and resolved selection (region ``plan-error``): the page's
    controls ask it for every option. For speed it composes the head and first
    follower of each group (``build_commands(lite=True)``) and checks the
    command rules only: the plan rules (a DP group's ranks) are the composer's
    own topology, which tests/test_launch_property.py checks on every composed
    plan. The output form (``install``) is not part of the key: it changes no
    argv, env, capacity or launch rule (the forms wrap the same commands;
    ``composer.launch.Target.install`` is read by no rule), so the page's
    "Run with" options cost no plan (tests/test_offered.py checks the errors
    of every form against its own composition)."""
    from composer.canonical import resolved_with_notices

    sel, items = resolved_with_notices(ctx, values)
    err = next(((n.code, n.message) for n in items if n.level == "error"), None)
    if err is not None:
        return err
    sel = replace(sel, form=FORM_FREE)
    return ctx.cache("plan-error").get(sel, lambda: lite_plan_error(ctx, sel))  # many queries resolve to one selection


def lite_plan_error(ctx: RecipeContext, sel: Selection) -> tuple[str, str] | None:
    """``(code, message)`` of the first capacity or launch error of ``sel``'s
    commands, composed lean (``build_commands(lite=True)``: the head and first
    follower of each group), or None; ``("argv", why)`` when they cannot be
    composed. Uncached: ``_plan_error`` keeps its answers."""
    notices = Notices()
    try:
        commands, caps = build_commands(ctx, sel, notices, lite=True)
    except ArgvError as e:
        return ("argv", str(e))
    capacity_errors(caps, notices)
    launch_notices(ctx, sel, commands, caps, notices, plan_rules=False)
    return next(((n.code, n.message) for n in notices.items() if n.level == "error"), None)


def build_plan(ctx: RecipeContext, query, every_form: bool = True) -> dict:
    """The plan for ``query`` (string, mapping or None) as JSON data: the
    ``composer.outputs.Plan`` contract (``to_json``).

    Keys: ``recipe``, ``selection``, ``commands`` (``role``, ``node_rank``, ``argv``,
    ``env``, ``text`` …), ``notices``, ``url`` (every dimension pinned, "" for
    a bare visit), ``share_url``, ``capacity``, ``verified``, ``status``
    (``ok``/``error``), ``summary``, ``output`` (the plan in its output form,
    ``composer.forms``) and ``kubernetes`` (the manifests, ``composer.k8s``;
    None unless ``every_form`` or the Kubernetes form is selected). Never raises for any query; a broken recipe raises
    ``ArgvError`` (caught by validation at build time).
    """
    return to_json(plan_and_selection(ctx, query, every_form=every_form)[0])


def page_selection(ctx: RecipeContext, query) -> tuple[Selection, Request]:
    """``(Selection, canonical Request)`` of the page for ``query`` (string,
    mapping or None), as ``plan_and_selection`` gives them, without composing
    the plan: what one control group needs (``composer.controls.group_options``;
    the build's public API asks each hardware's strategies)."""
    values, fallback = working_values(ctx, parse_query(query).values)
    sel = resolved_selection(ctx, values)
    canon = canonical_request(ctx, sel)
    return sel, (canon.with_values(strategy=None, nodes=None) if fallback is not None else canon)


def plan_and_selection(ctx: RecipeContext, query, every_form: bool = False) -> tuple[Plan, Selection, Request]:
    """``(Plan, Selection, canonical Request)`` for ``query``: the page builds
    its controls from the last two without resolving the query again.
    ``every_form``: every output form's structured result is added (the
    Kubernetes manifests: CLI, JSON API); otherwise only the selected form's,
    so a click on the page does not write YAML nobody sees."""
    req = parse_query(query)
    fallback = working_values(ctx, req.values)[1]
    if fallback is not None:
        recommended = resolved_selection(ctx, dict(req.values)).strategy
        before = _plan_error(ctx, dict(req.values))  # cached: working_values asked it
        req = req.with_values(strategy=fallback)
    sel, notices = resolve(ctx, req)
    if fallback is not None:
        said = before[1].split(". ")[0].rstrip(".") if before else "a capacity error"
        notices.add("info", "strategy-fallback",
                    f"{ctx.strategy_label(recommended)} (recommended on {ctx.hw(sel.hardware).display_name}) cannot "
                    f"serve here: {said}. {ctx.strategy_label(fallback)} is shown instead.", subject="strategy", old=recommended, new=fallback,
                    first=True)
    commands, caps = build_commands(ctx, sel, notices)
    capacity_errors(caps, notices)
    launch_notices(ctx, sel, commands, caps, notices)
    kv_memory_notice(ctx, sel, commands, notices)
    summary_text = summary(ctx, sel, commands)
    comps = run.companions(ctx, sel)
    form = FORMS[sel.form]
    host_network = len([c for c in commands if c.role != "router"]) > 1 or bool(comps)
    for i, c in enumerate(commands):
        d = run.docker_argv(ctx, sel, c, host_network)
        c = replace(c, docker_argv=tuple(d) if d else None, docker_text=run.docker_text(d) if d else None)
        text = form.command_text(c)
        venv = form.vllm_from == "host" and c.argv[:1] == ("vllm",)  # the Install steps' .venv (run_forms.VENV_LINES)
        commands[i] = replace(c, text=text, script=run.script(summary_text, c, text, venv=venv))
    canon, pinned_req = canonical_request(ctx, sel), pinned_request(ctx, sel)
    if fallback is not None:
        # The fallback's strategy and node count are derived, not chosen: the
        # address and the options' queries leave them out, so the link
        # recomputes them (the same plan) and a click elsewhere (another
        # hardware) gets that hardware's recommendation instead of keeping a
        # strategy nobody picked (a fresh user's finding: K3 H100 → B300 kept TP+PP).
        canon, pinned_req = (r.with_values(strategy=None, nodes=None) for r in (canon, pinned_req))
    # The address bar pins every dimension once the query asks for anything
    # (a choice, or a link); a bare visit keeps its bare URL (composer.canonical).
    pinned = pinned_req.query()
    shown = pinned if canon.values or req.values else ""
    run.install_notices(ctx, sel, notices)
    status = "error" if notices.has_error() else "ok"
    inp = FormInput(ctx, sel, tuple(commands), tuple(comps), tuple(caps), summary_text, status == "error")
    extra = forms.details(inp, every_form)
    client = run.client_checks(ctx, sel, commands)
    output = forms.output(sel.form, inp, extra.get(form.plan_key) if form.plan_key else None)
    plan = Plan(
        recipe=RecipeRef(ctx.recipe_id, ctx.recipe.meta.title, ctx.model_id(sel.variant, sel.task)),
        selection=sel.to_dict(), summary=summary_text, install=run.install(ctx, sel, comps, commands), companions=tuple(comps),
        client=client, status=status,
        commands=tuple(commands) if status == "ok" else (), blocked_commands=tuple(commands) if status == "error" else (),
        notices=tuple(notices.items()), capacity=tuple(caps), **verification(ctx, sel),
        url=("?" + shown) if shown else "", query=shown, share_url="?" + pinned, checkpoint=checkpoint(ctx, sel),
        kubernetes=_manifests(extra.get("kubernetes")), placeholders=_placeholders(commands, comps, client, form,
                                                                               output.reason is None, colocated(sel)),
        output=output)
    return plan, sel, canon


def _manifests(value: object) -> Manifests | None:
    """The Kubernetes form's structured result, typed for the plan."""
    return value if isinstance(value, Manifests) else None


def _placeholders(commands, comps, client, form, has_files: bool, shared: bool = False):
    """The placeholders panel (``composer.placeholders``) of the shown texts,
    each meaning followed by what the output ``form`` says of it
    (``OutputForm.placeholder_note``); a name the form's files set themselves
    (``OutputForm.panel_skips``) only when a companion or a client check uses it.
    Both only when the form wrote its files (``has_files``): where it gives a
    reason instead (SLURM with several instances), the commands run by hand and
    need every value (an adversarial finding: the notes named a router.sbatch
    that was not written). ``shared``: both P/D pools on one node, so
    ``DECODE_NODE_1`` takes ``PREFILL_NODE_1``'s value while it has none of its
    own (a fresh user's finding: the router script stopped at "set
    DECODE_NODE_1 first" after the one address was given)."""
    outside = [c.command for c in comps] + [client.curl, client.bench]
    texts = [c.text for c in commands] + outside
    in_commands = {p.name for p in placeholders([c.text for c in commands])}
    used_outside = {p.name for p in placeholders(outside)}
    out = []
    for p in placeholders(texts):
        if has_files and form.panel_skips(p.name) and p.name not in used_outside:
            continue
        note = form.placeholder_note(p.name, p.name in in_commands) if has_files else None
        if shared and p.name == "DECODE_NODE_1":
            p = replace(p, meaning="IP address of the node both pools share: the prefill pool's, unless you give "
                                   "another here.", example=describe("PREFILL_NODE_1")[1], same_as="PREFILL_NODE_1")
        out.append(replace(p, meaning=f"{p.meaning} {note}") if note else p)
    return tuple(out)


def checkpoint(ctx: RecipeContext, sel: Selection) -> Checkpoint:
    """The selected variant and the checkpoint it serves, with its Hugging Face
    page (``https://huggingface.co/<model id>``; none for a local path)."""
    from urllib.parse import quote

    model_id = ctx.model_id(sel.variant, sel.task)
    url = None if model_id.startswith("/") else f"https://huggingface.co/{quote(model_id)}"
    return Checkpoint(sel.variant, ctx.variant_label(sel.variant), ctx.variant(sel.variant).description, model_id, url)


__all__ = ["build_plan", "ArgvError"]
