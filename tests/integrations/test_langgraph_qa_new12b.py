"""QA qa-new12b (a new LangGraph user): failures, shared call ids, answers for another call.

* S2: a fenced tool whose body makes its effect and then raises was recorded
  ``may_have_run: false`` and audited "failed after authorization" (``--fail-on
  unknown`` exit 0) while LangGraph itself refused the retry as "outcome unknown": now
  the call's outcome is unknown (``NoEffect`` is the tool's word that it did nothing),
  and the retry's trace line says the earlier attempt's outcome is unknown.
* S2: two calls of one model message sharing a ``tool_call_id`` (different arguments,
  under ``approval=True``) were asked about twice with the first call's arguments and
  the second was answered with the first one's result although it never ran: now every
  call sharing the id is refused ``duplicate_call_id`` (nothing runs, nothing is asked).
* S3: an answer naming another approval request was recorded ``decision: "approve"``;
  now ``"unmatched"`` (the audit links it to no call, no false "lines removed").

Real LangGraph graphs (a scripted chat model emitting tool calls), recorded by
``RecordingHandler`` and audited by the ``icore audit`` CLI on the written trace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from icore.adapters import FAILED_AFTER_AUTHORIZATION, OUTCOME_UNKNOWN
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool

from .test_langgraph_workspace import Shop, _msg, _react, _tool_msgs
from .test_recording_truthful import _audit

pytestmark = pytest.mark.timeout(120)


def _crashing_ship(shop: Shop, kind: type[Exception], **kw: Any) -> Any:
    """``ship`` that ships, then raises once (a connection reset after the commit)."""
    @tool
    def ship(order_id: int, city: str) -> str:
        """Ship an order to a city."""
        shop.shipped.append(city)
        if len(shop.shipped) == 1:
            raise kind("connection reset after commit")
        return f"shipped order {order_id} to {city}"

    return fenced_tool(ship, agent=shop.shipper,
                       depends_on=lambda a: {f"order/{a['order_id']}"}, **kw)


def _cfg(rec: RunRecorder) -> Any:
    return {"configurable": {"thread_id": "t1"}, "callbacks": [RecordingHandler(rec)]}


@pytest.mark.parametrize(("kind", "counted", "code"), [
    (RuntimeError, OUTCOME_UNKNOWN, 3), (NoEffect, FAILED_AFTER_AUTHORIZATION, 0)])
def test_a_body_raising_after_its_effect_is_outcome_unknown_and_its_retry_says_so(
        tmp_path: Path, kind: type[Exception], counted: str, code: int) -> None:
    """b3 s9: the body ships, then raises; the user retries the thread. LangGraph's
    retry is refused (never run twice) and the trace line says why; the audit counts the
    call outcome unknown and ``--fail-on unknown`` fails (NoEffect: failed, exit 0)."""
    shop = Shop()
    n = [0]
    app = _react([shop.get_order, _crashing_ship(shop, kind)], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("ok")]),
        InMemorySaver())
    rec = RunRecorder("crash")
    cfg = _cfg(rec)
    if kind is RuntimeError:
        with pytest.raises(kind, match="connection reset"):
            app.invoke({"messages": [HumanMessage("ship")]}, cfg)
        out = app.invoke(None, cfg)  # the user retries the thread
    else:  # NoEffect: the model reads the tool's word, the graph goes on (QA qa-new14 S2)
        out = app.invoke({"messages": [HumanMessage("ship")]}, cfg)
    assert shop.shipped == ["Berlin"]  # never run twice
    decided = [d["planfence"]["decision"] for d in map(json.loads, rec.jsonl().splitlines())
               if "decision" in d.get("planfence", {})]
    assert decided[-1]["may_have_run"] is (kind is RuntimeError)
    if kind is RuntimeError:  # its effect is open: refused, and the line says why
        [replay] = [e for e in rec.events if e.get("replay")]
        assert "its outcome is unknown" in str(_tool_msgs(out)[-1].content)
        assert replay["content"].startswith(
            "replayed ship: refused: its attempt before the resume started and did not "
            "finish")
        assert "answered before the resume" not in replay["content"]
    else:  # NoEffect: the tool's own failure as the model's error message, not replayed
        assert str(_tool_msgs(out)[-1].content) == "connection reset after commit"
        assert _tool_msgs(out)[-1].status == "error"
        assert not [e for e in rec.events if e.get("replay")]
    path = rec.write(tmp_path / "crash.jsonl")
    got, text, run = _audit(path, "--fail-on", "unknown")
    assert got == code and f"protected actions of crash: 1 (1 {counted})" in text
    assert run["actions"][counted] == 1


def test_an_approved_call_whose_body_raised_is_outcome_unknown(tmp_path: Path) -> None:
    """b2 s7: ``approval=True``, the human says yes, the body raises: approved, outcome
    unknown; ``--fail-on unknown`` exits 3."""
    shop = Shop()
    n = [0]
    app = _react([shop.get_order, _crashing_ship(shop, RuntimeError, approval=True)], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("gave up")]),
        InMemorySaver())
    rec = RunRecorder("approved-crash")
    cfg = _cfg(rec)
    assert app.invoke({"messages": [HumanMessage("ship")]}, cfg)["__interrupt__"]
    with pytest.raises(RuntimeError):
        app.invoke(Command(resume=True), cfg)
    assert shop.shipped == ["Berlin"]
    got, text, run = _audit(rec.write(tmp_path / "ac.jsonl"), "--fail-on", "unknown")
    assert got == 3 and "1 (1 outcome unknown); 1 approved by a human" in text
    assert run["lineage"][0]["human"] == "approved"


def _dup(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": a, "args": b, "id": i} for a, b, i in calls])


@pytest.mark.parametrize("approval", [True, False])
@pytest.mark.parametrize("city2", ["Paris", "Berlin"])
def test_calls_sharing_a_tool_call_id_are_refused(tmp_path: Path, approval: bool,
                                                  city2: str) -> None:
    """b5: two calls of one message with the id "Y" (different arguments, or the same):
    each is refused ``duplicate_call_id``, nothing runs, the human is not asked, no
    answer carries another call's result; the audit counts two blocked actions."""
    shop = Shop()
    app = _react([shop.get_order, shop.safe_ship(approval=approval)], iter([
        _dup(("get_order", {"order_id": 42}, "r1")),
        _dup(("ship", {"order_id": 42, "city": "Berlin"}, "Y"),
             ("ship", {"order_id": 42, "city": city2}, "Y")), AIMessage("done")]),
        InMemorySaver())
    rec = RunRecorder("dup")
    out = app.invoke({"messages": [HumanMessage("ship")]}, _cfg(rec))  # one invoke
    assert "__interrupt__" not in out and shop.shipped == []
    said = [str(m.content) for m in _tool_msgs(out) if m.name == "ship"]
    assert len(said) == 2 and all(s.startswith(
        "PlanFence blocked ship (duplicate_call_id): 2 tool calls of one model message "
        "share the id 'Y'") for s in said)
    got, text, run = _audit(rec.write(tmp_path / "dup.jsonl"), "--fail-on", "invalid")
    assert got == 0 and "protected actions of dup: 2 (2 blocked)" in text
    assert all("duplicate_call_id" in lv["reason"] for lv in run["lineage"])


def test_a_refused_shared_id_is_recorded_once_across_a_resume(tmp_path: Path) -> None:
    """A message with an approval call and two calls sharing an id: the pause re-runs the
    tool node on resume; the shared-id calls are refused again, recorded once each."""
    shop = Shop()
    app = _react([shop.get_order, shop.safe_ship(approval=True)], iter([
        _dup(("get_order", {"order_id": 42}, "r1")),
        _dup(("ship", {"order_id": 42, "city": "Berlin"}, "A"),
             ("ship", {"order_id": 42, "city": "Paris"}, "Y"),
             ("ship", {"order_id": 42, "city": "Rome"}, "Y")), AIMessage("done")]),
        InMemorySaver())
    rec = RunRecorder("dup-resume")
    cfg = _cfg(rec)
    out = app.invoke({"messages": [HumanMessage("ship")]}, cfg)
    assert out["__interrupt__"][0].value["planfence.approval"]["args"]["city"] == "Berlin"
    out = app.invoke(Command(resume=True), cfg)
    assert shop.shipped == ["Berlin"]
    _got, text, run = _audit(rec.write(tmp_path / "dr.jsonl"))
    assert "protected actions of dup-resume: 3 (1 valid, 2 blocked)" in text, text
    assert sorted(lv["status"] for lv in run["lineage"]) == ["blocked", "blocked", "valid"]


def test_an_answer_naming_another_request_is_recorded_unmatched(tmp_path: Path) -> None:
    """b7: ``Command(resume={"planfence.approval": "deadbeef", "approved": True})`` is not
    taken (asked again); it is recorded ``decision: "unmatched"``, not "approve"; a trace
    written while paused audits without a "lines removed" warning; the later "no" is the
    call's answer."""
    shop = Shop()
    n = [0]
    app = _react([shop.get_order, shop.safe_ship(approval=True)], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("not shipped")]),
        InMemorySaver())
    rec = RunRecorder("wrong-id")
    cfg = _cfg(rec)
    app.invoke({"messages": [HumanMessage("ship")]}, cfg)
    out = app.invoke(Command(resume={"planfence.approval": "deadbeef", "approved": True}),
                     cfg)
    assert out["__interrupt__"] and shop.shipped == []  # asked again
    [said] = [e for e in rec.events if e.get("answered_by") == "human"]
    assert said["decision"] == "unmatched" and said["tool"] == "ship"
    assert said["content"].startswith("a human's answer to ship(")
    got, text, run = _audit(rec.write(tmp_path / "paused.jsonl"), "--fail-on", "invalid")
    assert got == 0 and "lines removed" not in text and "approved by a human" not in text
    app.invoke(Command(resume=False), cfg)
    assert shop.shipped == []
    _got, text, run = _audit(rec.write(tmp_path / "done.jsonl", overwrite=True))
    assert "protected actions of wrong-id: 1 (1 blocked)" in text
    assert run["lineage"][0]["human"] == "rejected"


class Declined(NoEffect, ToolException):
    """The tool did nothing, and LangChain hands its message to the model."""


@pytest.mark.parametrize("error", [Declined, NoEffect], ids=["declined", "no-effect"])
def test_a_no_effect_tool_exception_is_read_by_the_model_and_counted_failed(
        tmp_path: Path, error: type[Exception]) -> None:
    """``class Declined(NoEffect, ToolException)``: LangChain turns it into the model's
    error message (the run goes on), the audit counts the call failed after
    authorization and ``--fail-on unknown`` passes. A plain ``NoEffect`` (the documented
    ``raise NoEffect(...) from exc``) does the same: ``ToolNode`` re-raised it and the
    graph crashed (QA qa-new14 S2)."""
    shop = Shop()
    n = [0]

    @tool
    def ship(order_id: int, city: str) -> str:
        """Ship an order to a city."""
        raise error(f"carrier declined order {order_id}")

    safe = fenced_tool(ship, agent=shop.shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    app = _react([shop.get_order, safe], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("declined")]),
        InMemorySaver())
    rec = RunRecorder("declined")
    out = app.invoke({"messages": [HumanMessage("ship")]}, _cfg(rec))
    last = _tool_msgs(out)[-1]
    assert last.status == "error" and "carrier declined order 42" in str(last.content)
    got, text, _run = _audit(rec.write(tmp_path / "d.jsonl"), "--fail-on", "unknown")
    assert got == 0 and "protected actions of declined: 1 (1 failed after authorization)" \
        in text


def test_a_tool_exception_after_the_body_started_is_told_as_outcome_unknown() -> None:
    """QA qa-new13a S3: a ``ToolException`` (LangChain hands its message to the model)
    from a body that started may follow its effect: the model reads that the call may
    have run and to check its effect before calling again, not only the message."""
    shop = Shop()
    n = [0]

    @tool
    def ship(order_id: int, city: str) -> str:
        """Ship an order to a city."""
        shop.shipped.append(city)
        raise ToolException("carrier timed out")

    safe = fenced_tool(ship, agent=shop.shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    app = _react([shop.get_order, safe], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("unsure")]),
        InMemorySaver())
    out = app.invoke({"messages": [HumanMessage("ship")]}, _cfg(RunRecorder("te")))
    last = _tool_msgs(out)[-1]
    assert shop.shipped == ["Berlin"] and last.status == "error"
    assert str(last.content) == (
        "ship failed with ToolException: carrier timed out; it may have run (it started "
        "before it failed), so its outcome is unknown: check its effect before calling "
        "ship again, or report the unknown outcome")
