"""QA qa-new14 S2 (a LangGraph user): a call repeated after its outcome was left unknown.

A fenced tool's body made its effect, then raised ``TimeoutError``; LangGraph's re-run of
the step was refused ``earlier_outcome_unknown``, but the model's next message repeated
the call (a new ``tool_call_id``, the same arguments) and it was authorized from the
same read: the effect ran twice. Now the read that call consumed no longer backs a call
depending on its keys: the repeat is refused ``not_read`` with the unknown-outcome text
(nothing handed over), and a call made after the agent reads again may run. A
``NoEffect`` failure spends nothing (nothing ran: the read backs its retry).

Real LangGraph graphs (a scripted chat model), recorded by ``RecordingHandler`` and
audited by the ``icore audit`` CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from icore.integrations import NoEffect, RunRecorder
from icore.integrations._rerun import check_first
from icore.integrations.langgraph import RecordingHandler
from icore.workspace import NOT_READ

from .test_langgraph_qa_new12b import _crashing_ship
from .test_langgraph_workspace import Shop, _msg, _react, _tool_msgs
from .test_recording_truthful import _audit

pytestmark = pytest.mark.timeout(120)

SHIP = ("ship", {"order_id": 42, "city": "Berlin"})


def _run(tmp_path: Path, kind: type[Exception], *turns: Any) -> tuple[Shop, Any, Any]:
    """The QA's run: read, ship (ships, then raises), the user retries the step, then ``turns``.

    Each of ``turns`` is a model message: its tool calls (new ids), or a final message.
    """
    shop = Shop()
    n = [0]
    app = _react([shop.get_order, _crashing_ship(shop, kind)], iter([
        _msg(("get_order", {"order_id": 42}), n=n), _msg(SHIP, n=n),
        *(t if isinstance(t, AIMessage) else _msg(*t, n=n) for t in turns)]),
        InMemorySaver())
    rec = RunRecorder("qa14")
    cfg = {"configurable": {"thread_id": "t1"}, "callbacks": [RecordingHandler(rec)]}
    if issubclass(kind, NoEffect):  # the model reads it, the graph goes on (lead67)
        out = app.invoke({"messages": [HumanMessage("ship order 42")]}, cfg)
        return shop, out, rec.write(tmp_path / "qa14.jsonl")
    with pytest.raises(kind, match="connection reset after commit"):
        app.invoke({"messages": [HumanMessage("ship order 42")]}, cfg)
    out = app.invoke(None, cfg)  # the user's habit: retry the step (refused, as before)
    return shop, out, rec.write(tmp_path / "qa14.jsonl")


def _again(*calls: tuple[str, dict[str, Any]]) -> tuple[tuple[str, dict[str, Any]], ...]:
    return calls


def test_the_models_repeat_after_an_unknown_outcome_is_refused_until_it_reads_again(
        tmp_path: Path) -> None:
    """The QA's case: the step's re-run is refused ``earlier_outcome_unknown``, the next
    message's repeat ``not_read`` with the unknown-outcome text: one effect; the audit
    counts 1 outcome unknown and links nothing as a reissue."""
    shop, out, path = _run(tmp_path, TimeoutError, _again(SHIP), AIMessage("reported"))
    assert shop.shipped == ["Berlin"]  # the effect once (twice before the fix)
    rerun, repeat = (str(m.content) for m in _tool_msgs(out)[-2:])
    assert "earlier_outcome_unknown" in rerun
    assert repeat.startswith(f"PlanFence blocked ship ({NOT_READ}): ship failed with "
                             "TimeoutError: connection reset after commit; it may have run")
    assert check_first("ship") in repeat and "read order/42 again" in repeat
    assert "Current values" not in repeat  # nothing handed over: the agent must read
    got, text, run = _audit(path, "--fail-on", "unknown")
    assert got == 3 and "(1 outcome unknown, 1 blocked)" in text
    assert "reissued" not in text and not any("reissue_of" in a for a in run["lineage"])
    [refused] = [a for a in run["lineage"] if a["status"] == "blocked"]
    assert "its outcome is unknown" in refused["reason"]


def test_after_reading_again_the_call_may_run(tmp_path: Path) -> None:
    """The model checks (reads the order again) and calls again: the new read backs it."""
    shop, out, path = _run(tmp_path, TimeoutError, _again(SHIP),
                           _again(("get_order", {"order_id": 42})), _again(SHIP),
                           AIMessage("done"))
    assert shop.shipped == ["Berlin", "Berlin"]  # the checked call ran
    assert str(_tool_msgs(out)[-1].content) == "shipped order 42 to Berlin"
    # the audit sees versions, not reads: the same version, so it may have run twice
    _, text, run = _audit(path)
    assert "1 reissued after an unknown outcome" in text
    assert [a["reissue_of"] for a in run["lineage"] if "reissue_of" in a] == ["ship-1"]


def test_a_read_in_the_same_message_as_the_repeat_does_not_back_it(tmp_path: Path) -> None:
    """A read made by a sibling tool of the repeat's own message came after the model's
    decision: it does not back that call (refused ``not_read``; it backs the next
    message's, the model having read the value)."""
    shop, out, _ = _run(tmp_path, TimeoutError,
                        _again(("get_order", {"order_id": 42}), SHIP), AIMessage("stop"))
    assert shop.shipped == ["Berlin"]
    assert str(_tool_msgs(out)[-1].content).startswith(f"PlanFence blocked ship ({NOT_READ})")


def test_a_no_effect_failure_keeps_its_read_backing_a_retry(tmp_path: Path) -> None:
    """``NoEffect``: nothing ran, so the read still backs the model's retry (as before)."""
    shop, out, path = _run(tmp_path, NoEffect, _again(SHIP), AIMessage("done"))
    assert shop.shipped == ["Berlin", "Berlin"]
    assert str(_tool_msgs(out)[-1].content) == "shipped order 42 to Berlin"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert not any(d.get("reason") == NOT_READ for d in lines)
