"""Manifest values YAML cannot convert are named by line in every loader (issue 29).

Sweep seed 7: an integer over 4300 digits or a timestamp that is no date (``2026-02-30``,
``0000-01-01``, ``25:61``) in a run, team or gateway manifest was refused as "a value
YAML cannot convert" with no line, or with Python's "use sys.set_int_max_str_digits()".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from icore._yaml import safe_load
from icore.errors import IcoreError

_BAD = ["1" + "0" * 5000, "-" + "9" * 5000, "2026-02-30", "0000-01-01", "2026-01-01 25:61:00"]


@pytest.mark.parametrize("value", _BAD)
def test_safe_load_marks_the_value(value: str) -> None:
    with pytest.raises(yaml.MarkedYAMLError) as e:
        safe_load(f"a: 1\nb: {value}\n")
    assert e.value.problem_mark is not None and e.value.problem_mark.line == 1
    assert "quote it" in str(e.value) and "set_int_max_str_digits" not in str(e.value)


def test_safe_load_keeps_what_converts() -> None:
    import datetime

    assert safe_load("a: 2026-01-01\nb: 12\nc: '2026-02-30'\n") == {
        "a": datetime.date(2026, 1, 1), "b": 12, "c": "2026-02-30"}


def _run(p: Path) -> Any:
    from icore.live import load_manifest
    return load_manifest(p)


def _team(p: Path) -> Any:
    from icore.net import TeamManifest
    return TeamManifest.load(p)


def _gateway(p: Path) -> Any:
    from icore.mcp import load_manifest
    return load_manifest(p)


@pytest.mark.parametrize("load", [_run, _team, _gateway])
@pytest.mark.parametrize("value", _BAD[::2])
def test_every_manifest_loader_names_the_line(tmp_path: Path, load: Callable[[Path], Any],
                                              value: str) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(f"name: x\nbad: {value}\n")
    with pytest.raises(IcoreError) as e:
        load(p)
    assert "line 2" in str(e.value) and "set_int_max_str_digits" not in str(e.value), e.value
