"""The page/CLI query string: parsing into a ``Request`` and writing it back.

The parameters, their kinds and their order are declared once in
``composer.dimensions``; this module only reads and writes them.

A request holds only what the query *asked for*; nothing here checks the values
against a recipe (that is ``composer.resolve``). A hostile query cannot raise:
oversized or malformed values are dropped and reported as notices.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping
from urllib.parse import parse_qsl, urlencode

from composer.dimensions import INT_PARAMS, LIST_PARAMS, PARAMS, VIEW_PARAMS

SCHEMA_VERSION = "2"
"""Value of the ``v=`` parameter written by this composer. Version 2 links pin
every dimension (``composer.canonical.pinned_request``); version 1 links
(parameters equal to the recipe default omitted) are read the same way, so
they keep opening what they opened: the recipe's default where they are silent."""
KNOWN_VERSIONS = ("1", "2")

MAX_VALUE_LEN = 512
MAX_QUERY_LEN = 8192


@dataclass(frozen=True)
class Request:
    """What a query asks for. ``None`` means "not given" (use the recipe default).

    For ``features``/``advanced`` an empty tuple means "explicitly none", which is
    different from ``None`` (upstream weakness W27).
    """

    values: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    problems: tuple[str, ...] = ()

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def get_int(self, name: str) -> int | None:
        raw = self.values.get(name)
        if raw is None:
            return None
        return int(raw)

    def get_list(self, name: str) -> tuple[str, ...] | None:
        raw = self.values.get(name)
        if raw is None:
            return None
        return tuple(dict.fromkeys(x for x in raw.split(",") if x))

    def with_values(self, **changes: str | int | list[str] | tuple[str, ...] | None) -> "Request":
        """A new request with parameters set (``None`` removes the parameter).
        Raises ``KeyError`` for a name that is no parameter
        (``composer.dimensions``): a misspelt key never vanishes silently."""
        unknown = [k for k in changes if k not in PARAMS]
        if unknown:
            raise KeyError(f"not a query parameter: {', '.join(unknown)} (known: {', '.join(PARAMS)})")
        vals = dict(self.values)
        for k, v in changes.items():
            if v is None:
                vals.pop(k, None)
            elif isinstance(v, (list, tuple)):
                vals[k] = ",".join(v)
            else:
                vals[k] = str(v)
        return replace(self, values=MappingProxyType(vals), problems=())

    def query(self) -> str:
        """The query string (without ``?``) in canonical parameter order."""
        items = [(k, self.values[k]) for k in PARAMS if k in self.values]
        return urlencode(items, safe=",_:")


def parse_query(query: str | Mapping[str, str] | None) -> Request:
    """Parse ``"a=1&b=2"`` (a leading ``?`` is allowed) or a mapping into a Request.

    Unknown parameters, repeated parameters (first wins), non-numeric node counts
    and oversized values are dropped with a problem message each. Never raises.
    """
    problems: list[str] = []
    if query is None:
        pairs: list[tuple[str, str]] = []
    elif isinstance(query, str):
        q = query[1:] if query.startswith("?") else query
        if len(q) > MAX_QUERY_LEN:
            problems.append(f"The query is {len(q)} characters long; only the first {MAX_QUERY_LEN} were read.")
            q = q[:MAX_QUERY_LEN]
        try:
            pairs = parse_qsl(q, keep_blank_values=True)
        except ValueError:
            pairs, problems = [], problems + ["The query could not be parsed; defaults are shown."]
    else:
        pairs = [(str(k), str(v)) for k, v in query.items()]
    values: dict[str, str] = {}
    for key, value in pairs:
        if key not in PARAMS:
            if key not in VIEW_PARAMS:
                problems.append(f"Unknown parameter {_short(key)} was ignored.")
            continue
        if key in values:
            problems.append(f"Parameter {key} was given more than once; the first value was used.")
            continue
        if len(value) > MAX_VALUE_LEN:
            problems.append(f"Parameter {key} is too long and was ignored.")
            continue
        if key in INT_PARAMS:
            v = value.strip()
            if not v.isdigit() or not v.isascii():
                problems.append(f"The value {key}={_short(value)} is not a whole number and was ignored.")
                continue
            value = str(int(v))
        elif key not in LIST_PARAMS and value == "":
            continue
        values[key] = value
    return Request(MappingProxyType(values), tuple(problems))


def _short(text: str, limit: int = 40) -> str:
    """A quoted, length-limited rendering of user text for messages."""
    t = text if len(text) <= limit else text[:limit] + "…"
    return repr(t)
