"""Odd values a recorder or a trace may carry (#28, QA qa-new10 S4).

* ``RunRecorder(ground_truth=nan | inf | -inf)``: an ``IntegrationError`` naming the
  argument (a finite number stays its text, as the JSONL importer reads one);
* a trace line holding ``NaN`` / ``Infinity`` (Python's JSON reader takes them, others do
  not) or an ``exitcode`` no process can return: imported, with a warning naming the line;
* the HTML report shows an agent name's ESC / bidi characters escaped, as the console.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from icore.adapters import load_jsonl
from icore.errors import IntegrationError
from icore.integrations import RunRecorder

from ._cli import invoke


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_ground_truth_is_refused(value: float) -> None:
    with pytest.raises(IntegrationError) as got:
        RunRecorder("r", ground_truth=value)
    assert got.value.fields.get("argument") == "ground_truth"
    assert "finite number" in str(got.value)


def test_a_finite_number_ground_truth_is_its_text() -> None:
    assert RunRecorder("r", ground_truth=3.5).ground_truth == "3.5"


def _run(tmp_path: Path, *lines: str, agent: str = "alice") -> Path:
    head = json.dumps({"run": {"id": "odd", "agents": {agent: "", "user": ""}}})
    rows = [head, json.dumps({"agent": "user", "kind": "task", "content": "go"}), *lines,
            json.dumps({"agent": agent, "kind": "termination", "content": "done",
                        "final_answer": "done"})]
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_nan_and_infinity_lines_are_warned_by_number(tmp_path: Path) -> None:
    path = _run(tmp_path, '{"agent": "alice", "kind": "output", "content": NaN}',
                '{"agent": "alice", "kind": "thought", "content": "NaN in words"}',
                '{"agent": "alice", "kind": "output", "content": "x", "w": -Infinity}')
    warned = load_jsonl(path).warnings
    assert [w for w in warned if "not JSON" in w] == [
        f"{path}: line 3 holds NaN, which is not JSON (read as a float; another reader "
        "refuses the line)",
        f"{path}: line 5 holds -Infinity, which is not JSON (read as a float; another "
        "reader refuses the line)"]


@pytest.mark.parametrize(("code", "warned"), [(10 ** 400, True), (2 ** 32, True),
                                              (-(2 ** 31) - 1, True), (255, False),
                                              (-(2 ** 31), False)])
def test_an_exit_code_no_process_returns_is_warned(tmp_path: Path, code: int,
                                                   warned: bool) -> None:
    line = json.dumps({"agent": "alice", "kind": "tool_output", "tool": "t",
                       "content": "x", "exitcode": code})
    got = [w for w in load_jsonl(_run(tmp_path, line)).warnings if "exitcode" in w]
    assert bool(got) == warned
    if warned:
        assert "line 3: exitcode" in got[0] and len(got[0]) < 300


def test_the_report_escapes_control_and_bidi_characters(tmp_path: Path) -> None:
    evil = "\u202eevil\x1b]0;pwn\x07"
    path = _run(tmp_path, json.dumps({"agent": evil, "kind": "output",
                                      "content": "hi \x1b[2K there"}), agent=evil)
    code, out = invoke("audit", str(path), "--out", str(tmp_path / "rep"))
    assert code == 0, out
    for page in (tmp_path / "rep").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.search("[\x00-\x08\x0b-\x1f\u202a-\u202e\u2066-\u2069]", text), page
    run_page = (tmp_path / "rep" / "odd.html").read_text(encoding="utf-8")
    assert "\\u202eevil\\x1b]0;pwn\\x07" in run_page and "hi \\x1b[2K there" in run_page
