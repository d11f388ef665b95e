"""QA qa-new17c #1: a web service builds a new ``RecordingHandler`` for each request.

The human's answer to a fenced ``approval=True`` call arrives in a later invocation than
the pause, recorded by a handler that never saw the pause. It was lost: no "a human
approved ..." line (``icore audit`` counted no human approval) and no ``unmatched`` line
for an answer naming another request. Now the call that reads the answer writes it when
no handler that saw the pause did: once, with one recorder shared by the invocations or
one recorder per invocation; the same handler for both still writes it once.

Real LangGraph (a ReAct graph, ``ToolNode``, an in-memory checkpointer), a scripted chat
model, the ``icore audit`` CLI on the written traces.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_langgraph_workspace import Shop, _msg, _react
from .test_recording_truthful import _audit

pytestmark = pytest.mark.timeout(120)

WRONG = {"planfence.approval": "deadbeef", "approved": True}


def _said(recs: list[RunRecorder]) -> list[tuple[str, str, Any]]:
    """The human-answer lines of the traces: (decision, tool, args)."""
    return [(e["decision"], e["tool"], e["args"]) for r in recs for e in r.events
            if e.get("answered_by") == "human" and e["kind"] == "thought"]


def _run(mode: str, answers: list[Any], shop: Shop, tools: list[Any] | None = None,
         script: list[AIMessage] | None = None) -> list[RunRecorder]:
    """Pause, then one invocation per answer, each with its own handler (``mode``:
    ``shared`` one recorder, ``per`` one recorder per invocation, ``same`` one handler)."""
    n = [0]
    turns = script or [_msg(("get_order", {"order_id": 42}), n=n),
                       _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n),
                       AIMessage("done")]
    app = _react(tools or [shop.get_order, shop.safe_ship(approval=True)], iter(turns),
                 InMemorySaver())
    recs = [RunRecorder("svc")] if mode != "per" else \
        [RunRecorder("svc") for _ in range(len(answers) + 1)]
    handler = RecordingHandler(recs[0])
    inputs: list[Any] = [{"messages": [HumanMessage("ship")]}]
    for i, inp in enumerate(inputs + [Command(resume=a) for a in answers]):
        rec = recs[i] if mode == "per" else recs[0]
        cb = handler if mode == "same" else RecordingHandler(rec)
        app.invoke(inp, {"configurable": {"thread_id": "t1"}, "callbacks": [cb]})
    return recs


ARGS = {"order_id": 42, "city": "Berlin"}


@pytest.mark.parametrize("mode", ["shared", "per", "same"])
@pytest.mark.parametrize(("answers", "decisions", "shipped"), [
    ([True], ["approve"], ["Berlin"]), (["yes"], ["approve"], ["Berlin"]),
    ([False], ["reject"], []), ([WRONG, True], ["unmatched", "approve"], ["Berlin"]),
    ([WRONG, False], ["unmatched", "reject"], [])])
def test_each_answer_is_recorded_once_whatever_handler_sees_the_resume(
        mode: str, answers: list[Any], decisions: list[str], shipped: list[str]) -> None:
    shop = Shop()
    recs = _run(mode, answers, shop)
    assert shop.shipped == shipped
    assert _said(recs) == [(d, "ship", ARGS) for d in decisions]
    if mode == "per":  # each answer is in the trace of the invocation that gave it
        assert [len(_said([r])) for r in recs] == [0] + [1] * len(answers)


@pytest.mark.parametrize("mode", ["shared", "per"])
def test_the_audit_counts_the_approval_given_in_a_later_request(mode: str,
                                                               tmp_path: Path) -> None:
    """The resume's trace (``per``: its own file) audits "1 approved by a human"."""
    shop = Shop()
    recs = _run(mode, [WRONG, True], shop)
    _code, text, run = _audit(recs[-1].write(tmp_path / "resume.jsonl"))
    assert "protected actions of svc: 1 (1 valid); 1 approved by a human" in text, text
    assert run["lineage"][0]["human"] == "approved"
    assert "lines removed" not in text


def test_a_rejection_in_a_later_request_is_the_blocked_call_answer(tmp_path: Path) -> None:
    shop = Shop()
    recs = _run("per", [False], shop)
    _code, text, run = _audit(recs[-1].write(tmp_path / "resume.jsonl"))
    assert "protected actions of svc: 1 (1 blocked)" in text, text
    assert run["lineage"][0]["human"] == "rejected"


@pytest.mark.parametrize("mode", ["shared", "per", "same"])
def test_two_approval_calls_of_one_message_each_answered_in_its_request(mode: str) -> None:
    """Two ``approval=True`` calls in one model message: LangGraph re-runs the tools node
    on each resume and replays the first call's answer; each answer is written once."""
    shop = Shop()
    shop.ws.put("order/43", {"city": "Paris"})
    n = [0]
    script = [_msg(("get_order", {"order_id": 42}), ("get_order", {"order_id": 43}), n=n),
              _msg(("ship", {"order_id": 42, "city": "Berlin"}),
                   ("ship", {"order_id": 43, "city": "Paris"}), n=n), AIMessage("done")]
    recs = _run(mode, [True, False], shop, script=script)
    assert shop.shipped == ["Berlin"]
    assert _said(recs) == [("approve", "ship", ARGS),
                           ("reject", "ship", {"order_id": 43, "city": "Paris"})]


def test_async_invocations_each_with_a_new_handler() -> None:
    """``ainvoke`` (the fenced tool's async path): the same answers, once each."""
    shop = Shop()
    n = [0]
    app = _react([shop.get_order, shop.safe_ship(approval=True)], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("done")]),
        InMemorySaver())
    recs = [RunRecorder("svc") for _ in range(3)]

    async def go() -> None:
        for rec, inp in zip(recs, [{"messages": [HumanMessage("ship")]}, Command(resume=WRONG),
                                   Command(resume=True)], strict=True):
            await app.ainvoke(inp, {"configurable": {"thread_id": "t1"},
                                    "callbacks": [RecordingHandler(rec)]})

    asyncio.run(go())
    assert shop.shipped == ["Berlin"]
    assert _said(recs) == [("unmatched", "ship", ARGS), ("approve", "ship", ARGS)]
