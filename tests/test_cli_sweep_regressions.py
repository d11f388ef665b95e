"""Issue 29, bad-input sweep (tools/badinput_sweep.py): the causes it found, one test each.

Every case ends in a usage error (exit 2) or an input error (exit 1) naming the flag,
file or field, before any work: never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app

_ENV = {"COLUMNS": "200", "ICORE_LLM_MODEL": "", "ICORE_LLM_BASE_URL": "",
        "OPENAI_BASE_URL": ""}


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args), env=_ENV)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


@pytest.mark.parametrize(("value", "said"), [("bogus", "unknown family 'bogus'"),
                                             (",,", "names no family"),
                                             ("reservation,x", "unknown family 'x'")])
def test_bench_otel_unknown_family_is_a_usage_error(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    value: str, said: str) -> None:
    """It was a ValueError traceback after the 100,000-span import benchmark."""
    monkeypatch.chdir(tmp_path)
    code, out = _invoke("bench", "otel", "--families", value)
    assert code == 2 and "--families" in out and said in out, out
    assert list(tmp_path.iterdir()) == []


def test_no_trace_files_names_the_paths(tmp_path: Path) -> None:
    """An empty folder named ``x.jsonl`` said only "no trace files found"."""
    d = tmp_path / "x.jsonl"
    d.mkdir()
    code, out = _invoke("audit", str(d), "-o", str(tmp_path / "o"))
    assert code == 2 and "no trace files found" in out and str(d) in out, out
