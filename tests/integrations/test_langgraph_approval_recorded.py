"""LangGraph ``approval=True``: the human's yes / no is recorded as approved / rejected
(QA qa-fw7 S3, #28), as the Agents SDK recording says it; it was "a human answered the
question asked", ``decision: "answered"``. Real LangGraph, a scripted model."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_langgraph_workspace import Shop, _msg, _react


@pytest.mark.parametrize(("answer", "said", "shipped"), [
    ("yes", "approve", ["Berlin"]), (True, "approve", ["Berlin"]),
    ("approve-by-id", "approve", ["Berlin"]), ("no", "reject", []),
    (False, "reject", [])])
def test_an_approval_is_recorded_approved_or_rejected(answer: Any, said: str,
                                                       shipped: list[str]) -> None:
    shop = Shop()
    n = [0]
    script = iter([_msg(("get_order", {"order_id": 42}), n=n),
                   _msg(("ship", {"order_id": 42, "city": "Berlin"}), n=n), AIMessage("done")])
    app = _react([shop.get_order, shop.safe_ship(approval=True)], script, InMemorySaver())
    rec = RunRecorder("approval")
    cfg: Any = {"configurable": {"thread_id": "t1"}, "callbacks": [RecordingHandler(rec)]}
    out = app.invoke({"messages": [HumanMessage("ship")]}, cfg)
    asked = out["__interrupt__"][0].value["planfence.approval"]
    if answer == "approve-by-id":
        answer = {"planfence.approval": asked["id"], "approved": True}
    app.invoke(Command(resume=answer), cfg)
    assert shop.shipped == shipped
    [line] = [e for e in rec.events
              if e.get("answered_by") == "human" and e["kind"] == "thought"]
    assert line["decision"] == said and line["tool"] == "ship"
    assert line["args"] == {"order_id": 42, "city": "Berlin"}
    verb = "approved" if said == "approve" else "rejected"
    assert line["content"].startswith(f"a human {verb} ship(")
