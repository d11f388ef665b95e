"""``icore bench state`` and its harness refuse sizes and counts that make no sense."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench import BadOption
from icore_lab.bench.micro._state import run

WIDE = {"COLUMNS": "200"}


@pytest.mark.parametrize(("args", "option", "shown"), [
    (["--sizes", "abc"], "--sizes", "'abc'"),
    (["--sizes", "0,10"], "--sizes", "'0,10'"),
    (["--sizes", "-5"], "--sizes", "'-5'"),
    (["--sizes", ","], "--sizes", "','"),
    (["--quick", "--sizes", "0"], "--sizes", "'0'"),
    (["--samples", "0"], "--samples", "or equal to 1"),
    (["--rebuild-entries", "0"], "--rebuild-entries", "or equal to 1"),
])
def test_cli_refuses_bad_values(args: list[str], option: str, shown: str) -> None:
    """Exit 2 naming the option and the value, before anything is measured (a bad
    ``--sizes`` used to be a ValueError or StatisticsError traceback)."""
    res = CliRunner().invoke(app, ["bench", "state", *args], env=WIDE)
    assert res.exit_code == 2, res.output
    assert f"'{option}'" in res.output and shown in res.output
    assert "audit @" not in res.output


SMALL: dict[str, Any] = {"samples": 2, "speedup_at": 20, "rebuild_entries": 30,
                         "memory_at": 10}


@pytest.mark.parametrize(("sizes", "change", "option"), [
    ((), {}, "sizes"),
    ((0,), {}, "sizes"),
    ((10, -1), {}, "sizes"),
    ((10,), {"samples": 0}, "samples"),
    ((10,), {"speedup_at": 0}, "speedup_at"),
    ((10,), {"rebuild_entries": 0}, "rebuild_entries"),
    ((10,), {"memory_at": -1}, "memory_at"),
])
def test_run_refuses_bad_counts(sizes: tuple[int, ...], change: dict[str, int],
                                option: str) -> None:
    """The library raises the typed error before printing any figure."""
    lines: list[str] = []
    with pytest.raises(BadOption) as ei:
        run(sizes, **{**SMALL, **change}, echo=lines.append)
    assert ei.value.fields["option"] == option
    assert lines == []
