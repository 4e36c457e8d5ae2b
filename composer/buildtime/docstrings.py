"""The site's Python without its docstrings (issue 22, "ship less").

The browser's memory snapshot holds the code objects of every module the page
imports, and a code object keeps its docstring as a constant: ~0.3 MB of
English for the composer, Jinja2 and MarkupSafe, which nothing in the page
reads (no ``__doc__`` is used for behaviour; ``composer.context`` copies one
for CPython's ``help``). ``build.site_python_zip`` ships each ``.py`` file
through ``strip_docstrings``. Measured on Pyodide 314.0.7: the snapshot's
gzip 7.37 → 7.15 MB, the zip of the cold path 452 → 344 kB (README,
Performance).

Line numbers are kept (a traceback from the page still points at the line of
the repository's file): a function's or the module's docstring becomes blank
lines, or ``0`` and blank lines where it is the whole body (or is followed by
``; statement`` on its line, or by another string that would become the
docstring); a class's becomes ``" "`` (``dataclasses`` would otherwise write
a signature into an empty ``__doc__``). The bytecode is the original's (a ``0``
adds one NOP), and a function's ``__doc__`` is None
(``tests/test_docstrings.py`` compares the syntax trees and line numbers of
every file the zip ships).
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import TypeGuard

_SCOPES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstrings(tree: ast.Module) -> list[tuple[ast.Expr, ast.AST, ast.stmt | None]]:
    """``(docstring, its scope, the statement after it or None)`` for every
    docstring of ``tree``."""
    found: list[tuple[ast.Expr, ast.AST, ast.stmt | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, _SCOPES) and node.body:
            first = node.body[0]
            if _is_string(first):
                found.append((first, node, node.body[1] if len(node.body) > 1 else None))
    return found


def docstring_nodes(tree: ast.Module) -> list[ast.Expr]:
    """The statements of ``tree`` that are docstrings: a string constant
    that is the first statement of the module, a class or a function."""
    return [doc for doc, _, _ in _docstrings(tree)]


def _is_string(stmt: ast.stmt | None) -> TypeGuard[ast.Expr]:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def strip_docstrings(source: bytes, filename: str = "<source>") -> bytes:
    """``source`` (a Python file's bytes) with every docstring replaced as the
    module docstring says, same number of lines, each other statement on its
    line (but for a statement after ``;`` on a docstring's last line, which
    moves to its first). Returns ``source`` unchanged when it has no
    docstring, when it is not UTF-8 (a coding declaration or a BOM: ast's
    columns count UTF-8 bytes), or when the result would not compile. Raises
    ``SyntaxError`` only if ``source`` itself does not parse."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    if encoding != "utf-8":  # "utf-8-sig" (a BOM) or a declared coding: columns would not be byte offsets
        return source
    found = _docstrings(ast.parse(source, filename))
    if not found:
        return source
    lines = source.splitlines(keepends=True)
    # ast's col_offset counts UTF-8 bytes: the lines stay bytes. From the last, so earlier spans keep their place.
    for doc, scope, nxt in sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset), reverse=True):
        first, last = doc.lineno - 1, (doc.end_lineno or doc.lineno) - 1
        before = lines[first][:doc.col_offset]
        after = lines[last][doc.end_col_offset:]
        rest = after.rstrip(b"\r\n")  # "; x = 1" after the docstring stays, on the statement's first line
        # A class keeps a one-space docstring: dataclasses writes a signature into an empty __doc__ (inspect.signature
        # at import, and the text back in the snapshot: an adversarial finding). Elsewhere a placeholder where the
        # body would be empty, text follows on the line, or the next statement is itself a string (it would become
        # the docstring).
        if isinstance(scope, ast.ClassDef):
            keep = b'" "'
        elif nxt is None or rest.strip() or _is_string(nxt):
            keep = b"0"
        else:
            keep = b""
        lines[first:last + 1] = [before + keep + rest + b"\n" * (last - first) + after[len(rest):]]
    out = b"".join(lines)
    try:
        compile(out, filename, "exec", dont_inherit=True)
    except SyntaxError:
        return source
    return out
