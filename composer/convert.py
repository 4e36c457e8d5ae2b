"""Rebuild ``composer.schema`` dataclasses from already-validated JSON, without pydantic.

The build validates every recipe with pydantic (``composer.buildtime.validate``) and
writes it as JSON (``validate.dump``); the browser, which ships no pydantic,
turns that JSON back into the same dataclasses with ``from_json``. It trusts
its input the way a deserializer of our own output may: it follows the type
hints (dataclasses, ``tuple[X, ...]``, ``Mapping[str, X]``, ``Optional`` and
``Union``), keeps scalars as they are, and fills missing keys with the
dataclass defaults. A ``tests/test_convert.py`` property checks that
``from_json(T, dump(T, x)) == x`` for every recipe we build.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from functools import lru_cache

from composer.cache import MODULE_BOUNDS
from typing import Any, Union, get_args, get_origin


@lru_cache(maxsize=MODULE_BOUNDS["convert._fields"])
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)  # Annotated markers stripped
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def from_json(tp: Any, value: Any) -> Any:
    """``value`` (JSON data: dicts, lists, scalars) as an instance of type ``tp``.

    Raises ``TypeError`` when a required dataclass field is missing (the JSON
    was not written by the build)."""
    if value is None:
        return None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, Mapping):
            return value
        kwargs = {name: from_json(hint, value[name]) for name, hint in _fields(tp) if name in value}
        return tp(**kwargs)
    origin = get_origin(tp)
    if origin is Union or (origin is not None and origin.__class__.__name__ == "UnionType"):
        return _from_union(get_args(tp), value)
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(value, (list, tuple)):
            return value
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in value)
        return tuple(from_json(a, v) for a, v in zip(args, value))
    if origin in (Mapping, dict):
        args = get_args(tp)
        if not isinstance(value, Mapping) or not args:
            return value
        return {k: from_json(args[1], v) for k, v in value.items()}
    if origin is list:
        return [from_json(get_args(tp)[0], v) for v in value] if isinstance(value, list) else value
    return value


def _from_union(members: tuple, value: Any) -> Any:
    """The first member whose JSON shape matches ``value`` (object → dataclass or
    mapping, array → tuple), else the value unchanged (a scalar member)."""
    for m in members:
        if m is type(None):
            continue
        if dataclasses.is_dataclass(m) and isinstance(value, Mapping):
            return from_json(m, value)
        origin = get_origin(m)
        if origin in (Mapping, dict) and isinstance(value, Mapping):
            return from_json(m, value)
        if origin is tuple and isinstance(value, (list, tuple)):
            return from_json(m, value)
    return value
