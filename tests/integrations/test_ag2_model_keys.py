"""A model's argument text in a fact key (QA r8-ag2mcp D5) and a same-value owner put (D7),
through a real AG2 fenced tool.

A dynamic ``depends_on`` builds keys from the model's arguments: ``sku="*"`` is a literal
character, never a pattern; the call is refused to the model (``not_read``, the argument
named), nothing runs and ``agent.ask`` never raises. A pattern the application writes
itself stays a setup error raised out of the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ag2 import Agent
from ag2.events import ToolErrorEvent, ToolResultEvent

from icore.errors import ActionBlocked
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace, WorkspaceError

from .ag2_world import call, run
from .conftest import load_example


def _stock() -> tuple[Workspace, Any, list[Any], Any]:
    ws = Workspace({"stock/*": "keeper"})
    for sku in ("bolt", "nut"):
        ws.put(f"stock/lyon/{sku}", {"qty": 100}, by="keeper")
    d = ws.agent("dispatcher")
    moves: list[Any] = []

    def transfer(sku: str, from_site: str, qty: int) -> str:
        """Move stock out of a site."""
        moves.append((sku, qty))
        return "moved"

    tool = fenced_tool(transfer, agent=d,
                       depends_on=lambda a: {f"stock/{a['from_site']}/{a['sku']}"})
    return ws, d, moves, tool


def _world(turns: Any) -> Any:
    return load_example("ag2_app").ScriptedWorld(iter(turns))


def _text(ev: ToolResultEvent) -> str:
    assert isinstance(ev, ToolErrorEvent)
    assert isinstance(ev.error, ActionBlocked)
    return str(ev.error)


@pytest.mark.usefixtures("one_chat")
@pytest.mark.parametrize("sku", ["*", "b?lt", "[bn]olt", "bo*", "bolt\x00"])
def test_glob_or_nul_in_a_model_argument_is_refused_to_the_model(sku: str) -> None:
    """Every fact read, then ``sku="*"`` (etc.): refused ``not_read`` naming the argument
    as not a valid key; nothing ran, no setup-error wording; the next valid call runs."""
    _ws, d, moves, tool = _stock()
    for k in ("bolt", "nut"):
        d.read(f"stock/lyon/{k}")
    agent = Agent("dispatcher", config=_world([
        call("transfer", sku=sku, from_site="lyon", qty=1),
        call("transfer", sku="bolt", from_site="lyon", qty=1), "done"]), tools=[tool])
    results = run(agent)
    text = _text(results[0])
    assert "(not_read)" in text and f"sku={sku!r}" in text
    assert "is not a valid key" in text and "Nothing ran" in text
    assert "fence setup" not in text and "Do not retry" not in text
    assert results[0].error.reason == "not_read"  # type: ignore[attr-defined]
    assert not isinstance(results[1], ToolErrorEvent)
    assert moves == [("bolt", 1)]


def test_agent_execute_refuses_the_argument_and_keeps_the_scope_literal() -> None:
    """Without a framework: ``Agent.execute`` returns a refused call (never raises) whose
    ``bad_args`` name the argument; ``unwritten`` holds the literal key."""
    _ws, d, moves, _tool = _stock()
    d.read("stock/lyon/bolt")
    call_ = d.execute("transfer", lambda **a: moves.append(a), {"sku": "*", "qty": 1},
                      depends_on=lambda a: {f"stock/lyon/{a['sku']}"})
    assert not call_.executed and call_.reason == "not_read"
    assert call_.bad_args == {"sku": "*"} and call_.unwritten == ("stock/lyon/*",)
    assert "'*', '?' and '['" in call_.message and moves == []


@pytest.mark.usefixtures("one_chat")
def test_the_refused_glob_argument_is_audited_blocked(tmp_path: Path) -> None:
    """Recorded with ``record_agents``: the refused call is a blocked protected action
    (policy before the gate), the next one valid; no hard flag."""
    _ws, d, _moves, tool = _stock()
    d.read("stock/lyon/bolt")
    rec = RunRecorder("glob-arg")
    agent = Agent("dispatcher", config=_world([
        call("transfer", sku="*", from_site="lyon", qty=1),
        call("transfer", sku="bolt", from_site="lyon", qty=1), "done"]), tools=[tool])
    record_agents(rec, agent)
    run(agent)
    rec.write(tmp_path / "run.jsonl")
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(tmp_path / "run.jsonl"),
                          "--json", str(tmp_path / "a.json")], capture_output=True,
                         text=True, timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    got = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["runs"][0]
    assert got["actions"]["blocked"] == 1 and got["actions"]["valid"] == 1
    assert got["summary"]["hard_flags"] == 0
    assert "not_read" in got["lineage"][0]["reason"]


def test_a_pattern_the_application_writes_is_still_a_setup_error() -> None:
    """``depends_on=lambda a: {"stock/lyon/*"}`` (no argument in it): raised out of the run
    with a fix that keeps the key's literal prefix."""
    ws = Workspace({"stock/*": "keeper"})
    ws.put("stock/lyon/bolt", {"qty": 1}, by="keeper")
    moves: list[Any] = []

    def transfer(sku: str) -> str:
        """Move."""
        moves.append(sku)
        return "moved"

    tool = fenced_tool(transfer, agent=ws.agent("d"), depends_on=lambda a: {"stock/ly?n/*"})
    agent = Agent("d", config=_world([call("transfer", sku="bolt"), "x"]), tools=[tool])
    with pytest.raises(WorkspaceError, match="names a pattern") as ei:
        run(agent)
    assert "stock/ly{a[...]}" in str(ei.value) and moves == []



def test_an_owner_put_of_the_same_value_does_not_make_the_plan_stale() -> None:
    """D7: the keeper's sync re-puts the unchanged stock between read and call: no new
    version, the call runs; a real change is still refused ``stale``."""
    ws, _d, moves, tool = _stock()

    def turns() -> Any:
        yield call("transfer", sku="bolt", from_site="lyon", qty=1)  # not read: handed over
        yield call("transfer", sku="bolt", from_site="lyon", qty=1)
        before = ws.head("stock/lyon/bolt")
        again = ws.put("stock/lyon/bolt", {"qty": 100}, by="keeper")
        assert again == before
        yield call("transfer", sku="bolt", from_site="lyon", qty=2)
        ws.put("stock/lyon/bolt", {"qty": 99}, by="keeper")
        yield call("transfer", sku="bolt", from_site="lyon", qty=3)
        yield "done"

    results = run(Agent("dispatcher", config=load_example("ag2_app").ScriptedWorld(turns()),
                        tools=[tool]))
    assert "not_read" in _text(results[0])
    assert not isinstance(results[1], ToolErrorEvent)
    assert not isinstance(results[2], ToolErrorEvent)
    assert "(stale)" in _text(results[3])
    assert moves == [("bolt", 1), ("bolt", 2)]
