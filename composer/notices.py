"""Notices: what the plan tells a person besides the commands.

Each notice has a level (``info``, ``warning``, ``error``), a stable ``code`` that
tests and scripts can match on, and a message a person understands.
"""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("info", "warning", "error")


@dataclass(frozen=True)
class Notice:
    level: str
    code: str
    message: str

    def to_dict(self) -> dict:
        return {"level": self.level, "code": self.code, "message": self.message}


class Notices:
    """An ordered, de-duplicated list of notices."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Notice] = {}

    def add(self, level: str, code: str, message: str) -> None:
        assert level in LEVELS, level
        message = message[:1].upper() + message[1:]
        self._items.setdefault((code, message), Notice(level, code, message))

    def extend(self, other: "Notices") -> None:
        for n in other.items():
            self.add(n.level, n.code, n.message)

    def items(self) -> list[Notice]:
        return list(self._items.values())

    def has_error(self) -> bool:
        return any(n.level == "error" for n in self._items.values())
