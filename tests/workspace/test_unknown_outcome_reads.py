"""Reads spent by a call whose outcome is unknown (QA qa-new14 S2), at the workspace.

A fenced call whose started body raised (not ``NoEffect``) may have acted: the reads it
was authorized from back no further call depending on those keys (any tool: the world
those facts describe is unknown now) until the agent reads them again, in the same run
scope only. Driven through :class:`~icore.integrations.FenceGuard` (the seam every
integration's fenced tool uses), real in-memory workspace.
"""

from __future__ import annotations

from typing import Any

import pytest

from icore.integrations import FenceGuard, NoEffect
from icore.workspace import NOT_READ, Workspace, check_first

pytestmark = pytest.mark.timeout(60)


def _setup() -> tuple[Any, Any, list[str]]:
    ws = Workspace({"stock/*": "inventory", "dock/*": "yard"})
    ws.put("stock/bolt", {"qty": 100})
    ws.put("dock/1", {"free": 2})
    return ws, ws.agent("clerk"), []


def _guard(agent: Any, key: str) -> FenceGuard:
    return FenceGuard(agent=agent, depends_on={key})


def _timing_out(done: list[str], kind: type[Exception] = TimeoutError) -> Any:
    def dispatch(qty: int) -> str:
        done.append(f"dispatch {qty}")
        raise kind("carrier API timed out")
    return dispatch


def _ok(done: list[str], name: str) -> Any:
    def tool(qty: int) -> str:
        done.append(f"{name} {qty}")
        return "ok"
    return tool


def test_any_call_on_the_spent_keys_is_refused_until_read_again() -> None:
    _ws, clerk, done = _setup()
    clerk.read("stock/bolt")
    clerk.read("dock/1")
    g = _guard(clerk, "stock/bolt")
    with pytest.raises(TimeoutError):
        g.run("dispatch", _timing_out(done), {"qty": 5}, turn=1)
    again = g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=2)
    other = g.run("transfer", _ok(done, "transfer"), {"qty": 1}, turn=2)
    assert not again.executed and not other.executed and done == ["dispatch 5"]
    assert again.call is not None and again.call.reason == NOT_READ
    assert again.call.spent == ("stock/bolt",) and not again.call.fresh
    assert "dispatch failed with TimeoutError: carrier API timed out" in again.message
    assert check_first("dispatch") in other.message and "read stock/bolt again" in other.message
    dock = _guard(clerk, "dock/1").run("book", _ok(done, "book"), {"qty": 1}, turn=2)
    assert dock.executed  # another fact's read is untouched
    clerk.read("stock/bolt")  # the check: a new read backs the next message's calls
    assert g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=3).executed
    assert done == ["dispatch 5", "book 1", "dispatch 5"]


def test_no_effect_spends_nothing() -> None:
    _ws, clerk, done = _setup()
    clerk.read("stock/bolt")
    g = _guard(clerk, "stock/bolt")
    with pytest.raises(NoEffect):
        g.run("dispatch", _timing_out(done, NoEffect), {"qty": 5}, turn=1)
    assert g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=2).executed


def test_a_read_in_another_run_scope_neither_spends_nor_restores() -> None:
    _ws, clerk, done = _setup()
    g = _guard(clerk, "stock/bolt")
    with clerk.scope("a"):
        clerk.read("stock/bolt")
    with clerk.scope("b"):
        clerk.read("stock/bolt")
        with pytest.raises(TimeoutError):
            g.run("dispatch", _timing_out(done), {"qty": 5}, turn=1)
    with clerk.scope("a"):  # conversation a's read is its own: it still backs a call
        assert g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=2).executed
        clerk.read("stock/bolt")
    with clerk.scope("b"):  # a's new read does not check b's unknown outcome
        assert not g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=2).executed


def test_forget_with_why_spends_the_reads_in_every_scope() -> None:
    """``Agent.forget(keys, why=(tool, error))``: a call still running whose client left
    it (the MCP gateway, QA qa-new18b S1) spends the reads before it ends; the refusal
    quotes it; a new read backs calls again; other keys are untouched."""
    _ws, clerk, done = _setup()
    clerk.read("stock/bolt")
    clerk.read("dock/1")
    clerk.forget(["stock/bolt"], why=("dispatch", "no result yet (it may still be running)"))
    g = _guard(clerk, "stock/bolt")
    again = g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=1)
    assert not again.executed and again.call is not None and again.call.reason == NOT_READ
    assert again.call.spent == ("stock/bolt",)
    assert "dispatch failed with no result yet (it may still be running)" in again.message
    assert _guard(clerk, "dock/1").run("book", _ok(done, "book"), {"qty": 1}, turn=1).executed
    clerk.read("stock/bolt")
    assert g.run("dispatch", _ok(done, "dispatch"), {"qty": 5}, turn=2).executed
    assert done == ["book 1", "dispatch 5"]
