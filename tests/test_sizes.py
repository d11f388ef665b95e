"""Sizes and names of the library's modules (issue 26 item 4), read from the files.

Three rules over every module of ``src/icore`` (tests/lab/test_lab_sizes.py applies the
same rules to the lab and checks names across both trees):

1. **No module over 600 lines** (newlines counted, as ``wc -l``): a module that grows past
   it holds more than one concern; split it by concern (docs/architecture.md "Rooms").
2. **No class over 400 lines** (from its ``class`` line to its last line, nested classes
   included): split it into parts it composes, each owning its fields (``State`` and its
   parts in docs/state.md are the model), never a mixin that reads another's privates.
3. **Module file names are unique**: a name says what the file holds wherever it sits, so
   ``_model.py`` in two rooms is a defect. Exceptions, by design: ``__init__.py`` and
   ``__main__.py``; ``_errors.py`` (each room's branch of the error tree, icore.errors);
   ``integrations/<framework>/_tools.py`` (the same role per framework).

An allowance below names each module or class still over a limit, with its owner; an
allowance that is no longer needed fails (drop it), so the lists only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "icore"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
SHARED_NAMES = {"__init__.py", "__main__.py", "_errors.py"}
"""File names every room may have (its front door, its entry point, its error branch)."""

# Allowances (path relative to src/, or "path::Class" -> its lines), each with the room
# that owns it; measured on the merged tree of issue 26. Only names remain: no library
# module or class is over a limit.
ALLOWED_MODULES: dict[str, int] = {}
ALLOWED_CLASSES: dict[str, int] = {}
ALLOWED_DUPLICATES: set[str] = {
    "_access.py",   # memory/nats/_access (E2, issue 26) vs memory/_access
    "_codec.py",    # memory/nats/_codec (E2, issue 26) vs records/_codec
    "_results.py",  # live/_results (E2, issue 26) vs adapters/_results
}


def module_lines(path: Path) -> int:
    """Lines of a module (newline count, as ``wc -l``)."""
    return path.read_text(encoding="utf-8").count("\n")


def class_sizes(source: str) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every class of ``source``, nested ones included."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                assert child.end_lineno is not None
                out.append((f"{prefix}{child.name}", child.end_lineno - child.lineno + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def rel(path: Path) -> str:
    """A path relative to src/ (``icore/state/_state.py``)."""
    return path.relative_to(ROOT / "src").as_posix()


def oversize_modules(paths: Iterable[Path]) -> dict[str, int]:
    """Modules over :data:`MAX_MODULE_LINES`: path relative to src/ -> lines."""
    return {rel(p): n for p in paths if (n := module_lines(p)) > MAX_MODULE_LINES}


def oversize_classes(paths: Iterable[Path]) -> dict[str, int]:
    """Classes over :data:`MAX_CLASS_LINES`: ``path::Class`` -> lines."""
    return {f"{rel(p)}::{name}": n for p in paths
            for name, n in class_sizes(p.read_text(encoding="utf-8"))
            if n > MAX_CLASS_LINES}


def _shared_name(path: Path) -> bool:
    if path.name in SHARED_NAMES:
        return True
    parts = path.parts
    return (path.name == "_tools.py" and len(parts) >= 3
            and parts[-3] == "integrations")


def duplicate_names(paths: Iterable[Path]) -> dict[str, list[str]]:
    """File name -> the modules sharing it (paths relative to src/), shared names aside."""
    seen: dict[str, list[str]] = {}
    for p in paths:
        if not _shared_name(p):
            seen.setdefault(p.name, []).append(rel(p))
    return {name: sorted(ps) for name, ps in sorted(seen.items()) if len(ps) > 1}


def over_limits(found: dict[str, int], allowed: dict[str, int], limit: int,
                what: str) -> list[str]:
    """Messages for what is over ``limit`` and not allowed, or over its allowance."""
    msgs = [f"{k}: {n} lines (> {limit})" for k, n in sorted(found.items())
            if k not in allowed]
    msgs += [f"{k}: {n} lines, grew past its allowance of {allowed[k]}"
             for k, n in sorted(found.items()) if k in allowed and n > allowed[k]]
    if msgs:
        msgs.insert(0, f"{what} over {limit} lines (split it by concern; docs/architecture.md):")
    return msgs


PATHS = sorted(SRC.rglob("*.py"))


def test_no_module_over_600_lines() -> None:
    """Every module of src/icore has at most 600 lines (allowances aside)."""
    msgs = over_limits(oversize_modules(PATHS), ALLOWED_MODULES, MAX_MODULE_LINES, "modules")
    assert not msgs, "\n    ".join(msgs)


def test_no_class_over_400_lines() -> None:
    """Every class of src/icore has at most 400 lines (allowances aside)."""
    msgs = over_limits(oversize_classes(PATHS), ALLOWED_CLASSES, MAX_CLASS_LINES, "classes")
    assert not msgs, "\n    ".join(msgs)


def test_module_file_names_are_unique() -> None:
    """No two modules of src/icore share a file name (shared names and allowances aside)."""
    dups = {n: ps for n, ps in duplicate_names(PATHS).items() if n not in ALLOWED_DUPLICATES}
    assert not dups, "module file names used twice (rename by what the file holds):\n    " + (
        "\n    ".join(f"{n}: {', '.join(ps)}" for n, ps in dups.items()))


def test_allowances_are_still_needed() -> None:
    """An allowance for something now within the limits is dropped (the lists only shrink)."""
    mods, classes = oversize_modules(PATHS), oversize_classes(PATHS)
    dups = duplicate_names(PATHS)
    stale = ([m for m in ALLOWED_MODULES if m not in mods]
             + [c for c in ALLOWED_CLASSES if c not in classes]
             + [d for d in ALLOWED_DUPLICATES if d not in dups])
    assert not stale, f"drop from the allowances in tests/test_sizes.py: {sorted(stale)}"


def test_the_checkers_measure_what_they_say(tmp_path: Path) -> None:
    """The checkers themselves: nested classes, methods' classes, the shared names."""
    src = ("class A:\n    class B:\n        x = 1\n\n    def f(self):\n"
           "        class C:\n            pass\n")
    assert class_sizes(src) == [("A", 7), ("A.B", 2), ("A.f.C", 2)]
    assert over_limits({"m.py": 700, "n.py": 650}, {"n.py": 640}, 600, "modules") == [
        "modules over 600 lines (split it by concern; docs/architecture.md):",
        "m.py: 700 lines (> 600)", "n.py: 650 lines, grew past its allowance of 640"]
    base = ROOT / "src" / "icore"
    paths = [base / "a" / "_x.py", base / "b" / "_x.py", base / "a" / "_errors.py",
             base / "b" / "_errors.py", base / "integrations" / "f1" / "_tools.py",
             base / "integrations" / "f2" / "_tools.py", base / "c" / "_tools.py",
             base / "d" / "_tools.py"]
    assert duplicate_names(paths) == {
        "_tools.py": ["icore/c/_tools.py", "icore/d/_tools.py"],
        "_x.py": ["icore/a/_x.py", "icore/b/_x.py"]}
