"""The test oracle for shell text: the words a POSIX shell reads from a
command line, with no expansion (``$NAME`` placeholders stay as written).

``shlex.split`` is not quite a POSIX shell: inside double quotes it keeps the
backslash of ``\\$`` and ``\\``` (it honours a backslash there only before
``"`` and ``\\``), while the shell drops it (POSIX XCU 2.2.3: inside double
quotes a backslash escapes ``$ ` " \\`` and newline). ``composer.shell.quote``
writes ``"\\$$A"`` for the word ``$$A`` (a literal ``$`` beside the live
placeholder ``$A``), which ``shlex`` reads back as ``\\$$A``.

Expansions are not performed but read as the shell would name them, in the
composer's placeholder form (``composer.shell.PLACEHOLDER_RE``: ``$`` and
upper case, digits, ``_``): ``${HEAD_IP}s`` reads back as ``$HEAD_IPs`` (the
placeholder ``$HEAD_IP`` and an ``s``), while an unbraced ``$HEAD_IPs`` —
which a shell expands as the variable ``HEAD_IPs`` — raises ``ValueError``:
no argv word means that (an adversarial finding)."""

from __future__ import annotations

_DQ_ESCAPES = "$`\"\\\n"


def split(text: str) -> list[str]:
    """Words of ``text`` as a POSIX shell splits and unquotes them (no
    expansion, no comments, no operators). Raises ValueError on an unclosed
    quote or a trailing backslash."""
    words: list[str] = []
    buf: list[str] = []
    in_word = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\n":
            if in_word:
                words.append("".join(buf))
                buf, in_word = [], False
            i += 1
        elif ch == "\\":
            if i + 1 >= n:
                raise ValueError("trailing backslash")
            if text[i + 1] != "\n":  # backslash-newline joins lines
                buf.append(text[i + 1])
                in_word = True
            i += 2
        elif ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ValueError("unclosed single quote")
            buf.append(text[i + 1:end])
            in_word, i = True, end + 1
        elif ch == '"':
            i += 1
            in_word = True
            while True:
                if i >= n:
                    raise ValueError("unclosed double quote")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and text[i + 1] in _DQ_ESCAPES:
                    if text[i + 1] != "\n":
                        buf.append(text[i + 1])
                    i += 2
                    continue
                if c == "$":
                    i = _expansion(text, i, buf)
                    continue
                buf.append(c)
                i += 1
        elif ch == "$":
            i = _expansion(text, i, buf)
            in_word = True
        else:
            buf.append(ch)
            in_word = True
            i += 1
    if in_word:
        words.append("".join(buf))
    return words


_NAME_START = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
_NAME_CHARS = _NAME_START + "0123456789"


def _expansion(text: str, i: int, buf: list[str]) -> int:
    """Read the ``$`` at ``text[i]`` (unquoted or inside double quotes):
    ``${NAME}`` and ``$NAME`` are appended as ``$NAME``; a name a shell would
    read with lower case in it raises ValueError; any other ``$`` is literal.
    Returns the next index."""
    n = len(text)
    if i + 1 < n and text[i + 1] == "{":
        end = text.find("}", i + 2)
        name = text[i + 2:end] if end > 0 else ""
        if not name or any(c not in _NAME_CHARS for c in name) or name[0] not in _NAME_START:
            raise ValueError(f"unsupported expansion {text[i:i + 20]!r}")
        buf.append("$" + name)
        return end + 1
    j = i + 1
    if j < n and text[j] in _NAME_START:
        while j < n and text[j] in _NAME_CHARS:
            j += 1
        name = text[i + 1:j]
        if name != name.upper():
            raise ValueError(f"a shell expands ${name}, which is no placeholder (upper case, digits and _ only)")
        buf.append("$" + name)
        return j
    buf.append("$")
    return i + 1
