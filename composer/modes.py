"""Feature modes: single-select methods of one feature (``features.<id>.modes``),
e.g. speculative decoding by MTP, EAGLE-3 or DSpark.

Rules (semantics §7.2): a mode is available when the variant is in its
``variants`` list (when it has one) and its ``hardware`` map (keyed by hardware
id, generation or brand, most specific first) does not say ``unsupported``. The
mode in force is the first available of: the person's pick (``fmode=``), the
variant's ``default_modes``, the feature's ``default_mode``, the first
available mode. Unlike the public site, a pick or a default that cannot be used
is reported (``composer.resolve``), never swapped silently.
"""

from __future__ import annotations

from composer.context import RecipeContext


def moded_features(ctx: RecipeContext) -> list[str]:
    """Ids of the recipe's features that have modes, in recipe order."""
    return [fid for fid, f in ctx.recipe.features.items() if f.modes]


def mode_label(ctx: RecipeContext, fid: str, mode: str) -> str:
    """A mode's label (``label``, else its id in capitals: ``mtp`` → ``MTP``)."""
    m = (ctx.recipe.features[fid].modes or {}).get(mode)
    return (m.label if m and m.label else mode.upper())


def mode_block_reason(ctx: RecipeContext, fid: str, mode: str, hw_id: str, variant_id: str) -> str | None:
    """Why ``mode`` of feature ``fid`` cannot be used with this variant on this
    hardware, or None. Sources: the mode's ``variants`` and ``hardware`` keys."""
    from composer.lookup import lookup_value

    m = (ctx.recipe.features[fid].modes or {})[mode]
    label = mode_label(ctx, fid, mode)
    if m.variants is not None and variant_id not in m.variants:
        return f"{label} is not offered for the {ctx.variant_label(variant_id)} checkpoint."
    hw = ctx.hw(hw_id)
    gate = lookup_value(m.hardware, hw_id, hw)
    if gate and gate[1] == "unsupported":
        return f"{label} is not supported on {hw.display_name}."
    return None


def available_modes(ctx: RecipeContext, fid: str, hw_id: str, variant_id: str) -> list[str]:
    """Modes of ``fid`` usable with this variant and hardware, in recipe order."""
    return [m for m in (ctx.recipe.features[fid].modes or {}) if mode_block_reason(ctx, fid, m, hw_id, variant_id) is None]


def preferred_mode(ctx: RecipeContext, fid: str, variant_id: str) -> str | None:
    """The mode the recipe prefers, before hardware is considered: the variant's
    ``default_modes`` entry, else the feature's ``default_mode``, else None."""
    return ctx.variant(variant_id).default_modes.get(fid) or ctx.recipe.features[fid].default_mode


def default_mode(ctx: RecipeContext, fid: str, hw_id: str, variant_id: str) -> str:
    """The mode used when the person picked none: the preferred mode when it is
    available here, else the first available mode, else the first mode (the
    feature then cannot run here; ``composer.resolve`` says so)."""
    allowed = available_modes(ctx, fid, hw_id, variant_id)
    f = ctx.recipe.features[fid]
    for cand in (ctx.variant(variant_id).default_modes.get(fid), f.default_mode):
        if cand in allowed:
            return cand
    return allowed[0] if allowed else next(iter(f.modes or {}))


def parse_fmode(raw: str | None) -> tuple[dict[str, str], list[str]]:
    """``"feat:mode,feat2:mode"`` → ``({feat: mode}, [malformed items])``.
    The first value given for a feature wins."""
    picks: dict[str, str] = {}
    bad: list[str] = []
    for item in (raw or "").split(","):
        if not item:
            continue
        fid, sep, mode = item.partition(":")
        if not sep or not fid or not mode:
            bad.append(item)
        else:
            picks.setdefault(fid, mode)
    return picks, bad


def format_fmode(modes: dict[str, str] | tuple[tuple[str, str], ...]) -> str:
    """The ``fmode`` value for ``{feature: mode}`` (the public site's format)."""
    items = modes.items() if isinstance(modes, dict) else modes
    return ",".join(f"{f}:{m}" for f, m in items)
