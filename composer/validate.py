"""Recipe checks beyond the schema: every arg list must parse into flags and
values, and no single list may contradict itself (the same flag identity twice,
e.g. ``--x`` with ``--no-x`` or ``--f 1`` with ``--f=2``). Errors name the recipe
key path of the list (mkdocs-style: all problems collected, none raised).
"""

from __future__ import annotations

from composer.argv import ArgvError, parse_tokens
from composer.schema import Recipe


def arg_lists(recipe: Recipe):
    """Yield ``(key path, tokens)`` for every argv list a recipe declares."""
    yield "model.base_args", recipe.model.base_args
    for vid, v in recipe.variants.items():
        yield f"variants.{vid}.extra_args", v.extra_args
        for hk, b in v.hardware_overrides.items():
            yield f"variants.{vid}.hardware_overrides.{hk}.extra_args", b.extra_args
    for hk, b in recipe.hardware_overrides.items():
        yield f"hardware_overrides.{hk}.extra_args", b.extra_args
    for sid, so in recipe.strategy_overrides.items():
        yield f"strategy_overrides.{sid}.extra_args", so.extra_args
        yield f"strategy_overrides.{sid}.vllm_args", so.vllm_args
        for hk, b in so.hardware_overrides.items():
            yield f"strategy_overrides.{sid}.hardware_overrides.{hk}.extra_args", b.extra_args
        for role in ("prefill", "decode"):
            r = getattr(so, role)
            if r is None:
                continue
            yield f"strategy_overrides.{sid}.{role}.vllm_args", r.vllm_args
            yield f"strategy_overrides.{sid}.{role}.extra_args", r.extra_args
            for hk, b in r.hardware_overrides.items():
                yield f"strategy_overrides.{sid}.{role}.hardware_overrides.{hk}.extra_args", b.extra_args
    for fid, f in recipe.features.items():
        yield f"features.{fid}.args", f.args
        for hk, b in f.hardware_overrides.items():
            yield f"features.{fid}.hardware_overrides.{hk}.args", b.args
        for mk, m in (f.modes or {}).items():
            yield f"features.{fid}.modes.{mk}.args", m.args
            for hk, b in m.hardware_overrides.items():
                yield f"features.{fid}.modes.{mk}.hardware_overrides.{hk}.args", b.args
    for i, opt in enumerate(recipe.advanced_options):
        yield f"advanced_options[{i}].args", opt.args


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
        seen = {}
        for u in units:
            if u.key in seen and seen[u.key] != u:
                problems.append((key, f"sets --{u.key} twice with different values "
                                      f"({seen[u.key].display()!r} and {u.display()!r}); keep one"))
            seen[u.key] = u
    return problems
