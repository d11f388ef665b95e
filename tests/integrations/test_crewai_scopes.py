"""CrewAI: each crew run is its own workspace run scope (#28, QA qa-crew S1).

One module-level ``ws.agent("planner")`` serving two crews that run at the same time
(threads, ``akickoff``, ``kickoff_for_each``): one crew's read never authorizes the
other's call. A real ``Crew`` with a scripted ``BaseLLM`` (native tool calls); no
network. Runs in ``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")  # its import warns

from crewai import Agent, Crew, Task
from crewai.tools import tool

from icore.integrations.crewai import fenced_crewai_tool
from icore.workspace import Workspace

from .test_crewai_turns import Scripted, call
from .test_crewai_turns import scripted as _scripted

_WAIT_S = 20.0


def scripted(*steps: Any) -> Scripted:
    """The scripted LLM answering ``steps`` in order (a step may be ``f()``)."""
    return _scripted([(lambda _m, f=st: f()) if callable(st) else st for st in steps])


def tool_text(llm: Scripted) -> str:
    """Every tool result the model was shown."""
    return " ".join(str(m.get("content")) for msgs in llm._seen for m in msgs
                    if isinstance(m, dict) and m.get("role") == "tool")


class Venues:
    """The QA app: one module-level planner handle, a read tool and a fenced booking."""

    def __init__(self) -> None:
        self.ws = Workspace({"venue/*": "venues"})
        self.ws.put("venue/hall-a", {"price": 900}, by="venues")
        self.planner = self.ws.agent("planner")
        self.booked: list[str] = []
        planner, booked = self.planner, self.booked

        @tool("get_venue")
        def get_venue(venue_id: str) -> str:
            """Look a venue up: its price."""
            return json.dumps(planner.read(f"venue/{venue_id}"))

        @tool("book_venue")
        def book_venue(venue_id: str, note: str) -> str:
            """Book a venue."""
            booked.append(note)
            return f"booked {venue_id}"

        get_venue.max_usage_count = 1000
        self.tools = [get_venue, fenced_crewai_tool(
            book_venue, agent=planner, depends_on=lambda a: {f"venue/{a['venue_id']}"})]

    def price(self, p: int) -> None:
        self.ws.put("venue/hall-a", {"price": p}, by="venues")

    def crew(self, llm: Scripted, role: str = "planner") -> Crew:
        a = Agent(role=role, goal="book", backstory="events", tools=self.tools, llm=llm,
                  max_iter=6)
        return Crew(agents=[a], tasks=[Task(description="book hall-a",
                                            expected_output="done", agent=a)])


def _customers(v: Venues) -> tuple[Scripted, Scripted]:
    """Customer 1 reads 900; the price becomes 1200; customer 2 reads 1200; then
    customer 1 books from its read of 900 (the QA's scen7)."""
    read1, read2 = threading.Event(), threading.Event()

    def c1_book() -> Any:
        read1.set()
        assert read2.wait(_WAIT_S)
        return [call("book_venue", venue_id="hall-a", note="cust1 planned at 900")]

    def c2_read() -> Any:
        assert read1.wait(_WAIT_S)
        v.price(1200)
        return [call("get_venue", venue_id="hall-a")]

    def c2_done() -> Any:
        read2.set()  # customer 2's read has run
        return "done"

    return (scripted([call("get_venue", venue_id="hall-a")], c1_book, "done"),
            scripted(c2_read, c2_done))


def _check_customer1_refused(v: Venues, llm1: Scripted) -> None:
    assert v.booked == []  # on main: ["cust1 planned at 900"], authorized by cust2's read
    assert "(stale)" in tool_text(llm1) and '"price": 1200' in tool_text(llm1)


def test_two_crews_in_threads_keep_their_reads_apart() -> None:
    """Two kickoffs in threads on one planner handle: customer 2's read of 1200 does not
    authorize customer 1's booking planned at 900 (refused stale, handed 1200)."""
    v = Venues()
    llm1, llm2 = _customers(v)
    errors: list[BaseException] = []

    def run(llm: Scripted, role: str) -> None:
        try:
            v.crew(llm, role).kickoff()
        except BaseException as exc:  # reported below
            errors.append(exc)

    ts = [threading.Thread(target=run, args=(llm1, "cust1")),
          threading.Thread(target=run, args=(llm2, "cust2"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(2 * _WAIT_S)
    assert not errors and not any(t.is_alive() for t in ts)
    _check_customer1_refused(v, llm1)


def test_two_akickoffs_keep_their_reads_apart() -> None:
    """The same with ``asyncio.gather`` over ``akickoff`` (each customer's steps wait in
    CrewAI's worker threads)."""
    v = Venues()
    llm1, llm2 = _customers(v)

    async def both() -> None:
        await asyncio.wait_for(asyncio.gather(v.crew(llm1, "cust1").akickoff(),
                                              v.crew(llm2, "cust2").akickoff()),
                               3 * _WAIT_S)

    asyncio.run(both())
    _check_customer1_refused(v, llm1)


def test_each_input_of_kickoff_for_each_is_its_own_run() -> None:
    """``kickoff_for_each``: the first input's read does not authorize the second input's
    booking (refused ``not_read``, the value handed over); within one run it does."""
    v = Venues()
    llm = scripted([call("get_venue", venue_id="hall-a")],
                   [call("book_venue", venue_id="hall-a", note="run 1")], "done",
                   [call("book_venue", venue_id="hall-a", note="run 2 unread")], "done")
    v.crew(llm).kickoff_for_each(inputs=[{"n": "1"}, {"n": "2"}])
    assert v.booked == ["run 1"]
    assert "(not_read)" in tool_text(llm)


def test_tasks_of_one_crew_run_share_its_reads() -> None:
    """One crew run is one scope: a read in the first task (one CrewAI agent) counts for
    a call in the second task (another CrewAI agent on the same handle)."""
    v = Venues()
    reader = Agent(role="scout", goal="look", backstory="events", tools=v.tools,
                   llm=scripted([call("get_venue", venue_id="hall-a")], "900"), max_iter=4)
    llm = scripted([call("book_venue", venue_id="hall-a", note="from the scout")], "done")
    booker = Agent(role="booker", goal="book", backstory="events", tools=v.tools, llm=llm,
                   max_iter=4)
    Crew(agents=[reader, booker],
         tasks=[Task(description="price of hall-a", expected_output="a price", agent=reader),
                Task(description="book hall-a", expected_output="done", agent=booker)]
         ).kickoff()
    assert v.booked == ["from the scout"], tool_text(llm)


def test_an_explicit_scope_still_wins() -> None:
    """``with planner.scope(id):`` around two kickoffs joins them (one conversation): the
    first kickoff's read counts in the second."""
    v = Venues()
    with v.planner.scope("chat-1"):
        v.crew(scripted([call("get_venue", venue_id="hall-a")], "done")).kickoff()
        v.crew(scripted([call("book_venue", venue_id="hall-a", note="joined")],
                        "done")).kickoff()
    assert v.booked == ["joined"]



def test_a_raised_kickoff_leaves_no_run_scope_behind() -> None:
    """A crew that raised out of ``kickoff()`` may leave its run's entry on the thread's
    CrewAI event stack; later code outside any run on that thread is unscoped, not the
    dead run's scope, so on a handle that has seen scoped use its protected call fails
    closed (review of h28crew: a web worker thread's later requests shared one scope)."""
    from crewai.events.event_context import _event_id_stack

    from icore.integrations.crewai._turns import run_scope

    token = _event_id_stack.set((("dead-run", "crew_kickoff_started"),))
    try:
        assert run_scope() is None
        _event_id_stack.set((("dead-run", "crew_kickoff_started"),
                             ("live", "crew_kickoff_started"), ("t", "task_started")))
        assert run_scope() == ("crewai", "live")
    finally:
        _event_id_stack.reset(token)
