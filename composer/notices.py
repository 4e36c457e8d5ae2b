"""Notices: what the plan tells a person besides the commands.

Each notice has a level (``info``, ``warning``, ``error``), a stable ``code`` that
tests and scripts can match on, and a message a person understands. Notices
about an adjusted value also carry it as data: ``subject`` (the query parameter
or flag), ``old`` and ``new`` values and the ``reason``, so nothing parses the
prose back into data. A notice of vLLM's start-up checks (``launch-<rule>``,
``composer.launch``) also carries the ``rule`` id, the ``values`` of the flags
that decide it, the recipe ``key`` path that set the first of them, the
``fix`` and the vLLM ``source`` lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

LEVELS = ("info", "warning", "error")


@dataclass(frozen=True)
class Fix:
    """One change that resolves a notice: its ``label`` and the canonical
    ``query`` (without ``?``) of the plan with it."""

    label: str
    query: str


@dataclass(frozen=True)
class Notice:
    """One notice. ``subject``/``old``/``new``/``reason`` are None unless the
    notice reports a changed value (e.g. ``nodes-raised``: subject ``nodes``,
    old 2, new 3, reason why 2 does not work)."""

    level: str
    code: str
    message: str
    subject: Optional[str] = None
    old: Optional[str] = None
    new: Optional[str] = None
    reason: Optional[str] = None
    rule: Optional[str] = None
    values: Optional[tuple[tuple[str, str], ...]] = None
    """``(flag or env var, value)`` pairs in force, e.g. ``(("--tensor-parallel-size", "12"),)``."""
    key: Optional[str] = None
    fix: Optional[str] = None
    source: Optional[str] = None
    fixes: tuple[Fix, ...] = ()
    """Changes that resolve it, each one click on the page (``Fix``)."""
    per_count: tuple[tuple[int, str], ...] = ()
    """``nodes-raised``/``nodes-lowered``: ``(node count, why it does not
    work)`` for each count the notice passes over, so a node-count option says
    its own reason without reading the prose back (``canonical.raise_reason``).
    Not part of the JSON form: ``reason`` says the same in words."""

    def to_dict(self) -> dict:
        """The JSON form: level, code, message, plus the data fields that are
        set (``values`` as an object flag → value)."""
        d: dict = {"level": self.level, "code": self.code, "message": self.message}
        for k in ("subject", "old", "new", "reason", "rule", "values", "key", "fix", "source"):
            v = getattr(self, k)
            if v is not None:
                d[k] = dict(v) if k == "values" else v
        if self.fixes:
            d["fixes"] = [{"label": f.label, "query": f.query} for f in self.fixes]
        return d


def lower_first(text: str) -> str:
    """A sentence continued after a colon or "but": ``text`` with its first
    letter lower-cased unless its first word is a name or an abbreviation
    (``TP 40 …``, ``vLLM …``, ``H100 …``), as ``Notices.add`` upper-cases a
    message's first letter. "The weights do not fit" → "the weights do not fit"."""
    head = text.split(" ", 1)[0]
    if not text or head.startswith("vLLM") or any(ch.isupper() or ch.isdigit() for ch in head[1:]):
        return text
    return text[0].lower() + text[1:]


class Notices:
    """An ordered, de-duplicated list of notices."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Notice] = {}

    def add(self, level: str, code: str, message: str, *, subject: str | None = None,
            old=None, new=None, reason: str | None = None, rule: str | None = None,
            values: tuple[tuple[str, str], ...] | None = None, key: str | None = None,
            fix: str | None = None, source: str | None = None,
            fixes: tuple[Fix, ...] = (), first: bool = False,
            per_count: tuple[tuple[int, str], ...] = ()) -> None:
        """Add a notice (a second one with the same code and message is dropped);
        ``old``/``new`` are stored as strings. ``first``: put it before the
        others (a notice that explains the ones after it, e.g. the strategy
        shown instead of the recommended one, before that strategy's node count)."""
        assert level in LEVELS, level
        if not message.startswith("vLLM"):  # a proper name keeps its case
            message = message[:1].upper() + message[1:]
        item = (code, message)
        if item in self._items:
            return
        notice = Notice(level, code, message, subject, None if old is None else str(old), None if new is None else str(new),
                        reason, rule, values, key, fix, source, tuple(fixes), tuple(per_count))
        if first:
            self._items = {item: notice, **self._items}
        else:
            self._items[item] = notice

    def items(self) -> list[Notice]:
        return list(self._items.values())

    def extend(self, notices) -> None:
        """Append ``notices`` (``Notice`` values, e.g. a cached step's), each
        unless one with its code and message is here already: the same list
        as adding them one by one (none of them ``first``)."""
        for notice in notices:
            self._items.setdefault((notice.code, notice.message), notice)

    def has_error(self) -> bool:
        return any(n.level == "error" for n in self._items.values())
