"""A fenced call killed mid-body never runs twice after a restart: Agents SDK and AG2 (#30).

A real app process (a scripted model: the model's own ``lookup`` then ``pay`` tool calls,
with their tool-call ids) on a ``Workspace.sqlite`` folder is SIGKILLed inside ``pay``'s
body; a second process replays the model's same calls (same ids): the read runs again,
``pay`` is refused ``earlier_outcome_unknown`` with the unknown-outcome text, and its body
ran once. Two processes replaying the call at once: its body runs once. No line of the
app names the attempts (``icore-attempts.sqlite`` beside the owners' files).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
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
    with contextlib.suppress(Exception):  # a racer wrote it first
        ws.put("pay/A1", {"due": 80.0}, by="billing")
desk = ws.agent("desk")
@function_tool
def lookup(order_id: str) -> dict:
    """Look a payment up."""
    got = desk.read(f"pay/{order_id}")
    if PHASE == "race":  # both racers at the model's pay call, then go
        open(os.path.join(DB, f"ready-{os.getpid()}"), "w").close()
        while not os.path.exists(os.path.join(DB, "go")):
            time.sleep(0.005)
    return got
def pay(order_id: str, amount: float) -> str:
    """Pay an order."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} pay {order_id} {amount}\n")
    time.sleep({"run": 100, "race": 1.0}.get(PHASE, 0))
    return f"paid {amount}"
safe = fenced_function_tool(function_tool(pay), agent=desk,
                            depends_on=lambda a: {f"pay/{a['order_id']}"})
model = ScriptedModel([
    [function_call("lookup", {"order_id": "A1"}, call_id="c1")],
    [function_call("pay", {"order_id": "A1", "amount": 80.0}, call_id="c2")],
    [assistant_message("done")]])
clerk = Agent(name="clerk", instructions="Pay.", tools=[lookup, safe], model=model)
result = asyncio.run(Runner.run(clerk, "Pay A1"))
for item in result.to_input_list():
    if isinstance(item, dict) and item.get("type") == "function_call_output" \
            and item.get("call_id") == "c2":
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
    with contextlib.suppress(Exception):  # a racer wrote it first
        ws.put("pay/A1", {"due": 80.0}, by="billing")
desk = ws.agent("desk")
def lookup(order_id: str) -> dict:
    """Look a payment up."""
    got = desk.read(f"pay/{order_id}")
    if PHASE == "race":  # both racers at the model's pay call, then go
        open(os.path.join(DB, f"ready-{os.getpid()}"), "w").close()
        while not os.path.exists(os.path.join(DB, "go")):
            time.sleep(0.005)
    return got
def pay(order_id: str, amount: float) -> str:
    """Pay an order."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} pay {order_id} {amount}\n")
    time.sleep({"run": 100, "race": 1.0}.get(PHASE, 0))
    return f"paid {amount}"
safe = fenced_tool(pay, agent=desk, depends_on=lambda a: {f"pay/{a['order_id']}"})
def script():
    yield ToolCallEvent("lookup", arguments=json.dumps({"order_id": "A1"}), id="c1")
    yield ToolCallEvent("pay", arguments=json.dumps({"order_id": "A1", "amount": 80.0}), id="c2")
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


def _effects(db: Path) -> list[str]:
    return effects(db)


def _kill_inside_body(app: Path, db: Path) -> None:
    kill_inside_body(app, db, _env())


@pytest.mark.parametrize("framework", sorted(APPS))
def test_killed_inside_the_tool_then_restarted_is_refused(tmp_path: Path,
                                                          framework: str) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APPS[framework])
    _kill_inside_body(app, db)
    again = subprocess.run([sys.executable, str(app), "resume", str(db)], env=_env(),
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    told = [ln for ln in again.stdout.splitlines() if ln.startswith("TOOL")]
    assert len(told) == 1 and "earlier_outcome_unknown" in told[0], again.stdout
    assert "outcome is unknown" in told[0] and "check its effect" in told[0]
    assert _effects(db) == ["run pay A1 80.0"]  # the body ran once
    assert (db / "icore-attempts.sqlite").exists()


@pytest.mark.parametrize("framework", ["openai_agents"])
def test_two_processes_replaying_one_call_run_it_once(tmp_path: Path, framework: str) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APPS[framework])
    procs = [subprocess.Popen([sys.executable, str(app), "race", str(db)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    deadline = time.monotonic() + 120
    while len(list(db.glob("ready-*"))) < 2:  # both at the model's pay call
        assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    (db / "go").touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    told = sorted(ln for o, _ in outs for ln in o.splitlines() if ln.startswith("TOOL"))
    assert len(_effects(db)) == 1, (_effects(db), told)
    assert told[1].startswith("TOOL paid") or told[0].startswith("TOOL paid"), told
    assert any("call_running" in t or "already_ran" in t for t in told), told
