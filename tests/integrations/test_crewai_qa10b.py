"""CrewAI after QA qa-new10b (#28): a call whose outcome is unknown is not run again in
the same model message; ``approve=`` that raises and a human's "yes" are recorded; the
trace is strict JSON. A real ``Crew`` with the scripted LLM of test_crewai_turns.py; no
network. Runs in ``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from crewai import Agent, Crew, Task
from crewai.tools import tool

from icore.integrations import NoEffect, RunRecorder
from icore.integrations.crewai import fenced_crewai_tool, recording
from icore.integrations.crewai._attempts import UnknownAttempts
from icore.workspace import ApprovalRequest, Workspace

from .test_crewai_setup import Desk, _replan
from .test_crewai_turns import act, call, scripted

pytestmark = pytest.mark.timeout(120)


def _charge_crew(error: BaseException, steps: list[Any], react: bool = True
                 ) -> tuple[Crew, list[int]]:
    """A ``charge`` tool that raises ``error`` each time its body runs (a ReAct agent, or
    one making native tool calls)."""
    ws = Workspace({"card/*": "bank"})
    ws.put("card/C1", {"limit": 100}, by="bank")
    clerk = ws.agent("clerk")
    runs: list[int] = []

    @tool("get_card")
    def get_card(card: str) -> str:
        """Read a card."""
        return json.dumps(clerk.read(f"card/{card}"))

    @tool("charge")
    def charge(card: str, amount: int) -> str:
        """Charge a card."""
        runs.append(amount)
        raise error

    fenced = fenced_crewai_tool(charge, agent=clerk, depends_on=lambda a: {f"card/{a['card']}"})
    a = Agent(role="clerk", goal="charge cards", backstory="billing", llm=scripted(
        steps, react=react), tools=[get_card, fenced], allow_delegation=False, max_iter=6)
    return Crew(agents=[a], tasks=[Task(description="charge C1", expected_output="done",
                                        agent=a)]), runs


def test_a_call_that_timed_out_is_not_run_again_in_the_same_message() -> None:
    """QA qa-new10b S3 (tmo.py): the payment raised TimeoutError (it may have run);
    CrewAI tried the same call again (six times before) and the gate authorized each.
    Now the second attempt is refused ``earlier_outcome_unknown``: the body ran once,
    the model reads why, the trace holds the refusal and the audit counts one outcome
    unknown and one blocked."""
    rec = RunRecorder("tmo")
    crew, runs = _charge_crew(TimeoutError("gateway did not answer in 30 s"), [
        act("get_card", card="C1"), act("charge", card="C1", amount=40),
        "Final Answer: not sure it was charged"])
    with recording(rec):
        crew.kickoff()
    assert runs == [40]
    refused = [e for e in rec.events if e.get("reason") == "earlier_outcome_unknown"]
    assert len(refused) == 1 and refused[0]["blocked"] is True
    assert "TimeoutError: gateway did not answer" in refused[0]["content"]
    res = rec.audit()
    assert sorted(a.status for a in res.lineage) == ["blocked", "valid"]
    assert [a.outcome_unknown for a in res.lineage if a.status == "valid"] == [True]


def _charged(tmp_path: Path, name: str, error: BaseException) -> tuple[RunRecorder, list[int],
                                                                      int, str]:
    """One kickoff charging C1 once (CrewAI may retry), recorded; the written trace
    audited by the CLI with ``--fail-on unknown``: (recorder, runs, exit code, output)."""
    from typer.testing import CliRunner

    from icore.cli import app

    rec = RunRecorder(name)
    crew, runs = _charge_crew(error, [act("get_card", card="C1"),
                                      act("charge", card="C1", amount=40), "Final Answer: ?"])
    with recording(rec):
        crew.kickoff()
    trace = rec.write(tmp_path / f"{name}.jsonl")
    res = CliRunner().invoke(app, ["audit", str(trace), "--no-report", "--fail-on", "unknown"])
    return rec, runs, res.exit_code, res.output


def test_a_plain_failure_is_outcome_unknown_and_not_run_again(tmp_path: Path) -> None:
    """QA qa-new12b S2: any exception from the body may follow its effect (a charge
    made, then a connection reset): the call's outcome is unknown, its retry in the same
    message refused; ``icore audit --fail-on unknown`` exits 3 on the written trace."""
    rec, runs, code, out = _charged(tmp_path, "reset", ConnectionResetError("reset"))
    assert runs == [40]
    assert [e["reason"] for e in rec.events if e.get("blocked")] == ["earlier_outcome_unknown"]
    assert code == 3 and "protected actions of reset: 2 (1 outcome unknown, 1 blocked)" in out


def test_a_no_effect_failure_is_tried_again_as_before(tmp_path: Path) -> None:
    """``NoEffect``: the tool says it did nothing; CrewAI's retry is left to it (the gate
    decides each attempt), each counted failed after authorization, exit 0."""
    _rec, runs, code, out = _charged(tmp_path, "declined", NoEffect("card declined"))
    assert len(runs) > 1 and set(runs) == {40}
    assert code == 0, out
    assert f"protected actions of declined: {len(runs)} ({len(runs)} failed after " \
        "authorization)" in out


def test_an_approval_that_raises_is_a_recorded_refusal() -> None:
    """QA qa-new10b S3 (appr.py raise): ``approve=`` raised: nothing ran, asked once per
    model call (CrewAI asked six times before), the trace holds the call refused
    ``approval_failed`` with the error, and the audit shows the blocked action."""
    asked: list[ApprovalRequest] = []

    def broken(req: ApprovalRequest) -> bool:
        asked.append(req)
        raise RuntimeError("approval service down")

    rec = RunRecorder("ap-raise")
    d = Desk(approve=broken)
    llm = scripted([[call("get_case", case="C1")], _replan(40), "done"])
    with recording(rec):
        d.crew(llm).kickoff()
    assert d.paid == [] and len(asked) == 1
    assert "(approval_failed)" in " ".join(llm.tool_results())
    (out,) = [e for e in rec.events if e.get("tool") == "refund"]
    assert out["reason"] == "approval_failed" and out["blocked"] is True
    assert "RuntimeError: approval service down" in out["content"]
    res = rec.audit()
    assert [(a.status, a.points[-1].entry.reason) for a in res.lineage] == [
        ("blocked", "approval_failed")]


def test_a_human_yes_is_in_the_lineage(tmp_path: Path) -> None:
    """QA qa-new10b S3: the human's "yes" is recorded (as the other integrations do):
    ``icore audit`` says "approved by a human" and ``--json`` lineage has ``"human":
    "approved"``; a "no" stays ``rejected``."""
    from typer.testing import CliRunner

    from icore.cli import app

    for answer, human in (("yes", "approved"), ("no", "rejected")):
        rec = RunRecorder(f"ap-{answer}")
        d = Desk(approve=lambda req, a=answer: a)
        with recording(rec):
            d.crew(scripted([[call("get_case", case="C1")], _replan(40), "done"])).kickoff()
        assert d.paid == ([("C1", 40)] if answer == "yes" else [])
        trace, js = rec.write(tmp_path / f"{answer}.jsonl"), tmp_path / f"{answer}.json"
        res = CliRunner().invoke(app, ["audit", str(trace), "--no-report", "--json", str(js)])
        assert res.exit_code == 0, res.output
        (lv,) = json.loads(js.read_text(encoding="utf-8"))["runs"][0]["lineage"]
        assert lv["human"] == human
        assert ("approved by a human" in res.output) is (answer == "yes")


def test_the_trace_is_strict_json_for_non_finite_arguments(tmp_path: Path) -> None:
    """QA qa-new10b S3 (br_nums.jsonl line 10): a call refused ``not_read`` with ``NaN``
    among its arguments wrote a bare ``NaN`` (no JSON); now its text, every line strict."""
    ws = Workspace({"budget/*": "finance"})
    ws.put("budget/travel", {"limit": 900}, by="finance")
    team = ws.agent("travel")

    @tool("pay")
    def pay(team_name: str, amount: float) -> str:
        """Pay from a budget."""
        return "paid"

    fenced = fenced_crewai_tool(pay, agent=team,
                                depends_on=lambda a: {f"budget/{a['team_name']}"})
    a = Agent(role="booker", goal="pay", backstory="", tools=[fenced], llm=scripted(
        ["Thought: t\nAction: pay\nAction Input: {\"team_name\": \"travel\", "
         "\"amount\": NaN}", "Final Answer: done"], react=True), max_iter=4)
    rec = RunRecorder("nums")
    with recording(rec), team.scope("nums"):
        Crew(agents=[a], tasks=[Task(description="pay", expected_output="x",
                                     agent=a)]).kickoff()
    text = rec.write(tmp_path / "nums.jsonl").read_text(encoding="utf-8")

    def bare(token: str) -> Any:
        raise AssertionError(f"bare {token} in the trace")

    lines = [json.loads(ln, parse_constant=bare) for ln in text.splitlines()]
    args = [x["args"] for x in lines if x.get("tool") == "pay" and "args" in x]
    # QA qa-new13a S4: refused invalid_arguments, kept as the model's JSON text
    assert args and all(x == {"raw": '{"team_name": "travel", "amount": NaN}'} for x in args)


def test_attempts_hold_only_unknown_outcomes_per_turn() -> None:
    """UnknownAttempts (the shared CallLedger): an unknown outcome per turn, bounded."""
    att = UnknownAttempts()
    att.note("turn-1", {"amount": 5}, NoEffect("declined"))  # nothing done: not held
    assert att.earlier("turn-1", {"amount": 5}) is None
    att.note(None, {"amount": 5}, TimeoutError("t"))  # no model turn: never held
    assert att.earlier(None, {"amount": 5}) is None
    att.note("turn-1", {"amount": 5}, TimeoutError("gateway"))
    assert att.earlier("turn-1", {"amount": 5}) == "TimeoutError: gateway"
    assert att.earlier("turn-2", {"amount": 5}) is None
    for i in range(255):  # the shared bounded ledger: 256 calls held
        att.note(f"t{i}", {"amount": i}, TimeoutError("x"))
    assert att.earlier("turn-1", {"amount": 5}) == "TimeoutError: gateway"
    att.note("t255", {"amount": 255}, TimeoutError("x"))  # one more: the oldest forgotten
    assert att.earlier("turn-1", {"amount": 5}) is None


def test_the_model_reads_that_a_failed_call_may_have_run() -> None:
    """QA qa-new13a S3: the model read only the tool's error ("TimeoutError: ...") and
    called again in its next message. CrewAI tries the failed call again itself: the
    refusal of that retry is what the model reads, and says the call may have run and to
    check its effect first (the wording of every integration)."""
    seen: list[str] = []

    def look(messages: Any) -> str:
        seen.append(json.dumps(messages, default=str))
        return "Final Answer: not sure it was charged"

    crew, runs = _charge_crew(TimeoutError("bank gateway timed out"), [
        act("get_card", card="C1"), act("charge", card="C1", amount=40), look])
    with recording(RunRecorder("told")):
        crew.kickoff()
    assert runs == [40] and seen
    assert "failed a moment ago with TimeoutError: bank gateway timed out; it may have " \
        "run" in seen[-1]
    assert "check its effect before calling charge again" in seen[-1]


@pytest.mark.parametrize("error", [TimeoutError("bank gateway timed out"),
                                   NoEffect("card declined")], ids=["timeout", "no-effect"])
def test_native_tool_calls_read_that_a_failed_call_may_have_run(error: Exception) -> None:
    """QA qa-new13b S3: with native tool calls CrewAI does not retry a raising tool; it
    handed the model only "Error executing tool: mail gateway timed out", and the model's
    next message sent the newsletter again. The model now reads that the call may have
    run and to check its effect first; a ``NoEffect`` failure reads as the tool's own
    error. The trace keeps the tool's own error, and the next message's call is the
    model's decision, made knowing it."""
    seen: list[str] = []

    def look(messages: Any) -> str:
        seen.append(json.dumps(messages, default=str))
        return "not sure it was charged"

    rec = RunRecorder("native")
    crew, runs = _charge_crew(error, [[call("get_card", card="C1")],
                                      [call("charge", card="C1", amount=40)], look],
                              react=False)
    with recording(rec):
        crew.kickoff()
    assert runs == [40] and seen
    told = "charge failed with TimeoutError: bank gateway timed out; it may have run"
    if isinstance(error, NoEffect):
        assert "card declined" in seen[-1] and "may have run" not in seen[-1]
    else:
        assert told in seen[-1] and "check its effect before calling charge again" in seen[-1]
        failed = [e for e in rec.events if e.get("kind") == "tool_output" and e.get("failed")]
        assert [e["error_text"] for e in failed] == ["TimeoutError: bank gateway timed out"]


def test_a_null_approval_id_pays_nothing() -> None:
    """QA qa-new17c #7: ``{"approved": true, "planfence.approval": null}`` from
    ``approve=`` is a rejection (an id that is no str), not a bare yes: nothing paid."""
    rec = RunRecorder("null-id")
    d = Desk(approve=lambda req: {"approved": True, "planfence.approval": None})
    with recording(rec):
        d.crew(scripted([[call("get_case", case="C1")], _replan(40), "done"])).kickoff()
    assert d.paid == []
    [lv] = rec.audit().lineage
    assert lv.points[-1].entry.reason == "approval_rejected"
