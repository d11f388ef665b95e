"""QA qa-new9 (an Agents SDK 0.24 user's hotel app): what the recording and the audit say.

Real SDK ``Runner`` with ``agents.testing.ScriptedModel`` (fills no span) or the
examples' traced model (a generation span per turn); no network.

* S2 a fenced tool that raised in a traced run is recorded with its exception, not only
  the SDK's redacted span text; a timeout counts "outcome unknown"; the SDK's span is
  the one it makes for the same tool unfenced;
* S2 after the one replan was blocked ``second_change``, a call the gate takes as a fresh
  plan is not recorded (nor audited) as another replan;
* S2 a human's rejection is recorded with ScriptedModel too;
* S2 a trace written while the human decides is audited paused with ScriptedModel;
* S4 the ``unseen_model`` note says only what the trace lacks; ``rec.task`` /
  ``rec.finish`` add nothing a span-emitting model's trace already holds;
* S4 the SDK's own ``timeout=`` is recorded as a timeout, not as a Ctrl-C.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents.testing")
from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tracing import FunctionSpanData

from icore.adapters import OUTCOME_UNKNOWN
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording
from icore.workspace import Workspace

from .conftest import load_example
from .test_recording_truthful import _audit

REDACTED = "Tool execution failed. Error details are redacted."


def _hotel() -> tuple[Workspace, Any, Any]:
    ws = Workspace({"room/*": "frontdesk"})
    ws.put("room/101", {"price": 100}, by="frontdesk")
    desk = ws.agent("desk")

    @function_tool
    def get_room(room_id: str) -> dict[str, Any]:
        """Look a room up."""
        return desk.read(f"room/{room_id}")  # type: ignore[return-value]

    return ws, desk, get_room


def _dep(a: dict[str, Any]) -> set[str]:
    return {f"room/{a['room_id']}"}


def _steps(tool: str, **args: Any) -> list[Any]:
    return [[function_call("get_room", {"room_id": "101"}, call_id="r1")],
            [function_call(tool, {"room_id": "101", **args}, call_id="t1")],
            [assistant_message("done")]]


def _spans(proc: Any) -> list[Any]:
    """Function spans the recording processor ``proc`` sees end (as the SDK made them)."""
    seen: list[Any] = []
    inner = proc.on_span_end

    def on_span_end(span: Any) -> None:
        if isinstance(span.span_data, FunctionSpanData):
            seen.append(span)
        inner(span)

    proc.on_span_end = on_span_end
    return seen


def _raising_run(exc: BaseException, config: RunConfig | None = None
                 ) -> tuple[RunRecorder, list[Any]]:
    """A traced run: hold_room raises ``exc``; the same tool unfenced raises it too."""
    _ws, desk, get_room = _hotel()

    async def hold_room(room_id: str) -> str:
        """Hold a room."""
        raise exc

    async def hold_plain(room_id: str) -> str:
        """Hold a room (not fenced)."""
        raise exc

    fenced = fenced_function_tool(hold_room, agent=desk, depends_on=_dep)
    steps = _steps("hold_room")
    steps.insert(2, [function_call("hold_plain", {"room_id": "101"}, call_id="p1")])
    agent = Agent(name="concierge", tools=[get_room, fenced, function_tool(hold_plain)],
                  model=ScriptedModel(steps))
    rec = RunRecorder("hold", question="hold 101")

    async def main() -> list[Any]:
        with recording(rec, exclusive=True) as proc:
            spans = _spans(proc)
            rec.task("hold 101")
            result = await Runner.run(agent, "hold 101", run_config=config)
            rec.finish(result.last_agent.name, result.final_output)
        return spans

    return rec, asyncio.run(main())


def _errors(spans: list[Any]) -> dict[str, Any]:
    """Each failed function span's error, the tool's name left out."""
    out = {}
    for s in spans:
        err = dict(s.error or {})
        data = dict(err.pop("data", None) or {})
        data.pop("tool_name", None)
        out[s.span_data.name] = {**err, "data": data}
    return out


def _cli(rec: RunRecorder, tmp_path: Path) -> dict[str, Any]:
    """``icore audit`` of the written trace: the run's JSON (summary, actions, lineage)."""
    return _audit(rec.write(tmp_path / f"{rec.run_id}.jsonl"))[2]


def _held(rec: RunRecorder) -> dict[str, Any]:
    return next(e for e in rec.events if e.get("tool") == "hold_room"
                and e["kind"] == "tool_output")


def test_a_traced_timeout_is_recorded_as_raised_and_counted_outcome_unknown(
        tmp_path: Path) -> None:
    rec, spans = _raising_run(TimeoutError("channel manager timed out"))
    line = _held(rec)
    assert line["error_text"] == "TimeoutError: channel manager timed out"
    assert line["failed"] is True and line["exitcode"] == 1
    # the model's text: the call may have run (QA qa-new13a S3), not "Please try again"
    assert "hold_room failed with TimeoutError: channel manager timed out; it may have " \
        "run" in line["content"] and "Please try again" not in line["content"]
    assert _cli(rec, tmp_path)["actions"][OUTCOME_UNKNOWN] == 1
    # the SDK's span: the one it makes for the same tool unfenced (redacted the same)
    errors = _errors(spans)
    assert errors["hold_room"] == errors["hold_plain"]
    assert errors["hold_room"]["data"]["error"] == REDACTED


def test_a_traced_failure_names_its_exception_and_counts_unknown(tmp_path: Path) -> None:
    """The body started and raised: it may have had its effect (QA qa-new12b S2)."""
    rec, _spans = _raising_run(RuntimeError("payment declined"))
    assert _held(rec)["error_text"] == "RuntimeError: payment declined"
    counts = _cli(rec, tmp_path)["actions"]
    assert counts["failed after authorization"] == 0 and counts[OUTCOME_UNKNOWN] == 1


def test_a_traced_no_effect_failure_counts_failed(tmp_path: Path) -> None:
    """``NoEffect``: the tool says it did nothing; counted failed after authorization."""
    rec, _spans = _raising_run(NoEffect("payment declined"))
    assert _held(rec)["error_text"] == "NoEffect: payment declined"
    counts = _cli(rec, tmp_path)["actions"]
    assert counts["failed after authorization"] == 1 and counts[OUTCOME_UNKNOWN] == 0


def test_without_sensitive_trace_data_only_the_type_is_recorded(tmp_path: Path) -> None:
    rec, spans = _raising_run(TimeoutError("guest card 4111"),
                              RunConfig(trace_include_sensitive_data=False))
    text = _held(rec)["error_text"]
    assert text.startswith("TimeoutError") and "4111" not in text
    assert _cli(rec, tmp_path)["actions"][OUTCOME_UNKNOWN] == 1
    errors = _errors(spans)
    assert errors["hold_room"] == errors["hold_plain"]


def test_the_sdk_timeout_is_named_a_timeout_not_a_ctrl_c(tmp_path: Path) -> None:
    _ws, desk, get_room = _hotel()
    ran: list[str] = []

    async def hold_room(room_id: str) -> str:
        """Hold a room (slow channel manager)."""
        ran.append("started")
        await asyncio.sleep(30)
        ran.append("finished")
        return "held"

    fenced = fenced_function_tool(function_tool(hold_room, timeout=0.2), agent=desk,
                                  depends_on=_dep)
    agent = Agent(name="concierge", tools=[get_room, fenced],
                  model=ScriptedModel(_steps("hold_room")))
    rec = RunRecorder("sdk-timeout")

    async def main() -> Any:
        with recording(rec, exclusive=True):
            return await Runner.run(agent, "hold 101")

    result = asyncio.run(main())
    assert ran == ["started"]
    said = [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"]
    assert "timed out after 0.2 seconds" in said[-1]
    text = _held(rec)["error_text"]
    assert text.startswith("TimeoutError: the SDK's timeout for hold_room")
    assert "timeout=0.2 s" in text and "Ctrl-C" not in text and "Cancelled" not in text
    assert _cli(rec, tmp_path)["actions"][OUTCOME_UNKNOWN] == 1


def _book_run(name: str, reread: bool) -> RunRecorder:
    """Read 101, then it changes before each of two calls; a third call (after a new read
    when ``reread``)."""
    ws, desk, get_room = _hotel()

    def book_room(room_id: str, price: float) -> str:
        """Book a room."""
        return "booked"

    def turns() -> Iterator[list[Any]]:
        yield [function_call("get_room", {"room_id": "101"}, call_id="r1")]
        ws.put("room/101", {"price": 130}, by="frontdesk")
        yield [function_call("book_room", {"room_id": "101", "price": 100}, call_id="b1")]
        ws.put("room/101", {"price": 140}, by="frontdesk")
        yield [function_call("book_room", {"room_id": "101", "price": 130}, call_id="b2")]
        if reread:
            yield [function_call("get_room", {"room_id": "101"}, call_id="r2")]
        yield [function_call("book_room", {"room_id": "101", "price": 140}, call_id="b3")]
        yield [assistant_message("done")]

    fenced = fenced_function_tool(book_room, agent=desk, depends_on=_dep)
    agent = Agent(name="concierge", tools=[get_room, fenced],
                  model=load_example("openai_agents_app").ScriptModel(turns()))
    rec = RunRecorder(name)

    async def main() -> None:
        with recording(rec, exclusive=True):
            await Runner.run(agent, name)

    asyncio.run(main())
    return rec


def test_a_fresh_plan_after_a_blocked_replan_is_not_a_replan(tmp_path: Path) -> None:
    rec = _book_run("second_change_reread", reread=True)
    plans = [e for e in rec.events if e["kind"] == "plan"]
    assert [(p["plan_id"], bool(p.get("replan"))) for p in plans] == [
        ("book_room#1", False), ("book_room#1", True)]
    ran = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "book_room"]
    assert [e.get("blocked", False) for e in ran] == [True, True, False]
    assert ran[-1]["replanned"] is False  # as the gate decided it
    gates = [e["gate"] for e in rec.events if "gate" in e]
    assert gates[-1] == {"outcome": "authorized", "point": 4, "reason": "valid",
                         "replanned": False, "tool": "book_room"}
    r = _cli(rec, tmp_path)
    assert r["summary"]["replans"] == 1 and r["diagnoses"] == []
    why = {a["action"]: a["reason"] for a in r["lineage"]}
    assert why["book_room-2"].startswith("replan of book_room-1 (stale)")
    assert "second_change" in why["book_room-2"]
    assert why["book_room-3"].startswith("valid")


def test_a_replan_retried_from_the_same_values_is_not_linked_to_the_blocked_one(
        tmp_path: Path) -> None:
    """The gate takes the third call as the replan again (it derives from the values the
    stale refusal handed over): blocked second_change; the blocked replan (book_room-2)
    handed nothing over and is not "replanned as" the third."""
    rec = _book_run("stale_twice", reread=False)
    plans = [e for e in rec.events if e["kind"] == "plan"]
    assert {p["plan_id"] for p in plans} == {"book_room#1"}
    r = _cli(rec, tmp_path)
    why = {a["action"]: a["reason"] for a in r["lineage"]}
    assert why["book_room-1"].startswith("stale → replanned as book_room-2")
    assert why["book_room-2"].startswith("replan of book_room-1 (stale)")
    assert "replanned as" not in why["book_room-2"]
    assert "replan of" not in why["book_room-3"] and "second_change" in why["book_room-3"]
    assert [d["detail"] for d in r["diagnoses"] if d["defect"] == "progress"] == [
        "a second replan of the protected call book_room#1: replan: plan2 -> plan3"]


def _refund_run(model: Any, *, answer: str, app_records: bool) -> tuple[RunRecorder, Any]:
    """get_room, then refund (put to the human); the human answers ``answer``."""
    _ws, desk, get_room = _hotel()
    done: list[str] = []

    def refund(room_id: str, amount: float) -> str:
        """Refund."""
        done.append(room_id)
        return "refunded"

    fenced = fenced_function_tool(function_tool(refund, needs_approval=True), agent=desk,
                                  depends_on=_dep)
    agent = Agent(name="concierge", tools=[get_room, fenced], model=model)
    rec = RunRecorder("refund")

    async def main() -> Any:
        with recording(rec, exclusive=True):
            if app_records:
                rec.task("refund 101")
            result = await Runner.run(agent, "refund 101")
            if answer != "wait":
                state = result.to_state()
                for item in result.interruptions:
                    (state.approve if answer == "approve" else state.reject)(item)
                result = await Runner.run(agent, state)
                if app_records:
                    rec.finish(result.last_agent.name, result.final_output)
        return result

    result = asyncio.run(main())
    assert done == (["101"] if answer == "approve" else [])
    return rec, result


REFUND = [[function_call("get_room", {"room_id": "101"}, call_id="r1")],
          [function_call("refund", {"room_id": "101", "amount": 100}, call_id="f1")],
          [assistant_message("not refunded")]]


def test_a_rejection_is_recorded_with_the_scripted_model(tmp_path: Path) -> None:
    rec, _result = _refund_run(ScriptedModel(REFUND), answer="reject", app_records=True)
    said = [e for e in rec.events if e.get("decision") == "reject"]
    assert [(e["kind"], e.get("answered_by")) for e in said] == [
        ("thought", "human"), ("tool_output", "sdk")]
    assert said[1]["blocked"] is True and said[1]["content"] == "Tool execution was not approved."
    assert said[1]["args"] == {"room_id": "101", "amount": 100}
    r = _cli(rec, tmp_path)
    assert r["actions"]["blocked"] == 1 and r["summary"]["terminated"]


def test_a_rejection_with_a_traced_model_is_recorded_once() -> None:
    model = load_example("openai_agents_app").ScriptModel(iter(REFUND))
    rec, _result = _refund_run(model, answer="reject", app_records=False)
    said = [e for e in rec.events if e.get("decision") == "reject"]
    assert [(e["kind"], e.get("answered_by")) for e in said] == [
        ("thought", "human"), ("tool_output", "sdk")]


def test_a_trace_written_while_the_human_decides_is_paused() -> None:
    rec, result = _refund_run(ScriptedModel(REFUND), answer="wait", app_records=True)
    assert result.interruptions
    kinds = [(e["kind"], bool(e.get("pause")), bool(e.get("unseen_model")))
             for e in rec.events]
    assert kinds[-2:] == [("thought", False, True), ("thought", True, False)]
    r = rec.audit()
    assert r.paused and not r.diagnoses
    assert "rec.finish" not in rec.events[-2]["content"]  # a paused run has no answer yet


def test_the_note_names_only_what_the_trace_lacks() -> None:
    rec, _ = _refund_run(ScriptedModel(REFUND), answer="approve", app_records=True)
    written = [ln for ln in rec.jsonl().splitlines() if "unseen_model" in ln]
    assert len(written) == 1 and "turns are not recorded" in written[0]
    assert "rec.task" not in written[0] and "rec.finish" not in written[0]
    bare, _ = _refund_run(ScriptedModel(REFUND), answer="approve", app_records=False)
    written = [ln for ln in bare.jsonl().splitlines() if "unseen_model" in ln]
    assert "rec.task(question)" in written[0] and "rec.finish(" in written[0]


def test_task_and_finish_add_nothing_a_traced_model_recorded() -> None:
    model = load_example("openai_agents_app").ScriptModel(iter(REFUND))
    rec, result = _refund_run(model, answer="approve", app_records=True)
    assert result.final_output == "not refunded"
    kinds = rec.kinds()
    assert kinds.count("task") == 1 and kinds.count("termination") == 1
    assert not [e for e in rec.events if e.get("unseen_model")]
    assert rec.audit().terminated


def test_two_untraced_identical_requests_stay_two_lines() -> None:
    rec = RunRecorder("chat")
    rec.task("yes")
    rec.task("yes")
    rec.finish("a", "ok")
    rec.finish("a", "ok")
    assert rec.kinds() == ["task", "task", "termination", "termination"]
