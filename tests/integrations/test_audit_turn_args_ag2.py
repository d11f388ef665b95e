"""AG2 runs held against the model turns that asked for their calls (QA qa-new14 S3 for
AG2): the recorded ``tool_calls`` carry AG2's tool-call ids, the fenced tool's gate lines
name them (``call_id``), the tool's normal form of the model's arguments (a number sent
as text, a default) is no difference; an edited argument, in the model's turn or in the
action record, is. A real ``ag2.Agent`` run with AG2's own scripted ``TestConfig``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ag2 import Agent
from ag2.events import ToolCallEvent

from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents

from .ag2_world import orders, run
from .conftest import load_example
from .test_audit_whole_trace import _stripped, _turn, _write
from .test_recording_truthful import _audit


def _call(name: str, cid: str, **args: Any) -> ToolCallEvent:
    return ToolCallEvent(name, arguments=json.dumps(args), id=cid)


def _shipped(tmp_path: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    """A recorded run: a read, then two fenced ships in one response (one with ``"2"``)."""
    _ws, shipper, done = orders()

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return shipper.read(f"order/{order_id}")  # type: ignore[no-any-return]

    def ship(order_id: str, city: str, boxes: int, note: str = "") -> str:
        """Ship an order."""
        done.append((city, boxes, note))
        return f"shipped {boxes}"

    safe = fenced_tool(ship, agent=shipper, depends_on=lambda a: {f"order/{a['order_id']}"})
    agent = Agent("shipper", config=load_example("ag2_app").ScriptedWorld(iter([
        _call("get_order", "c1", order_id="42"),
        [_call("ship", "c2", order_id="42", city="Berlin", boxes="2"),
         _call("ship", "c3", city="Berlin", boxes=1, order_id="42")],
        "done"])), tools=[get_order, safe])
    rec = RunRecorder("ag2-turns")
    record_agents(rec, agent)
    run(agent)
    return [json.loads(x) for x in rec.jsonl().splitlines()], done


def test_an_ag2_run_links_its_calls_and_audits_clean(tmp_path: Path) -> None:
    lines, done = _shipped(tmp_path)
    assert sorted(done) == [("Berlin", 1, ""), ("Berlin", 2, "")]
    _, turn = _turn(lines, "ship")
    calls = {c["id"]: c for c in turn["tool_calls"]}
    assert set(calls) == {"c2", "c3"}
    assert calls["c2"]["args_normal"] == {"order_id": "42", "city": "Berlin", "boxes": 2,
                                          "note": ""}
    assert "args_normal" not in calls["c3"]
    assert {x["call_id"] for x in lines if x.get("call_id") and x.get("task")} == {"c2", "c3"}
    path = _write(tmp_path / "ag2.jsonl", lines)
    code, _o, got = _audit(path, "--fail-on", "invalid")
    assert code == 0 and [lv["status"] for lv in got["lineage"]] == ["valid", "valid"]
    assert not [w for w in got.get("warnings", ()) if "differ" in w or "digest" in w]


def test_an_edited_turn_argument_makes_the_call_invalid(tmp_path: Path) -> None:
    lines, _ = _shipped(tmp_path)
    plain = _stripped(lines)  # a writer without digests: only the turn check reads the edit
    _turn(plain, "ship")[1]["tool_calls"][1]["args"]["boxes"] = 9
    code, _o, got = _audit(_write(tmp_path / "forged.jsonl", plain), "--fail-on", "invalid")
    bad = [lv for lv in got["lineage"] if lv["status"] == "INVALID"]
    assert code == 3 and len(bad) == 1
    assert "arguments of ship call c3 differ from the model's tool call" in bad[0]["reason"]
    assert "boxes 9 vs 1" in bad[0]["reason"]


@pytest.mark.parametrize("field", ["city"])
def test_an_edited_action_record_argument_makes_the_call_invalid(tmp_path: Path,
                                                                 field: str) -> None:
    """The action record says the call shipped to Hamburg; the model asked Berlin."""
    lines, _ = _shipped(tmp_path)
    plain = _stripped(lines)
    acts = [x for x in plain if "ship" == ((x.get("planfence") or {}).get("record") or {})
            .get("content", {}).get("planfence.action", {}).get("name")]
    assert len(acts) == 2
    acts[1]["planfence"]["record"]["content"]["planfence.action"]["args"][field] = "Hamburg"
    code, _o, got = _audit(_write(tmp_path / "forged.jsonl", plain), "--fail-on", "invalid")
    bad = [lv for lv in got["lineage"] if lv["status"] == "INVALID"]
    assert code == 3 and bad
    assert any(f'{field} "Berlin" vs "Hamburg"' in lv["reason"] for lv in bad), bad
