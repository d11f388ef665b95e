"""What the CLI tests share: a clean environment, one invocation, a folder of runs.

Not a test module (no ``test_`` prefix); imported as ``tests._cli``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from icore.cli import app

CLI_ENV = {"COLUMNS": "200", "ICORE_LLM_MODEL": "", "ICORE_LLM_BASE_URL": "",
           "OPENAI_BASE_URL": ""}
"""Wide console, no LLM endpoint from the developer's shell."""


def invoke(*args: str, **env: str) -> tuple[int, str]:
    """Run ``icore ARGS`` in process; its exit code and output (never a traceback).

    Raises:
        AssertionError: the command raised anything but ``SystemExit``.
    """
    res = CliRunner().invoke(app, list(args), env={**CLI_ENV, **env})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


def one_run_folder(tmp_path: Path, run: dict[str, Any]) -> Path:
    """``tmp_path/runs`` holding ``run`` as ``1.json`` (a Who&When-shaped run)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "1.json").write_text(json.dumps(run), encoding="utf-8")
    return runs
