"""A fenced CrewAI call killed mid-body never runs twice after a restart (#30).

A fenced call is named across a restart by the model call it came from (the agent's
role and the messages sent to the model: the same when a restarted crew replays the same
task), its index in that model message and its arguments (``crewai/_call_ids.py``). A
real crew process with a scripted ``BaseLLM`` on a ``Workspace.sqlite`` folder is
SIGKILLed inside ``pay``; a
second process replays the model's same steps: ``pay`` is refused
``earlier_outcome_unknown`` (the model reads the unknown-outcome text), its body ran once.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests._procs import kill_inside_body

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")

APP = r'''
import json, os, sys, time
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
class LLM(BaseLLM):
    _turns: object = PrivateAttr()
    def call(self, messages, tools=None, callbacks=None, available_functions=None,
             from_task=None, from_agent=None, response_model=None):
        with llm_call_context():
            self._emit_call_started_event(messages=messages, tools=tools, callbacks=callbacks,
                                          available_functions=available_functions,
                                          from_task=from_task, from_agent=from_agent)
            text = next(self._turns)
            self._emit_call_completed_event(response=text, call_type=LLMCallType.LLM_CALL,
                                            from_task=from_task, from_agent=from_agent,
                                            messages=messages)
        return text
    def supports_function_calling(self): return False
    def supports_stop_words(self): return False
    def get_context_window_size(self): return 8192
def act(name, **a):
    return f"Thought: I should use {name}.\nAction: {name}\nAction Input: {json.dumps(a)}"
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
seen = []
def script():
    yield act("lookup", order_id="A1")
    yield act("pay", order_id="A1", amount=80.0)
    yield "Thought: I now know the final answer\nFinal Answer: done"
llm = LLM(model="scripted")
llm._turns = script()
agent = Agent(role="desk", goal="pay", backstory="careful", llm=llm, tools=[lookup, safe],
              verbose=False, allow_delegation=False, max_iter=5)
task = Task(description="Pay order A1", expected_output="what was paid", agent=agent)
from crewai.hooks import register_after_tool_call_hook
def after(ctx):
    if getattr(ctx, "tool_name", "") == "pay":
        print("TOOL", str(getattr(ctx, "tool_result", "")).replace("\n", " "))
    return None
register_after_tool_call_hook(after)
Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "CREWAI_DISABLE_TELEMETRY": "true",
            "OTEL_SDK_DISABLED": "true"}


def _effects(db: Path) -> list[str]:
    path = db / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def test_killed_inside_the_tool_then_restarted_is_refused(tmp_path: Path) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APP)
    kill_inside_body(app, db, _env(), timeout_s=180)
    again = subprocess.run([sys.executable, str(app), "resume", str(db)], env=_env(),
                           capture_output=True, text=True, timeout=180, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    told = [ln for ln in again.stdout.splitlines() if ln.startswith("TOOL")]
    assert len(told) == 1 and "earlier_outcome_unknown" in told[0], again.stdout
    assert "outcome is unknown" in told[0]
    assert _effects(db) == ["run pay A1 80.0"]  # the body ran once
