"""A trace whose last line was cut off mid-write (QA qa-mcp7 S3, #25).

A gateway killed while writing a line, or a full disk, leaves a final line with no newline
that is not JSON. The run is read up to it and reported as not ended, with a warning
naming the line; a malformed line anywhere else (or a malformed last line that does end
with a newline) stays an input error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icore.adapters import AdapterError, load_jsonl, parse_jsonl

pytestmark = pytest.mark.timeout(30)

LINES = [json.dumps(x, ensure_ascii=False) for x in [
    {"run": {"id": "gw", "agents": {"gateway": "icore MCP gateway"}}},
    {"agent": "user", "kind": "task", "content": "purge A1"},
    {"agent": "gateway", "kind": "tool_output", "exitcode": 0, "content": "purged A1 ☂"},
    {"agent": "gateway", "kind": "termination", "content": "gateway stopped ☂"},
]]


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "trace.jsonl"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("cut", [5, 40, -4])  # -4: inside the last '☂' (3 UTF-8 bytes)
def test_torn_last_line_reads_the_run_up_to_it(tmp_path: Path, cut: int) -> None:
    body = "\n".join(LINES[:3]).encode() + b"\n"
    torn = LINES[3].encode()[:cut]
    t = load_jsonl(_write(tmp_path, body + torn))
    assert len(t.steps) == 2 and not any(s.terminates for s in t.steps)
    assert len(t.warnings) == 1 and "line 4 (the last) is cut off" in t.warnings[0]
    assert "read up to line 3 and did not end" in t.warnings[0]
    if cut != -4:  # the same from text
        t2 = parse_jsonl((body + torn).decode(), file="m.jsonl")
        assert len(t2.steps) == 2 and t2.warnings and "line 4" in t2.warnings[0]


def test_a_whole_trace_has_no_warning(tmp_path: Path) -> None:
    t = load_jsonl(_write(tmp_path, "\n".join(LINES).encode()))  # no final newline: whole
    assert t.steps[-1].terminates and t.warnings == ()


@pytest.mark.parametrize(("data", "line"), [
    ("\n".join([LINES[0], LINES[1][:9], LINES[2]]) + "\n", 2),  # in the middle
    ("\n".join([*LINES[:3], LINES[3][:9]]) + "\n", 4),  # last, but it ends with a newline
    ("\n".join([LINES[0], LINES[1][:9], LINES[2]]), 2),  # the middle, no final newline
])
def test_other_malformed_lines_stay_errors(tmp_path: Path, data: str, line: int) -> None:
    for load in (lambda: load_jsonl(_write(tmp_path, data.encode())),
                 lambda: parse_jsonl(data, file="m.jsonl")):
        with pytest.raises(AdapterError, match="malformed JSON") as e:
            load()
        # the line, and since the fourth sweep round the member inside it where known
        assert e.value.field.split(".")[0] == f"line {line}"


def test_a_bad_utf8_byte_mid_file_stays_an_error(tmp_path: Path) -> None:
    data = (LINES[0] + "\n").encode() + LINES[1].encode()[:-3] + b"\xe2\x98" + b'"}'
    with pytest.raises(AdapterError, match="not UTF-8"):
        load_jsonl(_write(tmp_path, data))


def test_a_trace_torn_before_its_first_step_says_so(tmp_path: Path) -> None:
    """QA qa-new12 S4: a trace cut inside the line after its header said only
    ``<root>: no events``; the error now names the torn last line."""
    p = tmp_path / "cut.jsonl"
    p.write_text('{"run": {"id": "r", "question": "q"}}\n{"agent": "a", "kind": "ta',
                 encoding="utf-8")
    with pytest.raises(AdapterError, match=r"no events: line 2 \(the last\) is cut off"):
        load_jsonl(p)
