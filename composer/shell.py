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
from functools import lru_cache

from composer.cache import MODULE_BOUNDS

PLACEHOLDER_RE = re.compile(r"\$[A-Z][A-Z0-9_]*")
TEXT_PLACEHOLDER_RE = re.compile(r"\$(?:\{([A-Z][A-Z0-9_]*)\}|([A-Z][A-Z0-9_]*))")
"""A placeholder in shell *text*: ``$NAME``, or ``${NAME}`` where ``quote``
braces it before a name character ("${HEAD_IP}s"); group 1 or 2 is the name."""


def text_placeholders(text: str) -> list[str]:
    """The placeholder names of shell ``text`` in order (``TEXT_PLACEHOLDER_RE``)."""
    return [m.group(1) or m.group(2) for m in TEXT_PLACEHOLDER_RE.finditer(text or "")]
_ONLY_PLACEHOLDER = re.compile(r"^\$[A-Z][A-Z0-9_]*\Z")


@lru_cache(maxsize=MODULE_BOUNDS["shell.quote"])
def quote(value: str) -> str:
    """Quote one word for a POSIX shell, keeping ``$UPPER_CASE`` placeholders
    live. Memoized: a plan of 15 nodes quotes ~1,100 words, most of them the
    same flags and values on every node."""
    if _ONLY_PLACEHOLDER.match(value):
        return value
    if not PLACEHOLDER_RE.search(value):
        return shlex.quote(value)
    out = []
    pos = 0
    for m in PLACEHOLDER_RE.finditer(value):
        out.append(_dq_escape(value[pos:m.start()]))
        # "$HEAD_IPs" would expand the shell variable HEAD_IPs (a shell name takes lower case too, POSIX
        # XCU 2.6.2): a placeholder followed by a name character is written ${NAME} (an adversarial finding)
        follows = value[m.end():m.end() + 1]
        out.append("${" + m.group(0)[1:] + "}" if follows and (follows.isalnum() or follows == "_") else m.group(0))
        pos = m.end()
    out.append(_dq_escape(value[pos:]))
    return '"' + "".join(out) + '"'


def _dq_escape(text: str) -> str:
    """Text inside double quotes: ``\\ " ` $`` escaped, and ``!`` (history
    expansion in an interactive bash, which a backslash does not stop cleanly)
    taken out of the double quotes into single ones."""
    return re.sub(r'([\\"`$])', r"\\\1", text).replace("!", "\"'!'\"")


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


def indent(text: str, prefix: str) -> str:
    """Shell ``text`` with ``prefix`` put before each line that starts outside
    quotes: a newline inside a single- or double-quoted word is part of the
    word's value, so the line after it is left as it is (an adversarial finding:
    the sbatch job indented every line of a command, which put spaces into a
    recipe value that spanned lines). Reads POSIX quoting (XCU 2.2): nothing
    escapes inside ``'…'``, a backslash escapes the next character elsewhere.
    The first line gets ``prefix`` too.
    """
    out = [prefix]
    quote_char = None
    escaped = False
    for ch in text:
        out.append(ch)
        if escaped:
            escaped = False
        elif ch == "\\" and quote_char != "'":
            escaped = True
            continue
        elif quote_char:
            if ch == quote_char:
                quote_char = None
        elif ch in "'\"":
            quote_char = ch
        if ch == "\n" and quote_char is None:
            out.append(prefix)
    return "".join(out)


def env_text(env: dict[str, str]) -> str:
    """``export K=V`` lines, values quoted like argv words."""
    return "\n".join(f"export {k}={quote(v)}" for k, v in env.items())


def comment(text: str) -> str:
    """Recipe text for a ``#`` comment line: one line (newlines and control
    characters folded into spaces), so it can never start a command."""
    text = str(text)
    if not text.isprintable():  # the per-character pass only where it finds something (a plan makes ~800 comments)
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(text.split())


def recipe_command(text: str) -> str:
    """A shell command written in recipe data (a companion process, a pip
    line), made safe to paste: its ``#`` comment lines are kept as comments,
    the rest is split into words as a shell would (``shlex``, continuation
    lines joined) and every word is quoted again, so ``;``, ``&&``, pipes,
    backticks and ``$(…)`` are plain arguments; ``$UPPER_CASE`` placeholders
    stay live. Text that does not split (an unbalanced quote) is refused."""
    notes = [comment(line.strip().lstrip("#")) for line in str(text).splitlines() if line.strip().startswith("#")]
    joined = re.sub(r"\\\r?\n", " ", str(text))  # a backslash-newline continues the line, as in a shell
    joined = "\n".join(_strip_comment(line) for line in joined.splitlines())
    try:
        argv = shlex.split(joined)
    except ValueError as exc:
        raise ValueError(f"the command cannot be read as shell words ({exc})") from None
    if not argv:
        return "\n".join(f"# {n}" for n in notes)
    head = max(1, next((i for i, t in enumerate(argv) if t.startswith("-")), len(argv)))  # program and subcommands
    return "\n".join([f"# {n}" for n in notes] + [command_text(argv, head=head)])


def recipe_script(text: str) -> str:
    """Several shell commands written in recipe data (an install step such as
    ``git clone … && cd repo && uv pip install -e .``), made safe to paste:
    the text is cut into commands at unquoted newlines, ``&&`` and ``;``, and
    each command goes through ``recipe_command`` (its words quoted again), one
    after the other. So ``|``, ``||``, redirections, backticks and ``$(…)``
    stay plain arguments, and nothing runs that is not on screen as a command
    of its own. Raises ``ValueError`` for text that does not split into words."""
    joined = re.sub(r"\\\r?\n", " ", str(text))  # a backslash-newline continues the line
    commands, buf, quote_char, i = [], [], None, 0
    while i < len(joined):
        ch = joined[i]
        if quote_char:
            buf.append(ch)
            if ch == quote_char:
                quote_char = None
            elif ch == "\\" and quote_char == '"' and i + 1 < len(joined):
                buf.append(joined[i + 1])
                i += 1
        elif ch == "\\" and i + 1 < len(joined):
            buf += [ch, joined[i + 1]]
            i += 1
        elif ch in "'\"":
            quote_char = ch
            buf.append(ch)
        elif ch in "\n;" or joined.startswith("&&", i):
            commands.append("".join(buf))
            buf = []
            i += 2 if ch == "&" else 1
            continue
        elif ch == "#" and (not buf or buf[-1] in " \t"):
            # a comment runs to the end of the line: keep it whole
            end = joined.find("\n", i)
            end = len(joined) if end < 0 else end
            buf.append(joined[i:end])
            i = end
            continue
        else:
            buf.append(ch)
        i += 1
    commands.append("".join(buf))
    shown = [recipe_command(c) for c in commands if c.strip()]
    return "\n".join(c for c in shown if c)


def heredoc_body(text: str) -> str:
    """Text for an unquoted ``<<EOF`` here-document: backslashes, backticks
    and every ``$`` except ``$UPPER_CASE`` placeholders are escaped, so only the
    placeholders expand (no command substitution from data); a line that is
    exactly ``EOF`` cannot end it early."""
    out = text.replace("\\", "\\\\").replace("`", "\\`")
    out = re.sub(r"\$(?![A-Z][A-Z0-9_]*)", r"\\$", out)
    return "\n".join(" EOF" if line == "EOF" else line for line in out.split("\n"))


def _strip_comment(line: str) -> str:
    """A line without its shell comment: a ``#`` that starts a word (at the
    line start or after a blank) and is not quoted; ``repo.git#subdir`` stays."""
    quote_char, prev = None, " "
    for i, ch in enumerate(line):
        if quote_char:
            if ch == quote_char:
                quote_char = None
        elif ch in "'\"":
            quote_char = ch
        elif ch == "#" and prev in " \t":
            return line[:i]
        prev = ch
    return line
