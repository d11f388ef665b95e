"""QA qa-new13a (a new AG2 user): the model told an outcome is unknown, Ctrl-C at an
approval, a tool name that does not exist, non-finite arguments.

Real AG2 1.x agents driven by its scripted model (``ag2.testing.TestConfig``), recorded
by ``record_agents``; a real subprocess for Ctrl-C.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag2 import Agent
from ag2.events import ToolCallEvent, ToolErrorEvent
from ag2.testing import TestConfig

from icore.integrations import NoEffect, RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace

from .ag2_world import call, run

pytestmark = pytest.mark.timeout(120)


def _budget() -> Any:
    ws = Workspace({"budget/*": "finance"})
    ws.put("budget/T1", {"left": 100.0}, by="finance")
    return ws.agent("clerk")


def _told(results: list[Any], tool: str) -> list[str]:
    """The texts AG2 hands the model for the errors of ``tool``."""
    return ["\n".join(str(getattr(p, "content", p)) for p in e.result.parts)
            for e in results if isinstance(e, ToolErrorEvent) and e.name == tool]


@pytest.mark.parametrize("kind", [TimeoutError, NoEffect])
def test_a_body_that_raised_is_told_to_the_model_as_outcome_unknown(
        kind: type[Exception]) -> None:
    """S3 (raise_body.py): ``pay`` charges the card, then raises TimeoutError. The model
    read only "TimeoutError: bank gateway timed out" and paid again; now it reads that
    the call may have run and to check its effect first (``NoEffect``: its own text)."""
    h = _budget()
    charged: list[float] = []

    async def pay(trip_id: str, amount: float) -> str:
        """Pay."""
        charged.append(amount)
        raise kind("bank gateway timed out")

    safe = fenced_tool(pay, agent=h, depends_on=lambda a: {f"budget/{a['trip_id']}"})

    def get_budget(trip_id: str) -> dict[str, Any]:
        """Read a budget."""
        return dict(h.read(f"budget/{trip_id}"))

    cfg = TestConfig(call("get_budget", trip_id="T1"), call("pay", trip_id="T1", amount=50),
                     "ok", raise_tool_errors=False)
    agent = Agent("clerk", config=cfg, tools=[get_budget, safe])
    rec = RunRecorder("rb")
    record_agents(rec, agent)
    [text] = _told(run(agent), "pay")
    assert charged == [50]
    [out] = [e for e in rec.events if e.get("tool") == "pay" and e["kind"] == "tool_output"]
    if kind is TimeoutError:
        assert text.startswith("pay failed with TimeoutError: bank gateway timed out; it "
                               "may have run")
        assert "its outcome is unknown: check its effect before calling pay again" in text
        assert "Traceback" not in text and text in out["content"]
    else:
        assert "bank gateway timed out" in text and "outcome is unknown" not in text


_CTRL_C_APP = '''
import asyncio, json, sys, time
from ag2 import Agent, tool
from ag2.middleware.builtin.tools.approval import approval_required
from ag2.events import ToolCallEvent
from ag2.testing import TestConfig
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool, record_agents
from icore.workspace import Workspace

RAN = []
def ship(order_id: str) -> str:
    """Ship."""
    RAN.append(order_id)
    return "shipped"
def human(req):
    print("asked", flush=True)
    time.sleep(4)  # a sync hook runs in a thread: the run ends once it returns
    return "yes"
t = tool(ship, middleware=[approval_required()])
ws = Workspace({"order/*": "sales"})
ws.put("order/1", {"c": "B"}, by="sales")
h = ws.agent("s")
h.read("order/1")
if sys.argv[1] == "fence":
    t = fenced_tool(t, agent=h, depends_on={"order/1"})
cfg = TestConfig(ToolCallEvent("ship", arguments=json.dumps({"order_id": "1"})), "done",
                 raise_tool_errors=False)
a = Agent("a", config=cfg, tools=[t], hitl_hook=human)
rec = RunRecorder("r")
record_agents(rec, a)
try:
    asyncio.run(a.ask("go"))
finally:
    rec.write(sys.argv[2])
    print("RAN", RAN, flush=True)
'''


@pytest.mark.parametrize("mode", ["fence", "rec"])
def test_ctrl_c_while_a_human_decides_is_a_cancelled_run_not_a_pause(
        tmp_path: Any, mode: str) -> None:
    """S3 (sigint/plain.py): SIGINT while the human decides an approval was recorded as
    a pause ("paused, waiting for a human", ``human_input: "CancelledError"``), and with
    ``record_agents`` alone as "cancelled while the tool ran" (it never ran). Now: a
    cancelled run naming the call waiting for approval; the audit says it did not end."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from .test_recording_truthful import _audit

    app = tmp_path / "app.py"
    app.write_text(_CTRL_C_APP, encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    import icore

    src = str(Path(icore.__file__).resolve().parents[1])  # the icore under test
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with subprocess.Popen([sys.executable, str(app), mode, str(trace)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "asked"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode != 0 and "RAN []" in out, err
    lines = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines()]
    last = lines[-1]
    assert last["kind"] == "thought" and last.get("cancelled") is True
    assert "pause" not in last and "human_input" not in last
    assert last["content"] == (
        "the run stopped: CancelledError: the run was cancelled (Ctrl-C / task cancelled) "
        "while waiting for a human's approval of ship {\"order_id\": \"1\"}; the call did "
        "not run")
    _code, _text, run_ = _audit(trace)
    assert run_["paused"] is False and run_["summary"]["terminal"] is False
    assert [d["defect"] for d in run_["diagnoses"]] == ["terminal"]


@pytest.mark.parametrize("fenced", [True, False])
def test_a_call_of_a_tool_that_does_not_exist_is_recorded_not_run(fenced: bool) -> None:
    """S4 (unknown_tool.py): AG2 answers a call of an unknown tool name with a
    ``ToolNotFoundEvent`` (no tool middleware runs); the trace showed the model's call
    and nothing after. Now a failed call that did not run, with the arguments given."""
    h = _budget()

    def pay(trip_id: str) -> str:
        """Pay."""
        return "paid"

    tool_ = fenced_tool(pay, agent=h, depends_on={"budget/T1"}) if fenced else pay
    cfg = TestConfig(call("pay_now", trip_id="T1"), "ok", raise_tool_errors=False)
    agent = Agent("clerk", config=cfg, tools=[tool_])
    rec = RunRecorder("u")
    record_agents(rec, agent)
    run(agent)
    [line] = [e for e in rec.events if e["kind"] == "tool_output"]
    assert line["tool"] == "pay_now" and line["args"] == {"trip_id": "T1"}
    assert line["exitcode"] == 1 and line["ran"] is False
    assert line["reason"] == "unknown_tool"
    assert line["content"] == "ERROR: ToolNotFoundError: Tool `pay_now` not found"
    assert [e["kind"] for e in rec.events][-1] == "termination"


@pytest.mark.parametrize("token", ["NaN", "1e999", "-Infinity"])
def test_a_non_finite_argument_is_refused_invalid_arguments_naming_it(token: str) -> None:
    """S4 (bad_args.py nan_amount): ``NaN`` / ``1e999`` was refused ``args_not_json``
    with the record's internal field path, and the trace held ``"amount": "nan"``. Now
    ``invalid_arguments`` naming the argument, and the arguments kept as the model's
    text; the body never runs."""
    h = _budget()
    paid: list[float] = []

    def pay(trip_id: str, amount: float = 0.0) -> str:
        """Pay."""
        paid.append(amount)
        return "paid"

    safe = fenced_tool(pay, agent=h, depends_on=lambda a: {f"budget/{a['trip_id']}"})
    raw = '{"trip_id": "T1", "amount": ' + token + "}"
    cfg = TestConfig(call("get_budget", trip_id="T1"), ToolCallEvent("pay", arguments=raw),
                     "ok", raise_tool_errors=False)

    def get_budget(trip_id: str) -> dict[str, Any]:
        """Read a budget."""
        return dict(h.read(f"budget/{trip_id}"))

    agent = Agent("clerk", config=cfg, tools=[get_budget, safe])
    rec = RunRecorder("nan")
    record_agents(rec, agent)
    [text] = _told(run(agent), "pay")
    assert paid == []
    assert text == ("the arguments of pay do not fit its schema: amount: not a finite "
                    "number. Nothing ran; call pay again with the arguments corrected.")
    [out] = [e for e in rec.events if e.get("tool") == "pay" and e["kind"] == "tool_output"]
    assert out["reason"] == "invalid_arguments" and out["args"] == {"raw": raw}
    assert "nan" not in json.dumps(out["args"]).replace(token, "")


def test_the_shared_argument_check_names_non_finite_numbers() -> None:
    """Every integration normalises through ``ArgNormalizer`` and tells the model with
    ``invalid_args_message``: both name a nested NaN by its path."""
    from pydantic import BaseModel

    from icore.errors import IntegrationError
    from icore.integrations import ArgNormalizer
    from icore.integrations._arg_problems import invalid_args_message
    from icore.integrations._json_args import given_args

    class Line(BaseModel):
        qty: float

    class Order(BaseModel):
        lines: list[Line]
        total: float = 0.0

    args = {"lines": [{"qty": 1.0}, {"qty": float("nan")}], "total": float("inf")}
    with pytest.raises(IntegrationError) as err:
        ArgNormalizer(Order, name="order")(args)
    assert err.value.fields["error"] == ("lines.1.qty: not a finite number; total: not a "
                                         "finite number")
    assert "lines.1.qty: not a finite number; total: not a finite number. Nothing ran" \
        in invalid_args_message("order", Order, args)
    assert given_args('{"total": NaN}') == {"raw": '{"total": NaN}'}
    assert given_args('{"total": 1.5}') == {"total": 1.5}
