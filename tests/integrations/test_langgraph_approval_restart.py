"""A human approval answered in another process: validated, run once, in the trace.

QA qa-new16 S3: a LangGraph app's fenced tool with ``approval=True`` pauses at
``interrupt``; the process is SIGKILLed while it waits; a new process resumes the thread
with ``Command(resume=...)`` from a checkpointer that persists across processes. The
resumed call was refused ``not_read`` (the plan's reads lived in the first process's
memory) and the human's answer was in no trace. Now the pending approval is kept in the
``Workspace.sqlite`` folder: heads unchanged, the approved call runs once and the second
trace has the human's answer linked to it; a head moved meanwhile, the call is refused
stale (never run on the stale plan). Real processes, a real SIGKILL, real SQLite files,
real LangGraph checkpointers (icore's ``RecordCheckpointSaver`` over a ``SQLiteStore``,
and a file-backed saver on LangGraph's own ``InMemorySaver`` base).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")

APP = r'''
import asyncio, os, pickle, signal, sys, threading, time
from typing import Annotated, TypedDict
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from icore.integrations import RunRecorder
from icore.integrations.langgraph import fenced_tool, RecordCheckpointSaver, RecordingHandler
from icore.memory import SQLiteStore, OwnershipMap
from icore.workspace import Workspace
PHASE, DB, SAVER, TRACE = sys.argv[1:5]
os.makedirs(DB, exist_ok=True)
ws = Workspace.sqlite({"order/*": "sales"}, DB)
if ws.head("order/42") is None:
    ws.put("order/42", {"city": "Berlin", "total": 99.5})
clerk = ws.agent("clerk")

class FileSaver(InMemorySaver):
    """LangGraph's own saver, its state pickled to one file after every write."""
    def __init__(self, path):
        super().__init__()
        self.path = path
        if os.path.exists(path):
            with open(path, "rb") as f:
                storage, writes, blobs = pickle.load(f)
            for t, by_ns in storage.items():
                for ns, cps in by_ns.items():
                    self.storage[t][ns].update(cps)
            for k, v in writes.items():
                self.writes[k].update(v)
            self.blobs.update(blobs)
    LOCK = threading.Lock()
    def _save(self):
        with self.LOCK:  # parallel writes of one step: one writer at a time
            state = ({t: {ns: dict(c) for ns, c in v.items()}
                      for t, v in self.storage.items()},
                     {k: dict(v) for k, v in self.writes.items()}, dict(self.blobs))
            with open(self.path + ".tmp", "wb") as f:
                pickle.dump(state, f)
            os.replace(self.path + ".tmp", self.path)
    def put(self, *a, **k):
        out = super().put(*a, **k); self._save(); return out
    def put_writes(self, *a, **k):
        super().put_writes(*a, **k); self._save()

@tool
def get_order(order_id: int) -> dict:
    """Read an order."""
    return clerk.read(f"order/{order_id}")

ASYNC = os.environ.get("ASYNC") == "1"
@tool
def refund(order_id: int, amount: float) -> str:
    """Refund money to the customer."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} refund {order_id} {amount}\n")
    if PHASE == "die":  # the resuming process is killed inside the approved call's body
        os.kill(os.getpid(), signal.SIGKILL)
    return f"refunded {amount}"
@tool("refund")
async def arefund(order_id: int, amount: float) -> str:
    """Refund money to the customer."""
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} refund {order_id} {amount}\n")
    return f"refunded {amount}"

TWO = os.environ.get("TWO") == "1"  # two refunds in one message: asked one at a time
if TWO and ws.head("order/43") is None:
    ws.put("order/43", {"city": "Paris", "total": 12.0})
SCRIPT = [
    AIMessage("", tool_calls=[{"name": "get_order", "args": {"order_id": 42}, "id": "c1"}]
              + ([{"name": "get_order", "args": {"order_id": 43}, "id": "c0"}] if TWO else [])),
    AIMessage("", tool_calls=[{"name": "refund", "args": {"order_id": 42, "amount": 9.5},
                               "id": "c2"}]
              + ([{"name": "refund", "args": {"order_id": 43, "amount": 2.0}, "id": "c3"}]
                 if TWO else [])),
    AIMessage("done"),
]
class S(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
def model(s):
    n = sum(1 for m in s["messages"] if m.type == "ai")
    return {"messages": [SCRIPT[min(n, len(SCRIPT) - 1)].model_copy()]}
g = StateGraph(S)
g.add_node("clerk", model)
g.add_node("tools", ToolNode([get_order, fenced_tool(
    arefund if ASYNC else refund, agent=clerk,
    depends_on=lambda a: {f"order/{a['order_id']}"}, approval=True)]))
g.add_edge(START, "clerk"); g.add_conditional_edges("clerk", tools_condition)
g.add_edge("tools", "clerk")
saver = (FileSaver(os.path.join(DB, "ckpt.pickle")) if SAVER == "file" else
         RecordCheckpointSaver(SQLiteStore(os.path.join(DB, "ckpt.db"),
                                           OwnershipMap(patterns={"lg/*": "graph"}), "graph")))
app = g.compile(checkpointer=saver)
cfg = {"configurable": {"thread_id": "t1"}}
if PHASE == "moved":  # another agent changes the order while the human decides
    ws.update("order/42", lambda o: {**o, "city": "Munich"})
with RunRecorder(f"orders-{PHASE}", path=TRACE) as rec:
    cfg["callbacks"] = [RecordingHandler(rec)]
    inp = ({"messages": [HumanMessage("refund 9.5 on order 42")]} if PHASE == "run" else
           Command(resume=PHASE != "reject"))
    if PHASE == "again":  # a third process resumes the step once more
        inp = None
    out = asyncio.run(app.ainvoke(inp, cfg)) if ASYNC else app.invoke(inp, cfg)
    if "__interrupt__" in out:
        import json
        print("PAUSED", flush=True)
        print("ASKED", json.dumps([i.value for i in out["__interrupt__"]]), flush=True)
        if PHASE == "run":
            time.sleep(1000)  # the human takes their time: the process is killed here
    for m in out["messages"]:
        if m.type == "tool":
            print("TOOL", m.name, m.tool_call_id, str(m.content).replace("\n", " "))
'''


def _env(aio: bool = False, two: bool = False) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "ASYNC": "1" if aio else "0",
            "TWO": "1" if two else "0"}


def _paused_then_killed(tmp_path: Path, saver: str, aio: bool = False,
                        two: bool = False) -> tuple[Path, Path]:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APP)
    proc = subprocess.Popen([sys.executable, str(app), "run", str(db), saver,
                             str(tmp_path / "t1.jsonl")], env=_env(aio, two),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the pause is printed (or exit)
        assert line.startswith("PAUSED"), (line, proc.stderr.read()[-3000:])  # type: ignore[union-attr]
        os.kill(proc.pid, signal.SIGKILL)  # waiting for the human
    finally:
        proc.wait(30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == -signal.SIGKILL
    return app, db


def _resume(tmp_path: Path, app: Path, db: Path, saver: str, phase: str,
            aio: bool = False, two: bool = False) -> str:
    done = subprocess.run([sys.executable, str(app), phase, str(db), saver,
                           str(tmp_path / "t2.jsonl")], env=_env(aio, two), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _effects(db: Path) -> list[str]:
    path = db / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def _audit(tmp_path: Path, *names: str) -> str:
    got = subprocess.run([sys.executable, "-m", "icore", "audit",
                          *(str(tmp_path / n) for n in names), "--no-report"], env=_env(),
                         capture_output=True, text=True, timeout=120, check=False)
    return got.stdout + got.stderr


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


@pytest.mark.parametrize(("saver", "aio"), [("record", False), ("file", False),
                                           ("file", True)])
def test_approved_after_restart_runs_once_and_is_in_the_trace(tmp_path: Path, saver: str,
                                                               aio: bool) -> None:
    """Heads unchanged: the call the human approved runs once in the new process (a
    sync tool under ``invoke``, an async one under ``ainvoke``); its trace names the
    human's approval and the run and call it was asked in; the audit counts the action
    valid and approved by a human, and the first run as stopped while it waited."""
    app, db = _paused_then_killed(tmp_path, saver, aio)
    assert _effects(db) == []
    out = _resume(tmp_path, app, db, saver, "approve", aio)
    assert "TOOL refund c2 refunded 9.5" in out.splitlines(), out
    assert _effects(db) == ["approve refund 42 9.5"]
    lines = _lines(tmp_path / "t2.jsonl")
    said = [ln for ln in lines if ln.get("answered_by") == "human" and ln["kind"] == "thought"]
    assert len(said) == 1, said
    assert said[0]["decision"] == "approve" and said[0]["tool"] == "refund"
    assert said[0]["resumed"] == {"run": "orders-run", "tool_call_id": "c2",
                                  "request": said[0]["resumed"]["request"]}  # type: ignore[index]
    assert "asked in run orders-run" in str(said[0]["content"])
    audit = _audit(tmp_path, "t1.jsonl", "t2.jsonl")
    assert "protected actions of orders-approve: 1 (1 valid); 1 approved by a human" in \
        " ".join(audit.split()), audit
    assert "paused, then stopped while waiting for a human" in audit, audit
    # the pending approval is spent: a third process resuming again runs nothing
    with closing(sqlite3.connect(db / "icore-attempts.sqlite")) as con:
        assert con.execute("SELECT COUNT(*) FROM pending_approvals").fetchone() == (0,)


def test_rejected_after_restart_never_runs_and_is_in_the_trace(tmp_path: Path) -> None:
    app, db = _paused_then_killed(tmp_path, "record")
    out = _resume(tmp_path, app, db, "record", "reject")
    assert _effects(db) == []
    assert any(ln.startswith("TOOL refund c2 ") and "reject" in ln for ln in out.splitlines()), out
    said = [ln for ln in _lines(tmp_path / "t2.jsonl")
            if ln.get("answered_by") == "human" and ln["kind"] == "thought"]
    assert [ln["decision"] for ln in said] == ["reject"], said
    assert "asked in run orders-run" in str(said[0]["content"])


def test_head_moved_while_waiting_is_refused_stale(tmp_path: Path) -> None:
    """Another agent changed the order between the question and the restart: the
    approved call derives from an old version: it never runs; the model gets the fresh
    order (planfence Alg. 1, one replan)."""
    app, db = _paused_then_killed(tmp_path, "file")
    out = _resume(tmp_path, app, db, "file", "moved")
    assert _effects(db) == []
    c2 = [ln for ln in out.splitlines() if ln.startswith("TOOL refund c2 ")]
    assert len(c2) == 1 and "Munich" in c2[0] and "not_read" not in c2[0], out
    # the human did approve (before the gate refused the stale call): in the new trace,
    # linked to the run that asked (QA qa-new18a #3)
    said = [ln for ln in _lines(tmp_path / "t2.jsonl")
            if ln.get("answered_by") == "human" and ln["kind"] == "thought"]
    assert [ln["decision"] for ln in said] == ["approve"], said
    assert "asked in run orders-run" in str(said[0]["content"])
    audit = " ".join(_audit(tmp_path, "t1.jsonl", "t2.jsonl").split())
    assert "orders-moved: 1 (1 blocked); 1 approved by a human" in audit, audit


def test_the_question_asked_after_a_restart_shows_the_values(tmp_path: Path) -> None:
    """Two refunds in one message, the first process killed at the first question: the
    second question, asked by the resuming process, shows each version's value as the
    first did (QA qa-new18a #6)."""
    app, db = _paused_then_killed(tmp_path, "record", two=True)
    out = _resume(tmp_path, app, db, "record", "approve", two=True)
    [asked] = [json.loads(ln[6:]) for ln in out.splitlines() if ln.startswith("ASKED ")]
    [question] = asked
    req = question["planfence.approval"]
    assert req["args"]["order_id"] == 43, req
    assert req["basis"][0]["key"] == "order/43"
    assert req["basis"][0]["value"] == {"city": "Paris", "total": 12.0}, req


def test_pending_state_corrupt_fails_closed(tmp_path: Path) -> None:
    """The kept pending approval cannot be read back: the call is refused, never run
    blind (and the refusal says why)."""
    app, db = _paused_then_killed(tmp_path, "record")
    with closing(sqlite3.connect(db / "icore-attempts.sqlite")) as con:
        con.execute("UPDATE pending_approvals SET asked = 'not json'")
        con.commit()
    out = _resume(tmp_path, app, db, "record", "approve")
    assert _effects(db) == []
    c2 = [ln for ln in out.splitlines() if ln.startswith("TOOL refund c2 ")]
    assert len(c2) == 1 and "pending approval" in c2[0], out


def test_resumed_call_killed_mid_body_never_runs_twice(tmp_path: Path) -> None:
    """The durable-attempt rule holds for a resumed approval: the process that resumed
    it is killed inside the approved body; a third process resuming the step refuses
    the call ``earlier_outcome_unknown`` (its effect once, not asked again)."""
    app, db = _paused_then_killed(tmp_path, "record")
    died = subprocess.run([sys.executable, str(app), "die", str(db), "record",
                           str(tmp_path / "t2.jsonl")], env=_env(), capture_output=True,
                          text=True, timeout=120, check=False)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert _effects(db) == ["die refund 42 9.5"]
    out = subprocess.run([sys.executable, str(app), "again", str(db), "record",
                          str(tmp_path / "t3.jsonl")], env=_env(), capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    c2 = [ln for ln in out.stdout.splitlines() if ln.startswith("TOOL refund c2 ")]
    assert len(c2) == 1 and "(earlier_outcome_unknown)" in c2[0], out.stdout
    assert _effects(db) == ["die refund 42 9.5"]



def test_a_deleted_pending_row_says_where_it_was_looked_for(tmp_path: Path) -> None:
    """The kept question was deleted while the human decided: the resumed call fails
    closed (nothing runs) and the model's text names the file it was looked for in
    (QA qa-new18a #10), not only the generic "reads are kept in memory"."""
    app, db = _paused_then_killed(tmp_path, "record")
    with closing(sqlite3.connect(db / "icore-attempts.sqlite")) as con:
        con.execute("DELETE FROM pending_approvals")
        con.commit()
    out = _resume(tmp_path, app, db, "record", "approve")
    assert _effects(db) == []
    c2 = [ln for ln in out.splitlines() if ln.startswith("TOOL refund c2 ")]
    assert len(c2) == 1 and "(not_read)" in c2[0], out
    assert "no approval request is kept for this call in" in c2[0]
    assert "icore-attempts.sqlite (table pending_approvals" in c2[0]
