"""The generic JSONL event format (docs/audit-real-runs.md, "Generic JSONL format")."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from icore.adapters import AdapterError, StepKind, audit_trace, load_jsonl, load_trace, parse_jsonl
from icore.attribution import attribute
from icore.state import Status

RUN = "\n".join(json.dumps(x) for x in [
    {"run": {"id": "r1", "question": "What is 6*7?", "ground_truth": "42",
             "succeeded": "false", "orchestrator": "planner",
             "agents": {"planner": "plans and assigns work",
                        "coder": "writes python code", "terminal": "runs code"},
             "annotation": {"agent": "Coder", "step": "4"}}},
    {"agent": "user", "kind": "task", "content": "What is 6*7?"},
    {"agent": "planner", "kind": "plan", "content": "1. compute 6*7 in python"},
    {"agent": "planner", "kind": "ledger", "ledger": {
        "is_request_satisfied": "False", "is_progress_being_made": True, "is_in_loop": False,
        "next_speaker": "coder"}, "extra": 1},
    {"agent": "Planner", "kind": "instruction", "to": "CODER", "content": "compute 6*7 in python"},
    {"agent": "coder", "kind": "output", "content": "```python\nprint(6*8)\n```"},
    {"agent": "terminal", "kind": "tool_output", "exitcode": 1, "content": "Traceback"},
    {"agent": "planner", "kind": "termination", "final_answer": "48", "content": "done"},
])


def test_parse_and_audit() -> None:
    """The documented example imports, audits and attributes."""
    t = parse_jsonl(RUN, file="r1.jsonl")
    assert t.id == "r1" and t.family == "jsonl" and t.succeeded is False
    assert [s.kind for s in t.steps][:3] == [StepKind.TASK, StepKind.PLAN, StepKind.LEDGER]
    assert t.steps[3].agent == "planner" and t.steps[3].to == "coder"  # name case
    assert t.annotation is not None and t.annotation.step == 4
    r = audit_trace(t)
    x = r.state
    assert x.obligations["o3"].assignee == "coder"
    assert x.obligations["o3"].status == Status.SUBMITTED
    assert not x.is_sound("o3")
    a = attribute(r)
    assert a is not None and (a.agent, a.step) == ("coder", 4)


def test_load_by_suffix(tmp_path: Path) -> None:
    """``load_trace`` dispatches ``.jsonl`` to the generic importer."""
    p = tmp_path / "x.jsonl"
    p.write_text("# comment\n\n" + RUN, encoding="utf-8")
    assert load_trace(p).id == "r1"
    assert load_jsonl(p).family == "jsonl"


@pytest.mark.parametrize(("text", "field"), [
    ('{"agent": "a", "kind": "output"}\n{"agent": \n', "line 2.agent"),  # unended: test_jsonl_torn
    ('{"agent": "a"}', "line 1.kind"),
    ('{"kind": "output"}', "line 1.agent"),
    ('{"agent": "a", "kind": "dance"}', "line 1.kind"),
    ('{"agent": "a", "kind": "instruction"}', "line 1.to"),
    ('{"agent": "a", "kind": "ledger", "ledger": 3}', "line 1.ledger"),
    ('{"agent": "a", "kind": "ledger", "ledger": {"is_in_loop": "x"}}',
     "line 1.ledger.is_in_loop"),
    ('{"agent": "a", "kind": "output", "step": 3}\n{"agent": "a", "kind": "output", "step": 2}',
     "line 2.step"),
    ('{"agent": "a", "kind": "tool_output", "exitcode": "0"}', "line 1.exitcode"),
    ('[1]', "line 1"),
    ('{"run": {"succeeded": "maybe"}}\n{"agent": "a", "kind": "output"}', "run.succeeded"),
    ("", "<root>"),
    ('{"agent": "a", "kind": "output"}\n' + "[" * 100_000 + "]" * 100_000, "line 2"),
])
def test_errors_name_line_and_field(text: str, field: str) -> None:
    """Every malformed line is reported with its line number and field."""
    with pytest.raises(AdapterError) as info:
        parse_jsonl(text, file="x.jsonl")
    assert (info.value.file, info.value.field) == ("x.jsonl", field)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loader", [load_jsonl, load_trace])
def test_fifo_is_refused_without_opening_it(tmp_path: Path,
                                            loader: Callable[[Path], object]) -> None:
    """A named pipe would block the read forever: a typed error naming it and its kind."""
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(AdapterError, match=r"is a FIFO \(named pipe\), not a regular file") \
            as ei:
        loader(fifo)
    assert ei.value.file == str(fifo) and str(fifo) in str(ei.value)


@pytest.mark.timeout(30)
def test_character_device_is_refused() -> None:
    """A device (here /dev/null) is refused by its kind, not read as an empty run."""
    if not Path("/dev/null").is_char_device():
        pytest.skip("no /dev/null character device")
    with pytest.raises(AdapterError, match="is a character device, not a regular file") \
            as ei:
        load_jsonl("/dev/null")
    assert ei.value.file == "/dev/null"
