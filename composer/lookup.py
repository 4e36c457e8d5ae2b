"""One rule for every hardware-keyed map of a recipe.

Upstream used seven different key-resolution rules (semantics §3.4, weakness
W44). Here every hardware-keyed map accepts the same keys: the exact hardware
id (``b300``), the generation (``blackwell``), the brand in lower case
(``nvidia``) and ``default``.

* A *value* lookup (a gate, a TP size, a node count) takes the most specific key
  present: id → generation → brand → default.
* A *block* lookup (args/env overrides) applies every key present, from the
  least to the most specific, so an exact-id block refines a generation block
  instead of being beaten by it (upstream W8/W9).
"""

from __future__ import annotations

from typing import Mapping, TypeVar

from composer.schema import HardwareProfile

T = TypeVar("T")


def hardware_keys(hw_id: str, hw: HardwareProfile) -> list[str]:
    """Keys for ``hw`` from most to least specific: id, generation, brand, default."""
    keys = [hw_id]
    if hw.gen and hw.gen not in keys:
        keys.append(hw.gen)
    brand = hw.brand.lower()
    if brand and brand not in keys:
        keys.append(brand)
    keys.append("default")
    return keys


def lookup_value(mapping: Mapping[str, T] | None, hw_id: str, hw: HardwareProfile) -> tuple[str, T] | None:
    """``(key, value)`` of the most specific key present in ``mapping``, or None."""
    if not mapping:
        return None
    for key in hardware_keys(hw_id, hw):
        if key in mapping:
            return key, mapping[key]
    return None


def lookup_blocks(mapping: Mapping[str, T] | None, hw_id: str, hw: HardwareProfile) -> list[tuple[str, T]]:
    """Every ``(key, block)`` present, least specific first (``default`` excluded
    unless present, then first)."""
    if not mapping:
        return []
    return [(k, mapping[k]) for k in reversed(hardware_keys(hw_id, hw)) if k in mapping]


def hw_value(value, hw_id: str, hw: HardwareProfile):
    """A number-or-hardware-map (``variant.tp``, role ``nodes``) resolved for ``hw``."""
    if value is None or isinstance(value, (int, float)):
        return value
    found = lookup_value(value, hw_id, hw)
    return found[1] if found else None
