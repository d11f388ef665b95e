"""QA r8-bad defects: a gate that cannot be turned off by an empty value, duplicate
manifest keys, credentials and terminal escapes in what icore prints, and outputs that
never overwrite or move what the user has (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.cli import app

_ENV = {"COLUMNS": "200", "ICORE_LLM_MODEL": "", "ICORE_LLM_BASE_URL": "",
        "OPENAI_BASE_URL": ""}


def _runs(tmp_path: Path, magentic: dict[str, Any]) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "1.json").write_text(json.dumps(magentic), encoding="utf-8")
    return runs


@pytest.mark.parametrize("command", ["audit", "run"])
@pytest.mark.parametrize("value", ["", ",", " ", " , "])
def test_fail_on_naming_no_condition_is_a_usage_error(
        tmp_path: Path, magentic: dict[str, Any], command: str, value: str) -> None:
    """``--fail-on "$UNSET"`` would turn the CI gate off: exit 2 naming the flag and the
    valid conditions, before any work."""
    runs = _runs(tmp_path, magentic)
    args = (["audit", str(runs), "--no-report"] if command == "audit"
            else ["run", str(tmp_path / "none.yaml")])
    res = CliRunner().invoke(app, [*args, "--fail-on", value], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "--fail-on" in res.output and "names no condition" in res.output
    assert "invalid" in res.output
