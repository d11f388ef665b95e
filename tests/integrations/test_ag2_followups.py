"""AG2 follow-ups of the seam issue (issue 28, QA qa-ag2): recorded runs tell the truth.

Real ``ag2.Agent`` runs with AG2's own scripted ``TestConfig``: a fenced tool that raises
after the gate authorized it (sync, ``async def``, ``recorder=``, a ``HeadConflict`` of
the ``running_call().basis`` pattern) is recorded failed (``exitcode`` 1) and audited
"outcome unknown" (``NoEffect``: "failed after authorization"); arguments the model
controls that Python's JSON reader cannot hold (an int over 4300 digits, nesting deeper
than the interpreter's stack) are answered as a tool error, recorded or fenced, never a
crash of ``agent.ask``; a human's "yes" to an ``approval_required()`` call is recorded as
the other integrations record it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from ag2 import Agent, tool
from ag2.events import ToolCallEvent, ToolErrorEvent
from ag2.middleware.builtin.tools.approval import approval_required
from ag2.testing import TestConfig

from icore._line_chain import chain_lines
from icore._line_digest import with_digest
from icore.adapters import FAILED_AFTER_AUTHORIZATION, OUTCOME_UNKNOWN
from icore.errors import IntegrationError
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace, WorkspaceError, running_call

from .ag2_world import call, orders, run
from .test_ag2_recording import _protected, _shop
from .test_recording_truthful import _audit


def _ship_outputs(rec: RunRecorder, name: str = "ship") -> list[dict[str, Any]]:
    return [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == name]


@pytest.mark.parametrize("variant", ["sync", "async", "recorder", "no_effect"])
def test_a_tool_raising_after_authorization_is_recorded_failed(tmp_path: Path,
                                                               variant: str) -> None:
    """The gate authorized ``ship``; its body raised. AG2 hands the model the error; the
    trace records the call failed (exit code 1, the error) and the audit counts it
    "outcome unknown" (the body started: it may have shipped before it raised, QA
    qa-new12b S2), its lineage valid; ``NoEffect`` (the tool says it did nothing):
    "failed after authorization"."""
    _ws, shipper, _ = orders()
    kind = NoEffect if variant == "no_effect" else RuntimeError

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

    def ship(order_id: str) -> str:
        """Ship an order."""
        raise kind("carrier API down")

    async def aship(order_id: str) -> str:
        """Ship an order."""
        raise kind("carrier API down")

    rec = RunRecorder(f"raise-{variant}")
    body = aship if variant == "async" else ship
    safe = fenced_tool(body, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"},
                       recorder=rec if variant == "recorder" else None)
    agent = Agent("shipper", config=TestConfig(
        call("get_order", order_id="42"), call(body.__name__, order_id="42"), "gave up",
        raise_tool_errors=False), tools=[get_order, safe])
    record_agents(rec, agent)
    results = run(agent)
    assert "carrier API down" in str(results[-1].error)  # the model reads the error
    (out,) = _ship_outputs(rec, body.__name__)
    assert (out["exitcode"], out["failed"]) == (1, True)
    assert out["error_text"] == f"{kind.__name__}: carrier API down"
    path = rec.write(tmp_path / "raise.jsonl")
    code, text, data = _audit(path, "--fail-on", "invalid")
    counted = FAILED_AFTER_AUTHORIZATION if kind is NoEffect else OUTCOME_UNKNOWN
    assert code == 0 and f"1 (1 {counted})" in text
    assert data["actions"][counted] == 1
    (lv,) = data["lineage"]
    assert lv["status"] == "valid" and lv["error"] == f"{kind.__name__}: carrier API down"
    assert _audit(path, "--fail-on", "unknown")[0] == (0 if kind is NoEffect else 3)


def test_a_head_conflict_after_authorization_is_recorded_failed(tmp_path: Path) -> None:
    """Two desks book one slot at once with ``running_call().basis`` and an expected
    head: both are authorized, one commit wins, the other's ``HeadConflict`` is a call
    that failed after its authorization (one valid, one outcome unknown: the body
    started, icore cannot know what it did before the commit, QA qa-new12b S2), not two
    valid."""
    ws = Workspace({"slot/*": "sales"})
    ws.put("slot/1", {"free": True}, by="sales")
    booked: list[str] = []

    def make(name: str) -> Agent:
        desk = ws.agent(name)

        def get_slot(slot_id: str) -> dict[str, Any]:
            """Read a slot."""
            return desk.read(f"slot/{slot_id}")  # type: ignore[no-any-return]

        async def book(slot_id: str) -> str:
            """Book a slot."""
            seen = running_call().basis[f"slot/{slot_id}"]
            await asyncio.sleep(0.05)  # both desks are in here at once
            ws.commit(f"slot/{slot_id}", {"free": False, "by": name}, expected=seen.id,
                      by="sales")
            booked.append(name)
            return f"booked by {name}"

        return Agent(name, config=TestConfig(call("get_slot", slot_id="1"),
                                             call("book", slot_id="1"), "done",
                                             raise_tool_errors=False),
                     tools=[get_slot, fenced_tool(book, agent=desk, depends_on=lambda a: {
                         f"slot/{a['slot_id']}"})])

    rec = RunRecorder("two-desks")
    a1, a2 = make("desk1"), make("desk2")
    record_agents(rec, a1, a2)

    async def both() -> None:
        await asyncio.gather(a1.ask("book 1"), a2.ask("book 1"))

    asyncio.run(both())
    assert len(booked) == 1
    outs = _ship_outputs(rec, "book")
    assert sorted(o["exitcode"] for o in outs) == [0, 1]
    assert "HeadConflict" in next(o for o in outs if o["exitcode"])["error_text"]
    _code, text, data = _audit(rec.write(tmp_path / "desks.jsonl"))
    assert "2 (1 valid, 1 outcome unknown)" in text
    assert data["actions"][OUTCOME_UNKNOWN] == 1


_BIG = '{"order_id": "42", "city": 1' + "0" * 5000 + "}"
_DEEP = '{"order_id": "42", "city": ' + "[" * 100_000 + "]" * 100_000 + "}"


def _ship_with(text: str, *, recorded: bool, fenced: bool
               ) -> tuple[list[str], RunRecorder, list[Any]]:
    """A run whose model calls ``ship`` with the arguments ``text``: the tool events'
    kinds, the recorder and what was shipped."""
    shipped: list[Any] = []
    _, get_order, safe = _shop(shipped)

    def ship(order_id: str, city: Any) -> str:
        """Ship an order."""
        shipped.append(city)
        return "shipped"

    rec = RunRecorder("unreadable")
    agent = Agent("shipper", config=TestConfig(
        call("get_order", order_id="42"), ToolCallEvent("ship", arguments=text), "done",
        raise_tool_errors=False), tools=[get_order, safe if fenced else ship])
    if recorded:
        record_agents(rec, agent)
    return [type(e).__name__ for e in run(agent)], rec, shipped


@pytest.mark.parametrize("text", [_BIG, _DEEP], ids=["bigint", "deep"])
@pytest.mark.parametrize("fenced", [True, False])
def test_unreadable_arguments_are_a_tool_error_recorded_or_fenced(text: str,
                                                                  fenced: bool) -> None:
    """Arguments the model controls that Python's JSON reader raises on (an int over the
    digit limit: ValueError; 100k levels: RecursionError) are a tool error the model reads,
    as plain AG2 answers them; recording changes nothing the model sees, and a fenced
    call is a blocked protected action (invalid arguments), never a crash of ``ask``."""
    plain, _, _ = _ship_with(text, recorded=False, fenced=False)
    got, rec, shipped = _ship_with(text, recorded=True, fenced=fenced)
    assert got == plain == ["ToolResultEvent", "ToolErrorEvent"] and shipped == []
    (out,) = _ship_outputs(rec)
    assert out["exitcode"] == 1 and out["args"] == {"raw": text}
    if fenced:
        assert out["blocked"] and _protected(rec) == [("blocked", "invalid_arguments")]


_MID = '{"order_id": "42", "city": ' + "[" * 900 + "]" * 900 + "}"


@pytest.mark.parametrize("fenced", [True, False])
def test_arguments_nested_deeper_than_the_bound_never_crash_the_run(fenced: bool) -> None:
    """900 levels: Python's reader accepts them, AG2 runs the plain tool on them; the
    recorder (its model turn, the tool call) keeps them as ``{"raw": text}`` and never
    raises ``RecursionError`` into ``agent.ask``; a fenced call is refused (more than
    200 levels: invalid arguments), nothing runs (reviewer of #28)."""
    from icore.integrations._json_args import MAX_NESTING, read_json

    assert read_json(_MID) == (None, f"nested too deeply (more than {MAX_NESTING} levels)")
    got, rec, shipped = _ship_with(_MID, recorded=True, fenced=fenced)
    (out,) = _ship_outputs(rec)
    assert out["args"] == {"raw": _MID}
    assert rec.jsonl()
    if fenced:
        assert got[-1] == "ToolErrorEvent" and shipped == []
        assert out["blocked"] and _protected(rec) == [("blocked", "invalid_arguments")]
    else:
        assert got == ["ToolResultEvent", "ToolResultEvent"] and len(shipped) == 1


def test_the_gate_reads_the_arguments_ag2_runs() -> None:
    """A tool middleware rewrites ``serialized_arguments`` (AG2's public setter; its
    ``FunctionTool`` runs on that value): the gate judges and the trace records the
    rewritten call (order 43, never read: refused ``not_read``), not ``event.arguments``
    beside it, so the tool never runs on arguments the gate did not see (#28)."""
    ws, shipper, _ = orders()
    ws.put("order/43", {"city": "Rome"}, by="sales")
    shipped: list[Any] = []

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append((order_id, city))
        return "shipped"

    async def rewrite(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        event.serialized_arguments = {**event.serialized_arguments, "order_id": "43"}
        return await call_next(event, context)

    safe = fenced_tool(tool(ship, middleware=[rewrite]), agent=shipper,
                       depends_on=lambda a: {f"order/{a['order_id']}"})
    rec = RunRecorder("rewritten")
    agent = Agent("shipper", config=TestConfig(
        call("get_order", order_id="42"), call("ship", order_id="42", city="Berlin"),
        "done", raise_tool_errors=False), tools=[get_order, safe])
    record_agents(rec, agent)
    run(agent)
    assert shipped == []
    (out,) = _ship_outputs(rec)
    assert out["blocked"] and out["args"]["order_id"] == "43"
    assert _protected(rec) == [("blocked", "not_read")]


def test_only_an_approval_request_for_arguments_that_read_is_a_recorded_yes() -> None:
    """A middleware's other question (a plain ``HumanInputRequest``) answered "yes" is no
    approval; an ``approval_required()`` "yes" is recorded, also to arguments that do not
    read (then refused invalid arguments, the "yes" naming that refused action's task:
    QA qa-new10 S3; before, it was dropped) (#28)."""
    from ag2.events import HumanInputRequest

    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        return "shipped"

    async def question(call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        await context.ask(HumanInputRequest("Which warehouse?"))
        return await call_next(event, context)

    def approvals(middleware: Any, arguments: str) -> list[dict[str, Any]]:
        _ws, shipper, _ = orders()

        def get_order(order_id: str) -> dict[str, Any]:
            """Read an order."""
            return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

        safe = fenced_tool(tool(ship, middleware=[middleware]), agent=shipper,
                           depends_on=lambda a: {f"order/{a['order_id']}"})
        rec = RunRecorder("asked")
        agent = Agent("shipper", config=TestConfig(
            call("get_order", order_id="42"), ToolCallEvent("ship", arguments=arguments),
            "done", raise_tool_errors=False), tools=[get_order, safe],
            hitl_hook=lambda _req: "yes")
        record_agents(rec, agent)
        run(agent)
        return [e for e in rec.events if e.get("decision") == "approve"]

    good = json.dumps({"order_id": "42", "city": "Berlin"})
    assert approvals(question, good) == []
    (cut,) = approvals(approval_required(), '{"order_id": "42", "city": ')
    assert cut["args"] == {"raw": '{"order_id": "42", "city": '} and cut["task"] == "ship-1"
    (yes,) = approvals(approval_required(), good)
    assert yes["content"].startswith("a human answered approve for ship")


def _approved_run() -> tuple[RunRecorder, list[Any]]:
    """A real run: the order changes after the read; the human says yes to the stale
    call (the gate refuses it), yes to the replan (it runs), no to a third call."""
    ws, shipper, _ = orders()
    shipped: list[Any] = []
    answers = iter(["yes", "yes", "no"])

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

    def move_order(order_id: str, city: str) -> str:
        """Sales moves an order to another city."""
        ws.put(f"order/{order_id}", {"city": city}, by="sales")
        return "moved"

    def ship(order_id: str, city: str) -> str:
        """Ship an order."""
        shipped.append((order_id, city))
        return f"shipped to {city}"

    safe = fenced_tool(tool(ship, middleware=[approval_required()]), agent=shipper,
                       depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent("shipper", config=TestConfig(
        call("get_order", order_id="42"), call("move_order", order_id="42", city="Paris"),
        call("ship", order_id="42", city="Berlin"), call("ship", order_id="42", city="Paris"),
        call("ship", order_id="42", city="Rome"), "done", raise_tool_errors=False),
        tools=[get_order, move_order, safe], hitl_hook=lambda _req: next(answers))
    rec = RunRecorder("approved")
    record_agents(rec, agent)
    run(agent)
    return rec, shipped


def test_a_humans_yes_is_recorded_as_the_other_integrations_record_it() -> None:
    """Each "yes" to ``approval_required()`` is a ``thought`` "a human answered approve
    for ship {...}" (``answered_by: human``, ``decision: approve``, tool and arguments)
    before the gate's decision; the "no" stays a refused call."""
    rec, shipped = _approved_run()
    assert shipped == [("42", "Paris")]
    said = [(e["kind"], e.get("decision"), e.get("args", {}).get("city")) for e in rec.events
            if e.get("answered_by") == "human"]
    assert said == [("thought", "approve", "Berlin"), ("thought", "approve", "Paris"),
                    ("tool_output", "reject", "Rome")]
    yes = next(e for e in rec.events if e.get("decision") == "approve")
    assert yes["tool"] == "ship" and yes["content"] == (
        'a human answered approve for ship {"city": "Berlin", "order_id": "42"}')


def _edited(path: Path, n: int, **fields: Any) -> Path:
    """``path`` with the ``n``-th ``ship`` tool output's fields changed (a forged line,
    its digest and every chain link recomputed: the forger knows the scheme; the
    ran-after-refusal rule still catches it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    at = [i for i, x in enumerate(lines) if '"tool_output"' in x and '"tool": "ship"' in x][n]
    line = {k: v for k, v in {**json.loads(lines[at]), **fields}.items() if v is not None}
    lines[at] = json.dumps(with_digest(line))
    objs = [json.loads(x) for x in lines]
    writer = next(o["chain"]["writer"] for o in objs if "chain" in o)
    lines = [json.dumps(o) for o in chain_lines(writer, [
        {k: v for k, v in o.items() if k not in ("chain", "chain_end")} for o in objs])]
    out = path.with_name(f"{path.stem}-{n}.jsonl")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def test_a_recorded_effect_after_a_refusal_is_invalid(tmp_path: Path) -> None:
    """The honest run audits 1 valid, 2 blocked. The stale call's output edited to say it
    ran (exit code 0), or the rejected call's to ``ran: true``, contradicts the gate:
    that action is INVALID and ``--fail-on invalid`` fails (QA qa-ag2 T2, T3)."""
    rec, _ = _approved_run()
    path = rec.write(tmp_path / "honest.jsonl")
    code, text, data = _audit(path, "--fail-on", "invalid")
    assert code == 0 and "3 (1 valid, 2 blocked)" in text
    stale = _edited(path, 0, exitcode=0, blocked=None, content="shipped to Berlin")
    code, text, data = _audit(stale, "--fail-on", "invalid")
    assert code == 3 and "3 (1 valid, 1 INVALID, 1 blocked)" in text
    (bad,) = [lv for lv in data["lineage"] if lv["status"] == "INVALID"]
    assert bad["reason"].startswith("INVALID: the gate refused it (replan_required / stale")
    assert "'shipped to Berlin'" in bad["reason"]
    rejected = _edited(path, 2, exitcode=0, blocked=None, ran=True, content="shipped Rome")
    code, text, data = _audit(rejected, "--fail-on", "invalid")
    assert code == 3 and "3 (1 valid, 1 INVALID, 1 blocked)" in text
    (bad,) = [lv for lv in data["lineage"] if lv["status"] == "INVALID"]
    assert bad["reason"].startswith("INVALID: a human rejected it, yet a recorded tool "
                                    "output says the call ran: 'shipped Rome'")


def test_a_gateway_refusal_then_a_call_let_through_is_honest(tmp_path: Path) -> None:
    """Through an ``icore mcp`` gateway (:func:`record_tool_result`) a refusal writes a
    blocked decision and a call let through only its output: the honest pair audits
    "1 blocked", never INVALID; the refusal's own output (it names the task) edited to
    say it ran is INVALID (reviewer of #28)."""
    from icore.integrations._refusals import record_tool_result

    rec = RunRecorder("gw")
    rec.task("book a flight")
    record_tool_result(rec, "executor", "book", {},
                       "PlanFence blocked book (stale): the plan read old values")
    record_tool_result(rec, "executor", "book", {}, "booked")
    rec.finish("executor", "done")
    path = rec.write(tmp_path / "gw.jsonl")
    code, text, _ = _audit(path, "--fail-on", "invalid")
    assert code == 0 and "1 (1 blocked)" in text, text
    lines = path.read_text(encoding="utf-8").splitlines()
    (at,) = [i for i, x in enumerate(lines) if '"blocked": true' in x]
    lines[at] = json.dumps({**json.loads(lines[at]), "exitcode": 0, "blocked": None})
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, text, _ = _audit(forged, "--fail-on", "invalid")
    assert code == 3 and "1 (1 INVALID)" in text, text


def test_a_run_stopped_by_a_setup_mistake_or_at_an_approval_says_why() -> None:
    """A ``depends_on`` that fails on the model's arguments stops ``ask`` (a setup
    mistake): the trace ends with "the run stopped: WorkspaceError: ...". A run cancelled
    while a human decides on a call (Ctrl-C at the approval) was the user's stop, not a
    pause (QA qa-new13a): a cancelled run naming that call, which did not run."""
    ws, shipper, _ = orders()

    def ship(order_id: str) -> str:
        """Ship an order."""
        return "shipped"

    typo = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['orderid']}"})
    agent = Agent("shipper", config=TestConfig(call("ship", order_id="42"), "done"),
                  tools=[typo])
    rec = RunRecorder("typo")
    record_agents(rec, agent)
    with pytest.raises(WorkspaceError, match="depends_on function failed"):
        run(agent)
    last = rec.events[-1]
    assert last["kind"] == "thought" and last["content"].startswith(
        "the run stopped: WorkspaceError: the depends_on function failed")

    async def cancelled(_request: Any) -> str:
        raise asyncio.CancelledError  # Ctrl-C while the human decides

    asked = fenced_tool(tool(ship, middleware=[approval_required()]), agent=ws.agent("b"),
                        depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent("b", config=TestConfig(call("ship", order_id="42"), "done"),
                  tools=[asked], hitl_hook=cancelled)
    rec = RunRecorder("ctrl-c")
    record_agents(rec, agent)
    with pytest.raises(asyncio.CancelledError):
        run(agent)
    last = rec.events[-1]
    assert "pause" not in last and last["cancelled"] is True
    assert last["approvals"] == [{"tool": "ship", "args": {"order_id": "42"}}]
    assert "cancelled (Ctrl-C / task cancelled) while waiting for a human's approval of " \
        "ship" in last["content"]


def test_reasons_say_the_message_without_the_class_path_and_write_needs_a_name(
        tmp_path: Path) -> None:
    """A refused call's recorded reason is the error's message (no
    ``icore.errors.IntegrationError:``); ``rec.write('')`` names the mistake."""
    shipped: list[Any] = []
    _, get_order, safe = _shop(shipped)
    rec = RunRecorder("reason")
    agent = Agent("shipper", config=TestConfig(
        ToolCallEvent("ship", arguments="[1]"), "done", raise_tool_errors=False),
        tools=[get_order, safe])
    record_agents(rec, agent)
    run(agent)
    (d,) = [x["planfence"]["decision"] for x in rec.planfence if "decision" in x["planfence"]]
    assert d["detail"].startswith("the arguments of ship must be a JSON object")
    with pytest.raises(IntegrationError, match="path is empty"):
        rec.write("")


def test_an_error_from_a_layer_before_the_body_is_recorded_not_run() -> None:
    """A ``ToolErrorEvent`` the body never produced (a layer after the gate answered, or
    AG2's own argument check) is ``Failed`` with ``ran=False``; one the body raised into
    ran; recorded ``ran: false`` (never ``failed: true``), its decision without an error,
    so the audit does not count it "failed after authorization" (#28)."""
    from icore.integrations._tool_failed import record_ran
    from icore.integrations.ag2._tool_results import entering, run_body

    ev = call("ship", order_id="42")

    async def refused_before(event: ToolCallEvent, context: Any) -> Any:
        return ToolErrorEvent.from_call(event, error=PermissionError("policy says no"))

    def body() -> None:
        raise RuntimeError("carrier API down")

    inner = entering(body)

    async def ran_body(event: ToolCallEvent, context: Any) -> Any:
        try:
            inner()
        except RuntimeError as exc:
            return ToolErrorEvent.from_call(event, error=exc)
        return None

    before = asyncio.run(run_body(refused_before, ev, None))
    raised = asyncio.run(run_body(ran_body, ev, None))
    assert not before.ran and raised.ran  # type: ignore[union-attr]
    rec = RunRecorder("not-run")
    record_ran(rec, "shipper", "ship", {"order_id": "42"}, before, False)
    record_ran(rec, "shipper", "ship", {"order_id": "42"}, raised, False)
    first, second = _ship_outputs(rec)
    assert first["ran"] is False and "failed" not in first and first["reason"] == "not_run"
    assert second["failed"] is True
