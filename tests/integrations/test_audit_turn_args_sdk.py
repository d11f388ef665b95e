"""OpenAI Agents SDK runs held against the model turns that asked for their calls (QA
qa-new14 S3): the recorded ``tool_calls`` carry the SDK's call ids, the fenced tool's
lines name them, and the schema's normal form of the model's arguments (a number sent as
text, a date-time for a date, a default, arguments reordered, two calls in one
response) is no difference; an edited argument is. A real ``Runner.run`` with the SDK's
scripted model."""

from __future__ import annotations

import asyncio
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="icore[openai-agents]")

from agents import Agent, Runner
from agents.testing import assistant_message, function_call

from icore.integrations import RunRecorder
from icore.integrations.openai_agents import fenced_function_tool, recording

from .conftest import load_example
from .test_audit_whole_trace import _stripped, _turn, _write
from .test_recording_h28 import _dep, _desk
from .test_recording_truthful import _audit


def _booked() -> tuple[RunRecorder, list[Any]]:
    _ws, desk, get_fare = _desk()
    done: list[Any] = []

    def book(flight: str, seats: int, day: date, note: str = "") -> str:
        """Book ``seats`` on ``flight`` on ``day``."""
        done.append((seats, day, note))
        return f"booked {seats}"

    agent = Agent(name="booker", tools=[get_fare, fenced_function_tool(
        book, agent=desk, depends_on=_dep)],
        model=load_example("openai_agents_app").ScriptModel(iter([
            [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
            [function_call("book", {"day": "2026-03-01T00:00:00", "seats": "2",
                                    "flight": "LH100"}, call_id="c2"),
             function_call("book", {"flight": "LH100", "seats": 1, "day": "2026-03-02"},
                           call_id="c3")],
            [assistant_message("booked")]])))
    rec = RunRecorder("sdk-turns")
    with recording(rec, exclusive=True):
        asyncio.run(Runner.run(agent, "book LH100"))
    return rec, done


def test_an_sdk_run_links_its_calls_and_its_normal_form_is_no_difference(
        tmp_path: Path) -> None:
    rec, done = _booked()
    assert sorted(done) == [(1, date(2026, 3, 2), ""), (2, date(2026, 3, 1), "")]
    lines = [json.loads(x) for x in rec.jsonl().splitlines()]
    _, turn = _turn(lines, "book")
    calls = {c["id"]: c for c in turn["tool_calls"]}
    assert set(calls) == {"c2", "c3"}
    assert calls["c2"]["args_normal"] == {"flight": "LH100", "seats": 2,
                                          "day": "2026-03-01", "note": ""}
    assert "args_normal" not in calls["c3"]
    assert {x["call_id"] for x in lines if x.get("call_id") and x.get("task")} == {"c2", "c3"}
    code, _o, run = _audit(rec.write(tmp_path / "sdk.jsonl"), "--fail-on", "invalid")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["valid", "valid"]
    assert not [w for w in run.get("warnings", ()) if "differ" in w or "digest" in w]
    plain = _stripped(lines)  # a writer without digests: the turn check reads the edit
    _turn(plain, "book")[1]["tool_calls"][1]["args"]["seats"] = 9
    code, _o, run = _audit(_write(tmp_path / "forged.jsonl", plain), "--fail-on", "invalid")
    bad = [lv for lv in run["lineage"] if lv["status"] == "INVALID"]
    assert code == 3 and len(bad) == 1
    assert "arguments of book call c3 differ from the model's tool call" in bad[0]["reason"]
    assert "seats 9 vs 1" in bad[0]["reason"]
