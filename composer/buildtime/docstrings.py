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
the repository's file): a docstring becomes blank lines, or ``0`` and blank
lines where it is the whole body of its class or function (or is followed by
``; statement`` on its line). The bytecode is the original's (a ``0`` adds one
NOP where it stands in for a body), and ``__doc__`` is None
(``tests/test_docstrings.py`` compares the syntax trees and line numbers of
every file the zip ships).
"""

from __future__ import annotations

import ast

_SCOPES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_nodes(tree: ast.Module) -> list[ast.Expr]:
    """The statements of ``tree`` that are docstrings: a string constant
    that is the first statement of the module, a class or a function."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, _SCOPES) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.append(first)
    return found


def strip_docstrings(source: bytes, filename: str = "<source>") -> bytes:
    """``source`` (a Python file's bytes, UTF-8) with every docstring
    replaced as the module docstring says, same number of lines, each other
    statement on its line. Returns ``source`` unchanged when it has no
    docstring or when the result would not compile (e.g. a docstring followed
    by ``;`` on its line). Raises ``SyntaxError`` only if ``source`` itself
    does not parse."""
    tree = ast.parse(source, filename)
    sole = {id(n.body[0]) for n in ast.walk(tree) if isinstance(n, _SCOPES[1:]) and len(n.body) == 1}
    nodes = docstring_nodes(tree)
    if not nodes:
        return source
    lines = source.splitlines(keepends=True)
    # ast's col_offset counts UTF-8 bytes: the lines stay bytes. From the last, so earlier spans keep their place.
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        before = lines[first][:node.col_offset]
        after = lines[last][node.end_col_offset:]
        needed = id(node) in sole or after.strip() != b""  # a body of its own, or "; stmt" after it on the line
        lines[first:last + 1] = [before + (b"0" if needed else b"") + b"\n" * (last - first) + after]
    out = b"".join(lines)
    try:
        compile(out, filename, "exec", dont_inherit=True)
    except SyntaxError:
        return source
    return out

