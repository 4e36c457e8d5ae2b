"""Shell rendering of argv and env: what a person copies must run as shown.

Every argv element and env value is quoted with ``shlex.quote`` semantics, except
that ``$PLACEHOLDER`` names (upper-case shell variables such as ``$HEAD_IP``)
still expand: a value that is exactly one placeholder stays bare, and a value
that embeds one (``http://$DECODE_NODE_1:8002``) is double-quoted with every
other special character escaped. Upstream left env values unquoted (W24).
"""

from __future__ import annotations

import re
import shlex

PLACEHOLDER_RE = re.compile(r"\$[A-Z][A-Z0-9_]*")
_ONLY_PLACEHOLDER = re.compile(r"^\$[A-Z][A-Z0-9_]*$")


def quote(value: str) -> str:
    """Quote one word for a POSIX shell, keeping ``$UPPER_CASE`` placeholders live."""
    if _ONLY_PLACEHOLDER.match(value):
        return value
    if not PLACEHOLDER_RE.search(value):
        return shlex.quote(value)
    out = []
    pos = 0
    for m in PLACEHOLDER_RE.finditer(value):
        out.append(_dq_escape(value[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_dq_escape(value[pos:]))
    return '"' + "".join(out) + '"'


def _dq_escape(text: str) -> str:
    return re.sub(r'([\\"`$])', r"\\\1", text)


def command_text(argv: list[str], units: list[list[str]] | None = None, head: int = 3) -> str:
    """``argv`` as a multi-line shell command: the first ``head`` words (``vllm
    serve MODEL``) on the first line, then one option (flag and value) per
    continuation line.

    ``units`` groups the options; without it every token after the head starts
    a new line unless it is a flag's value.
    """
    lines = [" ".join(quote(a) for a in argv[:head])]
    for unit in units if units is not None else _group(argv[head:]):
        lines.append("  " + " ".join(quote(t) for t in unit))
    return " \\\n".join(lines)


def _group(tokens: list[str]) -> list[list[str]]:
    groups: list[list[str]] = []
    for t in tokens:
        if groups and not t.startswith("-") and len(groups[-1]) == 1:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def env_text(env: dict[str, str]) -> str:
    """``export K=V`` lines, values quoted like argv words."""
    return "\n".join(f"export {k}={quote(v)}" for k, v in env.items())
