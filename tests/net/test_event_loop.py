"""The event loop the owner service and the benchmarks run on (issue 27)."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from icore._extras import EVENT_LOOP_ENV, event_loop_factory, run_async


def test_standard_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ICORE_EVENT_LOOP=asyncio`` selects the standard library's loop."""
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert event_loop_factory() is None

    async def loop_type() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run_async(loop_type()).startswith("asyncio")


def test_unknown_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt choice is an error naming the variable, never a silent fallback."""
    monkeypatch.setenv(EVENT_LOOP_ENV, "uv-loop")
    with pytest.raises(ValueError, match=EVENT_LOOP_ENV):
        event_loop_factory()


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop not installed")
def test_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """With uvloop installed the default loop is uvloop's, and coroutines run on it."""
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)

    async def loop_type() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert run_async(loop_type()).startswith("uvloop")
