"""The model's JSON arguments text is read without raising, in every integration (#28).

:func:`icore.integrations._json_args.read_json` is the one reader of a tool call's
arguments text; an integer over the interpreter's digit limit (``ValueError``) and nesting
deeper than its stack (``RecursionError``) are reasons, never exceptions. A fenced OpenAI
Agents SDK tool (a real ``Runner`` run with a scripted ``Model``) answers such a call with
a refusal the model reads; the recorded turn keeps the text as the model sent it.
"""

from __future__ import annotations

import asyncio
import sys

from agents import Agent, Runner, function_tool
from agents.testing import assistant_message, function_call
from hypothesis import given
from hypothesis import strategies as st

from icore.integrations import RunRecorder
from icore.integrations._json_args import given_args, read_json
from icore.integrations.openai_agents import fenced_function_tool, recording

from .conftest import load_example
from .test_recording_h28 import _dep, _desk

BIG = '{"flight": 1' + "0" * 5000 + "}"
DEEP = '{"flight": ' + "[" * 100_000 + "]" * 100_000 + "}"


def test_read_json_names_why_text_does_not_read() -> None:
    """Values read; each way of not reading is one sentence the model can act on."""
    assert read_json('{"a": 1}') == ({"a": 1}, None) and read_json(None) == ({}, None)
    assert read_json(BIG) == (None, f"a number has more than "
                              f"{sys.get_int_max_str_digits()} digits")
    assert read_json(DEEP) == (None, "nested too deeply")
    assert read_json("{")[1] == "Expecting property name enclosed in double quotes"
    assert given_args(DEEP) == {"raw": DEEP} and given_args("[1]") == {"raw": "[1]"}
    assert given_args('{"a": [1]}') == {"a": [1]}


@given(st.text(alphabet=st.sampled_from('{}[]"0123456789:,-eE. a\\'), max_size=60))
def test_read_json_never_raises(text: str) -> None:
    """Any text: a value or a reason, never both, never an exception."""
    value, why = read_json(text)
    assert (why is None) or (value is None and why)
    assert isinstance(given_args(text), dict)


def test_openai_agents_fenced_tool_refuses_unreadable_arguments() -> None:
    """The SDK fenced tool tells the model its arguments do not read (an int over the
    digit limit); nothing runs, the run goes on to its answer and its recorded turn keeps
    the model's text. (Nesting 100k deep raises inside the SDK's own run loop first.)"""
    text = BIG
    _ws, desk, get_fare = _desk()
    booked: list[str] = []

    def book(flight: str) -> str:
        """Book a flight."""
        booked.append(flight)
        return "booked"

    agent = Agent(name="booker", tools=[get_fare, fenced_function_tool(
        book, agent=desk, depends_on=_dep)],
        model=load_example("openai_agents_app").ScriptModel(iter([
            [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
            [function_call("book", text, call_id="c2")],
            [assistant_message("could not book")]])))
    rec = RunRecorder("sdk-unreadable")
    with recording(rec, exclusive=True):
        result = asyncio.run(Runner.run(agent, "book LH100"))
    assert result.final_output == "could not book" and booked == []
    read = [str(getattr(i, "output", "")) for i in result.new_items]
    assert any(r.startswith("invalid JSON arguments for book: ") for r in read), read
    (turn,) = [e for e in rec.events if e.get("tool_calls") and
               e["tool_calls"][0]["name"] == "book"]
    assert turn["tool_calls"][0]["args"] == text  # recorded as the model sent it


def test_openai_agents_turn_keeps_empty_arguments_as_sent() -> None:
    """A model call with an empty arguments string is recorded with ``""`` (as sent),
    not ``{}`` (#28, a regression of the shared reader)."""
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = Agent(name="pinger", tools=[function_tool(ping)],
                  model=load_example("openai_agents_app").ScriptModel(iter([
                      [function_call("ping", "", call_id="c1")],
                      [assistant_message("done")]])))
    rec = RunRecorder("sdk-empty")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(agent, "ping"))
    (turn,) = [e for e in rec.events if e.get("tool_calls")]
    assert turn["tool_calls"][0]["args"] == ""
