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

Scope: src/icore, and examples/ (they show users the public API, so they import no
private icore name at all). tests/ may import private modules on purpose (white-box
tests of a module's internals sit beside it), and the benchmark scripts under bench/
drive harness internals. Why not ruff's banned-api (TID251)? It bans listed names everywhere: it
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


def _private_owner(name: str) -> tuple[str, str] | None:
    """``(package it is private to, private module or name)`` of a dotted ``icore`` name.

    None when the name is public. ``icore.state._decl.Foo`` gives
    ``("icore.state", "icore.state._decl")``.
    """
    parts = name.split(".")
    if parts[0] != "icore":
        return None
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i]), ".".join(parts[: i + 1])
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
        One ``"file:line (scope) imports MODULE (names), private to PKG"`` message per
        statement and private module, in line order.
    """
    package = module if is_package else module.rpartition(".")[0]
    # (line, scope, private module, package it is private to) -> names imported from it
    found: dict[tuple[int, str, str, str], list[str]] = {}
    uses = [(imp.line, imp.where, imp.candidates[0], "")
            for imp in layering.imports_in(source, package)]
    uses += [(line, where, name, " dynamically") for line, where, name in
             _dynamic_imports(source)]
    for line, where, name, how in uses:
        priv = _private_owner(name)
        if priv is None or _inside(package, priv[0]):
            continue
        names = found.setdefault((line, where + how, priv[1], priv[0]), [])
        if name != priv[1]:
            names.append(name[len(priv[1]) + 1:])
    return [f"{file}:{line} ({where}) imports {mod}"
            + (f" ({', '.join(names)})" if names else "") + f", private to {owner}"
            for (line, where, mod, owner), names in sorted(found.items())]


EXAMPLES = sorted((SRC.parents[1] / "examples").rglob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(SRC.parents[1]).as_posix())
def test_examples_use_only_the_public_api(path: Path) -> None:
    """An example imports no private icore module or name."""
    rel = path.relative_to(SRC.parents[1]).as_posix()
    bad = private_imports(path.read_text(encoding="utf-8"), rel, "examples._script", False)
    assert not bad, "an example imports icore internals:\n    " + "\n    ".join(bad)


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
        "m.py:1 (module level) imports icore.state._decl (Foo), private to icore.state",
        "m.py:3 (in f) imports icore.state._decl, private to icore.state",
        "m.py:6 (module level) imports icore.bench.icore._loop (run), "
        "private to icore.bench.icore",
        "m.py:9 (module level dynamically) imports icore.agents._team, "
        "private to icore.agents",
    ]
