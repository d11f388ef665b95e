"""The import rule of design.md section 2, enforced (style habit 3).

Each layer may import only the layers listed before it (plus ``icore.errors``,
``icore._clock``, ``icore._data``, ``icore._extras`` and ``icore._files``); pure layers
import no I/O or clock modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "icore"
LAYERS = ["records", "memory", "fence", "net", "state", "audit", "workloads", "agents",
          "live", "adapters", "bench", "report", "integrations", "cli"]
SHARED = {"errors", "_clock", "_data", "_extras", "_files", "__main__", ""}
PURE = {"records", "fence", "audit", "workloads", "state"}
IO_MODULES = {"sqlite3", "socket", "ssl", "subprocess", "time", "urllib", "http",
              "shutil", "multiprocessing"}
# the documented I/O edge of a pure layer: iCORE's event-sourced SQLite log
PURE_EXCEPTIONS = {"state": ("_log", "_sqlite", "_store")}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        layer = rel.parts[0] if len(rel.parts) > 1 else ""
        out.append((layer.removesuffix(".py"), path))
    return out


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize(("layer", "path"), _modules(), ids=lambda v: str(v))
def test_layer_imports(layer: str, path: Path) -> None:
    """Lower layers never import higher ones; pure layers do no I/O."""
    if layer in SHARED or layer not in LAYERS:
        return
    allowed = set(LAYERS[: LAYERS.index(layer) + 1]) | SHARED
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "icore" and len(parts) > 1:
            assert parts[1] in allowed or parts[1] in SHARED, (
                f"{path.relative_to(SRC)} ({layer}) imports {name}")
        if layer in PURE and parts[0] in IO_MODULES:
            exempt = PURE_EXCEPTIONS.get(layer, ())
            assert any(path.name.startswith(e) for e in exempt), (
                f"pure layer module {path.relative_to(SRC)} imports {name}")


def test_layer_list_matches_packages() -> None:
    """Every subpackage is a declared layer."""
    pkgs = {p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert pkgs <= set(LAYERS), pkgs - set(LAYERS)


def test_only_adapters_import_opentelemetry() -> None:
    """OpenTelemetry lives in adapters/ (design.md 2): no other layer imports it."""
    for layer, path in _modules():
        if layer == "adapters":
            continue
        bad = [n for n in _imports(path) if n.split(".")[0] in ("opentelemetry", "openinference")]
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"
