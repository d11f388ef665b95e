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


def test_safe_load_refuses_a_key_given_twice_naming_both_lines() -> None:
    """QA r8-bad D19: YAML keeps the last of two equal keys, so a second ``req/*:``
    silently changed its owner; at any depth, in flow style too."""
    from icore._yaml import DuplicateKeyError

    for text, lines in (("ownership:\n  req/*: planner\n  b/*: booker\n  req/*: booker\n",
                         (2, 4)),
                        ("ownership: {a: 1}\nx: 2\nownership: {b: 1}\n", (1, 3)),
                        ("e: {K: '1', K: '2'}\n", (1, 1))):
        with pytest.raises(DuplicateKeyError) as e:
            safe_load(text)
        assert e.value.lines == lines and f"first at line {lines[0]}, again at line " \
            f"{lines[1]}" in str(e.value)
    # a merge key is no duplicate: the mapping's own key overrides the merged one
    assert safe_load("b: &b {x: 1, y: 2}\nc: {<<: *b, x: 3}\n")["c"] == {"x": 3, "y": 2}
    assert safe_load("a: 1\n'1': 2\n1: 3\n") == {"a": 1, "1": 2, 1: 3}


@pytest.mark.parametrize("load", [_run, _team, _gateway])
@pytest.mark.parametrize(("text", "lines"), [
    ("name: x\nownership:\n  'req/*': a\nownership:\n  'req/*': b\n", ("line 2", "line 4")),
    # a key two merged mappings bring (#29, sweep round 7)
    ("name: x\nownership: {<<: [{'req/*': a}, {'req/*': b}]}\n", ("line 2",))])
def test_every_manifest_loader_refuses_duplicate_keys(tmp_path: Path,
                                                      load: Callable[[Path], Any], text: str,
                                                      lines: tuple[str, ...]) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(IcoreError) as e:
        load(p)
    assert "duplicate key" in str(e.value)
    assert all(line in str(e.value) for line in lines), e.value


def test_icore_run_refuses_a_duplicate_owner(tmp_path: Path) -> None:
    """``icore run`` with ``req/*`` owned twice: exit 2 before any agent starts."""
    from typer.testing import CliRunner

    from icore.cli import app

    p = tmp_path / "run.yaml"
    p.write_text("name: r\nfamily: reservation\nownership:\n  'req/*': reviser-1\n"
                 "  'req/*': executor-1\n")
    res = CliRunner().invoke(app, ["run", str(p), "--out", str(tmp_path / "o")],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "duplicate key" in res.output and not (tmp_path / "o").exists()


def test_a_key_two_merged_mappings_bring_is_refused() -> None:
    """Issue 29, round 7: ``<<: [*a, *b]`` with ``req/*`` in both kept the first owner and
    silently dropped the second, as a key given twice did; a mapping's own key over a
    merged one stays YAML's rule, and the same mapping merged twice (or through another
    merge) is no conflict; a merge of itself stops."""
    from icore._yaml import DuplicateKeyError

    text = "a: &a {req/*: planner}\nb: &b {req/*: booker}\nownership: {<<: [*a, *b]}\n"
    with pytest.raises(DuplicateKeyError) as e:
        safe_load(text)
    assert e.value.lines == (1, 2) and "merged with '<<'" in str(e.value)
    assert safe_load("a: &a {p: 1}\nb: &b {<<: *a, q: 2}\no: {<<: [*b, *a]}\n")["o"] == {
        "p": 1, "q": 2}
    assert safe_load("a: &a {p: 1}\no: {<<: [*a, *a], p: 3}\n")["o"] == {"p": 3}
    assert safe_load("l: &l {<<: [*l], k: 1}\n")["l"] == {"k": 1}

