"""QA qa-new17c #5: ``with RunRecorder(path=...)`` left by an exception seals its file.

The block's exception closed the file with no end line and no ``chain_end`` seal: the run
audited exactly like a ``kill -9`` and deleting its trailing lines went unseen. Now the
last line is "the run stopped: <Type>: <message>" (``stopped: true``), sealed; the closed
file's header says ``sealed: true``; the run still audits "did not end" (no final
answer); a cut tail (the QA's ``head -n -4``) is flagged and the actions are INVALID.

Real parts: a LangGraph ReAct graph whose fenced tool raises ``ConnectionError`` (LangGraph
lets it out), the real ``RecordingHandler``, real trace files, the ``icore audit`` CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool

from .test_langgraph_workspace import Shop, _msg, _react
from .test_recording_truthful import _audit

pytestmark = pytest.mark.timeout(120)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _boom(tmp_path: Path) -> Path:
    """The QA's ``boom`` script: the card charge raises, the graph raises, the block too."""
    shop = Shop()

    @tool
    def charge_card(order_id: int) -> str:
        """Charge the order's card."""
        raise ConnectionError("card processor unreachable")

    charge = fenced_tool(charge_card, agent=shop.shipper,
                         depends_on=lambda a: {f"order/{a['order_id']}"})
    n = [0]
    app = _react([shop.get_order, charge], iter([
        _msg(("get_order", {"order_id": 42}), n=n),
        _msg(("charge_card", {"order_id": 42}), n=n), AIMessage("done")]), InMemorySaver())
    path = tmp_path / "b1.jsonl"
    with pytest.raises(ConnectionError), RunRecorder("b1", path=path) as rec:
        app.invoke({"messages": [HumanMessage("charge")]},
                   {"configurable": {"thread_id": "b1"}, "callbacks": [RecordingHandler(rec)]})
    return path


def test_a_block_left_by_the_graphs_exception_ends_with_a_sealed_stopped_line(
        tmp_path: Path) -> None:
    """The graph's own "the run stopped" line (RecordingHandler) is the sealed last line;
    the run audits not ended, its call outcome unknown, nothing INVALID."""
    path = _boom(tmp_path)
    lines = _lines(path)
    last = lines[-1]
    assert last["content"] == "the run stopped: ConnectionError: card processor unreachable"
    assert last["stopped"] is True and "chain_end" in last
    assert lines[0]["run"]["sealed"] is True
    assert sum(str(x.get("content", "")).startswith("the run stopped") for x in lines) == 1
    got, text, run = _audit(path, "--fail-on", "invalid")
    assert got == 0 and "did not end" in text and "b1: 1 (1 outcome unknown)" in text
    assert run["actions"]["INVALID"] == 0


def test_cutting_the_stopped_runs_tail_is_flagged(tmp_path: Path) -> None:
    """``head -n -4`` of the sealed file (the QA's tamper): the cut is named and the run's
    protected action is INVALID (before, it read exactly as before the cut)."""
    path = _boom(tmp_path)
    cut = tmp_path / "x.jsonl"
    cut.write_text("".join(x + "\n" for x in path.read_text(
        encoding="utf-8").splitlines()[:-4]), encoding="utf-8")
    got, text, run = _audit(cut, "--fail-on", "invalid")
    assert got == 3 and "lines were cut from the file's end" in " ".join(text.split())
    assert run["actions"]["INVALID"] == 1
    dropped = tmp_path / "y.jsonl"  # only the sealed line dropped: flagged the same way
    dropped.write_text("".join(x + "\n" for x in path.read_text(
        encoding="utf-8").splitlines()[:-1]), encoding="utf-8")
    assert _audit(dropped, "--fail-on", "invalid")[0] == 3


@pytest.mark.parametrize(("exc", "cancelled"), [
    (ValueError("bad row 7"), None), (KeyboardInterrupt(), True)])
def test_an_app_exception_adds_the_stopped_line(tmp_path: Path, exc: BaseException,
                                                cancelled: bool | None) -> None:
    """No integration wrote why: the recorder adds it (by the last line's agent)."""
    path = tmp_path / "app.jsonl"

    rec = RunRecorder("app", path=path)

    def run() -> None:
        with rec:
            rec.task("import the rows")
            rec.add("loader", "thought", "reading rows")
            raise exc

    with pytest.raises(type(exc)):
        run()
    last = _lines(path)[-1]
    assert last["agent"] == "loader" and last["stopped"] is True and "chain_end" in last
    assert last["content"].startswith(f"the run stopped: {type(exc).__name__}")
    assert last.get("cancelled") is cancelled
    assert path.read_text(encoding="utf-8") == rec.jsonl()  # byte for byte write()


def test_an_exception_after_the_end_adds_nothing(tmp_path: Path) -> None:
    """The run ended (its final answer), then the app raised: the end stays the end."""
    path = tmp_path / "ended.jsonl"

    def run() -> None:
        with RunRecorder("ended", path=path) as rec:
            rec.task("go")
            rec.finish("agent", "42")
            raise RuntimeError("after the end")

    with pytest.raises(RuntimeError):
        run()
    lines = _lines(path)
    assert lines[-1]["kind"] == "termination" and "stopped" not in lines[-1]
    assert lines[0]["run"]["sealed"] is True
    assert "did not end" not in _audit(path)[1]
