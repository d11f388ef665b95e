"""The library and the lab stay apart (issue 26 item 1).

* ``import icore.cli`` and every library command (``icore audit --help`` through
  :func:`icore.cli.main`) load no module of ``icore_lab`` and none of numpy, scipy,
  matplotlib;
* every module of ``src/icore`` imports with ``icore_lab`` blocked (a meta-path finder
  refuses it), so the library works without the lab installed;
* no test outside ``tests/lab`` imports ``icore_lab``, and ``src/icore`` names it only in
  ``icore/cli/__init__.py`` (the one importlib string that registers the lab's commands).

The lab's own commands (``icore bench ...``, ``icore demo``) do load it; that is checked
too, so a test cannot pass because the lab never loads at all.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "src" / "icore"
HEAVY = ("numpy", "scipy", "matplotlib")

# Files outside the lab that still name icore_lab while a planned move is under way
# (PLAN26; each names its owner). The tests below fail if an entry no longer needs to be
# here, so the list only shrinks.
PENDING_SRC = {
    # the TCP client types path= against the lab's LinkPair until net's PathModel (E2)
    "net/_channel.py", "net/_tcp_client.py", "net/_tcp_sync.py",
    # `icore audit --attribution` cross-validation, until attribution/_crossval.py (E3)
    "cli/_audit.py",
}
PENDING_TESTS = {
    "tests/net/test_tcp.py",               # shaped-link cases -> tests/lab/net (E2)
    "tests/adapters/test_attribution.py",  # cross-validation -> icore.attribution (E3)
    "tests/adapters/test_dev_traces.py",   # same (E3)
    "tests/integrations/test_common.py",   # the bench extra's MissingExtra case (E5)
}

_BLOCK = """
import importlib.abc, sys
class _NoLab(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "icore_lab" or name.startswith("icore_lab."):
            raise ModuleNotFoundError(f"No module named {name!r} (lab blocked)", name=name)
        return None
sys.meta_path.insert(0, _NoLab())
"""


def _run(code: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _loaded_after(argv: list[str]) -> dict[str, list[str]]:
    """The lab and heavy modules loaded by ``icore ARGV`` run through ``main()``."""
    code = f"""
import json, sys
sys.argv = {["icore", *argv]!r}
import icore.cli
try:
    icore.cli.main()
except SystemExit:
    pass
mods = sorted(sys.modules)
print(json.dumps({{
    "lab": [m for m in mods if m == "icore_lab" or m.startswith("icore_lab.")],
    "heavy": [m for m in mods if m.split(".")[0] in {HEAVY!r}],
}}))
"""
    out = _run(code)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_cli_import_loads_no_lab() -> None:
    """``import icore.cli`` loads nothing of the lab and no heavy library."""
    out = _run("import sys, icore.cli\n"
               "print(sorted(m for m in sys.modules if m.startswith('icore_lab')"
               f" or m.split('.')[0] in {HEAVY!r}))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_library_commands_load_no_lab() -> None:
    """``icore audit --help`` / ``icore run --help`` register only library commands."""
    for argv in (["audit", "--help"], ["run", "--help"]):
        loaded = _loaded_after(argv)
        assert loaded == {"lab": [], "heavy": []}, (argv, loaded)


def test_lab_commands_load_the_lab() -> None:
    """``icore bench --help`` registers the lab's commands (the check above can fail)."""
    loaded = _loaded_after(["bench", "--help"])
    assert "icore_lab.cli._bench_planfence" in loaded["lab"]


def test_library_imports_with_the_lab_blocked() -> None:
    """Every module of src/icore imports while ``icore_lab`` cannot be found.

    A module whose own optional extra is missing (e.g. CrewAI, which has its own venv) is
    skipped; an import that fails on the lab is a failure.
    """
    names = []
    for path in sorted(LIBRARY.rglob("*.py")):
        rel = path.relative_to(LIBRARY.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts))
    code = _BLOCK + f"""
import importlib, json
bad, skipped = [], []
for name in {names!r}:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("icore_lab") or "lab blocked" in str(exc):
            bad.append(f"{{name}}: {{exc}}")
        else:
            skipped.append(name)
    except Exception as exc:  # an extra's own import error (e.g. a missing binary)
        if "icore_lab" in repr(exc):
            bad.append(f"{{name}}: {{exc!r}}")
        else:
            skipped.append(name)
print(json.dumps({{"bad": bad, "skipped": skipped,
                   "lab": [m for m in sys.modules if m.startswith("icore_lab")]}}))
"""
    out = _run(code, timeout=110)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["bad"] == [] and res["lab"] == [], res
    assert len(res["skipped"]) < len(names) // 4, res["skipped"]   # most modules did load


def _names_lab(path: Path) -> bool:
    """True when the file imports ``icore_lab`` (any import statement, any depth)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "icore_lab" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "icore_lab":
            return True
    return False


def test_tests_outside_the_lab_do_not_import_it() -> None:
    """Library tests run without the lab: only tests/lab names ``icore_lab``."""
    word = re.compile(r"\bicore_lab\b")
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
             if (ROOT / "tests" / "lab") not in p.parents
             and word.search(p.read_text(encoding="utf-8"))}
    assert found <= PENDING_TESTS, sorted(found - PENDING_TESTS)
    assert found == PENDING_TESTS, f"drop from PENDING_TESTS: {sorted(PENDING_TESTS - found)}"


def test_library_names_the_lab_only_in_the_cli_entry() -> None:
    """src/icore mentions ``icore_lab`` in code only in cli/__init__.py (one string)."""
    word = re.compile(r"\bicore_lab\b")
    found = set()
    for p in LIBRARY.rglob("*.py"):
        rel = str(p.relative_to(LIBRARY))
        tree = ast.parse(p.read_text(encoding="utf-8"))
        # docstrings (of modules, classes, functions and attributes) may name the lab
        docs = {id(n.value) for n in ast.walk(tree)
                if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        code_strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                        and isinstance(n.value, str) and id(n) not in docs]
        if _names_lab(p) or any(word.search(s) for s in code_strings):
            found.add(rel)
    assert found - PENDING_SRC == {"cli/__init__.py"}, sorted(found)
    assert PENDING_SRC <= found, f"drop from PENDING_SRC: {sorted(PENDING_SRC - found)}"
