"""Recorded LangGraph runs audit truthfully (issue 28 item 6; QA reports langgraph D1-D3).

The reporters' scenario: a booking agent reads a room (``room/*`` owned by
``facilities``) and books it through a fenced tool; the price may change between the
model's plan and the call. Real LangGraph graphs (``StateGraph``, ``ToolNode``,
``create_react_agent``, ``interrupt()`` / ``Command(resume=...)``) with a scripted chat
model; each run is recorded with ``RecordingHandler`` and audited with ``icore audit``.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

from icore.cli import app as cli
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace

from .conftest import load_example


class Brain(BaseChatModel):
    """A scripted chat model: ``brain(messages)`` returns tool calls or the answer text."""

    brain: Callable[[list[BaseMessage]], Any]
    n: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Brain:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kw: Any) -> ChatResult:
        out = self.brain(list(messages))
        if isinstance(out, str):
            msg = AIMessage(out)
        else:
            calls = []
            for name, args in out:
                self.n += 1
                calls.append({"name": name, "args": args, "id": f"c{self.n}",
                              "type": "tool_call"})
            msg = AIMessage("", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    """The tool messages after the last model turn."""
    out: list[ToolMessage] = []
    for m in reversed(messages):
        if not isinstance(m, ToolMessage):
            break
        out.append(m)
    return out[::-1]


def _fresh_price(msg: ToolMessage) -> str:
    text = str(msg.content)
    values = json.JSONDecoder().raw_decode(text[text.index("Current values: ") + 16:])[0]
    return str(values["room/R101"]["price"])


class Hotel:
    """The facilities' rooms, the booker's read and book tools, the bookings made."""

    def __init__(self, price: str = "100") -> None:
        self.ws = Workspace({"room/*": "facilities"})
        self.ws.put("room/R101", {"price": price})
        self.booker = self.ws.agent("booker")
        self.booked: list[str] = []
        booker = self.booker

        @tool
        def get_room(room_id: str) -> dict[str, Any]:
            """Read a room."""
            return dict(booker.read(f"room/{room_id}") or {})

        def book_room(room_id: str, price: str) -> str:
            """Book a room at the quoted price."""
            self.booked.append(price)
            return f"booked {room_id} at {price}"

        self.get_room = get_room
        self.book_room = book_room

    def fenced(self, **kw: Any) -> Any:
        return fenced_tool(self.book_room, agent=self.booker,
                           depends_on=lambda a: {f"room/{a['room_id']}"}, **kw)

    def reprice(self, price: str) -> None:
        self.ws.update("room/R101", lambda v: {**(v or {}), "price": price})

    def brain(self, *, change_to: str | None = None) -> Callable[[list[BaseMessage]], Any]:
        """Read, book at the read price (the owner may reprice meanwhile), replan once
        from the values a refusal hands back, then answer."""
        left = [change_to] if change_to else []

        def think(messages: list[BaseMessage]) -> Any:
            res = _tool_results(messages)
            if not res:
                return [("get_room", {"room_id": "R101"})]
            last = res[-1]
            if last.name == "get_room":
                if left:
                    self.reprice(left.pop())
                price = json.loads(str(last.content))["price"]
                return [("book_room", {"room_id": "R101", "price": price})]
            if last.status == "error" and "Current values" in str(last.content):
                return [("book_room", {"room_id": "R101", "price": _fresh_price(last)})]
            return f"Booked: {last.content}"

        return think


def _graph(hotel: Hotel, model: BaseChatModel, *, approval: bool = False,
           checkpointer: Any = None) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("booker", lambda s: {"messages": [model.invoke(s["messages"])]})
    g.add_node("tools", ToolNode([hotel.get_room, hotel.fenced(approval=approval)]))
    g.add_edge(START, "booker")
    g.add_conditional_edges("booker", tools_condition)
    g.add_edge("tools", "booker")
    return g.compile(checkpointer=checkpointer)


def _audit(path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    """``icore audit PATH --out ... --json ... ARGS``: (exit code, stdout, the run)."""
    out = path.parent / f"{path.stem}-rep"
    js = path.parent / f"{path.stem}.json"
    res = CliRunner().invoke(cli, ["audit", str(path), "--out", str(out), "--json", str(js),
                                   *args], env={"COLUMNS": "200"})
    assert res.exit_code in (0, 3), res.output
    return res.exit_code, res.output, json.loads(js.read_text(encoding="utf-8"))["runs"][0]


def _lines(rec: RunRecorder) -> list[dict[str, Any]]:
    return [json.loads(x) for x in rec.jsonl().splitlines()[1:] if '"kind"' in x]


# ------------------------------------------------------------------ D1: answer_check
def test_clean_run_without_ground_truth_is_sound_and_says_not_checked(tmp_path: Path) -> None:
    """Recorded as the docs show (``RunRecorder(run_id)`` + ``RecordingHandler``), a clean
    run is sound: no terminal diagnosis, ``--fail-on unsound`` passes, and the text, HTML
    and JSON say the answer was not checked (no ground truth), not that it failed."""
    hotel = Hotel()
    rec = RunRecorder("clean", question="Book room R101")
    _graph(hotel, Brain(brain=hotel.brain())).invoke(
        {"messages": [HumanMessage("Book room R101")]}, {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["100"]
    code, text, run = _audit(rec.write(tmp_path / "clean.jsonl"), "--fail-on", "unsound",
                             "--fail-on", "hard-flags")
    s = run["summary"]
    assert code == 0 and s["snd"] == 1.0 and run["diagnoses"] == []
    assert s["terminal"] and s["terminated"] and s["answer_checked"] is False
    assert "final answer not checked" in text and "clean" in text
    html = (tmp_path / "clean-rep" / "clean.html").read_text(encoding="utf-8")
    assert "final answer not checked" in html and "present, unsound" not in html


@pytest.mark.parametrize(("kw", "sound"), [({"ground_truth": "Booked: booked R101 at 100"},
                                            True),
                                           ({"ground_truth": "R102"}, False),
                                           ({"succeeded": True}, True),
                                           ({"succeeded": False}, False)])
def test_ground_truth_or_outcome_is_checked(tmp_path: Path, kw: dict[str, Any],
                                            sound: bool) -> None:
    """``RunRecorder(ground_truth=...)`` / ``succeeded=`` (docs/integrations.md): the
    answer is checked; a wrong one is a terminal defect, and the JSON carries no
    ``answer_checked`` field (it is written only when an answer was not checked)."""
    hotel = Hotel()
    rec = RunRecorder("checked", **kw)
    _graph(hotel, Brain(brain=hotel.brain())).invoke(
        {"messages": [HumanMessage("Book room R101")]}, {"callbacks": [RecordingHandler(rec)]})
    code, text, run = _audit(rec.write(tmp_path / "checked.jsonl"), "--fail-on", "unsound")
    assert "answer_checked" not in run["summary"] and "not checked" not in text
    assert (code == 0) is sound and run["summary"]["terminal"] is sound
    assert [d["defect"] for d in run["diagnoses"]] == ([] if sound else ["terminal"])


# ------------------------------------------------------------------ D2: interrupt()
def test_run_paused_at_interrupt_records_pauses_and_one_end(tmp_path: Path) -> None:
    """An approval (``interrupt()`` in the fenced tool) while the owner reprices: each
    pause is a ``pause`` thought, not an end; the resumed run's real end is recorded
    once; the stale approval never books 100; the audit has no terminal diagnosis."""
    hotel = Hotel()
    rec = RunRecorder("approval", question="Book room R101")
    graph = _graph(hotel, Brain(brain=hotel.brain()), approval=True,
                   checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t"}, "callbacks": [RecordingHandler(rec)]}
    out = graph.invoke({"messages": [HumanMessage("Book room R101")]}, cfg)
    hotel.reprice("150")  # while the human decides
    for _ in range(4):
        if not out.get("__interrupt__"):
            break
        out = graph.invoke(Command(resume=True), cfg)
    assert hotel.booked == ["150"]
    lines = _lines(rec)
    ends = [x for x in lines if x["kind"] == "termination"]
    pauses = [x for x in lines if x.get("pause")]
    assert [x["final_answer"] for x in ends] == ["Booked: booked R101 at 150"]
    assert lines[-1] is not None and lines[-1]["kind"] == "termination"
    assert len(pauses) >= 2 and all(x["kind"] == "thought" and x["interrupts"]
                                    for x in pauses)
    assert sum(x["kind"] == "task" for x in lines) == 1  # a resume is not a new task
    code, _, run = _audit(rec.write(tmp_path / "approval.jsonl"), "--fail-on", "unsound")
    assert code == 0 and run["summary"]["replans"] == 1
    assert run["diagnoses"] == []  # the gate's one replan: the protocol working


def test_plain_interrupt_and_static_breakpoint_are_pauses() -> None:
    """``interrupt()`` in a node, and ``interrupt_before`` (LangGraph raises nothing for a
    static breakpoint: the end recorded then is reopened as a pause when the run
    resumes): one task, one end, the pauses in between."""
    def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"approved: {interrupt('ship it?')}")]}

    for build in ("interrupt", "breakpoint"):
        g = StateGraph(MessagesState)
        g.add_node("ask", ask if build == "interrupt" else
                   (lambda s: {"messages": [AIMessage("asked")]}))
        g.add_node("done", lambda s: {"messages": [AIMessage("done")]})
        g.add_edge(START, "ask")
        g.add_edge("ask", "done")
        graph = g.compile(checkpointer=InMemorySaver(),
                          interrupt_before=["done"] if build == "breakpoint" else None)
        rec = RunRecorder(build)
        cfg: Any = {"configurable": {"thread_id": build},
                    "callbacks": [RecordingHandler(rec)]}
        graph.invoke({"messages": [HumanMessage("go")]}, cfg)
        graph.invoke(Command(resume="yes") if build == "interrupt" else None, cfg)
        kinds = [(x["kind"], bool(x.get("pause"))) for x in _lines(rec)
                 if x["kind"] in ("task", "termination") or x.get("pause")]
        assert kinds == [("task", False), ("thought", True), ("termination", False)], build
        assert rec.audit().summary().terminal


# ------------------------------------------------------------------ D3: agent names
def _react_agent(name: str, model: BaseChatModel, tools: list[Any]) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # deprecated in favour of langchain's create_agent
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, name=name)


def test_single_react_agent_is_recorded_under_its_name(tmp_path: Path) -> None:
    """``create_react_agent(name="booker")``: model turns, tool outputs and gate events are
    all the booker's (not its inner ``agent`` / ``tools`` nodes)."""
    hotel = Hotel()
    agent = _react_agent("booker", Brain(brain=hotel.brain(change_to="150")),
                         [hotel.get_room, hotel.fenced()])
    rec = RunRecorder("react")
    agent.invoke({"messages": [HumanMessage("Book room R101")]},
                 {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["150"]
    assert set(rec.agents) == {"user", "booker"}
    code, _, run = _audit(rec.write(tmp_path / "react.jsonl"), "--fail-on", "hard-flags",
                          "--fail-on", "unsound")
    assert code == 0 and run["summary"]["replans"] == 1


def test_handoff_between_react_agents_is_recorded(tmp_path: Path) -> None:
    """Two ``create_react_agent`` subgraphs: the concierge reads and hands over with
    ``Command(goto="booker", graph=Command.PARENT)``; the booker books. The trace names
    both agents, records the handoff as an instruction, writes the tool's ``Command`` as
    data (not its repr), and the clean run has no hard flag."""
    hotel = Hotel()

    @tool
    def get_room_c(room_id: str) -> dict[str, Any]:
        """Concierge: read a room."""
        return dict(hotel.ws.value(f"room/{room_id}") or {})

    @tool
    def transfer_to_booker(room_id: str) -> Command:  # type: ignore[type-arg]
        """Hand the booking over to the booker."""
        return Command(goto="booker", graph=Command.PARENT, update={"messages": []})

    def concierge(messages: list[BaseMessage]) -> Any:
        res = _tool_results(messages)
        return [("transfer_to_booker", {"room_id": "R101"})] if res else \
            [("get_room_c", {"room_id": "R101"})]

    g = StateGraph(MessagesState)
    g.add_node("concierge", _react_agent("concierge", Brain(brain=concierge),
                                         [get_room_c, transfer_to_booker]))
    g.add_node("booker", _react_agent("booker", Brain(brain=hotel.brain()),
                                      [hotel.get_room, hotel.fenced()]))
    g.add_edge(START, "concierge")
    rec = RunRecorder("handoff")
    g.compile().invoke({"messages": [HumanMessage("Book room R101")]},
                       {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["100"]
    lines = _lines(rec)
    assert set(rec.agents) == {"user", "concierge", "booker"}
    assert [(x["agent"], x["to"]) for x in lines if x["kind"] == "instruction"] == [
        ("concierge", "booker")]
    gates = {x["agent"] for x in lines if "gate" in x}
    assert gates == {"booker"}
    cmd = next(x for x in lines if x.get("tool") == "transfer_to_booker")
    assert json.loads(cmd["content"])["command"]["goto"] == ["booker"]
    assert not any(re.search(r"\b(Command|ToolMessage|AIMessage)\(", str(x.get("content")))
                   for x in lines)
    code, _, run = _audit(rec.write(tmp_path / "handoff.jsonl"), "--fail-on", "hard-flags",
                          "--fail-on", "unsound")
    assert code == 0 and run["diagnoses"] == []


# ------------------------------------------------------------------ report label
def test_refused_call_is_not_labelled_acted_on(tmp_path: Path) -> None:
    """The stale call was refused (it never ran): its lineage picture labels the plan
    "refused", not "acted on"; the replanned call that ran keeps "acted on"; the banner
    for the refusal is a warning (fail closed), not a red defect."""
    hotel = Hotel()
    rec = RunRecorder("stale")
    _graph(hotel, Brain(brain=hotel.brain(change_to="150"))).invoke(
        {"messages": [HumanMessage("Book room R101")]}, {"callbacks": [RecordingHandler(rec)]})
    assert hotel.booked == ["150"]
    code, _, run = _audit(rec.write(tmp_path / "stale.jsonl"), "--fail-on", "invalid")
    assert code == 0
    assert [x["status"] for x in run["lineage"]] == ["blocked", "valid"]
    html = (tmp_path / "stale-rep" / "stale.html").read_text(encoding="utf-8")
    blocked = html[html.index('id="lin-book_room-1"'):html.index('id="lin-book_room-2"')]
    ran = html[html.index('id="lin-book_room-2"'):]
    assert "refused" in blocked and "acted on" not in blocked
    assert "plan the action ran from" not in blocked
    assert "acted on" in ran
    assert 'notice notice-warn"><a href="#lin-book_room-1"' in html


# ------------------------------------------------------------------ the project's examples
@pytest.mark.parametrize("example", ["langgraph_app", "ag2_app", "openai_agents_app"])
def test_project_examples_audit_clean(tmp_path: Path, example: str) -> None:
    """The project's own recorded examples (no ground truth): no false terminal or work
    diagnosis (only their replans), every ``--fail-on`` passes, the answer is reported
    as not checked, and no trace line holds a Python object's repr (AG2's ``DataInput``
    / ``ModelResponse``)."""
    path = tmp_path / f"{example}.jsonl"
    load_example(example).main(str(path))
    code, _, run = _audit(path, "--fail-on", "unsound", "--fail-on", "hard-flags",
                          "--fail-on", "invalid")
    assert code == 0 and run["summary"]["answer_checked"] is False
    assert {d["defect"] for d in run["diagnoses"]} <= {"progress"}
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"\b(DataInput|ModelResponse|ToolResult|TextInput)\(", text)
