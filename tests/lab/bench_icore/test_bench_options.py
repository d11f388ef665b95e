"""``icore bench icore`` and :func:`evaluate` refuse counts and modes that make no sense."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench import BadOption
from icore_lab.bench.icore._evaluate import evaluate, run_all

WIDE = {"COLUMNS": "200"}


@pytest.mark.parametrize(("args", "option", "shown"), [
    (["--jobs", "0"], "--jobs", "or equal to 1"),
    (["--per-mode", "-1"], "--per-mode", "or equal to 0"),
    (["--mode", "nope"], "--mode", "'nope'"),
    (["--mode", "deadline"], "--mode", "'deadline' given twice"),
])
def test_cli_refuses_bad_values(tmp_path: Path, args: list[str], option: str,
                                shown: str) -> None:
    """Exit 2 naming the option, before any instance runs or any file is written."""
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["bench", "icore", "--per-mode", "1", "--mode", "deadline",
                                   "--jobs", "1", "--out", str(out), *args], env=WIDE)
    assert res.exit_code == 2, res.output
    assert f"'{option}'" in res.output and shown in res.output
    assert not out.exists()


@pytest.mark.parametrize(("change", "option"), [
    ({"jobs": 0}, "jobs"),
    ({"jobs": -2}, "jobs"),
    ({"per_mode": 0}, "per_mode"),
    ({"modes": []}, "modes"),
    ({"modes": ["deadline", "nope"]}, "modes"),
    ({"modes": "deadline"}, "modes"),
    ({"modes": ["deadline", "deadline"]}, "modes"),
])
def test_evaluate_refuses_bad_values(tmp_path: Path, change: dict[str, Any],
                                     option: str) -> None:
    """The library raises the typed error (a ValueError) and writes nothing."""
    out = tmp_path / "out"
    kwargs: dict[str, Any] = {"preset": "quick", "per_mode": 1, "modes": ["deadline"],
                              "jobs": 1, "out": out, **change}
    with pytest.raises(BadOption) as ei:
        evaluate(**kwargs)
    assert ei.value.fields["option"] == option
    assert isinstance(ei.value, ValueError)
    assert not out.exists()


def test_run_all_names_the_unknown_mode() -> None:
    """An unknown mode is named, with the known ones."""
    with pytest.raises(BadOption, match="'nope'") as ei:
        run_all(["nope"], 1)
    assert ei.value.fields["value"] == "nope"
    assert "deadline" in ei.value.fields["known"]
    with pytest.raises(BadOption, match="per_mode"):
        run_all(["deadline"], 0)


def test_run_all_refuses_a_repeated_mode() -> None:
    """A mode given twice would run (and count) its matched instances twice; the same
    mode as enum and as string is the same mode."""
    from icore_lab.workloads._tasks import TaskMode

    with pytest.raises(BadOption, match="'deadline' given twice") as ei:
        run_all([TaskMode("deadline"), "deadline"], 1)
    assert ei.value.fields["option"] == "modes"
    assert ei.value.fields["value"] == "deadline"
