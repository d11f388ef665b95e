"""``icore bench net`` and its library calls refuse counts and durations that make no sense."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench import BadOption
from icore_lab.bench.micro._net import run_fig2_virtual, run_validation

WIDE = {"COLUMNS": "200"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "option", "shown"), [
    (["--n", "0"], "--n", "or equal to 1"),
    (["--n", "-5"], "--n", "or equal to 1"),
    (["--samples", "0"], "--samples", "or equal to 1"),
    (["--seconds", "nan"], "--seconds", "got nan"),
    (["--seconds", "inf"], "--seconds", "got inf"),
    (["--seconds", "0"], "--seconds", "got 0.0"),
    (["--quick", "--seconds", "inf"], "--seconds", "got inf"),
])
def test_cli_refuses_bad_values(args: list[str], option: str, shown: str) -> None:
    """Exit 2 naming the option, before any owner process starts (even with --quick,
    which would otherwise replace the value)."""
    res = CliRunner().invoke(app, ["bench", "net", *args], env=WIDE)
    assert res.exit_code == 2, res.output
    assert f"'{option}'" in res.output and shown in res.output
    assert "validations/s" not in res.output


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("kwargs", "option"), [
    ({"n": 0, "seconds": 1.0}, "n"),
    ({"n": 10, "seconds": float("inf")}, "seconds"),
    ({"n": 10, "seconds": float("nan")}, "seconds"),
    ({"n": 10, "seconds": -1.0}, "seconds"),
])
def test_run_validation_refuses_bad_values(kwargs: dict[str, Any], option: str) -> None:
    """The library raises the typed error before starting the owner process (an infinite
    duration would otherwise never end)."""
    with pytest.raises(BadOption) as ei:
        run_validation(**kwargs)
    assert ei.value.fields["option"] == option
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize("samples", [0, -3])
def test_run_fig2_virtual_refuses_no_samples(samples: int) -> None:
    """No start times would leave every cell empty (median of nothing)."""
    with pytest.raises(BadOption) as ei:
        run_fig2_virtual(samples=samples)
    assert ei.value.fields == {"option": "samples", "value": samples}
