"""A small, deterministic YAML writer for JSON data with comments.

The Kubernetes form (``composer.k8s``) builds manifests as plain JSON data
(dicts, lists, strings, ints, bools, None) and writes them here as YAML text a
person reads, copies and ``kubectl apply``s. PyYAML is not in the browser's
Python (the Pyodide snapshot holds the composer, Jinja2 and MarkupSafe only)
and its output cannot carry comments, so this writer stays small instead:

* block style, two-space indents, keys in the data's order;
* a string is written plain only when YAML 1.1 and 1.2 both read it back as
  that string (no booleans such as ``on``/``yes``, numbers, nulls, indicators,
  colons or ``#``); a multi-line string is a literal block (``|`` / ``|-``) when
  that round-trips exactly, else every other string is double-quoted with
  YAML escapes for ``\\``, ``"`` and every non-printable character;
* ``comments`` maps a path (a tuple of keys and list indices) to comment
  lines written above that key or list item; comment text is folded to one
  printable line per entry (``composer.shell.comment``), so recipe text can
  never end a comment early.

A test parses every manifest the composer writes with PyYAML and compares it
with the data (``tests/test_k8s.py``).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from composer.shell import comment

_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*\Z")
# Words YAML 1.1 (Go's yaml.v2, which kubectl's parser follows) reads as
# booleans or null; a plain scalar must never be one of them.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def _printable(ch: str) -> bool:
    """YAML's printable set (spec 1.2 §5.1) minus the line breaks a parser normalises."""
    c = ord(ch)
    if c in (0x85, 0x2028, 0x2029, 0xFEFF):
        return False
    return c == 0x09 or 0x20 <= c <= 0x7E or 0xA0 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD or 0x10000 <= c <= 0x10FFFF


def _quoted(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch == "\t" or _printable(ch):
            out.append(ch)
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def scalar(value: Any) -> str:
    """One scalar as YAML text. Raises ``TypeError`` for a non-JSON value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is not str:
        raise TypeError(f"not JSON data: {type(value).__name__}")
    if _PLAIN.fullmatch(value) and value.lower() not in _RESERVED:
        return value
    return _quoted(value)


def _block_ok(text: str) -> bool:
    """A literal block holds ``text`` exactly: printable lines (tabs allowed),
    no carriage return, no leading blank or space on the first line, no
    trailing blank lines and at most one final newline."""
    if "\n" not in text.rstrip("\n") or text.endswith("\n\n") or text[:1] in (" ", "\t", "\n"):
        return False
    return all(ch == "\n" or _printable(ch) for ch in text)


def _comments(out: list[str], notes: Sequence[str] | None, indent: str) -> None:
    for note in notes or ():
        out.append(f"{indent}# {comment(note)}" if comment(note) else f"{indent}#")


def _write(out: list[str], value: Any, path: tuple, indent: str, comments: Mapping[tuple, Sequence[str]], first: str | None) -> None:
    """Write a mapping or a sequence; ``first`` is the prefix of the first line
    (``"- "`` for a mapping that is a list item), later lines use ``indent``."""
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    for n, (key, item) in enumerate(items):
        sub = path + (key,)
        _comments(out, comments.get(sub), indent)
        if isinstance(value, dict):
            lead = (first if n == 0 and first is not None else indent) + f"{scalar(str(key))}:"
            child = indent + "  "
        else:
            lead = indent + "-"
            child = indent + "  "
        if isinstance(item, (dict, list)) and item:
            if isinstance(value, list) and isinstance(item, dict):
                _write(out, item, sub, child, comments, indent + "- ")
                continue
            out.append(lead)
            _write(out, item, sub, child, comments, None)
        elif isinstance(item, dict):
            out.append(lead + " {}")
        elif isinstance(item, list):
            out.append(lead + " []")
        elif isinstance(item, str) and "\n" in item and _block_ok(item):
            out.append(lead + (" |" if item.endswith("\n") else " |-"))
            out.extend((child + line) if line else "" for line in item.rstrip("\n").split("\n"))
        else:
            out.append(lead + " " + scalar(item))


def dump(value: Mapping | Sequence, comments: Mapping[tuple, Sequence[str]] | None = None) -> str:
    """One YAML document for a dict or list, ending in a newline. A comment
    on the list item or key at ``path`` is written above it (for a mapping in
    a list, the item's comment goes above its ``-`` line)."""
    out: list[str] = []
    _comments(out, (comments or {}).get(()), "")
    if not value:
        out.append("{}" if isinstance(value, dict) else "[]")
    else:
        _write(out, value, (), "", comments or {}, None)
    return "\n".join(out) + "\n"


def dump_all(documents: Sequence[tuple[Mapping, Mapping[tuple, Sequence[str]]]], header: Sequence[str] = ()) -> str:
    """A multi-document YAML stream (``---`` between documents), each
    document a ``(data, comments)`` pair; ``header`` comment lines come first."""
    out = []
    for line in header:
        out.append(f"# {comment(line)}" if comment(line) else "#")
    parts = ["\n".join(out) + "\n"] if out else []
    for n, (data, notes) in enumerate(documents):
        parts.append(("---\n" if n or out else "") + dump(data, notes))
    return "".join(parts)
