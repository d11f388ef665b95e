"""QA qa-new17c #6: a persistent checkpointer in a few lines, and a map mistake named.

``RecordCheckpointSaver.sqlite(ws)`` puts the checkpoints in the ``Workspace.sqlite``
folder (a restart resumes the thread from the file); ``OwnershipMap({"lg/*": "graph"})``
(a pattern given as an exact key) is refused with the map to write instead.

Real parts: a LangGraph ReAct graph, real SQLite files, a second saver over the same
file after the first one's store is closed (what a restarted process opens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from icore.errors import IntegrationError
from icore.integrations.langgraph import RecordCheckpointSaver
from icore.memory import OwnershipMap, SQLiteStore
from icore.workspace import Workspace

from .test_langgraph_workspace import ORDER, Shop, _msg, _react

pytestmark = pytest.mark.timeout(120)


def test_a_pattern_given_as_an_exact_key_is_named(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "ckpt.db", OwnershipMap({"lg/*": "graph"}), "graph")
    with pytest.raises(IntegrationError) as got:
        RecordCheckpointSaver(store)
    assert "'lg/*' is a pattern given as an exact key: OwnershipMap({}, {'lg/*': 'graph'})" \
        in str(got.value)
    store.close()


def test_checkpoints_in_the_workspace_folder_survive_a_restart(tmp_path: Path) -> None:
    """The thread's state is read back by a new saver over the same folder's file."""
    folder = tmp_path / "data"
    shop = Shop()
    ws = Workspace.sqlite({"order/*": "sales"}, folder)
    ws.put(ORDER, {"city": "Berlin"})
    saver = RecordCheckpointSaver.sqlite(ws)
    assert Path(saver.store.path) == folder / "icore-checkpoints.sqlite"  # type: ignore[attr-defined]
    n = [0]
    app = _react([shop.get_order], iter([_msg(("get_order", {"order_id": 42}), n=n),
                                         AIMessage("read it")]), saver)
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    app.invoke({"messages": [HumanMessage("read order 42")]}, cfg)
    saver.store.close()  # the process stops
    again = RecordCheckpointSaver.sqlite(ws)  # a new process, the same folder
    state = _react([shop.get_order], iter(()), again).get_state(cfg)
    assert [m.content for m in state.values["messages"]][-1] == "read it"
    assert len(state.values["messages"]) == 4
    again.store.close()
    ws.close()


def test_a_workspace_in_memory_is_refused() -> None:
    with pytest.raises(IntegrationError, match=r"Workspace\.sqlite"):
        RecordCheckpointSaver.sqlite(Workspace({"order/*": "sales"}))
