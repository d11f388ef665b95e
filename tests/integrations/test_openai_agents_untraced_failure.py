"""A fenced Agents SDK tool that raises after authorization, with tracing off (issue 28).

With tracing disabled (``RunConfig(tracing_disabled=True)`` or ``set_tracing_disabled``)
the SDK attaches no error to a span, so the fenced tool must tell the failure itself:
the recording and the audit say "outcome unknown" (the body started: it may have had
its effect before it raised, QA qa-new12b S2; ``NoEffect``: "failed after
authorization"), never success, and the
model still reads what the SDK's failure policy gives it. Real SDK ``Runner`` with the
examples' scripted model (no network).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import assistant_message, function_call

from icore.adapters import FAILED_AFTER_AUTHORIZATION, OUTCOME_UNKNOWN
from icore.integrations import NoEffect, RunRecorder
from icore.integrations.openai_agents import fenced_function_tool

from .conftest import load_example
from .test_recording_h28 import _dep, _desk
from .test_recording_truthful import _audit


@pytest.fixture(params=["run_config", "global"])
def untraced(request: pytest.FixtureRequest) -> Iterator[RunConfig]:
    """A run config for a run the SDK does not trace (per run, or process-wide)."""
    if request.param == "run_config":
        yield RunConfig(tracing_disabled=True)
        return
    set_tracing_disabled(True)
    try:
        yield RunConfig()
    finally:
        set_tracing_disabled(False)


def _run(tool: Any, get_fare: Any, config: RunConfig) -> Any:
    agent = Agent(name="booker", tools=[get_fare, tool],
                  model=load_example("openai_agents_app").ScriptModel(iter([
                      [function_call("get_fare", {"flight": "LH100"}, call_id="c1")],
                      [function_call(tool.name, {"flight": "LH100"}, call_id="c2")],
                      [assistant_message("could not book")]])))
    return asyncio.run(Runner.run(agent, "book LH100", run_config=config))


def _fenced_run(fn: Any, config: RunConfig, rec: RunRecorder) -> Any:
    """``fn`` fenced on a fresh desk (recorded into ``rec``), run by the scripted model."""
    _ws, desk, get_fare = _desk()
    return _run(fenced_function_tool(fn, agent=desk, depends_on=_dep, recorder=rec),
                get_fare, config)


def _ran(rec: RunRecorder, tool: str) -> list[dict[str, Any]]:
    """The recorded outputs of ``tool``'s calls."""
    return [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == tool]


def _outputs(res: Any) -> list[str]:
    return [str(i.output) for i in res.new_items if i.type == "tool_call_output_item"]


@pytest.mark.parametrize("kind", [RuntimeError, NoEffect])
def test_untraced_failure_is_recorded_and_audited_as_failed(tmp_path: Path,
                                                            untraced: RunConfig,
                                                            kind: type[Exception]) -> None:
    """The gate authorized ``book``, which raised: the model reads that the call may
    have run, to check its effect first (QA qa-new13a S3; ``NoEffect``: the SDK's text,
    as unfenced), the recording says ``exitcode 1`` with the exception, the audit counts it outcome
    unknown (``NoEffect``: failed after authorization)."""
    def book(flight: str) -> str:
        """Explodes after authorization."""
        raise kind("carrier down")

    rec = RunRecorder("untraced")
    res = _fenced_run(book, untraced, rec)
    told = _outputs(res)[1]
    if kind is NoEffect:
        assert "An error occurred while running the tool" in told  # as unfenced
    else:
        assert told == ("book failed with RuntimeError: carrier down; it may have run (it "
                        "started before it failed), so its outcome is unknown: check its "
                        "effect before calling book again, or report the unknown outcome")
    ran = _ran(rec, "book")
    assert len(ran) == 1 and ran[0]["exitcode"] == 1 and ran[0]["failed"] is True
    assert ran[0]["error_text"] == f"{kind.__name__}: carrier down"
    _code, out, run = _audit(rec.write(tmp_path / "untraced.jsonl"))
    counted = FAILED_AFTER_AUTHORIZATION if kind is NoEffect else OUTCOME_UNKNOWN
    assert f"1 (1 {counted})" in out
    (lv,) = run["lineage"]
    assert lv["status"] == "valid" and lv["error"] == f"{kind.__name__}: carrier down"
    assert run["actions"][counted] == 1 and run["actions"]["valid"] == 0


def test_untraced_custom_failure_function_is_kept(untraced: RunConfig) -> None:
    """A tool's own ``failure_error_function`` still writes the model's text, followed
    by the unknown outcome (QA qa-new13a S3); the call is recorded failed. A tool that
    succeeds is recorded as it ran."""
    @function_tool(failure_error_function=lambda ctx, e: f"sorry: {e}")
    async def book(flight: str) -> str:
        """Explodes after authorization (async)."""
        raise ValueError(f"no seat on {flight}")

    rec = RunRecorder("custom")
    res = _fenced_run(book, untraced, rec)
    assert _outputs(res)[1] == ("sorry: no seat on LH100\nbook failed with ValueError: no "
                                "seat on LH100; it may have run (it started before it "
                                "failed), so its outcome is unknown: check its effect "
                                "before calling book again, or report the unknown outcome")
    ran = _ran(rec, "book")
    assert [e["exitcode"] for e in ran] == [1]
    assert ran[0]["error_text"] == "ValueError: no seat on LH100"

    def fine(flight: str) -> str:
        """Books."""
        return f"booked {flight}"

    rec2 = RunRecorder("fine")
    res = _fenced_run(fine, untraced, rec2)
    assert _outputs(res)[1] == "booked LH100"
    ran = _ran(rec2, "fine")
    assert [e["exitcode"] for e in ran] == [0]


def test_untraced_failure_without_a_failure_function_raises(untraced: RunConfig) -> None:
    """``failure_error_function=None``: the SDK lets the exception out of the run, as
    unfenced; the call is recorded failed before it leaves."""
    @function_tool(failure_error_function=None)
    def book(flight: str) -> str:
        """Explodes after authorization."""
        raise RuntimeError("carrier down")

    rec = RunRecorder("raised")
    with pytest.raises(Exception, match="carrier down"):
        _fenced_run(book, untraced, rec)
    ran = _ran(rec, "book")
    assert [e["exitcode"] for e in ran] == [1]
