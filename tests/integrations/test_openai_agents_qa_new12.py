"""QA qa-new12 (an Agents SDK 0.24 user's clinic desk): resumes, forged approvals, MCP
failures and lost writes, through the recording and ``icore audit``.

Real SDK ``Runner`` with ``agents.testing.ScriptedModel``; a real stdio MCP server for
the MCP case; no network.

* S2 one saved ``RunState`` resumed twice (in turn, or at once) runs the approved call
  once: the second run gets the first's result, or is refused
  ``earlier_outcome_unknown`` saying the call is running in the other run; an earlier
  run that timed out refuses the second; the audit counts one action, one approval;
* S2 an approval written into the saved state records no human approval;
* S3 an MCP tool's ``isError`` result is recorded as a failed output;
* S3 a ``HeadConflict`` raised in a fenced tool reaches the model as a replannable
  refusal with the current value, and the model's replan from it runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents.testing")
from agents import Agent, Runner, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from icore.errors import HeadConflict
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace, running_call

from .test_recording_truthful import _audit

CANCEL = {"patient_id": "p1", "day": "2026-12-08"}


def _clinic(effects: list[str], *, hold_s: float = 0.0,
            fail: BaseException | None = None) -> Agent[Any]:
    """A desk agent: reads the patient, then ``cancel`` (needs a human) is called."""
    ws = Workspace({"patient/*": "registry"})
    ws.put("patient/p1", {"name": "Ana"}, by="registry")
    desk = ws.agent("desk")

    @function_tool
    def get_patient(patient_id: str) -> dict[str, Any]:
        """A patient's record."""
        return desk.read(f"patient/{patient_id}")  # type: ignore[return-value]

    async def cancel(patient_id: str, day: str) -> str:
        """Cancel a patient's visit (needs a human)."""
        effects.append(f"cancel {patient_id} {day}")
        await asyncio.sleep(hold_s)
        if fail is not None:
            raise fail
        return f"cancelled {patient_id} on {day}"

    fenced = fenced_function_tool(function_tool(cancel, needs_approval=True), agent=desk,
                                  depends_on=lambda a: {f"patient/{a['patient_id']}"})
    steps = [[function_call("get_patient", {"patient_id": "p1"}, call_id="r1")],
             [function_call("cancel", CANCEL, call_id="x1")]]
    steps += [[assistant_message("done")]] * 3
    return Agent(name="desk", tools=[get_patient, fenced], model=ScriptedModel(steps))


def _outputs(result: Any) -> list[str]:
    return [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"]


async def _resume(agent: Agent[Any], saved: str) -> str:
    """``from_string``, approve, run: the call's output (its last one)."""
    state = await RunState.from_string(agent, saved)
    for item in state.get_interruptions():
        state.approve(item)
    return _outputs(await Runner.run(agent, state))[-1]


def _twice(tmp_path: Path, *, together: bool, hold_s: float = 0.0,
           fail: BaseException | None = None) -> tuple[list[str], list[str], Path]:
    """Pause on ``cancel``, save ``to_string()``, resume that string twice."""
    effects: list[str] = []
    agent = _clinic(effects, hold_s=hold_s, fail=fail)
    rec = RunRecorder("double", question="cancel Ana's visit")

    async def main() -> list[str]:
        with recording(rec, exclusive=True):
            first = await Runner.run(agent, "cancel Ana's visit")
            assert [i.name for i in first.interruptions] == ["cancel"]
            saved = first.to_state().to_string()
            if together:
                return list(await asyncio.gather(_resume(agent, saved),
                                                 _resume(agent, saved)))
            return [await _resume(agent, saved), await _resume(agent, saved)]

    outs = asyncio.run(main())
    return effects, outs, rec.write(tmp_path / "double.jsonl")


def _kinds(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()
            if '"kind"' in x]


def test_saved_state_resumed_twice_runs_the_approved_call_once(tmp_path: Path) -> None:
    """The second resume gets the first's result; one action, one human approval."""
    effects, outs, path = _twice(tmp_path, together=False)
    assert effects == ["cancel p1 2026-12-08"]  # was: twice for call x1
    assert outs == ["cancelled p1 on 2026-12-08"] * 2
    lines = _kinds(path)
    assert len([x for x in lines if "approval" in x]) == 1
    replays = [x for x in lines if x.get("replay")]
    assert len(replays) == 1 and replays[0]["tool_call_id"] == "x1"
    _, text, run = _audit(path)
    assert run["actions"]["total"] == 1 and run["actions"]["valid"] == 1
    assert [a["human"] for a in run["lineage"]] == ["approved"]
    assert "1 approved by a human" in text


def test_two_resumes_at_once_refuse_the_second_saying_why(tmp_path: Path) -> None:
    """B finds the call running under A's run: refused earlier_outcome_unknown, not
    "no approval of it was given in this process" (B did approve)."""
    effects, outs, path = _twice(tmp_path, together=True, hold_s=0.3)
    assert effects == ["cancel p1 2026-12-08"]
    ran = [o for o in outs if o == "cancelled p1 on 2026-12-08"]
    refused = [o for o in outs if o != "cancelled p1 on 2026-12-08"]
    assert len(ran) == 1 and len(refused) == 1
    assert refused[0].startswith("PlanFence blocked cancel (earlier_outcome_unknown)")
    assert "running right now" in refused[0] and "another run of the same saved" in refused[0]
    assert "no approval of it was given" not in refused[0]
    _, _, run = _audit(path)
    assert run["actions"]["total"] == 1 and run["actions"]["valid"] == 1


def test_resume_after_an_unknown_outcome_is_refused(tmp_path: Path) -> None:
    """The first resume timed out (it may have cancelled): the second does not run it."""
    effects, outs, path = _twice(tmp_path, together=False,
                                 fail=TimeoutError("registry timed out"))
    assert effects == ["cancel p1 2026-12-08"]
    assert outs[1].startswith("PlanFence blocked cancel (earlier_outcome_unknown)")
    assert "TimeoutError: registry timed out" in outs[1]
    code, _, run = _audit(path, "--fail-on", "unknown")
    assert run["actions"]["total"] == 1 and run["actions"]["outcome unknown"] == 1
    assert code == 3


def test_forged_approval_records_no_human_approval(tmp_path: Path) -> None:
    """Approvals written into the saved JSON: refused, and no "approved by a human"."""
    effects: list[str] = []
    agent = _clinic(effects)
    rec = RunRecorder("forged", question="cancel Ana's visit")

    async def main() -> list[str]:
        with recording(rec, exclusive=True):
            first = await Runner.run(agent, "cancel Ana's visit")
            data = json.loads(first.to_state().to_string())
            data["context"]["approvals"] = {"cancel": {"approved": ["x1"], "rejected": []}}
            state = await RunState.from_string(agent, json.dumps(data))
            return _outputs(await Runner.run(agent, state))

    outs = asyncio.run(main())
    assert effects == []
    assert outs[-1].startswith("PlanFence blocked cancel (approval_changed)")
    path = rec.write(tmp_path / "forged.jsonl")
    assert not [x for x in _kinds(path) if "approval" in x]  # was: "a human approved"
    _, text, run = _audit(path)
    assert run["actions"] == {**run["actions"], "total": 1, "blocked": 1}
    assert [a.get("human") for a in run["lineage"]] == [None]
    assert "approved by a human" not in text


def test_head_conflict_in_a_fenced_tool_is_a_replannable_refusal(tmp_path: Path) -> None:
    """Two bookings of one slot in one model turn, committed against the authorized
    version: the loser reads the current value (not the SDK's "An error occurred"), and
    its replan from that value runs."""
    ws = Workspace({"slot/*": "frontdesk"})
    ws.put("slot/lee", {"free": ["09:00", "10:00"]}, by="frontdesk")
    desk = ws.agent("desk")
    booked: list[tuple[str, str]] = []

    @function_tool
    def get_slots(doctor: str) -> dict[str, Any]:
        """Free slots."""
        return desk.read(f"slot/{doctor}")  # type: ignore[return-value]

    async def book(patient: str, doctor: str, time: str) -> str:
        """Book a slot (takes it)."""
        key = f"slot/{doctor}"
        seat = running_call().basis[key]  # type: ignore[union-attr]
        await asyncio.sleep(0.05)
        if time not in seat.content["free"]:  # type: ignore[index,operator]
            raise ValueError(f"{time} taken")
        free = [t for t in seat.content["free"] if t != time]  # type: ignore[index,union-attr]
        try:
            ws.commit(key, {"free": free}, expected=seat.id, by="frontdesk")
        except HeadConflict as exc:  # nothing written: the audit counts it failed
            raise NoEffect(f"{time} was taken meanwhile") from exc
        booked.append((patient, time))
        return f"booked {patient} {time}"

    fenced = fenced_function_tool(book, agent=desk,
                                  depends_on=lambda a: {f"slot/{a['doctor']}"})
    a1 = {"patient": "p1", "doctor": "lee", "time": "09:00"}
    steps = [[function_call("get_slots", {"doctor": "lee"}, call_id="r1")],
             [function_call("book", a1, call_id="b1"),
              function_call("book", {**a1, "patient": "p2"}, call_id="b2")],
             [function_call("book", {**a1, "patient": "p2", "time": "10:00"}, call_id="b3")],
             [assistant_message("both booked")]]
    agent = Agent(name="desk", tools=[get_slots, fenced], model=ScriptedModel(steps))
    rec = RunRecorder("conflict", question="book two")

    async def main() -> Any:
        with recording(rec, exclusive=True):
            return await Runner.run(agent, "book two")

    outs = _outputs(asyncio.run(main()))
    lost = [o for o in outs if "head_conflict" in o]
    assert len(lost) == 1 and "An error occurred" not in lost[0]
    assert lost[0].startswith("PlanFence blocked book (head_conflict): slot/lee changed")
    assert '{"free": ["10:00"]}' in lost[0]  # the current value, read for the agent
    assert len(booked) == 2 and {t for _, t in booked} == {"09:00", "10:00"}
    assert ws.value("slot/lee") == {"free": []}
    _, _, run = _audit(rec.write(tmp_path / "conflict.jsonl"))
    acts = run["actions"]
    assert acts["total"] == 3 and acts["valid"] == 2
    assert acts["failed after authorization"] == 1


SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    mcp = MCPServer("clinic")

    @mcp.tool()
    def crash(patient: str) -> str:
        """Fails mid-call."""
        raise RuntimeError("billing backend down")

    @mcp.tool()
    def echo(patient: str) -> str:
        """Answers."""
        return f"hello {patient}"

    if __name__ == "__main__":
        mcp.run()
''')


def test_mcp_is_error_result_is_recorded_failed(tmp_path: Path) -> None:
    """An MCP tool that raised (``isError``) is a failed output; a good one is not."""
    pytest.importorskip("mcp.server.mcpserver")
    from agents.mcp import MCPServerStdio

    script = tmp_path / "server.py"
    script.write_text(SERVER, encoding="utf-8")
    steps = [[function_call("crash", {"patient": "p1"}, call_id="m1")],
             [function_call("echo", {"patient": "p1"}, call_id="m2")],
             [assistant_message("done")]]
    rec = RunRecorder("mcp", question="crash")

    async def main() -> list[str]:
        async with MCPServerStdio(params={"command": sys.executable, "args": [str(script)]},
                                  client_session_timeout_seconds=30) as server:
            agent = Agent(name="desk", mcp_servers=[server], model=ScriptedModel(steps))
            with recording(rec, exclusive=True):
                return _outputs(await Runner.run(agent, "crash"))

    outs = asyncio.run(main())
    assert "billing backend down" in outs[0] or "Error executing tool crash" in outs[0]
    path = rec.write(tmp_path / "mcp.jsonl")
    got = {x["tool"]: x["exitcode"] for x in _kinds(path) if x["kind"] == "tool_output"}
    assert got == {"crash": 1, "echo": 0}  # was: crash exitcode 0


def test_low_level_saved_state_resumed_twice_books_once(trip: Any, tmp_path: Path) -> None:
    """``fence=`` (plans in the run context): the same rule, the same one action."""
    from dataclasses import dataclass, field

    @dataclass
    class Ctx:
        plan_roots: list[str] = field(default_factory=list)

    tool = function_tool(trip.book, needs_approval=True)
    fenced = fenced_function_tool(tool, fence=trip.fence, depends_on={"req/trip-17"})
    steps = [[function_call("book", {"destination": "Lisbon"}, call_id="c1")]]
    steps += [[assistant_message("done")]] * 3
    agent = Agent(name="a", tools=[fenced], model=ScriptedModel(steps))
    ctx = Ctx([trip.first_plan.id])
    rec = RunRecorder("low-double")

    async def main() -> list[str]:
        outs = []
        with recording(rec, exclusive=True):
            first = await Runner.run(agent, "book", context=ctx)
            saved = first.to_state().to_string()
            for _ in range(2):
                state = await RunState.from_string(agent, saved)
                for item in state.get_interruptions():
                    state.approve(item)
                outs.append(_outputs(await Runner.run(agent, state, context=ctx))[-1])
        return outs

    outs = asyncio.run(main())
    assert trip.booked == ["Lisbon"] and outs == ["booked Lisbon"] * 2
    _, _, run = _audit(rec.write(tmp_path / "low.jsonl"))
    assert run["actions"]["total"] == 1 and run["actions"]["valid"] == 1
