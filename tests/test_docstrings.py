"""The site's Python ships without docstrings (composer.buildtime.docstrings,
issue 22): every file of the zip keeps its code and its line numbers."""

from __future__ import annotations

import ast
import io
import zipfile

import pytest

import build
from composer.buildtime.docstrings import docstring_nodes, strip_docstrings


def _without_docstrings(tree: ast.Module, placeholders: bool) -> ast.Module:
    """``tree`` with its docstrings (or, for a stripped file, the ``0``
    statements that stand in for them) taken out of their bodies."""
    drop = {id(n) for n in docstring_nodes(tree)} if not placeholders else {
        id(n) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        and (n.value.value == 0 and type(n.value.value) is int)} | {id(n) for n in docstring_nodes(tree) if n.value.value == " "}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = [s for s in body if id(s) not in drop] or [ast.Pass()]
    return tree


def _statement_lines(tree: ast.Module) -> list[tuple[str, int]]:
    return [(type(n).__name__, n.lineno) for n in ast.walk(tree) if isinstance(n, (ast.stmt, ast.expr))
            and not isinstance(n, ast.Pass)]


def _shipped() -> dict[str, bytes]:
    zf = zipfile.ZipFile(io.BytesIO(build.site_python_zip()))
    return {n: zf.read(n) for n in zf.namelist() if n.endswith(".py")}


def _original(name: str) -> bytes:
    top = name.split("/")[0]
    if top == "composer":
        return (build.ROOT / name).read_bytes()
    return next(p for p, n in build._package_files(top) if n == name).read_bytes()


def test_every_shipped_file_keeps_its_code_and_lines():
    shipped = _shipped()
    stripped = 0
    for name, data in shipped.items():
        orig = _original(name)
        a = _without_docstrings(ast.parse(orig), placeholders=False)
        b = _without_docstrings(ast.parse(data), placeholders=True)
        assert ast.dump(a) == ast.dump(b), name
        assert _statement_lines(a) == _statement_lines(b), name
        assert orig.count(b"\n") == data.count(b"\n"), name
        assert all(n.value.value == " " for n in docstring_nodes(ast.parse(data))), name  # a class keeps " "
        stripped += data != orig
    assert stripped >= len(shipped) * 3 // 4  # almost every file of the composer, Jinja2 and MarkupSafe had one


@pytest.mark.parametrize("source", [
    b'"""Module."""\nfrom __future__ import annotations\nx = 1\n',
    b'def f():\n    """One line."""\n\n\ndef g():\n    """Two\n    lines."""\n    return 1\n',
    b'class A:\n    """Only a docstring:\n    the body needs a statement."""\n\n\nclass B:\n    r"""\xc3\x97 bytes \xe2\x86\x92 before."""; y = 2\n',
    b'async def h():\n    "text"\n    return "not a docstring"\n',
])
def test_hand_written_sources(source):
    out = strip_docstrings(source)
    ns_a, ns_b = {}, {}
    exec(compile(source, "a", "exec"), ns_a)
    exec(compile(out, "b", "exec"), ns_b)
    assert out.count(b"\n") == source.count(b"\n")
    assert all(n.value.value == " " for n in docstring_nodes(ast.parse(out)))
    assert b"not a docstring" in out or b"not a docstring" not in source
    for k, v in ns_a.items():
        if callable(v) and hasattr(v, "__code__"):
            assert _ops(v) == _ops(ns_b[k])
            assert ns_b[k].__doc__ in (None, " ")


def _ops(fn) -> list[tuple[str, object]]:
    import dis

    return [(i.opname, i.argval) for i in dis.get_instructions(fn) if i.opname != "NOP"]


@pytest.mark.parametrize("source, check", [
    # a multi-line docstring and "; statement" after it (adversarial finding: the whole file kept its docstrings)
    (b'def f():\n    """a\n    b"""; x = 1; return x\n\ndef g():\n    """doc"""\n    return 2\n',
     lambda ns: ns["f"]() == 1 and ns["f"].__doc__ is None and ns["g"].__doc__ is None),
    # a string after the docstring must not become the docstring
    (b'def f():\n    """doc"""\n    """second"""\n    return 1\n', lambda ns: ns["f"].__doc__ is None),
    # dataclasses writes a signature into an empty __doc__: a class keeps " "
    (b'from dataclasses import dataclass\n@dataclass\nclass A:\n    """Doc."""\n    x: int = 1\n',
     lambda ns: ns["A"].__doc__ == " "),
])
def test_adversarial_sources(source, check):
    out = strip_docstrings(source)
    assert out != source and out.count(b"\n") == source.count(b"\n")
    ns: dict = {}
    exec(compile(out, "t", "exec"), ns)
    assert check(ns)


def test_a_source_not_in_utf8_is_left_alone():
    """ast's columns count UTF-8 bytes: a latin-1 file was cut in the wrong place and changed its behaviour."""
    src = b'# -*- coding: latin-1 -*-\ndef g(a="\xe9"): ""; return a  # "\n'
    assert strip_docstrings(src) is src
    bom = b'\xef\xbb\xbf"""Doc."""\nx = 1\n'
    assert strip_docstrings(bom) is bom


def test_a_file_without_docstrings_is_unchanged():
    src = b"x = 1\n# a comment\n"
    assert strip_docstrings(src) is src
