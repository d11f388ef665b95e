"""The human's answer to a fenced Agents SDK call, given in another process (QA qa-new18a).

Real app processes (a model with generation spans that calls ``get_order`` twice, then
``refund`` twice with ``needs_approval=True``) on a ``Workspace.sqlite`` folder: the
first pauses and saves ``RunState.to_json``; a second loads it with ``from_json`` and
answers there. Checked: a rejection is recorded in the second trace naming the call and
the run that asked (#2), an approval carries the ``resumed`` link (#7), a resume that
answers one of two calls records its pause again and no false ``unseen_model`` note
(#5), a corrupt attempts file raises the typed ``StoreError`` naming the path (#4) and
a deleted one says where the kept request was looked for (#10). Real processes, real
SQLite files, the real Agents SDK, and ``python -m icore audit`` on the traces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents")

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")

APP = r'''
import asyncio, json, os, sys
from agents import Agent, Model, ModelResponse, Runner, RunState, Usage, function_tool
from agents.testing import assistant_message, function_call
from agents.tracing import generation_span
from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace
PHASE, DB, TRACE, ONLY = sys.argv[1:5]

class Scripted(Model):  # a model that traces its turns (input and output)
    def __init__(self, turns):
        self.turns = iter(turns)
    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **kw):
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        with generation_span(model="scripted", input=items) as span:
            out = next(self.turns, [assistant_message("done")])
            span.span_data.output = [o.model_dump() for o in out]
            return ModelResponse(output=out, usage=Usage(), response_id=None)
    def stream_response(self, *a, **k):
        raise NotImplementedError

ws = Workspace.sqlite({"order/*": "sales"}, DB)
if ws.head("order/1") is None:
    ws.put("order/1", {"total": 40.0}, by="sales")
    ws.put("order/2", {"total": 15.5}, by="sales")
desk = ws.agent("desk")
@function_tool
def get_order(order_id: str) -> str:
    """Read an order."""
    return json.dumps(desk.read(f"order/{order_id}"))
def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"refund {order_id} {amount}\n")
    return f"refunded {amount}"
safe = fenced_function_tool(function_tool(refund, needs_approval=True), agent=desk,
                            depends_on=lambda a: {f"order/{a['order_id']}"})
turns = [[function_call("get_order", {"order_id": "1"}, call_id="r1"),
          function_call("get_order", {"order_id": "2"}, call_id="r2")],
         [function_call("refund", {"order_id": "1", "amount": 40.0}, call_id="c1"),
          function_call("refund", {"order_id": "2", "amount": 15.5}, call_id="c2")]]
agent = Agent(name="desk", instructions="Refunds.", tools=[get_order, safe],
              model=Scripted(turns if PHASE == "ask" else []))
saved = os.path.join(DB, "state.json")
async def main():
    rec = RunRecorder(f"desk-{PHASE}", path=TRACE)
    try:
        with recording(rec, exclusive=True):
            if PHASE == "ask":
                res = await Runner.run(agent, "refund both")
            else:
                with open(saved) as f:
                    state = await RunState.from_json(agent, json.load(f))
                for n, item in enumerate(state.get_interruptions()):
                    if ONLY in ("all", str(n)):
                        (state.reject if PHASE == "reject" else state.approve)(item)
                try:
                    res = await Runner.run(agent, state)
                except Exception as exc:
                    from icore.errors import StoreError
                    print("RAISED", type(exc).__name__, isinstance(exc, StoreError),
                          json.dumps(getattr(exc, "fields", {}), default=str))
                    return
        with open(saved, "w") as f:
            json.dump(res.to_state().to_json(), f)
        print("PAUSED", len(res.interruptions))
        for i in res.new_items:
            if i.type == "tool_call_output_item":
                print("TOOL", i.raw_item["call_id"], str(i.output).replace("\n", " "))
    finally:
        rec.close()
asyncio.run(main())
'''


def _run(tmp_path: Path, phase: str, trace: str, only: str = "all") -> str:
    app = tmp_path / "app.py"
    app.write_text(APP)
    done = subprocess.run([sys.executable, str(app), phase, str(tmp_path / "db"),
                           str(tmp_path / trace), only],
                          env={**os.environ, "PYTHONPATH": SRC, "OPENAI_API_KEY": "x"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _audit(tmp_path: Path, *traces: str) -> str:
    done = subprocess.run([sys.executable, "-m", "icore", "audit", *traces],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + done.stderr


def _effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "db" / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_rejection_in_another_process_is_recorded(tmp_path: Path) -> None:
    assert "PAUSED 2" in _run(tmp_path, "ask", "t1.jsonl")
    out = _run(tmp_path, "reject", "t2.jsonl")
    assert "PAUSED 0" in out and _effects(tmp_path) == [], out
    lines = _lines(tmp_path / "t2.jsonl")
    said = [x for x in lines if x.get("answered_by") == "human"]
    assert [(x["decision"], x["tool_call_id"]) for x in said] == [("reject", "c1"),
                                                                   ("reject", "c2")]
    assert said[0]["resumed"] == {"run": "desk-ask", "tool_call_id": "c1", "request": None}
    assert said[0]["args"] == {"order_id": "1", "amount": 40.0}
    refused = [x for x in lines if x.get("kind") == "tool_output" and x.get("blocked")]
    assert [x["tool_call_id"] for x in refused] == ["c1", "c2"]
    assert all(x["decision"] == "reject" for x in refused)
    report = _audit(tmp_path, "t1.jsonl", "t2.jsonl")
    assert "2 rejected by a human" in report, report
    assert "lines removed" not in report, report


def test_an_approval_names_the_run_that_asked_and_a_second_pause(tmp_path: Path) -> None:
    _run(tmp_path, "ask", "t1.jsonl")
    out = _run(tmp_path, "approve", "t2.jsonl", only="0")  # c1 only: c2 still waits
    assert "PAUSED 1" in out and _effects(tmp_path) == ["refund 1 40.0"], out
    lines = _lines(tmp_path / "t2.jsonl")
    [yes] = [x for x in lines if isinstance(x.get("approval"), dict)]
    assert yes["tool_call_id"] == "c1"
    assert yes["resumed"]["run"] == "desk-ask" and yes["resumed"]["tool_call_id"] == "c1"
    assert yes["resumed"]["request"] == yes["approval"]["request"]
    [pause] = [x for x in lines if x.get("pause")]
    assert pause["approvals"] == [{"tool": "refund", "args": {"order_id": "2",
                                                              "amount": 15.5}}]
    assert not [x for x in lines if x.get("unseen_model")]
    report = _audit(tmp_path, "t2.jsonl")
    assert "did not end" not in report and "paused, waiting for a human" in report, report


def test_a_corrupt_attempts_file_raises_the_typed_error(tmp_path: Path) -> None:
    _run(tmp_path, "ask", "t1.jsonl")
    db = tmp_path / "db"
    (db / "icore-attempts.sqlite").write_bytes(os.urandom(100) + b"not sqlite")
    for extra in db.glob("icore-attempts.sqlite-*"):
        extra.unlink()
    out = _run(tmp_path, "approve", "t2.jsonl", only="0")
    assert out.startswith("RAISED AgentsStoreError True"), out
    fields = json.loads(out.split(" ", 3)[3])
    assert fields["path"].endswith("icore-attempts.sqlite") and "move the file" in fields["fix"]
    assert _effects(tmp_path) == []
    lines = _lines(tmp_path / "t2.jsonl")
    assert [x["reason"] for x in lines if x.get("kind") == "tool_output"] == ["store_failed"]
    assert not [x for x in lines if x.get("unseen_model")]
    report = _audit(tmp_path, "t2.jsonl")
    assert "lines removed" not in report, report


def test_a_deleted_attempts_file_says_the_request_was_not_found(tmp_path: Path) -> None:
    _run(tmp_path, "ask", "t1.jsonl")
    for f in (tmp_path / "db").glob("icore-attempts.sqlite*"):
        f.unlink()
    out = _run(tmp_path, "approve", "t2.jsonl", only="0")
    [c1] = [x for x in out.splitlines() if x.startswith("TOOL c1 ")]
    assert "(not_read)" in c1 and "was not found in" in c1, out
    assert "icore-attempts.sqlite (table pending_approvals" in c1
    assert _effects(tmp_path) == []


def test_a_rejection_in_a_second_recording_block_is_recorded_once() -> None:
    """One process, two ``recording()`` blocks (a web handler per request): the
    rejection given between them is recorded by the second block's run, once; one block
    around both runs records it once too (its processor saw the pause)."""
    import asyncio

    from agents import Agent, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from icore.integrations import RunRecorder
    from icore.integrations.openai_agents import fenced_function_tool, recording
    from icore.workspace import Workspace

    def answers(split: bool) -> list[tuple[object, ...]]:
        ws = Workspace({"order/*": "sales"})
        ws.put("order/1", {"total": 40.0}, by="sales")
        desk = ws.agent("desk")

        @function_tool
        def get_order(order_id: str) -> str:
            """Read an order."""
            return json.dumps(desk.read(f"order/{order_id}"))

        def refund(order_id: str) -> str:
            """Refund."""
            return "refunded"

        safe = fenced_function_tool(function_tool(refund, needs_approval=True), agent=desk,
                                    depends_on=lambda a: {f"order/{a['order_id']}"})
        agent = Agent(name="desk", tools=[get_order, safe], model=ScriptedModel([
            [function_call("get_order", {"order_id": "1"}, call_id="r1")],
            [function_call("refund", {"order_id": "1"}, call_id="k1")],
            [assistant_message("not refunded")]]))
        rec = RunRecorder("rej")

        async def go() -> None:
            with recording(rec, exclusive=True):
                first = await Runner.run(agent, "refund 1")
                if not split:
                    state = first.to_state()
                    state.reject(first.interruptions[0])
                    await Runner.run(agent, state)
            if split:
                state = first.to_state()
                state.reject(first.interruptions[0])
                with recording(rec, exclusive=True):
                    await Runner.run(agent, state)

        asyncio.run(go())
        return [(e["kind"], e.get("decision"), e.get("tool_call_id")) for e in rec.events
                if e.get("decision") == "reject"]

    split = answers(True)
    assert split == [("thought", "reject", "k1"), ("tool_output", "reject", "k1")], split
    same = answers(False)
    assert [k for k, *_ in same] == ["thought", "tool_output"], same
