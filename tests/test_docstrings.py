"""Every public-named definition of src/icore has a docstring (style habit 16; issue 13).

Ruff's D1 rules (on in pyproject.toml, Google convention) see only definitions whose
every parent is public, so nothing inside a ``_private.py`` module, where nearly all of
icore's code lives (ruff issues #9946, #14206). This test applies D101/D102/D103 where
ruff stops: a class, function or method whose own name has no leading underscore needs
a docstring, at module level or in any class body (a public method of a private class
implements a protocol someone reads), in every module. Functions nested inside functions
and ``@overload`` stubs are exempt. The docstrings' *form* is ruff's job (D2xx/D4xx).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "icore"
PATHS = sorted(SRC.rglob("*.py"))


def _is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "overload")
               or (isinstance(d, ast.Attribute) and d.attr == "overload")
               for d in node.decorator_list)


def undocumented(source: str, file: str) -> list[str]:
    """Public-named classes, functions and methods of ``source`` without a docstring.

    Returns:
        One ``"file:line kind Qual.name"`` message per definition, in line order.
    """
    out: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.If | ast.Try):      # conditional definitions
                visit(node.body + node.orelse, prefix)
                continue
            if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(node, ast.ClassDef):
                kind = "class"
            else:
                kind = "method" if prefix else "function"
                if _is_overload(node):
                    continue
            if not node.name.startswith("_") and ast.get_docstring(node) is None:
                out.append(f"{file}:{node.lineno} {kind} {prefix}{node.name}")
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body, "")
    return out


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.relative_to(SRC.parent).as_posix())
def test_public_definitions_have_docstrings(path: Path) -> None:
    """Each public-named class, function and method says what it does."""
    rel = path.relative_to(SRC.parents[1]).as_posix()
    bad = undocumented(path.read_text(encoding="utf-8"), rel)
    assert not bad, ("public-named definitions without a docstring (shapes, units, "
                     "Raises: with conditions, paper section):\n    " + "\n    ".join(bad))


def test_checker_sees_methods_of_private_classes() -> None:
    """The checker itself: what counts and what is exempt."""
    src = ('class _P:\n    def run(self): pass\n    def _x(self): pass\n'
           'def f():\n    def inner(): pass\n'
           'from typing import overload\n@overload\ndef g(x: int) -> int: ...\n'
           'def g(x):\n    """Documented."""\n'
           'if True:\n    class C:\n        """Doc."""\n        async def go(self): pass\n')
    assert undocumented(src, "m.py") == [
        "m.py:2 method _P.run", "m.py:4 function f", "m.py:14 method C.go"]
