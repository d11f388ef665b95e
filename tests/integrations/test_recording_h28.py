"""Recorded runs tell the truth under failure and concurrency (QA qa-oai, issue 28).

A real Agents SDK ``Agent`` / ``Runner`` with the examples' scripted ``Model`` (no
network), and a LangGraph ``ToolNode`` for the shared guard: two concurrent recorded
runs keep their own traces; a fenced tool that fails or is cancelled after its
authorization is recorded as failed (``exitcode: 1``), its gate decision kept;
``RunRecorder.write`` never replaces a file icore did not write.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import assistant_message, function_call

from icore.errors import IntegrationError
from icore.integrations import FenceGuard, RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace

from .conftest import load_example


def _model(turns: Any) -> Any:
    return load_example("openai_agents_app").ScriptModel(iter(turns))


def _desk() -> tuple[Workspace, Any, Any]:
    ws = Workspace({"fare/*": "airline"})
    ws.put("fare/LH100", {"price": 200}, by="airline")
    desk = ws.agent("desk")

    @function_tool
    def get_fare(flight: str) -> str:
        """The fare."""
        return json.dumps(desk.read(f"fare/{flight}"))

    return ws, desk, get_fare


def _dep(a: dict[str, Any]) -> set[str]:
    return {f"fare/{a['flight']}"}


def _booker(name: str, tool: Any, get_fare: Any) -> Agent[Any]:
    return Agent(name=name, tools=[get_fare, tool], model=_model([
        [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
        [function_call(tool.name, {"flight": "LH100"}, call_id="c2")],
        [assistant_message(f"done for {name}")]]))


def test_two_concurrent_recorded_runs_keep_their_own_traces() -> None:
    """Each run in its own exclusive block: every line lands in its own recorder."""
    recs: dict[str, RunRecorder] = {}

    async def one(name: str) -> None:
        _ws, desk, get_fare = _desk()

        def book(flight: str) -> str:
            """Book."""
            return f"{name} booked {flight}"

        agent = _booker(name, fenced_function_tool(book, agent=desk, depends_on=_dep),
                        get_fare)
        rec = recs[name] = RunRecorder(name)
        with recording(rec, exclusive=True):
            await asyncio.sleep(0)
            await Runner.run(agent, f"task for {name}")
            await asyncio.sleep(0)

    async def both() -> None:
        await asyncio.gather(one("alice"), one("bob"))

    asyncio.run(both())
    for name, other in (("alice", "bob"), ("bob", "alice")):
        ev = recs[name].events
        assert {e["agent"] for e in ev} == {name, "user"}
        assert [e["content"] for e in ev if e["kind"] == "task"] == [f"task for {name}"]
        assert [e["final_answer"] for e in ev if e["kind"] == "termination"] == [
            f"done for {name}"]
        assert other not in recs[name].jsonl()


def test_concurrent_blocks_restore_the_processors() -> None:
    """Overlapping exclusive blocks: the earlier processors come back after the last."""
    from agents.tracing import get_trace_provider

    provider = get_trace_provider()
    before = list(provider._multi_processor._processors)
    a, b = RunRecorder("a"), RunRecorder("b")
    with recording(a, exclusive=True) as pa:
        with recording(b, exclusive=True) as pb:
            now = list(provider._multi_processor._processors)
            assert now == [pa, pb]
        assert list(provider._multi_processor._processors) == [pa]
    assert list(provider._multi_processor._processors) == before


def test_tool_raising_after_authorization_is_recorded_as_failed(tmp_path: Path) -> None:
    """The SDK hands the model an error text; the trace says the call failed."""
    _ws, desk, get_fare = _desk()

    def boom(flight: str) -> str:
        """Explodes after authorization."""
        raise RuntimeError("carrier down")

    agent = _booker("booker", fenced_function_tool(boom, agent=desk, depends_on=_dep),
                    get_fare)
    rec = RunRecorder("boom")
    with recording(rec, exclusive=True):
        res = asyncio.run(Runner.run(agent, "go"))
    outs = [str(i.output) for i in res.new_items if i.type == "tool_call_output_item"]
    # the model reads that the call may have run (QA qa-new13a S3), not "Please try again"
    assert "boom failed with RuntimeError: carrier down; it may have run" in outs[1]
    gate = [e["gate"] for e in rec.events if e.get("gate")]
    ran = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "boom"]
    assert [g["outcome"] for g in gate] == ["authorized"]
    assert len(ran) == 1 and ran[0]["exitcode"] == 1 and ran[0]["failed"] is True
    assert ran[0]["content"].startswith("ERROR: ")


def test_cancelled_tool_keeps_its_authorized_gate_decision() -> None:
    """A run cancelled while an authorized tool runs (Ctrl-C) still shows the action."""
    _ws, desk, get_fare = _desk()
    started = asyncio.Event()

    async def slow(flight: str) -> str:
        """Slow booking."""
        started.set()
        await asyncio.sleep(60)
        return "done"

    agent = _booker("booker", fenced_function_tool(slow, agent=desk, depends_on=_dep),
                    get_fare)
    rec = RunRecorder("ctrlc")

    async def go() -> None:
        with recording(rec, exclusive=True):
            task = asyncio.ensure_future(Runner.run(agent, "go"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    gate = [e["gate"]["outcome"] for e in rec.events if e.get("gate")]
    ran = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "slow"]
    assert gate == ["authorized"]
    assert ran[0]["exitcode"] == 1 and "CancelledError" in ran[0]["content"]
    assert any(ln.get("planfence", {}).get("decision", {}).get("outcome") == "authorized"
               for ln in map(json.loads, rec.jsonl().splitlines()))


def test_guard_records_a_raising_tool_then_raises_it() -> None:
    """The framework-neutral guard (LangGraph, AG2, CrewAI): recorded, then re-raised."""
    ws = Workspace({"fare/*": "airline"})
    ws.put("fare/LH100", {"price": 200}, by="airline")
    desk = ws.agent("desk")
    desk.read("fare/LH100")
    rec = RunRecorder("guard")
    guard = FenceGuard(agent=desk, depends_on=_dep, recorder=rec)

    def boom(flight: str) -> str:
        raise ValueError("no seats")

    with pytest.raises(ValueError, match="no seats"):
        guard.run("boom", boom, {"flight": "LH100"})
    ran = [e for e in rec.events if e["kind"] == "tool_output"]
    assert ran[0]["exitcode"] == 1 and ran[0]["error_text"] == "ValueError: no seats"
    with pytest.raises(Exception, match="do not fit"):  # still checked before the gate
        guard.run("boom", boom, {"flight": "LH100", "extra": 1})


def test_write_refuses_a_file_icore_did_not_write(tmp_path: Path) -> None:
    """A user's file is never replaced; icore's own earlier trace is moved aside."""
    rec = RunRecorder("w")
    rec.task("go")
    src = tmp_path / "app.py"
    src.write_text("print('mine')\n")
    with pytest.raises(IntegrationError, match="did not write") as err:
        rec.write(src)
    assert str(src) in str(err.value) and src.read_text() == "print('mine')\n"
    out = rec.write(tmp_path / "run.jsonl")
    rec.task("again")
    first = out.read_text()
    rec.write(out)  # ours, unchanged since: kept as run-1.jsonl (qa-fw7 S3)
    assert "again" in out.read_text() and (tmp_path / "run-1.jsonl").read_text() == first
    out.write_text("edited by hand\n")
    with pytest.raises(IntegrationError, match="changed since"):
        rec.write(out)
    rec.write(src, overwrite=True)
    assert "run" in json.loads(src.read_text().splitlines()[0])  # a trace's header
    notes = tmp_path / "notes.py"  # overwrite=True replaces a link, never writes through it
    notes.write_text("mine\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(notes)
    rec.write(link, overwrite=True)
    assert notes.read_text() == "mine\n" and not link.is_symlink()
    assert "run" in json.loads(link.read_text().splitlines()[0])  # a trace's header


def test_report_links_a_stale_call_to_its_replan_and_counts_it(tmp_path: Path) -> None:
    """The model's call is the plan: the refused stale call and the next call are one
    replan; the report links them, the trace says ``replanned`` on every replan line,
    and the index counts the run's protected, blocked and replanned actions."""
    from icore.report import index_from_audits, trace_lineage

    ws, desk, _ = _desk()
    booked: list[int] = []

    @function_tool
    def get_fare(flight: str) -> str:
        """The fare (the airline revises it right after this read)."""
        seen = json.dumps(desk.read(f"fare/{flight}"))
        ws.put(f"fare/{flight}", {"price": 260}, by="airline")
        return seen

    def book(flight: str, price: int) -> str:
        """Book."""
        booked.append(price)
        return f"booked {flight} at {price}"

    agent = Agent(name="booker", tools=[get_fare, fenced_function_tool(
        book, agent=desk, depends_on=_dep)], model=_model([
            [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
            [function_call("book", {"flight": "LH100", "price": 200}, call_id="c2")],
            [function_call("book", {"flight": "LH100", "price": 260}, call_id="c3")],
            [assistant_message("booked at 260")]]))
    rec = RunRecorder("replan")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(agent, "book LH100"))
    assert booked == [260]
    lines = [e for e in rec.events if e.get("tool") == "book" or e.get("gate")]
    assert [e["gate"]["replanned"] for e in lines if e.get("gate")] == [False, True]
    assert [e.get("replanned") for e in lines if e["kind"] == "tool_output"
            and not e.get("blocked")] == [True]
    stale, again = trace_lineage(rec.trace().extras["planfence"])
    assert stale.reason.startswith(f"stale → replanned as {again.id}, valid")
    assert again.reason.startswith(f"replan of {stale.id} (stale)")
    index = index_from_audits([rec.audit()])
    row = dict(zip(index.columns[1:], index.rows[0].cells, strict=True))
    assert (row["protected actions"], row["blocked"], row["replans"]) == ("2", "1", "1")


def test_a_human_rejection_is_not_a_fail_closed_block() -> None:
    """A decision refused ``approval_rejected`` reads as a human's rejection, one period."""
    from icore.report import trace_lineage

    (lv,) = trace_lineage({"records": [], "decisions": [{
        "action": "book", "task": "book-1", "outcome": "blocked", "policy": "approval",
        "reason": "approval_rejected", "detail": "Tool execution was not approved."}]})
    assert lv.reason == ("REJECTED by a human (policy approval): the call did not run — "
                         "Tool execution was not approved.")


def test_report_shows_control_and_bidi_characters_in_keys_escaped() -> None:
    """A key holding U+202E or a newline is shown escaped in the lineage, not raw."""
    from icore.report import trace_lineage

    key = "fare/\u202eLH\n100"
    rid = "a" * 64
    (lv,) = trace_lineage({"records": [{"id": rid, "key": key, "owner": "airline",
                                        "seq": 1, "type": "fact", "parents": []}],
                           "decisions": [{"action": "book", "task": "book-1",
                                          "outcome": "authorized", "reason": "valid",
                                          "deps": [key], "frontier": {key: rid},
                                          "heads": {key: rid}, "roots": [rid]}]})
    shown = "fare/\\u202eLH\\n100"
    assert [r.key for r in lv.records] == [shown]
    assert lv.points[0].deps == (shown,) and dict(lv.points[0].frontier) == {shown: rid}
    assert "\u202e" not in repr(lv)


_WRITER = """
import sys
from icore.integrations import RunRecorder
rec = RunRecorder(sys.argv[2]); rec.task(sys.argv[2]); rec.write(sys.argv[1])
"""


def test_concurrent_writes_of_one_path_lose_no_trace(tmp_path: Path) -> None:
    """Reruns and 4 concurrent runs (threads, then processes) writing one path: every
    trace is kept (QA qa-fw7 S3: 3 of 4 were lost), the newest at the path."""
    import subprocess
    import sys
    import threading

    out = tmp_path / "run.jsonl"

    def write(i: int) -> None:
        rec = RunRecorder(f"t{i}")
        rec.task(f"t{i}")
        rec.write(out)

    ts = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(out), f"p{i}"],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
             for i in range(4)]
    assert [p.wait(60) for p in procs] == [0] * 4
    traces = sorted(tmp_path.glob("run*.jsonl"))
    ids = sorted(json.loads(t.read_text().splitlines()[0])["run"]["id"] for t in traces)
    assert ids == [f"p{i}" for i in range(4)] + [f"t{i}" for i in range(4)]
