"""After a restart, a call refused ``earlier_outcome_unknown`` spends its reads (QA 17b #1).

A real crew process (a scripted native-function-calling ``BaseLLM``) on a
``Workspace.sqlite`` folder reads ``pay/A1`` and is SIGKILLed inside ``pay``'s body. A
second process replays the task: the read runs again, the replayed ``pay`` is refused
``earlier_outcome_unknown``, and the model's next message repeating ``pay`` blind (no read
in between) is refused ``not_read``: the refusal spent the read, as an unknown outcome in
one process does (planfence: a call is planned from current facts; the effect may have
happened). After a fresh read the model's call runs. The body ran twice only because the
model checked and decided again.

A recorded crew (``RunRecorder(path=)``) killed inside ``pay`` leaves the header and the
gate's lines only; ``icore audit`` reads it as a run that did not end with its one
protected action ``outcome unknown`` (QA 17b #2; it said "no events", exit 1).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests._procs import effects, kill_inside_body

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")

APP = r'''
import itertools, json, os, sys, time
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM, llm_call_context
from crewai.tools import tool
from pydantic import PrivateAttr
from icore.integrations.crewai import fenced_crewai_tool
from icore.workspace import Workspace
PHASE, DB = sys.argv[1], sys.argv[2]
IDS = itertools.count(1)
def tc(name, **args):
    return [{"id": f"call_{next(IDS)}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]
class LLM(BaseLLM):
    _steps: list = PrivateAttr(default_factory=list)
    _seen: list = PrivateAttr(default_factory=list)
    def call(self, messages, tools=None, callbacks=None, available_functions=None,
             from_task=None, from_agent=None, response_model=None):
        with llm_call_context():
            self._emit_call_started_event(messages=messages, tools=tools, callbacks=callbacks,
                                          available_functions=available_functions,
                                          from_task=from_task, from_agent=from_agent)
            self._seen.append(messages)
            step = self._steps.pop(0) if self._steps else "done"
            self._emit_call_completed_event(
                response=step if isinstance(step, str) else json.dumps(step),
                call_type=LLMCallType.LLM_CALL if isinstance(step, str)
                else LLMCallType.TOOL_CALL, from_task=from_task, from_agent=from_agent,
                messages=messages)
        return step
    def supports_function_calling(self): return True
    def supports_stop_words(self): return False
    def get_context_window_size(self): return 100_000
ws = Workspace.sqlite({"pay/*": "billing"}, DB)
if ws.head("pay/A1") is None:
    ws.put("pay/A1", {"due": 80.0}, by="billing")
desk = ws.agent("desk")
@tool("lookup")
def lookup(order_id: str) -> str:
    """Look a payment up."""
    return json.dumps(desk.read(f"pay/{order_id}"))
@tool("pay")
def pay(order_id: str, amount: float) -> str:
    """Pay an order."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} pay {order_id} {amount}\n")
    if PHASE == "run":
        time.sleep(100)
    return f"paid {amount}"
safe = fenced_crewai_tool(pay, agent=desk, depends_on=lambda a: {f"pay/{a['order_id']}"})
llm = LLM(model="scripted")
llm._steps = [tc("lookup", order_id="A1"), tc("pay", order_id="A1", amount=80.0),
              tc("pay", order_id="A1", amount=80.0), tc("lookup", order_id="A1"),
              tc("pay", order_id="A1", amount=80.0), "done"]
agent = Agent(role="desk", goal="pay", backstory="careful", llm=llm, tools=[lookup, safe],
              verbose=False, allow_delegation=False, max_iter=8)
task = Task(description="Pay order A1", expected_output="what was paid", agent=agent)
crew = Crew(agents=[agent], tasks=[task], verbose=False)
if os.environ.get("TRACE"):  # a recorded run, each line written as it is made
    from icore.integrations import RunRecorder
    from icore.integrations.crewai import recording
    with RunRecorder("pay-A1", path=os.environ["TRACE"]) as rec, recording(rec):
        crew.kickoff()
else:
    crew.kickoff()
for ms in llm._seen[-1:]:
    for m in ms:
        if isinstance(m, dict) and m.get("role") == "tool":
            print("TOOL", str(m.get("content")).replace("\n", " "))
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "CREWAI_DISABLE_TELEMETRY": "true",
            "OTEL_SDK_DISABLED": "true"}


def test_refused_after_restart_the_blind_repeat_needs_a_fresh_read(tmp_path: Path) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APP)
    kill_inside_body(app, db, _env(), timeout_s=180)
    again = subprocess.run([sys.executable, str(app), "resume", str(db)], env=_env(),
                           capture_output=True, text=True, timeout=180, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    told = [ln for ln in again.stdout.splitlines() if ln.startswith("TOOL")]
    assert len(told) == 5, again.stdout
    assert "earlier_outcome_unknown" in told[1], told
    assert "(not_read)" in told[2] and "read pay/A1 again" in told[2], told  # blind repeat
    assert told[4].startswith("TOOL paid"), told  # after the model's fresh read
    assert effects(db) == ["run pay A1 80.0", "resume pay A1 80.0"]


def test_a_crew_killed_inside_the_tool_leaves_a_trace_the_audit_reads(tmp_path: Path) -> None:
    app, db, trace = tmp_path / "app.py", tmp_path / "db", tmp_path / "run1.jsonl"
    app.write_text(APP)
    kill_inside_body(app, db, {**_env(), "TRACE": str(trace)}, timeout_s=180)
    assert '"decision"' in trace.read_text()  # the fsynced authorizing decision
    out = tmp_path / "audit.json"
    done = subprocess.run([sys.executable, "-m", "icore", "audit", str(trace), "-o",
                           str(tmp_path / "rep"), "--json", str(out)], env=_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "did not end" in done.stdout and "outcome unknown" in done.stdout, done.stdout
    run = json.loads(out.read_text())["runs"][0]
    assert run["actions"]["outcome unknown"] == 1 and run["actions"]["total"] == 1
