"""After a restart, a call refused ``earlier_outcome_unknown`` spends its reads (QA 17b #1).

Agents SDK and AG2 (CrewAI: ``test_crewai_restart_spends.py``). A real app process (a
scripted model) on a ``Workspace.sqlite`` folder reads ``pay/A1`` and is SIGKILLed inside
``pay``'s body; a second process replays the model's same calls (same ids): the read runs
again and ``pay`` (``c2``) is refused ``earlier_outcome_unknown``. The model's next
message repeats ``pay`` blind (``c3``, a new id, no read in between): refused
``not_read``, as after an unknown outcome in one process (the refusal spent the agent's
reads of ``pay``'s dependency scope). After the model reads again (``c4``) its call
(``c5``) runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests._procs import effects, kill_inside_body

pytest.importorskip("agents.testing")
pytest.importorskip("ag2.testing")

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")

AGENTS_APP = r'''
import asyncio, contextlib, os, sys, time
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from icore.integrations.openai_agents import fenced_function_tool
from icore.workspace import Workspace
PHASE, DB = sys.argv[1], sys.argv[2]
ws = Workspace.sqlite({"pay/*": "billing"}, DB)
if ws.head("pay/A1") is None:
    ws.put("pay/A1", {"due": 80.0}, by="billing")
desk = ws.agent("desk")
@function_tool
def lookup(order_id: str) -> dict:
    """Look a payment up."""
    got = desk.read(f"pay/{order_id}")
    return got
def pay(order_id: str, amount: float) -> str:
    """Pay an order."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} pay {order_id} {amount}\n")
    time.sleep(100 if PHASE == "run" else 0)
    return f"paid {amount}"
safe = fenced_function_tool(function_tool(pay), agent=desk,
                            depends_on=lambda a: {f"pay/{a['order_id']}"})
model = ScriptedModel([
    [function_call("lookup", {"order_id": "A1"}, call_id="c1")],
    [function_call("pay", {"order_id": "A1", "amount": 80.0}, call_id="c2")],
    [function_call("pay", {"order_id": "A1", "amount": 80.0}, call_id="c3")],
    [function_call("lookup", {"order_id": "A1"}, call_id="c4")],
    [function_call("pay", {"order_id": "A1", "amount": 80.0}, call_id="c5")],
    [assistant_message("done")]])
clerk = Agent(name="clerk", instructions="Pay.", tools=[lookup, safe], model=model)
result = asyncio.run(Runner.run(clerk, "Pay A1"))
for item in result.to_input_list():
    if isinstance(item, dict) and item.get("type") == "function_call_output" \
            and item.get("call_id") in ("c2", "c3", "c5"):
        print("TOOL", str(item.get("output")).replace("\n", " "))
'''

AG2_APP = r'''
import asyncio, contextlib, json, os, sys, time
from ag2 import Agent
from ag2.events import ToolCallEvent, ToolErrorEvent, ToolResultEvent
from ag2.testing import TestClient, TestConfig
from icore.integrations.ag2 import fenced_tool
from icore.workspace import Workspace
PHASE, DB = sys.argv[1], sys.argv[2]
class World(TestConfig):
    def __init__(self, turns):
        super().__init__(raise_tool_errors=False)
        self.turns = turns
    def create(self):
        c = TestClient(raise_tool_errors=False)
        c.events = self.turns
        return c
ws = Workspace.sqlite({"pay/*": "billing"}, DB)
if ws.head("pay/A1") is None:
    ws.put("pay/A1", {"due": 80.0}, by="billing")
desk = ws.agent("desk")
def lookup(order_id: str) -> dict:
    """Look a payment up."""
    got = desk.read(f"pay/{order_id}")
    return got
def pay(order_id: str, amount: float) -> str:
    """Pay an order."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} pay {order_id} {amount}\n")
    time.sleep(100 if PHASE == "run" else 0)
    return f"paid {amount}"
safe = fenced_tool(pay, agent=desk, depends_on=lambda a: {f"pay/{a['order_id']}"})
def script():
    yield ToolCallEvent("lookup", arguments=json.dumps({"order_id": "A1"}), id="c1")
    yield ToolCallEvent("pay", arguments=json.dumps({"order_id": "A1", "amount": 80.0}), id="c2")
    yield ToolCallEvent("pay", arguments=json.dumps({"order_id": "A1", "amount": 80.0}), id="c3")
    yield ToolCallEvent("lookup", arguments=json.dumps({"order_id": "A1"}), id="c4")
    yield ToolCallEvent("pay", arguments=json.dumps({"order_id": "A1", "amount": 80.0}), id="c5")
    yield "done"
agent = Agent("desk", config=World(script()), tools=[lookup, safe])
async def main():
    reply = await agent.ask("Pay A1")
    for e in await reply.history.get_events():
        if isinstance(e, ToolErrorEvent) and e.name == "pay":
            print("TOOL", str(e.error).replace("\n", " "))
        elif isinstance(e, ToolResultEvent) and e.name == "pay":
            print("TOOL", " ".join(str(getattr(p, "content", p)) for p in e.result.parts))
asyncio.run(main())
'''

APPS = {"openai_agents": AGENTS_APP, "ag2": AG2_APP}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "OPENAI_API_KEY": "unused"}


@pytest.mark.parametrize("framework", sorted(APPS))
def test_refused_after_restart_the_blind_repeat_needs_a_fresh_read(tmp_path: Path,
                                                                   framework: str) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APPS[framework])
    kill_inside_body(app, db, _env())
    again = subprocess.run([sys.executable, str(app), "resume", str(db)], env=_env(),
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    told = [ln for ln in again.stdout.splitlines() if ln.startswith("TOOL")]
    assert len(told) == 3, again.stdout
    assert "earlier_outcome_unknown" in told[0], told
    assert "not_read" in told[1] and "read pay/A1 again" in told[1], told  # blind repeat
    assert "paid 80.0" in told[2], told  # after the model's fresh read
    assert effects(db) == ["run pay A1 80.0", "resume pay A1 80.0"]
