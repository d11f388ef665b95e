"""A rival ``Command(resume=...)`` still inside the resumed step (#28, known limit).

R2 and R3 resume one paused thread at once. R2 reads order 42 in the resumed step and
stays in it; R3 passes that step without using the thread and its model ships order
42 a step later. Whether R2's read lies on R3's line depends on who wrote the next
checkpoint after the paused one on R3's line: R2 (a later turn after R2 ended: the read
counts) or R3 (a rival: it must not). A LangGraph checkpoint records nothing of the
invocation that wrote it (metadata ``source``, ``step``, ``parents`` and the keys of the
caller's config; task ids are the same for both resumes), and icore's code runs in R3
only where a node uses the workspace: no hook runs when R3's step starts. So, by
default, R2's read backs R3's call (pinned below as the known limit). An application
(or LangGraph Server, which does it for every run) that passes a per-invocation
``metadata={"run_id": ...}`` closes it: LangGraph copies it into each checkpoint it
saves, and icore then counts another invocation's read only when the next checkpoint on
the call's line was saved by that invocation. Real LangGraph, ``InMemorySaver`` and
icore's ``RecordCheckpointSaver`` on SQLite, threads, a scripted chat model.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from .test_langgraph_branches import _CONF, _call, _race, _savers, _Shop
from .test_langgraph_workspace import _react

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_known_limit_a_rival_still_in_the_step_backs_the_call(saver: str,
                                                              tmp_path: Path) -> None:
    """Without a per-invocation stamp: R2's read backs R3's call (R3's first call ships).

    This pins the known limit (docs/integrations-langgraph.md, Known limit): if it
    starts failing because icore learned to see it, make the stamped case the default.
    """
    shop = _Shop()
    said = _race(shop, None, _savers(tmp_path)[saver]())
    assert said[0].startswith("shipped"), said  # R3's model never read order 42
    assert len(shop.shipped) == 2  # and its second call ships again


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_with_a_run_id_per_invocation_the_rivals_read_does_not_count(
        saver: str, tmp_path: Path) -> None:
    """``metadata={"run_id": ...}`` per invocation: R3's first call is refused not_read
    (the value handed to R3's model), its next call runs on that hand-over."""
    shop = _Shop()
    said = _race(shop, None, _savers(tmp_path)[saver](),
                 lambda: {"metadata": {"run_id": str(uuid.uuid4())}})
    assert said[0].startswith("PlanFence blocked ship (not_read)"), said
    assert said[1].startswith("shipped") and len(shop.shipped) == 1


def test_with_run_ids_a_later_turn_still_counts_an_earlier_turns_read() -> None:
    """The stamp does not cost sequential turns: turn 1 reads, turn 2 ships unread."""
    shop = _Shop()
    turns = iter([_call("get_order", {"order_id": 42}, "t1"), AIMessage("read it"),
                  _call("ship", {"order_id": 42, "city": "Berlin"}, "t2"),
                  AIMessage("shipped")])

    app = _react(shop.tools, turns, InMemorySaver())
    for text in ("read order 42", "ship it"):
        out = app.invoke({"messages": [HumanMessage(text)]},
                         {**_CONF, "metadata": {"run_id": str(uuid.uuid4())}})
    assert out["messages"][-1].content == "shipped"
    assert len(shop.shipped) == 1
