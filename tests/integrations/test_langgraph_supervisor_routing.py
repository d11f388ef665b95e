"""A LangGraph supervisor that routes with the same words each round is no loop (QA qa-new15c).

The supervisor pattern: a router agent (``create_agent`` with ``transfer_to_<agent>``
hand-off tools returning ``Command(goto=..., graph=Command.PARENT)``, as
``langgraph-supervisor`` builds them) hands work to a researcher and a writer, round after
round. Its model turn is the same each time it routes to the same worker
("calls transfer_to_researcher({})", or the same routing text). Recorded with
:class:`RunRecorder` + :class:`RecordingHandler`, the third such turn was a ``work`` hard
flag ("it repeats an observation the agent already reported"), and every hand-off call
was ``'web'`` work assigned to the supervisor ("researcher" holds "search"): a clean run
read snd 0.882, astab 0.824, 2 hard flags. A routing turn made again after the workers
made progress is no repeat now (docs/audit-real-runs.md, "Routing turns"); one made
again with no progress between (the researcher fails every round) still is.

Real packages (langgraph, langchain ``create_agent``), a scripted chat model, audited
by the ``icore audit`` CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from typing_extensions import TypedDict

from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_recording_truthful import _audit

pytestmark = pytest.mark.timeout(120)

AGENTS = {"supervisor": "routes the task to the workers",
          "researcher": "searches the web and verifies claims",
          "writer": "writes drafts"}
REPEATS = "repeats an observation"


class _Scripted(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self


class _S(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _handoff(agent: str) -> BaseTool:
    """A ``transfer_to_<agent>`` tool: control goes to ``agent`` in the parent graph."""

    @tool(f"transfer_to_{agent}", description=f"Hand the task to the {agent}.")
    def transfer(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        msg = ToolMessage(f"Successfully transferred to {agent}", tool_call_id=tool_call_id,
                          name=f"transfer_to_{agent}")
        return Command(goto=agent, graph=Command.PARENT, update={"messages": [msg]})

    return transfer


@tool
def search(query: str) -> str:
    """Search the literature."""
    return f"2 papers about {query}"


def _route(n: Iterator[int], to: str, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": f"transfer_to_{to}", "args": {},
                                        "id": f"r{next(n)}"}])


def _run(tmp_path: Path, rounds: int, researcher: list[AIMessage], writer: list[AIMessage],
         *, text: bool = False) -> tuple[int, str, dict[str, Any]]:
    """The supervisor routes researcher, writer ``rounds`` times, then answers; audited."""
    n = iter(range(1, 1000))
    say = (lambda to: f"transfer to {to}") if text else (lambda to: "")
    sup = [_route(n, to, say(to)) for _ in range(rounds) for to in ("researcher", "writer")]
    g = StateGraph(_S)
    g.add_node("supervisor", create_agent(
        _Scripted(messages=iter([*sup, AIMessage("Here is the survey.")])),
        [_handoff("researcher"), _handoff("writer")], name="supervisor"),
        destinations=("researcher", "writer", END))
    g.add_node("researcher", create_agent(_Scripted(messages=iter(researcher)), [search],
                                          name="researcher"))
    g.add_node("writer", create_agent(_Scripted(messages=iter(writer)), [], name="writer"))
    g.add_edge(START, "supervisor")
    g.add_edge("researcher", "supervisor")
    g.add_edge("writer", "supervisor")
    rec = RunRecorder("sup", question="Write a short survey", agents=AGENTS,
                      orchestrator="supervisor", succeeded=True)
    g.compile().invoke({"messages": [HumanMessage("Write a short survey")]},
                       {"callbacks": [RecordingHandler(rec)]})
    return _audit(rec.write(tmp_path / "sup.jsonl"), "--fail-on", "hard-flags,unsound")


def _researcher(rounds: int) -> list[AIMessage]:
    out: list[AIMessage] = []
    for i in range(rounds):
        out += [AIMessage("", tool_calls=[{"name": "search", "args": {"query": f"topic {i}"},
                                           "id": f"s{i}"}]),
                AIMessage(f"Found the papers on topic {i}.")]
    return out


@pytest.mark.parametrize("text", [False, True], ids=["calls", "text"])
def test_routing_the_same_way_each_round_is_no_repeat(tmp_path: Path, text: bool) -> None:
    """Three rounds researcher -> writer, each routing turn as the last one to that
    worker: no hard flag, snd 1, astab 1 (2 flags, snd 0.882 before)."""
    code, out, run = _run(tmp_path, 3, _researcher(3),
                          [AIMessage(f"Draft v{i} written.") for i in range(3)], text=text)
    s = run["summary"]
    assert code == 0, out
    assert run["flags"] == [] and s["hard_flags"] == 0
    assert s["snd"] == 1.0 and s["astab"] == 1.0 and s["diagnoses"] == 0
    routed = [o for o in run["obligations"] if o.get("assignee") == "supervisor"
              and o["id"] != "task"]
    assert routed and all(o["kind"] != "web" for o in routed)  # names decide no kind


def test_a_worker_reporting_alike_each_round_is_no_repeat(tmp_path: Path) -> None:
    """The researcher answers "Found the papers." each round after a new search, the
    writer drafts between: the same hand-off each round is new work for it, no flag (2
    hard flags on the researcher before)."""
    same: list[AIMessage] = []
    for i in range(3):
        same += [AIMessage("", tool_calls=[{"name": "search", "args": {"query": f"t{i}"},
                                            "id": f"s{i}"}]),
                 AIMessage("Found the papers.")]
    code, out, run = _run(tmp_path, 3, same,
                          [AIMessage(f"Draft v{i} written.") for i in range(3)])
    assert code == 0, out
    assert run["flags"] == [] and run["summary"]["snd"] == 1.0


def test_a_supervisor_node_routing_with_command_goto(tmp_path: Path) -> None:
    """A supervisor that is a plain node (no model turn) returning ``Command(goto=...)``:
    its recorded hand-off lines "supervisor -> researcher" are the same each round; the
    researcher's "Found the papers." in rounds 1 and 3 (the writer drafted between) is no
    repeat (a hard flag before)."""
    route = iter(["researcher", "writer", "researcher", END])

    def supervisor(state: _S) -> Command[Any]:
        return Command(goto=next(route))

    same: list[AIMessage] = []
    for i in range(2):
        same += [AIMessage("", tool_calls=[{"name": "search", "args": {"query": f"t{i}"},
                                            "id": f"s{i}"}]),
                 AIMessage("Found the papers.")]
    g = StateGraph(_S)
    g.add_node("supervisor", supervisor, destinations=("researcher", "writer", END))
    g.add_node("researcher", create_agent(_Scripted(messages=iter(same)), [search],
                                          name="researcher"))
    g.add_node("writer", create_agent(_Scripted(messages=iter([AIMessage("Draft written.")])),
                                      [], name="writer"))
    g.add_edge(START, "supervisor")
    g.add_edge("researcher", "supervisor")
    g.add_edge("writer", "supervisor")
    rec = RunRecorder("node", question="Write a short survey", agents=AGENTS,
                      orchestrator="supervisor", succeeded=True)
    g.compile().invoke({"messages": [HumanMessage("Write a short survey")]},
                       {"callbacks": [RecordingHandler(rec)]})
    path = rec.write(tmp_path / "node.jsonl")
    assert '"content": "supervisor -> researcher"' in path.read_text(encoding="utf-8")
    code, out, run = _audit(path, "--fail-on", "hard-flags,unsound")
    assert code == 0, out
    assert run["flags"] == [] and run["summary"]["snd"] == 1.0


def test_a_worker_failing_each_round_is_flagged_not_the_router(tmp_path: Path) -> None:
    """The researcher fails every round ("couldn't find"), the writer drafts between: each
    failure is flagged on the researcher; the supervisor's routing turns are not, as the
    writer's drafts are progress between them."""
    failing = [AIMessage("I couldn't find any papers.") for _ in range(3)]
    code, out, run = _run(tmp_path, 3, failing,
                          [AIMessage(f"Draft v{i} written.") for i in range(3)])
    assert code == 3, out
    assert not [f for f in run["flags"] if f["agent"] == "supervisor"]
    assert [f["agent"] for f in run["flags"]] == ["researcher"] * 3


def test_routing_to_a_worker_that_never_progresses_is_flagged(tmp_path: Path) -> None:
    """Only the researcher is routed to, it fails each time: the supervisor's third
    identical hand-off turn is a ``work`` hard flag naming the repeat."""
    n = iter(range(1, 1000))
    g = StateGraph(_S)
    g.add_node("supervisor", create_agent(
        _Scripted(messages=iter([*(_route(n, "researcher") for _ in range(3)),
                                 AIMessage("Nothing found.")])),
        [_handoff("researcher")], name="supervisor"), destinations=("researcher", END))
    g.add_node("researcher", create_agent(_Scripted(messages=iter(
        [AIMessage("I couldn't find any papers.")] * 3)), [search], name="researcher"))
    g.add_edge(START, "supervisor")
    g.add_edge("researcher", "supervisor")
    rec = RunRecorder("loop", question="Write a short survey", agents=AGENTS,
                      orchestrator="supervisor", succeeded=False)
    g.compile().invoke({"messages": [HumanMessage("Write a short survey")]},
                       {"callbacks": [RecordingHandler(rec)]})
    code, out, run = _audit(rec.write(tmp_path / "loop.jsonl"), "--fail-on", "hard-flags")
    assert code == 3, out
    sup = [f for f in run["flags"] if f["agent"] == "supervisor"]
    assert len(sup) == 1 and REPEATS in sup[0]["detail"], run["flags"]
