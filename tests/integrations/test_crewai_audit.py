"""CrewAI: the audit tells the truth about the user's run (#28 item 6; QA r5-crew D1-D4, D8).

A real ``Crew`` / ``Agent.kickoff`` with the scripted LLM and the QA worlds of
test_crewai_turns.py (stock transfers) and test_crewai_setup.py (the refund desk), recorded
with :func:`icore.integrations.crewai.recording` and audited as ``icore audit`` does; no
network. Runs in ``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import llm_call_context

from icore.integrations import RunRecorder
from icore.integrations.crewai import recording

from .test_crewai_setup import Desk, _replan
from .test_crewai_turns import Scripted, Store, call, scripted, then


class Emitting(Scripted):
    """The scripted LLM emitting the call events CrewAI's own LLMs emit (agent turns)."""

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None,
             from_agent: Any = None, response_model: Any = None) -> Any:
        with llm_call_context():
            self._emit_call_started_event(messages=messages, tools=tools,
                                          from_task=from_task, from_agent=from_agent)
            out = super().call(messages, tools, callbacks, available_functions,
                               from_task, from_agent, response_model)
            self._emit_call_completed_event(response=out, call_type=LLMCallType.LLM_CALL,
                                            from_task=from_task, from_agent=from_agent,
                                            messages=messages)
        return out


def _summary(rec: RunRecorder) -> Any:
    res = rec.audit()
    return res, res.summary()


def test_a_call_the_human_rejects_is_a_refused_call_never_executed() -> None:
    """D1: ``approve=`` answers no after the gate authorized the call: the tool never
    ran, the trace holds the human's refusal (exit 1, ``decision: reject``, ``ran:
    false``) and the lineage shows the call blocked ``approval_rejected``, not
    authorized -> executed."""
    rec = RunRecorder("rejected")
    d = Desk(approve=lambda req: "no")
    with recording(rec):
        d.crew(scripted([[call("get_case", case="C1")], _replan(40), "done"])).kickoff()
    assert d.paid == []
    out = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "refund"]
    assert [(e["exitcode"], e["blocked"], e["decision"], e["ran"], e["answered_by"])
            for e in out] == [(1, True, "reject", False, "human")]
    res, _ = _summary(rec)
    assert [(a.action, a.status) for a in res.lineage] == [("refund-1", "blocked")]
    last = res.lineage[0].points[-1].entry
    assert (last.outcome, last.reason, last.policy) == ("blocked", "approval_rejected",
                                                        "approval")


def _two_clerks(s: Store, first: list[Any], second: list[Any]) -> Crew:
    a = Agent(role="picker", goal="move stock", backstory="logistics", tools=s.tools,
              llm=scripted(first), max_iter=8)
    b = Agent(role="packer", goal="move stock", backstory="logistics", tools=s.tools,
              llm=scripted(second), max_iter=8)
    return Crew(agents=[a, b], tasks=[
        Task(description="move 4 from W1", expected_output="done", agent=a),
        Task(description="move what W1 has left", expected_output="done", agent=b)])


def test_the_crewai_agent_that_called_is_named_and_its_replan_too() -> None:
    """D2, D8: two CrewAI agents share one fenced tool (one workspace agent ``clerk``).
    The picker's call is refused stale; the packer's call from the handed values is the
    one replan. The original plan, gate events and refusal name the picker, the replan
    and its run the packer; ``clerk`` is no agent of the run, and the audit counts the
    replan with no diagnosis (the gate's one replan, as for LangGraph)."""
    rec = RunRecorder("two-clerks")
    s = Store({"W1": 10})
    crew = _two_clerks(s, [[call("get_stock", wh="W1")],
                           then(s.set("W1", 5), [call("transfer", wh="W1", qty=4)]), "no"],
                       [[call("transfer", wh="W1", qty=3)], "done"])
    with recording(rec):
        crew.kickoff()
    assert s.moved == [("W1", 3)]
    assert "clerk" not in rec.agents
    fenced = [(e["agent"], e["kind"], bool(e.get("replan")), e.get("exitcode"))
              for e in rec.events if e.get("tool") == "transfer" or e["kind"] == "plan"
              or "transfer" in str((e.get("gate") or {}).get("tool"))]
    assert sorted(fenced, key=str) == sorted([
        ("picker", "thought", False, None), ("picker", "plan", False, None),
        ("picker", "tool_output", False, 1), ("packer", "plan", True, None),
        ("packer", "thought", False, None), ("packer", "tool_output", False, 0)], key=str)
    res, summary = _summary(rec)
    assert summary.replans == 1
    assert not res.diagnoses  # the gate's one replan: counted, not a defect


def test_a_clean_agent_kickoff_records_its_task_and_its_end() -> None:
    """D3: ``Agent.kickoff()`` without a crew: the messages are the task, the output the
    final answer; the run audits with no diagnosis. A crew's own agents record one end,
    the crew's."""
    rec = RunRecorder("lite")
    s = Store({"W1": 10})
    llm = scripted([[call("get_stock", wh="W1")], [call("transfer", wh="W1", qty=2)],
                    "moved 2"])
    with recording(rec):
        s.agent(llm).kickoff("move 2 from W1")
    kinds = rec.kinds()
    assert kinds[0] == "task" and kinds[-1] == "termination" and kinds.count("task") == 1
    assert rec.events[-1]["final_answer"] == "moved 2" and rec.events[-1]["agent"] == "clerk"
    res, summary = _summary(rec)
    assert summary.terminal is True and list(res.diagnoses) == []
    rec = RunRecorder("crew")
    with recording(rec):
        s.crew(scripted(["done"])).kickoff()
    assert rec.kinds().count("task") == 1 and rec.kinds().count("termination") == 1


def test_two_tasks_answered_alike_are_no_repeated_observation() -> None:
    """D4: one agent, two sequential tasks, each read, moved and answered ``Done.``: the
    second answer follows a new task, no repeat (no hard flag). (The same answer twice
    under one instruction still is: tests/adapters/test_truthful_audit.py.)"""
    rec = RunRecorder("same-answer")
    s = Store({"W1": 10, "W2": 10})
    llm = Emitting(model="scripted")
    llm._steps = [[call("get_stock", wh="W1")], [call("transfer", wh="W1", qty=2)], "Done.",
                  [call("get_stock", wh="W2")], [call("transfer", wh="W2", qty=3)], "Done."]
    a = s.agent(llm)
    with recording(rec):
        Crew(agents=[a], tasks=[Task(description="move 2 from W1", expected_output="x",
                                     agent=a),
                                Task(description="move 3 from W2", expected_output="y",
                                     agent=a)]).kickoff()
    assert s.moved == [("W1", 2), ("W2", 3)]
    assert [e["content"] for e in rec.events if e["kind"] == "output"][-1] == "Done."
    _, summary = _summary(rec)
    assert summary.hard_flags == 0


def test_two_concurrent_recorded_crews_keep_their_own_traces() -> None:
    """Two crews, each in its own ``recording`` block, run at once in two threads: the
    process-wide event bus delivers every event to both blocks; each records its own."""
    import threading

    recs = {"a": RunRecorder("a"), "b": RunRecorder("b")}
    inside, done = threading.Barrier(2, timeout=60), threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            with recording(recs[name]):
                inside.wait()
                Store({"W1": 10}).crew(scripted([f"done {name}"])).kickoff()
                done.wait()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in recs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    for name, rec in recs.items():
        ends = [e["final_answer"] for e in rec.events if e["kind"] == "termination"]
        assert ends == [f"done {name}"] and rec.kinds().count("task") == 1


def test_a_refusal_is_linked_to_the_call_on_its_own_fact() -> None:
    """QA qa-new17b #4: [transfer(W1), transfer(W2)] in one message; W1 changed, so
    transfer(W1) is refused stale and transfer(W2) runs; the next message's transfer(W1)
    (the replan) runs. The refusal's "called again" names the W1 replan, never the W2
    call (another fact: their dependency scopes share no key)."""
    rec = RunRecorder("called-again")
    s = Store({"W1": 10, "W2": 10}, sequential=True)
    llm = scripted([[call("get_stock", wh="W1"), call("get_stock", wh="W2")],
                    then(s.set("W1", 5), [call("transfer", wh="W1", qty=4),
                                          call("transfer", wh="W2", qty=3)]),
                    [call("transfer", wh="W1", qty=4)], "done"])
    with recording(rec):
        s.crew(llm).kickoff()
    assert s.moved == [("W2", 3), ("W1", 4)]
    res, _ = _summary(rec)
    by_fact = {a.points[0].entry.deps[0]: [] for a in res.lineage}
    for a in res.lineage:
        by_fact[a.points[0].entry.deps[0]].append(a)
    refused = [a for a in by_fact["stock/W1"] if a.status == "blocked"]
    replan = [a for a in by_fact["stock/W1"] if a.status == "valid"]
    assert len(refused) == 1 and len(replan) == 1, [(a.action, a.status) for a in res.lineage]
    assert refused[0].called_again is not None
    assert f"({replan[0].action})" in refused[0].called_again, refused[0].called_again
    assert f"({by_fact['stock/W2'][0].action})" not in refused[0].called_again


def test_the_same_call_twice_in_one_message_is_flagged(tmp_path: Any) -> None:
    """QA qa-new17b #7: two identical ``transfer(W1, 4)`` calls in one model message (two
    tool-call ids); the body commits no fact, so both are authorized and run. The audit
    warns "the same call twice in one model message"; two such calls in two messages
    are no such pair."""
    from icore.adapters import load_jsonl

    def warned(steps: list[Any], name: str) -> list[str]:
        rec = RunRecorder(name)
        s = Store({"W1": 10}, sequential=True)
        llm = Emitting(model="scripted")  # the model's messages are recorded
        llm._steps = list(steps)
        with recording(rec):
            s.crew(llm).kickoff()
        assert s.moved == [("W1", 4), ("W1", 4)]
        return [w for w in load_jsonl(rec.write(tmp_path / f"{name}.jsonl")).warnings
                if "twice in one model message" in w]

    same = warned([[call("get_stock", wh="W1")],
                   [call("transfer", wh="W1", qty=4), call("transfer", wh="W1", qty=4)],
                   "done"], "one-message")
    assert len(same) == 1 and 'transfer {"qty": 4, "wh": "W1"}' in same[0], same
    assert warned([[call("get_stock", wh="W1")], [call("transfer", wh="W1", qty=4)],
                   [call("transfer", wh="W1", qty=4)], "done"], "two-messages") == []
