"""The audit of a recorded run tells the truth (issue 28 item 6; QA reports).

- an answer with nothing to check it against is *not checked*, not wrong (``answer_check``);
- a turn asking for a tool with other arguments, or for a call that was answered, is no
  repeat (``output_evidence``);
- one call's replan supersedes its own plan (``plan_id``), never another call's;
- a framework tool's plain output is evidence;
- the recorder writes data, not Python reprs.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from datetime import date
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from icore.adapters import AdapterError, audit_trace, check_answer, normalize_answer, parse_jsonl
from icore.integrations import RunRecorder
from icore.integrations._trace_data import plain_data
from icore.state import ValidatorInput


def _check(**payload: Any) -> bool:
    return check_answer(ValidatorInput((), (), payload, {}))


def _run(*events: dict[str, Any], **header: Any) -> Any:
    lines = [{"run": {"id": "r", **header}}, *events]
    return audit_trace(parse_jsonl("\n".join(json.dumps(x) for x in lines)))


TASK = {"agent": "user", "kind": "task", "content": "book R1"}


def _end(answer: str) -> dict[str, Any]:
    return {"agent": "booker", "kind": "termination", "final_answer": answer, "content": answer}


# ------------------------------------------------------------------ answer_check
@given(st.booleans(), st.text(max_size=20), st.one_of(st.none(), st.text(max_size=20)))
def test_recorded_outcome_decides(outcome: bool, answer: str, truth: str | None) -> None:
    """A recorded outcome is the verdict, whatever the answer and ground truth say."""
    assert _check(final_answer=answer, ground_truth=truth, recorded_outcome=outcome) is outcome


@given(st.one_of(st.none(), st.text(max_size=30)), st.sampled_from([None, "", "  ", "?!"]))
def test_nothing_to_check_against_certifies_only_an_answer(answer: str | None,
                                                           truth: str | None) -> None:
    """No recorded outcome and no (usable) ground truth: passes iff there is an answer."""
    assert _check(final_answer=answer, ground_truth=truth,
                  recorded_outcome=None) is bool(normalize_answer(answer))


def test_ground_truth_still_compares() -> None:
    """With a ground truth the answer is compared (numbers numerically)."""
    assert _check(final_answer="42.0", ground_truth="42", recorded_outcome=None)
    assert not _check(final_answer="41", ground_truth="42", recorded_outcome=None)
    assert not _check(final_answer="", ground_truth="42", recorded_outcome=None)


def test_unchecked_answer_is_sound_and_flagged_not_checked() -> None:
    """A run with an answer but no ground truth: sound terminal, no diagnosis, summary
    ``answer_checked`` False, and the certificate's payload says it was not checked."""
    r = _run(TASK, _end("R1 booked."))
    s = r.summary()
    assert s.terminal and s.answer_checked is False and r.diagnoses == ()
    assert s.to_json()["answer_checked"] is False
    certs = [c for c in r.state.certificates.values() if c.validator == "answer_check"]
    assert [c.payload.get("checked") for c in certs] == [False]


def test_empty_unchecked_answer_is_a_terminal_defect() -> None:
    """An empty final answer is still no answer (a terminal defect, said plainly)."""
    r = _run(TASK, _end(""))
    assert not r.summary().terminal
    assert [d.detail for d in r.diagnoses] == ["the run ended with an empty final answer"]


def test_checked_runs_keep_their_json_form() -> None:
    """A checked answer (ground truth or outcome) writes no ``answer_checked`` field, so
    audits of runs with a ground truth (Who&When) read exactly as before."""
    for header in ({"ground_truth": "R1 booked"}, {"succeeded": False}):
        s = _run(TASK, _end("R1 booked."), **header).summary()
        assert s.answer_checked is True and "answer_checked" not in s.to_json()
    assert "answer_checked" not in _run(TASK).summary().to_json()  # no terminal at all


# ------------------------------------------------------------------ paused runs
_ENDLESS = "the run ended without a terminal marker (no final answer)"


def _pause(**extra: Any) -> dict[str, Any]:
    return {"agent": "booker", "kind": "thought", "pause": True,
            "content": "paused at interrupt(), waiting for a human: book R1?", **extra}


def test_run_whose_last_event_is_a_pause_is_paused() -> None:
    """Written while the run waits for a human: paused (summary, JSON), no terminal
    diagnosis, no terminal marker claimed."""
    r = _run(TASK, {"agent": "booker", "kind": "output", "content": "calls book"},
             _pause())
    s = r.summary()
    assert r.paused and s.paused and s.to_json()["paused"] is True
    assert r.diagnoses == () and not s.terminal and not s.terminated


@given(st.lists(st.sampled_from(["pause", "thought", "output", "end", "unpaused"]),
                max_size=6))
def test_only_a_final_pause_excuses_the_missing_end(kinds: list[str]) -> None:
    """Any run: paused iff it has no terminal marker and its last step is a pause (a
    ``pause: false`` thought is none); every other run without one keeps its terminal
    diagnosis, and a run that is not paused has no ``paused`` field."""
    step = {"pause": _pause(), "unpaused": _pause(pause=False), "end": _end("R1 booked."),
            "thought": {"agent": "booker", "kind": "thought", "content": "hm"},
            "output": {"agent": "booker", "kind": "output", "content": "R1 is 100"}}
    r = _run(TASK, *(step[k] for k in kinds))
    ended = "end" in kinds
    paused = not ended and bool(kinds) and kinds[-1] == "pause"
    assert r.paused is paused and ("paused" in r.summary().to_json()) is paused
    assert (_ENDLESS in [d.detail for d in r.diagnoses]) is (not ended and not paused)


def test_pause_must_be_a_boolean() -> None:
    """``pause`` is read like the format's other booleans; anything else names the line."""
    with pytest.raises(AdapterError, match=r"line 3\.pause"):
        _run(TASK, _pause(pause="maybe"))


# ------------------------------------------------------------------ repeats
def _turn(args: dict[str, Any], text: str = "calls get_room") -> dict[str, Any]:
    return {"agent": "booker", "kind": "output", "content": text,
            "tool_calls": [{"name": "get_room", "args": args, "id": f"id-{len(args)}"}]}


def _tool(content: str, exitcode: int = 0) -> dict[str, Any]:
    return {"agent": "booker", "kind": "tool_output", "tool": "get_room",
            "content": content, "exitcode": exitcode}


def _repeats(r: Any) -> list[str]:
    return [d.detail for d in r.diagnoses if "repeats" in d.detail]


def test_same_text_other_arguments_is_no_repeat() -> None:
    """Two turns with the same text asking for other arguments are two observations."""
    r = _run(TASK, _turn({"room_id": "R1"}), _tool('{"floor": 1}'),
             _turn({"room_id": "R2"}), _tool('{"floor": 2}'), _end("done"))
    assert _repeats(r) == [] and r.summary().hard_flags == 0


def test_a_call_asked_again_after_its_answer_is_no_repeat_but_a_real_repeat_is() -> None:
    """The same call again after it was refused is a retry on new information; after it
    ran (a re-read of an unchanged fact, a second identical shipment: QA r8-ag2mcp D1) it
    acts on the environment again, no repeated report. The same call asked again with
    no answer in between, a third time after the same answer twice (a loop), and the
    same text twice, still repeat (hard flag)."""
    retry = _run(TASK, _turn({"room_id": "R1"}), _tool("BLOCKED: not_read", 1),
                 _turn({"room_id": "R1"}), _tool('{"floor": 1}'), _end("done"))
    assert _repeats(retry) == []
    again = _run(TASK, _turn({"room_id": "R1"}), _tool('{"floor": 1}'),
                 _turn({"room_id": "R1"}), _tool('{"floor": 1}'), _end("done"))
    assert _repeats(again) == [] and again.summary().hard_flags == 0
    changed = _run(TASK, *[x for f in (1, 2, 3) for x in (
        _turn({"room_id": "R1"}), _tool(f'{{"floor": {f}}}'))], _end("done"))
    assert _repeats(changed) == []  # each answer was news
    loop = _run(TASK, *[x for _ in range(3) for x in (
        _turn({"room_id": "R1"}), _tool('{"floor": 1}'))], _end("done"))
    assert len(_repeats(loop)) == 1 and loop.summary().hard_flags == 1  # stuck: the third
    unanswered = _run(TASK, _turn({"room_id": "R1"}), _turn({"room_id": "R1"}),
                      _tool('{"floor": 1}'), _end("done"))
    assert len(_repeats(unanswered)) == 1 and unanswered.summary().hard_flags == 1
    said = {"agent": "booker", "kind": "output", "content": "R1 is on floor 1"}
    twice = _run(TASK, _turn({"room_id": "R1"}), _tool('{"floor": 1}'), said, said,
                 _end("done"))
    assert len(_repeats(twice)) == 1 and twice.summary().hard_flags == 1


def _order(text: str) -> dict[str, Any]:
    return {"agent": "crew", "kind": "instruction", "to": "booker", "content": text}


def test_the_same_answer_to_a_new_instruction_is_no_repeat() -> None:
    """Two tasks answered alike ("Done.") are two reports, not a repeated observation
    (two instructions, or two user requests with the same instruction);
    the same answer twice under one instruction, or to the same instruction given again
    (a loop), still repeats one (a hard flag each)."""
    done = {"agent": "booker", "kind": "output", "content": "Done."}
    r = _run(TASK, _order("book R1"), _turn({"room_id": "R1"}), _tool('{"floor": 1}'), done,
             _order("book R2"), _turn({"room_id": "R2"}), _tool('{"floor": 2}'), done,
             _end("done"))
    assert _repeats(r) == [] and r.summary().hard_flags == 0
    r = _run(TASK, _order("book"), _turn({"room_id": "R1"}), _tool('{"floor": 1}'), done,
             TASK, _order("book"), _turn({"room_id": "R2"}), _tool('{"floor": 2}'), done,
             _end("done"))  # the user's next request (one recording, two crew runs)
    assert _repeats(r) == [] and r.summary().hard_flags == 0
    for again in (_order("book R1"), _tool('{"floor": 2}')):
        r = _run(TASK, _order("book R1"), _turn({"room_id": "R1"}), _tool('{"floor": 1}'),
                 done, again, done, _end("done"))
        assert len(_repeats(r)) == 1 and r.summary().hard_flags == 1


def test_plain_tool_output_is_evidence() -> None:
    """A framework tool's result (no ``Code output:`` marker) is an observation: a later
    conclusion ("Final Answer: ...") rests on it."""
    r = _run(TASK, _turn({"room_id": "R1"}), _tool('{"floor": 1}'),
             {"agent": "booker", "kind": "output", "content": "Final Answer: R1 is on 1"},
             _end("R1 is on 1"))
    assert r.diagnoses == () and r.summary().snd == 1.0


# ------------------------------------------------------------------ plan ids
def _plan(pid: str | None, text: str) -> dict[str, Any]:
    line = {"agent": "booker", "kind": "plan", "content": text}
    return {**line, "plan_id": pid} if pid else line


def test_replan_supersedes_its_own_call_plan() -> None:
    """Two calls, each refused and replanned: each replan supersedes its own call's plan
    (plan1 -> plan2, plan3 -> plan4), not the other call's plan that already ran."""
    r = _run(TASK, _plan("ship#1", "plan for ship"), _plan("ship#1", "replan for ship"),
             _plan("ship#2", "plan for ship"), _plan("ship#2", "replan for ship"),
             _end("done"))
    assert r.replans == 2
    assert [d.detail for d in r.diagnoses] == ["replan: plan1 -> plan2",
                                               "replan: plan3 -> plan4"]


def test_the_gates_one_replan_is_counted_without_a_progress_diagnosis() -> None:
    """``replan: true`` on a plan with a ``plan_id`` (what the framework recorders write
    for the PlanFence gate's one replan of a call): counted in ``replans``, superseding
    its call's plan, with no ``progress`` diagnosis (planfence Sec. 4: one replan after
    a stale dependency is the protocol working). A second replan of the same call, and
    a replan without the mark, are still diagnosed."""
    gate = {"replan": True}
    r = _run(TASK, _plan("ship#1", "plan for ship"),
             {**_plan("ship#1", "replan for ship"), **gate},
             _plan("ship#2", "plan for ship"), _plan("ship#2", "replan for ship"),
             _plan("ship#3", "plan for ship"), {**_plan("ship#3", "replan"), **gate},
             {**_plan("ship#3", "replan again"), **gate}, _end("done"))
    assert r.replans == 4
    assert [d.detail for d in r.diagnoses] == [
        "replan: plan3 -> plan4",
        "a second replan of the protected call ship#3: replan: plan6 -> plan7"]


def test_plans_without_ids_keep_the_old_rule() -> None:
    """Without ``plan_id`` every later plan supersedes the previous one (Magentic-One)."""
    r = _run(TASK, _plan(None, "a"), _plan(None, "b"), _plan(None, "c"), _end("done"))
    assert [d.detail for d in r.diagnoses] == ["replan: plan1 -> plan2",
                                               "replan: plan2 -> plan3"]


def test_recorder_writes_one_plan_per_logical_call() -> None:
    """The recorder (workspace API): two orders, each stale and replanned once; the plan
    lines carry one id per call and the audit counts one replan per call."""
    from icore.integrations import FenceGuard
    from icore.workspace import Workspace

    ws = Workspace({"order/*": "sales"})
    ws.put("order/1", {"city": "Berlin"})
    ws.put("order/2", {"city": "Hamburg"})
    shipper = ws.agent("shipper")
    rec = RunRecorder("two")
    rec.task("ship 1 and 2")
    shipped: list[str] = []

    def ship(order: str, city: str) -> str:
        shipped.append(city)
        return city

    guard = FenceGuard(agent=shipper, depends_on=lambda a: {f"order/{a['order']}"},
                       recorder=rec)
    for order, old, new in (("1", "Berlin", "Munich"), ("2", "Hamburg", "Bonn")):
        shipper.read(f"order/{order}")
        ws.put(f"order/{order}", {"city": new})
        assert not guard.run("ship", ship, {"order": order, "city": old}).executed
        assert guard.run("ship", ship, {"order": order, "city": new}).executed
    rec.finish("shipper", "shipped")
    assert shipped == ["Munich", "Bonn"]
    plans = [(e["plan_id"], e.get("replan", False)) for e in rec.events if e["kind"] == "plan"]
    assert plans == [("ship#1", False), ("ship#1", True), ("ship#2", False), ("ship#2", True)]
    r = rec.audit()
    # the gate's one replan per call is the protocol working: counted, not a defect
    assert r.replans == 2 and not r.diagnoses


# ------------------------------------------------------------------ data, not reprs
class _Kind(enum.Enum):
    A = "a"


@dataclasses.dataclass
class _Room:
    id: UUID
    day: date
    kind: _Kind


class _Booking(BaseModel):
    room: str
    nights: int


def test_recorder_writes_data_not_reprs() -> None:
    """A tool's result object (dataclass, pydantic model, enum, UUID, date) is written as
    JSON data in the trace line."""
    room = _Room(UUID(int=1), date(2026, 1, 2), _Kind.A)
    assert plain_data({"r": room, "b": [_Booking(room="R1", nights=2)]}) == {
        "r": {"id": str(UUID(int=1)), "day": "2026-01-02", "kind": "a"},
        "b": [{"room": "R1", "nights": 2}]}
    rec = RunRecorder("data")
    rec.tool_call("booker", "book", {"room": room}, _Booking(room="R1", nights=2))
    line = rec.events[-1]
    assert json.loads(line["content"]) == {"nights": 2, "room": "R1"}
    assert line["args"] == {"room": {"day": "2026-01-02", "id": str(UUID(int=1)),
                                     "kind": "a"}}


def test_replan_across_a_handoff_is_the_fences_one_replan() -> None:
    """One fenced tool (workspace agent ``booker``) shared by two framework agents: the
    triage agent's call is refused stale, the booker's next call is the fence's one
    replan. The recorder links them (the replan is the workspace agent's, the owner of
    the ticket), while each event names the agent that made it."""
    import copy

    from icore.integrations import FenceGuard
    from icore.workspace import Workspace

    ws = Workspace({"room/*": "facilities"})
    ws.put("room/R1", {"price": "100"})
    booker = ws.agent("booker")
    booker.read("room/R1")
    rec = RunRecorder("handoff")
    rec.task("book R1")
    guard = FenceGuard(agent=booker, depends_on={"room/R1"}, recorder=rec)
    triage, desk = copy.copy(guard), copy.copy(guard)
    triage.agent, desk.agent = "triage", "desk"  # the SDK agents that call the tool
    ws.put("room/R1", {"price": "150"})
    assert not triage.run("book", lambda price: price, {"price": "100"}).executed
    assert desk.run("book", lambda price: price, {"price": "150"}).executed
    rec.finish("desk", "booked at 150")
    plans = [(e["agent"], e["plan_id"], e.get("replan", False)) for e in rec.events
             if e["kind"] == "plan"]
    assert plans == [("triage", "book#1", False), ("desk", "book#1", True)]
    assert {e["agent"] for e in rec.events if "gate" in e} == {"triage", "desk"}
    assert rec.audit().replans == 1
