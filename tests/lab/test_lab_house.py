"""The house rules over the lab (issue 26): layers, front doors, sizes, names, errors.

The library's rules (tests/test_layering.py, test_private_imports.py, test_sizes.py,
test_error_families.py) applied to ``src/icore_lab``, reusing their checkers; they live
here because library tests never name the lab (tests/lab/test_separation.py).

* **Lab layers**, lowest first: ``net < workloads < agents < bench < cli``; a lab module
  imports only lab layers at or below its own, and the library only through front doors.
* **No private imports**: the lab imports no private module or name of ``icore`` (nor of
  another lab package); ``ALLOWED_PRIVATE`` lists what still does, with its owner.
* **Sizes and names**: no lab module over 600 lines, no class over 400, and module file
  names unique across ``src/icore`` and ``src/icore_lab`` (shared names as the library's).
* **Error families**: every public lab error reports a code of its family.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

import icore_lab
from icore.errors import FAMILIES, ErrorCode, IcoreError

TESTS = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_icore_house_{name}", TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


layering = _load("test_layering")
private = _load("test_private_imports")
sizes = _load("test_sizes")

LAB = layering.SRC.parent / "icore_lab"
LAB_LAYERS = ["net", "workloads", "agents", "bench", "cli"]
LAB_PATHS = sorted(LAB.rglob("*.py"))

# icore's shared top-level helpers (time source, optional extras, data folder, file
# writing) are the lab's runtime as they are every library room's (tests/test_layering.py
# SHARED): the lab is the same distribution, and these have no front door by design.
LIBRARY_SHARED = {"icore._clock", "icore._extras", "icore._data", "icore._files"}
# Private imports the lab still makes, each with the room that removes it (empty: none).
ALLOWED_PRIVATE: dict[str, str] = {
    # E2 h26-wire exports raise_for_error / to_head_reply from icore.net; E1 switches
    "icore_lab/net/_hostcost.py": "icore.net._stats",
    "icore_lab/net/_virtual.py": "icore.net._stats",
}
# Lab modules/classes over the limits and duplicate names, with their owner; an entry no
# longer needed fails, as in tests/test_sizes.py. Empty: the lab is within the limits.
ALLOWED_MODULES: dict[str, int] = {}
ALLOWED_CLASSES: dict[str, int] = {}
ALLOWED_DUPLICATES: set[str] = set()


def _rel(path: Path) -> str:
    return path.relative_to(LAB.parent).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LAB.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _lab_layer(path: Path) -> str:
    rel = path.relative_to(LAB)
    return rel.parts[0] if len(rel.parts) > 1 else ""


@pytest.mark.parametrize("path", LAB_PATHS, ids=_rel)
def test_lab_layer_imports(path: Path) -> None:
    """A lab layer imports only lab layers at or below it (net < ... < cli)."""
    layer = _lab_layer(path)
    if layer == "":
        return
    assert layer in LAB_LAYERS, f"{_rel(path)}: lab package {layer!r} is not in LAB_LAYERS"
    below = LAB_LAYERS[: LAB_LAYERS.index(layer) + 1]
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    bad = dict.fromkeys(
        f"{_rel(path)}:{imp.line} ({imp.where}) imports {imp.module}"
        for imp in layering.imports_in(path.read_text(encoding="utf-8"), package)
        if (parts := imp.module.split("."))[0] == "icore_lab" and len(parts) > 1
        and parts[1] not in below)
    assert not bad, (f"lab layer {layer!r} imports a higher lab layer (it may import only "
                     f"{', '.join(below)}):\n    " + "\n    ".join(bad))


def _lab_private_owner(name: str) -> tuple[str, str] | None:
    parts = name.split(".")
    if parts[0] == "icore":
        return private._private_owner(name)
    if parts[0] != "icore_lab":
        return None
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i]), ".".join(parts[: i + 1])
    return None


def lab_private_imports(path: Path) -> list[str]:
    """Private names of ``icore`` or of another lab package that a lab module imports."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for imp in layering.imports_in(path.read_text(encoding="utf-8"), package):
        owner = _lab_private_owner(imp.candidates[0])
        if (owner is None or owner[1] in LIBRARY_SHARED or package == owner[0]
                or package.startswith(owner[0] + ".")):
            continue
        out.append(f"{_rel(path)}:{imp.line} ({imp.where}) imports {owner[1]}, "
                   f"private to {owner[0]}")
    return list(dict.fromkeys(out))


@pytest.mark.parametrize("path", LAB_PATHS, ids=_rel)
def test_lab_uses_front_doors_only(path: Path) -> None:
    """The lab imports the library and other lab packages through their front doors."""
    bad = lab_private_imports(path)
    allowed = ALLOWED_PRIVATE.get(_rel(path))
    if allowed is not None:
        assert bad, f"drop {_rel(path)} from ALLOWED_PRIVATE: it imports no private name"
        bad = [m for m in bad if f"imports {allowed}," not in m]
    assert not bad, ("imports of a private module (export it from the package's "
                     "__init__ instead):\n    " + "\n    ".join(bad))


def test_lab_private_checker_sees_both_trees() -> None:
    """The checker itself: icore privates and other lab packages' privates count."""
    assert _lab_private_owner("icore.net._stats.x") == ("icore.net", "icore.net._stats")
    assert _lab_private_owner("icore_lab.bench._errors") == (
        "icore_lab.bench", "icore_lab.bench._errors")
    assert _lab_private_owner("icore_lab.net") is None
    assert _lab_private_owner("numpy._core") is None
    assert _lab_private_owner("icore._clock.ManualClock") == ("icore", "icore._clock")


def test_lab_sizes() -> None:
    """No lab module over 600 lines, no lab class over 400 (allowances aside, none stale)."""
    mods = sizes.oversize_modules(LAB_PATHS)
    classes = sizes.oversize_classes(LAB_PATHS)
    msgs = sizes.over_limits(mods, ALLOWED_MODULES, sizes.MAX_MODULE_LINES, "modules")
    msgs += sizes.over_limits(classes, ALLOWED_CLASSES, sizes.MAX_CLASS_LINES, "classes")
    stale = ([m for m in ALLOWED_MODULES if m not in mods]
             + [c for c in ALLOWED_CLASSES if c not in classes])
    assert not msgs, "\n    ".join(msgs)
    assert not stale, f"drop from the allowances in {Path(__file__).name}: {sorted(stale)}"


def test_module_names_unique_across_library_and_lab() -> None:
    """No two modules of src/icore and src/icore_lab share a file name (shared aside)."""
    dups = sizes.duplicate_names(sizes.PATHS + LAB_PATHS)
    lib_allowed = sizes.ALLOWED_DUPLICATES
    bad = {n: ps for n, ps in dups.items()
           if n not in ALLOWED_DUPLICATES and n not in lib_allowed}
    stale = sorted(n for n in ALLOWED_DUPLICATES if n not in dups)
    assert not bad, "module file names used twice:\n    " + "\n    ".join(
        f"{n}: {', '.join(ps)}" for n, ps in bad.items())
    assert not stale, f"drop from ALLOWED_DUPLICATES: {stale}"


def _lab_errors() -> dict[str, type[IcoreError]]:
    out: dict[str, type[IcoreError]] = {}
    for mod in pkgutil.walk_packages(icore_lab.__path__, "icore_lab."):
        if any(p.startswith("_") for p in mod.name.split(".")[1:]) or not mod.ispkg:
            continue
        pkg = importlib.import_module(mod.name)
        for name in getattr(pkg, "__all__", ()):
            obj = getattr(pkg, name, None)
            if inspect.isclass(obj) and issubclass(obj, IcoreError):
                out[f"{mod.name}.{name}"] = obj
    return out


LAB_ERRORS = _lab_errors()


def test_the_lab_has_public_errors() -> None:
    """The walk finds the lab's error branch (BenchError and its subclasses)."""
    assert "icore_lab.bench.BenchError" in LAB_ERRORS


@pytest.mark.parametrize("name", sorted(LAB_ERRORS))
def test_lab_errors_report_their_family(name: str) -> None:
    """A lab error reports a code of its family (the lab package it is defined in)."""
    cls = LAB_ERRORS[name]
    parts = cls.__module__.split(".")
    fam = parts[1].lstrip("_") if parts[0] == "icore_lab" and len(parts) > 1 else ""
    assert fam in FAMILIES, f"{name}: family {fam!r} is not in icore.errors.FAMILIES"
    assert cls.code is not ErrorCode.UNCLASSIFIED, f"{name} sets no code"
    assert cls.code in FAMILIES[fam], f"{name} reports {cls.code!r}, not a {fam} code"
