"""The CrewAI drop-in: a real Crew with a scripted ``BaseLLM`` (no network).

CrewAI pins ``openai<3`` while the OpenAI Agents SDK needs ``openai>=3``, so these tests
run in the second venv that ``make test-crewai`` (part of ``make test``) installs with
``icore[crewai-dev]``; in the main venv they are skipped.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    # skip before touching the environment: OTEL_SDK_DISABLED would switch off the
    # OpenTelemetry SDK for every later test in this process (tests/adapters/test_otel.py)
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
crewai_tools = pytest.importorskip("crewai.tools", reason="icore[crewai] runs in .venv-crewai")

from crewai.tools.tool_failure import ToolFailure  # noqa: E402

from icore.adapters import load_jsonl  # noqa: E402
from icore.errors import ActionBlocked  # noqa: E402
from icore.integrations.crewai import FencedCrewTool, fenced_crewai_tool  # noqa: E402

from .conftest import audit_cli, load_example  # noqa: E402

REQ = "req/trip-17"


def _book(trip: Any) -> Any:
    @crewai_tools.tool("book")
    def book(destination: str) -> str:
        """Book a hotel in the destination city."""
        return str(trip.book(destination))

    return book


def test_schema_kept_and_context_updated(trip: Any) -> None:
    """Name, description and args schema are the original's; a replan updates the context."""
    book = _book(trip)
    ctx: dict[str, Any] = {"plan_roots": [trip.first_plan.id]}
    w = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                           replan=trip.replan)
    assert isinstance(w, FencedCrewTool)
    assert (w.name, w.description) == (book.name, book.description)
    assert w.args_schema.model_json_schema() == book.args_schema.model_json_schema()
    trip.revise("Porto")
    assert w.run(destination="Lisbon") == "booked Porto"
    assert ctx["plan_roots"] != [trip.first_plan.id]
    assert asyncio.run(w.arun(destination="Porto")) == "booked Porto"


def test_block_is_a_tool_failure_or_raises(trip: Any) -> None:
    """Blocked: CrewAI's ToolFailure (the tool's error result); ``raise`` raises."""
    book = _book(trip)
    trip.revise("Porto")
    ctx = {"plan_roots": [trip.first_plan.id]}
    w = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx)
    out = w.run(destination="Lisbon")
    assert isinstance(out, ToolFailure) and out.code == "stale" and trip.booked == []
    strict = fenced_crewai_tool(book, fence=trip.fence, depends_on={REQ}, context=ctx,
                                on_block="raise")
    with pytest.raises(ActionBlocked):
        strict.run(destination="Lisbon")


def test_example_crew_runs_and_audits(tmp_path: Path) -> None:
    """examples/crewai_app.py: replan then block; the event-bus recording audits."""
    out = load_example("crewai_app").main(str(tmp_path / "run.jsonl"))
    assert out["booked"] == ["Porto"] and "second_change" in out["blocked_reason"]
    assert out["plan_in_context"] and out["final"].startswith("Booked Porto")
    assert out["events"][0] == "task" and out["events"][-1] == "termination"
    assert len(load_jsonl(tmp_path / "run.jsonl").steps) == out["audited_steps"]
    assert "crewai-trip" in audit_cli(tmp_path / "run.jsonl", tmp_path / "rep")
