"""Flag identity and last-writer-wins composition of vLLM argv, with provenance.

vLLM parses its CLI with argparse, where ``--max-num-seqs 8``, ``--max-num-seqs=8``
and ``--max_num_seqs 8`` are the same option, ``-tp`` is short for
``--tensor-parallel-size``, and ``--x`` / ``--no-x`` are the two settings of one
boolean (``argparse.BooleanOptionalAction``). The upstream composer keyed its
dedupe on the literal token and so emitted both spellings or both booleans
(upstream-recipe-semantics.md §16 W1–W5). Here one *flag identity* covers all of
them, and a later layer replaces an earlier one per identity (seed: "a later
layer wins"), recording what it replaced. Environment variables follow the same
rule per name (``EnvBuilder``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Mapping

from composer import vllm_cli
from composer.cache import MODULE_BOUNDS

if TYPE_CHECKING:
    from composer.keypaths import KeyPath

_FLAG_RE = re.compile(r"^--?[A-Za-z][A-Za-z0-9_.\-]*(=.*)?\Z", re.S)
_NUMBER_RE = re.compile(r"^-\d+(\.\d+)?([eE][-+]?\d+)?\Z")


class ArgvError(ValueError):
    """A token list that cannot be read as flags and values (e.g. a stray positional)."""


def _looks_like_option(value: str) -> bool:
    """Whether a value standing alone in argv would be read as an option
    (``composer.positions.check(value, "option")``)."""
    from composer.positions import check

    return value.startswith("-") and check(value, "option") is not None


def is_flag_token(token: str) -> bool:
    """True if ``token`` is a flag (``--x``, ``-x``, ``--x=v``), not a value like ``-1``."""
    return bool(_FLAG_RE.match(token)) and not _NUMBER_RE.match(token)


def canonical_name(flag: str) -> tuple[str, bool | None]:
    """Map a flag token (without ``=value``) to ``(canonical name, boolean sense)``.

    Spellings resolve exactly as vLLM's parser resolves them (the table of
    ``composer.vllm_cli``, generated from the pinned release): ``--no-enable-x``
    → ``("enable-x", False)``; ``--enable-x`` → ``("enable-x", None)`` (the
    caller decides whether a value follows); ``-tp`` →
    ``("tensor-parallel-size", None)``; ``-cc.a.b`` → ``("compilation-config.a.b", None)``.
    A short spelling vLLM does not accept is kept as written (``-xyz``), never
    rewritten into a long one, so the lint reports it; an unknown long option
    keeps its name (dashes for underscores) and is reported too.
    """
    known, sense = vllm_cli.canonical(flag)
    if known is not None:
        return known, sense
    if not flag.startswith("--"):
        return flag, None
    name = flag[2:]
    # Dotted sub-keys (--attention-config.backend=x) keep their dots.
    head, dot, tail = name.partition(".")
    head = head.replace("_", "-")
    name = head + dot + tail
    if name.startswith("no-") and len(name) > 3:
        return name[3:], False
    return name, None


@dataclass(frozen=True)
class Unit:
    """One option as it appears in argv: a flag with a value, or a boolean.

    ``value`` is the string value, or ``None`` for a boolean, whose sense is
    ``enabled`` (``--x`` → True, ``--no-x`` → False).
    """

    key: str
    value: str | None = None
    enabled: bool = True

    def tokens(self) -> list[str]:
        """The argv tokens of this unit in canonical spelling (a spelling vLLM
        does not know, ``-xyz``, as written). A value that would not fit an
        option's value position on its own (``composer.positions``: it starts
        with ``-`` and is no number) is attached with ``=`` (``--x=-y``), as
        argparse reads it, so it can never become an option of its own."""
        flag = self.key if self.key.startswith("-") else None
        if self.value is None:
            if flag is not None:
                return [flag]
            return ["--" + self.key if self.enabled else "--no-" + self.key]
        flag = flag or "--" + self.key
        if _looks_like_option(self.value):
            return [f"{flag}={self.value}"]
        return [flag, self.value]

    def display(self) -> str:
        return " ".join(self.tokens())


def parse_tokens(tokens: Sequence[str]) -> list[Unit]:
    """Group argv tokens into units (cached: recipes repeat the same lists).

    See ``_parse_tokens``; raises ArgvError.
    """
    try:
        key = tuple(tokens)
    except TypeError:
        return _parse_tokens(tokens)
    return list(_parse_cached(key))


@lru_cache(maxsize=MODULE_BOUNDS["argv._parse_cached"])
def _parse_cached(tokens: tuple) -> tuple[Unit, ...]:
    return tuple(_parse_tokens(list(tokens)))


def _parse_tokens(tokens: Sequence[str]) -> list[Unit]:
    """Group argv tokens into units.

    A flag followed by a token that is not a flag (numbers like ``-1`` count as
    values) takes it as its value; ``--f=v`` carries its value inline. A value
    token with spaces stays one value (the shell quoting is done at rendering).

    Raises ArgvError for a token that is neither a flag nor a flag's value.
    """
    units: list[Unit] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not isinstance(tok, str):
            raise ArgvError(f"argv token {tok!r} is not a string")
        if not is_flag_token(tok):
            raise ArgvError(
                f"{tok!r} is not a flag and does not follow one "
                f"(write values right after their flag, e.g. '--flag', 'value')"
            )
        if re.match(r"^-O=?[0-9a-z]", tok):  # vLLM's parser: -O3 / -O=3 is --optimization-level 3
            units.append(Unit("optimization-level", tok[2:].lstrip("=")))
            i += 1
            continue
        flag, eq, inline = tok.partition("=")
        name, sense = canonical_name(flag)
        if eq:
            units.append(Unit(name, inline))
            i += 1
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is not None and sense is None and not is_flag_token(nxt):
            units.append(Unit(name, nxt))
            i += 2
        else:
            units.append(Unit(name, None, sense is not False))
            i += 1
    return units


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value after the last ``flag`` token of a composed argv, or None."""
    found = None
    for i, tok in enumerate(argv[:-1]):
        if tok == flag:
            found = argv[i + 1]
    return found


@dataclass(frozen=True)
class Source:
    """Where a value came from: a seed layer name and the recipe key path.

    ``path`` is the same key as a typed value (pattern and holes,
    ``composer.keypaths``) when the layer table made it; Explain words it
    without parsing ``key`` back. It takes no part in equality.
    """

    layer: str
    key: str
    path: KeyPath | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        return {"layer": self.layer, "key": self.key}


@dataclass
class Entry:
    """A flag in force: its unit, where it came from, and what it replaced
    (``(unit, source)``, oldest first)."""

    unit: Unit
    source: Source
    replaced: list[tuple[Unit, Source]] = field(default_factory=list)


@dataclass
class EnvEntry:
    """An environment variable in force: value, source, and what it replaced
    (``(value, source)``, oldest first)."""

    value: str
    source: Source
    replaced: list[tuple[str, Source]] = field(default_factory=list)


def _put(entries: dict, key: str, entry, held) -> None:
    """The one ordering rule of argv and env: a later layer's entry replaces an
    earlier one with the same identity (flag identity, variable name) *in
    place*, recording ``(held(old), old.source)`` in its ``replaced`` chain; a
    new identity goes last. Upstream moved a replaced flag to the end (W7), so
    re-setting a value reordered the command; here it never does."""
    old = entries.get(key)
    if old is not None:
        entry.replaced = old.replaced + [(held(old), old.source)]
    entries[key] = entry  # assigning an existing key keeps its position


class ArgvBuilder:
    """Accumulates units layer by layer; a later unit replaces an earlier one with
    the same flag identity in place (``_put``).
    """

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def add(self, units: list[Unit], source: Source) -> None:
        for unit in units:
            _put(self._entries, unit.key, Entry(unit, source), lambda e: e.unit)

    def add_tokens(self, tokens: Sequence[str], source: Source) -> None:
        self.add(parse_tokens(tokens), source)

    def remove(self, key: str) -> Entry | None:
        return self._entries.pop(key, None)

    def get(self, key: str) -> Entry | None:
        return self._entries.get(key)

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def tokens(self) -> list[str]:
        out: list[str] = []
        for e in self._entries.values():
            out.extend(e.unit.tokens())
        return out

    def copy(self) -> "ArgvBuilder":
        b = ArgvBuilder()
        b._entries = {k: Entry(e.unit, e.source, list(e.replaced)) for k, e in self._entries.items()}
        return b


class EnvBuilder:
    """Environment with last-writer-wins per name and provenance; a replaced
    variable keeps its place (``_put``, the rule of ``ArgvBuilder``)."""

    def __init__(self) -> None:
        self.entries: dict[str, EnvEntry] = {}

    def add(self, env: Mapping[str, str], source: Source) -> None:
        for k, v in env.items():
            _put(self.entries, k, EnvEntry(v, source), lambda e: e.value)

    def values(self) -> dict[str, str]:
        return {k: e.value for k, e in self.entries.items()}
