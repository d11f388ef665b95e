"""Shared fixtures for the framework integrations: the examples' trip world."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (with ``examples/`` importable for ``_trip``)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"icore_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # typing.get_type_hints resolves the module's names
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def trip() -> object:
    """A fresh trip world (examples/_trip.py)."""
    return load_example("_trip").Trip()


def audit_cli(run: Path, out: Path) -> str:
    """Run ``icore audit RUN --out OUT`` in a fresh interpreter; return its stdout.

    Raises:
        AssertionError: the command failed or wrote no report.
    """
    import os
    import subprocess

    env = {**os.environ, "COLUMNS": "200"}  # a wide table: run ids are not wrapped
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(run), "--out", str(out)],
                         capture_output=True, text=True, timeout=120, check=False, env=env)
    assert cli.returncode == 0, cli.stderr
    assert (out / "index.html").exists()
    return cli.stdout


def icore_lines(name: str) -> list[str]:
    """The lines of ``examples/<name>.py`` marked ``# icore`` (the fencing code)."""
    import re

    text = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8")
    return [ln for ln in text.splitlines() if re.search(r"#\s*icore\s*$", ln)]


@pytest.fixture
def one_chat() -> Iterator[None]:
    """The test is one conversation: app-level reads count for the agent's calls.

    An AG2 conversation is a workspace scope of its own (#28, QA qa-new10 S1), so a read
    made outside ``agent.ask`` (the tests' ``shipper.read(...)`` before the run) counts
    only inside one explicit scope around both, as docs/integrations-ag2.md tells an
    application that reads before asking (``with shipper.scope(chat_id):``). The scope is
    a context variable: it applies to every workspace agent of the test.
    """
    from icore.workspace import Workspace

    with Workspace({"x/*": "o"}).agent("any").scope("one-chat"):
        yield
