"""An Agents SDK run state paused for approval, resumed in another process (QA qa-new16 S3).

A real app process (a scripted model: ``get_load`` then the fenced ``dispatch_truck``
with ``needs_approval=True``) on a ``Workspace.sqlite`` folder pauses for the human and
saves its ``RunState.to_json``; a second process loads it with ``RunState.from_json``,
the human approves there (``state.approve``) and the run goes on. The call was refused
``not_read`` (the reads lived in the first process); now the request put to the human
is kept in the folder: heads unchanged, the call runs once and its trace links the
approval to the request; a head moved meanwhile, it is refused ``stale`` with the fresh
value (nothing runs). Real processes, real SQLite files, the real Agents SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents.testing")

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")

APP = r'''
import asyncio, json, os, sys
from agents import Agent, Runner, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace
PHASE, DB, TRACE = sys.argv[1:4]
ws = Workspace.sqlite({"load/*": "planning"}, DB)
if ws.head("load/L7") is None:
    ws.put("load/L7", {"dock": "D3"}, by="planning")
disp = ws.agent("dispatcher")
@function_tool
def get_load(load_id: str) -> str:
    """Read a load."""
    return json.dumps(disp.read(f"load/{load_id}"))
def dispatch_truck(load_id: str, dock: str) -> str:
    """Send a truck."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} dispatch {load_id} {dock}\n")
    return f"sent to {dock}"
safe = fenced_function_tool(function_tool(dispatch_truck, needs_approval=True), agent=disp,
                            depends_on=lambda a: {f"load/{a['load_id']}"})
model = ScriptedModel([
    [function_call("get_load", {"load_id": "L7"}, call_id="c1")],
    [function_call("dispatch_truck", {"load_id": "L7", "dock": "D3"}, call_id="c2")],
    [assistant_message("done")], [assistant_message("done")]])
agent = Agent(name="dispatcher", instructions="Dispatch.", tools=[get_load, safe],
              model=model)
saved = os.path.join(DB, "state.json")
async def main():
    with RunRecorder(f"sdk-{PHASE}", path=TRACE) as rec, recording(rec):
        if PHASE == "run":
            res = await Runner.run(agent, "dispatch L7")
            with open(saved, "w") as f:
                json.dump(res.to_state().to_json(), f)
            print("PAUSED", len(res.interruptions))
            return
        if PHASE == "moved":  # another agent moves the load while the human decides
            ws.update("load/L7", lambda v: {**v, "dock": "D9"})
        with open(saved) as f:
            state = await RunState.from_json(agent, json.load(f))
        for item in state.get_interruptions():
            state.approve(item)  # the human's yes, given in this process
        res = await Runner.run(agent, state)
        for i in res.new_items:
            if i.type == "tool_call_output_item":
                print("TOOL", i.raw_item["call_id"], str(i.output).replace("\n", " "))
asyncio.run(main())
'''


def _run(tmp_path: Path, phase: str, trace: str) -> str:
    app = tmp_path / "app.py"
    app.write_text(APP)
    done = subprocess.run([sys.executable, str(app), phase, str(tmp_path / "db"),
                           str(tmp_path / trace)], env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "db" / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def test_approved_in_another_process_runs_once(tmp_path: Path) -> None:
    assert "PAUSED 1" in _run(tmp_path, "run", "t1.jsonl")
    out = _run(tmp_path, "approve", "t2.jsonl")
    assert "TOOL c2 sent to D3" in out.splitlines(), out
    assert _effects(tmp_path) == ["approve dispatch L7 D3"]
    lines = [json.loads(x) for x in (tmp_path / "t2.jsonl").read_text().splitlines()]
    [said] = [x for x in lines if isinstance(x.get("approval"), dict)]
    assert said["approval"]["approved"] is True and said["approval"]["request"]
    again = _run(tmp_path, "approve", "t3.jsonl")  # the saved state resumed once more
    assert _effects(tmp_path) == ["approve dispatch L7 D3"], again


def test_moved_while_the_human_decided_is_refused_stale(tmp_path: Path) -> None:
    _run(tmp_path, "run", "t1.jsonl")
    out = _run(tmp_path, "moved", "t2.jsonl")
    c2 = [x for x in out.splitlines() if x.startswith("TOOL c2 ")]
    assert len(c2) == 1 and "(stale)" in c2[0] and "D9" in c2[0], out
    assert _effects(tmp_path) == []
