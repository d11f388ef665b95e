"""icore's wrap of the Agents SDK's ``RunContextWrapper.approve_tool`` (#29).

Lazy (importing icore changes nothing in the SDK; the first fenced tool wraps), once per
process whatever loads icore's module again (a reload, a second copy), under or over
another library's wrapper, and removable (``unwitness_approvals``). Approvals given
through the SDK are noted as before (tests/integrations/test_openai_agents_approvals.py).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent
from agents.items import ToolApprovalItem
from agents.run_context import RunContextWrapper

from icore.integrations.openai_agents import _sdk_approvals as sdk


@pytest.fixture(autouse=True)
def _restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a test does to the SDK's class, the next test sees it as it was."""
    monkeypatch.setattr(RunContextWrapper, "approve_tool", RunContextWrapper.approve_tool)


def _wrappers() -> int:
    """How many icore wrappers the SDK's ``approve_tool`` goes through."""
    n, m, seen = 0, RunContextWrapper.approve_tool, 0
    while m is not None and seen < 64:
        n += getattr(m, sdk.WITNESS_MARK, False) is True
        m, seen = getattr(m, "__wrapped__", None), seen + 1
    return n


def _approve(call_id: str, *, always: bool = False) -> Any:
    agent = Agent(name="planner")
    item = ToolApprovalItem(agent=agent, raw_item={"type": "function_call", "call_id":
                                                   call_id, "name": "book",
                                                   "arguments": "{}"})
    RunContextWrapper(context=None).approve_tool(item, always_approve=always)
    return agent


def test_importing_icore_leaves_the_sdk_unchanged() -> None:
    code = ("from agents.run_context import RunContextWrapper as R\n"
            "before = R.__dict__['approve_tool']\n"
            "import icore, icore.integrations, icore.integrations.openai_agents\n"
            "import icore.adapters, icore.workspace\n"
            "assert R.__dict__['approve_tool'] is before, 'wrapped at import'\n"
            "from icore.integrations.openai_agents import fenced_function_tool\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-1500:]


def test_a_reloaded_module_never_wraps_twice() -> None:
    """A second copy of the module (a reload: its module flag starts over) finds the
    wrapper by its mark and leaves it: one wrapper, each approval noted once."""
    sdk.witness_approvals()
    again = importlib.reload(sdk)
    try:
        again.witness_approvals()
        assert _wrappers() == 1
        agent = _approve("c-reload")
        assert again.witnessed(agent, "book", "c-reload")
    finally:
        importlib.reload(sdk)


def test_under_another_librarys_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another library wraps on top (functools.wraps): icore is not wrapped again, is not
    taken off from under it, and approvals still pass both."""
    sdk.witness_approvals()
    inner = RunContextWrapper.approve_tool
    calls: list[str] = []

    def theirs(self: Any, item: Any, *args: Any, **kwargs: Any) -> None:
        calls.append("theirs")
        inner(self, item, *args, **kwargs)

    theirs.__wrapped__ = inner  # type: ignore[attr-defined]
    monkeypatch.setattr(RunContextWrapper, "approve_tool", theirs)
    sdk.witness_approvals()
    assert _wrappers() == 1 and RunContextWrapper.approve_tool is theirs
    assert sdk.unwitness_approvals() is False  # never pulled from under another wrapper
    agent = _approve("c-under")
    assert calls == ["theirs"] and sdk.witnessed(agent, "book", "c-under")


def test_unwitness_restores_the_sdk_method_and_witness_wraps_again() -> None:
    original = RunContextWrapper.__dict__["approve_tool"]
    if getattr(original, sdk.WITNESS_MARK, False):  # an earlier test's fenced tool
        original = original.__wrapped__
    sdk.witness_approvals()
    assert RunContextWrapper.approve_tool.__wrapped__ is original
    assert RunContextWrapper.approve_tool.__name__ == "approve_tool"
    assert sdk.unwitness_approvals() is True
    assert RunContextWrapper.__dict__["approve_tool"] is original
    assert sdk.unwitness_approvals() is False  # idempotent
    agent = _approve("c-off")
    assert not sdk.witnessed(agent, "book", "c-off")  # not noted: fails closed
    sdk.witness_approvals()
    agent = _approve("c-on", always=True)
    assert sdk.witnessed(agent, "book", "c-on") and sdk.witnessed(agent, "book", None)


def test_mcp_error_watch_is_wrapped_once_across_reloads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The other SDK wrap (``MCPUtil.invoke_mcp_tool``, made by ``recording()``) follows
    the same rule: a reloaded module finds it by its mark and does not wrap it again."""
    util = pytest.importorskip("agents.mcp.util")
    from icore.integrations.openai_agents import _mcp_errors as errors
    monkeypatch.setattr(util.MCPUtil, "invoke_mcp_tool",
                        util.MCPUtil.__dict__["invoke_mcp_tool"])
    errors.watch_mcp_errors()
    again = importlib.reload(errors)
    try:
        again.watch_mcp_errors()
        fn, n, seen = util.MCPUtil.__dict__["invoke_mcp_tool"].__func__, 0, 0
        while fn is not None and seen < 64:
            n += getattr(fn, errors.WATCH_MARK, False) is True
            fn, seen = getattr(fn, "__wrapped__", None), seen + 1
        assert n == 1
    finally:
        importlib.reload(errors)
