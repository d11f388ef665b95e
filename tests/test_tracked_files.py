"""What the repository tracks: source, docs and tests, never a run's leftovers.

A helper's scratch database (``sales.db``) and a symlink into a developer's own
virtualenv (``.venv-shared``) were once committed by ``git add -A``; a fresh clone then
carried a stale SQLite file and a dangling link. These rules read ``git ls-files``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = {
    ".ci",
    ".gitignore",
    "CHANGELOG.md",
    "Makefile",
    "README.md",
    "pyproject.toml",
    "bench",
    "docs",
    "examples",
    "src",
    "tests",
    "tools",
}
"""What may sit at the top of the tree; anything else is a leftover of a run."""
RUN_LEFTOVERS = (".db", ".db-wal", ".db-shm", ".sqlite", ".sqlite-wal", ".lock", ".pyc")


def _tracked() -> list[tuple[str, str]]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-s", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    rows = []
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        rows.append((meta.split()[0], path))
    return rows


def test_top_level_holds_only_the_project() -> None:
    extra = sorted({path.split("/", 1)[0] for _, path in _tracked()} - TOP_LEVEL)
    assert not extra, f"tracked at the top of the tree, not part of the project: {extra}"


def test_no_symlinks_and_no_databases_are_tracked() -> None:
    links = [path for mode, path in _tracked() if mode == "120000"]
    leftovers = [path for _, path in _tracked() if path.endswith(RUN_LEFTOVERS)]
    assert not links, f"symlinks are tracked (they point into one machine): {links}"
    assert not leftovers, f"databases or lock files of a run are tracked: {leftovers}"
