"""Recipe key paths as typed values: a pattern with named holes, and a path
that fills them.

A pattern is written the way the recipe format is documented —
``variants.<variant>.hardware_overrides.<hw>.extra_args`` — and its last
segment names the field of the block it reads (``extra_args``). The layer
table (``composer.layers``) declares every pattern once; composing a command,
the every-key walk that validation and the lint use, and Explain's words for a
key (``composer.plan.describe_key``) all go through the same values, so no
module spells a key path of its own and none parses one back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

_HOLE = re.compile(r"<([a-z_]+)>")

Kind = Literal["args", "env", "units"]
"""What a key holds: an argv token list, an env mapping, or units the
composer computed (the topology)."""

Subject = Literal["base", "variant", "recipe", "strategy_override"]
"""Whose settings a key is, for Explain's words (``plan.describe_key``); a
pattern without one (strategy templates, KV offload, the composer's own) is
described by its seed layer alone."""


@dataclass(frozen=True)
class KeyPattern:
    """One key path pattern, e.g. ``strategy_overrides.<strategy>.<role>.env``.

    ``kind`` is what the key holds (``patterns`` reads it from the field
    name); ``subject`` is whose settings it is (Explain).
    """

    text: str
    subject: Subject | None = None
    kind: Kind = "args"
    parts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    field_name: str = field(init=False, repr=False, compare=False)
    """The block field the pattern reads: its last segment (``extra_args``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(_HOLE.split(self.text)))
        object.__setattr__(self, "field_name", re.split(r"[./]", self.text)[-1])

    @property
    def holes(self) -> tuple[str, ...]:
        """The names of the holes, in order (``("variant", "hw")``)."""
        return self.parts[1::2]

    def path(self, **values: str) -> KeyPath:
        """This pattern with its holes filled; raises KeyError for a missing hole."""
        return KeyPath(self, tuple((h, str(values[h])) for h in self.holes))


@dataclass(frozen=True)
class KeyPath:
    """A recipe key path: a pattern and the values of its holes, e.g.
    ``variants.fp8.extra_env`` = pattern ``variants.<variant>.extra_env`` with
    ``variant=fp8``. ``text`` is what Explain, the lint and validation show."""

    pattern: KeyPattern
    values: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        return self._join(self.pattern.parts)

    def get(self, hole: str) -> str | None:
        """The value of ``hole``, or None when the pattern has no such hole."""
        return dict(self.values).get(hole)

    @property
    def kind(self) -> Kind:
        return self.pattern.kind

    def upto(self, hole: str) -> str:
        """The key path up to and including ``hole``'s value: the block of
        ``hardware_overrides.hopper.extra_args`` is ``hardware_overrides.hopper``
        (``upto("hw")``); raises ValueError when the pattern has no such hole."""
        parts = self.pattern.parts
        holes = parts[1::2]
        return self._join(parts[:2 * holes.index(hole) + 2])

    def _join(self, parts: tuple[str, ...]) -> str:
        return _joined(parts, self.values)

    def __str__(self) -> str:
        return self.text


@lru_cache(maxsize=4096)  # every composed command names each layer's key path: a few hundred distinct ones
def _joined(parts: tuple[str, ...], values: tuple[tuple[str, str], ...]) -> str:
    """``parts`` (literal text and hole names alternating) with the holes filled from ``values``."""
    vals = dict(values)
    return "".join(p if i % 2 == 0 else vals[p] for i, p in enumerate(parts))


def patterns(prefix: str, *fields: str, subject: Subject | None = None) -> tuple[KeyPattern, ...]:
    """``prefix.<field>`` for each field, with the kind read from the field name
    (``…env`` → env, otherwise args): ``patterns("variants.<variant>",
    "extra_args", "extra_env")``."""
    return tuple(KeyPattern(f"{prefix}.{f}" if prefix else f, subject, "env" if f.endswith("env") else "args")
                 for f in fields)
