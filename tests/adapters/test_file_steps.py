"""A streamed JSONL run keeps its steps in the file, not in memory (issue 29).

``load_jsonl(..., stream=True)`` keeps each step's line offset; the audit reads the
steps one at a time and must not keep them: its results are those of the steps held in
memory, and no more than a few :class:`Step` objects are alive at any point of it.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import (
    AdapterError,
    FileSteps,
    Step,
    audit_trace,
    load_jsonl,
    parse_jsonl,
)
from icore.adapters._line_steps import StepSource
from icore.adapters._results import StepEvents

pytestmark = pytest.mark.timeout(120)


def _run(lines: int) -> str:
    """A generic run: header, comments, PlanFence-free turns of four agents."""
    out = ["\ufeff" + json.dumps({"run": {"id": "r", "ground_truth": "42",
                                          "agents": {"planner": "plans", "coder": "codes"}}}),
           "# a comment", "",
           json.dumps({"agent": "user", "kind": "task", "content": "What is 6*7? é"})]
    for i in range(lines):
        who = ("coder", "Coder", "tester", "planner")[i % 4]
        kind = ("output", "tool_output", "thought", "instruction")[i % 4]
        line: dict[str, Any] = {"agent": who, "kind": kind, "content": f"turn {i} ✓"}
        if kind == "instruction":
            line["to"] = "coder"
        if kind == "tool_output":
            line["exitcode"] = i % 3
        if i >= 200:  # indices with gaps, some as strings
            line["step"] = 1000 + 3 * i if i % 2 else str(1000 + 3 * i)
        out.append(json.dumps(line, ensure_ascii=i % 2 == 0))
        if i % 50 == 0:
            out.append("   ")
    out.append(json.dumps({"agent": "planner", "kind": "termination", "final_answer": "42",
                           "step": 1000 + 3 * lines}))
    return "\n".join(out) + "\n"


def _live_steps() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Step)


def test_streamed_steps_equal_held_steps(tmp_path: Path) -> None:
    """The same trace, steps, length and audit as the steps held in memory."""
    text = _run(400)
    p = tmp_path / "run.jsonl"
    p.write_text(text, encoding="utf-8")
    held = parse_jsonl(text, file=str(p), run_id="run")
    streamed = load_jsonl(p, stream=True)
    assert isinstance(streamed.steps, FileSteps)
    assert isinstance(load_jsonl(p).steps, tuple)  # small: held (default by size)
    assert streamed == held
    assert list(streamed.steps) == list(held.steps)
    assert streamed.steps[0] == held.steps[0] and streamed.steps[-1] == held.steps[-1]
    assert streamed.steps[3:9] == held.steps[3:9]
    assert streamed.length == held.length
    assert streamed.question == held.question == "What is 6*7? é"
    a, b = audit_trace(streamed), audit_trace(held)
    assert a.summary() == b.summary()
    assert a.diagnoses == b.diagnoses
    assert dict(a.step_events) == dict(b.step_events)
    assert list(a.timeline) == list(b.timeline)


def test_audit_keeps_no_step_alive(tmp_path: Path) -> None:
    """While a streamed run is audited, at most a few Steps are alive; after it, none.

    The same count with the steps held in memory is the whole run (the check can fail).
    """
    p = tmp_path / "run.jsonl"
    p.write_text(_run(3000), encoding="utf-8")
    seen: list[int] = []

    class Counting(FileSteps):
        __slots__ = ()

        def __iter__(self):  # type: ignore[no-untyped-def]
            for k, s in enumerate(super().__iter__()):
                if k % 500 == 0:
                    seen.append(_live_steps())
                yield s

    gc.collect()
    base = _live_steps()
    fs = load_jsonl(p, stream=True)
    assert isinstance(fs.steps, FileSteps)
    counting = object.__new__(Counting)
    for name in (*FileSteps.__slots__, *StepSource.__slots__):
        object.__setattr__(counting, name, getattr(fs.steps, name))
    from dataclasses import replace

    trace = replace(fs, steps=counting)
    result = audit_trace(trace)
    assert len(seen) == 7 and max(seen) - base <= 8, seen
    gc.collect()
    assert _live_steps() - base <= 2  # the result holds the trace, not its steps
    assert result.summary().steps == trace.length > 3000

    held = load_jsonl(p, stream=False)
    assert _live_steps() - base >= 3000
    del held


def test_changed_file_is_refused(tmp_path: Path) -> None:
    """A file changed or removed after the import: a typed error, never another run."""
    p = tmp_path / "run.jsonl"
    p.write_text(_run(20), encoding="utf-8")
    t = load_jsonl(p, stream=True)
    with p.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"agent": "coder", "kind": "output", "content": "late",
                            "step": 99_999}) + "\n")
    with pytest.raises(AdapterError, match="changed after it was imported") as e:
        list(t.steps)
    assert e.value.file == str(p)
    t = load_jsonl(p, stream=True)
    os.unlink(p)
    with pytest.raises(AdapterError, match="cannot read the steps again"):
        audit_trace(t)


def test_stream_argument_checked(tmp_path: Path) -> None:
    p = tmp_path / "run.jsonl"
    p.write_text(_run(2), encoding="utf-8")
    with pytest.raises(AdapterError) as e:
        load_jsonl(p, stream="yes")  # type: ignore[arg-type]
    assert e.value.fields["field"] == "stream"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 60), st.booleans()), max_size=40))
def test_step_events_reads_as_a_dict(items: list[tuple[int, bool]]) -> None:
    """StepEvents answers as the dict it replaces (first event of a step kept)."""
    se = StepEvents()
    ref: dict[int, str] = {}
    for k, plain in items:
        v = f"m{k}" if plain else f"m{k}.ledger"
        se.add(k, v)
        ref.setdefault(k, v)
    assert dict(se) == ref and se == ref and len(se) == len(ref)
    assert list(se) == sorted(ref)
    for k in range(-4, 62):
        assert (k in se) == (k in ref)
        assert se.get(k) == ref.get(k)
    assert "m1" not in se


def test_otlp_steps_are_columns_equal_to_steps() -> None:
    """An OpenTelemetry run's steps are built from columns when read, equal each time."""
    from icore.adapters import parse_otlp

    spans = []
    for i in range(30):
        attrs = [{"key": "openinference.span.kind",
                  "value": {"stringValue": ("AGENT", "LLM", "TOOL")[i % 3]}},
                 {"key": "agent.name", "value": {"stringValue": f"a{i % 2}"}},
                 {"key": "output.value", "value": {"stringValue": f"out {i} é"}}]
        spans.append({"traceId": "1" * 32, "spanId": f"{i + 1:016x}",
                      "parentSpanId": "" if i == 0 else f"{1:016x}", "name": f"s{i}",
                      "startTimeUnixNano": str(10 + i), "endTimeUnixNano": str(100 + i),
                      "attributes": attrs,
                      "status": {"code": 2 if i == 5 else 1}})
    doc = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    t = parse_otlp(doc)
    assert isinstance(t.steps, StepSource) and t.steps.text_valid
    held = tuple(t.steps)
    assert len(held) == len(t.steps) > 25
    assert [s.index for s in held] == list(range(len(held)))
    assert t.steps == held and held == t.steps and t.steps == parse_otlp(doc).steps
    assert t.steps[-1] == held[-1] and t.steps[2:5] == held[2:5]
    assert t.length == len(held)
    assert any(s.exitcode == 1 for s in held) and any(s.exitcode == 0 for s in held)
    assert t.steps[0] is not t.steps[0]  # built when read, not kept


def test_a_file_rewritten_in_place_while_read_is_refused_at_the_end(tmp_path: Path) -> None:
    """Review (#29): the same size and inode, new text mid-iteration: the steps read may
    mix two files, so the read ends in the typed error, never a quiet mixed run."""
    p = tmp_path / "r.jsonl"
    p.write_text(_run(300), encoding="utf-8")
    trace = load_jsonl(p, stream=True)
    it = iter(trace.steps)
    next(it), next(it)
    data = p.read_bytes()
    with open(p, "r+b") as f:  # in place: same inode, same size
        f.write(data.replace(b"turn 2", b"TURN 2"))
    os.utime(p, ns=(os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns + 10**9))
    with pytest.raises(AdapterError, match="changed after it was imported"):
        list(it)


def test_the_cli_reports_the_other_runs_when_one_streamed_file_changes(
        tmp_path: Path) -> None:
    """Review (#29): a streamed run whose file changed after its audit is an error of that
    file; the other runs keep their results (the table, report and --json read steps
    again after every file was audited)."""
    from icore.cli._audit import _still_readable

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(_run(50), encoding="utf-8")
    b.write_text(_run(60), encoding="utf-8")
    results = [audit_trace(load_jsonl(p, stream=True)) for p in (a, b)]
    with a.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"agent": "coder", "kind": "output", "content": "late"}) + "\n")
    errors: list[tuple[str, str]] = []
    kept = _still_readable(results, errors)
    assert [r.trace.file for r in kept] == [str(b)]
    assert len(errors) == 1 and errors[0][0] == str(a) and "changed" in errors[0][1]
