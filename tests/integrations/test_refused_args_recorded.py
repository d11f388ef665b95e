"""A fenced call refused for its arguments is in the trace (QA qa-fw7 S3, #29).

Argument validation runs before the gate; the refused call vanished from the recording
(no tool output line, no protected action) while a plain tool's same error was recorded.
Now it is a refused call with its reason (``invalid_arguments``; ``args_invalid`` before
#29), in LangGraph (LangChain's own schema check) and in the Agents SDK (the fenced
tool's check). Real frameworks, scripted models.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from icore.fence import INVALID_ARGUMENTS as ARGS_INVALID
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace

from .test_langgraph_workspace import _react


def _call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])


def _outputs(rec: RunRecorder, tool: str) -> list[dict[str, Any]]:
    return [e for e in rec.events if e.get("kind") == "tool_output" and e["tool"] == tool]


def test_langgraph_fenced_call_with_bad_arguments_is_recorded_refused() -> None:
    ws = Workspace({"label/*": "warehouse"})
    ws.put("label/A1", {"addr": "Rua 1"}, by="warehouse")
    desk = ws.agent("desk")
    ran: list[int] = []
    get_label, print_label = _label_tools(desk, lambda c: ran.append(c) or "printed")

    @tool
    def plain(order_id: str, copies: int = 1) -> str:
        """Plain tool."""
        return "ok"

    safe = fenced_tool(print_label, agent=desk,
                       depends_on=lambda a: {f"label/{a['order_id']}"})
    bad = {"order_id": "A1", "copies": "two"}
    app = _react([get_label, safe, plain], iter([
        _call("get_label", {"order_id": "A1"}, "c1"), _call("print_label", bad, "c2"),
        _call("plain", bad, "c3"), AIMessage("done")]))
    rec = RunRecorder("bad-args")
    app.invoke({"messages": [HumanMessage("print")]}, {"callbacks": [RecordingHandler(rec)]})
    assert ran == [] and len(_outputs(rec, "plain")) == 1
    [out] = _outputs(rec, "print_label")
    assert out["blocked"] is True and out["reason"] == ARGS_INVALID and out["exitcode"] == 1
    assert "copies" in out["content"] and out["args"] == bad
    decisions = [x["planfence"]["decision"] for x in rec.planfence
                 if "decision" in x.get("planfence", {})]
    assert [(d["action"], d["outcome"], d["reason"]) for d in decisions] == [
        ("print_label", "blocked", ARGS_INVALID)]


def test_agents_sdk_fenced_call_with_bad_arguments_is_recorded_refused() -> None:
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    from icore.integrations.openai_agents import fenced_function_tool, recording

    ws = Workspace({"label/*": "warehouse"})
    ws.put("label/A1", {"addr": "Rua 1"}, by="warehouse")
    desk = ws.agent("desk")
    ran: list[int] = []

    def print_label(order_id: str, copies: int = 1) -> str:
        """Print a label."""
        ran.append(copies)
        return "printed"

    safe = fenced_function_tool(print_label, agent=desk,
                                depends_on=lambda a: {f"label/{a['order_id']}"})
    model = ScriptedModel([
        [function_call("print_label", {"order_id": "A1", "copies": "two"}, call_id="c1")],
        [function_call("print_label", "not json", call_id="c2")],
        [assistant_message("done")]])
    clerk = Agent(name="clerk", instructions="Print.", tools=[safe], model=model)
    rec = RunRecorder("bad-args-sdk")

    async def main() -> None:
        with recording(rec, exclusive=True):
            await Runner.run(clerk, "print")

    asyncio.run(main())
    outs = _outputs(rec, "print_label")
    assert ran == [] and [o["reason"] for o in outs] == [ARGS_INVALID, ARGS_INVALID]
    assert outs[0]["agent"] == "clerk" and outs[0]["args"] == {"order_id": "A1",
                                                                "copies": "two"}
    assert outs[1]["args"] == {"input": "not json"}


def _label_tools(desk: Any, body: Any) -> tuple[Any, Any]:
    """``get_label`` (reads the label fact) and ``print_label`` (runs ``body(copies)``)."""

    @tool
    def get_label(order_id: str) -> dict[str, Any]:
        """Read a label."""
        return desk.read(f"label/{order_id}")  # type: ignore[no-any-return]

    @tool
    def print_label(order_id: str, copies: int = 1) -> str:
        """Print a label."""
        return str(body(copies))

    return get_label, print_label


def test_a_validation_error_inside_the_tool_body_is_no_argument_refusal() -> None:
    """Review (#28): a fenced tool that ran (its side effect happened) and then raised a
    pydantic ``ValidationError`` of its own model is recorded once, as the call that ran
    and failed; never also as a call refused for its arguments ("nothing ran")."""
    from pydantic import BaseModel

    ws = Workspace({"label/*": "warehouse"})
    ws.put("label/A1", {"addr": "Rua 1"}, by="warehouse")
    desk = ws.agent("desk")
    ran: list[int] = []

    class Receipt(BaseModel):
        n: int

    def body(copies: int) -> str:  # the side effect, then the tool's own model refuses
        ran.append(copies)
        return Receipt(n="printer said: ok").model_dump_json()  # type: ignore[arg-type]

    get_label, print_label = _label_tools(desk, body)
    safe = fenced_tool(print_label, agent=desk,
                       depends_on=lambda a: {f"label/{a['order_id']}"})
    rec = RunRecorder("r")
    app = _react([get_label, safe], iter([
        _call("get_label", {"order_id": "A1"}, "c1"),
        _call("print_label", {"order_id": "A1", "copies": 2}, "c2"), AIMessage("done")]))
    try:
        app.invoke({"messages": [HumanMessage("print")]}, {"callbacks": [RecordingHandler(rec)]})
    except Exception:  # the tool's own error may escape the ToolNode: not the point here
        pass
    assert ran == [2]
    refused = [e for e in _outputs(rec, "print_label") if e.get("reason") == ARGS_INVALID]
    assert refused == [], refused
