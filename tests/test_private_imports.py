"""No module of src/ imports another package's private module (issue 13 item 5).

A dotted name's first component that starts with ``_`` (dunders aside) makes it private
to the package that holds it: ``icore.state._decl`` and ``icore.state._decl.Foo`` are
private to ``icore.state``, ``icore._clock`` to ``icore``. A module may import a private
name only from inside that package or one of its subpackages; everything else goes
through the package's front door (its ``__init__`` and ``__all__``, style habit 2).
Both spellings count: ``from icore.X._y import z`` and ``from icore.X import _y``, at
module level or inside a function, ``TYPE_CHECKING`` blocks included (an annotation that
names a private class still couples to it), and so do ``importlib.import_module`` /
``__import__`` calls with a literal name.

Scope: src/icore only. tests/ may import private modules on purpose (white-box tests of
a module's internals sit beside it), and scripts under bench/ and examples/ are not
library code. Why not ruff's banned-api (TID251)? It bans listed names everywhere: it
cannot say "except from inside the owning package" (per-file ignores would lift every
ban for a whole file) and has no wildcard, so each new private module would need a line.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_icore_layering", _HERE / "test_layering.py")
assert _spec is not None and _spec.loader is not None
layering = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = layering
_spec.loader.exec_module(layering)

SRC: Path = layering.SRC


def _private_owner(name: str) -> str | None:
    """The package a dotted ``icore`` name is private to, or None when it is public."""
    parts = name.split(".")
    if parts[0] != "icore":
        return None
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i])
    return None


def _inside(importer_package: str, owner: str) -> bool:
    return importer_package == owner or importer_package.startswith(owner + ".")


def _dynamic_imports(source: str) -> list[tuple[int, str, str]]:
    """``importlib.import_module("...")`` / ``__import__("...")`` with a literal name."""
    out = []
    for node, scope, _ in layering._walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            continue
        f = node.func
        if ((isinstance(f, ast.Attribute) and f.attr == "import_module")
                or (isinstance(f, ast.Name) and f.id in ("import_module", "__import__"))):
            out.append((node.lineno, layering._where(scope), node.args[0].value))
    return out


def private_imports(source: str, file: str, module: str, is_package: bool) -> list[str]:
    """Every private name of another package that a module's ``source`` imports.

    Args:
        source: the module's text.
        file: its path, for the messages.
        module: its dotted name (``icore.bench._planfence``).
        is_package: True for an ``__init__`` (its own package is ``module``).

    Returns:
        One ``"file:line (scope) imports NAME, private to PKG"`` message per import.
    """
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for imp in layering.imports_in(source, package):
        name = imp.candidates[0]
        owner = _private_owner(name)
        if owner is not None and not _inside(package, owner):
            found.append((imp.line, f"{file}:{imp.line} ({imp.where}) imports {name}, "
                          f"private to {owner}"))
    for line, where, name in _dynamic_imports(source):
        owner = _private_owner(name)
        if owner is not None and not _inside(package, owner):
            found.append((line, f"{file}:{line} ({where}) imports {name} dynamically, "
                          f"private to {owner}"))
    return [msg for _, msg in sorted(found)]


@pytest.mark.parametrize("path", layering.PATHS, ids=layering._rel)
def test_no_private_imports_across_packages(path: Path) -> None:
    """A module uses other packages only through their public front door."""
    bad = private_imports(path.read_text(encoding="utf-8"), layering._rel(path),
                          layering._module_name(path), path.name == "__init__.py")
    assert not bad, ("imports of another package's private module or name (export it "
                     "from that package's __init__ instead):\n    " + "\n    ".join(bad))


def test_checker_sees_both_spellings_and_respects_subpackages() -> None:
    """The checker itself: both spellings, function level, and the subpackage rule."""
    src = ("from icore.state._decl import Foo\n"
           "def f():\n    from icore.state import _decl, State\n"
           "import icore._clock\n"
           "from icore.bench._stats import mean\n"
           "from icore.bench.icore._loop import run\n"
           "from .._stats import median\n"
           "import importlib\nimportlib.import_module('icore.agents._team')\n")
    assert private_imports(src, "m.py", "icore.bench.planfence._replay", False) == [
        "m.py:1 (module level) imports icore.state._decl.Foo, private to icore.state",
        "m.py:3 (in f) imports icore.state._decl, private to icore.state",
        "m.py:6 (module level) imports icore.bench.icore._loop.run, "
        "private to icore.bench.icore",
        "m.py:9 (module level) imports icore.agents._team dynamically, "
        "private to icore.agents",
    ]
