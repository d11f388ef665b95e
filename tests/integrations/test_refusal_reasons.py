"""One refusal vocabulary (#29): every reason code in one table, one name per reason.

Schema-refused arguments were ``args_invalid`` (LangGraph, the Agents SDK) and
``invalid_arguments`` (AG2, CrewAI, the MCP gateway, README and docs); a NaN argument was
``args_not_json`` (agent mode, the gateway) or ``args_mismatch`` (fence mode). Now one
name, ``invalid_arguments``, naming the argument; old traces read the old name as it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from icore.fence import (
    INVALID_ARGUMENTS,
    NOT_FINITE,
    REASON_ALIASES,
    REFUSAL_REASONS,
    Reason,
    canonical_reason,
)
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import (
    APPROVAL_CHANGED,
    ARGS_NOT_JSON,
    ARGS_TOO_LARGE,
    NOT_READ,
    REJECTED,
    Workspace,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "icore"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_reason_code_is_in_the_table() -> None:
    """The gate's reasons, the workspace's, the integrations' and the gateway's hints."""
    from icore.integrations._rerun import RETRY_UNKNOWN
    from icore.integrations.openai_agents._sdk_answers import STORE_FAILED
    from icore.mcp._gateway_refusal import HINT
    from icore.workspace import ALREADY_RAN, CALL_RUNNING, EARLIER_UNKNOWN
    from icore.workspace._call import _HINTS

    codes = {r.value for r in Reason} | {NOT_READ, REJECTED, APPROVAL_CHANGED, ARGS_NOT_JSON,
                                         ARGS_TOO_LARGE, INVALID_ARGUMENTS, RETRY_UNKNOWN,
                                         "unknown_tool", CALL_RUNNING, ALREADY_RAN,
                                         EARLIER_UNKNOWN, STORE_FAILED} | set(HINT) | set(_HINTS)
    assert codes <= set(REFUSAL_REASONS), codes - set(REFUSAL_REASONS)
    assert not set(REASON_ALIASES) & set(REFUSAL_REASONS)  # an old name is no reason
    assert canonical_reason("args_invalid") == INVALID_ARGUMENTS
    assert canonical_reason("stale") == "stale" and canonical_reason(None) is None


def test_the_old_name_is_written_nowhere_and_the_docs_list_every_code() -> None:
    """``args_invalid`` is left only in the alias table; docs/architecture.md has the
    table with every code."""
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "_reason_table.py":
            assert '"args_invalid"' not in text, path
    doc = (DOCS / "architecture.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", doc, flags=re.M))
    assert set(REFUSAL_REASONS) <= rows, set(REFUSAL_REASONS) - rows


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_fence_mode_refuses_a_non_finite_argument_invalid_arguments(trip: Any,
                                                                  bad: float) -> None:
    """Fence mode (``fence=``): blocked ``args_mismatch`` with the record's field path
    before; now ``invalid_arguments`` naming the argument, before the gate, recorded as
    a refused call with the arguments as given."""
    rec = RunRecorder("nan")
    guard = FenceGuard(fence=trip.fence, depends_on={"req/trip-17"})
    gated = guard.run("book", trip.book, {"destination": bad}, [trip.first_plan.id],
                      recorder=rec)
    assert not gated.executed and trip.booked == []
    assert gated.reason == INVALID_ARGUMENTS
    assert f"destination: {NOT_FINITE}" in gated.message
    assert gated.message.startswith("PlanFence blocked book (invalid_arguments)")
    [out] = [e for e in rec.events if e["kind"] == "tool_output"]
    assert out["reason"] == INVALID_ARGUMENTS and "raw" in out["args"]
    [d] = [x["planfence"]["decision"] for x in rec.planfence if "decision" in x["planfence"]]
    assert (d["outcome"], d["reason"], d["detail"]) == (
        "blocked", INVALID_ARGUMENTS, f"destination: {NOT_FINITE}")
    ok = guard.run("book", trip.book, {"destination": "Lisbon"}, [trip.first_plan.id])
    assert ok.executed  # a finite call still runs


def test_agent_mode_refuses_a_non_finite_argument_invalid_arguments() -> None:
    """Agent mode (and the MCP gateway, which runs through it): ``args_not_json`` before;
    now ``invalid_arguments``, naming the argument path. A Python object with no JSON
    form (the application's binding) stays ``args_not_json``."""
    import datetime

    ws = Workspace({"budget/*": "finance"})
    ws.put("budget/T1", {"eur": 500}, by="finance")
    clerk = ws.agent("clerk")
    clerk.read("budget/T1")
    paid: list[Any] = []
    call = clerk.execute("pay", lambda **a: paid.append(a), {"eur": float("nan")},
                         depends_on={"budget/T1"})
    assert (call.executed, call.reason) == (False, INVALID_ARGUMENTS)
    assert call.detail == f"eur: {NOT_FINITE}" and paid == []
    assert "invalid_arguments" in call.message and "eur: not a finite" in call.message
    other = clerk.execute("pay", lambda **a: paid.append(a),
                          {"on": datetime.date(2026, 12, 7)}, depends_on={"budget/T1"})
    assert other.reason == ARGS_NOT_JSON and paid == []
