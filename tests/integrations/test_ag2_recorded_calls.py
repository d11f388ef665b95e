"""AG2 recorded runs say which call ran, who made it and what a human said (#28, qa-new10).

Real ``ag2.Agent`` runs with AG2's scripted ``TestConfig`` and AG2's own
``approval_required()``; the audit is the real importer over the recorder's JSONL:

* S3-3: two calls of one tool in one turn, the human rejects R2 and approves R1: each
  ``--json`` lineage entry names its calling agent, bound arguments (digest too) and
  action record; the rejected one has its ``human_step``; the HTML report shows them;
* S3-4: a "yes" to a call whose arguments are not a JSON object is recorded;
* S3-5: the docs page and the example write the trace in ``finally``;
* S3-6: an ``ask`` made inside a ``hitl_hook`` is recorded with its request text.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from ag2 import Agent, tool
from ag2.events import ToolCallEvent
from ag2.middleware.builtin.tools.approval import approval_required

from icore.adapters import load_jsonl
from icore.cli._audit_json import ARGS_SHOWN, call_fields, run_json
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace

from .ag2_world import call
from .conftest import EXAMPLES, audit_cli, load_example

ROOT = EXAMPLES.parent


def _world(turns: list[Any]) -> Any:
    return load_example("ag2_app").ScriptedWorld(iter(turns))


def _rooms() -> tuple[Workspace, Any, list[str]]:
    ws = Workspace({"room/*": "facilities"})
    for r in ("R1", "R2"):
        ws.put(f"room/{r}", {"cap": 10}, by="facilities")
    return ws, ws.agent("booker"), []


def _booking(booked: list[str], booker: Any) -> tuple[Any, Any]:
    def get_room(room_id: str) -> dict[str, Any]:
        """Read a room."""
        return booker.read(f"room/{room_id}")  # type: ignore[no-any-return]

    def book(room_id: str, size: int) -> str:
        """Book a room."""
        booked.append(room_id)
        return f"booked {room_id}"

    safe = fenced_tool(tool(book, middleware=[approval_required(allow_always=False)]),
                       agent=booker, depends_on=lambda a: {f"room/{a['room_id']}"})
    return get_room, safe


def test_lineage_names_each_calls_agent_arguments_record_and_human_step(
        tmp_path: Path) -> None:
    """b6: one response books R1 and R2; the human says no to R2, yes to R1: the two
    ``book`` actions are told apart by their arguments, agent and record."""
    _ws, booker, booked = _rooms()
    get_room, safe = _booking(booked, booker)

    async def human(event: Any) -> str:
        return "no" if '"R2"' in event.content else "yes"

    agent = Agent("alice", config=_world([
        [call("get_room", room_id="R1"), call("get_room", room_id="R2")],
        [call("book", room_id="R1", size=6), call("book", room_id="R2", size=6)], "done"]),
        tools=[get_room, safe], hitl_hook=human)
    rec = RunRecorder("b6")
    record_agents(rec, agent)
    asyncio.run(agent.ask("book both"))
    assert booked == ["R1"]
    path = rec.write(tmp_path / "b6.jsonl")
    entries = run_json(rec.audit(), None, None)["lineage"]
    by_room = {e["args"]["room_id"]: e for e in entries}
    assert set(by_room) == {"R1", "R2"}
    yes, no = by_room["R1"], by_room["R2"]
    assert (yes["status"], yes["human"], yes["agent"]) == ("valid", "approved", "alice")
    assert (no["status"], no["human"], no["agent"]) == ("blocked", "rejected", "alice")
    assert isinstance(no.get("human_step"), int) and isinstance(yes.get("human_step"), int)
    assert yes["args"] == {"room_id": "R1", "size": 6}
    assert len(yes["record"]) == 64 and "record" not in no  # refused before its gate
    assert yes["args_digest"].startswith("sha256:") and yes["args_digest"] != no["args_digest"]
    audit_cli(path, tmp_path / "rep")
    page = (tmp_path / "rep" / "b6.html").read_text(encoding="utf-8")
    assert page.count('<p class="call">called by <b>alice</b>') == 2
    assert "&#34;room_id&#34;:&#34;R2&#34;" in page and yes["record"][:12] in page


def test_large_arguments_are_shown_as_a_preview_and_digest() -> None:
    """``--json`` bounds a call's arguments: over :data:`ARGS_SHOWN` bytes, a preview."""
    small = json.dumps({"a": 1})
    big = json.dumps({"note": "x" * (ARGS_SHOWN + 10)})
    assert call_fields("bob", "ab" * 32, small) == {
        "agent": "bob", "record": "ab" * 32, "args": {"a": 1},
        "args_digest": call_fields(None, None, small)["args_digest"]}
    got = call_fields(None, None, big)
    assert "args" not in got and len(got["args_preview"]) == 257
    assert got["args_digest"].startswith("sha256:") and len(got["args_digest"]) == 23


@pytest.mark.parametrize("raw", ["[1,2]", "[1,2", '"hi"', "7"])
def test_an_approval_of_arguments_that_are_no_object_is_recorded(raw: str) -> None:
    """b2: the human said yes to a call whose arguments are no JSON object: the "yes" is
    in the trace (with the arguments as given), then the call is refused."""
    _ws, booker, booked = _rooms()
    get_room, safe = _booking(booked, booker)
    asked: list[str] = []

    async def human(event: Any) -> str:
        asked.append(event.content)
        return "yes"

    agent = Agent("alice", config=_world([ToolCallEvent("book", arguments=raw), "done"]),
                  tools=[get_room, safe], hitl_hook=human)
    rec = RunRecorder("b2")
    record_agents(rec, agent)
    asyncio.run(agent.ask("book"))
    assert booked == [] and len(asked) == 1
    yes = [e for e in rec.events if e.get("decision") == "approve"]
    assert len(yes) == 1 and yes[0]["args"] == {"raw": raw} and yes[0]["tool"] == "book"
    out = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "book"]
    assert [e.get("reason") for e in out] == ["invalid_arguments"]
    assert yes[0]["task"] == out[0]["task"]  # linked to the refused action exactly
    (entry,) = run_json(rec.audit(), None, None)["lineage"]
    assert (entry["status"], entry["human"], entry["args"]) == ("blocked", "approved",
                                                                {"raw": raw})


def test_the_docs_and_the_example_write_the_trace_in_finally() -> None:
    """b5: a trace reaches disk after Ctrl-C only when ``rec.write`` is in ``finally``."""
    page = (ROOT / "docs" / "integrations-ag2.md").read_text(encoding="utf-8")
    section = page.split("## Recorded runs", 1)[1].split("\n## ", 1)[0]
    assert "try:\n    reply = await agent.ask" in section
    assert "finally:\n    rec.write(" in section
    example = (EXAMPLES / "ag2_app.py").read_text(encoding="utf-8")
    body = example.split("def main(", 1)[1]
    assert body.index("try:") < body.index("agent.ask(") < body.index("finally:") \
        < body.index("rec.write(out)")


def test_a_stopped_run_written_in_finally_audits_as_stopped(tmp_path: Path) -> None:
    """The pattern the docs show: the tool is interrupted (``KeyboardInterrupt``), the
    ``finally`` writes the trace, and the audit reads the stop line."""
    _ws, booker, _ = _rooms()

    def get_room(room_id: str) -> dict[str, Any]:
        """Read a room."""
        return booker.read(f"room/{room_id}")  # type: ignore[no-any-return]

    async def book(room_id: str, size: int) -> str:
        """Book a room (interrupted)."""
        raise KeyboardInterrupt

    safe = fenced_tool(book, agent=booker, depends_on=lambda a: {f"room/{a['room_id']}"})
    agent = Agent("alice", config=_world([call("get_room", room_id="R1"),
                                          call("book", room_id="R1", size=2), "done"]),
                  tools=[get_room, safe])
    rec = RunRecorder("ctrl-c")
    record_agents(rec, agent)
    path = tmp_path / "run.jsonl"

    def app() -> None:  # the docs' pattern
        try:
            asyncio.run(agent.ask("book"))
        finally:
            rec.write(path)

    with pytest.raises(KeyboardInterrupt):
        app()
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert any(str(x.get("content", "")).startswith("the run stopped: ")
               for x in lines)
    assert any(x.get("failed") and x.get("tool") == "book" for x in lines)
    assert load_jsonl(path).steps


def test_an_ask_inside_a_hitl_hook_is_recorded_with_its_request(tmp_path: Path) -> None:
    """rooms.py: booker's hitl_hook asks facilities to close R2 before answering: the
    request is an instruction from booker to facilities, its answer facilities' output."""
    ws, booker, booked = _rooms()
    get_room, safe = _booking(booked, booker)

    def close_room(room_id: str) -> str:
        """Close a room."""
        ws.put(f"room/{room_id}", {"cap": 0}, by="facilities")
        return "closed"

    facilities = Agent("facilities", config=_world([call("close_room", room_id="R2"),
                                                    "R2 closed."]), tools=[close_room])

    async def human(event: Any) -> str:
        await facilities.ask("Close room R2, it flooded")
        return "yes"

    agent = Agent("booker", config=_world([call("get_room", room_id="R2"),
                                           call("book", room_id="R2", size=6), "done"]),
                  tools=[get_room, safe], hitl_hook=human)
    rec = RunRecorder("nested")
    record_agents(rec, agent, facilities)
    asyncio.run(agent.ask("book R2"))
    assert booked == []  # closed while the human decided: stale
    said = [(e["agent"], e["kind"], e.get("to"), e["content"]) for e in rec.events
            if "Close room R2" in str(e["content"])]
    assert said == [("booker", "instruction", "facilities", "Close room R2, it flooded")]
    assert ("facilities", "output", "R2 closed.") in [
        (e["agent"], e["kind"], e["content"]) for e in rec.events]
    assert [e["content"] for e in rec.events if e["kind"] == "task"] == ["book R2"]
    path = rec.write(tmp_path / "nested.jsonl")
    assert load_jsonl(path).steps
