"""CrewAI: calls are planned from the reads made before their model message (#28 D1).

A real ``Crew`` (and ``Agent.kickoff``) with a scripted ``BaseLLM`` that answers with
native tool calls (CrewAI runs the calls of one message in a thread pool) or ReAct text;
no network. The scenarios are the QA report's inventory transfers: a sibling's stale
hand-over, a sibling read and a guessed call must never authorize a call of the same
message. Runs in ``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")  # its import warns

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool
from pydantic import PrivateAttr

from icore.integrations.crewai import fenced_crewai_tool
from icore.workspace import Workspace

Step = Any  # a list of tool calls, a final answer, or f(messages) -> one of those
_IDS = itertools.count(1)


def call(name: str, **args: Any) -> dict[str, Any]:
    """One OpenAI-style native tool call."""
    return {"id": f"call_{next(_IDS)}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def act(name: str, **args: Any) -> str:
    """One ReAct step."""
    return f"Thought: go\nAction: {name}\nAction Input: {json.dumps(args)}"


class Scripted(BaseLLM):
    """CrewAI's custom-LLM interface answering scripted steps (native calls or ReAct)."""

    _steps: list[Step] = PrivateAttr(default_factory=list)
    _react: bool = PrivateAttr(default=False)
    _seen: list[Any] = PrivateAttr(default_factory=list)

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None,
             from_agent: Any = None, response_model: Any = None) -> Any:
        self._seen.append(list(messages) if isinstance(messages, list) else [messages])
        if not self._steps:
            return "Final Answer: done" if self._react else "done"
        step = self._steps.pop(0)
        return step(messages) if callable(step) else step

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)

    def supports_function_calling(self) -> bool:
        return not self._react

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 100_000

    def tool_results(self) -> list[str]:
        """What the tools answered, as the model saw it (native: tool messages)."""
        last = self._seen[-1] if self._seen else []
        return [str(m.get("content")) for m in last
                if isinstance(m, dict) and m.get("role") == "tool"]


def scripted(steps: list[Step], react: bool = False) -> Scripted:
    llm = Scripted(model="scripted")
    llm._steps = list(steps)
    llm._react = react
    return llm


def then(fn: Callable[[], Any], step: Step) -> Callable[[Any], Step]:
    """A step taken after ``fn`` ran (another agent's write between plan and tools)."""
    def go(_messages: Any) -> Step:
        fn()
        return step
    return go


class Store:
    """The QA app: warehouses owned by ``warehouse``, a clerk reading and transferring."""

    def __init__(self, stock: dict[str, int], *, sequential: bool = False,
                 recorder: Any = None) -> None:
        self.ws = Workspace({"stock/*": "warehouse"})
        for wh, qty in stock.items():
            self.ws.put(f"stock/{wh}", {"qty": qty}, by="warehouse")
        self.clerk = self.ws.agent("clerk")
        self.moved: list[tuple[str, int]] = []
        clerk, moved = self.clerk, self.moved

        @tool("get_stock")
        def get_stock(wh: str) -> str:
            """Read a warehouse's stock level."""
            return json.dumps(clerk.read(f"stock/{wh}"))

        @tool("transfer")
        def transfer(wh: str, qty: int) -> str:
            """Move qty units out of warehouse wh."""
            moved.append((wh, qty))
            return f"moved {qty} from {wh}"

        if sequential:  # CrewAI then runs a message's calls one by one
            get_stock.max_usage_count = 1000
        self.tools = [get_stock, fenced_crewai_tool(
            transfer, agent=clerk, depends_on=lambda a: {f"stock/{a['wh']}"},
            recorder=recorder)]

    def set(self, wh: str, qty: int) -> Callable[[], Any]:
        return lambda: self.ws.put(f"stock/{wh}", {"qty": qty}, by="warehouse")

    def agent(self, llm: Scripted) -> Agent:
        return Agent(role="clerk", goal="move stock", backstory="logistics",
                     tools=self.tools, llm=llm, max_iter=8)

    def crew(self, llm: Scripted, *, cache: bool = False) -> Crew:
        a = self.agent(llm)
        return Crew(agents=[a], tasks=[Task(description="move stock",
                                            expected_output="done", agent=a)], cache=cache)


def _scenario(name: str, s: Store) -> tuple[list[Step], list[tuple[str, int]]]:
    """The QA scenarios: (script, what may move)."""
    if name == "sibling_hand_over":  # two transfers on one fact, it changes: both refused
        return [[call("get_stock", wh="W1")],
                then(s.set("W1", 5), [call("transfer", wh="W1", qty=4),
                                      call("transfer", wh="W1", qty=3)])], []
    if name == "sibling_read":  # [read, transfer] planned from the old read (10)
        return [[call("get_stock", wh="W1")],
                then(s.set("W1", 1), [call("get_stock", wh="W1"),
                                      call("transfer", wh="W1", qty=10)])], []
    if name == "guessed":  # never read W1: [read, transfer(guess)] in one message
        return [[call("get_stock", wh="W1"), call("transfer", wh="W1", qty=99)]], []
    assert name == "independent"  # three facts, one changes: only that one is refused
    return [[call("get_stock", wh="W1"), call("get_stock", wh="W2")],
            then(s.set("W2", 2), [call("transfer", wh="W1", qty=5),
                                  call("transfer", wh="W2", qty=5)])], [("W1", 5)]


SCENARIOS = ["sibling_hand_over", "sibling_read", "guessed", "independent"]


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_a_message_is_planned_from_the_reads_before_it(name: str, sequential: bool) -> None:
    """D1 B/C/D: nothing a message's own tools read or were handed authorizes a sibling
    call of that message; calls on facts nobody changed run."""
    s = Store({"W1": 10, "W2": 10}, sequential=sequential)
    steps, allowed = _scenario(name, s)
    llm = scripted(steps)
    s.crew(llm).kickoff()
    assert sorted(s.moved) == allowed
    seen = " ".join(llm.tool_results())
    if name == "guessed":
        assert "(not_read)" in seen and '"qty": 10' in seen
    elif name != "independent":
        assert "(stale)" in seen


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
def test_sibling_refusals_record_one_replan_the_next_message(sequential: bool,
                                                            tmp_path: Path) -> None:
    """Two transfers of one message on a changed stock are both refused stale; neither is
    the other's replan (recorded replans 0); the next message's transfer from the handed
    value is the one replan (replans 1), and the recording audits clean. The two
    kickoffs are one conversation (``clerk.scope``): each crew run is its own scope."""
    from icore.adapters import audit_file
    from icore.integrations import RunRecorder

    rec = RunRecorder("siblings")
    s = Store({"W1": 10}, sequential=sequential, recorder=rec)
    llm = scripted([[call("get_stock", wh="W1")],
                    then(s.set("W1", 5), [call("transfer", wh="W1", qty=4),
                                          call("transfer", wh="W1", qty=3)])])
    with s.clerk.scope("chat"):
        s.crew(llm).kickoff()
    assert s.moved == []
    assert [r.replans for r in audit_file(rec.write(tmp_path / "a.jsonl"))] == [0]
    llm = scripted([[call("transfer", wh="W1", qty=3)]])
    with s.clerk.scope("chat"):
        s.crew(llm).kickoff()
    assert s.moved == [("W1", 3)]
    assert [r.replans for r in audit_file(rec.write(tmp_path / "b.jsonl"))] == [1]


def test_the_next_message_is_authorized_by_the_values_handed_over() -> None:
    """After the refusal, the agent's next message (a new turn) derives from the values
    its tools read or were handed: the guessed call, now informed, runs once."""
    s = Store({"W1": 10})
    llm = scripted([[call("get_stock", wh="W1"), call("transfer", wh="W1", qty=4)],
                    [call("transfer", wh="W1", qty=4)]])
    s.crew(llm).kickoff()
    assert s.moved == [("W1", 4)]


@pytest.mark.parametrize("how", ["akickoff", "agent_kickoff", "react", "two_tasks"])
def test_turns_hold_in_every_way_crewai_runs_an_agent(how: str) -> None:
    """Async kickoff, a standalone ``Agent.kickoff``, ReAct text (one call per message),
    and a second task on the same agent (CrewAI reuses its executor): a read made in one
    message authorizes the next message's call; a sibling read never does."""
    s = Store({"W1": 10})
    if how == "react":
        llm = scripted([act("get_stock", wh="W1"), then(s.set("W1", 1), act(
            "transfer", wh="W1", qty=10)), act("transfer", wh="W1", qty=1),
            "Final Answer: done"], react=True)
        s.crew(llm).kickoff()
        assert s.moved == [("W1", 1)]
        return
    steps: list[Step] = [[call("get_stock", wh="W1")],
                         then(s.set("W1", 1), [call("get_stock", wh="W1"),
                                               call("transfer", wh="W1", qty=10)]),
                         [call("transfer", wh="W1", qty=1)], "done"]
    if how == "two_tasks":  # task 2 starts with a call planned from task 1's read
        steps = [[call("get_stock", wh="W1")], "read it",
                 [call("transfer", wh="W1", qty=2)], "done"]
    llm = scripted(steps)
    if how == "akickoff":
        asyncio.run(s.crew(llm).akickoff())
    elif how == "agent_kickoff":
        s.agent(llm).kickoff("move stock")
    else:
        a = s.agent(llm)
        Crew(agents=[a], tasks=[Task(description="read W1", expected_output="x", agent=a),
                                Task(description="move 2", expected_output="y",
                                     agent=a)]).kickoff()
        assert s.moved == [("W1", 2)]
        return
    assert s.moved == [("W1", 1)]


def test_a_fenced_result_is_never_served_from_crewais_cache() -> None:
    """``Crew(cache=True)`` (CrewAI's opt-in tool cache): the same refused call repeated
    in the next message reaches the gate again (a cached ``ToolFailure`` would answer it
    forever), and a call that ran is not answered from the cache either."""
    s = Store({"W1": 10})
    step = [call("transfer", wh="W1", qty=3)]
    llm = scripted([step, step, step])
    s.crew(llm, cache=True).kickoff()
    assert s.moved == [("W1", 3), ("W1", 3)]


def test_another_tasks_read_after_the_message_never_authorizes_it() -> None:
    """QA qa-new17b #3: two async tasks of one crew on one agent handle. Agent A's model
    proposes ``transfer(W1)`` without reading; agent B reads W1 after A's message was
    made and before A's call is gated. That read was not among what A's message was
    planned from: refused ``not_read``, nothing moved."""
    import threading

    s = Store({"W1": 10})
    proposed, read = threading.Event(), threading.Event()
    clerk = s.clerk

    @tool("get_stock")
    def get_stock(wh: str) -> str:
        """Read a warehouse's stock level."""
        got = json.dumps(clerk.read(f"stock/{wh}"))
        read.set()
        return got

    def deps(a: dict[str, Any]) -> set[str]:
        if a["wh"] == "W1":  # not the probe at fencing time
            read.wait(30)  # B's read lands between A's message and A's gate
        return {f"stock/{a['wh']}"}

    def a_says(_m: Any) -> Step:
        proposed.set()
        return [call("transfer", wh="W1", qty=9)]

    def b_says(_m: Any) -> Step:
        proposed.wait(30)
        return [call("get_stock", wh="W1")]

    moved = s.moved
    fenced = fenced_crewai_tool(_transfer(moved), agent=clerk, depends_on=deps)
    la, lb = scripted([a_says, "A done"]), scripted([b_says, "B done"])
    a = Agent(role="buyerA", goal="buy", backstory="a", llm=la, tools=[get_stock, fenced],
              max_iter=4)
    b = Agent(role="buyerB", goal="check", backstory="b", llm=lb, tools=[get_stock, fenced],
              max_iter=4)
    lead = Agent(role="lead", goal="sum", backstory="c", llm=scripted(["summary"]))
    ta = Task(description="move W1", expected_output="x", agent=a, async_execution=True)
    tb = Task(description="check W1", expected_output="x", agent=b, async_execution=True)
    Crew(agents=[a, b, lead], tasks=[ta, tb, Task(description="sum", expected_output="x",
                                                  agent=lead, context=[ta, tb])]).kickoff()
    assert read.is_set() and moved == []
    assert "(not_read)" in " ".join(la.tool_results()), la.tool_results()


def _transfer(moved: list[tuple[str, int]]) -> Any:
    @tool("transfer")
    def transfer(wh: str, qty: int) -> str:
        """Move qty units out of warehouse wh."""
        moved.append((wh, qty))
        return f"moved {qty} from {wh}"
    return transfer
