"""The import rules of design.md section 2, enforced (style habit 3; issue 13 item 5).

Three rules over every module of ``src/icore``, read from the AST (nothing is imported):

1. **Layers.** Each layer may import only the layers listed before it in ``LAYERS`` (plus
   the shared top-level modules ``icore.errors``, ``icore._clock``, ``icore._data``,
   ``icore._extras``, ``icore._files``, ``icore._frozen``, ``icore._msgpack``,
   ``icore._tls``, ``icore._threads`` and ``icore._yaml``).
2. **No import circles inside a package.** Per layer (the layer's package with all its
   subpackages; ``icore`` itself for the top-level modules), the graph "module A imports
   module B" has no cycle. Imports inside functions count: a function-level import only
   postpones a circle to call time, it does not remove it. Imports under
   ``if TYPE_CHECKING:`` are *not* edges: they never run, so an annotation may name a
   module that imports the annotating one (better still, type against a protocol).
3. **Pure layers do no I/O and read no clock.** Modules of ``PURE`` layers import none of
   ``IO_MODULES`` (at any depth, ``TYPE_CHECKING`` blocks included: a pure layer has no
   business with paths or sockets, not even in a signature) and never call the builtin
   ``open``. The documented I/O edge is ``PURE_EXCEPTIONS``: iCORE's event-sourced SQLite
   log (``state/_log``) and the declaration loader
   (``state/_loader``), the only module of state/ that reads files or imports user code.
   ``PURE_RUNTIME`` admits one module as a layer's runtime: fence may import ``asyncio``
   (it awaits the owner access it is handed), nothing else of ``IO_MODULES``.

Every failure message names the file, the line and, for an import inside a function, the
function. tests/test_private_imports.py holds the fourth rule (no private imports across
packages).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "icore"
LAYERS = ["records", "memory", "fence", "net", "workspace", "state", "audit",
          "agents", "live", "adapters", "attribution", "report", "integrations", "mcp",
          "cli"]
# shared top-level modules every layer may use: the error tree, the injected clock, the
# data folder, optional extras, file writing, frozen-dataclass builders, the msgpack
# packer, TLS contexts, the event-loop thread, strict JSON text (no bare NaN) and the
# trace lines' digests (whole-line seals too), chain and writer marker, the tool-call
# argument comparison, lock descriptors a fork drops (#29), the trace lines' text marks
SHARED = {"errors", "_clock", "_data", "_extras", "_files", "_frozen", "_msgpack", "_tls",
          "_threads", "_yaml", "__main__", "_entry", "_strict_json", "_line_digest",
          "_line_chain", "_writer_mark", "_line_seal", "_arg_diff", "_flock", "_trace_marks",
          ""}
PURE = {"records", "fence", "audit", "state"}
IO_MODULES = {"sqlite3", "socket", "ssl", "subprocess", "time", "urllib", "http",
              "shutil", "multiprocessing", "os", "pathlib", "yaml", "importlib", "asyncio",
              "datetime"}
# the documented I/O edge of a pure layer, as module paths inside the layer: iCORE's
# event-sourced SQLite log, and the declaration loader (the one file reader of state/)
PURE_EXCEPTIONS = {"state": {"_log", "_loader"}}
# the one I/O module a pure layer may use as its runtime: fence awaits the owner access it
# is handed (planfence Alg. 1 queries owners; Fence.aexecute runs async tools), so it uses
# asyncio (gather, the owner-query timeout, to_thread bridges) and nothing else of
# IO_MODULES; every socket, file and clock read stays behind the injected OwnerAccess
# and Clock. Its sans-io core (GateRun) needs none of it.
PURE_RUNTIME = {"fence": {"asyncio"}}


@dataclass(frozen=True)
class Import:
    """One imported name, resolved to absolute dotted names.

    ``candidates`` lists what the statement may import as a module, most specific first:
    ``from icore.state import _decl`` gives ``("icore.state._decl", "icore.state")``;
    the first one that is a module of src/ is the import's target.
    """

    module: str
    candidates: tuple[str, ...]
    line: int
    where: str          # "module level", "in f", "in C.f"
    type_checking: bool


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _walk(node: ast.AST, scope: str = "",
          tc: bool = False) -> Iterator[tuple[ast.AST, str, bool]]:
    """Every node under ``node`` with its enclosing def/class path and TYPE_CHECKING flag."""
    for child in ast.iter_child_nodes(node):
        yield child, scope, tc
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for sub in child.body:
                yield sub, scope, True
                yield from _walk(sub, scope, True)
            for sub in child.orelse:
                yield sub, scope, tc
                yield from _walk(sub, scope, tc)
            continue
        inner = scope
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = f"{scope}.{child.name}" if scope else child.name
        yield from _walk(child, inner, tc)


def _where(scope: str) -> str:
    return f"in {scope}" if scope else "module level"


def imports_in(source: str, package: str) -> list[Import]:
    """Every import of a module's ``source`` at any depth; relative ones made absolute.

    Args:
        source: the module's text.
        package: the dotted package its relative imports resolve against (the module's
            own name for an ``__init__``).
    """
    out: list[Import] = []
    for node, scope, tc in _walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [Import(a.name, (a.name,), node.lineno, _where(scope), tc)
                    for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            for alias in node.names:
                cands = (module,) if alias.name == "*" else (f"{module}.{alias.name}", module)
                out.append(Import(module, cands, node.lineno, _where(scope), tc))
    return out


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else ""


PATHS = sorted(SRC.rglob("*.py"))
MODULES = {_module_name(p): p for p in PATHS}


def imports(path: Path) -> list[Import]:
    """:func:`imports_in` for a file of src/icore."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package)


def _rel(path: Path) -> str:
    return path.relative_to(SRC.parent.parent).as_posix()


# --- rule 1: layers ------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS, ids=_rel)
def test_layer_imports(path: Path) -> None:
    """Lower layers never import higher ones."""
    layer = _layer(path)
    if layer in SHARED or layer not in LAYERS:
        return
    below = LAYERS[: LAYERS.index(layer) + 1]
    bad = dict.fromkeys(        # one message per statement, in file order
        f"{_rel(path)}:{imp.line} ({imp.where}) imports {imp.module}"
        for imp in imports(path)
        if (parts := imp.module.split("."))[0] == "icore" and len(parts) > 1
        and parts[1] not in below and parts[1] not in SHARED)
    assert not bad, (f"layer {layer!r} imports a higher layer (it may import only "
                     f"{', '.join(below)} and the shared top-level modules):\n    "
                     + "\n    ".join(bad))


def test_layer_list_matches_packages() -> None:
    """Every subpackage is a declared layer."""
    pkgs = {p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert pkgs <= set(LAYERS), pkgs - set(LAYERS)


def _diagram_layers(text: str, indent: str) -> list[str]:
    """The first word of each line that starts at ``indent`` in the first layer diagram."""
    block = text.split("```\n", 2)[1] if indent == "" else text.split("::\n\n", 1)[1]
    block = block.split("\n\n", 1)[0]
    return [m.group(1) for line in block.splitlines()
            if (m := re.match(rf"{indent}([a-z]+)\s", line))]


def test_layer_diagrams_match() -> None:
    """The icore docstring and docs/architecture.md draw the layers this test enforces."""
    init = (SRC / "__init__.py").read_text(encoding="utf-8")
    assert _diagram_layers(init, " {4}") == LAYERS, "src/icore/__init__.py layer list"
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert _diagram_layers(doc, "") == LAYERS[::-1], "docs/architecture.md layer diagram"


def test_only_adapters_import_opentelemetry() -> None:
    """OpenTelemetry lives in adapters/ (design.md 2): no other layer imports it."""
    bad = dict.fromkeys(f"{_rel(path)}:{imp.line} ({imp.where}) imports {imp.module}"
                        for path in PATHS if _layer(path) != "adapters"
                        for imp in imports(path)
                        if imp.module.split(".")[0] in ("opentelemetry", "openinference"))
    assert not bad, "\n".join(bad)


# --- rule 2: no import circles inside a package --------------------------------------


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` of ``file`` (``where``: scope)."""

    source: str
    target: str
    file: str
    line: int
    where: str
    type_checking: bool = False

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}  ({self.file}:{self.line}, {self.where})"


def import_graph(modules: dict[str, tuple[str, list[Import]]]) -> dict[str, list[Edge]]:
    """Import edges between the given modules (runtime and ``TYPE_CHECKING`` alike).

    Args:
        modules: module name -> (file shown in messages, its imports); only edges to
            modules of this mapping are kept.

    Returns:
        Module name -> its edges, in file order.
    """
    graph: dict[str, list[Edge]] = {}
    for name, (file, imps) in modules.items():
        edges = graph.setdefault(name, [])
        for imp in imps:
            target = next((c for c in imp.candidates if c in modules or c in MODULES), None)
            if target is None or target == name or target not in modules:
                continue
            edge = Edge(name, target, file, imp.line, imp.where, imp.type_checking)
            if edge not in edges:       # one edge per statement, not per imported name
                edges.append(edge)
    return graph


def circles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for e in graph.get(v, []):
            if e.target not in index:
                visit(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            comp = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _package_modules(package: str) -> dict[str, tuple[str, list[Import]]]:
    if package == "icore":
        names = [n for n, p in MODULES.items() if _layer(p) == ""]
    else:
        names = [n for n in MODULES if n == package or n.startswith(package + ".")]
    return {n: (_rel(MODULES[n]), imports(MODULES[n])) for n in names}


# Typing-only circles still open at the end of issue 26, each named with its owner's room
# (an allowance, not a rule: drop the entry when the room types against a protocol).
# Only the TYPE_CHECKING edges between the listed modules are left out; a runtime edge
# between them still fails.
TYPE_CHECKING_CIRCLES_ALLOWED: dict[str, set[str]] = {
    # adapters/_otel_run.py annotates with _otel_export.OtelExporter, which imports
    # _otel_run at runtime (E3's room; a protocol of what _LiveSpans calls removes it)
    "icore.adapters": {"icore.adapters._otel_export", "icore.adapters._otel_run"},
}

PACKAGES = ["icore"] + [f"icore.{p.name}" for p in sorted(SRC.iterdir())
                        if (p / "__init__.py").exists()]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package: str) -> None:
    """No package (with its subpackages) has an import circle, function-level included."""
    graph = import_graph(_package_modules(package))
    allowed = TYPE_CHECKING_CIRCLES_ALLOWED.get(package, set())
    for m in allowed & graph.keys():
        graph[m] = [e for e in graph[m] if not (e.type_checking and e.target in allowed)]
    msgs = []
    for comp in circles(graph):
        edges = [str(e) for m in comp for e in graph[m] if e.target in comp]
        msgs.append(f"import circle in {package} through {len(comp)} modules "
                    f"({', '.join(comp)}); its edges:\n    " + "\n    ".join(edges))
    assert not msgs, "\n".join(msgs)


def test_circle_finder_sees_function_level_imports() -> None:
    """The checker itself: function-level and TYPE_CHECKING imports both close a circle."""
    sources = {
        "p.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import c\n"
               "def f():\n    from p import b\n",
        "p.b": "from p.a import f\n",
        "p.c": "from . import a\n",
        "p.d": "import p.c\n",
    }
    graph = import_graph({m: (m, imports_in(s, "p")) for m, s in sources.items()})
    assert circles(graph) == [["p.a", "p.b", "p.c"]]
    assert [str(e) for e in graph["p.a"]] == ["p.a -> p.c  (p.a:3, module level)",
                                              "p.a -> p.b  (p.a:5, in f)"]
    assert [e.target for e in graph["p.c"]] == ["p.a"]


# --- rule 3: pure layers do no I/O ---------------------------------------------------


def io_uses(source: str, file: str, package: str,
            allowed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """What a module's ``source`` does that is I/O: ``IO_MODULES`` imports, builtin ``open``.

    Returns:
        One ``"file:line (scope) ..."`` message per use, in line order.
    """
    found = [(imp.line, f"{file}:{imp.line} ({imp.where}) imports {imp.module}"
              + (" (under TYPE_CHECKING)" if imp.type_checking else ""))
             for imp in imports_in(source, package)
             if imp.module.split(".")[0] in IO_MODULES - allowed]
    found += [(node.lineno, f"{file}:{node.lineno} ({_where(scope)}) calls builtin open()")
              for node, scope, _ in _walk(ast.parse(source))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "open"]
    return list(dict.fromkeys(msg for _, msg in sorted(found)))   # one per statement


def _exempt(path: Path) -> bool:
    layer = _layer(path)
    inner = path.relative_to(SRC / layer).with_suffix("").as_posix()
    return inner in PURE_EXCEPTIONS.get(layer, set())


@pytest.mark.parametrize("path", [p for p in PATHS if _layer(p) in PURE], ids=_rel)
def test_pure_layers_do_no_io(path: Path) -> None:
    """Pure layers (records, fence, audit, state) do no I/O and read no clock."""
    if _exempt(path):
        return
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    bad = io_uses(path.read_text(encoding="utf-8"), _rel(path), package,
                  allowed=PURE_RUNTIME.get(_layer(path), set()))
    exempt = sorted(f"{_layer(path)}/{m}.py" for m in PURE_EXCEPTIONS.get(_layer(path), ()))
    assert not bad, (f"pure layer {_layer(path)!r} does I/O (its I/O edge is only "
                     f"{exempt or 'none'}):\n    " + "\n    ".join(bad))


def test_io_finder_sees_nested_imports_and_open() -> None:
    """The checker itself: a function-level ``import os.path`` and ``open(`` are found."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pathlib import Path\n"
           "def f(p):\n    import os.path\n    with open(p) as fh:\n        return fh.read()\n")
    assert io_uses(src, "m.py", "p") == [
        "m.py:3 (module level) imports pathlib (under TYPE_CHECKING)",
        "m.py:5 (in f) imports os.path",
        "m.py:6 (in f) calls builtin open()"]


def test_runtime_allowance_is_only_asyncio() -> None:
    """fence's allowance admits asyncio and nothing else: time and os are still flagged."""
    src = "import asyncio\nimport time\nfrom os import environ\n"
    assert io_uses(src, "m.py", "p", allowed=PURE_RUNTIME["fence"]) == [
        "m.py:2 (module level) imports time",
        "m.py:3 (module level) imports os"]
    assert PURE_RUNTIME == {"fence": {"asyncio"}}
