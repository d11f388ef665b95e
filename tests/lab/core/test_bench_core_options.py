"""``icore bench core`` and :func:`run_core_bench` refuse durations that make no sense."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench import BadOption
from icore_lab.bench.micro._core_gate import gate_throughput, run_core_bench

WIDE = {"COLUMNS": "200"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "0", "-1"])
def test_cli_refuses_bad_seconds(bad: str) -> None:
    """NaN, infinity (the loop would never end), zero and negatives: exit 2 naming
    ``--seconds`` and the value, before anything is measured."""
    res = CliRunner().invoke(app, ["bench", "core", "--seconds", bad], env=WIDE)
    assert res.exit_code == 2, res.output
    assert "--seconds" in res.output
    assert f"got {float(bad)}" in res.output
    assert "decisions/s" not in res.output


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -0.5])
def test_library_refuses_bad_seconds(bad: float) -> None:
    """The library entry points raise the typed error themselves."""
    with pytest.raises(BadOption) as ei:
        run_core_bench(bad)
    assert ei.value.fields["option"] == "seconds"
    with pytest.raises(BadOption, match="seconds must be a finite number > 0"):
        gate_throughput("memory", 1, 1, seconds=bad)
