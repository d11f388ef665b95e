"""A fenced call killed mid-body is not run again by a new process resuming its step.

QA qa-new14 S1 (#28): a process killed with SIGKILL while a fenced tool's body ran, a new
process calling ``graph.invoke(None, config)`` from icore's ``RecordCheckpointSaver`` over
a ``SQLiteStore``: the same tool call (same ``tool_call_id``) was refused ``not_read`` (the
reads lived in memory), the model read again and called again: the effect twice. Now
the attempt is kept in the app's SQLite folder: the re-run is refused
``earlier_outcome_unknown``. Real processes, a real SIGKILL, a real SQLite file.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.integrations._approvals import canon
from icore.integrations._call_ledger import RAN, REFUSED, STARTED, Earlier
from icore.integrations.langgraph._attempts_db import FILE_NAME, AttemptsFile, durable_key
from icore.integrations.langgraph._branches import Step

pytestmark = pytest.mark.timeout(120)

SRC = str(Path(__file__).resolve().parents[2] / "src")

APP = '''
import asyncio, os, signal, sys, time
from langchain_core.callbacks import BaseCallbackHandler
from typing import Annotated, TypedDict
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from icore.integrations.langgraph import fenced_tool, RecordCheckpointSaver
from icore.memory import SQLiteStore, OwnershipMap
from icore.workspace import Workspace
PHASE, DB, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
FACTS = {"stock/*": "inventory"}
ws = Workspace(FACTS) if MODE == "memory" else Workspace.sqlite(FACTS, DB)
if ws.head("stock/bolt") is None:
    ws.put("stock/bolt", {"qty": 100})
clerk = ws.agent("clerk")
@tool
def get_stock(sku: str) -> dict:
    """Read."""
    return clerk.read(f"stock/{sku}")
def effect(sku, qty):
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} dispatch {sku} {qty}\\n")
    return "dispatched"
@tool
def dispatch(sku: str, qty: int) -> str:
    """Dispatch goods."""
    effect(sku, qty)
    if PHASE == "run" and MODE != "returned":
        time.sleep(100)
    return "dispatched"
@tool("dispatch")
async def adispatch(sku: str, qty: int) -> str:
    """Dispatch goods."""
    effect(sku, qty)
    if PHASE == "run":
        await asyncio.sleep(100)
    return "dispatched"
class KillAfterTool(BaseCallbackHandler):
    """The process dies once the tool returned, before LangGraph saves the step."""
    def on_tool_end(self, output, **kw):
        if os.path.exists(os.path.join(DB, "effects.log")):  # dispatch's end, not the read's
            os.kill(os.getpid(), signal.SIGKILL)
class M(GenericFakeChatModel):
    def bind_tools(self, t, **k): return self
def script():
    if PHASE == "run":
        yield AIMessage("", tool_calls=[{"name": "get_stock", "args": {"sku": "bolt"}, "id": "r1"}])
        yield AIMessage("", tool_calls=[{"name": "dispatch", "args": {"sku": "bolt", "qty": 5},
                                         "id": "d1"}])
    yield AIMessage("done")
llm = M(messages=script())
class S(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
fenced = fenced_tool(adispatch if MODE == "async" else dispatch, agent=clerk,
                     depends_on=lambda a: {f"stock/{a['sku']}"})
g = StateGraph(S)
g.add_node("clerk", lambda s: {"messages": [llm.invoke(s["messages"])]})
g.add_node("tools", ToolNode([get_stock, fenced]))
g.add_edge(START, "clerk"); g.add_conditional_edges("clerk", tools_condition)
g.add_edge("tools", "clerk")
os.makedirs(DB, exist_ok=True)
saver = RecordCheckpointSaver(SQLiteStore(os.path.join(DB, "ckpt.db"),
                                          OwnershipMap(patterns={"lg/*": "graph"}), "graph"))
app = g.compile(checkpointer=saver)
cfg = {"configurable": {"thread_id": "t1"}}
if PHASE == "run" and MODE == "returned":
    cfg["callbacks"] = [KillAfterTool()]
inp = {"messages": [HumanMessage("dispatch 5 bolts")]} if PHASE == "run" else None
out = asyncio.run(app.ainvoke(inp, cfg)) if MODE == "async" else app.invoke(inp, cfg)
for m in out["messages"]:
    if m.type == "tool":
        print("TOOL", m.name, m.tool_call_id, str(m.content).replace("\\n", " "))
'''


def _py(app: Path, *args: str) -> list[str]:
    return [sys.executable, str(app), *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC}


def _killed_then_resumed(tmp_path: Path, mode: str) -> tuple[list[str], str]:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APP)
    effects = db / "effects.log"
    proc = subprocess.Popen(_py(app, "run", str(db), mode), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while not (effects.exists() and "dispatch" in effects.read_text()):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the tool body never started"
            time.sleep(0.1)
        if mode != "returned":  # it kills itself once the tool returned
            os.kill(proc.pid, signal.SIGKILL)  # mid-body: the effect done, not returned
    finally:
        proc.wait(30)
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    done = subprocess.run(_py(app, "resume", str(db), mode), env=_env(), capture_output=True,
                          text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return effects.read_text().splitlines(), done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sqlite", "memory", "async"])
def test_killed_mid_body_resumed_is_outcome_unknown(tmp_path: Path, mode: str) -> None:
    """Kept in the Workspace.sqlite folder, or (an in-memory workspace) the folder of the
    checkpointer's SQLiteStore; an async tool under ``ainvoke`` alike."""
    lines, out = _killed_then_resumed(tmp_path, mode)
    assert lines == ["run dispatch bolt 5"]  # the effect once
    d1 = [ln for ln in out.splitlines() if ln.startswith("TOOL dispatch d1 ")]
    assert len(d1) == 1, out
    assert "(earlier_outcome_unknown)" in d1[0] and "never finished" in d1[0], d1[0]
    assert "not_read" not in d1[0]
    with closing(sqlite3.connect(tmp_path / "db" / FILE_NAME)) as db:
        rows = db.execute("SELECT tool, tool_call_id, how FROM attempts").fetchall()
    assert rows == [("dispatch", "d1", STARTED)]  # left as the killed process wrote it


@pytest.mark.slow
def test_killed_after_the_tool_returned_replays_its_answer(tmp_path: Path) -> None:
    """Killed after the body returned, before LangGraph saved the step: the resumed
    process answers the call with its recorded result, not run twice, not refused."""
    lines, out = _killed_then_resumed(tmp_path, "returned")
    assert lines == ["run dispatch bolt 5"]
    assert "TOOL dispatch d1 dispatched" in out.splitlines(), out
    with closing(sqlite3.connect(tmp_path / "db" / FILE_NAME)) as db:
        rows = db.execute("SELECT tool_call_id, how, value FROM attempts").fetchall()
    assert rows == [("d1", RAN, '"dispatched"')]


def test_attempts_file_round_trip(tmp_path: Path) -> None:
    """STARTED stays until settled; RAN/REFUSED give their answer back; None forgets."""
    f = AttemptsFile(tmp_path / FILE_NAME)
    f.start("k1", "t", "thread", "c1")
    assert f.get("k1") == Earlier(STARTED)
    again = AttemptsFile(tmp_path / FILE_NAME)  # another process's view of the file
    assert again.get("k1") == Earlier(STARTED)
    f.settle("k1", Earlier(RAN, {"ok": [1, 2]}))
    assert again.get("k1") == Earlier(RAN, {"ok": [1, 2]})
    f.start("k2", "t", None, "c2")
    f.settle("k2", Earlier(REFUSED, "PlanFence refused t: no"))
    assert again.get("k2") == Earlier(REFUSED, "PlanFence refused t: no")
    f.start("k3", "t", None, "c3")
    f.settle("k3", Earlier(RAN, object()))  # not JSON: kept as its text
    got = again.get("k3")
    assert got is not None and got.how == RAN and isinstance(got.value, str)
    f.settle("k3", None)
    assert again.get("k3") is None and again.get("nope") is None
    f.close()
    again.close()


def test_in_memory_app_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No SQLite state configured: no attempts file anywhere (the per-process memory only)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from icore.integrations.langgraph import fenced_tool
    from icore.workspace import Workspace

    from .test_langgraph_workspace import _react

    monkeypatch.chdir(tmp_path)
    ws = Workspace({"stock/*": "inventory"})
    ws.put("stock/bolt", {"qty": 1})
    clerk = ws.agent("clerk")

    @tool
    def get_stock(sku: str) -> dict:
        """Read."""
        return clerk.read(f"stock/{sku}")

    @tool
    def dispatch(sku: str) -> str:
        """Dispatch."""
        return "sent"

    turns = iter([AIMessage("", tool_calls=[{"name": "get_stock", "args": {"sku": "bolt"},
                                             "id": "r"}]),
                  AIMessage("", tool_calls=[{"name": "dispatch", "args": {"sku": "bolt"},
                                             "id": "d"}]),
                  AIMessage("done")])
    fenced = fenced_tool(dispatch, agent=clerk, depends_on=lambda a: {f"stock/{a['sku']}"})
    graph = _react([get_stock, fenced], turns, checkpointer=InMemorySaver())
    out = graph.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "x"}})
    assert any(getattr(m, "content", None) == "sent" for m in out["messages"])
    assert not list(tmp_path.rglob(FILE_NAME))


_text = st.text(max_size=8)


@given(thread=_text, cid=_text, ckpt=_text, ns=_text, args=st.dictionaries(_text, st.integers()),
       other=st.dictionaries(_text, st.integers()))
def test_durable_key_is_the_step_keys_identity(thread: str, cid: str, ckpt: str, ns: str,
                                               args: dict[str, int],
                                               other: dict[str, int]) -> None:
    """Equal step keys (a new process: a new root, another checkpointer object) give one
    durable key; other arguments give another; no step, no key."""
    def key(a: dict[str, int], root: int) -> str | None:
        where = Step(thread, (("", ckpt),), ns, root, saver=object())
        return durable_key(((thread, cid), where, canon(a)))

    assert key(args, 1) == key(args, 7) is not None
    assert (key(args, 1) == key(other, 1)) == (canon(args) == canon(other))
    assert durable_key(None) is None and durable_key(((thread, cid), None, "{}")) is None


def test_attempts_are_pruned_by_age_and_count(tmp_path: Path) -> None:
    """#30: a started row no longer stays forever, finished rows do not accumulate."""
    from icore.integrations.langgraph import _attempts_db

    f = AttemptsFile(tmp_path / FILE_NAME)
    try:
        f.start("old", "dispatch", "t1", "d0")  # a process killed mid-call, long ago
        for i in range(3):
            f.start(f"k{i}", "dispatch", "t1", f"d{i}")
            f.settle(f"k{i}", Earlier(RAN, i))
        with closing(sqlite3.connect(tmp_path / FILE_NAME)) as db, db:
            db.execute("UPDATE attempts SET at = at - ? WHERE key = 'old'",
                       (_attempts_db.KEEP_S + 60,))
        f.prune()
        assert f.get("old") is None and f.get("k2") == Earlier(RAN, 2)
        keep = _attempts_db.KEEP_ROWS
        _attempts_db.KEEP_ROWS = 2  # the newest two finished calls stay
        try:
            f.prune()
        finally:
            _attempts_db.KEEP_ROWS = keep
        assert [f.get(f"k{i}") is not None for i in range(3)] == [False, True, True]
    finally:
        f.close()
