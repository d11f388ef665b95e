"""QA qa-new14 S2 on the Agents SDK: the model's repeat after an unknown outcome.

The SDK hands a raising tool's failure to the model as text; the model's next message
calls the tool again (a new call id, the same arguments). The read the first call
consumed no longer backs it: refused ``not_read`` with the unknown-outcome text, until
the agent reads again. Real SDK ``Runner`` with the examples' scripted model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import assistant_message, function_call

from icore.integrations import NoEffect
from icore.integrations.openai_agents import fenced_function_tool
from icore.workspace import NOT_READ

from .conftest import load_example
from .test_recording_h28 import _dep, _desk

pytestmark = pytest.mark.timeout(120)


def _book_twice(kind: type[Exception], *after: list[Any]) -> tuple[list[str], list[str]]:
    """read, book (raises after its effect), book again (new id), then ``after``."""
    _ws, desk, get_fare = _desk()
    booked: list[str] = []

    def book(flight: str) -> str:
        """Book a flight."""
        booked.append(flight)
        if len(booked) == 1:
            raise kind("airline API timed out")
        return f"booked {flight}"

    tool = fenced_function_tool(book, agent=desk, depends_on=_dep)
    script = iter([[function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
                   [function_call("book", {"flight": "LH100"}, call_id="c2")],
                   [function_call("book", {"flight": "LH100"}, call_id="c3")],
                   *after, [assistant_message("done")]])
    agent = Agent(name="booker", tools=[get_fare, tool],
                  model=load_example("openai_agents_app").ScriptModel(script))
    res = asyncio.run(Runner.run(agent, "book LH100"))
    return booked, [str(i.output) for i in res.new_items if i.type == "tool_call_output_item"]


def test_the_repeat_is_refused_until_the_agent_reads_again() -> None:
    booked, outs = _book_twice(TimeoutError,
                               [function_call("get_fare", {"flight": "LH100"}, call_id="c4")],
                               [function_call("book", {"flight": "LH100"}, call_id="c5")])
    assert outs[1].startswith("book failed with TimeoutError: airline API timed out")
    assert outs[2].startswith(f"PlanFence blocked book ({NOT_READ}): book failed with "
                              "TimeoutError")
    assert "read fare/LH100 again" in outs[2]
    assert booked == ["LH100", "LH100"] and outs[-1] == "booked LH100"  # after the read


def test_a_no_effect_failure_lets_the_model_retry_from_its_read() -> None:
    booked, outs = _book_twice(NoEffect)
    assert booked == ["LH100", "LH100"] and outs[-1] == "booked LH100"
