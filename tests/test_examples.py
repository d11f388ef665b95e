"""The README's runnable examples run (each in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_quickstart_runs() -> None:
    """examples/quickstart.py replans once and books the revised destination."""
    out = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("replan_required") and lines[1].startswith("authorized")
    assert lines[-1] == "booked Porto"


def test_otel_quickstart_runs() -> None:
    """examples/otel_quickstart.py: the fence's decisions as spans, read back (#16)."""
    out = subprocess.run([sys.executable, str(EXAMPLES / "otel_quickstart.py")],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "booked Porto"
    assert lines[1].split() == ["apply_guardrail", "PlanFence", "GUARDRAIL", "replan_required"]
    assert lines[3].split() == ["execute_tool", "book", "TOOL", "authorized"]
    assert lines[-1].startswith("imported: ['task', 'tool_output'")


def test_cli_help_lists_every_command() -> None:
    """Every documented command has help text (style habit 19)."""
    from typer.testing import CliRunner

    from icore.cli import app

    runner = CliRunner()
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    for cmd in ("demo", "run", "audit", "certs", "serve", "bench", "mcp"):
        assert cmd in top.output
    bench = runner.invoke(app, ["bench", "--help"])
    for cmd in ("core", "net", "state", "planfence", "icore", "otel", "mcp",
                "integrations"):
        assert cmd in bench.output
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    for cmd in ("icore run", "icore audit", "icore certs init", "icore serve",
                "icore bench planfence", "icore bench icore", "icore bench core",
                "icore bench otel", "icore mcp", "icore bench mcp",
                "icore bench integrations"):
        assert cmd in readme, cmd


def test_demo_without_shared_data_skips_the_data_parts(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine without ../shared/data, ``icore demo`` still runs: the Table 1 replay
    (Mahimahi traces) and the Who&When audit each say they are skipped and why; exit 0."""
    from typer.testing import CliRunner

    from icore.cli import app

    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setenv("ICORE_SHARED_DATA", str(empty))
    monkeypatch.delenv("ICORE_TRACES", raising=False)
    res = CliRunner().invoke(app, ["demo", "--no-live", "-o", str(tmp_path / "out")],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.output.count("skipped") == 2, res.output
    assert "Mahimahi traces not found" in res.output
    assert not (tmp_path / "out" / "table1").exists()
